import COpenSSL

/// ECDSA P-256 with SHA-256 as plait uses it (PROTOCOL.md §20): signatures are 64 bytes r ‖ s with a low s, and
/// a certificate verifies only if it is exactly one DER certificate with a named-curve P-256 key. The one
/// implementation behind change signatures (PlaitStore's `P256Signer`, `P256Verifier`) and succession
/// statements (`Succession`).
/// P-256 facts and the conversions between OpenSSL's DER ECDSA-Sig-Value and plait's 64-byte r ‖ s.
package enum P256 {
    /// SHA-256 fetched once (a fetch by name on every call costs more than the hash).
    nonisolated(unsafe) package static let sha256: OpaquePointer? = EVP_MD_fetch(nil, "SHA256", nil)

    /// The group order n, big-endian.
    package static let order: [UInt8] = [
        0xFF, 0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF,
        0xBC, 0xE6, 0xFA, 0xAD, 0xA7, 0x17, 0x9E, 0x84, 0xF3, 0xB9, 0xCA, 0xC2, 0xFC, 0x63, 0x25, 0x51,
    ]
    /// ⌊n / 2⌋: an s above it is "high" (its twin n − s is valid too, and only the low one is accepted).
    package static let halfOrder: [UInt8] = {
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
    package static func hasP256Key(_ x509: OpaquePointer) -> Bool {
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
    package static func lowSSignature(fromDER der: ArraySlice<UInt8>) -> [UInt8]? {
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
    package static func derSignature(fromRaw raw: [UInt8]) -> [UInt8]? {
        guard raw.count == 64 else { return nil }
        let r = raw[0..<32]
        let s = raw[32..<64]
        guard isInRange(r), isInRange(s), !isHigh(s) else { return nil }
        let body = integer(r) + integer(s)
        // At most 2 × 35 bytes: the short form of the length always fits.
        return [0x30, UInt8(body.count)] + body
    }

    /// 1 ≤ value < n.
    package static func isInRange(_ value: ArraySlice<UInt8>) -> Bool {
        value.contains { $0 != 0 } && value.lexicographicallyPrecedes(order)
    }

    /// value > ⌊n / 2⌋ (32 bytes, big-endian).
    package static func isHigh(_ value: ArraySlice<UInt8>) -> Bool {
        halfOrder.lexicographicallyPrecedes(value)
    }

    /// a − b for 32-byte big-endian numbers with a ≥ b.
    package static func subtract(_ a: ArraySlice<UInt8>, _ b: ArraySlice<UInt8>) -> [UInt8] {
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

extension P256 {
    /// 64 bytes r ‖ s (low S) by `key` over SHA-256 of `message`; nil when OpenSSL fails (its error queue says
    /// why: `openSSLErrorText()`). Each call has its own context, so one key serves every thread.
    package static func sign(_ message: [UInt8], key: OpaquePointer) -> [UInt8]? {
        guard let algorithm = sha256, let context = EVP_MD_CTX_new() else { return nil }
        defer { EVP_MD_CTX_free(context) }
        // ECDSA_size for P-256 is 72: two 33-byte INTEGERs and three headers.
        var der = [UInt8](repeating: 0, count: 80)
        var length = der.count
        guard EVP_DigestSignInit(context, nil, algorithm, nil, key) == 1,
            EVP_DigestSign(context, &der, &length, message, message.count) == 1
        else { return nil }
        return lowSSignature(fromDER: der[0..<length])
    }

    /// Whether `signature` (64 bytes r ‖ s, low S, 1 ≤ r, s < n) is valid for `message` under `key`.
    package static func verify(_ signature: [UInt8], message: [UInt8], key: OpaquePointer) -> Bool {
        guard let der = derSignature(fromRaw: signature), let algorithm = sha256,
            let context = EVP_MD_CTX_new()
        else {
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

    /// The public key (`EVP_PKEY *`, owned: free it) of a certificate that is exactly one DER certificate with
    /// a P-256 key (`hasP256Key`); nil otherwise.
    package static func publicKey(certificate: [UInt8]) -> OpaquePointer? {
        certificate.withUnsafeBufferPointer { buffer -> OpaquePointer? in
            guard let base = buffer.baseAddress, buffer.count > 0, buffer.count <= Int(Int32.max) else { return nil }
            var cursor: UnsafePointer<UInt8>? = base
            guard let x509 = d2i_X509(nil, &cursor, buffer.count) else {
                ERR_clear_error()
                return nil
            }
            defer { X509_free(x509) }
            // Trailing bytes would let one key stand behind many "certificates": the DER must be exactly one.
            guard cursor == base + buffer.count, hasP256Key(x509) else { return nil }
            let key = X509_get_pubkey(x509)
            if key == nil { ERR_clear_error() }
            return key
        }
    }
}
