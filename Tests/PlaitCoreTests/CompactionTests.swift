import Testing

@testable import PlaitCore

@Suite("Compaction cut-off")
struct CompactionTests {
    static let a = TimelineID(0xA000_0000_0000_0001)
    static let b = TimelineID(0x0B00_0000_0000_0002)
    static let c = TimelineID(0x00C0_0000_0000_0003)

    /// DESIGN §2's worked example: heads A:23 = 1204, B:17 = 1106, C:27 = 3207. Real changes with those heads:
    /// A's seq i at 54 + 50i, B's at 1106 − 60(17 − i), C's at 3207 − 100(27 − i).
    static func workedExample() -> (a: [Change], b: [Change], c: [Change]) {
        var a = TimelineAuthor(Self.a)
        var b = TimelineAuthor(Self.b)
        var c = TimelineAuthor(Self.c)
        let listA = objectID(0xA)
        let listC = objectID(0xC)
        a.append(.listCreate(id: listA, title: "groceries", color: "green", at: .top), lamport: 104)
        for i in 2...23 {
            let item = objectID(0xA00 + UInt64(i))
            let change: ListsChange = i % 3 == 0 ? .itemComplete(id: objectID(0xA00 + UInt64(i - 1)))
                : .itemCreate(id: item, list: listA, text: "a\(i)", at: .top)
            a.append(change, lamport: 54 + 50 * UInt64(i))
        }
        for i in 1...17 {
            b.append(
                .itemCreate(id: objectID(0xB00 + UInt64(i)), list: listA, text: "b\(i)", at: .bottom),
                lamport: 1106 - 60 * (17 - UInt64(i)))
        }
        c.append(.listCreate(id: listC, title: "work", color: nil, at: .bottom), lamport: 3207 - 100 * 26)
        for i in 2...27 {
            let change: ListsChange = i % 4 == 0 ? .itemDelete(id: objectID(0xB00 + UInt64(i / 4)))
                : .itemCreate(id: objectID(0xC00 + UInt64(i)), list: listC, text: "c\(i)", at: .top)
            c.append(change, lamport: 3207 - 100 * (27 - UInt64(i)))
        }
        return (a.changes, b.changes, c.changes)
    }

    static func heads(_ timelines: [[Change]], released: Set<TimelineID> = []) -> [TimelineHead] {
        timelines.map { changes in
            let head = changes.last!
            return TimelineHead(
                timeline: head.timeline, seq: head.seq, lamport: head.lamport,
                released: released.contains(head.timeline))
        }
    }

    @Test func workedExampleCutOffIs1106() throws {
        let (a, b, c) = Self.workedExample()
        #expect(a.last!.seq == 23 && a.last!.lamport == 1204)
        #expect(b.last!.seq == 17 && b.last!.lamport == 1106)
        #expect(c.last!.seq == 27 && c.last!.lamport == 3207)
        let cutOff = try #require(Compaction.cutOff(heads: Self.heads([a, b, c])))
        #expect(cutOff == .timelineHead(Self.b, lamport: 1106))
        #expect(cutOff.lamport == 1106)
    }

    @Test func workedExampleFoldsExactlyTheChangesAtOrBelowTheCutOff() throws {
        let (a, b, c) = Self.workedExample()
        let all = a + b + c
        let cutOff = try #require(Compaction.cutOff(heads: Self.heads([a, b, c]))).lamport
        var folder = try BaselineFolder(domain: ListsDomain(), previous: nil)
        let ordered = all.sorted { $0.orderKey < $1.orderKey }
        for change in ordered where change.lamport <= cutOff { try folder.add(change) }
        let baseline = folder.finish()

        // A: 54 + 50·21 = 1104 ≤ 1106 < 1154. B: all 17. C: 3207 − 100·22 = 1007 ≤ 1106 < 1107.
        #expect(baseline.summary == Summary([Self.a: 21, Self.b: 17, Self.c: 5]))
        #expect(folder.folded == 43)
        #expect(folder.folded == all.filter { $0.lamport <= 1106 }.count)
        #expect(baseline.maxLamport == 1106)
        #expect(baseline.headLamports == [Self.a: 1104, Self.b: 1106, Self.c: 1007])
        #expect(baseline.heads == [Self.a: a[20].hash, Self.b: b[16].hash, Self.c: c[4].hash])
        #expect(baseline.ended.isEmpty)

        // The baseline plus the rest replays to the same state as the whole history.
        let rest = all.filter { $0.lamport > cutOff }
        #expect(rest.count == all.count - 43)
        #expect(try replay(rest, onto: baseline).digest == digestOfReplay(all))
        // And the baseline alone is the state of the folded prefix.
        #expect(try replay([], onto: baseline).digest == digestOfReplay(all.filter { $0.lamport <= cutOff }))
    }

    @Test func foldingOutOfOrderOrWithAGapIsRefused() throws {
        let (a, _, _) = Self.workedExample()
        var folder = try BaselineFolder(domain: ListsDomain(), previous: nil)
        try folder.add(a[0])
        #expect(throws: CoreError.gap(timeline: Self.a, expected: 2, got: 3)) { try folder.add(a[2]) }
    }

