#if canImport(Glibc)
import Glibc
#endif

/// What can go wrong setting up TLS, connecting, accepting, handshaking, reading or writing.
///
/// Cases that come from OpenSSL or the system carry their text (OpenSSL's `ERR_error_string_n`
/// messages, oldest first, or `strerror`); `description` is one sentence a user can act on.
public enum TLSError: Error, CustomStringConvertible {
    /// Nothing accepted the TCP connection at `address` (refused, or the network or host is unreachable).
    case refused(address: String, reason: String)
    /// `operation` (connecting, a handshake, reading, writing, waiting for a connection) did not
    /// finish within `after`.
    case timeout(operation: String, after: Duration)
    /// The TLS handshake failed on this side: wrong protocol version, no or a malformed certificate,
    /// a chain longer than one certificate, or a broken connection.
    case handshakeFailed(reason: String)
    /// The peer closed (or reset) the TCP connection in the middle of the TLS handshake, before any alert: what
    /// an overloaded or restarting peer does, not what a TLS server of another kind does (it would answer).
    case closedDuringHandshake(reason: String)
    /// The peer's certificate is well formed but its Device ID is not one this device trusts; the
    /// connection was closed before any application data went either way.
    case peerNotTrusted(DeviceID)
    /// The peer ended the connection with a TLS alert, typically because it does not trust this
    /// device (in TLS 1.3 a client learns this on its first read, after its handshake completed).
    case rejectedByPeer(reason: String)
    /// The client and the server have no application protocol in common (e.g. the client asked for
    /// pairing and the server is not pairing); `offered` is what the client offered, as far as
    /// this side knows it.
    case alpnMismatch(offered: [String])
    /// The connection broke or was closed (by the peer, or by this side before the operation).
    case closed(reason: String)
    /// The peer reset the connection after the handshake, without an alert: it went away (a plait from before
    /// 2026-11-25 could also refuse a client so, on its first read; one now refuses with the alert only).
    case connectionReset
    /// A socket call failed: resolving an address, creating, binding, listening or accepting.
    case socket(operation: String, reason: String)
    /// OpenSSL failed to set up a TLS context or connection.
    case openSSL(operation: String, message: String)

    public var description: String {
        switch self {
        case .refused(let address, let reason):
            return "could not connect to \(address) (\(reason)); check that plait is running there and "
                + "that the address and port are right."
        case .timeout(let operation, let after):
            return "timed out \(operation) after \(after); the peer or the network is not responding."
        case .handshakeFailed(let reason):
            return "the TLS handshake failed (\(reason)); the peer is not a plait device or runs an "
                + "incompatible version."
        case .closedDuringHandshake(let reason):
            return "the peer closed the connection during the TLS handshake (\(reason)); it may be overloaded or "
                + "restarting: try again in a moment."
        case .peerNotTrusted(let deviceID):
            return "device \(deviceID) is not paired with this device and was disconnected; pair it "
                + "with `plait pair` if you trust it."
        case .rejectedByPeer(let reason):
            return "the peer refused the connection (\(reason)); it has probably not paired with this "
                + "device: run `plait pair` on both."
        case .alpnMismatch(let offered):
            if let version = TLSApplicationProtocol.otherSyncVersion(in: offered) {
                let mine = TLSApplicationProtocol.syncVersion
                return "the peer speaks plait protocol \(version); this device speaks protocol \(mine): upgrade plait "
                    + (version < mine ? "there." : "on this device.")
            }
            let list = offered.isEmpty ? "nothing" : offered.joined(separator: ", ")
            return "the peer does not speak the protocol asked for (offered: \(list)); pairing works "
                + "only while `plait pair` runs on both devices."
        case .closed(let reason):
            return "the connection closed (\(reason)); it will be retried when the peer is back."
        case .connectionReset:
            return "the connection closed (\(errnoText(ECONNRESET))); it will be retried when the peer is back."
        case .socket(let operation, let reason):
            return "could not \(operation) (\(reason)); check the address and that the port is free."
        case .openSSL(let operation, let message):
            return "OpenSSL failed to \(operation) (\(message)); check the OpenSSL 3 installation."
        }
    }
}
