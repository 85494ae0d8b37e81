/// Lamport times: bounds and arithmetic that never traps (DESIGN §10).
public enum Lamport {
    /// The largest Lamport time a device accepts or authors. An honest clock advances by one per change
    /// seen; 2^62 leaves every sum and conversion to a signed 64-bit SQLite integer far from overflow.
    public static let max: UInt64 = 1 << 62

    /// The time a new change gets after `value`, saturating at `UInt64.max` (callers compare with `max`).
    @inline(__always) public static func next(after value: UInt64) -> UInt64 {
        value == .max ? .max : value + 1
    }

    /// `value - 1` without going below zero.
    @inline(__always) public static func previous(before value: UInt64) -> UInt64 { value == 0 ? 0 : value - 1 }
}

/// The head a receiver holds of one timeline: where an arriving change must continue it.
public struct HeldHead: Sendable, Equatable {
    public var seq: UInt64
    public var lamport: UInt64
    public var hash: [UInt8]
    /// The timeline was closed by `timeline.end`: nothing may follow.
    public var ended: Bool

    public init(seq: UInt64, lamport: UInt64, hash: [UInt8], ended: Bool = false) {
        self.seq = seq
        self.lamport = lamport
        self.hash = hash
        self.ended = ended
    }

    public static let empty = HeldHead(seq: 0, lamport: 0, hash: Change.zeroHash)
}

/// Why one arriving change was refused. Every case is the sender's fault (or a sign of two histories), and
/// it stops that change's timeline from that sender; the other timelines of the batch go on.
public enum Refusal: Error, Equatable, Sendable, CustomStringConvertible {
    /// The change does not continue its timeline: a number is missing before it.
    case gap(expected: UInt64, got: UInt64)
    /// Its previous-hash is not the hash of the change before it that the receiver holds.
    case brokenChain(seq: UInt64)
    /// The receiver already holds a different change under this number (compared by hash): a fork.
    case fork(seq: UInt64, held: [UInt8], arriving: [UInt8])
    /// Its Lamport time is not above the previous change's of its timeline.
    case lamportNotIncreasing(seq: UInt64, lamport: UInt64, previous: UInt64)
    /// Its Lamport time is above `Lamport.max`: no honest clock gets there.
    case lamportOutOfRange(seq: UInt64, lamport: UInt64)
    /// It is larger than the receiver's size cap.
    case tooLarge(seq: UInt64, size: Int, limit: Int)
    /// Its payload does not decode for a kind and version the receiver understands.
    case badPayload(seq: UInt64, reason: String)
    /// It follows the timeline's `timeline.end`.
    case afterEnd(seq: UInt64)

    /// The sequence number of the refused change.
    public var seq: UInt64 {
        switch self {
        case let .gap(_, got): return got
        case let .brokenChain(seq), let .fork(seq, _, _), let .lamportNotIncreasing(seq, _, _),
            let .lamportOutOfRange(seq, _), let .tooLarge(seq, _, _), let .badPayload(seq, _), let .afterEnd(seq):
            return seq
        }
    }

    public var isFork: Bool {
        if case .fork = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case let .gap(expected, got):
            return "it sent change \(got) where \(expected) was due (a gap)"
        case let .brokenChain(seq):
            return "its change \(seq) does not continue the hash chain held here (two histories, or a damaged row "
                + "on the sender)"
        case let .fork(seq, held, arriving):
            return "its change \(seq) differs from the one held here under that number (hash "
                + "\(arriving.hexString.prefix(16)) vs \(held.hexString.prefix(16))): the timeline has forked"
        case let .lamportNotIncreasing(seq, lamport, previous):
            return "its change \(seq) has Lamport time \(lamport), not above the previous change's \(previous)"
        case let .lamportOutOfRange(seq, lamport):
            return "its change \(seq) has Lamport time \(lamport), above the limit of 2^62"
        case let .tooLarge(seq, size, limit):
            return "its change \(seq) is \(size) bytes, over the limit of \(limit) (store.max_change_bytes)"
        case let .badPayload(seq, reason):
            return "its change \(seq) has a payload that does not decode (\(reason))"
        case let .afterEnd(seq):
            return "its change \(seq) follows the end of the timeline"
        }
    }
}

/// A timeline whose changes were refused from one batch on: nothing of it at or after `refusal.seq` was taken.
public struct RefusedTimeline: Sendable, Equatable, CustomStringConvertible {
    public var timeline: TimelineID
    public var refusal: Refusal

    public init(timeline: TimelineID, refusal: Refusal) {
        self.timeline = timeline
        self.refusal = refusal
    }

    public var description: String { "timeline \(timeline): \(refusal)" }
}

/// The one check of arriving changes (DESIGN §10, §12): continuity, hash chain, forks at held numbers, Lamport
/// bounds, size and payload, per timeline. Each change arrives decoded once with its received bytes
/// (`EncodedChange`); its hash is computed once, with the injected SHA-256, over those bytes; its payload is
/// decoded once, and the engine applies that decoded form. It decides; the store only stores what it accepts.
public struct Intake<D: Domain>: Sendable {
    /// An accepted change with its hash and its decoded payload.
    public struct Accepted: Sendable {
        public var decoded: DecodedChange<D.Operation>
        public var hash: [UInt8]
        public var change: Change { decoded.change }
    }