    @Test func aReleasedTimelineNoLongerHoldsTheMinimumDown() throws {
        let (a, b, c) = Self.workedExample()
        let withoutB = try #require(Compaction.cutOff(heads: Self.heads([a, b, c], released: [Self.b])))
        #expect(withoutB == .timelineHead(Self.a, lamport: 1204))
        let onlyC = try #require(Compaction.cutOff(heads: Self.heads([a, b, c], released: [Self.a, Self.b])))
        #expect(onlyC == .timelineHead(Self.c, lamport: 3207))
        // Every timeline ended: everything may be folded.
        let all = try #require(
            Compaction.cutOff(heads: Self.heads([a, b, c], released: [Self.a, Self.b, Self.c])))
        #expect(all.lamport == 3207)
        #expect(Compaction.cutOff(heads: []) == nil)
    }

    @Test func anEndedTimelineIsRecordedInTheBaseline() throws {
        var a = TimelineAuthor(Self.a)
        a.append(.listCreate(id: objectID(1), title: "x", color: nil, at: .top), lamport: 1)
        a.append(kind: Change.timelineEndKind, version: 1, payload: [], lamport: 2)
        let baseline = try fold(a.changes)
        #expect(baseline.ended == [Self.a])
        #expect(try Baseline(decoding: baseline.encoded()[...]).ended == [Self.a])
        // timeline.end is understood by the engine and is a no-op for the domain.
        #expect(ListsDomain().understands(a.changes[1]))
        var state = ListsState()
        #expect(ListsDomain().apply(a.changes[1], to: &state) == .noop)
    }

    @Test func aPeerAcknowledgementLowersTheCutOff() throws {
        let (a, b, c) = Self.workedExample()
        let all = a + b + c
        let held = Summary([Self.a: 23, Self.b: 17, Self.c: 27])
        func lamportOf(_ ref: ChangeRef) -> UInt64? { all.first { $0.ref == ref }?.lamport }

        // The laptop has A up to 10: its first lacking change is A:11 at 54 + 550 = 604.
        let laptop = try #require(
            Compaction.acknowledgementLimit(
                peer: "laptop", acknowledged: Summary([Self.a: 10, Self.b: 17, Self.c: 27]), held: held,
                lamportOf: lamportOf))
        #expect(laptop == .peerAcknowledgement("laptop", lamport: 603))
        let cutOff = try #require(Compaction.cutOff(heads: Self.heads([a, b, c]), limits: [laptop]))
        #expect(cutOff == laptop)

        // A peer that lacks B entirely holds the cut-off below B:1 (146).
        let desktop = try #require(
            Compaction.acknowledgementLimit(
                peer: "desktop", acknowledged: Summary([Self.a: 23, Self.c: 27]), held: held, lamportOf: lamportOf))
        #expect(desktop.lamport == 145)
        #expect(try #require(Compaction.cutOff(heads: Self.heads([a, b, c]), limits: [laptop, desktop])) == desktop)

        // A peer that has everything puts no limit; a limit above the heads changes nothing.
        #expect(
            Compaction.acknowledgementLimit(peer: "nas", acknowledged: held, held: held, lamportOf: lamportOf) == nil)
        let loose = CutOffLimit.peerAcknowledgement("nas", lamport: 5_000)
        #expect(try #require(Compaction.cutOff(heads: Self.heads([a, b, c]), limits: [loose])).lamport == 1106)
    }

    @Test func anUninterpretableChangeHoldsTheCutOffBelowIt() throws {
        let (a, b, c) = Self.workedExample()
        // B authored one more change, of a kind this build does not know, at 1150.
        var authorB = TimelineAuthor(continuing: b)
        let unknown = authorB.append(kind: "list.archive", version: 1, payload: [0x0a, 0x00], lamport: 1150)
        #expect(!ListsDomain().understands(unknown))
        // Without the limit the cut-off (now min(1204, 1150, 3207) = 1150) would fold it.
        #expect(try #require(Compaction.cutOff(heads: Self.heads([a, authorB.changes, c]))).lamport == 1150)
        let limit = CutOffLimit.uninterpretable(lamport: unknown.lamport - 1)
        let cutOff = try #require(Compaction.cutOff(heads: Self.heads([a, authorB.changes, c]), limits: [limit]))
        #expect(cutOff == limit)
        #expect(cutOff.lamport < unknown.lamport)
        let folded = (a + authorB.changes + c).filter { $0.lamport <= cutOff.lamport }
        #expect(!folded.contains(unknown))
        #expect(try fold(folded).summary[Self.b] == 17)
    }

    @Test func limitsDescribeThemselves() {
        #expect(CutOffLimit.timelineHead(Self.b, lamport: 1106).description.contains("1106"))
        #expect(CutOffLimit.peerAcknowledgement("laptop", lamport: 9).description.contains("laptop"))
        #expect(CutOffLimit.uninterpretable(lamport: 9).description.contains("cannot interpret"))
    }
}
