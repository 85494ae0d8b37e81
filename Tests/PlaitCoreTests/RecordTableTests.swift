import Testing

@testable import PlaitCore

/// The packed table keeps each slot's ID beside its record: removal and the slot-by-slot comparison rely on it.
@Suite("RecordTable")
struct RecordTableTests {
    /// Two copies of one table changed apart (edits, new records added in different orders, removals) differ in
    /// exactly the IDs a lookup of every record says they do.
    @Test func differingIDsMatchesALookupOfEveryRecord() {
        for seed in UInt64(0)..<200 {
            var rng = SplitMix64(seed: seed)
            let pool = (0..<60).map { _ in ObjectID.random(using: &rng) }
            var base = RecordTable<Int>()
            for id in pool.prefix(Int.random(in: 0...40, using: &rng)) { base[id] = Int.random(in: 0...3, using: &rng) }
            var a = base
            var b = base
            for table in [0, 1] {
                for _ in 0..<Int.random(in: 0...30, using: &rng) {
                    let id = pool.randomElement(using: &rng)!
                    let value: Int? = rng.chance(15) ? nil : Int.random(in: 0...3, using: &rng)
                    if table == 0 { a[id] = value } else { b[id] = value }
                }
            }
            var found: Set<ObjectID> = []
            RecordTable.differingIDs(a, b, into: &found)
            let expected = Set(pool.filter { a[$0] != b[$0] })
            #expect(found == expected, "seed \(seed)")
            var backward: Set<ObjectID> = []
            RecordTable.differingIDs(b, a, into: &backward)
            #expect(backward == expected, "seed \(seed)")
            // The slot bookkeeping survives the removals: every held ID reads back its record.
            #expect(a.allSatisfy { a[$0.key] == $0.value } && Set(a.map(\.key)).count == a.count, "seed \(seed)")
        }
    }
}
