import Testing

@testable import PlaitCore

/// DESIGN §11 on the cut-off: superseded timelines, and authors nobody here paired.
@Suite("Compaction cut-off and timeline authors")
struct CompactionAuthorTests {
    static let grace: Int64 = 30 * 24 * 3600 * 1000
    static let now: Int64 = 1_700_000_000_000

    static func released(
        ended: Bool = false, seq: UInt64 = 17, superseded: UInt64? = nil, known: Bool? = nil, arrival: Int64? = nil
    ) -> Bool {
        Compaction.released(
            ended: ended, seq: seq, supersededSeq: superseded, authorKnown: known, lastArrival: arrival, now: now,
            graceMs: grace)
    }

    @Test func whatReleasesATimeline() {
        #expect(!Self.released(), "an unsigned, unended timeline holds")
        #expect(Self.released(ended: true))
        #expect(!Self.released(seq: 16, superseded: 17), "superseded at 17 but held only to 16: it still holds")
        #expect(Self.released(seq: 17, superseded: 17))
        #expect(Self.released(seq: 18, superseded: 17), "beyond the superseded head is a fork, not a wait")
        #expect(!Self.released(known: true, arrival: nil), "a paired author holds whenever it last spoke")
        #expect(!Self.released(known: false, arrival: Self.now - Self.grace), "quiet exactly the grace: holds")
        #expect(Self.released(known: false, arrival: Self.now - Self.grace - 1))
        #expect(Self.released(known: false, arrival: nil), "an unknown author never heard from holds nothing")
        #expect(!Self.released(known: false, arrival: Self.now - 1))
    }

    /// The worked example (heads A:23 = 1204, B:17 = 1106, C:27 = 3207) with B's author unknown: B holds the
    /// cut-off at 1106 while it spoke within the grace; once quiet, or superseded at its head, A's 1204 does.
    @Test func workedExampleWithAnUnknownAuthor() throws {
        let (a, b, c) = CompactionTests.workedExample()
        func cutOff(bReleased: Bool) -> CutOffLimit? {
            var heads = CompactionTests.heads([a, b, c])
            heads[1].released = bReleased
            return Compaction.cutOff(heads: heads)
        }
        let active = Self.released(seq: 17, known: false, arrival: Self.now - 1_000)
        #expect(cutOff(bReleased: active) == .timelineHead(CompactionTests.b, lamport: 1106))
        let quiet = Self.released(seq: 17, known: false, arrival: Self.now - Self.grace - 1_000)
        #expect(cutOff(bReleased: quiet) == .timelineHead(CompactionTests.a, lamport: 1204))
        let superseded = Self.released(seq: 17, superseded: 17)
        #expect(cutOff(bReleased: superseded) == .timelineHead(CompactionTests.a, lamport: 1204))
        let supersededLater = Self.released(seq: 17, superseded: 20)
        #expect(cutOff(bReleased: supersededLater) == .timelineHead(CompactionTests.b, lamport: 1106))
    }
}
