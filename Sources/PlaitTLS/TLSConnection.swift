import COpenSSL

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One TLS 1.3 connection to a peer over a non-blocking TCP socket, which it owns.
///
/// Driven by exactly one owner thread (or event loop): never call it from two threads, and never
/// let two threads share its socket. The owner polls `fileDescriptor` and calls `handshake()`
/// until `.done`, then `read(into:)` and `write(_:)`, each of which returns at once with bytes or
/// with what to wait for. `@unchecked Sendable` only so a connection can be handed to its owner.
///
/// After the handshake the peer's Device ID is checked against the trust predicate given at
/// creation (it is also checked during the handshake, so that an unknown peer gets a TLS alert);
/// an untrusted peer is disconnected before any application byte is read or written. The one
/// exception is the pairing protocol (`plait-pair/1`), which admits any certificate: see `admits`.
/// Whoever drives a connection must check `applicationProtocol` before speaking. In TLS 1.3 a
/// client's handshake completes before the server has judged the client's certificate: a client
/// learns that it was refused on its first read, so the protocol's first message from the server
/// is what tells a client it was accepted.
///
/// After a thrown error or a `.closed` result the connection is closed; `close()` is idempotent
/// and also runs on deinit.
public final class TLSConnection: @unchecked Sendable {
    /// Where a handshake stands after one step.
    public enum HandshakeProgress: Sendable, Equatable {
        /// The handshake is complete and the peer is admitted (trusted, or pairing): application
        /// data may flow.
        case done
        /// Call again once the socket is readable.
        case wantRead
        /// Call again once the socket is writable.
        case wantWrite
    }

    /// The outcome of one `read(into:)` or `write(_:)`.
    public enum IOResult: Sendable, Equatable {
        /// This many bytes were read or written (more than zero, unless the buffer was empty).
        case bytes(Int)
        /// Nothing could be done: call again once the socket is readable.
        case wantRead
        /// Nothing could be done: call again once the socket is writable (with the same bytes, for a write).
        case wantWrite
        /// The peer closed the connection (or it is already closed); this side is closed too.
        case closed
    }

    private enum State {
        case handshaking
        case established
        case closed
    }

    /// The socket, for poll(2); valid until the connection is closed.
    public let fileDescriptor: Int32
    /// The context this connection was made from.
    public let context: TLSContext
    /// The peer's Device ID, once the handshake is done (nil before).
    public private(set) var peerDeviceID: DeviceID?
    /// The DER encoding of the certificate the peer presented in the handshake, once it is done;
    /// the pairing protocol binds its codes to these bytes.
    public private(set) var peerCertificateDER: [UInt8]?
    /// The application protocol both sides agreed on (e.g. `plait-sync/2`), once the handshake is done.
    public private(set) var negotiatedALPN: String?
    /// The subject common name of the peer's certificate (the name that device gave itself at `plait
    /// init`; empty if none), once the handshake is done. It travels inside the certificate whose hash is
    /// the Device ID, so it belongs to that device; what it says is the device's own claim.
    public private(set) var peerCommonName: String?

    /// The `SSL *`, owned by this object.
    let ssl: OpaquePointer
    /// Decides which Device IDs may connect; may be called more than once per handshake.
    let trust: @Sendable (DeviceID) -> Bool
    private var state = State.handshaking
    /// Set after a fatal TLS error or a refused peer: no close_notify is sent then.
    private var broken = false
    /// Set by the verify callback when the trust predicate refused the peer's certificate.
    var untrustedPeer: DeviceID?
    /// The common name of a refused peer's certificate: the name that device gave itself at `plait init`, its own
    /// unverified claim, which is all a user has to tell a device asking to be trusted from another.
    public internal(set) var untrustedPeerName: String?
    /// Set by the ALPN callback (servers) when the client offered nothing the server accepts.
    var refusedALPN: [String]?

