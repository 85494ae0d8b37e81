import COpenSSL
import PlaitCore

/// OpenSSL's SHA-256, injected into Core (DESIGN §12): every change hash, chain check and state digest goes
/// through it once installed. Core's pure-Swift implementation stays as the reference the tests compare with.
public enum FastSHA256 {
    /// The SHA-256 algorithm fetched once: OpenSSL 3 looks an algorithm up by name on every call that passes
    /// the legacy `EVP_sha256()`, which costs more than hashing a change.
    nonisolated(unsafe) private static let algorithm: OpaquePointer? = EVP_MD_fetch(nil, "SHA256", nil)

    /// One SHA-256 over `bytes`; the reference when OpenSSL has no SHA-256 (a FIPS-only build without it).
    public static let function: SHA256.Function = { bytes in
        guard let algorithm else { return SHA256.reference(bytes) }
        var digest = [UInt8](repeating: 0, count: 32)
        var size: UInt32 = 0
        let ok = digest.withUnsafeMutableBufferPointer { out in
            EVP_Digest(bytes.baseAddress, bytes.count, out.baseAddress, &size, algorithm, nil)
        }
        guard ok == 1, size == 32 else { return SHA256.reference(bytes) }
        return digest
    }

    /// A new incremental SHA-256 on OpenSSL's; the reference when OpenSSL has none.
    public static let stream: SHA256.StreamFunction = {
        if let algorithm, let context = Stream(algorithm) { return context }
        return SHA256.ReferenceStream()
    }

    /// Installs it as Core's SHA-256, once per process.
    public static func install() { _ = installOnce }

    private static let installOnce: Void = SHA256.install(function, stream: stream)

    /// One OpenSSL digest context, fed in pieces; freed with it.
    final class Stream: SHA256Stream {
        private let context: OpaquePointer

        init?(_ algorithm: OpaquePointer) {
            guard let context = EVP_MD_CTX_new() else { return nil }
            guard EVP_DigestInit_ex(context, algorithm, nil) == 1 else {
                EVP_MD_CTX_free(context)
                return nil
            }
            self.context = context
        }

        deinit { EVP_MD_CTX_free(context) }

        func update(_ bytes: UnsafeRawBufferPointer) {
            guard !bytes.isEmpty else { return }
            // Cannot fail for an initialized SHA-256 context (OpenSSL fails it only for a context without one).
            let ok = EVP_DigestUpdate(context, bytes.baseAddress, bytes.count)
            precondition(ok == 1, "EVP_DigestUpdate failed")
        }

        func finalize() -> [UInt8] {
            var digest = [UInt8](repeating: 0, count: 32)
            var size: UInt32 = 0
            let ok = digest.withUnsafeMutableBufferPointer { EVP_DigestFinal_ex(context, $0.baseAddress, &size) }
            precondition(ok == 1 && size == 32, "EVP_DigestFinal_ex failed")
            return digest
        }
    }
}
