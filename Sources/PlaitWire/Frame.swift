/// The type byte of a frame: which message its payload holds. Mirrors `MessageType` in plait-wire.proto.
///
/// Session messages are 1-31, pairing messages 32-47, so each group can grow without renumbering.
public enum MessageType: UInt8, CaseIterable, Hashable, Sendable, CustomStringConvertible {
    case hello = 1
    case want = 2
    case baselineChunk = 3
    case changes = 4
    case done = 5
    case notify = 6
    case ping = 7
    case pong = 8
    case close = 9
    case pairCommit = 32
    case pairNonce = 33
    case pairReveal = 34
    case pairConfirm = 35

    /// The message's name in plait-wire.proto, for log lines.
    public var description: String {
        switch self {
        case .hello: return "Hello"
        case .want: return "Want"
        case .baselineChunk: return "BaselineChunk"
        case .changes: return "Changes"
        case .done: return "Done"
        case .notify: return "Notify"
        case .ping: return "Ping"
        case .pong: return "Pong"
        case .close: return "Close"
        case .pairCommit: return "PairCommit"
        case .pairNonce: return "PairNonce"
        case .pairReveal: return "PairReveal"
        case .pairConfirm: return "PairConfirm"
        }
    }
}

/// One unit of the byte stream: a 4-byte big-endian length (of the type byte plus the payload), a type
/// byte, the payload.
public struct Frame: Hashable, Sendable {
    /// The largest frame length a receiver accepts unless configured otherwise: 16 MiB.
    public static let defaultMaxSize = 16 * 1024 * 1024
    /// The size of the length prefix.
    public static let lengthPrefixSize = 4
    /// The largest length the prefix can express.
    public static let largestExpressibleSize = Int(UInt32.max)

    public var type: MessageType
    public var payload: [UInt8]

    public init(type: MessageType, payload: [UInt8]) {
        self.type = type
        self.payload = payload
    }

    /// The value of the length prefix: the type byte plus the payload. This is what a receiver's
    /// maximum frame size is compared with.
    public var length: Int { 1 + payload.count }

    /// The frame as it travels.
    public var encoded: [UInt8] { encodeFrame(type: type, payload: payload) }
}

/// The bytes of one frame: length prefix, type byte, payload.
///
/// The caller keeps frames within the peer's announced maximum (`Hello.maxFrameSize`); a payload the
/// 32-bit length cannot express is a programming error.
public func encodeFrame(type: MessageType, payload: [UInt8]) -> [UInt8] {
    let length = 1 + payload.count
    precondition(length <= Frame.largestExpressibleSize, "a frame payload of \(payload.count) bytes is over 4 GiB")
    var bytes: [UInt8] = []
    bytes.reserveCapacity(Frame.lengthPrefixSize + length)
    bytes.append(UInt8(truncatingIfNeeded: length >> 24))
    bytes.append(UInt8(truncatingIfNeeded: length >> 16))
    bytes.append(UInt8(truncatingIfNeeded: length >> 8))
    bytes.append(UInt8(truncatingIfNeeded: length))
    bytes.append(type.rawValue)
    bytes.append(contentsOf: payload)
    return bytes
}

/// Cuts a byte stream into frames, incrementally and without I/O: append what the socket gave, then call
/// `next()` until it returns nil.
///
/// Memory stays bounded when the caller drains with `next()` after each `append`: the decoder then holds
/// at most one incomplete frame (under `Frame.lengthPrefixSize + maxFrameSize` bytes) plus the bytes of
/// the last append. A length over the maximum, a zero length or an unknown type byte is reported as soon
/// as the bytes naming it arrive, before the rest of that frame is buffered.
///
/// An error is final: the stream has lost its framing, so the decoder drops what it buffered, ignores
/// further input and throws the same error from every later `next()`. The owner closes the connection.
public struct FrameDecoder: Sendable {
    /// The largest frame length (type byte plus payload) accepted.
    public let maxFrameSize: Int

    /// The first error met; once set, the stream is unusable.
    public private(set) var failure: WireError?

    private var buffer: [UInt8] = []
    /// Where the next frame starts in `buffer`; bytes before it were already returned.
    private var start = 0

    /// Storage kept for reuse once a buffer is drained; larger buffers (after a big frame) are released so
    /// an idle connection does not pin a maximum-sized allocation.
    private static let retainedCapacity = 256 * 1024

    public init(maxFrameSize: Int = Frame.defaultMaxSize) {
        precondition(
            maxFrameSize >= 1 && maxFrameSize <= Frame.largestExpressibleSize,
            "a maximum frame size must be 1 to 2^32-1 bytes, not \(maxFrameSize)")
        self.maxFrameSize = maxFrameSize
    }

    /// The bytes received and not yet returned as frames.
    public var bufferedByteCount: Int { buffer.count - start }

    /// Whether the stream may end here: no error and no partial frame. At end of stream, leftover bytes
    /// mean the peer stopped in the middle of a frame.
    public var isAtFrameBoundary: Bool { failure == nil && bufferedByteCount == 0 }

    /// Adds bytes received from the peer.
    public mutating func append(_ bytes: some Sequence<UInt8>) {
        guard failure == nil else { return }
        if start > 0 {
            // Every byte is moved at most once: once its frame is at the head, `start` stays 0 until that
            // frame is complete.
            buffer.removeSubrange(0..<start)
            start = 0
        }
        buffer.append(contentsOf: bytes)
        _ = checkedHeadLength()
    }

    /// The next complete frame, or nil until more bytes arrive. A truncated frame is not an error: it
    /// completes when the rest arrives.
    public mutating func next() throws(WireError) -> Frame? {
        if let failure { throw failure }
        guard let length = checkedHeadLength() else {
            if let failure { throw failure }
            return nil
        }
        let end = start + Frame.lengthPrefixSize + length
        guard buffer.count >= end else { return nil }
        // checkedHeadLength() accepted the type byte.
        let type = MessageType(rawValue: buffer[start + Frame.lengthPrefixSize])!
        let payload = Array(buffer[(start + Frame.lengthPrefixSize + 1)..<end])
        start = end
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: buffer.capacity <= Self.retainedCapacity)
            start = 0
        }
        return Frame(type: type, payload: payload)
    }

    /// Validates the header of the frame at the head as far as it has arrived. Returns its length once the
    /// four length bytes are in; nil before that, or after recording a failure.
    private mutating func checkedHeadLength() -> Int? {
        guard failure == nil, buffer.count - start >= Frame.lengthPrefixSize else { return nil }
        var length = 0
        for offset in 0..<Frame.lengthPrefixSize { length = length << 8 | Int(buffer[start + offset]) }
        if length == 0 { return fail(.emptyFrame) }
        if length > maxFrameSize { return fail(.frameTooLarge(size: length, limit: maxFrameSize)) }
        if buffer.count - start > Frame.lengthPrefixSize {
            let byte = buffer[start + Frame.lengthPrefixSize]
            if MessageType(rawValue: byte) == nil { return fail(.unknownType(byte)) }
        }
        return length
    }

    private mutating func fail(_ error: WireError) -> Int? {
        failure = error
        buffer = []
        start = 0
        return nil
    }
}
