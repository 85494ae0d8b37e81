import Foundation
import PlaitCore
import PlaitTestSupport
import Testing

@testable import PlaitStore

/// The store's side of a session: the local view, hashes of held changes, and the paged stream of what a
/// peer lacks.
@Suite struct SessionQueriesTests {
    /// Three timelines with interleaved Lamport times, all held by `a`.
    private func threeTimelines(_ directory: TemporaryDirectory, seed: UInt64) throws -> (Device, [Device]) {
        var rng = SplitMix64(seed: seed)
        let devices = try ["a", "b", "c"].map { try Device($0, in: directory, timeline: TimelineID(rng.next())) }
        for _ in 0..<4 {
            for device in devices {
                try randomEdits(device.replica, count: Int.random(in: 3...9, using: &rng), rng: &rng)
            }
            for device in devices.dropFirst() {
                let held = try devices[0].summary
                let changes = try device.store.changes(of: try device.timeline, from: 1, limit: 1_000)
                _ = try devices[0].replica.integrate(changes.filter { !held.contains($0.ref) })
            }
        }
        return (devices[0], devices)
    }

    @Test func hashOfAChangeIsTheNextOnesPreviousOrTheHead() throws {
        try withTemporaryDirectory { directory in
            let (a, devices) = try threeTimelines(directory, seed: 0x9E5_0001)
            for device in devices {
                let timeline = try device.timeline
                let changes = try a.store.changes(of: timeline, from: 1, limit: 1_000)
                #expect(changes.count == Int(try a.summary[timeline]))
                for change in changes {
                    #expect(try a.store.hash(of: change.ref) == change.hash, "\(change.ref)")
                }
                #expect(try a.store.hash(of: ChangeRef(timeline: timeline, seq: UInt64(changes.count + 1))) == nil)
                #expect(try a.store.hash(of: ChangeRef(timeline: timeline, seq: 0)) == nil)
            }
            let view = try a.store.localView()
            #expect(view.summary == (try a.summary))
            #expect(view.ownTimeline == (try a.timeline))
            #expect(view.baselineDigest == nil && view.baselineSummary.isEmpty)
            for (timeline, head) in view.heads {
                #expect(try a.store.hash(of: ChangeRef(timeline: timeline, seq: head.seq)) == head.hash)
            }
        }
    }

    /// After compaction, the hash of the baseline's last folded change is still known; earlier ones are gone.
    @Test func hashAtTheBaselineBoundary() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x9E5_0002)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            // A's first 6 sort before B's head, its last 2 after: compaction folds A up to 6.
            try randomEdits(a.replica, count: 6, rng: &rng)
            _ = try b.replica.integrate(try a.store.changes(of: try a.timeline, from: 1, limit: 100))
            try randomEdits(b.replica, count: 3, rng: &rng)
            _ = try a.replica.integrate(try b.store.changes(of: try b.timeline, from: 1, limit: 100))
            try randomEdits(a.replica, count: 2, rng: &rng)
            let own = try a.store.changes(of: try a.timeline, from: 1, limit: 100)
            let report = try a.replica.compact()
            let baseline = try #require(report.baseline)
            let foldedOwn = baseline.summary[try a.timeline]
            #expect(foldedOwn == 6)
            let view = try a.store.localView()
            #expect(view.baselineSummary == baseline.summary)
            #expect(view.baselineDigest == SHA256.hash(baseline.encoded()))
            #expect(try a.store.baselineSummary() == baseline.summary)
            let boundary = ChangeRef(timeline: try a.timeline, seq: foldedOwn)
            #expect(try a.store.hash(of: boundary) == own[Int(foldedOwn) - 1].hash)
            if foldedOwn >= 2 {
                #expect(try a.store.hash(of: ChangeRef(timeline: try a.timeline, seq: foldedOwn - 1)) == nil)
            }
        }
    }

    /// Pages of `missing` reproduce exactly the brute-force answer: rows with have < seq ≤ cap, in replay
    /// order, with their real previous hashes.
    @Test(arguments: [1, 7, 5_000])
    func missingPagesInReplayOrderWithinTheCap(pageSize: Int) throws {
        try withTemporaryDirectory { directory in
            let (a, devices) = try threeTimelines(directory, seed: 0x9E5_0003)
            let all = try a.store.changesInReplayOrder(limit: nil)
            let timelines = try devices.map { try $0.timeline }
            let full = try a.summary
            let have = Summary([timelines[0]: full[timelines[0]] / 2, timelines[2]: full[timelines[2]] - 1])
            var cap = full
            cap[timelines[1]] = full[timelines[1]] - 2
            let expected = all.filter { $0.seq > have[$0.timeline] && $0.seq <= cap[$0.timeline] }
            #expect(!expected.isEmpty)

            var streamed: [Change] = []
            var cursor: OrderKey?
            while true {
                let page = try a.store.missing(for: have, within: cap, after: cursor, limit: pageSize)
                #expect(page.count <= pageSize)
                guard let last = page.last else { break }
                streamed += page
                cursor = last.orderKey
            }
            #expect(streamed == expected)
            // Real previous hashes: each continues its timeline's chain.
            for change in streamed where change.seq > 1 {
                let previous = ChangeRef(timeline: change.timeline, seq: change.seq - 1)
                #expect(change.previousHash == (try a.store.hash(of: previous)))
            }
            // Nothing when the peer has everything within the cap.
            #expect(try a.store.missing(for: full, within: full, after: nil, limit: 10).isEmpty)
        }
    }

    @Test func missingStopsAtTheByteBudgetButAlwaysReturnsOne() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x9E5_0004)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            try bulkEdits(a.replica, count: 50, textSize: 1_000, rng: &rng)
            let summary = try a.summary
            let one = try a.store.missing(for: Summary(), within: summary, after: nil, limit: 100, maxBytes: 1)
            #expect(one.count == 1)
            let some = try a.store.missing(for: Summary(), within: summary, after: nil, limit: 100, maxBytes: 10_000)
            #expect(some.count >= 5 && some.count < 12, "\(some.count)")
            #expect(some.map { Store.encodedSizeBound(of: $0) }.reduce(0, +) <= 10_000)
        }
    }

    /// The scan walks the clustered primary key in replay order: no temporary sort, whatever the ranges.
    @Test(arguments: [1, 3, 40])
    func missingDoesNotSort(timelines: Int) throws {
        try withTemporaryDirectory { directory in
            let a = try Device("a", in: directory, timeline: TimelineID(1))
            let plan = try a.store.missingQueryPlan(timelines: timelines)
            #expect(!plan.contains { $0.contains("TEMP B-TREE") }, "\(plan)")
            #expect(plan.contains { $0.contains("PRIMARY KEY") }, "\(plan)")
        }
    }
}