    /// Takes ownership of a connected TCP socket (made non-blocking here) and prepares the TLS side
    /// given by `context`. Closes the socket if it throws.
    public init(adopting fileDescriptor: Int32, context: TLSContext, trust: @escaping @Sendable (DeviceID) -> Bool)
        throws
    {
        ERR_clear_error()
        do {
            try setNonBlocking(fileDescriptor)
        } catch {
            closeSocket(fileDescriptor)
            throw error
        }
        guard let ssl = SSL_new(context.context) else {
            closeSocket(fileDescriptor)
            throw TLSError.openSSL(operation: "create a TLS connection", message: openSSLErrorText())
        }
        guard SSL_set_fd(ssl, fileDescriptor) == 1 else {
            let message = openSSLErrorText()
            SSL_free(ssl)
            closeSocket(fileDescriptor)
            throw TLSError.openSSL(operation: "attach a socket to a TLS connection", message: message)
        }
        if context.isServer {
            SSL_set_accept_state(ssl)
        } else {
            SSL_set_connect_state(ssl)
        }
        self.fileDescriptor = fileDescriptor
        self.context = context
        self.ssl = ssl
        self.trust = trust
        // The callbacks find this object through the SSL; it outlives the SSL, which it frees.
        _ = plait_SSL_set_app_data(ssl, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit {
        close()
        SSL_free(ssl)
    }

    /// Whether this connection is the server side.
    public var isServer: Bool { context.isServer }

    /// The application protocol selected so far in the handshake. ALPN is settled before either side
    /// sees the other's certificate (a TLS 1.3 server selects it from the ClientHello; the client reads
    /// it in EncryptedExtensions, before the server's Certificate), so the verify callback can use it.
    private var selectedALPN: String? {
        var name: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &name, &length)
        return name.map { String(decoding: UnsafeBufferPointer(start: $0, count: Int(length)), as: UTF8.self) }
    }

    /// Whether a peer presenting the certificate of `deviceID` may complete the handshake.
    ///
    /// On the pairing protocol any device may: the peer is not trusted yet by definition, pairing
    /// authenticates it by numeric comparison, and a pairing connection carries nothing but pairing
    /// messages (the sync protocol refuses it). Only a context that speaks pairing (a server made with
    /// `acceptsPairing`, a client offering it) can select it. On every other protocol only a device the
    /// trust predicate accepts may.
    func admits(_ deviceID: DeviceID) -> Bool {
        if selectedALPN == TLSApplicationProtocol.pairing.rawValue, context.applicationProtocols.contains(.pairing) {
            return true
        }
        return trust(deviceID)
    }

    /// Whether the connection is closed.
    public var isClosed: Bool { state == .closed }

    /// The TLS version in use, e.g. `TLSv1.3`.
    public var protocolVersion: String {
        String(cString: SSL_get_version(ssl))
    }

    /// The negotiated application protocol as a value, once the handshake is done.
    public var applicationProtocol: TLSApplicationProtocol? {
        negotiatedALPN.flatMap(TLSApplicationProtocol.init(rawValue:))
    }

    /// Whether OpenSSL holds decrypted bytes not yet returned by `read(into:)`; poll(2) does not see
    /// them, so read until `.wantRead` before polling again.
    public var hasBufferedBytes: Bool {
        state == .established && SSL_pending(ssl) > 0
    }

    // MARK: - Handshake

    /// Advances the handshake as far as the socket allows. At `.done` the negotiated protocol and
    /// the peer's Device ID are known and the peer is trusted; otherwise it throws (and closes):
    /// `peerNotTrusted`, `alpnMismatch`, `rejectedByPeer`, `handshakeFailed` or `closed`.
    public func handshake() throws -> HandshakeProgress {
        switch state {
        case .established: return .done
        case .closed: throw TLSError.closed(reason: "the connection is already closed")
        case .handshaking: break
        }
        ERR_clear_error()
        errno = 0
        let result = SSL_do_handshake(ssl)
        if result == 1 {
            try establish()
            return .done
        }
        let code = SSL_get_error(ssl, result)
        switch code {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        default: throw fail(code)
        }
    }

    /// Whether this side, a server, has answered a complete ClientHello (sent its first flight, paying for a key
    /// exchange): the client speaks TLS. A connection that sent nothing, garbage or a partial ClientHello has
    /// not; an agent dropping one of several handshakes drops such a one first.
    public var hasAnsweredClientHello: Bool {
        guard isServer, state == .handshaking else { return state == .established }
        let step = SSL_get_state(ssl)
        return step != TLS_ST_BEFORE && step != TLS_ST_SR_CLNT_HELLO
    }

    /// The checks after OpenSSL's handshake: one agreed application protocol, TLS 1.3, and a
    /// trusted peer certificate. Any failure closes the connection before application data flows.
    private func establish() throws {
        guard let alpn = selectedALPN, context.applicationProtocols.contains(where: { $0.rawValue == alpn }) else {
            throw refuse(.alpnMismatch(offered: isServer ? [] : context.alpnNames))
        }
        guard SSL_version(ssl) == TLS1_3_VERSION else {
            throw refuse(.handshakeFailed(reason: "the peer negotiated \(protocolVersion), not TLSv1.3"))
        }
        guard let certificate = SSL_get1_peer_certificate(ssl) else {
            throw refuse(.handshakeFailed(reason: "the peer presented no certificate"))
        }
        let der = derEncoding(ofCertificate: certificate)
        let commonName = Identity.commonName(of: certificate)
        X509_free(certificate)
        guard let der else {
            throw refuse(.handshakeFailed(reason: "cannot encode the peer's certificate: \(openSSLErrorText())"))
        }
        let verification = Int32(SSL_get_verify_result(ssl))
        guard verification == X509_V_OK || verification == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT else {
            throw refuse(.handshakeFailed(reason: String(cString: X509_verify_cert_error_string(Int(verification)))))
        }
        let deviceID = DeviceID(certificateDER: der)
        guard admits(deviceID) else {
            untrustedPeerName = commonName
            throw refuse(.peerNotTrusted(deviceID))
        }
        negotiatedALPN = alpn
        peerCertificateDER = der
        peerCommonName = commonName
        peerDeviceID = deviceID
        state = .established
    }

    /// Closes without a close_notify (nothing more goes to a refused peer) and returns `error`.
    private func refuse(_ error: TLSError) -> TLSError {
        broken = true
        close()
        return error
    }

    // MARK: - Application data

    /// Reads up to `buffer.count` decrypted bytes without blocking. Throws `closed` or
    /// `rejectedByPeer` when the connection breaks (and closes it). Only after the handshake.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws -> IOResult {
        switch state {
        case .closed: return .closed
        case .handshaking: preconditionFailure("TLSConnection.read before the handshake is done")
        case .established: break
        }
        guard let base = buffer.baseAddress, buffer.count > 0 else { return .bytes(0) }
        ERR_clear_error()
        errno = 0
        let result = SSL_read(ssl, base, Int32(clamping: buffer.count))
        if result > 0 { return .bytes(Int(result)) }
        return try outcome(of: result)
    }

