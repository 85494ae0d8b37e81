import Foundation
import PlaitNetnsSupport
import Testing

@testable import PlaitTLS

/// The signed statement of `plait rejoin --new-key` (PROTOCOL.md §21): its encoding and its verification.
@Suite("Succession")
struct SuccessionTests {
    let old = TestIdentities.alice
    let new = TestIdentities.bob
    let other = TestIdentities.mallory

    func refusal(_ body: () throws -> Succession) -> SuccessionProblem? {
        do {
            _ = try body()
            return nil
        } catch let error as IdentityError {
            if case let .succession(problem) = error { return problem }
            return .malformed("not a succession refusal: \(error)")
        } catch {
            return .malformed("not an IdentityError: \(error)")
        }
    }

    @Test func theEncodingIsFieldsOneTwoThreeInOrder() throws {
        let statement = Succession(oldCertificate: [1, 2], newCertificate: [3], issuedAt: 300).encoded()
        // 0x0A len 1 2 | 0x12 len 3 | 0x18 varint(300) = AC 02
        #expect(statement == [0x0A, 2, 1, 2, 0x12, 1, 3, 0x18, 0xAC, 0x02])
        let decoded = try Succession(decoding: statement)
        #expect(decoded == Succession(oldCertificate: [1, 2], newCertificate: [3], issuedAt: 300))
        // A negative time is a ten-byte two's-complement varint, as protobuf writes an int64.
        let negative = Succession(oldCertificate: [1], newCertificate: [2], issuedAt: -1)
        #expect(negative.encoded().count == 3 + 3 + 1 + 10)
        #expect(try Succession(decoding: negative.encoded()) == negative)
    }

    @Test func anyOtherEncodingIsRefused() {
        let cases: [(String, [UInt8])] = [
            ("fields out of order", [0x12, 1, 3, 0x0A, 2, 1, 2]),
            ("an unknown field", [0x0A, 1, 1, 0x12, 1, 3, 0x20, 1]),
            ("a repeated field", [0x0A, 1, 1, 0x0A, 1, 1, 0x12, 1, 3]),
            ("an over-long varint", [0x0A, 1, 1, 0x12, 1, 3, 0x18, 0x81, 0x00]),
            ("issued_at written as zero", [0x0A, 1, 1, 0x12, 1, 3, 0x18, 0x00]),
            ("no new certificate", [0x0A, 1, 1]),
            ("a truncated field", [0x0A, 5, 1]),
            ("nothing", []),
        ]
        for (label, bytes) in cases {
            let problem = refusal { try Succession(decoding: bytes) }
            guard case .malformed = problem else {
                Issue.record("\(label): expected a malformed statement, got \(String(describing: problem))")
                continue
            }
        }
    }

    @Test func aStatementSignedByBothKeysVerifiesOnTheOldKeysConnection() throws {
        let (statement, signature, newSignature) = try Succession.sign(old: old, new: new, issuedAt: 1_700)
        #expect(signature.count == 64 && newSignature.count == 64)
        let succession = try Succession.verify(
            statement: statement, signature: signature, newSignature: newSignature,
            connectionCertificate: old.certificateDER)
        #expect(succession.oldDeviceID == old.deviceID)
        #expect(succession.newDeviceID == new.deviceID)
        #expect(succession.issuedAt == 1_700)
        // Low S, always: s ≤ n/2.
        #expect(!P256.halfOrder.lexicographicallyPrecedes(signature[32...]))
        #expect(!P256.halfOrder.lexicographicallyPrecedes(newSignature[32...]))
    }

    /// The hostile tester's finding (2026-11-25): signed by the old key alone, a statement let a paired device name
    /// any certificate it had seen (another paired device's, one the user had unpaired) as its successor. The new
    /// key must sign too, over its own context string.
    @Test func aStatementTheNewKeyDidNotSignIsRefused() throws {
        let (statement, signature, newSignature) = try Succession.sign(old: old, new: new, issuedAt: 1)
        func check(_ candidate: [UInt8]) -> SuccessionProblem? {
            refusal {
                try Succession.verify(
                    statement: statement, signature: signature, newSignature: candidate,
                    connectionCertificate: old.certificateDER)
            }
        }
        #expect(check([]) == .newSignatureMissing, "signed by the old key only")
        #expect(check(try Succession.newSignature(over: statement, by: other)) == .badNewSignature, "another key")
        #expect(check(try Succession.newSignature(over: statement, by: old)) == .badNewSignature, "the old key")
        // The new key's signature under the old key's context string does not stand for the other.
        #expect(check(try Succession.signature(over: statement, by: new)) == .badNewSignature, "the old context")
        #expect(check(signature) == .badNewSignature, "the old key's signature again")
        let high = Array(newSignature[0..<32]) + P256.subtract(P256.order[...], newSignature[32...])
        #expect(check(high) == .badNewSignature, "high S")
        #expect(check(newSignature) == nil)
    }

