import Foundation
import PlaitCore
import PlaitStore
import PlaitTestSupport
import PlaitTLS
import Testing

/// A home's real identity files (written by `Identity.create`, read by the TLS layer) are what the store's
/// change signer reads: the certificate a timeline.begin carries is the one whose SHA-256 is the Device ID.
@Suite struct IdentitySigningTests {
    @Test func theHomesIdentitySignsChanges() throws {
        try withTemporaryDirectory { directory in
            let identity = try Identity.create(directory: directory.path, commonName: "kitchen")
            let signer = try P256Signer(directory: directory.path)
            #expect(signer.certificate == identity.certificateDER)
            #expect(DeviceID(certificateDER: signer.certificate) == identity.deviceID)
            let hash = SHA256.hash(Array("a change".utf8))
            let signature = try signer.sign(changeHash: hash)
            let certificate = identity.certificateDER
            #expect(P256Verifier().verify(signature: signature, changeHash: hash, certificate: certificate))
        }
    }

    /// Two homes' files mixed up (one's key, the other's certificate) are refused before anything is signed.
    @Test func aKeyFromAnotherHomeIsRefused() throws {
        try withTemporaryDirectory { directory in
            let first = directory.file("first")
            let second = directory.file("second")
            for path in [first, second] {
                try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
            }
            _ = try Identity.create(directory: first, commonName: "kitchen")
            _ = try Identity.create(directory: second, commonName: "laptop")
            try FileManager.default.removeItem(atPath: first + "/cert.pem")
            try FileManager.default.copyItem(atPath: second + "/cert.pem", toPath: first + "/cert.pem")
            #expect {
                try P256Signer(directory: first)
            } throws: { error in
                guard case StoreError.signingKeyMismatch(let what) = error else { return false }
                return what == first
            }
        }
    }
}
