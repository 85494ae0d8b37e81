import PlaitCore
import PlaitStore
import PlaitTLS
import PlaitWire

/// Why a sync session ended before it finished. The description is one sentence; unless the peer is
/// already gone, it is also the reason sent to the peer in Close.
public enum SessionError: Error, CustomStringConvertible, Sendable {
    /// The byte stream lost its framing or a payload did not decode: garbage, a frame over the limit, an
    /// unknown frame type, a malformed message.
    case wire(WireError)
    /// The transport failed (a socket error, a broken pipe).
    case transport(String)
    /// The TLS connection failed after its handshake (the peer's alert, a reset, a broken stream).
    case tls(TLSError)
    /// The peer ended the stream before the session finished (`midFrame`: in the middle of a frame).
    case connectionLost(midFrame: Bool)
    /// The peer closed the connection cleanly (TLS close_notify) before its Hello: it is busy or stopping. Not a
    /// refusal of this device, which comes as an alert or a reset (PROTOCOL.md §3).
    case closedBeforeHello
    /// The peer sent Close before the session finished.
    case peerClosed(reason: String)
    /// The peer speaks another protocol version or data model, or is this very device.
    case incompatible(String)
    /// The peer's Hello names another Device ID than the certificate it proved in the TLS handshake (this device's
    /// own, say). The peer's fault: nothing of the session is taken, and nothing is reported about this device.
    case identityMismatch(claimed: String, certified: String)
    /// The peer sent a message out of turn.
    case protocolViolation(String)
    /// A pulled batch was refused whole (a gap, a fork, a bad hash or Lamport time, an oversized change).
    case batchRefused(StoreError)
    /// The local store failed.
    case store(StoreError)
    /// A baseline pulled from the peer was refused (damaged, not matching its digest, contradicting a held
    /// history); nothing of it was adopted and its staging was dropped.
    case baselineRefused(StoreError)
    /// The peer needs this device's baseline, but it holds a timeline whose history has forked with the peer.
    case forkInsideBaseline(timeline: TimelineID)
    /// The peer's stream ended (Done) short of the summary it announced.
    case incompleteStream(missing: [MissingRange])
    /// A change does not fit into the largest frame the peer accepts.
    case frameTooLargeForPeer(size: Int, limit: Int)
    /// No byte moved either way for this long (after a Ping went unanswered).
    case timedOut(after: Duration)
    /// The peer's Hello did not arrive within this long of the session's start, whatever else it sent: a peer that
    /// trickles bytes would otherwise hold the connection (and its thread) for good.
    case noHello(within: Duration)
    /// One-shot: the peer kept the connection alive (Ping, Pong) but sent nothing that moves the sync on, and took
    /// nothing of ours, for this long. Without it a paired peer could hold a `plait sync` for ever.
    case stalled(after: Duration)
    /// The peer was unpaired on this device while the session ran (`SessionOptions.stillTrusted`).
    case unpaired
    /// `stop()` was called before a one-shot session finished.
    case stopped
    /// The agent kept another connection with the same instance of this device instead (PROTOCOL.md §13.5).
    case notKept
    /// The peer presents this very Device ID from another instance: this home and the peer's are copies.
    case copiedHome(CopiedHome)
    /// The peer's Hello carried a succession statement this device refused (PROTOCOL.md §21): nothing was trusted
    /// because of it, and the session is closed so that the peer does not count this device as told.
    case successionRefused(String)

