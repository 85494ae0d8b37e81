#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A TCP socket listening for TLS connections, which it hands out handshaken and pin-checked.
///
/// Confined to one thread, like a connection: do not close it while another thread waits in
/// `accept`. `accept` handshakes one connection at a time, so it suits tests and one-shot
/// commands; an agent serving many peers takes connections with `acceptPending` and drives their
/// handshakes from its own loop.
public final class TLSListener: @unchecked Sendable {
    /// The server context every accepted connection uses.
    public let context: TLSContext
    /// The host as given (`127.0.0.1`, `::`, `0.0.0.0`, a name).
    public let host: String
    /// The port bound, which is a free port chosen by the system when 0 was asked for.
    public let port: UInt16
    /// The listening socket, for poll(2); valid until the listener is closed.
    public let fileDescriptor: Int32
    private var isClosed = false

    /// Binds to `host:port` (port 0: any free port, see `port`) and listens.
    /// Throws `socket` if the address cannot be resolved or bound.
    public init(host: String, port: UInt16, context: TLSContext, backlog: Int32 = 64) throws {
        precondition(context.isServer, "TLSListener needs a server context")
        TLS.setUp()
        let (descriptor, boundPort) = try listenTCP(host: host, port: port, backlog: backlog)
        self.context = context
        self.host = host
        self.port = boundPort
        self.fileDescriptor = descriptor
    }

    deinit {
        close()
    }

    /// Waits up to `timeout` (nil: forever) for a TCP connection, then completes its handshake
    /// within `handshakeTimeout` and checks the client's Device ID with `trust`.
    ///
    /// Throws `timeout` (no connection came, or its handshake stalled), or what the handshake threw
    /// for that one connection (`peerNotTrusted`, `alpnMismatch`, `handshakeFailed`,
    /// `rejectedByPeer`, `closed`); the connection is then closed and the listener still listens.
    public func accept(
        trust: @escaping @Sendable (DeviceID) -> Bool, timeout: Duration? = nil,
        handshakeTimeout: Duration = .seconds(10)
    ) throws -> TLSConnection {
        precondition(!isClosed, "TLSListener.accept after close")
        let deadline = Deadline(timeout)
        while true {
            if let connection = try acceptPending(trust: trust) {
                try connection.completeHandshake(
                    deadline: Deadline(handshakeTimeout), operation: "waiting for a client's handshake")
                return connection
            }
            try waitUntilReady(fileDescriptor, for: POLLIN, deadline: deadline, operation: "waiting for a connection")
        }
    }

    /// Takes a pending TCP connection without waiting, or returns nil if there is none. Its
    /// handshake has not started: the caller drives `handshake()`.
    public func acceptPending(trust: @escaping @Sendable (DeviceID) -> Bool) throws -> TLSConnection? {
        precondition(!isClosed, "TLSListener.acceptPending after close")
        guard let descriptor = try acceptTCP(fileDescriptor) else { return nil }
        return try TLSConnection(adopting: descriptor, context: context, trust: trust)
    }

    /// Stops listening. Idempotent; also runs on deinit.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        closeSocket(fileDescriptor)
    }
}
