import Foundation
import PlaitCore
import PlaitTestSupport
import Testing

@testable import PlaitStore

/// Everything a refused write must leave as it was: the rows, the file, and the replica's memory.
struct StoreSnapshot: Equatable, CustomStringConvertible {
    var rows: [String]
    var file: String
    var digest: String
    var encoding: String
    var position: OrderKey
    var summary: Summary

    /// Folds the WAL into the file first, so the file's bytes hold every committed transaction.
    init(_ device: Device) throws {
        try device.store.checkpointWAL()
        rows = try dump(device.store)
        file = fingerprint(device.path)
        digest = hex(device.digest)
        encoding = fingerprint(device.encoding)
        position = device.replica.position
        summary = try device.summary
    }

    /// The same, without the write counter every committed transaction bumps.
    var ignoringGeneration: StoreSnapshot {
        var copy = self
        copy.rows = rows.filter { !$0.hasPrefix("meta: key='generation'") }
        copy.file = "(not compared)"
        return copy
    }

    var description: String {
        "summary \(summary), position \(position), digest \(digest), file \(file), \(rows.count) rows"
    }
}

/// A marker error thrown from inside an edit.
struct AbortEdit: Error {}

/// What a damaged pulled batch looks like.
enum DamagedBatch: String, CaseIterable, CustomStringConvertible, Sendable {
    case gap
    case brokenHashChain
    case lamportNotIncreasing
    case oversizedChange
    case malformedPayload
    /// A valid run of another timeline first, then a gap: the good part must not be kept either.
    case goodTimelineThenGap

    var description: String { rawValue }
}

/// One transaction per edit or pulled batch: a failure half-way writes nothing and leaves memory as it was.
@Suite struct AtomicityTests {
    @Test(arguments: [0xA70_0001 as UInt64])
    func anEditThatThrowsHalfWayWritesNothing(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let device = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(device.replica, count: 20, rng: &rng)
            let before = try StoreSnapshot(device)

            // The body throws after appending three changes (which the edit already applied in memory).
            #expect(throws: AbortEdit.self) {
                try device.replica.edit(now: fixedNow) { edit in
                    let list = ObjectID.random(using: &rng)
                    try edit.append(.listCreate(id: list, title: "doomed", color: nil, at: .top))
                    try edit.append(.itemCreate(id: ObjectID.random(using: &rng), list: list, text: "a", at: .top))
                    try edit.append(.itemCreate(id: ObjectID.random(using: &rng), list: list, text: "b", at: .top))
                    #expect(edit.state.lists[list]?.title == "doomed", "later lines of an edit see earlier ones")
                    throw AbortEdit()
                }
            }
            #expect(try StoreSnapshot(device) == before)

            // An oversized change refused by the store itself, after two good ones.
            #expect {
                try device.replica.edit(now: fixedNow) { edit in
                    try edit.append(.listCreate(id: ObjectID.random(using: &rng), title: "x", color: nil, at: .top))
                    try edit.append(.listCreate(id: ObjectID.random(using: &rng), title: "y", color: nil, at: .top))
                    try edit.appendRaw(kind: "blob.attach", version: 1, payload: [UInt8](repeating: 7, count: 1 << 20))
                }
            } throws: { error in
                guard case .rejected(.changeTooLarge(_, 1 << 20)) = error as? StoreError else { return false }
                return true
            }
            #expect(try StoreSnapshot(device) == before)

            // The next edit continues the timeline right after the last committed change.
            let own = try device.timeline
            let appended = try device.replica.edit(now: fixedNow) { edit in
                try edit.append(.listCreate(id: ObjectID.random(using: &rng), title: "kept", color: nil, at: .top))
            }
            #expect(appended.seq == before.summary[own] + 1)
            #expect(try device.summary[own] == before.summary[own] + 1)
            #expect(try device.reopened().digest == device.digest)
        }
    }

    @Test(arguments: DamagedBatch.allCases, [0xBAD_0001 as UInt64])
    func aDamagedBatchIsRefusedWhole(damage: DamagedBatch, seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            let c = try Device("c", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(a.replica, count: 10, rng: &rng)
            try b.pull(from: a)
            try c.pull(from: a)
            try randomEdits(b.replica, count: 6, rng: &rng)
            try randomEdits(c.replica, count: 3, rng: &rng)
            let good = try b.changesMissing(from: a)
            let others = try c.changesMissing(from: a)
            #expect(good.count == 6)
            let bTimeline = try b.timeline

            var batch = good
            let expected: (CoreError) -> Bool
            switch damage {
            case .gap:
                batch.remove(at: 2)
                expected = { $0 == .gap(timeline: bTimeline, expected: 3, got: 4) }
            case .brokenHashChain:
                batch[3].previousHash[0] ^= 0x01
                expected = { $0 == .fork(timeline: bTimeline, seq: 4) }
            case .lamportNotIncreasing:
                batch[3] = handMade(
                    timeline: bTimeline, seq: 4, lamport: good[2].lamport, after: good[2], kind: good[3].kind,
                    payload: good[3].payload)
                batch.removeSubrange(4...)
                expected = { $0 == .lamportNotIncreasing(timeline: bTimeline, seq: 4) }
            case .oversizedChange:
                batch[3] = handMade(
                    timeline: bTimeline, seq: 4, lamport: good[2].lamport + 1, after: good[2], kind: "blob.attach",
                    payload: [UInt8](repeating: 1, count: (1 << 20) + 1))
                batch.removeSubrange(4...)
                expected = {
                    if case .changeTooLarge(_, 1 << 20) = $0 { return true }
                    return false
                }
            case .malformedPayload:
                // A kind this build knows, whose payload is a truncated protobuf field.
                batch[3] = handMade(
                    timeline: bTimeline, seq: 4, lamport: good[2].lamport + 1, after: good[2], kind: "item.create",
                    payload: [0x0A, 0x10, 0x01])
                batch.removeSubrange(4...)
                expected = {
                    if case .badChange("\(bTimeline):4", _) = $0 { return true }
                    return false
                }
            case .goodTimelineThenGap:
                batch = others + good.filter { $0.seq != 5 }
                expected = { $0 == .gap(timeline: bTimeline, expected: 5, got: 6) }
            }

            let before = try StoreSnapshot(a)
            #expect {
                _ = try a.replica.integrate(batch)
            } throws: { error in
                guard case .rejected(let core) = error as? StoreError else { return false }
                return expected(core)
            }
            #expect(try StoreSnapshot(a) == before, "a refused batch must leave the store and the replica as they were")

            // The refusal poisoned nothing: the intact batches integrate and converge.
            let result = try a.replica.integrate(good + others)
            #expect(result.duplicates == 0)
            try sync(b, c)
            #expect(try a.summary == b.summary)
            #expect(hex(a.digest) == hex(b.digest))
            #expect(hex(try a.reopened().digest) == hex(a.digest))
        }
    }
}
