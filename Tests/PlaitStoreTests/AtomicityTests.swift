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
    /// A Lamport time above 2^62 (the "Lamport poison" of issue 8: 2^63-1 used to be stored and relayed, and
    /// made every later edit trap).
    case lamportOutOfRange
    /// A valid run of another timeline first, then a gap: the other timeline is taken all the same.
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
    func aDamagedTimelineIsRefusedFromTheDamagedChangeOn(damage: DamagedBatch, seed: UInt64) throws {
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

            var batch = good + others
            let expected: (Refusal) -> Bool
            var taken: UInt64 = 3
            switch damage {
            case .gap:
                batch.removeAll { $0.timeline == bTimeline && $0.seq == 3 }
                taken = 2
                expected = { $0 == .gap(expected: 3, got: 4) }
            case .brokenHashChain:
                batch[3].previousHash[0] ^= 0x01
                expected = { $0 == .brokenChain(seq: 4) }
            case .lamportNotIncreasing:
                batch[3] = handMade(
                    timeline: bTimeline, seq: 4, lamport: good[2].lamport, after: good[2], kind: good[3].kind,
                    payload: good[3].payload)
                expected = { $0 == .lamportNotIncreasing(seq: 4, lamport: good[2].lamport, previous: good[2].lamport) }
            case .oversizedChange:
                batch[3] = handMade(
                    timeline: bTimeline, seq: 4, lamport: good[2].lamport + 1, after: good[2], kind: "blob.attach",
                    payload: [UInt8](repeating: 1, count: (1 << 20) + 1))
                expected = {
                    if case .tooLarge(4, _, 1 << 20) = $0 { return true }
                    return false
                }
            case .malformedPayload:
                // A kind this build knows, whose payload is a truncated protobuf field.
                batch[3] = handMade(
                    timeline: bTimeline, seq: 4, lamport: good[2].lamport + 1, after: good[2], kind: "item.create",
                    payload: [0x0A, 0x10, 0x01])
                expected = {
                    if case .badPayload(4, _) = $0 { return true }
                    return false
                }
            case .lamportOutOfRange:
                batch[3] = handMade(
                    timeline: bTimeline, seq: 4, lamport: UInt64(Int64.max), after: good[2], kind: good[3].kind,
                    payload: good[3].payload)
                expected = { $0 == .lamportOutOfRange(seq: 4, lamport: UInt64(Int64.max)) }
            case .goodTimelineThenGap:
                batch = others + good.filter { $0.seq != 5 }
                taken = 4
                expected = { $0 == .gap(expected: 5, got: 6) }
            }

            // Refusals are per timeline (DESIGN §10): B's timeline stops before the bad change, the rest is taken.
            let result = try a.replica.integrate(batch)
            #expect(result.refused.count == 1, "\(result.refused)")
            #expect(result.refused.first?.timeline == bTimeline)
            #expect(result.refused.first.map { expected($0.refusal) } == true, "\(result.refused)")
            #expect(try a.summary[bTimeline] == taken)
            #expect(try a.summary[try c.timeline] == 3, "the other timeline of the batch is taken")
            #expect(try a.store.changes(of: bTimeline, from: taken + 1, limit: 10).isEmpty, "nothing past the refusal")
            #expect(hex(try a.reopened().digest) == hex(a.digest))
            // No later edit traps, whatever the refused Lamport time was.
            let edited = try a.replica.edit(now: fixedNow) { edit in
                try edit.append(.listCreate(id: ObjectID.random(using: &rng), title: "after", color: nil, at: .top))
            }
            #expect(edited.lamport < 1_000)

            // The refusal poisoned nothing: the intact batches integrate and converge.
            let rest = try a.replica.integrate(good + others)
            #expect(rest.refused.isEmpty)
            try sync(a, b)
            try sync(b, c)
            #expect(try a.summary == b.summary)
            #expect(hex(a.digest) == hex(b.digest))
            #expect(hex(try a.reopened().digest) == hex(a.digest))
        }
    }
}
