import COpenSSL

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A device's P-256 key pair and self-signed certificate, kept in `key.pem` and `cert.pem`.
///
/// Immutable once made: OpenSSL 3 allows concurrent read-only use of an `EVP_PKEY` and an `X509`
/// (both reference counted), which is why this class can be `Sendable`.
public final class Identity: @unchecked Sendable {
    /// The private key's file name in an identity directory (PKCS#8 PEM, mode 0600).
    public static let keyFileName = "key.pem"
    /// The certificate's file name in an identity directory (PEM, mode 0644).
    public static let certificateFileName = "cert.pem"

    /// The private key (`EVP_PKEY *`), owned by this object: borrow it, never free it.
    package let privateKey: OpaquePointer
    /// The certificate (`X509 *`), owned by this object: borrow it, never free it.
    package let x509: OpaquePointer

    /// The SHA-256 of the certificate's DER encoding: what peers pin.
    public let deviceID: DeviceID
    /// The certificate in DER encoding.
    public let certificateDER: [UInt8]
    /// The certificate's subject common name (empty if it has none).
    public let commonName: String
    /// The end of the certificate's validity, e.g. `9999-12-31 23:59:59 UTC`.
    public let notAfter: String

    /// Takes ownership of `key` and `certificate`, freeing both if it throws.
    private init(key: OpaquePointer, certificate: OpaquePointer) throws {
        let der: [UInt8]
        do {
            der = try Self.derEncoding(of: certificate)
        } catch {
            EVP_PKEY_free(key)
            X509_free(certificate)
            throw error
        }
        self.privateKey = key
        self.x509 = certificate
        self.certificateDER = der
        self.deviceID = DeviceID(certificateDER: der)
        self.commonName = Self.commonName(of: certificate)
        self.notAfter = Self.text(of: X509_get0_notAfter(certificate))
    }

    deinit {
        X509_free(x509)
        EVP_PKEY_free(privateKey)
    }

    /// Makes a new key and certificate and writes them to `key.pem` and `cert.pem` in `directory`,
    /// which must exist. Refuses to replace either file if it is already there.
    public static func create(directory: String, commonName: String) throws -> Identity {
        guard !commonName.isEmpty, commonName.count <= maxCommonNameLength else {
            throw IdentityError.invalidCommonName(commonName)
        }
        let keyPath = path(directory, keyFileName)
        let certificatePath = path(directory, certificateFileName)
        for path in [keyPath, certificatePath] where fileExists(path) {
            throw IdentityError.fileExists(path: path)
        }

        ERR_clear_error()
        let key = try generateP256Key()
        let certificate: OpaquePointer
        do {
            certificate = try makeSelfSignedCertificate(key: key, commonName: commonName)
        } catch {
            EVP_PKEY_free(key)
            throw error
        }
        let identity = try Identity(key: key, certificate: certificate)

        var keyPEM = try identity.privateKeyPEM()
        defer { OPENSSL_cleanse(&keyPEM, keyPEM.count) }
        let certificatePEM = try identity.certificatePEM()
        try writeNewFile(keyPath, contents: keyPEM, mode: 0o600)
        do {
            try writeNewFile(certificatePath, contents: certificatePEM, mode: 0o644)
        } catch {
            // Half an identity is worse than none: the next `create` would refuse to run.
            unlink(keyPath)
            throw error
        }
        return identity
    }

    /// Reads `key.pem` and `cert.pem` from `directory` and checks that the key is the certificate's.
    public static func load(directory: String) throws -> Identity {
        let keyPath = path(directory, keyFileName)
        let certificatePath = path(directory, certificateFileName)
        let certificatePEM = try readFile(certificatePath)
        var keyPEM = try readFile(keyPath)
        defer { OPENSSL_cleanse(&keyPEM, keyPEM.count) }

        ERR_clear_error()
        guard let certificate = readPEM(certificatePEM, { PEM_read_bio_X509($0, nil, nil, nil) }) else {
            throw IdentityError.corruptFile(path: certificatePath, openSSLMessage: openSSLErrorText())
        }
        // A callback that supplies no passphrase: without one OpenSSL would prompt on the terminal.
        guard let key = readPEM(keyPEM, { PEM_read_bio_PrivateKey($0, nil, { _, _, _, _ in 0 }, nil) }) else {
            X509_free(certificate)
            throw IdentityError.corruptFile(path: keyPath, openSSLMessage: openSSLErrorText())
        }
        guard X509_check_private_key(certificate, key) == 1 else {
            ERR_clear_error()
            X509_free(certificate)
            EVP_PKEY_free(key)
            throw IdentityError.keyDoesNotMatchCertificate(directory: directory)
        }
        return try Identity(key: key, certificate: certificate)
    }

