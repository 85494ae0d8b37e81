import Foundation
import PlaitCore
import PlaitTestSupport
import Testing

@testable import PlaitStore

/// `compact()` folds history into the baseline without changing the state; `rejoin()` starts a new timeline
/// whose re-sent creates collapse on devices that already hold them.
@Suite struct ReplicaCompactionTests {
    @Test(arguments: [0xC0A1_0001 as UInt64, 0xC0A1_0002])
    func compactionKeepsTheStateAndFoldsTheHistory(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            for _ in 0..<4 {
                try randomEdits(a.replica, count: Int.random(in: 3...8, using: &rng), rng: &rng)
                try randomEdits(b.replica, count: Int.random(in: 3...8, using: &rng), rng: &rng)
                try sync(a, b)
            }
            // A moves on alone: B's head now holds the cut-off down.
            try randomEdits(a.replica, count: 5, rng: &rng)
            let bHead = try #require(try a.store.heads().first { $0.timeline == (try b.timeline) })
            let all = try a.store.changesInReplayOrder(limit: nil)
            let digest = a.digest

            let report = try a.replica.compact()
            let cut = try #require(report.cutOff)
            #expect(cut == .timelineHead(try b.timeline, lamport: bHead.lamport))
            let folded = all.filter { $0.lamport <= cut.lamport }
            #expect(report.folded == folded.count)
            #expect(report.remaining == all.count - folded.count)
            #expect(hex(a.digest) == hex(digest), "compaction does not change the state")

            // The folded changes left the changes table; the baseline's summary names exactly them.
            let left = try a.store.changesInReplayOrder(limit: nil)
            #expect(left == all.filter { $0.lamport > cut.lamport })
            #expect(try a.store.changeCount() == report.remaining)
            let baseline = try #require(try a.store.baseline())
            #expect(baseline == report.baseline)
            #expect(folded.allSatisfy { baseline.summary.contains($0.ref) })
            #expect(left.allSatisfy { !baseline.summary.contains($0.ref) })
            #expect(baseline.maxLamport == cut.lamport)
            #expect(try a.summary == b.summary.union(Summary([try a.timeline: try a.summary[a.timeline]])))

            // Another process's view, and a full replay from the baseline, give the same state.
            #expect(hex(try a.reopened().digest) == hex(digest))
            let rebuilt = try a.reopened()
            let replayed = try rebuilt.rebuild()
            #expect(replayed.changes == report.remaining)
            #expect(hex(rebuilt.digest) == hex(digest))

            // B authors a change that is late for A (below A's position, above the cut-off): A rolls back to
            // its baseline and replays the rest; still the state everyone agrees on.
            try randomEdits(b.replica, count: 2, rng: &rng)
            let late = try b.changesMissing(from: a)
            #expect(late.allSatisfy { $0.lamport > cut.lamport && $0.orderKey < a.replica.position })
            let result = try a.replica.integrate(late)
            #expect(result.stats.rolledBack)
            try b.pull(from: a)
            #expect(hex(a.digest) == hex(b.digest))
            #expect(hex(try a.reopened().digest) == hex(b.digest))

            // Compacting again, after everyone moved on, folds more; still the same state.
            try randomEdits(a.replica, count: 2, rng: &rng)
            try sync(a, b)
            let second = try a.replica.compact()
            #expect(second.folded > 0)
            #expect(hex(a.digest) == hex(b.digest))
            try a.replica.rebuild()
            #expect(hex(a.digest) == hex(b.digest))
        }
    }

    @Test(arguments: [0x4E10_0001 as UInt64])
    func rejoinStartsATimelineWhoseCreatesCollapse(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(a.replica, count: 30, rng: &rng)
            try randomEdits(b.replica, count: 10, rng: &rng)
            try sync(a, b)
            let digest = a.digest
            #expect(hex(b.digest) == hex(digest))
            let old = try a.timeline
            let oldHead = try a.summary[old]

            let result = try a.replica.rejoin(now: fixedNow)
            #expect(result.old == old)
            #expect(result.new != old)
            #expect(try a.timeline == result.new)
            #expect(hex(a.digest) == hex(digest), "re-emitting the state does not change it")
            let state = a.replica.state
            let live = state.liveListIDs.reduce(0) { count, list in
                count + 1 + state.itemIDs(in: list, completed: false).count + 2
                    * state.itemIDs(in: list, completed: true).count
            }
            #expect(result.emitted == live)
            #expect(try a.summary[old] == oldHead + 1, "the old timeline got its timeline.end")
            #expect(try a.summary[result.new] == UInt64(result.emitted))
            let ended = try a.store.heads().first { $0.timeline == old }
            #expect(ended?.ended == true)
            #expect(try a.store.changes(of: old, from: oldHead + 1, limit: 1).first?.kind == Change.timelineEndKind)
            #expect(try a.store.heads().first { $0.timeline == result.new }?.ended == false)

            // B already holds the originals: the creates collapse, its state does not change.
            let pulled = try b.pull(from: a)
            #expect(pulled.stats.applied == 0)
            #expect(hex(b.digest) == hex(digest))
            #expect(try b.summary == a.summary)
            #expect(try b.store.heads().first { $0.timeline == old }?.ended == true)

            // The ended timeline no longer holds compaction back.
            try randomEdits(b.replica, count: 1, rng: &rng)
            try a.pull(from: b)
            let report = try a.replica.compact()
            if case .timelineHead(let timeline, _) = report.cutOff { #expect(timeline != old) }
            #expect(hex(a.digest) == hex(b.digest))
        }
    }
}
