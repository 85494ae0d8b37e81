import COpenSSL
import PlaitCore

/// A device's statement that its key was replaced (`plait rejoin --new-key`, PROTOCOL.md §21): the old
/// certificate names the new one, and the old key signs it, so peers that trusted the old Device ID can trust
/// the new one without pairing again.
///
/// The statement is the protobuf `Succession { bytes old_certificate = 1; bytes new_certificate = 2;
/// int64 issued_at = 3; }`, fields in number order; the signature is ECDSA P-256 by the old key over
/// SHA-256(`plait-succession-v1\0` ‖ statement), 64 bytes r ‖ s with s in the lower half of the group order. The
/// context string keeps it apart from the same key's TLS and change signatures.
public struct Succession: Hashable, Sendable {
    /// What the signature covers ahead of the statement's bytes.
    public static let context: [UInt8] = Array("plait-succession-v1".utf8) + [0]
    /// A statement larger than this is refused unread: two certificates of plait's kind are about 800 bytes.
    public static let maxStatementBytes = 16 << 10

    public var oldCertificate: [UInt8]
    public var newCertificate: [UInt8]
    /// Milliseconds since 1970, when `rejoin --new-key` made it (informational: shown, never compared).
    public var issuedAt: Int64

    public init(oldCertificate: [UInt8], newCertificate: [UInt8], issuedAt: Int64) {
        self.oldCertificate = oldCertificate
        self.newCertificate = newCertificate
        self.issuedAt = issuedAt
    }

    public var oldDeviceID: DeviceID { DeviceID(certificateDER: oldCertificate) }
    public var newDeviceID: DeviceID { DeviceID(certificateDER: newCertificate) }

    /// The canonical encoding: fields 1, 2, 3 in order, `issued_at` as a two's-complement varint (omitted at 0,
    /// as proto3 does), nothing else. The signature covers exactly these bytes.
    public func encoded() -> [UInt8] {
        var writer = ProtoWriter()
        writer.data(1, oldCertificate)
        writer.data(2, newCertificate)
        if issuedAt != 0 { writer.uint(3, UInt64(bitPattern: issuedAt)) }
        return writer.bytes
    }

    /// Decodes a statement, refusing any encoding but the canonical one (what is signed is what is read).
    public init(decoding bytes: [UInt8]) throws(IdentityError) {
        guard bytes.count <= Self.maxStatementBytes else {
            throw .succession(.malformed("it is \(bytes.count) bytes, over \(Self.maxStatementBytes)"))
        }
        var reader = ProtoReader(bytes)
        var old: [UInt8]?
        var new: [UInt8]?
        var issued: Int64 = 0
        do {
            while let (field, value) = try reader.next() {
                switch field {
                case 1 where old == nil: old = Array(try value.data())
                case 2 where new == nil: new = Array(try value.data())
                case 3: issued = Int64(bitPattern: try value.uint())
                default: throw IdentityError.succession(.malformed("field \(field) is unexpected or repeated"))
                }
            }
        } catch let error as IdentityError {
            throw error
        } catch {
            throw .succession(.malformed("\(error)"))
        }
        guard let old, let new, !old.isEmpty, !new.isEmpty else {
            throw .succession(.malformed("a certificate is missing"))
        }
        self.init(oldCertificate: old, newCertificate: new, issuedAt: issued)
        guard encoded() == bytes else { throw .succession(.malformed("it is not in canonical form")) }
    }

    /// What the old key signs.
    public static func message(statement: [UInt8]) -> [UInt8] { context + statement }

    /// The statement and the old identity's signature of it.
    public static func sign(
        old: Identity, newCertificate: [UInt8], issuedAt: Int64
    ) throws(IdentityError) -> (statement: [UInt8], signature: [UInt8]) {
        let statement = Succession(
            oldCertificate: old.certificateDER, newCertificate: newCertificate, issuedAt: issuedAt
        ).encoded()
        return (statement, try signature(over: statement, by: old))
    }

    /// `identity`'s signature of `statement` (any bytes: tests build wrong statements with it).
    public static func signature(over statement: [UInt8], by identity: Identity) throws(IdentityError) -> [UInt8] {
        try P256Signature.sign(message(statement: statement), key: identity.privateKey)
    }

    /// Checks a statement received on a connection whose peer presented `connectionCertificate` (DER, from the
    /// TLS handshake, never from the message): that certificate must be the statement's old one, the signature
    /// must verify with its key, and the new certificate must be a P-256 one other than the old.
    public static func verify(
        statement: [UInt8], signature: [UInt8], connectionCertificate: [UInt8]
    ) throws(IdentityError) -> Succession {
        let succession = try Succession(decoding: statement)
        guard succession.oldCertificate == connectionCertificate else {
            throw .succession(.notFromOldKey)
        }
        let signed = message(statement: statement)
        guard P256Signature.verify(signature, message: signed, certificate: connectionCertificate) else {
            throw .succession(.badSignature)
        }
        guard succession.newCertificate != succession.oldCertificate else {
            throw .succession(.malformed("the new certificate is the old one"))
        }
        guard P256Signature.publicKey(certificate: succession.newCertificate) != nil else {
            throw .succession(.newCertificateUnusable)
        }
        return succession
    }
}