    /// Reads into `buffer` from index 0, up to its count, without blocking.
    public func read(into buffer: inout [UInt8]) throws -> IOResult {
        try buffer.withUnsafeMutableBytes { try read(into: $0) }
    }

    /// Writes some of `bytes` without blocking: `.bytes(n)` for the first n written. After
    /// `.wantWrite` or `.wantRead`, call again with the same bytes (at least as many) when ready.
    /// Throws `closed` or `rejectedByPeer` when the connection breaks (and closes it). Only after
    /// the handshake.
    public func write(_ bytes: UnsafeRawBufferPointer) throws -> IOResult {
        switch state {
        case .closed: return .closed
        case .handshaking: preconditionFailure("TLSConnection.write before the handshake is done")
        case .established: break
        }
        guard let base = bytes.baseAddress, bytes.count > 0 else { return .bytes(0) }
        ERR_clear_error()
        errno = 0
        let result = SSL_write(ssl, base, Int32(clamping: bytes.count))
        if result > 0 { return .bytes(Int(result)) }
        return try outcome(of: result)
    }

    /// Writes some of `bytes[offset...]` without blocking; see `write(_:)`.
    public func write(_ bytes: [UInt8], from offset: Int = 0) throws -> IOResult {
        try bytes.withUnsafeBytes { try write(UnsafeRawBufferPointer(rebasing: $0[offset...])) }
    }

    /// Writes some of `bytes` without blocking; see `write(_:)`.
    public func write(_ bytes: ArraySlice<UInt8>) throws -> IOResult {
        try bytes.withUnsafeBytes { try write($0) }
    }

