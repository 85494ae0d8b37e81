import Foundation
import HummingbirdTLS
import PlaitSync
import PlaitTLS

/// The certificate the API serves HTTPS with when it listens beyond loopback (DESIGN §12): a P-256 key and a
/// self-signed certificate in `<home>/gui/` (key.pem mode 0600, cert.pem), made on first use. It is NOT the
/// device's sync identity: a browser that is shown it, or a proxy that terminates it, learns nothing that lets
/// it pose as the device to its peers, and it can be replaced (delete the directory) without re-pairing.
/// Browsers cannot check a self-signed certificate by name: the user compares the SHA-256 fingerprint that
/// `plait gui` prints with the one the browser shows.
public struct GUICertificate: Sendable {
    public static let directoryName = "gui"

    /// The certificate's SHA-256 fingerprint as browsers show it: 32 upper-case hex bytes joined by ':'.
    public let fingerprint: String
    let keyPath: String
    let certificatePath: String

    /// Loads `<homePath>/gui/`, making the key and certificate first if there are none.
    public static func ensure(homePath: String) throws -> GUICertificate {
        let directory = homePath + "/" + directoryName
        let identity: Identity
        if FileManager.default.fileExists(atPath: directory + "/" + Identity.certificateFileName) {
            identity = try Identity.load(directory: directory)
        } else {
            guard mkdir(directory, 0o700) == 0 || errno == EEXIST else {
                throw PlaitError.file(
                    path: directory, problem: "cannot be created (\(String(cString: strerror(errno))))")
            }
            identity = try Identity.create(directory: directory, commonName: "plait GUI")
        }
        return GUICertificate(
            fingerprint: Self.fingerprint(of: identity), keyPath: directory + "/" + Identity.keyFileName,
            certificatePath: directory + "/" + Identity.certificateFileName)
    }

    /// The fingerprint of the certificate in `<homePath>/gui/`, or nil when none was made yet.
    public static func existingFingerprint(homePath: String) throws -> String? {
        let directory = homePath + "/" + directoryName
        guard FileManager.default.fileExists(atPath: directory + "/" + Identity.certificateFileName) else {
            return nil
        }
        return fingerprint(of: try Identity.load(directory: directory))
    }

    /// A Device ID is the SHA-256 of the certificate's DER, which is what a browser's fingerprint is.
    static func fingerprint(of identity: Identity) -> String {
        identity.deviceID.digest.map { String(format: "%02X", $0) }.joined(separator: ":")
    }

    /// The server side of TLS with this certificate (TLS 1.2 or later; no client certificates asked for).
    func serverConfiguration() throws -> TLSConfiguration {
        let certificate = try NIOSSLCertificate(file: certificatePath, format: .pem)
        let key = try NIOSSLPrivateKey(file: keyPath, format: .pem)
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(certificate)], privateKey: .privateKey(key))
        configuration.minimumTLSVersion = .tlsv12
        return configuration
    }
}