    public struct Result: Sendable {
        /// Changes to store, in timeline order (the engine sorts them into replay order).
        public var accepted: [Accepted] = []
        /// Changes already held with the same hash (re-pulled).
        public var duplicates = 0
        /// Timelines refused from some change on, one entry each.
        public var refused: [RefusedTimeline] = []
        /// Per timeline, the head once the accepted changes are stored.
        public var heads: [TimelineID: HeldHead] = [:]
    }

    public var domain: D
    public var maxChangeBytes: Int
    /// The SHA-256 the hashes are computed with (OpenSSL's, injected by the store; Core's own in unit tests).
    public var sha256: SHA256.Function

    public init(domain: D, maxChangeBytes: Int, sha256: @escaping SHA256.Function = SHA256.current) {
        self.domain = domain
        self.maxChangeBytes = maxChangeBytes
        self.sha256 = sha256
    }

    /// Checks `batch`. `head` gives the receiver's head of a timeline (nil: none held); `heldHash` the hash of
    /// a change the receiver holds (nil when it cannot tell, e.g. folded into a baseline); `skip` timelines
    /// are dropped silently (refused earlier in the session, or forked with this sender).
    // Specialized here for the one domain: a caller in another module otherwise runs the generic body, which
    // looks up type metadata on every change.
    @_specialize(exported: true, where D == ListsDomain)
    public func check(
        _ batch: [EncodedChange], skip: Set<TimelineID> = [], head: (TimelineID) throws -> HeldHead?,
        heldHash: (ChangeRef) throws -> [UInt8]?
    ) rethrows -> Result {
        var result = Result()
        result.accepted.reserveCapacity(batch.count)
        var refused = skip
        for encoded in batch.sorted(by: { $0.change.ref < $1.change.ref }) {
            let change = encoded.change
            if refused.contains(change.timeline) { continue }
            let current: HeldHead
            if let known = result.heads[change.timeline] {
                current = known
            } else {
                current = try head(change.timeline) ?? .empty
            }
            let hash = encoded.bytes.withUnsafeBytes { sha256($0) }
            switch try judge(change, size: encoded.bytes.count, hash: hash, against: current, heldHash: heldHash) {
            case .duplicate:
                result.duplicates += 1
            case let .refuse(reason):
                refused.insert(change.timeline)
                result.refused.append(RefusedTimeline(timeline: change.timeline, refusal: reason))
            case let .accept(operation):
                result.heads[change.timeline] = HeldHead(
                    seq: change.seq, lamport: change.lamport, hash: hash,
                    ended: change.kind == Change.timelineEndKind)
                result.accepted.append(Accepted(decoded: DecodedChange(change: change, operation: operation), hash: hash))
            }
        }
        return result
    }

    /// `check` for changes that are not yet encoded (tests, and callers holding `Change` values): each is
    /// encoded once here.
    public func check(
        _ batch: [Change], skip: Set<TimelineID> = [], head: (TimelineID) throws -> HeldHead?,
        heldHash: (ChangeRef) throws -> [UInt8]?
    ) rethrows -> Result {
        try check(batch.map { EncodedChange($0) }, skip: skip, head: head, heldHash: heldHash)
    }

    private enum Verdict {
        case duplicate
        case refuse(Refusal)
        case accept(D.Operation?)
    }

    private func judge(
        _ change: Change, size: Int, hash: [UInt8], against head: HeldHead,
        heldHash: (ChangeRef) throws -> [UInt8]?
    ) rethrows -> Verdict {
        if change.seq <= head.seq {
            let held = change.seq == head.seq ? head.hash : try heldHash(change.ref)
            if let held, held != hash { return .refuse(.fork(seq: change.seq, held: held, arriving: hash)) }
            return .duplicate
        }
        guard change.seq == head.seq + 1 else { return .refuse(.gap(expected: head.seq + 1, got: change.seq)) }
        guard !head.ended else { return .refuse(.afterEnd(seq: change.seq)) }
        guard change.previousHash == head.hash else { return .refuse(.brokenChain(seq: change.seq)) }
        guard change.lamport <= Lamport.max else {
            return .refuse(.lamportOutOfRange(seq: change.seq, lamport: change.lamport))
        }
        guard change.lamport > head.lamport else {
            return .refuse(.lamportNotIncreasing(seq: change.seq, lamport: change.lamport, previous: head.lamport))
        }
        guard size <= maxChangeBytes else {
            return .refuse(.tooLarge(seq: change.seq, size: size, limit: maxChangeBytes))
        }
        do throws(CoreError) {
            return .accept(try domain.decode(change))
        } catch {
            // The bare reason: the refusal names the peer's change; a decoding error's own wording is about
            // stored bytes ("a stored snapshot… run `plait doctor`"), which would blame this store.
            return .refuse(.badPayload(seq: change.seq, reason: "\(change.kind): \(error.reason)"))
        }
    }
}
