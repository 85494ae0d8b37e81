import Foundation
import GRDB
import PlaitCore
import PlaitTestSupport
import Testing

@testable import PlaitStore

/// Derived state (the materialized rows, the replay position, checkpoints) that fails to load or to check is
/// rebuilt from the source (DESIGN §10, issue 8 case 4): never a crash, in memory for a read, persisted by the
/// next write, reported once.
@Suite struct DerivedStateTests {
    /// Repairs a replica reports, collected across threads.
    final class Reports: @unchecked Sendable {
        private let lock = NSLock()
        private var repairs: [DerivedStateRepair] = []
        func append(_ repair: DerivedStateRepair) { lock.withLock { repairs.append(repair) } }
        var all: [DerivedStateRepair] { lock.withLock { repairs } }
    }

    /// A device with two lists, 40 items (some completed, some deleted) and then 60 random edits.
    static func populated(_ directory: TemporaryDirectory, seed: UInt64) throws -> Device {
        var rng = SplitMix64(seed: seed)
        let device = try Device("a", in: directory, timeline: TimelineID(rng.next()))
        try device.replica.edit(now: fixedNow) { edit in
            for title in ["Groceries", "Work"] {
                let list = objectID(&rng)
                try edit.append(.listCreate(id: list, title: title, color: nil, at: .bottom))
                for number in 0..<20 {
                    let item = objectID(&rng)
                    try edit.append(.itemCreate(id: item, list: list, text: "\(title) \(number)", at: .bottom))
                    if number % 5 == 1 { try edit.append(.itemComplete(id: item)) }
                    if number % 7 == 3 { try edit.append(.itemDelete(id: item)) }
                }
            }
        }
        try randomEdits(device.replica, count: 60, rng: &rng)
        return device
    }

    /// Damage as a user with sqlite3 (or a bad disk) would do it: each a statement on the store file.
    static let damages: [(name: String, sql: String, problem: String)] = [
        (
            "a dangling next", "UPDATE items SET next = randomblob(16) WHERE id = (\(linkedItem))",
            "names a next item"
        ),
        ("an item linked to itself", "UPDATE items SET next = id WHERE id = (\(linkedItem))", "linked twice"),
        ("a missing item row", "DELETE FROM items WHERE id = (\(linkedItem))", "does not exist"),
        ("an ID of one byte", "UPDATE items SET prev = x'00' WHERE id = (\(linkedItem))", "an ID of 1 bytes"),
        ("an item under another list", "UPDATE items SET list = randomblob(16) WHERE id = (\(linkedItem))",
         "does not name"),
        ("a list order that loops", "UPDATE lists SET next = id WHERE id = (SELECT id FROM lists LIMIT 1)", "loops"),
        ("a dangling first list", "UPDATE meta SET value = randomblob(16) WHERE key = 'list_head'", "does not exist"),
        ("a position of one byte", "UPDATE meta SET value = x'00' WHERE key = 'position'", "1 bytes, not 24"),
        ("a position behind the changes", "UPDATE meta SET value = zeroblob(24) WHERE key = 'position'",
         "newest stored change"),
    ]
    static let linkedItem = "SELECT id FROM items WHERE next IS NOT NULL AND prev IS NOT NULL ORDER BY id LIMIT 1"

