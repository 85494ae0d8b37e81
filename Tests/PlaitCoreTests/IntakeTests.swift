import Synchronization
import Testing

@testable import PlaitCore

/// The one intake (DESIGN §12) over plain values: no store, the receiver's heads given as a dictionary.
@Suite struct IntakeTests {
    /// A receiver's view of what it holds, as values.
    struct Held {
        var heads: [TimelineID: HeldHead] = [:]
        var hashes: [ChangeRef: [UInt8]] = [:]

        init(_ changes: [Change] = []) {
            for change in changes {
                heads[change.timeline] = HeldHead(seq: change.seq, lamport: change.lamport, hash: change.hash)
                hashes[change.ref] = change.hash
            }
        }

        func check(_ batch: [EncodedChange], skip: Set<TimelineID> = [], using intake: Intake<ListsDomain>)
            -> Intake<ListsDomain>.Result
        {
            intake.check(batch, skip: skip, head: { heads[$0] }, heldHash: { hashes[$0] })
        }
    }

    static func intake(maxChangeBytes: Int = 1 << 20) -> Intake<ListsDomain> {
        Intake(domain: ListsDomain(), maxChangeBytes: maxChangeBytes, sha256: { SHA256.reference($0) })
    }

    /// Two timelines of five item creates each, interleaved by Lamport time as a sender streams them.
    static func twoTimelines() -> (a: [Change], b: [Change]) {
        var a = TimelineAuthor(0xA)
        var b = TimelineAuthor(0xB)
        a.append(.listCreate(id: objectID(1), title: "L", color: nil, at: .bottom), lamport: 1)
        for index in 2...5 {
            a.append(.itemCreate(id: objectID(UInt64(10 + index)), list: objectID(1), text: "a\(index)", at: .bottom),
                lamport: UInt64(index * 2))
        }
        for index in 1...5 {
            b.append(.itemCreate(id: objectID(UInt64(20 + index)), list: objectID(1), text: "b\(index)", at: .bottom),
                lamport: UInt64(index * 2 + 1))
        }
        return (a.changes, b.changes)
    }

    /// A change built by hand after `previous`, with any fields.
    static func after(
        _ previous: Change, seq: UInt64? = nil, lamport: UInt64? = nil, kind: String? = nil, payload: [UInt8]? = nil,
        previousHash: [UInt8]? = nil
    ) -> Change {
        Change(
            timeline: previous.timeline, seq: seq ?? previous.seq + 1, lamport: lamport ?? previous.lamport + 1,
            previousHash: previousHash ?? previous.hash, kind: kind ?? previous.kind, version: 1, wallTime: 0,
            payload: payload ?? previous.payload)
    }

    /// A long run of one timeline is checked in time linear in its length. Each accepted change was appended to
    /// a copy of its timeline's run while the dictionary still held the original, so the whole array was copied
    /// per change: 40,000 changes took minutes (a 100,000-change catch-up never finished), now well under a
    /// second in a release build. The bound is loose so only the quadratic behaviour can trip it.
    /// A long run of one timeline in one batch is taken whole. (Its cost once grew with the square of the run: each
    /// append copied the run's array. Speed is measured by `plait bench`'s catch-up, not asserted here.)
    @Test func aLongRunOfOneTimelineIsTakenWhole() {
        var author = TimelineAuthor(0xA)
        author.append(.listCreate(id: objectID(1), title: "L", color: nil, at: .bottom), lamport: 1)
        for index in 2...40_000 {
            author.append(.itemEdit(id: objectID(2), text: "edit \(index)"), lamport: UInt64(index))
        }
        let result = Held().check(author.changes.map { EncodedChange($0) }, using: Self.intake())
        #expect(result.accepted.count == 40_000)
        #expect(result.heads[TimelineID(0xA)]?.seq == 40_000)
    }

    @Test func acceptedChangesCarryTheirHashAndDecodedPayload() {
        let (a, b) = Self.twoTimelines()
        let batch = (a + b).sorted { $0.orderKey < $1.orderKey }.map { EncodedChange($0) }
        let result = Held().check(batch, using: Self.intake())
        #expect(result.refused.isEmpty)
        #expect(result.accepted.count == 10)
        for accepted in result.accepted {
            #expect(accepted.hash == accepted.change.hash, "\(accepted.change.ref)")
            // Decoded once at intake: the engine applies this and never decodes the payload again.
            #expect(accepted.decoded.operation.map { $0.payload == accepted.change.payload } == true)
        }
        #expect(result.heads[TimelineID(0xA)]?.seq == 5)
        #expect(result.heads[TimelineID(0xB)]?.hash == b.last!.hash)
    }

    @Test func eachChangeIsHashedOnceOverTheBytesItArrivedIn() throws {
        let (a, b) = Self.twoTimelines()
        let batch = try (a + b).map { try EncodedChange(decoding: $0.canonicalBytes[...]) }
        let calls = Atomic<Int>(0)
        let counting = Intake(domain: ListsDomain(), maxChangeBytes: 1 << 20) { bytes in
            calls.add(1, ordering: .relaxed)
            return SHA256.reference(bytes)
        }
        let result = Held(Array(a.prefix(2))).check(batch, using: counting)
        #expect(calls.load(ordering: .relaxed) == batch.count)
        #expect(result.duplicates == 2)
        #expect(result.accepted.count == 8)
    }

