import Foundation
import GRDB
import PlaitCore
import PlaitTestSupport
import Testing

@testable import PlaitStore

/// Pulled changes from other timelines: convergence, idempotence, late changes, unknown kinds, stale homes.
@Suite struct IntegrateTests {
    /// Three devices edit concurrently and exchange partial batches (prefixes of timelines, relayed through
    /// each other, often late); once everyone has everything, everyone holds the same state.
    @Test(arguments: [0xC0_4E46_0001 as UInt64, 0xC0_4E46_0002])
    func devicesConverge(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let devices = try ["a", "b", "c"].map { try Device($0, in: directory, timeline: TimelineID(rng.next())) }
            var rolledBack = 0
            for _ in 0..<12 {
                for device in devices where rng.chance(70) {
                    try randomEdits(device.replica, count: Int.random(in: 1...4, using: &rng), rng: &rng)
                }
                let target = devices.randomElement(using: &rng)!
                let source = devices.randomElement(using: &rng)!
                guard target !== source else { continue }
                // A prefix of each timeline the source has and the target lacks.
                var batch: [Change] = []
                for range in try target.summary.missing(from: source.summary) {
                    let take = Int.random(in: 1...range.seqs.count, using: &rng)
                    batch += try source.store.changes(of: range.timeline, from: range.seqs.lowerBound, limit: take)
                }
                let result = try target.replica.integrate(batch.shuffled(using: &rng))
                if result.stats.rolledBack { rolledBack += 1 }
                #expect(result.duplicates == 0)
                #expect(result.refused.isEmpty)
                #expect(result.ownTimelineContinued == nil)
            }
            for _ in 0..<2 {
                try sync(devices[0], devices[1])
                try sync(devices[1], devices[2])
            }
            let summary = try devices[0].summary
            for device in devices {
                #expect(try device.summary == summary, "\(device.name)")
                #expect(hex(device.digest) == hex(devices[0].digest), "\(device.name)")
                #expect(device.encoding == devices[0].encoding, "\(device.name)")
                // The materialized rows (a cold view) and a full replay agree with memory.
                #expect(hex(try device.reopened().digest) == hex(device.digest), "\(device.name)")
            }
            try devices[2].replica.rebuild()
            #expect(hex(devices[2].digest) == hex(devices[0].digest), "a full replay gives the incremental result")
            #expect(rolledBack > 0, "the scenario should include late changes (seed \(seed))")
        }
    }

    @Test(arguments: [0x1DE4_0001 as UInt64])
    func reintegratingABatchChangesNothing(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(a.replica, count: 8, rng: &rng)
            try randomEdits(b.replica, count: 12, rng: &rng)
            let batch = try b.changesMissing(from: a)
            let first = try a.replica.integrate(batch)
            #expect(first.duplicates == 0)
            #expect(first.stats.applied + first.stats.noops + first.stats.skipped == batch.count)
            let before = try StoreSnapshot(a)

            let again = try a.replica.integrate(batch)
            #expect(again.duplicates == batch.count)
            #expect(again.stats == ReplayStats())
            #expect(again.ownTimelineContinued == nil)
            // A batch overlapping what is held: the held part is counted, the rest applied.
            try randomEdits(b.replica, count: 3, rng: &rng)
            let overlapping = try b.store.changes(of: b.timeline, from: 10, limit: 100)
            #expect(overlapping.count == 6)
            let partly = try a.replica.integrate(overlapping)
            #expect(partly.duplicates == 3)
            #expect(partly.stats.applied + partly.stats.noops == 3)
            #expect(try StoreSnapshot(a) != before)

            let after = try StoreSnapshot(a)
            let everything = try a.replica.integrate(try b.store.changes(of: b.timeline, from: 1, limit: 100))
            #expect(everything.duplicates == 15)
            #expect(
                try StoreSnapshot(a).ignoringGeneration == after.ignoringGeneration,
                "re-pulling everything is idempotent")
            #expect(
                hex(a.digest)
                    == hex(
                        try {
                            try b.pull(from: a)
                            return b.digest
                        }()))
        }
    }

    /// Re-pulling a batch that is wholly held commits nothing: not even the write counter moves, so other
    /// processes on the file do not reload their whole state for nothing (anti-entropy re-pulls often).
    @Test(arguments: [0x1DE4_0002 as UInt64])
    func reintegratingAHeldBatchLeavesTheFileByteForByte(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(b.replica, count: 5, rng: &rng)
            let batch = try b.changesMissing(from: a)
            _ = try a.replica.integrate(batch)
            let before = try StoreSnapshot(a)
            let again = try a.replica.integrate(batch)
            #expect(again.duplicates == batch.count)
            let after = try StoreSnapshot(a)
            let changed =
                after.rows.filter { !before.rows.contains($0) } + before.rows.filter { !after.rows.contains($0) }
            #expect(changed.isEmpty, "rows that differ: \(changed)")
        }
    }

    /// A change that sorts before the current position rolls back and replays; the result is a full replay's.
    @Test(arguments: [0x1A7E_0001 as UInt64])
    func aLateChangeRollsBackToTheSameStateAsAFullReplay(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(a.replica, count: 10, rng: &rng)
            try randomEdits(b.replica, count: 3, rng: &rng)
            let late = try b.changesMissing(from: a)
            #expect(late.allSatisfy { $0.orderKey < a.replica.position })

            let result = try a.replica.integrate(late)
            #expect(result.stats.rolledBack)
            #expect(result.stats.applied + result.stats.noops == 3)
            #expect(result.stats.replayed > 0)
            // The rows written after the rollback equal memory (a cold view loads them).
            #expect(hex(try a.reopened().digest) == hex(a.digest))
            let incremental = a.digest
            try a.replica.rebuild()
            #expect(hex(a.digest) == hex(incremental))
            try b.pull(from: a)
            #expect(hex(b.digest) == hex(incremental))
        }
    }

    /// A new device's first changes sort before nearly all of an old device's history (Lamport 1, 2…). When they
    /// leave every state as it was (its `timeline.begin`, kinds this build cannot interpret), the old device takes
    /// them without replaying its history, keeps its stored checkpoints, and holds what a full replay gives.
    /// Before, every new device made every peer replay everything it held (for 100,000 changes, a third of a
    /// second during which the session sent nothing).
    @Test(arguments: [0x1AE7_0001 as UInt64])
    func lateInertChangesAreTakenWithoutReplay(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            a.replica.storedCheckpointInterval = 4
            try randomEdits(a.replica, count: 16, rng: &rng)
            try b.replica.edit(now: fixedNow) { edit in
                try edit.appendRaw(kind: "item.frobnicate", version: 1, payload: rng.bytes(12))
                try edit.appendRaw(kind: Change.timelineEndKind, version: 1, payload: [])
            }
            let late = try b.changesMissing(from: a)
            #expect(late.count == 2 && late.allSatisfy { $0.orderKey < a.replica.position })
            func storedCheckpoints(_ device: Device) throws -> [Int64] {
                try device.store.read { db in try Int64.fetchAll(db, sql: "SELECT lamport FROM checkpoints ORDER BY 1") }
            }
            let checkpoints = try storedCheckpoints(a)
            #expect(!checkpoints.isEmpty)
            let digest = a.digest

            // A cold replica (another process: no in-memory checkpoints) would otherwise replay from a stored one.
            let cold = try a.reopened()
            let result = try cold.integrate(late)
            #expect(result.added == 2)
            #expect(!result.stats.rolledBack)
            #expect(result.stats.replayed == 0)
            #expect(result.stats.skipped == 1 && result.stats.noops == 1)
            #expect(hex(cold.digest) == hex(digest))
            try a.replica.refresh()
            #expect(hex(a.digest) == hex(digest))
            #expect(try storedCheckpoints(a) == checkpoints, "the stored checkpoints still hold")
            // The rows, a cold view and a full replay agree.
            #expect(hex(try a.reopened().digest) == hex(digest))
            try a.replica.rebuild()
            #expect(hex(a.digest) == hex(digest))
        }
    }

    /// A cold replica (a new process: no in-memory checkpoints) rolls back to a stored checkpoint, not to the
    /// start, and gets the same state as a full replay.
    @Test(arguments: [0xC01D_0001 as UInt64])
    func aColdReplicaRollsBackToAStoredCheckpoint(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            a.replica.storedCheckpointInterval = 3
            try randomEdits(a.replica, count: 12, rng: &rng)
            let aTimeline = try a.timeline
            let checkpoints = try a.store.read { db in
                try Int.fetchOne(db, sql: "SELECT count(*) FROM checkpoints") ?? 0
            }
            #expect(checkpoints >= 2, "a checkpoint interval of 3 over 12 edits stores checkpoints")

            // B has seen A's first 6 changes, then authors 2: Lamport 7 and 8, late for A (at 12).
            _ = try b.replica.integrate(try a.store.changes(of: aTimeline, from: 1, limit: 6))
            try randomEdits(b.replica, count: 2, rng: &rng)
            let late = try b.changesMissing(from: a)
            #expect(late.map(\.lamport) == [7, 8])

            let cold = try a.reopened()
            let result = try cold.integrate(late)
            #expect(result.stats.rolledBack)
            #expect(
                result.stats.replayed >= 6 && result.stats.replayed < 12,
                "replayed \(result.stats.replayed) of A's 12 changes: the stored checkpoint at Lamport 6 was not used")
            let coldDigest = cold.digest

            let reference = try a.reopened()
            try reference.rebuild()
            #expect(hex(coldDigest) == hex(reference.digest))
            try a.replica.refresh()
            #expect(hex(a.digest) == hex(coldDigest), "the other replica on the file sees the result after refresh()")
            try b.pull(from: a)
            #expect(hex(b.digest) == hex(coldDigest))
        }
    }

    /// Kinds and versions this build does not know: stored and forwarded byte for byte, skipped by replay,
    /// counted, and never folded by compaction.
    @Test(arguments: [0x0DD_0001 as UInt64])
    func changesThisBuildCannotInterpret(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            let c = try Device("c", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(a.replica, count: 4, rng: &rng)
            try b.pull(from: a)
            let frobnicate = rng.bytes(40)
            let editV2 = rng.bytes(33)
            let bDigest = b.digest
            #expect(try b.replica.uninterpretableCount() == 0)
            try b.replica.edit(now: fixedNow) { edit in
                try edit.appendRaw(kind: "item.frobnicate", version: 1, payload: frobnicate)
                try edit.appendRaw(kind: "item.edit", version: 2, payload: editV2)
            }
            #expect(hex(b.digest) == hex(bDigest), "the author's own replay skips them too")

            let digest = a.digest
            // Counted now, the count then follows each commit (no recount over every change after a pull).
            #expect(try a.replica.uninterpretableCount() == 0)
            #expect(try b.replica.uninterpretableCount() == 2, "the author's own count follows its edit")
            let result = try a.pull(from: b)
            #expect(result.stats.skipped == 2)
            #expect(result.stats.applied == 0)
            #expect(hex(a.digest) == hex(digest), "replay skips kinds it cannot interpret")
            #expect(try a.replica.uninterpretableCount() == 2)
            #expect(try Replica(store: a.store).uninterpretableCount() == 2, "a cold count agrees")
            let unknownLamport = try a.store.changes(of: b.timeline, from: 1, limit: 10).map(\.lamport).min()!

            // Stored untouched, and forwarded untouched to a third device (through A).
            try c.pull(from: a)
            for device in [a, c] {
                let stored = try device.store.changes(of: b.timeline, from: 1, limit: 10)
                #expect(stored.map(\.kind) == ["item.frobnicate", "item.edit"], "\(device.name)")
                #expect(stored.map(\.version) == [1, 2], "\(device.name)")
                #expect(stored.map(\.payload) == [frobnicate, editV2], "\(device.name)")
                #expect(try device.replica.uninterpretableCount() == 2, "\(device.name)")
            }

            // Everyone moves on past them; compaction stops just below the first of them.
            try randomEdits(a.replica, count: 3, rng: &rng)
            try sync(a, b)
            try randomEdits(b.replica, count: 2, rng: &rng)
            try sync(a, b)
            try sync(a, c)
            let before = a.digest
            let report = try a.replica.compact()
            #expect(report.cutOff == .uninterpretable(lamport: unknownLamport - 1))
            #expect(report.folded == 4)
            #expect(hex(a.digest) == hex(before))
            #expect(try a.replica.uninterpretableCount() == 2)
            #expect(
                try a.store.changes(of: b.timeline, from: 1, limit: 10).map(\.payload).prefix(2) == [
                    frobnicate, editV2,
                ])
            #expect(try a.store.changesInReplayOrder(limit: nil).allSatisfy { $0.lamport > report.cutOff!.lamport })
            // Compacting again never folds them either.
            let again = try a.replica.compact()
            #expect(again.folded == 0)
            #expect(try a.replica.uninterpretableCount() == 2)
            #expect(hex(try a.reopened().digest) == hex(before))
            #expect(hex(b.digest) == hex(before))
        }
    }

    /// A home restored from a copy holds an old head of its own timeline. When a peer sends that timeline
    /// beyond its head, the changes are taken (they continue the chain) and the timeline is marked as one that may
    /// continue elsewhere: nothing more is authored on it until `rejoin` starts a new one (DESIGN §10: detect and
    /// report, never guess), so no two different changes ever carry one number.
    @Test(arguments: [0x57A1_0001 as UInt64])
    func aStaleHomeStopsAuthoringUntilRejoin(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(a.replica, count: 3, rng: &rng)
            let own = try a.timeline
            // The backup: a copy of A's file at head 3.
            try a.store.checkpointWAL()
            let copyPath = directory.file("restored.db")
            try FileManager.default.copyItem(atPath: a.path, toPath: copyPath)
            let restored = try Device("restored", opening: copyPath)
            #expect(try restored.timeline == own)

            try randomEdits(a.replica, count: 2, rng: &rng)
            try b.pull(from: a)

            // Changes of its own timeline it already holds are just duplicates.
            let duplicates = try restored.replica.integrate(try a.store.changes(of: own, from: 1, limit: 3))
            #expect(duplicates.duplicates == 3)
            #expect(duplicates.ownTimelineContinued == nil)
            #expect(try restored.store.ownTimelineSuspicion() == nil)

            // A peer holds its own timeline beyond its head: taken, and the timeline is marked.
            let result = try restored.pull(from: b)
            #expect(result.ownTimelineContinued == own)
            #expect(try restored.timeline == own)
            #expect(try restored.summary[own] == 5)
            #expect(try restored.store.ownTimelineSuspicion() != nil)

            // Authoring is refused with a clear error, and nothing is written.
            let before = try StoreSnapshot(restored)
            #expect(throws: StoreError.self) {
                try restored.replica.edit(now: fixedNow) { edit in
                    try edit.append(.listCreate(id: ObjectID.random(using: &rng), title: "x", color: nil, at: .top))
                }
            }
            #expect(try StoreSnapshot(restored) == before)

            // `rejoin` leaves the timeline as it is (no end appended: it may continue on A) and starts a new one.
            let rejoined = try restored.replica.rejoin(now: fixedNow)
            #expect(rejoined.old == own)
            #expect(try restored.summary[own] == 5, "nothing appended to the suspect timeline")
            #expect(try restored.store.ownTimelineSuspicion() == nil)
            let change = try restored.replica.edit(now: fixedNow) { edit in
                try edit.append(
                    .listCreate(id: ObjectID.random(using: &rng), title: "after restore", color: nil, at: .top))
            }
            #expect(change.timeline == rejoined.new)
            #expect(change.lamport > 5)
            try sync(restored, b)
            try sync(a, b)
            #expect(try a.summary == restored.summary)
            #expect(hex(a.digest) == hex(restored.digest))
            #expect(hex(b.digest) == hex(restored.digest))
        }
    }
}
