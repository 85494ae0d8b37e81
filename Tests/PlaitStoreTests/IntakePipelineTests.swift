import Foundation
import Synchronization
import GRDB
import PlaitCore
import PlaitTestSupport
import Testing

@testable import PlaitStore

/// Validation of batch n+1 overlapping the commit of batch n (DESIGN §12).
@Suite struct IntakePipelineTests {
    /// `count` changes of `a` that `b` lacks, cut into batches of `size`.
    func batches(_ a: Device, for b: Device, size: Int) throws -> [[EncodedChange]] {
        let all = try a.changesMissing(from: b).map { EncodedChange($0) }
        return stride(from: 0, to: all.count, by: size).map { Array(all[$0..<min($0 + size, all.count)]) }
    }

    /// `batches`, the last one merged into the one before when it is below `Replica.deferDerivedFrom` (a small
    /// batch is applied at once, and applies every change stored before it).
    func largeBatches(_ a: Device, for b: Device, size: Int) throws -> [[EncodedChange]] {
        var pieces = try batches(a, for: b, size: size)
        if pieces.count > 1, pieces[pieces.count - 1].count < b.replica.deferDerivedFrom {
            let last = pieces.removeLast()
            pieces[pieces.count - 1] += last
        }
        return pieces
    }

    @Test(arguments: [0x919_0001 as UInt64])
    func overlappedBatchesCommitWhatOneBatchWould(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let a = try Device("a", in: directory, timeline: TimelineID(0xA))
            let b = try Device("b", in: directory, timeline: TimelineID(0xB))
            try randomEdits(a.replica, count: 700, rng: &rng, perEdit: false)
            let pipeline = b.replica.intakePipeline()
            var taken = 0
            // The batches are read before any is submitted: read after, they would depend on how far the commits
            // got (the last one could already be in, leaving nothing to send again).
            let all = try batches(a, for: b, size: 100)
            for batch in all { taken += try pipeline.submit(batch).added }
            // A batch sent twice (a resumed stream) is recognised as held even while its first copy commits.
            let again = try pipeline.submit(try #require(all.last))
            let results = try pipeline.finish()
            #expect(taken == 700 && again.added == 0, "seed \(seed)")
            #expect(results.map(\.added).reduce(0, +) == 700)
            #expect(try b.summary == a.summary)
            #expect(b.digest == a.digest)
            #expect(try b.reopened().digest == a.digest)
        }
    }