    public var description: String {
        switch self {
        case let .wire(error):
            return "the connection was closed because " + error.description
        case let .transport(detail):
            return "the connection failed: \(detail.hasSuffix(".") ? String(detail.dropLast()) : detail)."
        case let .tls(error):
            return Self.transport(error.description).description
        case let .connectionLost(midFrame):
            return midFrame
                ? "the peer closed the connection in the middle of a frame, before the sync finished."
                : "the peer closed the connection before the sync finished."
        case .closedBeforeHello:
            return "the peer closed the connection before its Hello: it is busy (an agent runs at most 8 connections "
                + "of one device at once) or stopping; try again in a moment."
        case let .peerClosed(reason):
            return "the peer ended the session: \(reason)"
        case let .incompatible(reason):
            return "the peer cannot sync with this device: \(reason)."
        case let .identityMismatch(claimed, certified):
            return "the peer broke the sync protocol: its certificate is device \(certified), but its Hello claims "
                + "to be \(claimed); the connection was closed and nothing of it was taken."
        case let .protocolViolation(reason):
            return "the peer broke the sync protocol: \(reason)."
        case let .batchRefused(error):
            return "a batch pulled from the peer was refused and nothing of it was written: \(error.description)"
        case let .store(error):
            return "the local store failed: \(error.description)"
        case let .baselineRefused(error):
            return "a baseline pulled from the peer was refused and nothing of it was adopted: "
                + Self.peerBaselineFault(error)
        case let .forkInsideBaseline(timeline):
            // Sent to the peer as the Close reason too: worded for either side to read.
            return "one device needs the other's baseline but holds another history of timeline \(timeline), which "
                + "that baseline folds (a home restored from a backup, or copied, whose other copy's changes were "
                + "compacted): on the device whose timeline it is, `plait rejoin` sets its history aside and re-sends "
                + "its lists and items, and the next sync takes the baseline."
        case let .incompleteStream(missing):
            let ranges = missing.map { "\($0.timeline):\($0.seqs.lowerBound)-\($0.seqs.upperBound)" }
            return "the peer ended its stream without changes it announced (\(ranges.joined(separator: ", ")))."
        case let .frameTooLargeForPeer(size, limit):
            return "a frame of \(size) bytes would exceed the \(limit) bytes the peer accepts."
        case let .timedOut(duration):
            return "the peer did not answer for \(duration) (not even a Ping)."
        case let .noHello(within):
            return "the peer sent no Hello within \(within) of connecting."
        case .unpaired:
            return "the peer was unpaired on this device during the sync: the session stopped there (what was stored "
                + "before stays, and nothing more goes to or comes from it)."
        case let .stalled(duration):
            return "the peer kept the connection open but moved the sync no further for \(duration): it sent no "
                + "complete change, Done, report or Close, and took nothing this device sent."
        case .stopped:
            return "the session was stopped before it finished."
        case .notKept:
            return "another connection between the same two devices was kept instead of this one."
        case let .copiedHome(copied):
            return "the peer is this device's own ID from another home: \(copied)."
        case let .successionRefused(reason):
            return "its succession statement was refused (\(reason)); nothing was trusted because of it."
        }
    }

    /// Why a baseline from the peer was refused, as the peer's fault. The engine's decoding errors are worded for
    /// stored bytes ("a stored snapshot does not decode… run `plait doctor`"): here the bytes are the peer's, and
    /// this device's store was not touched.
    static func peerBaselineFault(_ error: StoreError) -> String {
        guard case let .rejected(core) = error else { return error.description }
        switch core {
        case .fork, .unsupportedFormat:
            return core.description
        default:
            return "the peer's baseline is faulty (\(core.reason)). This device's store is unchanged and not at fault; "
                + "the peer's plait or store is (run `plait doctor` there)."
        }
    }

    /// Whether the peer should be told with Close (not when it is gone or closed first).
    /// Whether the session failed because the two devices' histories disagree in a way the next session is likely to
    /// meet again (a baseline refused, a fork inside one, changes the peer announced and did not send): what `peers`
    /// and `doctor` report until a session ends well. Not a dropped connection, a stop or this device's store, nor
    /// what a hostile peer's bad input alone causes (a refused statement, a protocol break: refused and logged, and
    /// nothing of it stored).
    var isSyncFailure: Bool {
        switch self {
        case .baselineRefused, .forkInsideBaseline, .incompleteStream: return true
        default: return false
        }
    }

    var tellsPeer: Bool {
        switch self {
        // A connection not kept is simply closed (PROTOCOL.md §13.5): its dialer sees it fail and backs off.
        case .transport, .tls, .connectionLost, .closedBeforeHello, .peerClosed, .notKept: return false
        default: return true
        }
    }

    /// `description` as a Close reason: one line, within the wire's limit.
    var closeReason: String { Self.closeReason(description) }

    static func closeReason(_ text: String) -> String {
        var reason = ""
        var bytes = 0
        for character in text {
            let clean: Character = character.unicodeScalars.contains { $0.properties.generalCategory == .control }
                ? " " : character
            let size = String(clean).utf8.count
            if bytes + size > WireLimits.maxCloseReasonBytes { break }
            reason.append(clean)
            bytes += size
        }
        return reason
    }
}
