import Foundation
import PlaitCore
import PlaitDiscovery
import PlaitPairing
import PlaitSync
import Testing

/// The pairing and discovery vectors of PROTOCOL.md §16 and §4: the commitment and code from two certificates
/// and two nonces, and the daily discovery tag and `sum` of a device.
@Suite("Conformance vectors: pairing and discovery")
struct SyncConformanceTests {
    static func vectors() throws -> [String: Any] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Vectors/conformance.json")
        return try #require(JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
    }

    @Test func pairingCommitmentAndCode() throws {
        let vectors = try Self.vectors()
        let pairing = vectors["pairing"] as! [String: Any]
        let responder = try bytes((vectors["device_id"] as! [String: Any])["certificate_der"])
        let initiator = try bytes(pairing["initiator_certificate_der"])
        let nr = try bytes(pairing["responder_nonce"])
        let ni = try bytes(pairing["initiator_nonce"])
        let commitment = PairingMachine.commitment(
            responderCertificate: responder, initiatorCertificate: initiator, responderNonce: nr)
        #expect(commitment.hexString == pairing["commitment"] as! String)
        let code = PairingMachine.code(
            initiatorCertificate: initiator, responderCertificate: responder, initiatorNonce: ni, responderNonce: nr)
        #expect(Int(code.value) == pairing["code"] as! Int)
        #expect(code.description == pairing["code_text"] as! String)
    }

    @Test func discoveryTagAndSum() throws {
        let discovery = try Self.vectors()["discovery"] as! [String: Any]
        let day = discovery["utc_day"] as! String
        // Noon UTC of that day: the tag depends on the UTC date only.
        let formatter = ISO8601DateFormatter()
        let date = try #require(formatter.date(from: day + "T12:00:00Z"))
        #expect(DiscoveryTag.utcDay(of: date) == day)
        let tag = DiscoveryTag.tag(deviceID: discovery["device_id"] as! String, date: date)
        #expect(tag == discovery["tag"] as! String)
        let summary = try Summary(parsing: discovery["summary_text"] as! String)
        #expect(TXTRecord.summaryHash(summary) == discovery["sum"] as! String)
    }
}

private func bytes(_ value: Any?) throws -> [UInt8] {
    let text = try #require(value as? String)
    return try #require([UInt8](hexString: text))
}