    /// Whether the current time lies within the certificate's validity period.
    public func isValidNow() -> Bool {
        X509_cmp_current_time(X509_get0_notBefore(x509)) < 0 && X509_cmp_current_time(X509_get0_notAfter(x509)) > 0
    }

    // MARK: - Making a key and a certificate

    private static let maxCommonNameLength = 64  // ub_common_name in RFC 5280

    /// A P-256 key, through the function forms Swift can call (EVP_EC_gen is a macro).
    private static func generateP256Key() throws -> OpaquePointer {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else {
            throw IdentityError.openSSL(operation: "create a key generation context", message: openSSLErrorText())
        }
        defer { EVP_PKEY_CTX_free(context) }
        var key: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1,
            EVP_PKEY_CTX_set_group_name(context, "P-256") == 1,
            EVP_PKEY_generate(context, &key) == 1,
            let key
        else {
            throw IdentityError.openSSL(operation: "generate a P-256 key", message: openSSLErrorText())
        }
        return key
    }

    /// An X.509 v3 certificate for `key`, signed by it, valid until the end of year 9999.
    private static func makeSelfSignedCertificate(key: OpaquePointer, commonName: String) throws -> OpaquePointer {
        guard let certificate = X509_new() else {
            throw IdentityError.openSSL(operation: "allocate a certificate", message: openSSLErrorText())
        }
        var done = false
        defer { if !done { X509_free(certificate) } }
        func check(_ ok: Bool, _ operation: String) throws {
            if !ok {
                throw IdentityError.openSSL(operation: operation, message: openSSLErrorText())
            }
        }

        try check(X509_set_version(certificate, Int(X509_VERSION_3)) == 1, "set the certificate version")

        // 128 random bits with the top one cleared: a positive serial, unique without a registry.
        var serial = try randomBytes(count: 16)
        serial[0] &= 0x7F
        if serial.allSatisfy({ $0 == 0 }) { serial[15] = 1 }
        guard let serialNumber = BN_bin2bn(serial, Int32(serial.count), nil) else {
            throw IdentityError.openSSL(operation: "make a serial number", message: openSSLErrorText())
        }
        defer { BN_free(serialNumber) }
        try check(
            BN_to_ASN1_INTEGER(serialNumber, X509_get_serialNumber(certificate)) != nil, "set the serial number")

        let name = X509_get_subject_name(certificate)
        let nameBytes = Array(commonName.utf8)
        try check(
            X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8, nameBytes, Int32(nameBytes.count), -1, 0) == 1,
            "set the common name")
        try check(X509_set_issuer_name(certificate, name) == 1, "set the issuer name")

        // A day in the past, so a peer whose clock lags ours still sees a certificate in force.
        try check(X509_gmtime_adj(X509_getm_notBefore(certificate), -86_400) != nil, "set the start of validity")
        // The pin, not the clock, is what peers trust: RFC 5280's "no well-defined expiration date".
        try check(
            ASN1_TIME_set_string(X509_getm_notAfter(certificate), "99991231235959Z") == 1, "set the end of validity")
        try check(X509_set_pubkey(certificate, key) == 1, "set the public key")

        var extensionContext = X509V3_CTX()
        X509V3_set_ctx(&extensionContext, certificate, certificate, nil, nil, 0)
        guard
            let basicConstraints = X509V3_EXT_conf_nid(
                nil, &extensionContext, NID_basic_constraints, "critical,CA:FALSE")
        else {
            throw IdentityError.openSSL(operation: "make the basicConstraints extension", message: openSSLErrorText())
        }
        defer { X509_EXTENSION_free(basicConstraints) }
        try check(X509_add_ext(certificate, basicConstraints, -1) == 1, "add the basicConstraints extension")

