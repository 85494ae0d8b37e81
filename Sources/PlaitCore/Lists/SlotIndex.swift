/// The index of a `RecordTable`: each object ID's slot, in an open-addressing hash table of 8-byte buckets.
///
/// Why not `Dictionary<ObjectID, UInt32>`: its buckets hold the 16-byte key and the 4-byte value, and it grows
/// at 3/4 full, so 100,000 items sat in 262,144 buckets of 20 bytes — 5.2 MiB, 55 bytes per item, and every
/// in-memory checkpoint made after the table last grew held a copy of it once the next item was added. The IDs
/// are in the table already (each beside its record), so a bucket holds only what finds them: 32 bits of the ID's
/// hash and the slot. 100,000 items take 2 MiB. A lookup reads the bucket, then the slot's ID on the cache lines
/// of the record it is after.
///
/// The hash is keyed by random numbers drawn per process, as a `Dictionary`'s `Hasher` is, so IDs chosen by a
/// hostile peer cannot be made to collide (a HashDoS) without knowing them. Linear probing; the bucket is chosen
/// by the stored 32 bits, so growing moves buckets without hashing the IDs again; removal shifts the probe run
/// back instead of leaving markers.
@usableFromInline
struct SlotIndex: Sendable {
    /// 0 when empty; else the ID's 32 hash bits above the slot + 1.
    @usableFromInline var buckets: [UInt64] = []
    @usableFromInline private(set) var count = 0

    @usableFromInline init() {}

    /// Three keys drawn at random when the process starts: without them, IDs cannot be chosen to collide.
    @usableFromInline static let seeds: (UInt64, UInt64, UInt64) = {
        var generator = SystemRandomNumberGenerator()
        return (generator.next(), generator.next(), generator.next())
    }()

    /// 32 bits of a keyed hash of `id`: wyhash's multiply-and-fold over the ID's two words, each mixed with a
    /// per-process key (Swift's `Hasher` cost a full replay of 1,000,000 changes about a third more).
    @inlinable @inline(__always)
    static func hash(_ id: ObjectID) -> UInt64 {
        let seeds = Self.seeds
        let first = (id.high ^ seeds.0).multipliedFullWidth(by: id.low ^ seeds.1)
        let folded = first.high ^ first.low
        let second = (folded ^ seeds.2).multipliedFullWidth(by: 0x9E37_79B9_7F4A_7C15)
        return (second.high ^ second.low) & 0xFFFF_FFFF
    }

    @inlinable @inline(__always)
    static func slot(of bucket: UInt64) -> Int { Int(truncatingIfNeeded: bucket & 0xFFFF_FFFF) - 1 }

    /// The bucket holding `id` (the table's slots being `entries`), or the empty bucket where it would go.
    @inlinable
    func find<Record>(_ id: ObjectID, hash: UInt64, in entries: ChunkedArray<RecordTableEntry<Record>>) -> (bucket: Int, found: Bool) {
        let mask = buckets.count - 1
        var index = Int(truncatingIfNeeded: hash) & mask
        return buckets.withUnsafeBufferPointer { buckets in
            while true {
                let bucket = buckets[index]
                if bucket == 0 { return (index, false) }
                if bucket >> 32 == hash && entries[Self.slot(of: bucket)].id == id { return (index, true) }
                index = (index + 1) & mask
            }
        }
    }

    /// The slot of `id`, nil when the table holds none.
    @inlinable
    func slot<Record>(of id: ObjectID, in entries: ChunkedArray<RecordTableEntry<Record>>) -> Int? {
        guard count > 0 else { return nil }
        let found = find(id, hash: Self.hash(id), in: entries)
        return found.found ? Self.slot(of: buckets[found.bucket]) : nil
    }

    /// Records `id` at `slot`; the caller knows the table does not hold `id`.
    @usableFromInline
    mutating func insert<Record>(_ id: ObjectID, slot: Int, in entries: ChunkedArray<RecordTableEntry<Record>>) {
        precondition(slot >= 0 && slot < Int(UInt32.max), "a RecordTable holds fewer than 2^32 - 1 records")
        if (count + 1) * 4 > buckets.count * 3 { grow() }
        let hash = Self.hash(id)
        let place = find(id, hash: hash, in: entries)
        precondition(!place.found, "SlotIndex.insert of an ID it holds")
        buckets[place.bucket] = hash << 32 | UInt64(slot + 1)
        count += 1
    }

    /// Points `id`, which the table holds, at `slot`.
    @usableFromInline
    mutating func move<Record>(_ id: ObjectID, to slot: Int, in entries: ChunkedArray<RecordTableEntry<Record>>) {
        let place = find(id, hash: Self.hash(id), in: entries)
        precondition(place.found, "SlotIndex.move of an ID it does not hold")
        buckets[place.bucket] = buckets[place.bucket] & ~0xFFFF_FFFF | UInt64(slot + 1)
    }

    /// Forgets `id`, which the table holds. The buckets after it in its probe run are shifted back into the
    /// hole where their own run allows, so that no lookup stops early at it.
    @usableFromInline
    mutating func remove<Record>(_ id: ObjectID, in entries: ChunkedArray<RecordTableEntry<Record>>) {
        let place = find(id, hash: Self.hash(id), in: entries)
        precondition(place.found, "SlotIndex.remove of an ID it does not hold")
        let mask = buckets.count - 1
        var hole = place.bucket
        var next = (hole + 1) & mask
        while buckets[next] != 0 {
            let home = Int(truncatingIfNeeded: buckets[next] >> 32) & mask
            // The bucket may move back into the hole when the hole lies between its home and where it is.
            if (next - home) & mask >= (next - hole) & mask {
                buckets[hole] = buckets[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        buckets[hole] = 0
        count -= 1
    }

    @usableFromInline
    mutating func reserveCapacity(_ capacity: Int) {
        var size = max(buckets.count, 16)
        while capacity * 4 > size * 3 { size *= 2 }
        if size != buckets.count { rehash(into: size) }
    }

    private mutating func grow() { rehash(into: max(16, buckets.count * 2)) }

    private mutating func rehash(into size: Int) {
        var fresh = [UInt64](repeating: 0, count: size)
        let mask = size - 1
        for bucket in buckets where bucket != 0 {
            var index = Int(truncatingIfNeeded: bucket >> 32) & mask
            while fresh[index] != 0 { index = (index + 1) & mask }
            fresh[index] = bucket
        }
        buckets = fresh
    }

    /// Bytes of the buckets.
    @usableFromInline var storageBytes: Int { buckets.capacity * MemoryLayout<UInt64>.stride }
}
