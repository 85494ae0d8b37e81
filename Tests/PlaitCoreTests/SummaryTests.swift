import Testing

@testable import PlaitCore

@Suite("Summary")
struct SummaryTests {
    static let a = TimelineID(0x0AAA)
    static let b = TimelineID(0x0BBB)
    static let c = TimelineID(0x0CCC)

    static func randomSummary(_ rng: inout SplitMix64) -> Summary {
        var heads: [TimelineID: UInt64] = [:]
        for _ in 0..<rng.int(0...6) {
            let timeline = TimelineID(rng.next())
            switch rng.int(0...3) {
            case 0: heads[timeline] = 1
            case 1: heads[timeline] = UInt64(Int64.max)
            default: heads[timeline] = UInt64.random(in: 1...1_000_000, using: &rng)
            }
        }
        return Summary(heads)
    }

    @Test func printParseRoundTrip() throws {
        for seed in UInt64(0)..<300 {
            var rng = SplitMix64(seed: seed)
            let summary = Self.randomSummary(&rng)
            let text = summary.description
            let parsed = try Summary(parsing: text)
            #expect(parsed == summary, "seed \(seed): '\(text)'")
            #expect(parsed.description == text, "seed \(seed)")
            // Sorted by ID, so text order is numeric order.
            #expect(parsed.timelines == summary.heads.keys.sorted(), "seed \(seed)")
        }
    }

    @Test func textForm() throws {
        let summary = Summary([Self.b: 3, Self.a: 6])
        #expect(summary.description == "00000000002NA:6,00000000002XV:3")
        #expect(try Summary(parsing: "00000000002NA:6,00000000002XV:3") == summary)
        #expect(Summary().description == "")
        #expect(try Summary(parsing: "") == Summary.empty)
        #expect(Summary([Self.a: 0]).isEmpty, "a zero head names nothing")
    }

    /// Each malformed text and a phrase its message must contain.
    static let malformed: [(String, String)] = [
        (":5", "empty timeline ID"),
        ("0000000000AMA", "not ID:SEQ"),
        ("0000000000AMA:1:2", "not ID:SEQ"),
        ("0000000000AM:5", "13 characters"),
        ("0000000000AMAA:5", "13 characters"),
        ("0000000000AMI:5", "character 13"),
        ("0000000000ama:5", "character 11"),
        ("G000000000AMA:5", "larger than 64 bits"),
        ("0000000000AMA:", "empty sequence number"),
        ("0000000000AMA:-1", "not a non-negative integer"),
        ("0000000000AMA:x", "not a non-negative integer"),
        ("0000000000AMA:1.5", "not a non-negative integer"),
        ("0000000000AMA:+1", "not a non-negative integer"),
        ("0000000000AMA: 1", "not a non-negative integer"),
        ("0000000000AMA:0", "start at 1"),
        ("0000000000AMA:07", "leading zero"),
        ("0000000000AMA:00", "leading zero"),
        ("0000000000AMA:1,0000000000AMA:2", "appears twice"),
        ("0000000000BHV:1,0000000000AMA:2", "out of order"),
        ("0000000000AMA:1,", "entry 2 is empty"),
        (",0000000000AMA:1", "entry 1 is empty"),
        ("0000000000AMA:1,,0000000000BHV:2", "entry 2 is empty"),
        (",", "is empty"),
        ("0000000000AMA:9223372036854775808", "too large"),  // Int64.max + 1
        ("0000000000AMA:18446744073709551616", "too large"),  // UInt64.max + 1
        ("0000000000AMA:99999999999999999999999", "too large"),
    ]

    @Test(arguments: malformed)
    func malformedInputIsRejectedWithAReason(text: String, reason: String) {
        #expect {
            try Summary(parsing: text)
        } throws: { error in
            guard case let CoreError.malformedSummary(quoted, message) = error else { return false }
            return quoted == text && message.contains(reason)
        }
    }

    @Test func largestSequenceNumberParses() throws {
        let text = "00000000002NA:9223372036854775807"
        #expect(try Summary(parsing: text)[Self.a] == UInt64(Int64.max))
    }

    @Test func errorDescriptionIsOneSentenceNamingTheText() {
        do {
            _ = try Summary(parsing: ":5")
            Issue.record("':5' parsed")
        } catch {
            #expect(error.description == "malformed summary ':5': entry 1 has an empty timeline ID.")
        }
    }

    @Test func coversUnionMissing() {
        let small = Summary([Self.a: 3, Self.b: 1])
        let large = Summary([Self.a: 5, Self.b: 1, Self.c: 2])
        #expect(large.covers(small))
        #expect(!small.covers(large))
        #expect(small.covers(small))
        #expect(small.covers(.empty))
        #expect(!Summary.empty.covers(small))
        #expect(small.union(large) == large)
        let other = Summary([Self.a: 1, Self.c: 9])
        #expect(small.union(other) == Summary([Self.a: 3, Self.b: 1, Self.c: 9]))
        #expect(small.missing(from: large) == [
            MissingRange(timeline: Self.a, seqs: 4...5), MissingRange(timeline: Self.c, seqs: 1...2),
        ])
        #expect(large.missing(from: small).isEmpty)
        #expect(small.contains(ChangeRef(timeline: Self.a, seq: 3)))
        #expect(!small.contains(ChangeRef(timeline: Self.a, seq: 4)))
        #expect(!small.contains(ChangeRef(timeline: Self.a, seq: 0)))
        #expect(!small.contains(ChangeRef(timeline: Self.c, seq: 1)))
        #expect(large.count == 8)
    }

    @Test func randomCoversUnionMissingProperties() {
        for seed in UInt64(0)..<200 {
            var rng = SplitMix64(seed: seed)
            // Draw from a few shared timelines so summaries overlap.
            let timelines = (0..<4).map { _ in TimelineID(rng.next()) }
            func draw() -> Summary {
                Summary(Dictionary(uniqueKeysWithValues: timelines.map { ($0, UInt64(rng.int(0...5))) }))
            }
            let x = draw()
            let y = draw()
            let union = x.union(y)
            #expect(union.covers(x) && union.covers(y), "seed \(seed)")
            #expect(union == y.union(x), "seed \(seed)")
            #expect(x.covers(y) == (x.union(y) == x), "seed \(seed)")
            #expect(x.covers(y) == x.missing(from: y).isEmpty, "seed \(seed)")
            // Applying the missing ranges to x gives the union.
            var filled = x
            for range in x.missing(from: y) {
                #expect(range.seqs.lowerBound == x[range.timeline] + 1, "seed \(seed)")
                filled[range.timeline] = range.seqs.upperBound
            }
            #expect(filled == union, "seed \(seed)")
        }
    }
}