        try check(X509_sign(certificate, key, EVP_sha256()) > 0, "sign the certificate")
        done = true
        return certificate
    }

    // MARK: - Encodings

    private static func derEncoding(of certificate: OpaquePointer) throws -> [UInt8] {
        guard let der = PlaitTLS.derEncoding(ofCertificate: certificate) else {
            throw IdentityError.openSSL(operation: "encode the certificate", message: openSSLErrorText())
        }
        return der
    }

    /// The private key as unencrypted PKCS#8 PEM (`BEGIN PRIVATE KEY`).
    private func privateKeyPEM() throws -> [UInt8] {
        let key = privateKey
        guard let pem = withMemoryBIO(secure: true, { PEM_write_bio_PrivateKey($0, key, nil, nil, 0, nil, nil) == 1 })
        else {
            throw IdentityError.openSSL(operation: "encode the private key", message: openSSLErrorText())
        }
        return pem
    }

    private func certificatePEM() throws -> [UInt8] {
        let certificate = x509
        guard let pem = withMemoryBIO({ PEM_write_bio_X509($0, certificate) == 1 }) else {
            throw IdentityError.openSSL(operation: "encode the certificate", message: openSSLErrorText())
        }
        return pem
    }

    /// Runs an OpenSSL PEM reader over `pem` through a read-only memory BIO.
    private static func readPEM(_ pem: [UInt8], _ read: (OpaquePointer) -> OpaquePointer?) -> OpaquePointer? {
        pem.withUnsafeBytes { bytes -> OpaquePointer? in
            guard let bio = BIO_new_mem_buf(bytes.baseAddress, Int32(bytes.count)) else { return nil }
            defer { BIO_free(bio) }
            return read(bio)
        }
    }

    /// The subject common name of `certificate` (borrowed), or "" if it has none.
    static func commonName(of certificate: OpaquePointer) -> String {
        guard let name = X509_get_subject_name(certificate) else { return "" }
        let index = X509_NAME_get_index_by_NID(name, NID_commonName, -1)
        guard index >= 0, let entry = X509_NAME_get_entry(name, index),
            let data = X509_NAME_ENTRY_get_data(entry)
        else { return "" }
        var utf8: UnsafeMutablePointer<UInt8>?
        let length = ASN1_STRING_to_UTF8(&utf8, data)
        guard length >= 0, let utf8 else {
            ERR_clear_error()
            return ""
        }
        defer { plait_OPENSSL_free(utf8) }
        return String(decoding: UnsafeBufferPointer(start: utf8, count: Int(length)), as: UTF8.self)
    }

    /// `YYYY-MM-DD hh:mm:ss UTC`, sortable and unambiguous, unlike ASN1_TIME_print's `Dec 31 ... GMT`.
    private static func text(of time: UnsafePointer<ASN1_TIME>?) -> String {
        var parts = tm()
        guard let time, ASN1_TIME_to_tm(time, &parts) == 1 else {
            ERR_clear_error()
            return "unknown"
        }
        func padded(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        return "\(padded(parts.tm_year + 1900, 4))-\(padded(parts.tm_mon + 1, 2))-\(padded(parts.tm_mday, 2)) "
            + "\(padded(parts.tm_hour, 2)):\(padded(parts.tm_min, 2)):\(padded(parts.tm_sec, 2)) UTC"
    }

    // MARK: - Files

    private static let maxFileSize = 1 << 20

    private static func path(_ directory: String, _ name: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }

    private static func errnoText(_ code: Int32) -> String {
        String(cString: strerror(code))
    }

    private static func fileExists(_ path: String) -> Bool {
        var status = stat()
        return lstat(path, &status) == 0
    }

    private static func readFile(_ path: String) throws -> [UInt8] {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            let code = errno
            if code == ENOENT { throw IdentityError.fileMissing(path: path) }
            throw IdentityError.fileUnreadable(path: path, reason: errnoText(code))
        }
        defer { close(descriptor) }
        var contents: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = read(descriptor, &chunk, chunk.count)
            if count < 0 {
                if errno == EINTR { continue }
                throw IdentityError.fileUnreadable(path: path, reason: errnoText(errno))
            }
            if count == 0 { break }
            contents.append(contentsOf: chunk[0..<count])
            guard contents.count <= maxFileSize else {
                throw IdentityError.corruptFile(path: path, openSSLMessage: "larger than \(maxFileSize) bytes")
            }
        }
        OPENSSL_cleanse(&chunk, chunk.count)
        return contents
    }

    /// Creates `path` with `mode` (never replacing an existing file) and writes `contents` to disk.
    private static func writeNewFile(_ path: String, contents: [UInt8], mode: mode_t) throws {
        // O_EXCL makes "refuse to overwrite" atomic, and also refuses to follow a symlink planted there.
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
        guard descriptor >= 0 else {
            let code = errno
            if code == EEXIST { throw IdentityError.fileExists(path: path) }
            throw IdentityError.fileUnwritable(path: path, reason: errnoText(code))
        }
        var failure: Int32?
        contents.withUnsafeBytes { bytes in
            var offset = 0
            while offset < bytes.count {
                let count = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
                if count < 0 {
                    if errno == EINTR { continue }
                    failure = errno
                    return
                }
                offset += count
            }
        }
        if failure == nil && fsync(descriptor) != 0 { failure = errno }
        if close(descriptor) != 0 && failure == nil { failure = errno }
        if let failure {
            unlink(path)
            throw IdentityError.fileUnwritable(path: path, reason: errnoText(failure))
        }
    }
}
