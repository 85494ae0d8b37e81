import COpenSSL
import Foundation
import PlaitCore
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
        guard let algorithm = P256.sha256 else {
            throw StoreError.signingFailed(detail: "OpenSSL offers no SHA-256")
        }
        let message = ChangeSignature.message(forChangeHash: changeHash)
        guard let context = EVP_MD_CTX_new() else {
            throw StoreError.signingFailed(detail: openSSLErrorText())
        }
        defer { EVP_MD_CTX_free(context) }
        // ECDSA_size for P-256 is 72: two 33-byte INTEGERs and three headers.
        var der = [UInt8](repeating: 0, count: 80)
        var length = der.count
        guard EVP_DigestSignInit(context, nil, algorithm, nil, key) == 1,
            EVP_DigestSign(context, &der, &length, message, message.count) == 1
        else {
            throw StoreError.signingFailed(detail: openSSLErrorText())
        }
        guard let signature = P256.lowSSignature(fromDER: der[0..<length]) else {
            throw StoreError.signingFailed(detail: "OpenSSL returned a signature that is not a P-256 ECDSA-Sig-Value")
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
        guard changeHash.count == 32, let der = P256.derSignature(fromRaw: signature),
            let key = key(for: certificate).key, let algorithm = P256.sha256
        else { return false }
        let message = ChangeSignature.message(forChangeHash: changeHash)
        guard let context = EVP_MD_CTX_new() else {
            ERR_clear_error()
            return false
        }
        defer { EVP_MD_CTX_free(context) }
        let valid =
            EVP_DigestVerifyInit(context, nil, algorithm, nil, key) == 1
            && EVP_DigestVerify(context, der, der.count, message, message.count) == 1
        // A refused signature leaves errors on this thread's queue; they must not surface in a later message.
        if !valid { ERR_clear_error() }
        return valid
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

    init(certificate: [UInt8]) {
        key = certificate.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            guard let base = buffer.baseAddress, buffer.count > 0, buffer.count <= Int(Int32.max) else { return nil }
            var cursor: UnsafePointer<UInt8>? = base
            guard let x509 = d2i_X509(nil, &cursor, buffer.count) else {
                ERR_clear_error()
                return nil
            }
            defer { X509_free(x509) }
            // Trailing bytes would let one key stand behind many "certificates": the DER must be exactly one.
            guard cursor == base + buffer.count, P256.hasP256Key(x509) else { return nil }
            let key = X509_get_pubkey(x509)
            if key == nil { ERR_clear_error() }
            return key
        }
    }

    deinit { if let key { EVP_PKEY_free(key) } }
}

/// P-256 facts and the conversions between OpenSSL's DER ECDSA-Sig-Value and plait's 64-byte r ‖ s.
enum P256 {
    /// SHA-256 fetched once (see `FastSHA256.algorithm`: a fetch by name on every call costs more than the hash).
    nonisolated(unsafe) static let sha256: OpaquePointer? = EVP_MD_fetch(nil, "SHA256", nil)

    /// The group order n, big-endian.
    static let order: [UInt8] = [
        0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
    ]
    /// ⌊n / 2⌋: an s above it is "high" (its twin n − s is valid too, and only the low one is accepted).
    static let halfOrder: [UInt8] = {
        var half = [UInt8](repeating: 0, count: 32)
        var carry: UInt8 = 0
        for index in 0..<32 {
            half[index] = carry << 7 | order[index] >> 1
            carry = order[index] & 1
        }
        return half
    }()

    /// True when the certificate's subjectPublicKeyInfo is id-ecPublicKey on the named curve prime256v1 with an
    /// uncompressed point: the form plait writes, and the only one PROTOCOL.md §20 accepts (no explicit curve
    /// parameters, no compressed point), so every implementation accepts the same certificates.
    static func hasP256Key(_ x509: OpaquePointer) -> Bool {
        guard let publicKey = X509_get_X509_PUBKEY(x509) else { return false }
        var point: UnsafePointer<UInt8>?
        var pointLength: Int32 = 0
        var algorithm: UnsafeMutablePointer<X509_ALGOR>?
        guard X509_PUBKEY_get0_param(nil, &point, &pointLength, &algorithm, publicKey) == 1, let algorithm,
            let point, pointLength == 65, point[0] == 0x04
        else { return false }
        var object: OpaquePointer?
        var parameterType: Int32 = 0
        var parameter: UnsafeRawPointer?
        X509_ALGOR_get0(&object, &parameterType, &parameter, algorithm)
        guard OBJ_obj2nid(object) == NID_X9_62_id_ecPublicKey, parameterType == V_ASN1_OBJECT, let parameter else {
            return false
        }
        return OBJ_obj2nid(OpaquePointer(parameter)) == NID_X9_62_prime256v1
    }

