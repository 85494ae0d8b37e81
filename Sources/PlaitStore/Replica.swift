import Foundation
import GRDB
import PlaitCore

/// The replay engine bound to a store: one per process. Every write is one transaction that moves the
/// changes, the timeline heads and the materialized state together; a crash leaves a batch boundary.
///
/// Another process (the CLI while the agent runs) may write the same store: each transaction first checks
/// the store's generation and reloads the materialized state if someone else wrote.
public final class Replica: @unchecked Sendable {
    public let store: Store
    public let domain = ListsDomain()
    private var engine: ReplayEngine<ListsDomain>
    private var generation: Int64 = -1
    private let lock = NSLock()
    /// `uninterpretableCount()` as of a store generation.
    private var uninterpretable: (generation: Int64, count: Int)?
    /// Largest accepted change, in canonical bytes (config: `store.max_change_bytes`).
    public var maxChangeBytes = 1 << 20
    /// Changes between checkpoints written to the store (late changes roll back to the nearest one).
    public var storedCheckpointInterval = 10_000
    /// Stored checkpoints kept.
    public var storedCheckpointLimit = 4

    public init(store: Store) throws {
        self.store = store
        engine = ReplayEngine(domain: domain, state: ListsState(), position: .zero)
        try store.read { db in try self.reload(db) }
    }

    /// The materialized state as of the last transaction or `refresh()`.
    public var state: ListsState { lock.withLock { engine.state } }
    public var position: OrderKey { lock.withLock { engine.position } }
    public var digest: [UInt8] { lock.withLock { engine.digest } }

    /// Reloads the state if another process wrote since.
    public func refresh() throws {
        try store.read { db in
            try lock.withLock {
                let current: Int64 = try Meta.get(db, .generation) ?? 0
                if current != generation { try reload(db) }
            }
        }
    }

    private func reload(_ db: Database) throws {
        let state = try MaterializedRows.load(db)
        let position = try Self.position(db)
        engine = ReplayEngine(domain: domain, state: state, position: position)
        generation = try Meta.get(db, .generation) ?? 0
    }

    static func position(_ db: Database) throws -> OrderKey {
        guard let data: Data = try Meta.get(db, .position) else { return .zero }
        var reader = [UInt8](data)
        guard reader.count == 24 else { throw StoreError.inconsistent("the replay position is \(reader.count) bytes") }
        func word(_ offset: Int) -> UInt64 { (0..<8).reduce(0) { $0 << 8 | UInt64(reader[offset + $1]) } }
        let key = OrderKey(lamport: word(0), timeline: TimelineID(word(8)), seq: word(16))
        reader.removeAll()
        return key
    }

