import COpenSSL
import Foundation
import PlaitCore
import PlaitTLS
import Synchronization

/// Signs changes with a device's P-256 key (DESIGN §11, PROTOCOL.md §20): ECDSA over SHA-256 of
/// `ChangeSignature.message(forChangeHash:)`, returned as 64 bytes r ‖ s with s in the lower half of the order.
///
/// Immutable once made, and OpenSSL 3 allows concurrent read-only use of an `EVP_PKEY`: each call signs with
/// its own `EVP_MD_CTX`, so one signer serves every thread.
public final class P256Signer: ChangeSigner, @unchecked Sendable {
    /// The file names of a home's key and certificate, as `Identity` writes them (PlaitTLS).
    public static let keyFileName = "key.pem"
    public static let certificateFileName = "cert.pem"

    /// The certificate, DER: what `timeline.begin` carries.
    public let certificate: [UInt8]
    /// The private key (`EVP_PKEY *`), owned by this object.
    private let key: OpaquePointer

    /// Reads `key.pem` and `cert.pem` from a home (`directory`), as `Identity.load` does.
    public convenience init(directory: String) throws {
        let keyPath = directory + "/" + Self.keyFileName
        let certificatePath = directory + "/" + Self.certificateFileName
        var keyPEM = try readSmallFile(keyPath)
        defer { OPENSSL_cleanse(&keyPEM, keyPEM.count) }
        try self.init(
            keyPEM: keyPEM, certificatePEM: try readSmallFile(certificatePath),
            keySource: keyPath, certificateSource: certificatePath, directory: directory)
    }

    /// A signer from a PEM private key (PKCS#8 or SEC 1, unencrypted) and its PEM certificate. Refuses a key
    /// that is not the certificate's, and a certificate whose key is not P-256.
    public convenience init(keyPEM: [UInt8], certificatePEM: [UInt8]) throws {
        try self.init(
            keyPEM: keyPEM, certificatePEM: certificatePEM, keySource: "the private key",
            certificateSource: "the certificate", directory: "the given key and certificate")
    }

    private init(
        keyPEM: [UInt8], certificatePEM: [UInt8], keySource: String, certificateSource: String, directory: String
    ) throws {
        ERR_clear_error()
        guard let x509 = readPEM(certificatePEM, { PEM_read_bio_X509($0, nil, nil, nil) }) else {
            throw StoreError.signingIdentityUnusable(what: certificateSource, detail: openSSLErrorText())
        }
        defer { X509_free(x509) }
        guard P256.hasP256Key(x509) else {
            throw StoreError.signingIdentityUnusable(
                what: certificateSource, detail: "its public key is not an ECDSA P-256 key")
        }
        guard let der = derEncoding(ofCertificate: x509) else {
            throw StoreError.signingIdentityUnusable(what: certificateSource, detail: openSSLErrorText())
        }
        // A callback that supplies no passphrase: without one OpenSSL would prompt on the terminal.
        guard let key = readPEM(keyPEM, { PEM_read_bio_PrivateKey($0, nil, { _, _, _, _ in 0 }, nil) }) else {
            throw StoreError.signingIdentityUnusable(what: keySource, detail: openSSLErrorText())
        }
        guard X509_check_private_key(x509, key) == 1 else {
            ERR_clear_error()
            EVP_PKEY_free(key)
            throw StoreError.signingKeyMismatch(what: directory)
        }
        self.key = key
        self.certificate = der
    }

    deinit { EVP_PKEY_free(key) }

    public func sign(changeHash: [UInt8]) throws -> [UInt8] {
        guard changeHash.count == 32 else {
            throw StoreError.signingFailed(detail: "a change hash is 32 bytes, not \(changeHash.count)")
        }
        ERR_clear_error()
        guard let signature = P256.sign(ChangeSignature.message(forChangeHash: changeHash), key: key) else {
            throw StoreError.signingFailed(detail: openSSLErrorText())
        }
        return signature
    }
}

