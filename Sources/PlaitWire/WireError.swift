/// Everything the wire layer can refuse. Each one means the byte stream cannot be trusted any further:
/// the connection is closed with this as the logged reason, and the agent keeps serving everyone else.
public enum WireError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A frame's length prefix (`size`, type byte plus payload) is over the receiver's maximum `limit`.
    /// Reported as soon as the four length bytes arrive, before any of the payload is buffered.
    case frameTooLarge(size: Int, limit: Int)
    /// A frame's length prefix is zero: every frame holds at least its type byte.
    case emptyFrame
    /// A frame's type byte names no message this build knows (a newer protocol, or not plait at all).
    case unknownType(UInt8)
    /// A frame's payload does not decode as its type's message, or a value in it is out of range.
    case malformedPayload(type: MessageType, reason: String)

    public var description: String {
        switch self {
        case let .frameTooLarge(size, limit):
            return "the peer announced a frame of \(size) bytes, over the limit of \(limit) bytes."
        case .emptyFrame:
            return "the peer sent a frame of length zero, which cannot even hold its type byte."
        case let .unknownType(byte):
            return "the peer sent a frame of unknown type \(byte) (a newer protocol version, or not plait)."
        case let .malformedPayload(type, reason):
            return "the peer sent a \(type) message that does not decode: \(reason)."
        }
    }
}
