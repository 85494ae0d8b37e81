import COpenSSL
import PlaitCore

/// A device's statement that its key was replaced (`plait rejoin --new-key`, PROTOCOL.md §21): the old
/// certificate names the new one, and both keys sign it, so peers that trusted the old Device ID can trust
/// the new one without pairing again.
///
/// The statement is the protobuf `Succession { bytes old_certificate = 1; bytes new_certificate = 2;
/// int64 issued_at = 3; }`, fields in number order; the signature is ECDSA P-256 by the old key over
/// SHA-256(`plait-succession-v1\0` ‖ statement), 64 bytes r ‖ s with s in the lower half of the group order. The
/// context string keeps it apart from the same key's TLS and change signatures. The new signature is the same by
/// the new key over SHA-256(`plait-succession-new-v1\0` ‖ statement): without it the old key alone could name any
/// certificate it has seen (another paired device's, one the user unpaired) as its successor.
public struct Succession: Hashable, Sendable {
    /// What the old key's signature covers ahead of the statement's bytes.
    public static let context: [UInt8] = Array("plait-succession-v1".utf8) + [0]
    /// What the new key's signature covers ahead of the statement's bytes: another string than the old key's, so
    /// one signature never stands for the other.
    public static let newContext: [UInt8] = Array("plait-succession-new-v1".utf8) + [0]
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

    /// What the new key signs.
    public static func newMessage(statement: [UInt8]) -> [UInt8] { newContext + statement }

    /// The statement naming `new`'s certificate, signed by both identities: what `rejoin --new-key` writes.
    public static func sign(
        old: Identity, new: Identity, issuedAt: Int64
    ) throws(IdentityError) -> (statement: [UInt8], signature: [UInt8], newSignature: [UInt8]) {
        let (statement, signature) = try sign(old: old, newCertificate: new.certificateDER, issuedAt: issuedAt)
        return (statement, signature, try newSignature(over: statement, by: new))
    }

    /// The statement and the old identity's signature of it alone: half of what a receiver takes (tests build
    /// statements whose new key cannot sign with it).
    public static func sign(
        old: Identity, newCertificate: [UInt8], issuedAt: Int64
    ) throws(IdentityError) -> (statement: [UInt8], signature: [UInt8]) {
        let statement = Succession(
            oldCertificate: old.certificateDER, newCertificate: newCertificate, issuedAt: issuedAt
        ).encoded()
        return (statement, try signature(over: statement, by: old))
    }

    /// `identity`'s signature of `statement` as the old key (any bytes: tests build wrong statements with it).
    public static func signature(over statement: [UInt8], by identity: Identity) throws(IdentityError) -> [UInt8] {
        try sign(message(statement: statement), by: identity)
    }

    /// `identity`'s signature of `statement` as the new key.
    public static func newSignature(over statement: [UInt8], by identity: Identity) throws(IdentityError) -> [UInt8] {
        try sign(newMessage(statement: statement), by: identity)
    }

    private static func sign(_ message: [UInt8], by identity: Identity) throws(IdentityError) -> [UInt8] {
        ERR_clear_error()
        guard let signature = P256.sign(message, key: identity.privateKey) else {
            throw .openSSL(operation: "sign a succession statement", message: openSSLErrorText())
        }
        return signature
    }

    /// Checks a statement received on a connection whose peer presented `connectionCertificate` (DER, from the
    /// TLS handshake, never from the message): that certificate must be the statement's old one, the signature
    /// must verify with its key, the new certificate must be a P-256 one other than the old, and the new signature
    /// must verify with the new certificate's key (PROTOCOL.md §21, checks 1 to 4 and 6).
    public static func verify(
        statement: [UInt8], signature: [UInt8], newSignature: [UInt8], connectionCertificate: [UInt8]
    ) throws(IdentityError) -> Succession {
        let succession = try Succession(decoding: statement)
        guard succession.oldCertificate == connectionCertificate else {
            throw .succession(.notFromOldKey)
        }
        let signed = message(statement: statement)
        guard let oldKey = P256.publicKey(certificate: connectionCertificate) else {
            throw .succession(.badSignature)
        }
        defer { EVP_PKEY_free(oldKey) }
        guard P256.verify(signature, message: signed, key: oldKey) else {
            throw .succession(.badSignature)
        }
        guard succession.newCertificate != succession.oldCertificate else {
            throw .succession(.malformed("the new certificate is the old one"))
        }
        guard let newKey = P256.publicKey(certificate: succession.newCertificate) else {
            throw .succession(.newCertificateUnusable)
        }
        defer { EVP_PKEY_free(newKey) }
        // The successor proves it holds its key: the old key alone vouches for nothing but itself.
        guard P256.verify(newSignature, message: newMessage(statement: statement), key: newKey) else {
            throw .succession(newSignature.isEmpty ? .newSignatureMissing : .badNewSignature)
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
    /// It carries no signature by the new certificate's key (its sender is a plait from before proof of
    /// possession, or a device naming a certificate whose key it lacks).
    case newSignatureMissing
    /// The new signature does not verify with the new certificate's key (or is not 64 bytes r ‖ s, low S).
    case badNewSignature

    public var description: String {
        switch self {
        case let .malformed(detail): return "the statement is malformed (\(detail))"
        case .notFromOldKey:
            return "its old certificate is not the certificate this connection was made with"
        case .badSignature: return "its signature does not verify with the old certificate's key"
        case .newCertificateUnusable: return "its new certificate does not parse as a P-256 certificate"
        case .newSignatureMissing:
            return "it is not signed by its new certificate's key (the successor must prove it holds that key)"
        case .badNewSignature: return "its new signature does not verify with the new certificate's key"
        }
    }
}
