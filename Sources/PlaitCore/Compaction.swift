/// The head of one timeline as compaction sees it.
public struct TimelineHead: Hashable, Sendable {
    public var timeline: TimelineID
    public var seq: UInt64
    public var lamport: UInt64
    /// The timeline no longer holds the cut-off down (`Compaction.released`): it ended (`timeline.end`), was
    /// superseded and is held up to there, or its author nobody here paired has been quiet past the peer grace.
    public var released: Bool

    public init(timeline: TimelineID, seq: UInt64, lamport: UInt64, released: Bool = false) {
        self.timeline = timeline
        self.seq = seq
        self.lamport = lamport
        self.released = released
    }
}

/// Why the cut-off is where it is: printed by `plait compact`.
public enum CutOffLimit: Hashable, Sendable, CustomStringConvertible {
    /// The minimum over timelines of their head's Lamport time.
    case timelineHead(TimelineID, lamport: UInt64)
    /// A paired peer has not acknowledged changes past this point.
    case peerAcknowledgement(String, lamport: UInt64)
    /// A change this build cannot interpret sits just after.
    case uninterpretable(lamport: UInt64)

    public var lamport: UInt64 {
        switch self {
        case let .timelineHead(_, lamport), let .peerAcknowledgement(_, lamport), let .uninterpretable(lamport):
            return lamport
        }
    }

    public var description: String {
        switch self {
        case let .timelineHead(timeline, lamport): return "head of timeline \(timeline) (\(lamport))"
        case let .peerAcknowledgement(peer, lamport): return "what peer \(peer) has acknowledged (\(lamport))"
        case let .uninterpretable(lamport): return "a change this build cannot interpret (just above \(lamport))"
        }
    }
}

/// The compaction cut-off rule (DESIGN §2).
public enum Compaction {
    /// Whether a timeline no longer holds the cut-off down (DESIGN §2, §11): it ended; a begin superseded it at
    /// `supersededSeq` and it is held up to there (what comes after is a fork, not a change to wait for); or it
    /// is signed by an author that is neither this device nor a paired peer (`authorKnown` false) and none of
    /// its changes arrived within the grace (`lastArrival` nil or older than `now - graceMs`), so a peer
    /// cannot freeze compaction by inventing identities. `authorKnown` nil: unsigned, or no author rule.
    public static func released(
        ended: Bool, seq: UInt64, supersededSeq: UInt64?, authorKnown: Bool?, lastArrival: Int64?, now: Int64,
        graceMs: Int64
    ) -> Bool {
        if ended { return true }
        if let supersededSeq, seq >= supersededSeq { return true }
        if authorKnown == false {
            guard let lastArrival else { return true }
            return now.subtractingReportingOverflow(lastArrival).partialValue > graceMs
        }
        return false
    }

    /// The cut-off: the minimum head Lamport time over the timelines that still hold it down, then lowered to
    /// every extra limit (peer acknowledgements, the earliest uninterpretable change). Every change with
    /// Lamport ≤ the result may be folded. Nil when there is nothing to hold the cut-off (no timelines).
    public static func cutOff(heads: [TimelineHead], limits: [CutOffLimit] = []) -> CutOffLimit? {
        let holding = heads.filter { !$0.released }
        let candidates: [CutOffLimit]
        if let minimum = holding.min(by: { ($0.lamport, $0.timeline) < ($1.lamport, $1.timeline) }) {
            candidates = [.timelineHead(minimum.timeline, lamport: minimum.lamport)] + limits
        } else if let maximum = heads.max(by: { ($0.lamport, $0.timeline) < ($1.lamport, $1.timeline) }) {
            // Every timeline ended: everything may be folded.
            candidates = [.timelineHead(maximum.timeline, lamport: maximum.lamport)] + limits
        } else {
            return nil
        }
        return candidates.min { $0.lamport < $1.lamport }
    }