    @Test func theSignatureIsOverTheContextStringAndTheStatementAsOpenSSLSeesIt() throws {
        // An independent check of what is signed: the openssl tool verifies the DER form of the signature over
        // "plait-succession-v1\0" ‖ statement with the old certificate's public key.
        let (statement, signature) = try Succession.sign(old: old, newCertificate: new.certificateDER, issuedAt: 5)
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("plait-succ-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(at: directory) }
        let message = Array("plait-succession-v1".utf8) + [0] + statement
        try Data(message).write(to: directory.appendingPathComponent("message"))
        try Data(P256.derSignature(fromRaw: signature)!).write(to: directory.appendingPathComponent("sig"))
        // The new key's signature is over "plait-succession-new-v1\0" ‖ statement.
        let newSignature = try Succession.newSignature(over: statement, by: new)
        try Data(Array("plait-succession-new-v1".utf8) + [0] + statement)
            .write(to: directory.appendingPathComponent("new-message"))
        try Data(P256.derSignature(fromRaw: newSignature)!).write(to: directory.appendingPathComponent("new-sig"))
        try Data(new.certificateDER).write(to: directory.appendingPathComponent("new-cert.der"))
        try Data(old.certificateDER).write(to: directory.appendingPathComponent("cert.der"))
        func openssl(_ arguments: [String]) throws -> Int32 {
            try ChildProcess.run("/usr/bin/openssl", arguments, directory: directory.path).termination.status
        }
        let key = try openssl(["x509", "-inform", "DER", "-in", "cert.der", "-pubkey", "-noout", "-out", "pub.pem"])
        #expect(key == 0)
        #expect(try openssl(["dgst", "-sha256", "-verify", "pub.pem", "-signature", "sig", "message"]) == 0)
        let newKey = try openssl(
            ["x509", "-inform", "DER", "-in", "new-cert.der", "-pubkey", "-noout", "-out", "new-pub.pem"])
        #expect(newKey == 0)
        #expect(
            try openssl(["dgst", "-sha256", "-verify", "new-pub.pem", "-signature", "new-sig", "new-message"]) == 0)
        #expect(try openssl(["dgst", "-sha256", "-verify", "new-pub.pem", "-signature", "new-sig", "message"]) != 0)
        // And the same signature does not verify over the statement without its context string.
        try Data(statement).write(to: directory.appendingPathComponent("bare"))
        #expect(try openssl(["dgst", "-sha256", "-verify", "pub.pem", "-signature", "sig", "bare"]) != 0)
    }

    @Test func aStatementOnAnotherCertificatesConnectionIsRefused() throws {
        let (statement, signature, newSignature) = try Succession.sign(old: old, new: new, issuedAt: 1)
        let problem = refusal {
            try Succession.verify(
                statement: statement, signature: signature, newSignature: newSignature,
                connectionCertificate: other.certificateDER)
        }
        #expect(problem == .notFromOldKey)
    }

    @Test func aStatementSignedByAnotherKeyIsRefused() throws {
        let statement = Succession(
            oldCertificate: old.certificateDER, newCertificate: new.certificateDER, issuedAt: 1
        ).encoded()
        let forged = try Succession.signature(over: statement, by: other)
        let newSignature = try Succession.newSignature(over: statement, by: new)
        let problem = refusal {
            try Succession.verify(
                statement: statement, signature: forged, newSignature: newSignature,
                connectionCertificate: old.certificateDER)
        }
        #expect(problem == .badSignature)
    }

    @Test func aChangedStatementOrSignatureIsRefused() throws {
        let (statement, signature, newSignature) = try Succession.sign(old: old, new: new, issuedAt: 1)
        // Another new certificate under the old signature: the point of the signature.
        let swapped = Succession(
            oldCertificate: old.certificateDER, newCertificate: other.certificateDER, issuedAt: 1
        ).encoded()
        #expect(
            refusal {
                try Succession.verify(
                    statement: swapped, signature: signature, newSignature: newSignature,
                    connectionCertificate: old.certificateDER)
            } == .badSignature)
        var flipped = signature
        flipped[10] ^= 0x01
        #expect(
            refusal {
                try Succession.verify(
                    statement: statement, signature: flipped, newSignature: newSignature,
                    connectionCertificate: old.certificateDER)
            } == .badSignature)
        // The high-S twin of a valid signature verifies mathematically, and is refused all the same.
        let high = Array(signature[0..<32]) + P256.subtract(P256.order[...], signature[32...])
        #expect(
            refusal {
                try Succession.verify(
                    statement: statement, signature: high, newSignature: newSignature,
                    connectionCertificate: old.certificateDER)
            } == .badSignature)
        #expect(
            refusal {
                try Succession.verify(
                    statement: statement, signature: Array(signature.prefix(63)), newSignature: newSignature,
                    connectionCertificate: old.certificateDER)
            } == .badSignature)
    }

    @Test func aNewCertificateThatIsNotP256OrIsTheOldOneIsRefused() throws {
        let garbage = try Succession.sign(old: old, newCertificate: [0x30, 0x03, 0x02, 0x01, 0x01], issuedAt: 1)
        #expect(
            refusal {
                try Succession.verify(
                    statement: garbage.statement, signature: garbage.signature, newSignature: [],
                    connectionCertificate: old.certificateDER)
            } == .newCertificateUnusable)
        // A certificate with bytes after it is not one certificate.
        let trailing = try Succession.sign(old: old, newCertificate: new.certificateDER + [0], issuedAt: 1)
        #expect(
            refusal {
                try Succession.verify(
                    statement: trailing.statement, signature: trailing.signature, newSignature: [],
                    connectionCertificate: old.certificateDER)
            } == .newCertificateUnusable)
        let same = try Succession.sign(old: old, newCertificate: old.certificateDER, issuedAt: 1)
        guard
            case .malformed = refusal({
                try Succession.verify(
                    statement: same.statement, signature: same.signature, newSignature: [],
                    connectionCertificate: old.certificateDER)
            })
        else {
            Issue.record("a statement naming the old certificate as the new one was not refused")
            return
        }
    }
}
