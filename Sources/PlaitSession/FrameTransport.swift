#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What a non-blocking read gave.
public enum ReadResult: Sendable, Equatable {
    /// `count` bytes were placed at the start of the buffer.
    case bytes(Int)
    /// Nothing now: poll the file descriptor (or check `hasBufferedInput`) and try again.
    case wouldBlock
    /// The peer ended the stream cleanly.
    case closed
}

/// What a non-blocking write took.
public enum WriteResult: Sendable, Equatable {
    /// The first `count` bytes were taken.
    case wrote(Int)
    /// Nothing now: poll the file descriptor and try again.
    case wouldBlock
}

/// A byte stream a `Session` drives from one thread with poll(2): a plain socket, or a TLS connection
/// (whose owner keeps OpenSSL's calls on that thread, and reports decrypted bytes it already holds through
/// `hasBufferedInput`). Both calls must return at once: they never block.
public protocol FrameTransport: AnyObject {
    /// The descriptor to poll.
    var fileDescriptor: Int32 { get }
    /// Reads at most `buffer.count` bytes into the start of `buffer`.
    func readSome(into buffer: inout [UInt8]) throws -> ReadResult
    /// Writes a prefix of `bytes`.
    func writeSome(_ bytes: ArraySlice<UInt8>) throws -> WriteResult
    /// Bytes already read from the descriptor and not yet handed out (TLS records decrypted ahead): the
    /// session reads again without waiting for the descriptor.
    var hasBufferedInput: Bool { get }
    /// The poll(2) events to wait for, given what the session wants. A TLS transport whose last read
    /// needs the socket writable (or whose write needs it readable) adds that event here.
    func pollEvents(wantRead: Bool, wantWrite: Bool) -> Int16
}

extension FrameTransport {
    public func pollEvents(wantRead: Bool, wantWrite: Bool) -> Int16 {
        (wantRead ? Int16(POLLIN) : 0) | (wantWrite ? Int16(POLLOUT) : 0)
    }
}

/// Why a transport failed.
public struct TransportError: Error, CustomStringConvertible, Sendable {
    /// What was being done (`read`, `write`).
    public var operation: String
    public var code: Int32

    public init(operation: String, code: Int32) {
        self.operation = operation
        self.code = code
    }

    public var description: String { "\(operation) failed: \(String(cString: strerror(code))) (errno \(code))" }
}

/// A stream socket (TCP, or a Unix socket pair in tests) as a `FrameTransport`. It owns the descriptor,
/// switches it to non-blocking mode and closes it in `close()` or on deinit.
public final class SocketTransport: FrameTransport, @unchecked Sendable {
    public private(set) var fileDescriptor: Int32

    /// Takes ownership of `fileDescriptor`.
    public init(adopting fileDescriptor: Int32) throws {
        let flags = fcntl(fileDescriptor, F_GETFL)
        guard flags >= 0, fcntl(fileDescriptor, F_SETFL, flags | O_NONBLOCK) == 0 else {
            throw TransportError(operation: "fcntl(O_NONBLOCK)", code: errno)
        }
        self.fileDescriptor = fileDescriptor
    }

    deinit { close() }

    public var hasBufferedInput: Bool { false }

    public func readSome(into buffer: inout [UInt8]) throws -> ReadResult {
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fileDescriptor, $0.baseAddress, $0.count) }
            if count > 0 { return .bytes(count) }
            if count == 0 { return .closed }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .wouldBlock
            case let code: throw TransportError(operation: "read", code: code)
            }
        }
    }

    public func writeSome(_ bytes: ArraySlice<UInt8>) throws -> WriteResult {
        while true {
            // MSG_NOSIGNAL: a peer that went away gives EPIPE, not a SIGPIPE that kills the process.
            let count = bytes.withUnsafeBytes { send(fileDescriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count >= 0 { return .wrote(count) }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .wouldBlock
            case let code: throw TransportError(operation: "write", code: code)
            }
        }
    }

    /// Closes the descriptor (once).
    public func close() {
        guard fileDescriptor >= 0 else { return }
        #if canImport(Glibc)
        _ = Glibc.close(fileDescriptor)
        #else
        _ = Darwin.close(fileDescriptor)
        #endif
        fileDescriptor = -1
    }
}