    /// Batch 1's commit fails (a real SQLite abort, from a trigger); batch 2 was validated against the heads
    /// batch 1 would have left while batch 1 waited to commit: it is discarded, nothing of either is stored,
    /// and the failure is reported. The store then takes both normally.
    /// An agent's sessions with two peers share one replica, each with its pipeline. Session X pulls changes
    /// 1 – 10 of timeline A; session Y pulls 11 – 20; X then pulls from where the store now is. X's pipeline
    /// checked that batch against the head its own earlier batch left (10), not the stored head (20), and
    /// refused A ("it sent change 21 where 11 was due (a gap)"). Seen in `plait demo`, whose devices then never
    /// converged. A head projected by a batch already committed is no newer than the store's.
    @Test(arguments: [0x919_0008 as UInt64])
    func aPipelineChecksAgainstTheStoredHeadWhenAnotherSessionMovedIt(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let a = try Device("a", in: directory, timeline: TimelineID(0xA))
            let b = try Device("b", in: directory, timeline: TimelineID(0xB))
            try randomEdits(a.replica, count: 30, rng: &rng)
            let changes = try a.changesMissing(from: b).map { EncodedChange($0) }
            let all = [Array(changes[0..<10]), Array(changes[10..<20]), Array(changes[20...])]
            let sessionX = b.replica.intakePipeline()
            let sessionY = b.replica.intakePipeline()
            #expect(try sessionX.submit(all[0]).added == 10)
            try sessionX.finish()
            #expect(try sessionY.submit(all[1]).added == 10)
            try sessionY.finish()
            let third = try sessionX.submit(all[2])
            try sessionX.finish()
            #expect(third.refused.isEmpty, "seed \(seed): \(third.refused.map(\.refusal))")
            #expect(third.added == changes.count - 20, "seed \(seed)")
            #expect(try b.summary == a.summary, "seed \(seed)")
            #expect(b.digest == a.digest, "seed \(seed)")
        }
    }

    @Test(arguments: [0x919_0002 as UInt64])
    func aBatchWhoseCommitFailsDiscardsTheValidatedNextOne(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let a = try Device("a", in: directory, timeline: TimelineID(0xA))
            let b = try Device("b", in: directory, timeline: TimelineID(0xB))
            try randomEdits(a.replica, count: 3, rng: &rng)
            try b.pull(from: a)
            try randomEdits(a.replica, count: 200, rng: &rng, perEdit: false)
            let pieces = try batches(a, for: b, size: 100)
            #expect(pieces.count == 2)
            let failAt = pieces[0][50].change.seq
            try b.store.write { db in
                try db.execute(sql: """
                    CREATE TRIGGER fail_once BEFORE INSERT ON changes WHEN NEW.seq = \(failAt)
                    BEGIN SELECT RAISE(ABORT, 'disk on fire'); END
                    """)
            }
            let withTrigger = try dump(b.store)
            let pipeline = b.replica.intakePipeline()
            let hold = DispatchSemaphore(value: 0)
            pipeline.beforeCommit = { hold.wait() }
            let checked = Mutex<[Replica.IntegrateResult]>([])
            let secondChecked = DispatchSemaphore(value: 0)
            pipeline.afterValidation = { result in
                checked.withLock { $0.append(result) }
                if result.added == 100 && checked.withLock({ $0.count }) == 2 { secondChecked.signal() }
            }
            let first = try pipeline.submit(pieces[0])
            // Batch 2 on another thread: it is checked at once, against the heads batch 1 will leave, then waits
            // for batch 1's commit (one commit in flight at most).
            let second = Mutex<Result<Replica.IntegrateResult, any Error>?>(nil)
            let secondDone = DispatchSemaphore(value: 0)
            let submitter = Thread {
                let outcome = Result { try pipeline.submit(pieces[1]) }
                second.withLock { $0 = outcome }
                secondDone.signal()
            }
            submitter.start()
            secondChecked.wait()
            let checkedSecond = checked.withLock { $0.last }
            #expect(first.added == 100 && checkedSecond?.added == 100 && checkedSecond?.refused.isEmpty == true)
            // Batch 1 now commits, and fails; batch 2 is discarded, never committed.
            hold.signal()
            secondDone.wait()
            let secondOutcome = second.withLock { $0 }
            guard case .failure = secondOutcome else {
                Issue.record("batch 2 was taken after batch 1 failed: \(String(describing: secondOutcome))")
                return
            }
            #expect(throws: (any Error).self) { try pipeline.finish() }
            #expect(throws: (any Error).self) { _ = try pipeline.submit(pieces[1]) }
            #expect(try dump(b.store) == withTrigger, "nothing of either batch was stored")
            #expect(try b.reopened().digest == b.digest)
            try b.store.write { db in try db.execute(sql: "DROP TRIGGER fail_once") }
            try b.pull(from: a)
            #expect(b.digest == a.digest)
        }
    }

    /// A pull's large batches in replay order are only stored; their state is applied from the rows when it is
    /// next needed (a read, a write, the save at the session's end). Two timelines written offline at once
    /// interleave in Lamport order: applied late or at once, the state is what one device taking everything
    /// the plain way gets. `readBetween`: the state is read after the first peer's batches, so the second peer's
    /// changes sort before what the engine applied and roll back, instead of being read back with the first's.
    @Test(arguments: [(0x919_0003 as UInt64, false), (0x919_0004, true)])
    func pulledBatchesAreAppliedFromTheRowsWhenNextNeeded(seed: UInt64, readBetween: Bool) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let a = try Device("a", in: directory, timeline: TimelineID(0xA))
            let c = try Device("c", in: directory, timeline: TimelineID(0xC))
            let b = try Device("b", in: directory, timeline: TimelineID(0xB))
            let reference = try Device("d", in: directory, timeline: TimelineID(0xD))
            try randomEdits(a.replica, count: 5, rng: &rng)
            try c.pull(from: a)
            try b.pull(from: a)
            try reference.pull(from: a)
            try randomEdits(a.replica, count: 450, rng: &rng, perEdit: false)
            try randomEdits(c.replica, count: 330, rng: &rng, perEdit: false)
            try reference.pull(from: a)
            try reference.pull(from: c)

            let pipeline = b.replica.intakePipeline()
            for batch in try largeBatches(a, for: b, size: 100) { _ = try pipeline.submit(batch) }
            try pipeline.finish()
            #expect(b.replica.lagging, "the batches were stored, their state not applied (seed \(seed))")
            #expect(b.replica.derivedUnsaved)
            if readBetween {
                #expect(b.digest == a.digest, "seed \(seed)")
                #expect(!b.replica.lagging)
            }
            for batch in try largeBatches(c, for: b, size: 100) { _ = try pipeline.submit(batch) }
            try pipeline.finish()
            #expect(try b.summary == reference.summary)
            #expect(b.digest == reference.digest, "seed \(seed)")
            #expect(!b.replica.lagging)
            #expect(try b.reopened().digest == reference.digest, "another process sees it too")
            try b.replica.saveDerivedState()
            #expect(!b.replica.derivedUnsaved)
            let verification = try b.store.read { db in try Store.verifyDerivedState(db) }
            #expect(verification.materializedMatchesReplay, "\(verification) (seed \(seed))")
        }
    }

    /// The count of changes this build cannot interpret is taken once, before a pull, and then follows its
    /// commits, the deferred save included: the status read after a catch-up does not scan every change the
    /// pull brought (before, the save's commit invalidated the count and the status read recounted: a sort of
    /// every row, 2 MiB of SQLite's sorter at the peak of the catch-up's memory).
    @Test(arguments: [0x919_0007 as UInt64])
    func theStatusAfterACatchUpDoesNotRecountEveryChange(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let a = try Device("a", in: directory, timeline: TimelineID(0xA))
            let b = try Device("b", in: directory, timeline: TimelineID(0xB))
            try a.replica.edit(now: fixedNow) { edit in
                try edit.appendRaw(kind: "item.frobnicate", version: 1, payload: rng.bytes(40))
            }
            try randomEdits(a.replica, count: 400, rng: &rng, perEdit: false)
            try a.replica.edit(now: fixedNow) { edit in
                try edit.appendRaw(kind: "item.edit", version: 9, payload: rng.bytes(20))
            }
            let pipeline = b.replica.intakePipeline()
            for batch in try largeBatches(a, for: b, size: 100) { _ = try pipeline.submit(batch) }
            try pipeline.finish()
            #expect(b.replica.lagging && b.replica.derivedUnsaved, "the pull's state was deferred (seed \(seed))")
            try b.replica.saveDerivedState()
            let status = try b.replica.status()
            #expect(status.uninterpretable == 2, "seed \(seed)")
            #expect(b.replica.uninterpretableScans == 1, "counted before the pull only, not again after it")
            #expect(try Replica(store: b.store).uninterpretableCount() == 2, "a cold count agrees")
            #expect(b.digest == a.digest)
        }
    }

    /// Each live list's items, pending then completed.
    func itemsByList(_ state: ListsState) -> [ObjectID: [ObjectID]] {
        Dictionary(uniqueKeysWithValues: state.liveListIDs.map {
            ($0, state.itemIDs(in: $0, completed: false) + state.itemIDs(in: $0, completed: true))
        })
    }

    /// While a pull's state lags: a local edit applies on top of the whole state; another process's write is
    /// seen; and a crash (the replica dropped unsaved, the file opened again) loses nothing. Each from a device
    /// that has just stored 200 – 400 pulled changes without applying them.
    @Test(arguments: [0x919_0005 as UInt64])
    func whileThePullsStateLagsEditsCrashesAndOtherWritersLoseNothing(seed: UInt64) throws {
        /// `body(a, b, reference, pulls)`: `b` has pulled the first 5 changes of `a`, `reference` too, and `pulls`
        /// are a's next 400 in batches of 100.
        func lagging(_ body: (Device, inout Device?, Device, [[EncodedChange]]) throws -> Void) throws {
            try withTemporaryDirectory { directory in
                var rng = SplitMix64(seed: seed)
                let a = try Device("a", in: directory, timeline: TimelineID(0xA))
                var b: Device? = try Device("b", in: directory, timeline: TimelineID(0xB))
                let reference = try Device("d", in: directory, timeline: TimelineID(0xD))
                try randomEdits(a.replica, count: 5, rng: &rng)
                try b!.pull(from: a)
                try reference.pull(from: a)
                try randomEdits(a.replica, count: 400, rng: &rng, perEdit: false)
                let pulls = try batches(a, for: b!, size: 100)
                #expect(pulls.map(\.count) == [100, 100, 100, 100], "seed \(seed)")
                try body(a, &b, reference, pulls)
            }
        }
        func submit(_ batches: some Sequence<[EncodedChange]>, to b: Device) throws {
            let pipeline = b.replica.intakePipeline()
            for batch in batches { _ = try pipeline.submit(batch) }
            try pipeline.finish()
            #expect(b.replica.lagging, "seed \(seed)")
        }
        let mine = ObjectID(high: 0xB, low: 1)

        // A local edit: it sees, and keeps, the pulled changes it sorts after.
        try lagging { a, b, reference, pulls in
            try submit(pulls.prefix(2), to: b!)
            _ = try reference.replica.integrate(pulls.prefix(2).flatMap { $0.map(\.change) })
            let seen = try b!.replica.edit(now: fixedNow) { edit in
                try edit.append(.listCreate(id: mine, title: "mine", color: nil, at: .bottom))
                return itemsByList(edit.state)
            }
            #expect(!b!.replica.lagging)
            var expected = itemsByList(reference.replica.state)
            expected[mine] = []
            #expect(seen == expected, "seed \(seed)")
            #expect(try b!.reopened().digest == b!.digest)
        }

        // Another process writes while this one lags: the next read reloads instead of applying on top.
        try lagging { a, b, reference, pulls in
            try submit(pulls.prefix(3), to: b!)
            let other = try b!.reopened()
            try other.edit(now: fixedNow) { edit in
                try edit.append(.listCreate(id: mine, title: "theirs", color: nil, at: .top))
            }
            #expect(b!.digest == other.digest, "seed \(seed)")
            #expect(b!.replica.state.lists[mine]?.title == "theirs")
            #expect(!b!.replica.lagging)
        }

        // A crash while lagging: the rows at their marker, everything after it replayed on the next load.
        try lagging { a, b, reference, pulls in
            try submit(pulls, to: b!)
            let path = b!.path
            b = nil
            let revived = try Device("b", opening: path)
            #expect(try revived.summary == (try a.summary))
            #expect(revived.digest == a.digest, "seed \(seed)")
            #expect(itemsByList(revived.replica.state) == itemsByList(a.replica.state))
            let verification = try revived.store.read { db in try Store.verifyDerivedState(db) }
            #expect(verification.materializedMatchesReplay, "\(verification) (seed \(seed))")
        }
    }
}