/// Checks change signatures with OpenSSL (DESIGN §11, PROTOCOL.md §20). Parsed keys are cached by certificate
/// bytes (a bounded cache, evicted arbitrarily), so the common case costs one ECDSA verification.
public final class P256Verifier: ChangeVerifier {
    /// How many certificates' keys stay parsed: far more than the authors of one household.
    public static let cacheLimit = 256

    private let keys = Mutex<[[UInt8]: VerifyingKey]>([:])

    public init() {}

    /// How many certificates are parsed and kept now (tests check the bound).
    var cachedKeyCount: Int { keys.withLock { $0.count } }

    public func verify(signature: [UInt8], changeHash: [UInt8], certificate: [UInt8]) -> Bool {
        guard changeHash.count == 32, let key = key(for: certificate).key else { return false }
        return P256.verify(signature, message: ChangeSignature.message(forChangeHash: changeHash), key: key)
    }

    /// The cached key of `certificate`, parsing it on a miss (outside the lock: parsing is the slow part, and
    /// two threads parsing the same certificate at once only waste a little work).
    private func key(for certificate: [UInt8]) -> VerifyingKey {
        if let cached = keys.withLock({ $0[certificate] }) { return cached }
        let parsed = VerifyingKey(certificate: certificate)
        return keys.withLock { cache in
            if let cached = cache[certificate] { return cached }
            if cache.count >= Self.cacheLimit { cache.remove(at: cache.startIndex) }
            cache[certificate] = parsed
            return parsed
        }
    }
}

/// A certificate's P-256 public key (`EVP_PKEY *`, owned), or nil when the certificate does not parse or its
/// key is not P-256: such a certificate verifies nothing, and is cached as such so it is parsed once.
private final class VerifyingKey: @unchecked Sendable {
    let key: OpaquePointer?

    init(certificate: [UInt8]) { key = P256.publicKey(certificate: certificate) }

    deinit { if let key { EVP_PKEY_free(key) } }
}

// MARK: - Reading a home's key files

/// Runs `read` on a memory BIO over `pem`; nil when OpenSSL cannot read it.
private func readPEM(_ pem: [UInt8], _ read: (OpaquePointer) -> OpaquePointer?) -> OpaquePointer? {
    pem.withUnsafeBytes { bytes -> OpaquePointer? in
        guard bytes.count <= Int(Int32.max), let bio = BIO_new_mem_buf(bytes.baseAddress, Int32(bytes.count)) else {
            return nil
        }
        defer { BIO_free(bio) }
        return read(bio)
    }
}

/// A key or certificate file of a home (a few kilobytes at most); errors name the path and the reason. Read
/// with POSIX calls into one buffer, so a key's bytes leave no copy behind that the caller cannot wipe.
private func readSmallFile(_ path: String) throws -> [UInt8] {
    let limit = 1 << 20
    let descriptor = open(path, O_RDONLY | O_CLOEXEC)
    guard descriptor >= 0 else {
        let code = errno
        let reason = code == ENOENT ? "it does not exist" : String(cString: strerror(code))
        throw StoreError.signingIdentityUnusable(what: path, detail: reason)
    }
    defer { close(descriptor) }
    var contents = [UInt8](repeating: 0, count: limit + 1)
    var filled = 0
    while filled < contents.count {
        let count = contents.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + filled, $0.count - filled) }
        if count < 0 {
            if errno == EINTR { continue }
            let reason = String(cString: strerror(errno))
            OPENSSL_cleanse(&contents, contents.count)
            throw StoreError.signingIdentityUnusable(what: path, detail: reason)
        }
        if count == 0 { break }
        filled += count
    }
    guard filled <= limit else {
        OPENSSL_cleanse(&contents, contents.count)
        throw StoreError.signingIdentityUnusable(what: path, detail: "it is larger than \(limit) bytes")
    }
    // Shrinking in place keeps the one buffer (no copy of the key is made).
    contents.removeSubrange(filled...)
    return contents
}
