import COpenSSL

/// The TLS settings of one side of plait's transport: an `SSL_CTX` for TLS 1.3 only, with the
/// device's certificate, mutual authentication by self-signed certificates, no resumption, and ALPN.
///
/// Immutable once made; OpenSSL allows creating connections from one `SSL_CTX` on several threads
/// at once, which is why this class can be `Sendable`. A server that should accept pairing gets its
/// own context (`.server(acceptsPairing: true)`) for as long as pairing runs.
public final class TLSContext: @unchecked Sendable {
    /// Which side of the handshake a context is for, and the application protocols it speaks.
    public enum Role: Sendable, Equatable {
        /// Accepts connections; selects `plait-sync/2`, and `plait-pair/1` too when `acceptsPairing`.
        /// A pairing connection admits a client whatever its certificate (the pairing protocol is what
        /// authenticates it); a sync connection only a client the trust predicate accepts.
        case server(acceptsPairing: Bool)
        /// Makes connections and offers exactly one application protocol. Offering `plait-pair/1`
        /// admits a server whatever its certificate, as above.
        case client(offering: TLSApplicationProtocol)
    }

    /// The side of the handshake this context is for.
    public let role: Role
    /// The identity whose certificate and key this context presents.
    public let identity: Identity
    /// What a server accepts (in preference order) or the one protocol a client offers.
    public let applicationProtocols: [TLSApplicationProtocol]

    /// The `SSL_CTX *`, owned by this object; connections made from it keep this object alive.
    let context: OpaquePointer
    /// What the ALPN select callback reads; retained here because OpenSSL holds it unretained.
    private let alpnList: ALPNList

    /// The ALPN names this context offers (a client) or selects from (a server), in order.
    public var alpnNames: [String] { alpnList.names.map { String(decoding: $0, as: UTF8.self) } }

    /// Whether this context accepts connections.
    public var isServer: Bool {
        if case .server = role { return true }
        return false
    }

    /// Makes a context presenting `identity`'s certificate. Ignores SIGPIPE (see `TLS.setUp()`).
    public init(identity: Identity, role: Role) throws {
        TLS.setUp()
        let isServer: Bool
        switch role {
        case .server(let acceptsPairing):
            isServer = true
            applicationProtocols = acceptsPairing ? [.sync, .pairing] : [.sync]
        case .client(let offered):
            isServer = false
            applicationProtocols = [offered]
        }
        self.role = role
        self.identity = identity
        alpnList = ALPNList(applicationProtocols.map(\.rawValue))
        context = try Self.makeContext(identity: identity, isServer: isServer, alpnList: alpnList)
    }

    /// A context speaking exactly the ALPN `names` given (offered as a client, selected in this order as a
    /// server), whatever this build speaks: how tests play a device running another plait version (an older one
    /// offers or selects only `plait-sync/1`). The names are not `TLSApplicationProtocol`s, so such a connection's
    /// `applicationProtocol` is nil and no session runs on it.
    package init(identity: Identity, isServer: Bool, rawApplicationProtocols names: [String]) throws {
        TLS.setUp()
        role = isServer ? .server(acceptsPairing: false) : .client(offering: .sync)
        self.identity = identity
        applicationProtocols = []
        alpnList = ALPNList(names)
        context = try Self.makeContext(identity: identity, isServer: isServer, alpnList: alpnList)
    }

    deinit {
        SSL_CTX_free(context)
    }

    private static func makeContext(identity: Identity, isServer: Bool, alpnList: ALPNList) throws -> OpaquePointer {
        ERR_clear_error()
        guard let context = SSL_CTX_new(isServer ? TLS_server_method() : TLS_client_method()) else {
            throw TLSError.openSSL(operation: "create a TLS context", message: openSSLErrorText())
        }
        var done = false
        defer { if !done { SSL_CTX_free(context) } }
        func check(_ ok: Bool, _ operation: String) throws {
            if !ok {
                throw TLSError.openSSL(operation: operation, message: openSSLErrorText())
            }
        }

        let version = Int32(TLS1_3_VERSION)
        try check(plait_SSL_CTX_set_min_proto_version(context, version) == 1, "require TLS 1.3")
        try check(plait_SSL_CTX_set_max_proto_version(context, version) == 1, "require TLS 1.3")

        // No resumption: every connection proves both certificates afresh. In TLS 1.3 SSL_OP_NO_TICKET
        // alone would switch to stateful tickets; zero tickets means none are sent.
        _ = SSL_CTX_set_options(context, plait_SSL_OP_NO_TICKET())
        try check(SSL_CTX_set_num_tickets(context, 0) == 1, "turn session tickets off")
        _ = plait_SSL_CTX_set_session_cache_mode(context, Int(SSL_SESS_CACHE_OFF))

        // Non-blocking writes: return after each record, and let a retry pass the same bytes at
        // another address (a Swift array may move between calls).
        _ = plait_SSL_CTX_set_mode(
            context, Int(SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER))

        try check(SSL_CTX_use_certificate(context, identity.x509) == 1, "use the device certificate")
        try check(SSL_CTX_use_PrivateKey(context, identity.privateKey) == 1, "use the device key")
        try check(SSL_CTX_check_private_key(context) == 1, "match the device key to its certificate")

        // Both sides present a certificate; each is self-signed and trusted only by its pin.
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, plaitVerifyPeer)
        // The pin, not the clock, is what is trusted: a peer whose clock is off still connects.
        try check(
            X509_VERIFY_PARAM_set_flags(SSL_CTX_get0_param(context), UInt(X509_V_FLAG_NO_CHECK_TIME)) == 1,
            "turn certificate time checks off")

