import Foundation
import GRDB
import PlaitCore
import PlaitTestSupport
import Testing

@testable import PlaitStore

/// Durable source, lazily saved derived state (DESIGN §12): a large pulled batch commits its change rows, heads
/// and summary; the materialized rows stay at the "applied up to" marker until saved, and a crash in between
/// loses nothing: the next load replays forward from the marker.
@Suite struct LazyDerivedStateTests {
    /// The marker and the summary as stored.
    func marker(_ store: Store) throws -> (applied: String?, summary: String) {
        try store.read { db in (try Meta.get(db, .appliedSummary), try Store.summary(db).description) }
    }

    @Test(arguments: [0x1A2_0001 as UInt64])
    func aLargeBatchCommitsItsSourceAndItsStateLater(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let a = try Device("a", in: directory, timeline: TimelineID(0xA))
            let b = try Device("b", in: directory, timeline: TimelineID(0xB))
            try randomEdits(a.replica, count: 5, rng: &rng)
            try b.pull(from: a)
            try randomEdits(a.replica, count: 600, rng: &rng, perEdit: false)
            try b.pull(from: a)
            // Committed: the changes and the summary. Not yet: the rows, which stay at the marker.
            #expect(b.replica.derivedUnsaved, "seed \(seed)")
            let before = try marker(b.store)
            #expect(before.applied != nil && before.applied != before.summary, "\(before)")
            // Another process (or this one after a crash) sees the whole state: rows plus the changes beyond them.
            let cold = try b.reopened()
            #expect(cold.digest == b.digest)
            #expect(cold.digest == a.digest)
            try b.replica.saveDerivedState()
            #expect(!b.replica.derivedUnsaved)
            let after = try marker(b.store)
            #expect(after.applied == after.summary)
            let loaded = try b.store.read { db in
                try DerivedState.load(db, domain: ListsDomain()) { _ in (.zero, ListsState()) }
            }
            #expect(loaded.replayedForward == 0)
            #expect(ListsDomain().digest(of: loaded.state) == a.digest)
        }
    }

    @Test(arguments: [0x1A2_0002 as UInt64])
    func smallBatchesSaveTheirStateAtOnce(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let a = try Device("a", in: directory, timeline: TimelineID(0xA))
            let b = try Device("b", in: directory, timeline: TimelineID(0xB))
            try randomEdits(a.replica, count: 10, rng: &rng)
            try b.pull(from: a)
            #expect(!b.replica.derivedUnsaved, "a live edit from a peer is saved with its batch")
            let stored = try marker(b.store)
            #expect(stored.applied == stored.summary)
        }
    }

    /// The process dies between the change commit and the state save (the replica is dropped unsaved, and the
    /// file is opened again, as after kill -9): the rows load at the marker and the rest is replayed; the next
    /// write saves it; a local edit goes on from the right state.
    @Test(arguments: [0x1A2_0003 as UInt64])
    func aCrashBetweenTheChangeCommitAndTheStateSaveLosesNothing(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let a = try Device("a", in: directory, timeline: TimelineID(0xA))
            var b: Device? = try Device("b", in: directory, timeline: TimelineID(0xB))
            try randomEdits(a.replica, count: 3, rng: &rng)
            try b!.pull(from: a)
            try randomEdits(a.replica, count: 300, rng: &rng, perEdit: false)
            let all = try a.changesMissing(from: b!)
            // Two deferred batches, as a catch-up commits them.
            _ = try b!.replica.integrate(Array(all.prefix(150)))
            _ = try b!.replica.integrate(Array(all.dropFirst(150)))
            #expect(b!.replica.derivedUnsaved)
            let path = b!.path
            b = nil
            let revived = try Device("b", opening: path)
            #expect(revived.digest == a.digest, "seed \(seed)")
            #expect(revived.replica.derivedUnsaved, "the replayed state is still to be saved")
            try revived.replica.edit(now: fixedNow) { edit in
                try edit.append(.listCreate(id: ObjectID(high: 1, low: 2), title: "after", color: nil, at: .bottom))
            }
            let stored = try marker(revived.store)
            #expect(stored.applied == stored.summary)
            #expect(try revived.reopened().digest == revived.digest)
            // Doctor's check agrees: the rows are exactly what the source replays to.
            let verification = try revived.store.read { db in try Store.verifyDerivedState(db) }
            #expect(verification.materializedMatchesReplay, "\(verification)")
        }
    }

    /// A read-only view while the rows are behind (an agent mid-catch-up, `plait show` beside it): it sees the
    /// whole state and writes nothing, and doctor's comparison does not call the rows damaged.
    @Test(arguments: [0x1A2_0004 as UInt64])
    func readersSeeTheWholeStateWhileTheRowsAreBehind(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let a = try Device("a", in: directory, timeline: TimelineID(0xA))
            let b = try Device("b", in: directory, timeline: TimelineID(0xB))
            try randomEdits(a.replica, count: 3, rng: &rng)
            try b.pull(from: a)
            try randomEdits(a.replica, count: 400, rng: &rng, perEdit: false)
            try b.pull(from: a)
            #expect(b.replica.derivedUnsaved)
            let rows = try dump(b.store)
            let verification = try Store.verifyDerivedState(at: b.path)
            #expect(verification.materializedMatchesReplay, "\(verification)")
            #expect(try dump(b.store) == rows, "reading wrote nothing")
        }
    }

    /// The save of a pull's deferred state writes the rows and, when one is due, a stored checkpoint encoded on a
    /// second thread meanwhile: the checkpoint is the saved state at the saved position. If writing the rows fails,
    /// nothing of the save is kept (no checkpoint, the rows at their marker) and a later save does it all.
    @Test(arguments: [0x1A2_0005 as UInt64])
    func theDeferredSaveStoresTheCheckpointItEncodedBesideTheRows(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let a = try Device("a", in: directory, timeline: TimelineID(0xA))
            let b = try Device("b", in: directory, timeline: TimelineID(0xB))
            b.replica.storedCheckpointInterval = 100
            try randomEdits(a.replica, count: 5, rng: &rng)
            try b.pull(from: a)
            try randomEdits(a.replica, count: 600, rng: &rng, perEdit: false)
            let checkpoints = { () throws -> [Row] in
                try b.store.read { db in try Row.fetchAll(db, sql: "SELECT lamport, tl, seq, snapshot FROM checkpoints") }
            }
            let checkpointsBefore = try checkpoints()

            // Writing an item row fails: the save throws, and leaves every stored byte as it was.
            try b.pull(from: a)
            #expect(b.replica.derivedUnsaved, "seed \(seed)")
            try b.store.write { db in
                try db.execute(
                    sql: "CREATE TRIGGER refuse BEFORE INSERT ON items BEGIN SELECT RAISE(ABORT, 'disk says no'); END")
            }
            let rows = try dump(b.store)
            #expect(throws: (any Error).self) { try b.replica.saveDerivedState() }
            #expect(try dump(b.store) == rows, "a failed save kept nothing (seed \(seed))")
            #expect(b.replica.derivedUnsaved)
            #expect(b.digest == a.digest)

            try b.store.write { db in try db.execute(sql: "DROP TRIGGER refuse") }
            try b.replica.saveDerivedState()
            #expect(!b.replica.derivedUnsaved)
            let stored = try checkpoints()
            #expect(stored.count == checkpointsBefore.count + 1, "seed \(seed)")
            let position = b.replica.position
            let newest = try #require(stored.first { row in
                (row[0] as Int64) == Int64(position.lamport) && (row[2] as Int64) == Int64(position.seq)
            })
            let snapshot: Data = newest[3]
            let restored = try ListsDomain().restore(snapshot: Array(snapshot)[...])
            #expect(ListsDomain().digest(of: restored) == a.digest, "the checkpoint is the saved state (seed \(seed))")
            let loaded = try b.store.read { db in
                try DerivedState.load(db, domain: ListsDomain()) { _ in (.zero, ListsState()) }
            }
            #expect(loaded.replayedForward == 0)
            #expect(ListsDomain().digest(of: loaded.state) == a.digest)
        }
    }
}
