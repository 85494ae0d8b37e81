import COpenSSL
import Foundation
import Testing

@testable import PlaitTLS

/// A fresh directory under the system temporary directory, removed when `body` returns.
private func withTemporaryDirectory<T>(_ body: (String) throws -> T) throws -> T {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("plait-tls-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: false)
    defer { try? FileManager.default.removeItem(at: url) }
    return try body(url.path)
}

private func permissions(_ path: String) throws -> Int {
    let attributes = try FileManager.default.attributesOfItem(atPath: path)
    return (attributes[.posixPermissions] as? NSNumber)?.intValue ?? -1
}

@Suite("Identity")
struct IdentityTests {
    @Test func createThenLoadGivesTheSameIdentity() throws {
        try withTemporaryDirectory { directory in
            let created = try Identity.create(directory: directory, commonName: "kitchen-laptop")
            let loaded = try Identity.load(directory: directory)
            #expect(loaded.deviceID == created.deviceID)
            #expect(loaded.certificateDER == created.certificateDER)
            #expect(loaded.commonName == "kitchen-laptop")
            #expect(created.commonName == "kitchen-laptop")
            #expect(created.deviceID == DeviceID(certificateDER: created.certificateDER))
            #expect(loaded.notAfter == created.notAfter)
        }
    }

    @Test func filesAreWrittenAsPEMWithPrivateKeyMode0600() throws {
        try withTemporaryDirectory { directory in
            _ = try Identity.create(directory: directory, commonName: "plait")
            let keyPath = directory + "/key.pem"
            let certificatePath = directory + "/cert.pem"
            #expect(try permissions(keyPath) == 0o600)
            #expect(try permissions(certificatePath) & 0o600 == 0o600)
            #expect(try permissions(certificatePath) & 0o133 == 0)  // 0644 less the umask
            let key = try String(contentsOfFile: keyPath, encoding: .utf8)
            #expect(key.hasPrefix("-----BEGIN PRIVATE KEY-----\n"))  // PKCS#8, unencrypted
            let certificate = try String(contentsOfFile: certificatePath, encoding: .utf8)
            #expect(certificate.hasPrefix("-----BEGIN CERTIFICATE-----\n"))
        }
    }

    @Test func certificateIsValidUntilYear9999() throws {
        try withTemporaryDirectory { directory in
            let identity = try Identity.create(directory: directory, commonName: "plait")
            #expect(identity.notAfter == "9999-12-31 23:59:59 UTC")
            #expect(identity.isValidNow())
            #expect(try Identity.load(directory: directory).notAfter == "9999-12-31 23:59:59 UTC")
        }
    }

    @Test func certificateIsASelfSignedV3P256Certificate() throws {
        try withTemporaryDirectory { directory in
            let identity = try Identity.create(directory: directory, commonName: "plait")
            let x509 = identity.x509
            #expect(X509_get_version(x509) == Int(X509_VERSION_3))
            #expect(X509_NAME_cmp(X509_get_subject_name(x509), X509_get_issuer_name(x509)) == 0)
            #expect(X509_verify(x509, identity.privateKey) == 1)
            #expect(X509_get_signature_nid(x509) == NID_ecdsa_with_SHA256)
            #expect(EVP_PKEY_get_bits(identity.privateKey) == 256)
            #expect(X509_check_ca(x509) == 0)  // basicConstraints CA:FALSE
            var serialBytes = 0
            if let serial = X509_get0_serialNumber(x509), let number = ASN1_INTEGER_to_BN(serial, nil) {
                serialBytes = Int((BN_num_bits(number) + 7) / 8)
                #expect(BN_is_negative(number) == 0)
                BN_free(number)
            }
            #expect(serialBytes > 8 && serialBytes <= 16)
        }
    }

    /// What the TLS layer's verify callback will see for a peer's certificate (DESIGN §9).
    @Test func verificationReportsExactlyDepthZeroSelfSigned() throws {
        try withTemporaryDirectory { directory in
            let identity = try Identity.create(directory: directory, commonName: "plait")
            let store = X509_STORE_new()
            let context = X509_STORE_CTX_new()
            defer {
                X509_STORE_CTX_free(context)
                X509_STORE_free(store)
            }
            #expect(X509_STORE_CTX_init(context, store, identity.x509, nil) == 1)
            #expect(X509_STORE_CTX_set_purpose(context, X509_PURPOSE_SSL_CLIENT) == 1)
            #expect(X509_verify_cert(context) == 0)
            #expect(X509_STORE_CTX_get_error(context) == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT)
            #expect(X509_STORE_CTX_get_error_depth(context) == 0)
        }
    }

    @Test func refusesToOverwrite() throws {
        try withTemporaryDirectory { directory in
            let first = try Identity.create(directory: directory, commonName: "plait")
            let keyPath = directory + "/key.pem"
            #expect(throws: IdentityError.fileExists(path: keyPath)) {
                try Identity.create(directory: directory, commonName: "plait")
            }
            #expect(try Identity.load(directory: directory).deviceID == first.deviceID)

            // Either file alone is enough to refuse, and nothing is written next to it.
            try FileManager.default.removeItem(atPath: keyPath)
            #expect(throws: IdentityError.fileExists(path: directory + "/cert.pem")) {
                try Identity.create(directory: directory, commonName: "plait")
            }
            #expect(!FileManager.default.fileExists(atPath: keyPath))
        }
    }

    @Test func corruptCertificateGivesAClearError() throws {
        try withTemporaryDirectory { directory in
            _ = try Identity.create(directory: directory, commonName: "plait")
            let certificatePath = directory + "/cert.pem"
            var pem = try String(contentsOfFile: certificatePath, encoding: .utf8)
            // Damage the base64 body, keeping the PEM markers.
            let body = pem.index(pem.startIndex, offsetBy: 40)
            pem.replaceSubrange(body..<pem.index(body, offsetBy: 20), with: "!!!!!!!!!!!!!!!!!!!!")
            try pem.write(toFile: certificatePath, atomically: false, encoding: .utf8)
            do {
                _ = try Identity.load(directory: directory)
                Issue.record("a corrupt cert.pem was accepted")
            } catch let error as IdentityError {
                guard case .corruptFile(let path, let message) = error else {
                    Issue.record("unexpected error \(error)")
                    return
                }
                #expect(path == certificatePath)
                #expect(!message.isEmpty && message != "no error reported")
                #expect(error.description.hasPrefix("\(certificatePath) is corrupt (OpenSSL: "))
            }

            try Data("not a certificate\n".utf8).write(to: URL(fileURLWithPath: certificatePath))
            #expect {
                try Identity.load(directory: directory)
            } throws: { error in
                guard case .corruptFile(let path, _) = error as? IdentityError else { return false }
                return path == certificatePath
            }
        }
    }

    @Test func corruptKeyGivesAClearError() throws {
        try withTemporaryDirectory { directory in
            _ = try Identity.create(directory: directory, commonName: "plait")
            let keyPath = directory + "/key.pem"
            try Data("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n".utf8)
                .write(to: URL(fileURLWithPath: keyPath))
            #expect {
                try Identity.load(directory: directory)
            } throws: { error in
                guard case .corruptFile(let path, _) = error as? IdentityError else { return false }
                return path == keyPath
            }
        }
    }

    @Test func missingFilesAreNamed() throws {
        try withTemporaryDirectory { directory in
            #expect(throws: IdentityError.fileMissing(path: directory + "/cert.pem")) {
                try Identity.load(directory: directory)
            }
            _ = try Identity.create(directory: directory, commonName: "plait")
            try FileManager.default.removeItem(atPath: directory + "/key.pem")
            #expect(throws: IdentityError.fileMissing(path: directory + "/key.pem")) {
                try Identity.load(directory: directory)
            }
        }
    }

    @Test func keyFromAnotherIdentityIsRejected() throws {
        try withTemporaryDirectory { first in
            try withTemporaryDirectory { second in
                _ = try Identity.create(directory: first, commonName: "one")
                _ = try Identity.create(directory: second, commonName: "two")
                try FileManager.default.removeItem(atPath: first + "/key.pem")
                try FileManager.default.copyItem(atPath: second + "/key.pem", toPath: first + "/key.pem")
                #expect(throws: IdentityError.keyDoesNotMatchCertificate(directory: first)) {
                    try Identity.load(directory: first)
                }
            }
        }
    }

    @Test func twoIdentitiesHaveDifferentIDs() throws {
        try withTemporaryDirectory { first in
            try withTemporaryDirectory { second in
                let one = try Identity.create(directory: first, commonName: "same name")
                let two = try Identity.create(directory: second, commonName: "same name")
                #expect(one.deviceID != two.deviceID)
                #expect(one.certificateDER != two.certificateDER)
            }
        }
    }

    @Test func rejectsUnusableCommonNames() throws {
        try withTemporaryDirectory { directory in
            #expect(throws: IdentityError.invalidCommonName("")) {
                try Identity.create(directory: directory, commonName: "")
            }
            let long = String(repeating: "x", count: 65)
            #expect(throws: IdentityError.invalidCommonName(long)) {
                try Identity.create(directory: directory, commonName: long)
            }
            let leftBehind = try FileManager.default.contentsOfDirectory(atPath: directory)
            #expect(leftBehind.isEmpty)
            let unicode = "Küchen-Laptop ☕"
            let identity = try Identity.create(directory: directory, commonName: unicode)
            #expect(identity.commonName == unicode)
        }
    }

    @Test func missingDirectoryGivesAClearError() {
        let directory = "/nonexistent-plait-\(UUID().uuidString)"
        #expect {
            try Identity.create(directory: directory, commonName: "plait")
        } throws: { error in
            guard case .fileUnwritable(let path, _) = error as? IdentityError else { return false }
            return path == directory + "/key.pem"
        }
    }

    @Test func errorMessagesAreOneSentenceWithAnAction() {
        let errors: [IdentityError] = [
            .invalidDigestLength(3),
            .deviceIDWrongLength(text: "ABC", count: 3),
            .deviceIDInvalidCharacter(text: "A0", character: "0"),
            .deviceIDCheckMismatch(text: "X", group: 6),
            .deviceIDNotCanonical(text: "X"),
            .invalidCommonName(""),
            .fileExists(path: "/h/key.pem"),
            .fileMissing(path: "/h/key.pem"),
            .fileUnreadable(path: "/h/key.pem", reason: "Permission denied"),
            .fileUnwritable(path: "/h/key.pem", reason: "No such file or directory"),
            .corruptFile(path: "/h/cert.pem", openSSLMessage: "error:1E08010C:DECODER routines::unsupported"),
            .keyDoesNotMatchCertificate(directory: "/h"),
            .openSSL(operation: "sign the certificate", message: "error:…"),
        ]
        for error in errors {
            let text = error.description
            #expect(text.hasSuffix("."), "\(text)")
            #expect(!text.contains("\n"))
        }
    }
}
