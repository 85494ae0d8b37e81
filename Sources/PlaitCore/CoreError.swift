/// Everything the engine can refuse, each case carrying what a user needs to fix it.
public enum CoreError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A timeline ID in text form is not 13 characters of the sortable base32 alphabet.
    case malformedTimelineID(String, reason: String)
    /// A summary in text form (`ID:SEQ,ID:SEQ`) does not parse.
    case malformedSummary(String, reason: String)
    /// An object ID (list or item) is not 32 hexadecimal digits (or a dashed UUID).
    case malformedObjectID(String)
    /// A change payload does not decode for its kind.
    case malformedPayload(kind: String, reason: String)
    /// Stored bytes (a snapshot or baseline) do not decode.
    case corruptSnapshot(String)
    /// A batch would leave a gap or a broken hash chain in a timeline.
    case gap(timeline: TimelineID, expected: UInt64, got: UInt64)
    /// A change's previous-hash does not match the change before it: two histories under one number.
    case fork(timeline: TimelineID, seq: UInt64)
    /// Lamport times must strictly increase along a timeline.
    case lamportNotIncreasing(timeline: TimelineID, seq: UInt64)
    /// A change is larger than the configured maximum.
    case changeTooLarge(size: Int, limit: Int)
    /// The snapshot or baseline was written in a format newer than this build understands.
    case unsupportedFormat(found: Int, supported: Int)
    /// A state read back from storage breaks an invariant replay keeps (a dangling link, a loop, an item in
    /// no section): derived data to rebuild from the changes, never to walk.
    case inconsistentState(String)

    public var description: String {
        switch self {
        case let .malformedTimelineID(text, reason):
            return "'\(text)' is not a timeline ID: \(reason)."
        case let .malformedSummary(text, reason):
            return "malformed summary '\(text)': \(reason)."
        case let .malformedObjectID(text):
            return "'\(text)' is not an object ID: expected 32 hexadecimal digits."
        case let .malformedPayload(kind, reason):
            return "the payload of a '\(kind)' change does not decode: \(reason)."
        case let .corruptSnapshot(reason):
            return "a stored snapshot does not decode (\(reason)); run `plait doctor`."
        case let .gap(timeline, expected, got):
            return "timeline \(timeline) would have a gap: expected change \(expected), got \(got)."
        case let .fork(timeline, seq):
            return "timeline \(timeline) has forked at change \(seq): two different histories carry that number."
        case let .lamportNotIncreasing(timeline, seq):
            return "change \(timeline):\(seq) does not have a Lamport time above the change before it."
        case let .changeTooLarge(size, limit):
            return "a change of \(size) bytes is over the limit of \(limit) bytes (config: store.max_change_bytes)."
        case let .unsupportedFormat(found, supported):
            return "data in format version \(found) needs a newer plait (this one reads up to \(supported))."
        case let .inconsistentState(problem):
            return "the materialized state is inconsistent: \(problem); run `plait repair`."
        }
    }
}
