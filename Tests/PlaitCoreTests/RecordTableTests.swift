import Testing

@testable import PlaitCore

/// The packed table keeps each slot's ID beside its record: removal and the slot-by-slot comparison rely on it.
@Suite("RecordTable")
struct RecordTableTests {
    /// Two copies of one table changed apart (edits, new records added in different orders, removals) differ in
    /// exactly the IDs a lookup of every record says they do.
    /// Run with chunks of 4 records too, so that copies share some chunks and not others, and removals and
    /// additions cross chunk edges.
    @Test(arguments: [2, ChunkedArray<Int>.defaultShift])
    func differingIDsMatchesALookupOfEveryRecord(chunkShift: Int) {
        for seed in UInt64(0)..<200 {
            var rng = SplitMix64(seed: seed)
            let pool = (0..<60).map { _ in ObjectID.random(using: &rng) }
            var base = RecordTable<Int>(chunkShift: chunkShift)
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
            #expect(found == expected, "seed \(seed), chunk shift \(chunkShift)")
            var backward: Set<ObjectID> = []
            RecordTable.differingIDs(b, a, into: &backward)
            #expect(backward == expected, "seed \(seed), chunk shift \(chunkShift)")
            // The slot bookkeeping survives the removals: every held ID reads back its record.
            #expect(a.allSatisfy { a[$0.key] == $0.value } && Set(a.map(\.key)).count == a.count, "seed \(seed), chunk shift \(chunkShift)")
        }
    }

    /// The slot index (open addressing; a removal shifts the rest of its probe run back): after every step of
    /// random additions and removals every ID — not only the one just changed — reads back what a dictionary
    /// holds, and the counts agree. Tables this small wrap their probe runs around the end of the buckets often,
    /// and grow and shrink across several sizes.
    @Test func everyIDReadsBackAfterEveryAdditionAndRemoval() {
        for seed in UInt64(0)..<50 {
            var rng = SplitMix64(seed: seed)
            let pool = (0..<40).map { _ in ObjectID.random(using: &rng) }
            var table = RecordTable<Int>(chunkShift: 2)
            var reference: [ObjectID: Int] = [:]
            for step in 0..<400 {
                let id = pool.randomElement(using: &rng)!
                // Removals outnumber additions in some stretches, so the table empties and fills again.
                let removing = rng.chance(step / 100 % 2 == 0 ? 30 : 60)
                table[id] = removing ? nil : step
                reference[id] = removing ? nil : step
                let wrong = pool.filter { table[$0] != reference[$0] }
                #expect(wrong.isEmpty && table.count == reference.count, "seed \(seed), step \(step)")
                if !wrong.isEmpty { return }
            }
            #expect(table.index.count == reference.count, "seed \(seed)")
        }
    }

    /// A copy shares the chunks: changing one record of the copy copies that record's chunk only, and leaves the
    /// original as it was.
    @Test func aCopyCopiesOnlyTheChunkItChanges() {
        var generator = SplitMix64(seed: 7)
        var table = RecordTable<Int>(chunkShift: 4)
        let ids = (0..<100).map { _ in ObjectID.random(using: &generator) }
        for (index, id) in ids.enumerated() { table[id] = index }
        var copy = table
        copy[ids[37]] = -1
        let chunks = table.entries.chunks.count
        #expect(chunks == 7)
        let shared = (0..<chunks).filter { table.entries.sharesChunk($0, with: copy.entries) }
        #expect(shared == [0, 1, 3, 4, 5, 6], "only chunk 2 (slots 32 – 47) is copied")
        #expect(table[ids[37]] == 37 && copy[ids[37]] == -1)
        var found: Set<ObjectID> = []
        RecordTable.differingIDs(table, copy, into: &found)
        #expect(found == [ids[37]])
        // Appending to the copy copies (or adds) only its last chunk.
        copy[ObjectID.random(using: &generator)] = 100
        #expect((0..<chunks).filter { table.entries.sharesChunk($0, with: copy.entries) } == [0, 1, 3, 4, 5])
    }
}
