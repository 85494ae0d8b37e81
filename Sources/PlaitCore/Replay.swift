/// Where a late change's replay gets its changes: everything stored that sorts after a key, in replay order.
public protocol ChangeSource {
    func forEachChange(after key: OrderKey, _ body: (Change) throws -> Void) throws
}

/// A state to restart replay from when no in-memory checkpoint is early enough (a stored checkpoint, else
/// the baseline, else the empty state).
public typealias ReplayFallback<State> = (_ before: OrderKey) throws -> (key: OrderKey, state: State)

/// What one `integrate` did.
public struct ReplayStats: Sendable, Equatable {
    public var applied = 0
    public var noops = 0
    /// Changes of a kind or version this build does not understand: kept, skipped.
    public var skipped = 0
    /// Changes replayed again after a rollback to a checkpoint.
    public var replayed = 0
    public var rolledBack = false
    public init() {}
}

/// A change whose payload was decoded once, at intake: the engine applies `operation` without decoding again.
public struct DecodedChange<Operation: Sendable>: Sendable {
    public var change: Change
    /// nil: a kind or version the domain does not interpret (kept, skipped).
    public var operation: Operation?

    public init(change: Change, operation: Operation?) {
        self.change = change
        self.operation = operation
    }
}

/// A periodic snapshot of the replayed state, to roll back to when a late change arrives.
public struct Checkpoint<State: Sendable>: Sendable {
    public var key: OrderKey
    public var state: State
    /// How many changes the engine had applied when it was taken.
    public var ordinal: Int
}

/// The deterministic replay engine: keeps the materialized state and the order key of the last applied
/// change. A batch that sorts entirely after it is applied in O(batch); a late change rolls back to the
/// nearest checkpoint before it and replays forward.
public struct ReplayEngine<D: Domain>: Sendable {
    public let domain: D
    public private(set) var state: D.State {
        didSet { cachedDigest = nil }
    }
    /// The digest of `state`, once `currentDigest()` computed it: dropped by any change to the state.
    private var cachedDigest: [UInt8]?
    /// The order key of the last change applied (`.zero` right after a baseline).
    public private(set) var position: OrderKey
    public private(set) var checkpoints: [Checkpoint<D.State>] = []
    /// Changes between in-memory checkpoints; `Int.max` takes none at all.
    public var checkpointInterval: Int
    /// In-memory checkpoints kept; older ones are thinned so they stay spread over the history.
    public var checkpointLimit: Int
    /// Bytes all in-memory checkpoints may cost together (by `Domain.approximateSize`). A checkpoint shares the
    /// state's storage until the next change, which then copies the whole state: with 100,000 items, eight of
    /// them were most of a catching-up device's 264 MiB. A large state keeps fewer, or none, and a late change
    /// replays from a stored checkpoint instead.
    public var checkpointMemoryLimit = 16 << 20
    /// Bytes of state (by `Domain.approximateSize`) per change of gap between in-memory checkpoints, beyond
    /// `checkpointInterval`: a checkpoint costs a copy of the whole state at the next change, so a larger state
    /// takes them further apart and their copies stay a bounded share of the replay (0: a fixed interval).
    /// At 800, a 100,000-item state is copied once per 25,000 changes instead of once per 5,000: a growing
    /// catch-up spent a fifth of its committing thread copying item records.
    public var checkpointBytesPerChange = 800
    private var sinceCheckpoint = 0
    /// Changes applied by this engine so far: checkpoints remember it to measure gaps.
    private var applied = 0

    public init(
        domain: D, state: D.State, position: OrderKey, checkpointInterval: Int = 5_000, checkpointLimit: Int = 8
    ) {
        self.domain = domain
        self.state = state
        self.position = position
        self.checkpointInterval = max(1, checkpointInterval)
        self.checkpointLimit = max(1, checkpointLimit)
    }

    /// Gives mutable access to the state for bookkeeping that is not replay (e.g. taking change marks).
    public mutating func modifyState<T>(_ body: (inout D.State) throws -> T) rethrows -> T { try body(&state) }

    /// `modifyState` for bookkeeping that leaves what the state holds as it was (taking its change marks): the
    /// kept digest stays. Debug builds check it against the state at its next use.
    public mutating func modifyBookkeeping<T>(_ body: (inout D.State) throws -> T) rethrows -> T {
        let kept = cachedDigest
        defer { cachedDigest = kept }
        return try body(&state)
    }

