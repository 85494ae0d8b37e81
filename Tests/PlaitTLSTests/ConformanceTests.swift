import Foundation
import PlaitCore
import Testing

@testable import PlaitTLS

/// The Device ID vector of PROTOCOL.md §2: a plait certificate's DER and the ID it must give, check characters
/// included.
@Suite("Conformance vectors: Device ID")
struct DeviceIDConformanceTests {
    static func vector() throws -> [String: Any] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Vectors/conformance.json")
        let root = try #require(JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        return try #require(root["device_id"] as? [String: Any])
    }

    @Test func certificateGivesItsDeviceID() throws {
        let vector = try Self.vector()
        let der = try bytes(vector["certificate_der"])
        let id = DeviceID(certificateDER: der)
        #expect(id.digest.hexString == vector["sha256"] as! String)
        #expect(Base32.string(id.digest) == vector["base32"] as! String)
        #expect(id.description == vector["text"] as! String)
        #expect(try DeviceID(parsing: vector["text"] as! String) == id)
        // The four check characters close groups 2, 4, 6 and 8; each follows from its 13-character chunk.
        let text = (vector["text"] as! String).replacingOccurrences(of: "-", with: "")
        let values = text.unicodeScalars.map { Base32.value(of: $0)! }
        for chunk in 0..<4 {
            let start = chunk * 14
            #expect(LuhnBase32.checkValue(for: values[start..<start + 13]) == values[start + 13], "chunk \(chunk + 1)")
        }
    }

    /// Parsing (PROTOCOL.md §2): case and separators are free; a typo, a wrong length, a character outside the
    /// alphabet and a set padding bit are refused.
    @Test func textsAcceptedAndRefused() throws {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Vectors/conformance.json")
        let root = try #require(JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        let refused = try #require(root["refused"] as? [String: Any])
        let id = DeviceID(certificateDER: try bytes(try Self.vector()["certificate_der"]))
        for text in refused["device_id_texts_accepted"] as! [String] {
            #expect(try DeviceID(parsing: text) == id, "\(text)")
        }
        for text in refused["device_id_texts_refused"] as! [String] {
            #expect(throws: IdentityError.self, "\(text)") { try DeviceID(parsing: text) }
        }
    }
}

private func bytes(_ value: Any?) throws -> [UInt8] {
    let text = try #require(value as? String)
    return try #require([UInt8](hexString: text))
}
