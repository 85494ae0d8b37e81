import Testing

@testable import PlaitCore

@Suite("TimelineID and other identifiers")
struct IdentifierTests {
    @Test func extremes() throws {
        #expect(TimelineID(0).description == "0000000000000")
        #expect(TimelineID(.max).description == "FZZZZZZZZZZZZ")
        #expect(try TimelineID(parsing: "FZZZZZZZZZZZZ") == TimelineID(.max))
        #expect(try TimelineID(parsing: "0000000000000") == TimelineID(0))
        #expect(TimelineID(31).description == "000000000000Z")
        #expect(TimelineID(32).description == "0000000000010")
    }

    @Test func randomRoundTripAndTextOrderIsNumericOrder() throws {
        for seed in UInt64(0)..<500 {
            var rng = SplitMix64(seed: seed)
            // Mix full-range values with small ones and near-equal pairs.
            let x = TimelineID(rng.chance(20) ? UInt64(rng.int(0...100)) : rng.next())
            let y = TimelineID(rng.chance(30) ? x.rawValue &+ UInt64(rng.int(0...40)) : rng.next())
            for id in [x, y] {
                #expect(id.description.utf8.count == 13, "seed \(seed)")
                #expect(try TimelineID(parsing: id.description) == id, "seed \(seed)")
            }
            #expect((x.description < y.description) == (x.rawValue < y.rawValue), "seed \(seed): \(x) vs \(y)")
            #expect((x.description == y.description) == (x == y), "seed \(seed)")
        }
    }

    static let rejected: [(String, String)] = [
        ("", "empty"),
        ("000000000000", "13 characters"),
        ("00000000000000", "13 characters"),
        ("000000000000I", "not in 0-9A-Z"),
        ("000000000000L", "not in 0-9A-Z"),
        ("000000000000O", "not in 0-9A-Z"),
        ("000000000000U", "not in 0-9A-Z"),
        ("000000000000a", "not in 0-9A-Z"),
        ("000000000000-", "not in 0-9A-Z"),
        ("00000000000é", "13 characters"),  // 12 characters (13 bytes: é is two); characters count
        ("000000000000é", "not in 0-9A-Z"),  // 13 characters, the last not in the alphabet
        ("G000000000000", "larger than 64 bits"),
        ("Z000000000000", "larger than 64 bits"),
    ]

    @Test(arguments: rejected)
    func malformedTimelineIDsAreRejected(text: String, reason: String) {
        #expect {
            try TimelineID(parsing: text)
        } throws: { error in
            guard case let CoreError.malformedTimelineID(quoted, message) = error else { return false }
            return quoted == text && message.contains(reason)
        }
    }

    @Test func objectIDRoundTrips() throws {
        var rng = SplitMix64(seed: 7)
        for _ in 0..<200 {
            let id = ObjectID.random(using: &rng)
            #expect(id.description.count == 32)
            #expect(try ObjectID(parsing: id.description) == id)
            #expect(try ObjectID(bytes: id.bytes) == id)
        }
        let dashed = "123e4567-e89b-42d3-a456-426614174000"
        #expect(try ObjectID(parsing: dashed).description == "123e4567e89b42d3a456426614174000")
        #expect(throws: CoreError.malformedObjectID("123")) { try ObjectID(parsing: "123") }
        #expect(throws: CoreError.self) { try ObjectID(parsing: String(repeating: "0", count: 33)) }
        #expect(throws: CoreError.self) { try ObjectID(parsing: String(repeating: "g", count: 32)) }
        #expect(throws: CoreError.self) { try ObjectID(bytes: [UInt8](repeating: 0, count: 15)) }
    }

    @Test func replayOrderIsLamportThenUnsignedTimelineThenSeq() {
        let low = TimelineID(1)
        let high = TimelineID(0x8000_0000_0000_0000)  // negative as a signed integer: must still sort last
        #expect(OrderKey(lamport: 1, timeline: high, seq: 9) < OrderKey(lamport: 2, timeline: low, seq: 1))
        #expect(OrderKey(lamport: 5, timeline: low, seq: 9) < OrderKey(lamport: 5, timeline: high, seq: 1))
        #expect(OrderKey(lamport: 5, timeline: low, seq: 1) < OrderKey(lamport: 5, timeline: low, seq: 2))
        #expect(OrderKey.zero < OrderKey(lamport: 0, timeline: TimelineID(0), seq: 1))
        #expect(ChangeRef(timeline: high, seq: 1) > ChangeRef(timeline: low, seq: 7))
    }
}