/// Why a succession statement was refused (`IdentityError.succession`).
public enum SuccessionProblem: Equatable, Sendable, CustomStringConvertible {
    /// It does not decode as a canonical `Succession`.
    case malformed(String)
    /// Its old certificate is not the one the connection it came on presented.
    case notFromOldKey
    /// The signature does not verify with the old certificate's key (or is not 64 bytes r ‖ s, low S).
    case badSignature
    /// The new certificate does not parse as one DER certificate with a P-256 key.
    case newCertificateUnusable

    public var description: String {
        switch self {
        case let .malformed(detail): return "the statement is malformed (\(detail))"
        case .notFromOldKey:
            return "its old certificate is not the certificate this connection was made with"
        case .badSignature: return "its signature does not verify with the old certificate's key"
        case .newCertificateUnusable: return "its new certificate does not parse as a P-256 certificate"
        }
    }
}

/// ECDSA P-256 with SHA-256, as 64-byte r ‖ s with low S. (PlaitStore's P256Signer does the same for change
/// signatures; the store does not depend on PlaitTLS, nor PlaitTLS on the store.)
enum P256Signature {
    static let order: [UInt8] = [
        0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
    ]
    /// ⌊n / 2⌋: an s above it is "high", and only the low twin of a signature is accepted.
    static let halfOrder: [UInt8] = {
        var half = [UInt8](repeating: 0, count: 32)
        var carry: UInt8 = 0
        for index in 0..<32 {
            half[index] = carry << 7 | order[index] >> 1
            carry = order[index] & 1
        }
        return half
    }()

    static func sign(_ message: [UInt8], key: OpaquePointer) throws(IdentityError) -> [UInt8] {
        ERR_clear_error()
        guard let context = EVP_MD_CTX_new() else {
            throw .openSSL(operation: "sign a succession statement", message: openSSLErrorText())
        }
        defer { EVP_MD_CTX_free(context) }
        var der = [UInt8](repeating: 0, count: 80)
        var length = der.count
        guard EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key) == 1,
            EVP_DigestSign(context, &der, &length, message, message.count) == 1,
            let raw = lowS(fromDER: der[0..<length])
        else {
            throw .openSSL(operation: "sign a succession statement", message: openSSLErrorText())
        }
        return raw
    }

    static func verify(_ signature: [UInt8], message: [UInt8], certificate: [UInt8]) -> Bool {
        guard let der = derSignature(fromRaw: signature), let key = publicKey(certificate: certificate) else {
            return false
        }
        defer { EVP_PKEY_free(key) }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        let valid = EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1
            && EVP_DigestVerify(context, der, der.count, message, message.count) == 1
        ERR_clear_error()
        return valid
    }

    /// The P-256 public key (owned: free it) of a certificate that is exactly one DER certificate; else nil.
    static func publicKey(certificate: [UInt8]) -> OpaquePointer? {
        certificate.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            guard let base = buffer.baseAddress, buffer.count > 0 else { return nil }
            var cursor: UnsafePointer<UInt8>? = base
            guard let x509 = d2i_X509(nil, &cursor, buffer.count) else {
                ERR_clear_error()
                return nil
            }
            defer { X509_free(x509) }
            guard cursor == base + buffer.count, let key = X509_get_pubkey(x509) else {
                ERR_clear_error()
                return nil
            }
            guard EVP_PKEY_is_a(key, "EC") == 1, curveName(key) == "prime256v1" else {
                EVP_PKEY_free(key)
                return nil
            }
            return key
        }
    }

    private static func curveName(_ key: OpaquePointer) -> String? {
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_utf8_string_param(key, "group", &name, name.count, &length) == 1 else {
            ERR_clear_error()
            return nil
        }
        return String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    static func lowS(fromDER der: ArraySlice<UInt8>) -> [UInt8]? {
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
        guard parsed else { return nil }
        if halfOrder.lexicographicallyPrecedes(raw[32...]) {
            raw.replaceSubrange(32..<64, with: subtract(order, Array(raw[32...])))
        }
        return raw
    }

    /// The DER ECDSA-Sig-Value of r ‖ s; nil unless 64 bytes with 1 ≤ r, s < n and s low.
    static func derSignature(fromRaw raw: [UInt8]) -> [UInt8]? {
        guard raw.count == 64 else { return nil }
        let (r, s) = (raw[0..<32], raw[32..<64])
        func inRange(_ value: ArraySlice<UInt8>) -> Bool {
            value.contains { $0 != 0 } && value.lexicographicallyPrecedes(order)
        }
        guard inRange(r), inRange(s), !halfOrder.lexicographicallyPrecedes(s) else { return nil }
        func integer(_ value: ArraySlice<UInt8>) -> [UInt8] {
            var digits = Array(value.drop { $0 == 0 })
            if digits[0] & 0x80 != 0 { digits.insert(0, at: 0) }
            return [0x02, UInt8(digits.count)] + digits
        }
        let body = integer(r) + integer(s)
        return [0x30, UInt8(body.count)] + body
    }

    /// a − b for 32-byte big-endian numbers with a ≥ b.
    static func subtract(_ a: [UInt8], _ b: [UInt8]) -> [UInt8] {
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
}