    /// Applies one change that sorts after `position`. `checkpointing: false` suits a device's own edits:
    /// nothing can arrive before them, so a checkpoint (a state copy) would only cost.
    @discardableResult
    @_specialize(exported: true, where D == ListsDomain)
    public mutating func applyNext(_ change: Change, checkpointing: Bool = true) -> ApplyOutcome {
        precondition(change.orderKey > position, "applyNext takes changes in replay order")
        return advance(change, outcome: domain.apply(change, to: &state), checkpointing: checkpointing)
    }

    /// `applyNext` for a change whose payload is already decoded.
    @discardableResult
    @_specialize(exported: true, where D == ListsDomain)
    public mutating func applyNext(_ decoded: DecodedChange<D.Operation>, checkpointing: Bool = true) -> ApplyOutcome {
        precondition(decoded.change.orderKey > position, "applyNext takes changes in replay order")
        let outcome = domain.apply(decoded.operation, of: decoded.change, to: &state)
        return advance(decoded.change, outcome: outcome, checkpointing: checkpointing)
    }

    private mutating func advance(_ change: Change, outcome: ApplyOutcome, checkpointing: Bool) -> ApplyOutcome {
        position = change.orderKey
        applied += 1
        if checkpointing {
            sinceCheckpoint += 1
            if sinceCheckpoint >= checkpointInterval && sinceCheckpoint >= sizeSpacing { takeCheckpoint() }
        }
        return outcome
    }

    /// The gap the state's size asks for between in-memory checkpoints (see `checkpointBytesPerChange`).
    private var sizeSpacing: Int {
        checkpointBytesPerChange > 0 ? domain.approximateSize(of: state) / checkpointBytesPerChange : 0
    }

    public mutating func takeCheckpoint() {
        sinceCheckpoint = 0
        if let last = checkpoints.last, last.key == position { return }
        let size = max(1, domain.approximateSize(of: state))
        let affordable = min(checkpointLimit, checkpointMemoryLimit / size)
        guard affordable > 0 else {
            checkpoints.removeAll()
            return
        }
        checkpoints.append(Checkpoint(key: position, state: state, ordinal: applied))
        while checkpoints.count > affordable { thinCheckpoints() }
    }

    /// Drops the checkpoint whose removal leaves the smallest gap relative to the square root of its age,
    /// never the newest: spacing grows with age (late changes are usually recent) without leaving the old
    /// half of the history bare, and the count stays bounded.
    private mutating func thinCheckpoints() {
        guard checkpoints.count > 1 else { return }
        var victim = 0
        var best = Double.infinity
        for index in 0..<(checkpoints.count - 1) {
            let older = index == 0 ? 0 : checkpoints[index - 1].ordinal
            let gap = Double(checkpoints[index + 1].ordinal - older)
            let age = Double(applied - checkpoints[index + 1].ordinal) + Double(checkpointInterval)
            let cost = gap / age.squareRoot()
            if cost < best {
                best = cost
                victim = index
            }
        }
        checkpoints.remove(at: victim)
    }

    /// Integrates a batch of new changes that the source already holds (the store inserts them first, in the
    /// same transaction). Changes must not already have been applied.
    public mutating func integrate(
        _ batch: [Change], source: ChangeSource, fallback: ReplayFallback<D.State>
    ) throws -> ReplayStats {
        // A payload that does not decode is nil here and applied as the change itself: a no-op, as in replay.
        try integrate(
            batch.map { DecodedChange(change: $0, operation: try? domain.decode($0)) }, source: source,
            fallback: fallback)
    }