    static func encode(_ key: OrderKey) -> Data {
        var bytes: [UInt8] = []
        for word in [key.lamport, key.timeline.rawValue, key.seq] {
            for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: word >> UInt64(shift))) }
        }
        return Data(bytes)
    }

    /// One write transaction. On any error nothing is written and the in-memory state is reloaded.
    func transaction<T>(_ body: (Database) throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        do {
            return try store.write { db in
                let current: Int64 = try Meta.get(db, .generation) ?? 0
                if current != generation { try reload(db) }
                let result = try body(db)
                try engine.modifyState { state in try MaterializedRows.save(&state, db) }
                try Meta.set(db, .position, Self.encode(engine.position))
                try Meta.set(db, .generation, current + 1)
                generation = current + 1
                return result
            }
        } catch {
            generation = -1
            try? store.read { db in try reload(db) }
            throw error
        }
    }

    // MARK: Local edits

    /// A local edit in progress: changes appended here are applied at once, so later lines of a batch see
    /// the earlier ones, and all of them commit together.
    public final class LocalEdit {
        fileprivate unowned let replica: Replica
        fileprivate let db: Database
        fileprivate var timeline: TimelineID
        fileprivate var head: (seq: UInt64, lamport: UInt64, hash: [UInt8])
        fileprivate var lamport: UInt64
        fileprivate let now: Int64
        public private(set) var appended: [Change] = []
        /// The newest change of this edit, whose head row is written once at the end.
        fileprivate var lastAppended: Change?

        fileprivate init(replica: Replica, db: Database, now: Int64) throws {
            self.replica = replica
            self.db = db
            self.now = now
            timeline = try Store.ownTimeline(db)
            let row = try Row.fetchOne(
                db, sql: "SELECT head_seq, head_lamport, head_hash FROM timelines WHERE tl = ?",
                arguments: [timelineColumn(timeline.rawValue)])
            head = row.map { (UInt64($0[0] as Int64), UInt64($0[1] as Int64), [UInt8]($0[2] as Data)) }
                ?? (0, 0, Change.zeroHash)
            lamport = UInt64(try Int64.fetchOne(db, sql: "SELECT max(head_lamport) FROM timelines") ?? 0)
        }

        /// The summary of everything the store holds, this edit's changes included: what a `list.delete`
        /// made now has observed.
        public func observedSummary() throws -> Summary {
            var summary = try Store.summary(db)
            if head.seq > 0 { summary[timeline] = head.seq }
            return summary
        }

        /// Writes the head row of the own timeline (once per edit, not per change).
        fileprivate func finish() throws {
            if let lastAppended { try Replica.setHead(db, lastAppended, hash: head.hash) }
            lastAppended = nil
        }

        /// The state including every change appended so far.
        public var state: ListsState { replica.engine.state }
        public var ownTimeline: TimelineID { timeline }

        @discardableResult
        public func append(_ change: ListsChange) throws -> Change {
            try appendRaw(kind: change.kind, version: 1, payload: change.payload)
        }

        /// Appends a change of any kind (the engine-level `timeline.end`, or a kind for tests).
        @discardableResult
        public func appendRaw(kind: String, version: UInt32, payload: [UInt8]) throws -> Change {
            lamport = max(lamport, head.lamport) + 1
            let change = Change(
                timeline: timeline, seq: head.seq + 1, lamport: lamport, previousHash: head.hash, kind: kind,
                version: version, wallTime: now, payload: payload)
            let bytes = change.canonicalBytes
            guard bytes.count <= replica.maxChangeBytes else {
                throw CoreError.changeTooLarge(size: bytes.count, limit: replica.maxChangeBytes)
            }
            try ChangeRows.insert([change], db)
            head = (change.seq, change.lamport, SHA256.hash(bytes))
            lastAppended = change
            replica.engine.applyNext(change, checkpointing: false)
            appended.append(change)
            return change
        }

        /// Starts a new own timeline (after ending the old one).
        fileprivate func switchTimeline(to new: TimelineID) throws {
            try finish()
            try Meta.set(db, .ownTimeline, Int64(bitPattern: new.rawValue))
            timeline = new
            head = (0, 0, Change.zeroHash)
        }
    }

    /// Runs `body` as one transaction of local changes; a throw writes nothing.
    public func edit<T>(now: Int64 = Replica.now(), _ body: (LocalEdit) throws -> T) throws -> T {
        try transaction { db in
            let edit = try LocalEdit(replica: self, db: db, now: now)
            let result = try body(edit)
            try edit.finish()
            try persistCheckpointIfDue(db, added: edit.appended.count)
            return result
        }
    }

    public static func now() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    static func setHead(_ db: Database, _ change: Change, hash: [UInt8]) throws {
        try db.execute(
            sql: """
                INSERT INTO timelines (tl, head_seq, head_lamport, head_hash, ended) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (tl) DO UPDATE SET head_seq = excluded.head_seq, head_lamport = excluded.head_lamport,
                head_hash = excluded.head_hash, ended = max(ended, excluded.ended)
                """,
            arguments: [
                timelineColumn(change.timeline.rawValue), Int64(change.seq), Int64(change.lamport), Data(hash),
                change.kind == Change.timelineEndKind ? 1 : 0,
            ])
    }

    /// Ends the own timeline with `timeline.end`, starts a new one, and re-emits the current state as creates
    /// (and completes), which collapse as duplicates on devices that already have them.
    public func rejoin(now: Int64 = Replica.now()) throws -> (old: TimelineID, new: TimelineID, emitted: Int) {
        try edit(now: now) { edit in
            let old = edit.ownTimeline
            try edit.appendRaw(kind: Change.timelineEndKind, version: 1, payload: [])
            let new = TimelineID.random()
            try edit.switchTimeline(to: new)
            let state = edit.state
            var emitted = 0
            for listID in state.liveListIDs {
                let list = state.lists[listID]!
                try edit.append(.listCreate(id: listID, title: list.title, color: list.color, at: .bottom))
                emitted += 1
                for itemID in state.itemIDs(in: listID, completed: false) {
                    try edit.append(.itemCreate(id: itemID, list: listID, text: state.items[itemID]!.text, at: .bottom))
                    emitted += 1
                }
                let completed = state.itemIDs(in: listID, completed: true)
                for itemID in completed {
                    try edit.append(.itemCreate(id: itemID, list: listID, text: state.items[itemID]!.text, at: .bottom))
                    emitted += 1
                }
                // Completing bottom-up leaves the completed section in its current order.
                for itemID in completed.reversed() {
                    try edit.append(.itemComplete(id: itemID))
                    emitted += 1
                }
            }
            return (old, new, emitted)
        }
    }

    // MARK: Pulled changes

    /// What integrating a pulled batch did.
    public struct IntegrateResult: Sendable {
        public var stats = ReplayStats()
        /// Changes already held (re-pulled), skipped.
        public var duplicates = 0
        /// A peer held this device's own timeline beyond its head: the home is stale and a new timeline
        /// was started, so nothing is ever authored twice under one number.
        public var switchedTimeline: (old: TimelineID, new: TimelineID)?
    }

    /// Integrates changes pulled from a peer in one transaction: checks each timeline continues without a
    /// gap, the hash chain and Lamport times, stores them and replays (rolling back to a checkpoint for late
    /// changes). A bad batch is refused whole.
    public func integrate(_ batch: [Change]) throws -> IntegrateResult {
        // A batch already held entirely (a re-pull) writes nothing, so other processes need not reload.
        let held = try store.read { db in
            let summary = try Store.summary(db)
            return batch.allSatisfy { summary.contains($0.ref) }
        }
        if held {
            var result = IntegrateResult()
            result.duplicates = batch.count
            return result
        }
        return try transaction { db in
            var result = IntegrateResult()
            var heads: [TimelineID: (seq: UInt64, lamport: UInt64, hash: [UInt8])] = [:]
            var fresh: [Change] = []
            for change in batch.sorted(by: { $0.ref < $1.ref }) {
                var head: (seq: UInt64, lamport: UInt64, hash: [UInt8])
                if let known = heads[change.timeline] {
                    head = known
                } else if let row = try Row.fetchOne(
                    db, sql: "SELECT head_seq, head_lamport, head_hash FROM timelines WHERE tl = ?",
                    arguments: [timelineColumn(change.timeline.rawValue)])
                {
                    head = (UInt64(row[0] as Int64), UInt64(row[1] as Int64), [UInt8](row[2] as Data))
                } else {
                    head = (0, 0, Change.zeroHash)
                }
                if change.seq <= head.seq {
                    result.duplicates += 1
                    continue
                }
                guard change.seq == head.seq + 1 else {
                    throw CoreError.gap(timeline: change.timeline, expected: head.seq + 1, got: change.seq)
                }
                guard change.previousHash == head.hash else { throw CoreError.fork(timeline: change.timeline, seq: change.seq) }
                guard change.lamport > head.lamport, change.lamport <= UInt64(Int64.max) else {
                    throw CoreError.lamportNotIncreasing(timeline: change.timeline, seq: change.seq)
                }
                let bytes = change.canonicalBytes
                guard bytes.count <= maxChangeBytes else {
                    throw CoreError.changeTooLarge(size: bytes.count, limit: maxChangeBytes)
                }
                if domain.canInterpret(kind: change.kind, version: change.version) {
                    try ListsChange.checkArriving(change)
                }
                heads[change.timeline] = (change.seq, change.lamport, SHA256.hash(bytes))
                fresh.append(change)
            }
            guard !fresh.isEmpty else { return result }
            try ChangeRows.insert(fresh, db)
            for change in fresh where heads[change.timeline]!.seq == change.seq {
                try Self.setHead(db, change, hash: heads[change.timeline]!.hash)
            }
            for change in fresh where change.kind == Change.timelineEndKind {
                try db.execute(
                    sql: "UPDATE timelines SET ended = 1 WHERE tl = ?", arguments: [timelineColumn(change.timeline.rawValue)])
            }
            let earliest = fresh.map(\.orderKey).min()!
            try db.execute(
                sql: "DELETE FROM checkpoints WHERE (lamport, tl, seq) >= (?, ?, ?)",
                arguments: [Int64(earliest.lamport), timelineColumn(earliest.timeline.rawValue), Int64(earliest.seq)])
            // Keep the old state only when replay will roll back: holding a copy makes the next mutation
            // copy the whole state.
            let before: ListsState? = earliest <= engine.position ? engine.state : nil
            result.stats = try engine.integrate(fresh, source: StoredChanges(db: db)) { key in
                try self.restartPoint(db, before: key)
            }
            if result.stats.rolledBack, let before {
                // The change marks of a checkpoint are stale: rewrite exactly the records that differ.
                let differences = ListsState.differences(from: before, to: engine.state)
                engine.modifyState { state in
                    state.trackChanges = true
                    _ = state.takeChanges()
                }
                try MaterializedRows.save(engine.state, lists: differences.lists, items: differences.items, db)
            }
            let own = try Store.ownTimeline(db)
            if heads[own] != nil {
                let new = TimelineID.random()
                try Meta.set(db, .ownTimeline, Int64(bitPattern: new.rawValue))
                result.switchedTimeline = (own, new)
            }
            // A late batch was just replayed over a long stretch, and the stream it belongs to is likely to roll
            // back again at its next batch: a stored checkpoint (a snapshot of the whole state) per batch was most
            // of the cost of two devices catching up on each other. Rolled-back batches store one less often.
            try persistCheckpointIfDue(db, added: fresh.count, every: result.stats.rolledBack ? 5 : 1)
            return result
        }
    }

    /// Where replay restarts when no in-memory checkpoint is early enough: the newest stored checkpoint
    /// before `key`, else the baseline, else the empty state.
    func restartPoint(_ db: Database, before key: OrderKey) throws -> (key: OrderKey, state: ListsState) {
        if let row = try Row.fetchOne(
            db,
            sql: """
                SELECT lamport, tl, seq, snapshot FROM checkpoints WHERE (lamport, tl, seq) < (?, ?, ?)
                ORDER BY lamport DESC, tl DESC, seq DESC LIMIT 1
                """,
            arguments: [Int64(key.lamport), timelineColumn(key.timeline.rawValue), Int64(key.seq)])
        {
            let checkpointKey = OrderKey(
                lamport: UInt64(row[0] as Int64), timeline: TimelineID(timelineFromColumn(row[1] as Int64)),
                seq: UInt64(row[2] as Int64))
            return (checkpointKey, try domain.restore(snapshot: [UInt8](row[3] as Data)[...]))
        }
        if let baseline = try Store.baseline(db) {
            return (.zero, try domain.restore(snapshot: baseline.snapshot[...]))
        }
        return (.zero, domain.emptyState())
    }

    /// Stores a checkpoint once `storedCheckpointInterval` × `every` changes were added since the last one.
    private func persistCheckpointIfDue(_ db: Database, added: Int, every: Int = 1) throws {
        let pending = (try Int.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'since_checkpoint'") ?? 0) + added
        if pending >= storedCheckpointInterval * every && engine.position > .zero {
            let key = engine.position
            try db.execute(
                sql: "INSERT OR REPLACE INTO checkpoints (lamport, tl, seq, snapshot) VALUES (?, ?, ?, ?)",
                arguments: [
                    Int64(key.lamport), timelineColumn(key.timeline.rawValue), Int64(key.seq),
                    Data(domain.snapshot(of: engine.state, weight: 0)),
                ])
            try db.execute(
                sql: """
                    DELETE FROM checkpoints WHERE (lamport, tl, seq) NOT IN
                    (SELECT lamport, tl, seq FROM checkpoints ORDER BY lamport DESC, tl DESC, seq DESC LIMIT ?)
                    """,
                arguments: [storedCheckpointLimit])
            try db.execute(sql: "INSERT OR REPLACE INTO meta (key, value) VALUES ('since_checkpoint', 0)")
        } else {
            try db.execute(sql: "INSERT OR REPLACE INTO meta (key, value) VALUES ('since_checkpoint', ?)", arguments: [pending])
        }
    }

    // MARK: Full replay

    /// Replays everything from the baseline (or nothing) and rewrites the materialized state. Returns the
    /// number of changes replayed and the seconds replay took (reading and applying, not the rewrite).
    @discardableResult
    public func rebuild() throws -> (changes: Int, replaySeconds: Double) {
        try transaction { db in try replayAll(db) }
    }

    /// `rebuild` inside a transaction that is already open.
    func replayAll(_ db: Database) throws -> (changes: Int, replaySeconds: Double) {
            let start = DispatchTime.now().uptimeNanoseconds
            let restart = try restartPoint(db, before: .zero)
            var initial = restart.state
            initial.trackChanges = false
            engine = ReplayEngine(domain: domain, state: initial, position: .zero)
            // Checkpoints serve late changes, which land near the head: take them only over the last stretch
            // of the history instead of paying a state copy every interval all the way.
            let total = try Int.fetchOne(db, sql: "SELECT count(*) FROM changes") ?? 0
            let interval = engine.checkpointInterval
            let checkpointsFrom = total - interval * engine.checkpointLimit
            engine.checkpointInterval = checkpointsFrom > 0 ? Int.max : interval
            var count = 0
            try StoredChanges(db: db).forEachChangePipelined { change in
                engine.applyNext(change)
                count += 1
                if count == checkpointsFrom { engine.checkpointInterval = interval }
            }
            engine.checkpointInterval = interval
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            try engine.modifyState { state in
                state.trackChanges = true
                try MaterializedRows.replaceAll(&state, db)
            }
            return (count, seconds)
    }

    /// Seconds to read every stored change in replay order without applying it (a benchmark baseline).
    public func measureScan() throws -> Double {
        try store.read { db in
            let start = DispatchTime.now().uptimeNanoseconds
            var count = 0
            try StoredChanges(db: db).forEachChange(after: .zero) { _ in count += 1 }
            return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        }
    }

    // MARK: Compaction

    /// What `compact` did.
    public struct CompactionReport: Sendable {
        public var cutOff: CutOffLimit?
        public var folded: Int
        public var baseline: Baseline?
        public var remaining: Int
    }

    /// Folds every change with Lamport ≤ the cut-off into the baseline (DESIGN §2). `limits` lowers the
    /// cut-off further (what paired peers have acknowledged); the earliest change this build cannot
    /// interpret always does. The state, and so the digest, do not change.
    public func compact(limits: [CutOffLimit] = []) throws -> CompactionReport {
        try transaction { db in
            let heads = try Store.heads(db).map {
                TimelineHead(timeline: $0.timeline, seq: $0.seq, lamport: $0.lamport, released: $0.ended)
            }
            var allLimits = limits
            if let unknown = try Store.earliestUninterpretable(db, understands: { kind, version in
                kind == Change.timelineEndKind || self.domain.canInterpret(kind: kind, version: version)
            }) {
                allLimits.append(.uninterpretable(lamport: unknown.lamport - 1))
            }
            let previous = try Store.baseline(db)
            guard let cut = Compaction.cutOff(heads: heads, limits: allLimits) else {
                return CompactionReport(cutOff: nil, folded: 0, baseline: previous, remaining: 0)
            }
            var folder = try BaselineFolder(domain: domain, previous: previous)
            let statement = try db.makeStatement(
                sql: "SELECT \(ChangeRows.columns) FROM changes WHERE lamport <= ? ORDER BY lamport, tl, seq")
            statement.arguments = [Int64(cut.lamport)]
            try ChangeRows.scan(statement, withChain: true) { change in try folder.add(change) }
            let remaining = try Int.fetchOne(db, sql: "SELECT count(*) FROM changes WHERE lamport > ?", arguments: [Int64(cut.lamport)]) ?? 0
            guard folder.folded > 0 else {
                return CompactionReport(cutOff: cut, folded: 0, baseline: previous, remaining: remaining)
            }
            let baseline = folder.finish()
            try db.execute(sql: "DELETE FROM changes WHERE lamport <= ?", arguments: [Int64(cut.lamport)])
            try db.execute(
                sql: "INSERT OR REPLACE INTO baseline (id, summary, max_lamport, data) VALUES (1, ?, ?, ?)",
                arguments: [baseline.summary.description, Int64(baseline.maxLamport), Data(baseline.encoded())])
            try db.execute(sql: "DELETE FROM checkpoints WHERE lamport <= ?", arguments: [Int64(cut.lamport)])
            engine.dropCheckpoints(through: OrderKey(lamport: cut.lamport, timeline: TimelineID(.max), seq: .max))
            return CompactionReport(cutOff: cut, folded: folder.folded, baseline: baseline, remaining: remaining)
        }
    }

    /// Stored changes this build cannot interpret (a newer plait wrote them): kept, forwarded, skipped.
    /// Counting scans every stored change, so the count is kept until the store's generation moves (every
    /// session's Hello carries it).
    public func uninterpretableCount() throws -> Int {
        let current: Int64 = try store.read { db in try Meta.get(db, .generation) ?? 0 }
        if let cached = lock.withLock({ uninterpretable }), cached.generation == current { return cached.count }
        let count = try store.kindCounts().filter { !domain.understands(kind: $0.kind, version: $0.version) }
            .reduce(0) { $0 + $1.count }
        lock.withLock { uninterpretable = (current, count) }
        return count
    }
}

extension Domain {
    func understands(kind: String, version: UInt32) -> Bool {
        kind == Change.timelineEndKind || canInterpret(kind: kind, version: version)
    }
}
