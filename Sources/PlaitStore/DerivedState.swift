import Foundation
import GRDB
import PlaitCore

/// Derived data found damaged and healed from the source (DESIGN §10): what the one warning says.
public enum DerivedStateRepair: Sendable, Equatable, CustomStringConvertible {
    /// The materialized state failed to load or to check, and was replayed from the source.
    case rebuilt(problem: String, changes: Int, fromBaseline: Bool)
    /// A stored checkpoint did not decode: it is dropped and replay restarts from an earlier point.
    case droppedCheckpoint(at: OrderKey, problem: String)

    public var description: String {
        switch self {
        case let .rebuilt(problem, changes, fromBaseline):
            let source = (fromBaseline ? "the baseline and " : "") + "the \(changes) stored changes"
            return "the materialized state was damaged (\(problem)); rebuilt it from \(source)"
        case let .droppedCheckpoint(key, problem):
            return "a stored checkpoint (at \(key)) was damaged (\(problem)); dropped it and replayed from an "
                + "earlier point"
        }
    }
}

/// The derived half of a store: the materialized rows and the replay position they were saved at are a cache
/// of replay(baseline, stored changes). Loading checks them; replaying the source rebuilds them.
enum DerivedState {
    /// The materialized state brought up to the stored changes.
    struct Loaded {
        var state: ListsState
        var position: OrderKey
        /// Stored changes beyond the "applied up to" marker, replayed onto the rows (none after a clean save).
        var replayedForward: Int
    }

    /// The materialized state and its position, checked, then brought up to the stored changes: the rows hold
    /// the state of the changes in the "applied up to" summary; changes committed beyond it (a pulled batch
    /// whose state was to be saved shortly after, and a crash came first) are applied on top, rolling back to
    /// `restart` (a stored checkpoint, the baseline) if one sorts before the rows' position. Throws
    /// `StoreError.damagedDerivedState` (or SQLite's error for a page it cannot read) when they cannot be
    /// trusted.
    static func load(_ db: Database, domain: ListsDomain, restart: ReplayFallback<ListsState>) throws -> Loaded {
        let state = try MaterializedRows.load(db)
        let position = try Replica.position(db)
        let unapplied = try unappliedChanges(db)
        var engine = ReplayEngine(domain: domain, state: state, position: position)
        engine.checkpointInterval = .max
        if !unapplied.isEmpty {
            let stats = try domain.bound(to: db) {
                try engine.integrate(unapplied, source: StoredChanges(db: db), fallback: restart)
            }
            if stats.rolledBack {
                // The rows no longer match the marks a rollback leaves: mark exactly the records that differ.
                let differences = ListsState.differences(from: state, to: engine.state)
                engine.modifyState { $0.markChanged(lists: differences.lists, items: differences.items) }
            }
        }
        // Every save leaves the position at the newest change it applied, and every change beyond the marker
        // was just applied: a position elsewhere means the rows are not the state of these changes.
        if let newest = try StoredChanges.newestKey(db), newest != engine.position {
            throw StoreError.damagedDerivedState(
                "it was saved at change \(position)"
                    + (unapplied.isEmpty ? "" : " and \(unapplied.count) later changes were replayed onto it")
                    + ", but the newest stored change is \(newest)")
        }
        return Loaded(state: engine.state, position: engine.position, replayedForward: unapplied.count)
    }

    /// Stored changes beyond the "applied up to" marker, per timeline by number (the index's order).
    static func unappliedChanges(_ db: Database) throws -> [Change] {
        guard let text: String = try Meta.get(db, .appliedSummary) else { return [] }
        let applied: Summary
        do {
            applied = try Summary(parsing: text)
        } catch {
            throw StoreError.damagedDerivedState("its applied-up-to marker does not parse (\(error.reason))")
        }
        var out: [Change] = []
        let statement = try db.cachedStatement(
            sql: "SELECT \(try ChangeRows.columns(db)) FROM changes WHERE tl = ? AND seq > ? ORDER BY seq")
        for head in try Store.heads(db) where head.seq > applied[head.timeline] {
            statement.arguments = [timelineColumn(head.timeline.rawValue), Int64(applied[head.timeline])]
            try ChangeRows.scan(statement, withChain: false) { out.append($0) }
        }
        return out
    }