    /// `integrate` for changes whose payloads intake decoded: in replay order after `position`, they are applied
    /// without decoding again; a late batch replays from the source.
    @_specialize(exported: true, where D == ListsDomain)
    public mutating func integrate(
        _ decodedBatch: [DecodedChange<D.Operation>], source: ChangeSource, fallback: ReplayFallback<D.State>
    ) throws -> ReplayStats {
        var stats = ReplayStats()
        guard !decodedBatch.isEmpty else { return stats }
        guard rollbackPoint(of: decodedBatch.lazy.map { $0.change }) != nil else {
            for decoded in decodedBatch.sorted(by: { $0.change.orderKey < $1.change.orderKey }) {
                if decoded.change.orderKey > position {
                    count(applyNext(decoded), in: &stats)
                } else {
                    // Late but inert: skipped where it stands, as replay skips it in its place (the state is not
                    // touched, so its digest stays known).
                    count(domain.understands(decoded.change) ? .noop : .uninterpretable, in: &stats)
                }
            }
            return stats
        }
        let batch = decodedBatch.map { $0.change }
        // Rolled back to before every change of the batch (inert ones too), so each is counted as it replays.
        var earliest = batch[0].orderKey
        for change in batch where change.orderKey < earliest { earliest = change.orderKey }
        // A late change: restart from the nearest checkpoint before it, never from scratch if one exists.
        stats.rolledBack = true
        checkpoints.removeAll { $0.key >= earliest }
        if let checkpoint = checkpoints.last {
            state = checkpoint.state
            position = checkpoint.key
        } else {
            let restart = try fallback(earliest)
            precondition(restart.key < earliest, "a fallback must sort before the late change")
            state = restart.state
            position = restart.key
        }
        sinceCheckpoint = 0
        let applied = Set(batch.map { $0.orderKey })
        // One checkpoint, where the batch ends, instead of one every interval: a stream arrives in replay order,
        // so the next late batch starts after this one's last change and rolls back exactly there. Periodic
        // checkpoints here were full state copies (the state shares storage with each one until it is next
        // mutated), and most were thinned away at once: two agents each catching up 100,000 interleaved
        // changes spent most of their time copying.
        let last = batch.map { $0.orderKey }.max()!
        try source.forEachChange(after: position) { change in
            // Taken just before the first change past the batch (the state then is the state at `last`), so
            // a batch that ends at the head copies nothing.
            if position == last && change.orderKey > last && checkpointInterval != .max { takeCheckpoint() }
            let outcome = applyNext(change, checkpointing: false)
            if applied.contains(change.orderKey) { count(outcome, in: &stats) } else { stats.replayed += 1 }
        }
        return stats
    }

    /// Where integrating `changes` must roll back to: the earliest of them that sorts at or before `position`
    /// and is not inert (`Domain.isInert`); nil when they can be applied where they are.
    public func rollbackPoint(of changes: some Sequence<Change>) -> OrderKey? {
        var earliest: OrderKey?
        for change in changes where change.orderKey <= position && !domain.isInert(change) {
            if earliest.map({ change.orderKey < $0 }) ?? true { earliest = change.orderKey }
        }
        return earliest
    }

    private func count(_ outcome: ApplyOutcome, in stats: inout ReplayStats) {
        switch outcome {
        case .applied: stats.applied += 1
        case .noop: stats.noops += 1
        case .uninterpretable: stats.skipped += 1
        }
    }

    /// The state after every change up to and including `limit`, computed from the nearest checkpoint.
    public func state(
        through limit: OrderKey, source: ChangeSource, fallback: ReplayFallback<D.State>
    ) throws -> D.State {
        if limit >= position { return state }
        var replica: ReplayEngine
        if let checkpoint = checkpoints.last(where: { $0.key <= limit }) {
            replica = ReplayEngine(domain: domain, state: checkpoint.state, position: checkpoint.key)
        } else {
            let restart = try fallback(OrderKey(lamport: limit.lamport, timeline: limit.timeline, seq: limit.seq + 1))
            replica = ReplayEngine(domain: domain, state: restart.state, position: restart.key)
        }
        replica.checkpointInterval = Int.max
        do {
            try source.forEachChange(after: replica.position) { change in
                guard change.orderKey <= limit else { throw StopIteration() }
                replica.applyNext(change)
            }
        } catch is StopIteration {
        }
        return replica.state
    }

    /// Forgets checkpoints at or before `key` (they were folded into a new baseline).
    public mutating func dropCheckpoints(through key: OrderKey) { checkpoints.removeAll { $0.key <= key } }

    public var digest: [UInt8] { cachedDigest ?? domain.digest(of: state) }

    /// `digest`, computed once per state and kept until the state changes: a session's hello and its report each
    /// give it, and for 100,000 items it costs about 50 ms.
    public mutating func currentDigest() -> [UInt8] {
        if let cachedDigest {
            assert(cachedDigest == domain.digest(of: state), "a kept digest no longer matches the state")
            return cachedDigest
        }
        let digest = domain.digest(of: state)
        cachedDigest = digest
        return digest
    }
}

/// Thrown by a `forEachChange` body to stop early.
public struct StopIteration: Error {
    public init() {}
}

/// An in-memory change source (tests, simulations).
public struct ChangeArraySource: ChangeSource {
    public var changes: [Change]

    public init(_ changes: [Change]) { self.changes = changes.sorted { $0.orderKey < $1.orderKey } }

    public func forEachChange(after key: OrderKey, _ body: (Change) throws -> Void) throws {
        var low = 0
        var high = changes.count
        while low < high {
            let middle = (low + high) / 2
            if changes[middle].orderKey <= key { low = middle + 1 } else { high = middle }
        }
        for change in changes[low...] { try body(change) }
    }
}