    /// The limit a peer's acknowledged summary puts on the cut-off: just below the first change it lacks.
    /// `firstLacking` gives, for a timeline and sequence number, the Lamport time of that change if held.
    public static func acknowledgementLimit(
        peer: String, acknowledged: Summary, held: Summary, lamportOf: (ChangeRef) -> UInt64?
    ) -> CutOffLimit? {
        var lowest: UInt64?
        for timeline in held.timelines where held[timeline] > acknowledged[timeline] {
            let ref = ChangeRef(timeline: timeline, seq: acknowledged[timeline] + 1)
            if let lamport = lamportOf(ref), lamport > 0 { lowest = min(lowest ?? .max, lamport - 1) }
        }
        return lowest.map { .peerAcknowledgement(peer, lamport: $0) }
    }
}

/// Folds changes, fed in replay order, into a new baseline on top of the previous one.
public struct BaselineFolder<D: Domain> {
    public let domain: D
    private var engine: ReplayEngine<D>
    private var summary: Summary
    private var maxLamport: UInt64
    private var heads: [TimelineID: [UInt8]]
    private var lastFolded: [TimelineID: Change] = [:]
    private var headLamports: [TimelineID: UInt64]
    private var ended: Set<TimelineID>
    private var certificates: [TimelineID: [UInt8]]
    private var nonces: [TimelineID: [UInt8]]
    private var superseded: [TimelineID: UInt64]
    /// Folded begins' `supersedes` with the key that made each: judged in `finish`, once every folded begin's
    /// certificate is known, whatever order they were folded in.
    private var claims: [(old: TimelineBegin.Superseded, certificate: [UInt8])] = []
    /// The fork records the new baseline carries: the previous baseline's, plus what the caller adds (the
    /// store's records, PROTOCOL.md §22.8).
    public var forks: [ForkBranch.Record]
    public private(set) var folded = 0

    public init(domain: D, previous: Baseline?) throws(CoreError) {
        self.domain = domain
        let state = try previous.map { baseline throws(CoreError) in
            try domain.restore(snapshot: baseline.snapshot[...])
        } ?? domain.emptyState()
        engine = ReplayEngine(domain: domain, state: state, position: .zero, checkpointInterval: Int.max)
        summary = previous?.summary ?? Summary()
        maxLamport = previous?.maxLamport ?? 0
        heads = previous?.heads ?? [:]
        headLamports = previous?.headLamports ?? [:]
        ended = previous?.ended ?? []
        certificates = previous?.certificates ?? [:]
        nonces = previous?.nonces ?? [:]
        superseded = previous?.superseded ?? [:]
        forks = previous?.forks ?? []
    }

    /// Adds the next change in replay order; it must continue its timeline and carry its real previous hash.
    public mutating func add(_ change: Change) throws(CoreError) {
        guard change.seq == summary[change.timeline] + 1 else {
            throw .gap(timeline: change.timeline, expected: summary[change.timeline] + 1, got: change.seq)
        }
        engine.applyNext(change)
        summary[change.timeline] = change.seq
        maxLamport = max(maxLamport, change.lamport)
        lastFolded[change.timeline] = change
        headLamports[change.timeline] = change.lamport
        if change.kind == Change.timelineEndKind { ended.insert(change.timeline) }
        // A begin the intake took decodes; one that does not (stored by an older rule) leaves the timeline
        // unsigned in the baseline, as it was in the store.
        if change.kind == TimelineBegin.kind, let begin = try? TimelineBegin(payload: change.payload) {
            certificates[change.timeline] = begin.certificate
            nonces[change.timeline] = begin.nonce
            if let old = begin.supersedes { claims.append((old, begin.certificate)) }
        }
        folded += 1
    }

    public func finish() -> Baseline {
        var heads = heads
        for (timeline, change) in lastFolded { heads[timeline] = change.hash }
        // As the store marks them (PROTOCOL.md §20.5): a folded timeline, stopped only by its own key's begin (or
        // by any, when unsigned).
        var superseded = superseded
        for claim in claims
        where summary[claim.old.timeline] > 0
            && TimelineBegin.maySupersede(certificates[claim.old.timeline], by: claim.certificate)
        {
            superseded[claim.old.timeline] = min(superseded[claim.old.timeline] ?? .max, claim.old.seq)
        }
        return Baseline(
            summary: summary, maxLamport: maxLamport, heads: heads, headLamports: headLamports, ended: ended,
            snapshot: domain.snapshot(of: engine.state, weight: summary.count), certificates: certificates,
            nonces: nonces, superseded: superseded, forks: forks)
    }
}