    /// What went wrong with derived data, for the warning (without the advice a `StoreError` carries).
    static func problem(_ error: any Error) -> String {
        switch error {
        case let StoreError.damagedDerivedState(problem): return problem
        case let StoreError.sqlite(message): return "SQLite: \(message)"
        case let StoreError.inconsistent(detail): return detail
        case let error as DatabaseError: return "SQLite: \(error.message ?? "\(error)")"
        default: return "\(error)"
        }
    }

    /// A full replay of the source, in memory.
    struct Replay {
        var engine: ReplayEngine<ListsDomain>
        var changes: Int
        var fromBaseline: Bool
        var seconds: Double
    }

    /// Replays the baseline (if any) and every stored change into a fresh engine; writes nothing, so it serves
    /// a read-only command and `plait doctor`'s read-only connection alike. `afterEach` sees the engine after
    /// each change (doctor compares checkpoints on the way).
    static func replay(
        _ db: Database, domain: ListsDomain, afterEach: ((ReplayEngine<ListsDomain>) throws -> Void)? = nil
    ) throws -> Replay {
        let start = DispatchTime.now().uptimeNanoseconds
        var initial = domain.emptyState()
        let baseline = try Store.baseline(db)
        if let baseline {
            do {
                initial = try domain.restore(snapshot: baseline.snapshot[...])
            } catch {
                throw StoreError.rejected(error)
            }
        }
        initial.trackChanges = false
        var engine = ReplayEngine(domain: domain, state: initial, position: .zero)
        // Checkpoints serve late changes, which land near the head: take them only over the last stretch of the
        // history instead of paying a state copy every interval all the way.
        let total = try Int.fetchOne(db, sql: "SELECT count(*) FROM changes") ?? 0
        let interval = engine.checkpointInterval
        let checkpointsFrom = total - interval * engine.checkpointLimit
        engine.checkpointInterval = checkpointsFrom > 0 ? Int.max : interval
        var count = 0
        // Deletes look their chains up on `db` while the pipeline's reader steps its statement on the same
        // connection: SQLite serializes a connection's calls (GRDB opens it in the library's serialized mode).
        try domain.bound(to: db) {
            try StoredChanges(db: db).forEachChangePipelined { change in
                engine.applyNext(change)
                count += 1
                if count == checkpointsFrom { engine.checkpointInterval = interval }
                try afterEach?(engine)
            }
        }
        engine.checkpointInterval = interval
        engine.modifyState { state in
            state.trackChanges = true
            _ = state.takeChanges()
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        return Replay(engine: engine, changes: count, fromBaseline: baseline != nil, seconds: seconds)
    }
}

extension StoredChanges {
    /// The newest stored change in replay order: where a full replay ends.
    static func newestKey(_ db: Database) throws -> OrderKey? {
        let sql = "SELECT lamport, tl, seq FROM changes ORDER BY lamport DESC, tl DESC, seq DESC LIMIT 1"
        guard let row = try Row.fetchOne(db, sql: sql) else { return nil }
        return OrderKey(
            lamport: UInt64(bitPattern: try row.decode(Int64.self, atIndex: 0)),
            timeline: TimelineID(timelineFromColumn(try row.decode(Int64.self, atIndex: 1))),
            seq: UInt64(bitPattern: try row.decode(Int64.self, atIndex: 2)))
    }
}

// MARK: Verification (plait doctor)

/// What `plait doctor` learns about the derived state: the materialized state compared with a replay of the
/// source, the baseline, and the stored checkpoints. Computed through a read-only connection.
public struct DerivedStateVerification: Sendable {
    /// The digest of the materialized state as its rows load, or why they do not load or check.
    public var materializedDigest: [UInt8]?
    public var materializedProblem: String?
    /// The digest of a full replay of the baseline and the stored changes, or why the replay failed.
    public var replayedDigest: [UInt8]?
    public var replayProblem: String?
    /// Stored changes replayed.
    public var changes: Int
    /// The stored baseline, if there is one.
    public var baseline: BaselineVerification?
    /// Whether the baseline's problem is that its bytes are not the ones stored (bit rot), not that they do not
    /// decode or disagree with their columns.
    public var baselineDamaged = false
    public var checkpoints: Int
    /// Checkpoints that do not decode or do not equal the replayed state at their change.
    public var checkpointProblems: [String]

