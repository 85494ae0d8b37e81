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
}