    /// r ‖ s from OpenSSL's DER, with s replaced by n − s when it is high; nil if it is not a P-256 signature.
    static func lowSSignature(fromDER der: ArraySlice<UInt8>) -> [UInt8]? {
        var raw = [UInt8](repeating: 0, count: 64)
        let parsed = der.withUnsafeBufferPointer { buffer -> Bool in
            var cursor = buffer.baseAddress
            guard let signature = d2i_ECDSA_SIG(nil, &cursor, buffer.count) else { return false }
            defer { ECDSA_SIG_free(signature) }
            return raw.withUnsafeMutableBufferPointer { out in
                BN_bn2binpad(ECDSA_SIG_get0_r(signature), out.baseAddress, 32) == 32
                    && BN_bn2binpad(ECDSA_SIG_get0_s(signature), out.baseAddress! + 32, 32) == 32
            }
        }
        guard parsed else {
            ERR_clear_error()
            return nil
        }
        if isHigh(raw[32...]) {
            let low = subtract(order[...], raw[32...])
            raw.replaceSubrange(32..<64, with: low)
        }
        return raw
    }

    /// The DER ECDSA-Sig-Value for a 64-byte r ‖ s, or nil when plait refuses it: not 64 bytes, r or s zero
    /// or not below n, or s high.
    static func derSignature(fromRaw raw: [UInt8]) -> [UInt8]? {
        guard raw.count == 64 else { return nil }
        let r = raw[0..<32]
        let s = raw[32..<64]
        guard isInRange(r), isInRange(s), !isHigh(s) else { return nil }
        let body = integer(r) + integer(s)
        // At most 2 × 35 bytes: the short form of the length always fits.
        return [0x30, UInt8(body.count)] + body
    }

    /// 1 ≤ value < n.
    static func isInRange(_ value: ArraySlice<UInt8>) -> Bool {
        value.contains { $0 != 0 } && value.lexicographicallyPrecedes(order)
    }

    /// value > ⌊n / 2⌋ (32 bytes, big-endian).
    static func isHigh(_ value: ArraySlice<UInt8>) -> Bool {
        halfOrder.lexicographicallyPrecedes(value)
    }

    /// a − b for 32-byte big-endian numbers with a ≥ b.
    static func subtract(_ a: ArraySlice<UInt8>, _ b: ArraySlice<UInt8>) -> [UInt8] {
        let a = Array(a)
        let b = Array(b)
        var out = [UInt8](repeating: 0, count: 32)
        var borrow = 0
        for index in (0..<32).reversed() {
            var digit = Int(a[index]) - Int(b[index]) - borrow
            borrow = digit < 0 ? 1 : 0
            if digit < 0 { digit += 256 }
            out[index] = UInt8(digit)
        }
        return out
    }

    /// A DER INTEGER of an unsigned big-endian value: leading zeros dropped, one put back if the top bit is set.
    private static func integer(_ value: ArraySlice<UInt8>) -> [UInt8] {
        var digits = Array(value.drop { $0 == 0 })
        if digits.isEmpty { digits = [0] }
        if digits[0] & 0x80 != 0 { digits.insert(0, at: 0) }
        return [0x02, UInt8(digits.count)] + digits
    }
}

// MARK: - OpenSSL plumbing (PlaitTLS has the same helpers; the store does not depend on it)

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

/// The DER encoding of a certificate (`X509 *`, borrowed), or nil if OpenSSL cannot encode it.
private func derEncoding(ofCertificate certificate: OpaquePointer) -> [UInt8]? {
    // i2d_X509 advances the pointer it writes through: ask for the length first, then write through a copy.
    let length = i2d_X509(certificate, nil)
    guard length > 0 else { return nil }
    var der = [UInt8](repeating: 0, count: Int(length))
    let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
        var cursor = buffer.baseAddress
        return i2d_X509(certificate, &cursor)
    }
    return written == length ? der : nil
}

/// Empties this thread's OpenSSL error queue and returns its messages, oldest first.
private func openSSLErrorText() -> String {
    var messages: [String] = []
    while true {
        let code = ERR_get_error()
        if code == 0 { break }
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        messages.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }
    return messages.isEmpty ? "no error reported" : messages.joined(separator: "; ")
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