    /// Whether the materialized state is exactly what the source replays to.
    public var materializedMatchesReplay: Bool {
        materializedDigest != nil && materializedDigest == replayedDigest
    }
}

/// The stored baseline as `plait doctor` checks it: it decodes, its snapshot restores, and the columns stored
/// beside it agree with it.
public struct BaselineVerification: Sendable {
    public var summary: Summary
    /// SHA-256 of its encoding, as Hello announces it.
    public var digest: [UInt8]
    public var problem: String?
}

extension Store {
    /// Loads the materialized state, replays the source beside it and compares the two, without writing.
    public static func verifyDerivedState(at path: String) throws -> DerivedStateVerification {
        try readingOnly(at: path) { db in try verifyDerivedState(db) }
    }

    static func verifyDerivedState(_ db: Database) throws -> DerivedStateVerification {
        let domain = ListsDomain()
        var result = DerivedStateVerification(changes: 0, checkpoints: 0, checkpointProblems: [])
        do {
            let loaded = try DerivedState.load(db, domain: domain) { key in
                try Replica.restartPoint(db, before: key, domain: domain, report: { _ in })
            }
            result.materializedDigest = domain.digest(of: loaded.state)
        } catch {
            result.materializedProblem = DerivedState.problem(error)
        }
        if let row = try Row.fetchOne(db, sql: "SELECT summary, max_lamport, data FROM baseline WHERE id = 1") {
            let bytes = [UInt8](try row.decode(Data.self, atIndex: 2))
            var check = BaselineVerification(summary: Summary(), digest: SHA256.hash(bytes))
            // Bytes that are not the ones stored are reported as such, not decoded: what they decode to is damage.
            check.problem = try Store.baselineDamage(db, digest: check.digest)
            result.baselineDamaged = check.problem != nil
            if check.problem == nil {
                do {
                    let baseline = try Baseline(decoding: bytes[...])
                    check.summary = baseline.summary
                    _ = try domain.restore(snapshot: baseline.snapshot[...])
                    let column = try row.decode(String.self, atIndex: 0)
                    if column != baseline.summary.description {
                        check.problem = "its summary column says \(column), its data \(baseline.summary)"
                    } else if UInt64(bitPattern: try row.decode(Int64.self, atIndex: 1)) != baseline.maxLamport {
                        check.problem = "its max_lamport column does not match its data"
                    }
                } catch {
                    check.problem = "it does not decode (\(error))"
                }
            }
            result.baseline = check
        }
        // Checkpoints by key: each must restore to the replayed state at that change.
        var checkpoints: [OrderKey: [UInt8]] = [:]
        for row in try Row.fetchAll(db, sql: "SELECT lamport, tl, seq, snapshot FROM checkpoints") {
            let key = OrderKey(
                lamport: UInt64(bitPattern: try row.decode(Int64.self, atIndex: 0)),
                timeline: TimelineID(timelineFromColumn(try row.decode(Int64.self, atIndex: 1))),
                seq: UInt64(bitPattern: try row.decode(Int64.self, atIndex: 2)))
            checkpoints[key] = [UInt8](try row.decode(Data.self, atIndex: 3))
        }
        result.checkpoints = checkpoints.count
        do {
            let replay = try DerivedState.replay(db, domain: domain) { engine in
                guard let snapshot = checkpoints.removeValue(forKey: engine.position) else { return }
                do {
                    if domain.digest(of: try domain.restore(snapshot: snapshot[...])) != engine.digest {
                        result.checkpointProblems.append("the checkpoint at \(engine.position) differs from a replay")
                    }
                } catch {
                    result.checkpointProblems.append("the checkpoint at \(engine.position) does not decode (\(error))")
                }
            }
            result.changes = replay.changes
            result.replayedDigest = replay.engine.digest
        } catch {
            result.replayProblem = DerivedState.problem(error)
        }
        return result
    }
}