    @Test(arguments: 0..<damages.count)
    func damagedRowsAreRebuiltInMemoryThenPersistedByTheNextWrite(damage index: Int) throws {
        let damage = Self.damages[index]
        try withTemporaryDirectory { directory in
            let device = try Self.populated(directory, seed: 0xDE41_0000 + UInt64(index))
            let healthy = device.digest
            let changes = try device.store.changeCount()
            try device.store.write { db in try db.execute(sql: damage.sql) }
            let damaged = try dump(device.store)

            // A new process reads the store: it must serve the replayed state and say so once.
            let reports = Reports()
            let cold = try device.reopened()
            cold.onDerivedStateRepair { reports.append($0) }
            #expect(hex(cold.digest) == hex(healthy), "\(damage.name): the rebuilt state is the replayed one")
            guard case let .rebuilt(problem, replayed, fromBaseline)? = reports.all.first, reports.all.count == 1 else {
                Issue.record("\(damage.name): expected one rebuild report, got \(reports.all)")
                return
            }
            #expect(problem.contains(damage.problem), "\(damage.name): \(problem)")
            #expect(replayed == changes && !fromBaseline)
            #expect(
                reports.all[0].description.hasPrefix("the materialized state was damaged (")
                    && reports.all[0].description.hasSuffix("rebuilt it from the \(changes) stored changes"),
                "\(reports.all[0])")
            try cold.refresh()
            #expect(try dump(device.store) == damaged, "\(damage.name): a read writes nothing")
            #expect(reports.all.count == 1, "no second warning for the same damage")

            // The next write persists the rebuild: a third process loads the rows without rebuilding.
            try cold.edit(now: fixedNow) { edit in
                let list = edit.state.liveListIDs[0]
                try edit.append(.itemCreate(id: ObjectID(high: 1, low: 2), list: list, text: "after", at: .top))
            }
            let after = cold.digest
            let laterReports = Reports()
            let later = try device.reopened()
            later.onDerivedStateRepair { laterReports.append($0) }
            #expect(laterReports.all.isEmpty, "\(damage.name): the rows were rewritten: \(laterReports.all)")
            #expect(hex(later.digest) == hex(after))
            let verification = try Store.verifyDerivedState(at: device.path)
            #expect(verification.materializedMatchesReplay, "\(damage.name): \(verification)")
        }
    }

    @Test func doctorsVerificationFindsTheMismatchAndRepairFixesIt() throws {
        try withTemporaryDirectory { directory in
            let device = try Self.populated(directory, seed: 0xD0C7_0001)
            device.replica.storedCheckpointInterval = 1
            var rng = SplitMix64(seed: 9)
            try randomEdits(device.replica, count: 3, rng: &rng)
            let healthy = device.digest
            var verification = try Store.verifyDerivedState(at: device.path)
            #expect(verification.materializedMatchesReplay && verification.checkpointProblems.isEmpty)
            #expect(verification.checkpoints > 0)
            #expect(verification.replayedDigest.map(hex) == hex(healthy))

            // Consistent links, wrong text: no load check can see it, a replay can.
            try device.store.write { db in
                try db.execute(sql: "UPDATE items SET text = 'tampered' WHERE id = (SELECT id FROM items LIMIT 1)")
                try db.execute(sql: "UPDATE checkpoints SET snapshot = x'ff'")
            }
            try device.store.checkpointWAL()
            let before = fingerprint(device.path)
            verification = try Store.verifyDerivedState(at: device.path)
            #expect(fingerprint(device.path) == before, "verification writes nothing")
            #expect(!verification.materializedMatchesReplay)
            #expect(verification.materializedProblem == nil, "the rows load and check: \(verification)")
            #expect(verification.checkpointProblems.count == verification.checkpoints)

            let repaired = try device.reopened().rebuildDerivedState()
            #expect(repaired.problem == nil && !repaired.matched)
            #expect(repaired.checkpointsDropped == verification.checkpoints && repaired.checkpointsWritten == 1)
            #expect(hex(repaired.digest) == hex(healthy))
            verification = try Store.verifyDerivedState(at: device.path)
            #expect(
                verification.materializedMatchesReplay && verification.checkpointProblems.isEmpty, "\(verification)")
            #expect(try device.reopened().rebuildDerivedState().matched, "a second repair finds nothing to fix")
        }
    }

    /// A cold replica meets a late change and rolls back: the newest stored checkpoint before it does not decode,
    /// so it is dropped, reported, and replay starts from the one before.
    @Test(arguments: [0xC0_1D_DA_3A as UInt64])
    func aCheckpointThatDoesNotDecodeIsDroppedAndReplayFallsBack(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            a.replica.storedCheckpointInterval = 3
            try randomEdits(a.replica, count: 12, rng: &rng)
            _ = try b.replica.integrate(try a.store.changes(of: try a.timeline, from: 1, limit: 7))
            try randomEdits(b.replica, count: 2, rng: &rng)
            let late = try b.changesMissing(from: a)
            let keys = try a.store.read { db in
                try Row.fetchAll(db, sql: "SELECT lamport FROM checkpoints ORDER BY lamport").map { $0[0] as Int64 }
            }
            // The late changes have Lamport 8 and 9: the newest checkpoint before them is the one to damage.
            guard let victim = keys.last(where: { $0 < 8 }) else {
                Issue.record("no stored checkpoint before the late changes: \(keys)")
                return
            }
            try a.store.write { db in
                try db.execute(sql: "UPDATE checkpoints SET snapshot = x'0a05' WHERE lamport = ?", arguments: [victim])
            }
            let reports = Reports()
            let cold = try a.reopened()
            cold.onDerivedStateRepair { reports.append($0) }
            let result = try cold.integrate(late)
            #expect(result.stats.rolledBack)
            guard case let .droppedCheckpoint(key, _)? = reports.all.first else {
                Issue.record("expected a dropped checkpoint, got \(reports.all)")
                return
            }
            #expect(key.lamport == UInt64(victim))
            let remaining = try a.store.read { db in
                try Int.fetchOne(db, sql: "SELECT count(*) FROM checkpoints WHERE lamport = ?", arguments: [victim])
            }
            #expect(remaining == 0, "the damaged checkpoint row was deleted in the same transaction")
            let reference = try a.reopened()
            try reference.rebuild()
            #expect(hex(cold.digest) == hex(reference.digest))
        }
    }

    /// A store made before the checkpoints moved to a rowid table (migration `v12-checkpoint-blobs`, so that a
    /// snapshot is written by incremental blob I/O): the first write copies its stored checkpoints over byte for
    /// byte, and a cold late change afterwards rolls back to one of them and ends in the state a full replay gives.
    @Test(arguments: [0xB10B_0012 as UInt64])
    func checkpointsStoredBeforeTheBlobMigrationAreKept(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            let late: [Change]
            let path: String
            do {
                // Every handle on the old store is dropped at the end of this block, before the file is changed.
                let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
                a.replica.storedCheckpointInterval = 3
                try randomEdits(a.replica, count: 12, rng: &rng)
                _ = try b.replica.integrate(try a.store.changes(of: try a.timeline, from: 1, limit: 7))
                try randomEdits(b.replica, count: 2, rng: &rng)
                late = try b.changesMissing(from: a)
                path = a.path
            }
            let selectAll = "SELECT lamport, tl, seq, snapshot FROM checkpoints ORDER BY lamport, tl, seq"
            // The table as migrations v1 – v11 made it, and v12 not yet applied.
            try runSQLite(
                path,
                """
                CREATE TABLE old_checkpoints (
                    lamport INTEGER NOT NULL, tl INTEGER NOT NULL, seq INTEGER NOT NULL, snapshot BLOB NOT NULL,
                    PRIMARY KEY (lamport, tl, seq)
                ) WITHOUT ROWID;
                INSERT INTO old_checkpoints \(selectAll);
                DROP TABLE checkpoints;
                ALTER TABLE old_checkpoints RENAME TO checkpoints;
                DELETE FROM grdb_migrations WHERE identifier = 'v12-checkpoint-blobs';
                """)
            let old = try Device("a", opening: path)
            let before = try old.store.read { db in try Row.fetchAll(db, sql: selectAll) }
            #expect(before.count >= 2, "seed \(seed): the old store holds checkpoints")

            let reports = Reports()
            old.replica.onDerivedStateRepair { reports.append($0) }
            // The first write migrates; the late change then rolls back to a stored checkpoint.
            let result = try old.replica.integrate(late)
            #expect(result.stats.rolledBack, "seed \(seed)")
            #expect(reports.all.isEmpty, "seed \(seed): \(reports.all)")
            let (after, withoutRowid) = try old.store.read { db in
                (
                    try Row.fetchAll(db, sql: selectAll),
                    try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE name = 'checkpoints'") ?? ""
                )
            }
            #expect(!withoutRowid.contains("WITHOUT ROWID"), "seed \(seed)")
            // Those at or after the late changes are dropped by the rollback; the earlier ones stay as they were.
            let firstLate = Int64(late.map(\.lamport).min() ?? 0)
            let kept = before.filter { ($0[0] as Int64) < firstLate }
            #expect(!kept.isEmpty && kept.allSatisfy { after.contains($0) }, "seed \(seed): the old checkpoints are kept as they were")
            let reference = try old.reopened()
            try reference.rebuild()
            #expect(hex(old.digest) == hex(reference.digest), "seed \(seed)")
        }
    }
}

extension DerivedStateVerification: CustomStringConvertible {
    public var description: String {
        "materialized \(materializedDigest.map(hex) ?? materializedProblem ?? "?"), replayed "
            + "\(replayedDigest.map(hex) ?? replayProblem ?? "?"), checkpoints \(checkpoints) \(checkpointProblems)"
    }
}
