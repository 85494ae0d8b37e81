import COpenSSL

/// The SHA-256 digest of `bytes`.
package func sha256(_ bytes: [UInt8]) -> [UInt8] {
    var digest = [UInt8](repeating: 0, count: Int(SHA256_DIGEST_LENGTH))
    var length: UInt32 = 0
    let ok = bytes.withUnsafeBytes { input in
        EVP_Digest(input.baseAddress, input.count, &digest, &length, EVP_sha256(), nil)
    }
    // EVP_Digest with SHA-256 fails only when OpenSSL cannot allocate or has no default provider.
    precondition(ok == 1 && length == SHA256_DIGEST_LENGTH, "SHA-256 failed: \(openSSLErrorText())")
    return digest
}

/// `count` bytes from OpenSSL's CSPRNG.
package func randomBytes(count: Int) throws -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: count)
    guard RAND_bytes(&bytes, Int32(count)) == 1 else {
        throw IdentityError.openSSL(operation: "generate random bytes", message: openSSLErrorText())
    }
    return bytes
}

/// Empties this thread's OpenSSL error queue and returns its messages, oldest first.
package func openSSLErrorText() -> String {
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

/// Runs `body` with an empty memory BIO and returns what it wrote there, or nil if `body` failed.
/// A `secure` BIO keeps its buffer in OpenSSL's secure heap and wipes it when freed: use it for keys.
func withMemoryBIO(secure: Bool = false, _ body: (OpaquePointer) -> Bool) -> [UInt8]? {
    guard let bio = BIO_new(secure ? BIO_s_secmem() : BIO_s_mem()) else { return nil }
    defer { BIO_free(bio) }
    guard body(bio) else { return nil }
    var data: UnsafeMutablePointer<CChar>?
    let length = plait_BIO_get_mem_data(bio, &data)
    guard length >= 0, let data else { return length == 0 ? [] : nil }
    return data.withMemoryRebound(to: UInt8.self, capacity: length) {
        Array(UnsafeBufferPointer(start: $0, count: length))
    }
}

/// The DER encoding of a certificate (`X509 *`, borrowed), or nil if OpenSSL cannot encode it.
package func derEncoding(ofCertificate certificate: OpaquePointer) -> [UInt8]? {
    // i2d_X509 advances the pointer it writes through: ask for the length first, then write
    // through a copy of the buffer's address.
    let length = i2d_X509(certificate, nil)
    guard length > 0 else { return nil }
    var der = [UInt8](repeating: 0, count: Int(length))
    let written = der.withUnsafeMutableBufferPointer { buffer -> Int32 in
        var cursor = buffer.baseAddress
        return i2d_X509(certificate, &cursor)
    }
    return written == length ? der : nil
}
