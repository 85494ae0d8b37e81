import COpenSSL
import Foundation
import PlaitTLS

/// A key pair and a self-signed certificate made for a test: what a home's `key.pem` and `cert.pem` hold, and
/// the certificate's DER. Made with OpenSSL directly, so store tests need no home identity.
public struct TestKeyPair: Sendable {
    /// The key types tests use: plait's own, and two that a P-256 verifier must refuse.
    public enum Kind: String, Sendable, CaseIterable {
        case p256 = "P-256"
        case p384 = "P-384"
        case ed25519 = "ED25519"
    }

    public let kind: Kind
    /// The private key, PKCS#8 PEM.
    public let keyPEM: [UInt8]
    /// The certificate, PEM.
    public let certificatePEM: [UInt8]
    /// The certificate, DER.
    public let certificateDER: [UInt8]

    /// A fresh key of `kind` and a certificate for it, signed by it.
    public init(_ kind: Kind = .p256, commonName: String = "test") throws {
        self.kind = kind
        let key = try Self.generateKey(kind)
        defer { EVP_PKEY_free(key) }
        guard let certificate = X509_new() else { throw TestKeyPairError("X509_new failed") }
        defer { X509_free(certificate) }
        guard let serial = BN_new() else { throw TestKeyPairError("BN_new failed") }
        defer { BN_free(serial) }
        let name = X509_get_subject_name(certificate)
        let nameBytes = Array(commonName.utf8)
        // Ed25519 signs without a separate digest (the digest argument must be NULL).
        let digest = kind == .ed25519 ? nil : EVP_sha256()
        guard X509_set_version(certificate, 2) == 1,
            BN_rand(serial, 64, 0, 0) == 1,
            BN_to_ASN1_INTEGER(serial, X509_get_serialNumber(certificate)) != nil,
            X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, nameBytes, Int32(nameBytes.count), -1, 0) == 1,
            X509_set_issuer_name(certificate, name) == 1,
            X509_gmtime_adj(X509_getm_notBefore(certificate), -86_400) != nil,
            ASN1_TIME_set_string(X509_getm_notAfter(certificate), "99991231235959Z") == 1,
            X509_set_pubkey(certificate, key) == 1,
            X509_sign(certificate, key, digest) > 0
        else { throw TestKeyPairError("cannot make a \(kind.rawValue) certificate: \(openSSLErrorText())") }
        keyPEM = try Self.memoryBIO { PEM_write_bio_PrivateKey($0, key, nil, nil, 0, nil, nil) == 1 }
        certificatePEM = try Self.memoryBIO { PEM_write_bio_X509($0, certificate) == 1 }
        certificateDER = try Self.memoryBIO { i2d_X509_bio($0, certificate) == 1 }
    }

    /// Writes `key.pem` (mode 0600) and `cert.pem` into `directory`, as a home holds them.
    public func write(to directory: String) throws {
        try Data(keyPEM).write(to: URL(fileURLWithPath: directory + "/key.pem"))
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: directory + "/key.pem")
        try Data(certificatePEM).write(to: URL(fileURLWithPath: directory + "/cert.pem"))
    }

    private static func generateKey(_ kind: Kind) throws -> OpaquePointer {
        let algorithm = kind == .ed25519 ? "ED25519" : "EC"
        guard let context = EVP_PKEY_CTX_new_from_name(nil, algorithm, nil) else {
            throw TestKeyPairError("no \(algorithm) key generation: \(openSSLErrorText())")
        }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1,
            kind == .ed25519 || EVP_PKEY_CTX_set_group_name(context, kind.rawValue) == 1,
            EVP_PKEY_generate(context, &key) == 1, let key
        else { throw TestKeyPairError("cannot generate a \(kind.rawValue) key: \(openSSLErrorText())") }
        return key
    }

    private static func memoryBIO(_ write: (OpaquePointer) -> Bool) throws -> [UInt8] {
        guard let bio = BIO_new(BIO_s_mem()) else { throw TestKeyPairError("BIO_new failed") }
        defer { BIO_free(bio) }
        guard write(bio) else { throw TestKeyPairError("cannot write the key or certificate: \(openSSLErrorText())") }
        var data: UnsafeMutablePointer<CChar>?
        let length = plait_BIO_get_mem_data(bio, &data)
        guard length > 0, let data else { throw TestKeyPairError("OpenSSL wrote nothing") }
        return data.withMemoryRebound(to: UInt8.self, capacity: length) {
            Array(UnsafeBufferPointer(start: $0, count: length))
        }
    }
}

/// Why a test key pair could not be made (OpenSSL's messages included).
public struct TestKeyPairError: Error, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