    @Test func theHashIsTheInjectedFunctionsNotARecomputation() {
        // A (wrong) hash function that is not SHA-256: the chain of honest changes then does not continue, which
        // shows the intake hashes with what it was given and nothing else.
        let (a, _) = Self.twoTimelines()
        let bogus = Intake(domain: ListsDomain(), maxChangeBytes: 1 << 20) { _ in [UInt8](repeating: 7, count: 32) }
        let result = Held().check(a.map { EncodedChange($0) }, using: bogus)
        #expect(result.accepted.count == 1)
        #expect(result.refused.first?.refusal == .brokenChain(seq: 2))
    }

    /// Every refusal of DESIGN §10, each stopping only its own timeline: B's good changes are taken whatever A's
    /// third change does wrong.
    @Test(arguments: 0..<8)
    func eachRefusalStopsOnlyItsTimeline(kind: Int) {
        let (a, b) = Self.twoTimelines()
        var held = Held()
        var batchA = Array(a)
        let expected: Refusal
        switch kind {
        case 0:
            batchA.remove(at: 2)
            expected = .gap(expected: 3, got: 4)
        case 1:
            batchA[2] = Self.after(a[1], previousHash: [UInt8](repeating: 9, count: 32))
            expected = .brokenChain(seq: 3)
        case 2:
            // A different change under a number the receiver holds.
            held = Held(Array(a.prefix(3)))
            batchA[2] = Self.after(a[1], payload: ListsChange.itemCreate(
                id: objectID(99), list: objectID(1), text: "other", at: .bottom).payload)
            expected = .fork(seq: 3, held: a[2].hash, arriving: batchA[2].hash)
        case 3:
            batchA[2] = Self.after(a[1], lamport: a[1].lamport)
            expected = .lamportNotIncreasing(seq: 3, lamport: a[1].lamport, previous: a[1].lamport)
        case 4:
            batchA[2] = Self.after(a[1], lamport: Lamport.max + 1)
            expected = .lamportOutOfRange(seq: 3, lamport: Lamport.max + 1)
        case 5:
            batchA[2] = Self.after(a[1], kind: "blob.attach", payload: [UInt8](repeating: 1, count: 300))
            expected = .tooLarge(seq: 3, size: EncodedChange(batchA[2]).bytes.count, limit: 256)
        case 6:
            batchA[2] = Self.after(a[1], kind: "item.create", payload: [0x0A, 0x10, 0x01])
            expected = .badPayload(seq: 3, reason: "")
        default:
            batchA[1] = Self.after(a[0], kind: Change.timelineEndKind, payload: [])
            batchA[2] = Self.after(batchA[1])
            expected = .afterEnd(seq: 3)
        }
        // Changes after the bad one chain onto it, as a sender with the bad change would send them.
        for index in 3..<batchA.count { batchA[index] = Self.after(batchA[index - 1], payload: a[index].payload) }
        let batch = (batchA + b).sorted { $0.orderKey < $1.orderKey }.map { EncodedChange($0) }
        let result = held.check(batch, using: Self.intake(maxChangeBytes: kind == 5 ? 256 : 1 << 20))
        #expect(result.refused.count == 1, "\(result.refused)")
        let refusal = result.refused.first?.refusal
        if case .badPayload(3, _) = refusal, kind == 6 {
        } else {
            #expect(refusal == expected)
        }
        #expect(result.refused.first?.timeline == TimelineID(0xA))
        #expect(result.accepted.filter { $0.change.timeline == TimelineID(0xB) }.count == 5, "B is taken whole")
        #expect(result.accepted.allSatisfy { $0.change.timeline != TimelineID(0xA) || $0.change.seq < 3 })
    }

    @Test func skippedTimelinesAreDroppedSilently() {
        let (a, b) = Self.twoTimelines()
        let result = Held().check((a + b).map { EncodedChange($0) }, skip: [TimelineID(0xA)], using: Self.intake())
        #expect(result.refused.isEmpty)
        #expect(result.accepted.map(\.change.timeline) == Array(repeating: TimelineID(0xB), count: 5))
    }

    @Test func receivedBytesAreKeptAndNonCanonicalFormsRefused() throws {
        let change = Self.twoTimelines().a[1]
        let bytes = change.canonicalBytes
        let decoded = try EncodedChange(decoding: bytes[...])
        #expect(decoded.change == change)
        #expect(Array(decoded.bytes) == bytes)
        // A padded varint (the seq 2 as two bytes), a field out of order, an unknown field, a trailing byte and a
        // missing field: each is some encoding of a change, none the canonical one.
        let seqAt = 1 + 8  // after field 1's tag and fixed64
        var padded = bytes
        padded.replaceSubrange((seqAt + 1)...(seqAt + 1), with: [0x82, 0x00])
        var trailing = bytes
        trailing.append(0)
        var unknown = bytes
        unknown.append(contentsOf: [0x48, 0x01])  // field 9, varint 1
        let swapped = Array(bytes[seqAt..<(seqAt + 2)] + bytes[0..<seqAt] + bytes[(seqAt + 2)...])
        let missing = Array(bytes[seqAt...])
        for (name, form) in [("padded", padded), ("trailing", trailing), ("unknown", unknown), ("swapped", swapped),
            ("missing", missing)]
        {
            #expect(throws: CoreError.self, "\(name)") { try EncodedChange(decoding: form[...]) }
        }
    }
}
