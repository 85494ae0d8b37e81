/// Records keyed by object ID, as a dictionary would hold them, in less memory: the records sit packed by slot
/// and a small hash table (`SlotIndex`) maps each ID to its slot.
///
/// A `Dictionary<ObjectID, ItemRecord>` pays key and record (144 bytes) for every bucket, and keeps its buckets
/// at most 3/4 full — as little as 3/8 just after it grew, which is where 100,000 items land: 377 bytes per
/// item before any text. Here a bucket is 8 bytes (hash bits and slot) and the chunks hold records and IDs
/// only, so an item costs about 112 + 16 + 8/0.375 bytes at worst (DESIGN §12's goal is ~300 bytes per live item).
///
/// Each slot holds its ID beside its record (16 bytes a record): a lookup checks the ID it found on the cache
/// lines it then reads the record from, two tables that share history — a state and the copy it was before a
/// late change rolled it back — are compared slot by slot without hashing (`differingIDs`), and a removal finds
/// the record it moves without a search.
///
/// The slots are kept in chunks (`ChunkedArray`): a copy — an in-memory checkpoint — shares them, and a change
/// after it copies one chunk, not the table; two copies compare only the chunks they do not share.
///
/// Iteration order is unspecified, as a dictionary's is; every reader that needs an order sorts (the digest,
/// snapshots). Removal is rare (a damaged-state test; records are tombstoned, not removed).
public struct RecordTable<Record: Sendable & Equatable>: Sendable, Equatable, Sequence,
    ExpressibleByDictionaryLiteral
{
    @usableFromInline var index = SlotIndex()
    /// Each slot's ID and record: `slot(of: entries[i].id) == i`.
    @usableFromInline var entries: ChunkedArray<RecordTableEntry<Record>>

    public init() { self.init(chunkShift: ChunkedArray<Record>.defaultShift) }

    /// A table whose chunks hold `1 << chunkShift` records (tests use small chunks to cross their edges).
    init(chunkShift: Int) {
        entries = ChunkedArray(shift: chunkShift)
    }

    public init(_ dictionary: [ObjectID: Record]) {
        self.init()
        reserveCapacity(dictionary.count)
        for (id, record) in dictionary { self[id] = record }
    }

    public init(dictionaryLiteral elements: (ObjectID, Record)...) {
        self.init()
        reserveCapacity(elements.count)
        for (id, record) in elements { self[id] = record }
    }

    public var count: Int { entries.count }
    public var isEmpty: Bool { entries.count == 0 }
    /// The IDs, in no particular order (in slot order: a new array).
    public var keys: [ObjectID] {
        var keys: [ObjectID] = []
        keys.reserveCapacity(count)
        entries.forEachElement { _, entry in keys.append(entry.id) }
        return keys
    }

    /// The slot of `id` (as `forEachRecord` and `withRecord(atSlot:)` number them), nil when there is none.
    @inlinable
    public func slot(of id: ObjectID) -> Int? { index.slot(of: id, in: entries) }
    /// The records, in no particular order (a new array: `count(where:)` counts without one).
    public var values: [Record] {
        var values: [Record] = []
        values.reserveCapacity(count)
        entries.forEachElement { _, entry in values.append(entry.record) }
        return values
    }

    /// How many records satisfy `predicate`, read in place.
    public func count(where predicate: (borrowing Record) throws -> Bool) rethrows -> Int {
        var found = 0
        try entries.forEachElement { _, entry in if try predicate(entry.record) { found += 1 } }
        return found
    }

    public mutating func reserveCapacity(_ capacity: Int) {
        index.reserveCapacity(capacity)
        entries.reserveCapacity(capacity)
    }

    public subscript(id: ObjectID) -> Record? {
        get { slot(of: id).map { entries[$0].record } }
        set {
            if let slot = slot(of: id) {
                if let newValue { entries[slot].record = newValue } else { remove(id, at: slot) }
            } else if let newValue {
                append(id, newValue)
            }
        }
        // In place, one lookup: replay writes `items[id]!.field = …` several times per change.
        _modify {
            if let slot = slot(of: id) {
                var value: Record? = entries[slot].record
                defer {
                    if let value { entries[slot].record = value } else { remove(id, at: slot) }
                }
                yield &value
            } else {
                var value: Record? = nil
                defer {
                    if let value { append(id, value) }
                }
                yield &value
            }
        }
    }

    /// Calls `body` with the record of `id` in place, without copying it out; nil when there is none.
    @inlinable
    public func withRecord<R>(_ id: ObjectID, _ body: (borrowing Record) throws -> R) rethrows -> R? {
        guard let slot = slot(of: id) else { return nil }
        // In place: the subscript would copy the record out (retaining its text).
        return try entries.withElement(at: slot) { try body($0.record) }
    }

    /// The ID in `slot`, read in place (the record is not copied).
    @inlinable
    public func id(atSlot slot: Int) -> ObjectID { entries[slot].id }

    /// Calls `body` with the record in `slot` (as `slot(of:)` and `forEachRecord` number them) in place.
    @inlinable
    public func withRecord<R>(atSlot slot: Int, _ body: (borrowing Record) throws -> R) rethrows -> R {
        try entries.withElement(at: slot) { try body($0.record) }
    }

    /// Calls `body` with every ID and its record in place, in storage order (iterating the table copies each
    /// record out).
    @inlinable
    public func forEachRecord(_ body: (ObjectID, borrowing Record) throws -> Void) rethrows {
        try entries.forEachElement { _, entry in try body(entry.id, entry.record) }
    }

    /// Adds a record for an ID not yet present, with one hash lookup (loading a stored state); false, and
    /// nothing changed, when the ID is present already.
    public mutating func insertNew(_ id: ObjectID, _ record: Record) -> Bool {
        if slot(of: id) != nil { return false }
        append(id, record)
        return true
    }

    /// Adds `record` for `id`, which the table does not hold, in the next slot.
    private mutating func append(_ id: ObjectID, _ record: Record) {
        entries.append(RecordTableEntry(id: id, record: record))
        index.insert(id, slot: entries.count - 1, in: entries)
    }

    @discardableResult
    public mutating func removeValue(forKey id: ObjectID) -> Record? {
        guard let slot = slot(of: id) else { return nil }
        let record = entries[slot].record
        remove(id, at: slot)
        return record
    }

    /// Moves the last record into the freed slot.
    private mutating func remove(_ id: ObjectID, at slot: Int) {
        index.remove(id, in: entries)
        let last = entries.count - 1
        if slot != last {
            let moved = entries[last]
            entries[slot] = moved
            index.move(moved.id, to: slot, in: entries)
        }
        entries.removeLast()
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        guard lhs.count == rhs.count else { return false }
        var equal = true
        lhs.forEachRecord { id, record in
            if equal && rhs.withRecord(id, { $0 == record }) != true { equal = false }
        }
        return equal
    }

    /// Adds to `out` every ID whose record differs between `a` and `b`, or that only one of them holds. An ID at
    /// the same slot in both is compared there; the rest (records added in a different order since the tables
    /// parted) are looked up. A rolled-back late change compares about 30,000 items in well under a millisecond
    /// this way, where looking each one up took about 10 ms; chunks the two still share are skipped whole.
    public static func differingIDs(_ a: Self, _ b: Self, into out: inout Set<ObjectID>) {
        let common = Swift.min(a.count, b.count)
        let sameChunking = a.entries.shift == b.entries.shift
        var slot = 0
        while slot < common {
            let chunk = slot >> a.entries.shift
            if sameChunking && slot & a.entries.mask == 0 && a.entries.sharesChunk(chunk, with: b.entries) {
                slot += 1 << a.entries.shift
                continue
            }
            defer { slot += 1 }
            let id = a.entries[slot].id
            let other = b.entries[slot].id
            if id == other {
                if a.entries[slot].record != b.entries[slot].record { out.insert(id) }
            } else {
                if b[id] != a.entries[slot].record { out.insert(id) }
                if a[other] != b.entries[slot].record { out.insert(other) }
            }
        }
        for slot in common..<a.count where b[a.entries[slot].id] != a.entries[slot].record { out.insert(a.entries[slot].id) }
        for slot in common..<b.count where a[b.entries[slot].id] != b.entries[slot].record { out.insert(b.entries[slot].id) }
    }

    /// In slot order (which is no order a reader may rely on).
    public struct Iterator: IteratorProtocol {
        var slot = 0
        let entries: ChunkedArray<RecordTableEntry<Record>>

        public mutating func next() -> (key: ObjectID, value: Record)? {
            guard slot < entries.count else { return nil }
            defer { slot += 1 }
            return (entries[slot].id, entries[slot].record)
        }
    }

    public func makeIterator() -> Iterator { Iterator(entries: entries) }

    public var underestimatedCount: Int { count }

    /// Bytes held by the table's own storage (not by what records point to, such as long texts).
    public var storageBytes: Int {
        index.storageBytes + entries.storageBytes
    }

    /// Bytes of a dictionary's buckets: `capacity` is 3/4 of them, and each holds a key and a value (plus a bit).
    public static func dictionaryBytes<Key, Value>(_ dictionary: [Key: Value]) -> Int {
        let buckets = (dictionary.capacity * 4 + 2) / 3
        return buckets * (MemoryLayout<Key>.stride + MemoryLayout<Value>.stride) + buckets / 8
    }
}

/// One slot of a `RecordTable`: the ID beside its record.
@usableFromInline
struct RecordTableEntry<Record> {
    @usableFromInline var id: ObjectID
    @usableFromInline var record: Record

    @usableFromInline init(id: ObjectID, record: Record) {
        self.id = id
        self.record = record
    }
}

extension RecordTableEntry: Sendable where Record: Sendable {}