        if isServer {
            SSL_CTX_set_alpn_select_cb(context, plaitSelectALPN, Unmanaged.passUnretained(alpnList).toOpaque())
        } else {
            let wire = alpnList.wireFormat
            // SSL_CTX_set_alpn_protos returns 0 on success, unlike nearly everything else.
            try check(SSL_CTX_set_alpn_protos(context, wire, UInt32(wire.count)) == 0, "set the ALPN protocol")
        }
        done = true
        return context
    }
}

/// The application protocols a server selects from, in preference order.
final class ALPNList: Sendable {
    let names: [[UInt8]]

    init(_ names: [String]) {
        self.names = names.map { Array($0.utf8) }
    }

    /// The ALPN wire format: each name preceded by its length in one byte.
    var wireFormat: [UInt8] {
        names.flatMap { [UInt8($0.count)] + $0 }
    }
}

/// The connection an `SSL *` belongs to, or nil for an SSL not made by `TLSConnection`.
private func owningConnection(of ssl: OpaquePointer?) -> TLSConnection? {
    guard let ssl, let pointer = plait_SSL_get_app_data(ssl) else { return nil }
    return Unmanaged<TLSConnection>.fromOpaque(pointer).takeUnretainedValue()
}

/// Certificate verification (`SSL_verify_cb`), on the thread driving the handshake.
///
/// Accepts only a chain of exactly one certificate, at depth 0, whose only fault is being
/// self-signed (X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT), and whose Device ID the connection admits
/// (its trust predicate accepts it, or the pairing protocol was selected); anything else fails the handshake with a TLS alert, so an unknown peer learns
/// nothing but that. OpenSSL calls this once with the self-signed error and again with
/// `preverified == 1` when the chain is done.
private func plaitVerifyPeer(_ preverified: Int32, _ store: OpaquePointer?) -> Int32 {
    guard let store else { return 0 }
    let depth = X509_STORE_CTX_get_error_depth(store)
    let error = X509_STORE_CTX_get_error(store)
    guard depth == 0, preverified == 1 || error == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT else { return 0 }
    // The chain as built, and as the peer sent it (leaf included): one certificate each.
    guard plait_sk_X509_num(X509_STORE_CTX_get0_chain(store)) == 1,
        plait_sk_X509_num(X509_STORE_CTX_get0_untrusted(store)) == 1
    else {
        X509_STORE_CTX_set_error(store, X509_V_ERR_CERT_REJECTED)
        return 0
    }
    let ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx()).map(OpaquePointer.init)
    guard let connection = owningConnection(of: ssl),
        let certificate = X509_STORE_CTX_get_current_cert(store),
        let der = derEncoding(ofCertificate: certificate)
    else {
        X509_STORE_CTX_set_error(store, X509_V_ERR_CERT_REJECTED)
        return 0
    }
    let deviceID = DeviceID(certificateDER: der)
    guard connection.admits(deviceID) else {
        connection.untrustedPeer = deviceID
        connection.untrustedPeerName = Identity.commonName(of: certificate)
        X509_STORE_CTX_set_error(store, X509_V_ERR_CERT_REJECTED)
        return 0
    }
    return 1
}

/// ALPN selection on a server (`SSL_CTX_alpn_select_cb_func`): the first of the server's protocols,
/// in its order, that the client offered. None in common fails the handshake with a
/// no_application_protocol alert.
private func plaitSelectALPN(
    _ ssl: OpaquePointer?,
    _ selected: UnsafeMutablePointer<UnsafePointer<UInt8>?>?,
    _ selectedLength: UnsafeMutablePointer<UInt8>?,
    _ offered: UnsafePointer<UInt8>?,
    _ offeredLength: UInt32,
    _ argument: UnsafeMutableRawPointer?
) -> Int32 {
    guard let argument, let selected, let selectedLength else { return SSL_TLSEXT_ERR_ALERT_FATAL }
    let accepted = Unmanaged<ALPNList>.fromOpaque(argument).takeUnretainedValue()
    let client = UnsafeBufferPointer(start: offered, count: offered == nil ? 0 : Int(offeredLength))

    // The client's list: (offset of the name, its length). A malformed list offers nothing.
    var entries: [(start: Int, count: Int)] = []
    var index = 0
    while index < client.count {
        let count = Int(client[index])
        guard count > 0, index + 1 + count <= client.count else {
            entries = []
            break
        }
        entries.append((index + 1, count))
        index += 1 + count
    }
    for name in accepted.names {
        for entry in entries where entry.count == name.count && client[entry.start..<entry.start + entry.count]
            .elementsEqual(name)
        {
            // Points into the client's list, which OpenSSL copies before this callback's input goes away.
            selected.pointee = offered! + entry.start
            selectedLength.pointee = UInt8(entry.count)
            return SSL_TLSEXT_ERR_OK
        }
    }
    owningConnection(of: ssl)?.refusedALPN = entries.map {
        String(decoding: client[$0.start..<$0.start + $0.count], as: UTF8.self)
    }
    return SSL_TLSEXT_ERR_ALERT_FATAL
}