    /// What an SSL_read or SSL_write that returned `result` (not above zero) means.
    private func outcome(of result: Int32) throws -> IOResult {
        let code = SSL_get_error(ssl, result)
        switch code {
        case SSL_ERROR_WANT_READ:
            return .wantRead
        case SSL_ERROR_WANT_WRITE:
            return .wantWrite
        case SSL_ERROR_ZERO_RETURN:
            close()  // the peer's close_notify: answer with ours
            return .closed
        case SSL_ERROR_SSL where ERR_GET_REASON(ERR_peek_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING,
            SSL_ERROR_SYSCALL where ERR_peek_error() == 0 && errno == 0:
            // The peer closed the socket without a close_notify. Frames are length-prefixed, so a
            // cut inside one is still detected above this layer.
            ERR_clear_error()
            broken = true
            close()
            return .closed
        default:
            throw fail(code)
        }
    }

    // MARK: - Failures and closing

    /// Turns the error OpenSSL just reported into a `TLSError`, marks the connection broken and closes it.
    private func fail(_ code: Int32) -> TLSError {
        let savedErrno = errno
        let reason = ERR_GET_REASON(ERR_peek_error())
        let text: String
        if ERR_peek_error() != 0 {
            text = openSSLErrorText()
        } else if code == SSL_ERROR_SYSCALL {
            text = savedErrno == 0 ? "the peer closed the connection" : errnoText(savedErrno)
        } else {
            text = "OpenSSL error \(code)"
        }
        let handshaking = state == .handshaking
        broken = true
        close()
        if let untrustedPeer {
            return .peerNotTrusted(untrustedPeer)
        }
        if let refusedALPN {
            return .alpnMismatch(offered: refusedALPN)
        }
        if reason == SSL_R_TLSV1_ALERT_NO_APPLICATION_PROTOCOL {
            return .alpnMismatch(offered: context.alpnNames)
        }
        // Reasons from SSL_AD_REASON_OFFSET up are alerts the peer sent (ours would be logged as
        // the cause, e.g. "certificate verify failed").
        if reason > SSL_AD_REASON_OFFSET && reason < SSL_AD_REASON_OFFSET + 256 {
            return .rejectedByPeer(reason: text)
        }
        // The stream ended (or was reset) with no alert: the peer dropped the connection, e.g. an agent over its
        // handshake limits. A TLS peer that disliked the handshake would have sent an alert instead.
        let hungUp = code == SSL_ERROR_SYSCALL && [0, ECONNRESET, EPIPE].contains(savedErrno)
        if handshaking && (hungUp || reason == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
            return .closedDuringHandshake(reason: text)
        }
        // After the handshake a reset is its own case: a client that was refused may learn it only this way.
        if !handshaking && code == SSL_ERROR_SYSCALL && savedErrno == ECONNRESET { return .connectionReset }
        return handshaking ? .handshakeFailed(reason: text) : .closed(reason: text)
    }

    /// Sends a close_notify if the connection is healthy and keeps it open for reading (see
    /// `closeGracefully(timeout:)`). Only after the handshake; idempotent.
    func shutdownSending() {
        guard state == .established, !broken else { return }
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
        ERR_clear_error()
    }

    /// Sends a close_notify if the connection is healthy, then closes the socket. Idempotent.
    public func close() {
        guard state != .closed else { return }
        if state == .established && !broken {
            // One non-blocking attempt: the peer's close_notify is not awaited.
            ERR_clear_error()
            _ = SSL_shutdown(ssl)
            ERR_clear_error()
        }
        state = .closed
        if isServer && untrustedPeer != nil {
            // A refused client learns it from the alert just sent, not from a reset (PROTOCOL.md §3).
            LingeringClose.shared.close(fileDescriptor)
        } else {
            closeSocket(fileDescriptor)
        }
    }
}

extension TLSConnection {
    /// The numeric address of the peer ("192.168.1.20", "fe80::1"), or nil once the socket is closed.
    public var peerHost: String? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let found = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fileDescriptor, $0, &length) }
        }
        guard found == 0 else { return nil }
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        let resolved = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                getnameinfo($0, length, &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST)
            }
        }
        guard resolved == 0 else { return nil }
        return String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
