#if canImport(Glibc)
import Glibc
#endif
import PlaitTLS

/// A TLS connection as a session's byte stream. OpenSSL may need the socket writable to finish a read
/// (or readable to finish a write); the transport remembers that and asks poll(2) for it.
public final class TLSFrameTransport: FrameTransport {
    public let connection: TLSConnection
    private var readNeedsWritable = false
    private var writeNeedsReadable = false

    /// Wraps a connection that negotiated the sync protocol. Any other connection is refused with
    /// `SessionError.incompatible`: a pairing connection admits devices that are not paired, so it must
    /// never carry a session.
    public init(_ connection: TLSConnection) throws(SessionError) {
        guard connection.applicationProtocol == .sync else {
            let negotiated = connection.negotiatedALPN ?? "no protocol"
            throw .incompatible("the connection speaks \(negotiated), not \(TLSApplicationProtocol.sync.rawValue)")
        }
        self.connection = connection
    }

    public var fileDescriptor: Int32 { connection.fileDescriptor }
    public var hasBufferedInput: Bool { connection.hasBufferedBytes }

    public func readSome(into buffer: inout [UInt8]) throws -> ReadResult {
        switch try connection.read(into: &buffer) {
        case let .bytes(count):
            readNeedsWritable = false
            return .bytes(count)
        case .wantRead:
            readNeedsWritable = false
            return .wouldBlock
        case .wantWrite:
            readNeedsWritable = true
            return .wouldBlock
        case .closed:
            return .closed
        }
    }

    public func writeSome(_ bytes: ArraySlice<UInt8>) throws -> WriteResult {
        switch try connection.write(bytes) {
        case let .bytes(count):
            writeNeedsReadable = false
            return .wrote(count)
        case .wantWrite:
            writeNeedsReadable = false
            return .wouldBlock
        case .wantRead:
            writeNeedsReadable = true
            return .wouldBlock
        case .closed:
            throw TransportError(operation: "write", code: EPIPE)
        }
    }

    public func pollEvents(wantRead: Bool, wantWrite: Bool) -> Int16 {
        var events: Int16 = 0
        if wantRead || writeNeedsReadable { events |= Int16(POLLIN) }
        if wantWrite || readNeedsWritable { events |= Int16(POLLOUT) }
        return events
    }
}
