import Foundation
import PlaitCore
import Testing

@testable import PlaitStore

/// The `signatures` conformance vectors (PROTOCOL.md §19, §20): the Swift verifier accepts the valid
/// signatures and refuses every one the document says a verifier MUST refuse. scripts/check-vectors.py checks
/// the same vectors with its own P-256 arithmetic.
@Suite("Conformance vectors: change signatures")
struct SignatureConformanceTests {
    static func vector() throws -> [String: Any] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Vectors/conformance.json")
        let root = try #require(JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
        return try #require(root["signatures"] as? [String: Any])
    }

    @Test func theMessageIsTheContextAndTheHash() throws {
        let vector = try Self.vector()
        let message = ChangeSignature.message(forChangeHash: try bytes(vector["change_hash"]))
        #expect(message.hexString == vector["message"] as? String)
        #expect(SHA256.hash(message).hexString == vector["message_sha256"] as? String)
    }

    @Test func validSignaturesVerify() throws {
        let vector = try Self.vector()
        let certificate = try bytes(vector["certificate_der"])
        let hash = try bytes(vector["change_hash"])
        let valid = try #require(vector["valid"] as? [String])
        #expect(!valid.isEmpty)
        let verifier = P256Verifier()
        for signature in valid {
            #expect(verifier.verify(signature: try bytes(signature), changeHash: hash, certificate: certificate))
        }
    }

    @Test func refusedSignaturesAreRefused() throws {
        let vector = try Self.vector()
        let refused = try #require(vector["refused"] as? [[String: Any]])
        #expect(refused.count >= 10)
        let verifier = P256Verifier()
        for entry in refused {
            let certificate = try bytes(entry["certificate_der"] ?? vector["certificate_der"])
            let hash = try bytes(entry["change_hash"] ?? vector["change_hash"])
            let signature = try bytes(entry["signature"])
            #expect(
                !verifier.verify(signature: signature, changeHash: hash, certificate: certificate),
                "\(entry["why"] ?? "?")")
        }
    }
}

private func bytes(_ value: Any?) throws -> [UInt8] {
    let text = try #require(value as? String)
    return try #require([UInt8](hexString: text))
}
