#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// Blocking-with-timeout conveniences for tests and one-shot commands (`plait pair --address`):
// poll(2) around the non-blocking primitives. The agent drives connections from its own loop.
extension TLSConnection {
    /// Connects to `host:port` over TCP, completes the TLS handshake as a client and checks the
    /// server's Device ID with `trust`, all within `timeout`.
    ///
    /// Throws `refused`, `timeout`, `handshakeFailed`, `peerNotTrusted`, `alpnMismatch` or
    /// `rejectedByPeer`. In TLS 1.3 a server that does not trust this device refuses it only after
    /// this returns: the refusal shows on the first read.
    public static func connect(
        host: String, port: UInt16, context: TLSContext, trust: @escaping @Sendable (DeviceID) -> Bool,
        timeout: Duration
    ) throws -> TLSConnection {
        precondition(!context.isServer, "TLSConnection.connect needs a client context")
        let deadline = Deadline(timeout)
        let descriptor = try connectTCP(host: host, port: port, deadline: deadline)
        let connection = try TLSConnection(adopting: descriptor, context: context, trust: trust)
        try connection.completeHandshake(deadline: deadline, operation: "handshaking with \(addressText(host, port))")
        return connection
    }

    /// Drives `handshake()` until done, waiting with poll(2); closes the connection on a timeout.
    func completeHandshake(deadline: Deadline, operation: String) throws {
        do {
            while true {
                switch try handshake() {
                case .done: return
                case .wantRead:
                    try waitUntilReady(fileDescriptor, for: POLLIN, deadline: deadline, operation: operation)
                case .wantWrite:
                    try waitUntilReady(fileDescriptor, for: POLLOUT, deadline: deadline, operation: operation)
                }
            }
        } catch {
            close()
            throw error
        }
    }

    /// Writes all of `bytes` within `timeout`. Throws `timeout` (the connection stays open),
    /// `closed` or `rejectedByPeer`.
    public func writeAll(_ bytes: [UInt8], timeout: Duration) throws {
        let deadline = Deadline(timeout)
        var offset = 0
        while offset < bytes.count {
            switch try write(bytes, from: offset) {
            case .bytes(let count): offset += count
            case .wantRead: try waitUntilReady(fileDescriptor, for: POLLIN, deadline: deadline, operation: "writing")
            case .wantWrite: try waitUntilReady(fileDescriptor, for: POLLOUT, deadline: deadline, operation: "writing")
            case .closed:
                throw TLSError.closed(reason: "the peer closed the connection after \(offset) of \(bytes.count) bytes")
            }
        }
    }

    /// Reads exactly `count` bytes within `timeout`. Throws `timeout` (the connection stays open,
    /// the bytes read so far are lost), `closed` (the peer closed first) or `rejectedByPeer`.
    public func readExactly(_ count: Int, timeout: Duration) throws -> [UInt8] {
        let deadline = Deadline(timeout)
        var bytes = [UInt8](repeating: 0, count: count)
        var offset = 0
        while offset < count {
            let result = try bytes.withUnsafeMutableBytes {
                try read(into: UnsafeMutableRawBufferPointer(rebasing: $0[offset...]))
            }
            switch result {
            case .bytes(let read): offset += read
            case .wantRead: try waitUntilReady(fileDescriptor, for: POLLIN, deadline: deadline, operation: "reading")
            case .wantWrite: try waitUntilReady(fileDescriptor, for: POLLOUT, deadline: deadline, operation: "reading")
            case .closed:
                throw TLSError.closed(reason: "the peer closed the connection after \(offset) of \(count) bytes")
            }
        }
        return bytes
    }

    /// Sends close_notify, then reads and discards until the peer's close_notify or end of stream, or
    /// until `timeout`; then closes. The last message this side wrote is then not lost: closing a
    /// socket that still holds unread bytes sends a reset, and a reset can make the peer's kernel drop
    /// what it had received but not yet handed to the peer. The pairing protocol ends this way.
    public func closeGracefully(timeout: Duration) {
        guard !isClosed else { return }
        shutdownSending()
        let deadline = Deadline(timeout)
        var buffer = [UInt8](repeating: 0, count: 4096)
        draining: while true {
            do {
                switch try read(into: &buffer) {
                case .bytes: continue
                case .wantRead:
                    try waitUntilReady(fileDescriptor, for: POLLIN, deadline: deadline, operation: "closing")
                case .wantWrite:
                    try waitUntilReady(fileDescriptor, for: POLLOUT, deadline: deadline, operation: "closing")
                case .closed: break draining
                }
            } catch {
                break draining
            }
        }
        close()
    }
}
