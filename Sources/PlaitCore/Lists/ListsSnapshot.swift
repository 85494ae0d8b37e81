/// Canonical encoding, snapshots and the baseline join of the lists domain.
///
/// A snapshot is a set of object versions. Each version carries its `stamp` (the last change that touched
/// it), the `weight` of the history it was taken from, and its `rank` (index in its section or in the list
/// order). The join keeps, per object, the greatest version by `(stamp, weight, rank, bytes)`: a per-object
/// maximum, hence commutative, associative and idempotent; a snapshot whose history covers the other's wins
/// every object (its stamps are never older and its weight is larger), so "take the larger" falls out.
/// Orders are rebuilt by sorting on `(rank, id)`.
extension ListsDomain {
    static let snapshotFormat: UInt64 = 1

    /// The digest covers what users see plus tombstones and placing changes; stamps (bookkeeping for the
    /// baseline join, raised even by no-ops) are left out, so a no-op leaves the digest as it was.
    public func canonicalEncoding(of state: ListsState) -> [UInt8] {
        var bytes: [UInt8] = []
        writeCanonicalEncoding(of: state) { bytes.append(contentsOf: $0) }
        return bytes
    }

    /// SHA-256 of the canonical encoding, fed in pieces: the encoding of a 100,000-item state is never held
    /// whole (it was, with its copies, a peak of the process taking the digest).
    public func digest(of state: ListsState) -> [UInt8] {
        let hasher = SHA256.stream()
        writeCanonicalEncoding(of: state) { hasher.update($0) }
        return hasher.finalize()
    }

    /// The canonical encoding in pieces, in order: each list's message (its items inside it, so one list's
    /// encoding is held at a time), then the deleted items by ID.
    func writeCanonicalEncoding(of state: ListsState, to sink: (UnsafeRawBufferPointer) -> Void) {
        var out = ProtoWriter()
        out.uint(1, Self.snapshotFormat)
        var body = ProtoWriter()
        var item = ProtoWriter()
        for listID in state.orderedListIDs {
            guard let list = state.lists[listID] else { continue }
            body.removeAll()
            body.objectID(1, listID)
            body.string(2, list.title)
            if let color = list.color { body.string(3, color) }
            body.bool(4, list.deleted)
            for completed in [false, true] {
                state.forEachItem(in: listID, completed: completed) { itemID, record in
                    item.removeAll()
                    encodeItem(itemID, record, &item)
                    body.data(completed ? 7 : 6, item)
                }
            }
            out.data(2, body)
            out.flush(to: sink, over: 1 << 16)
        }
        var deleted: [ObjectID] = []
        state.items.forEachRecord { itemID, record in if record.deleted { deleted.append(itemID) } }
        for itemID in deleted.sorted() {
            guard let record = state.items[itemID] else { continue }
            item.removeAll()
            encodeItem(itemID, record, &item)
            out.data(3, item)
            out.flush(to: sink, over: 1 << 16)
        }
        out.flush(to: sink, over: 0)
    }

    private func encodeItem(_ id: ObjectID, _ item: borrowing ItemRecord, _ out: inout ProtoWriter) {
        out.objectID(1, id)
        out.objectID(2, item.list)
        out.string(3, item.textBytes)
        out.bool(4, item.completed)
        out.bool(5, item.deleted)
        out.fixed64(6, item.placedBy.timeline.rawValue)
        out.uint(7, item.placedBy.seq)
    }

    public func snapshot(of state: ListsState, weight: UInt64) -> [UInt8] {
        var bytes: [UInt8] = []
        ListsSnapshotWriter(state, weight: weight).write { bytes.append(contentsOf: $0) }
        return bytes
    }

    public func restore(snapshot bytes: ArraySlice<UInt8>) throws(CoreError) -> ListsState {
        let snapshot = try ListsSnapshot(decoding: bytes)
        var state = ListsState()
        state.trackChanges = false
        var lists = snapshot.lists
        // A live item whose list is gone or deleted keeps its list alive: the join of two histories may pair
        // a list deleted on one side with an item added to it on the other.
        for (itemID, item) in snapshot.items.sorted(by: { $0.key < $1.key }) where !item.deleted {
            if let list = lists[item.list] {
                if list.deleted { lists[item.list]!.deleted = false }
            } else {
                lists[item.list] = ListVersion(
                    title: Self.recoveredTitle, color: nil, deleted: false, stamp: item.stamp, rank: UInt64.max,
                    weight: 0)
            }
            _ = itemID
        }
        for (listID, list) in lists.sorted(by: { ($0.value.rank, $0.key) < ($1.value.rank, $1.key) }) {
            state.lists[listID] = ListRecord(title: list.title, color: list.color, deleted: list.deleted, stamp: list.stamp)
            state.linkList(listID, at: .bottom)
        }
        let ordered = snapshot.items.sorted { ($0.value.rank, $0.key) < ($1.value.rank, $1.key) }
        for (itemID, item) in ordered {
            state.items[itemID] = ItemRecord(
                list: item.list, text: item.text, completed: item.completed, deleted: item.deleted,
                placedBy: item.placedBy, stamp: item.stamp)
            if !item.deleted { state.linkItem(itemID, at: .bottom) }
        }
        state.trackChanges = true
        state.markAllChanged()
        return state
    }

    /// A hostile paired peer's baseline (2026-11-25) folded only its own `timeline.begin` and carried tombstones
    /// stamped at Lamport 2^62 for another device's items: they vanished, with no delete in any log, and a stamp of
    /// 2^64 - 1 would have beaten every later edit of them in every join. Every version's stamp must name a change
    /// the baseline folds, at most at its largest Lamport time, and every item's placing change too (zero: none).
    public func checkSnapshot(
        _ snapshot: ArraySlice<UInt8>, folds folded: Summary, maxLamport: UInt64
    ) throws(CoreError) {
        let decoded = try ListsSnapshot(decoding: snapshot)
        func check(_ stamp: OrderKey, _ what: @autoclosure () -> String) throws(CoreError) {
            guard stamp != .zero else { return }
            guard stamp.lamport <= maxLamport, stamp.seq >= 1, stamp.seq <= folded[stamp.timeline] else {
                throw .corruptSnapshot(
                    "\(what()) is stamped by change \(stamp.timeline):\(stamp.seq) at Lamport time \(stamp.lamport), "
                        + "which the baseline does not fold (it folds \(folded), up to Lamport time \(maxLamport))")
            }
        }
        for (id, list) in decoded.lists { try check(list.stamp, "list \(id)") }
        for (id, item) in decoded.items {
            try check(item.stamp, "item \(id)")
            let placed = item.placedBy
            guard placed.seq == 0 || placed.seq <= folded[placed.timeline] else {
                throw .corruptSnapshot(
                    "item \(id) is placed by change \(placed.timeline):\(placed.seq), which the baseline does not fold")
            }
        }
    }

    public func join(_ lhs: [UInt8], _ rhs: [UInt8]) throws(CoreError) -> [UInt8] {
        var result = try ListsSnapshot(decoding: lhs[...])
        let other = try ListsSnapshot(decoding: rhs[...])
        for (id, version) in other.lists {
            if let mine = result.lists[id], !mine.precedes(version) { continue }
            result.lists[id] = version
        }
        for (id, version) in other.items {
            if let mine = result.items[id], !mine.precedes(version) { continue }
            result.items[id] = version
        }
        return result.encoded()
    }
}

/// A state's snapshot written in pieces, byte for byte what `ListsSnapshot.encoded()` gives for the versions
/// `snapshot(of:weight:)` takes, without building that set of versions or the whole encoding: a stored
/// checkpoint of 100,000 items held them several times over (the versions, them sorted, the growing encoding,
/// its copy). What it holds is the IDs in snapshot order with their ranks; `write` may run more than once (to
/// size a buffer, then to fill it) and writes the same bytes each time.
public struct ListsSnapshotWriter {
    let state: ListsState
    let weight: UInt64
    /// Lists by ID, with their rank (index in the list order).
    private var lists: [(id: ObjectID, rank: UInt64)] = []
    /// The slots of the items to write (in the state's table), sorted by the items' IDs; `ranks[slot]` is each
    /// one's rank (index in its section; 0 for a deleted item), `unmet` for a slot not written.
    ///
    /// Four bytes a slot twice over: with each item's ID, rank, slot and when it was met in one array (40 bytes),
    /// sorted into a copy and cut into a third, the writer of a 100,000-item checkpoint held 11 MiB when it began,
    /// at the peak of a growing catch-up's memory. (A section of more than 2³² items cannot occur: slots are
    /// 32-bit.)
    private var itemSlots: [UInt32] = []
    private var ranks: [UInt32] = []
    private static let unmet = UInt32.max

    public init(_ state: ListsState, weight: UInt64) {
        self.state = state
        self.weight = weight
        // The versions as `snapshot` assigned them, an object met again replacing its earlier version (a
        // deleted item met linked and again as deleted): sorted by ID, the version met last kept.
        var listOrder: [(id: ObjectID, met: Int, rank: UInt64)] = []
        var ranks = [UInt32](repeating: Self.unmet, count: state.items.count)
        for (rank, listID) in state.orderedListIDs.enumerated() where state.lists[listID] != nil {
            listOrder.append((listID, listOrder.count, UInt64(rank)))
            for completed in [false, true] {
                var itemRank: UInt32 = 0
                state.forEachItem(in: listID, completed: completed) { itemID, _ in
                    ranks[state.items.slot(of: itemID)!] = itemRank
                    itemRank += 1
                }
            }
        }
        state.items.forEachRecord { itemID, record in
            if record.deleted { ranks[state.items.slot(of: itemID)!] = 0 }
        }
        Self.keepLastByID(&listOrder)
        lists = listOrder.map { ($0.id, $0.rank) }
        var slots: [UInt32] = []
        slots.reserveCapacity(ranks.count(where: { $0 != Self.unmet }))
        for (slot, rank) in ranks.enumerated() where rank != Self.unmet { slots.append(UInt32(slot)) }
        let table = state.items
        slots.sort { table.id(atSlot: Int($0)) < table.id(atSlot: Int($1)) }
        itemSlots = slots
        self.ranks = ranks
    }

    /// Sorts `met` by ID and keeps, of each ID, the entry met last.
    private static func keepLastByID(_ met: inout [(id: ObjectID, met: Int, rank: UInt64)]) {
        met.sort { ($0.id, $0.met) < ($1.id, $1.met) }
        var kept = 0
        for index in met.indices where index + 1 == met.count || met[index + 1].id != met[index].id {
            met[kept] = met[index]
            kept += 1
        }
        met.removeLast(met.count - kept)
    }

    /// Hands the encoding to `sink` in pieces of about 64 KiB, in order.
    public func write(to sink: (UnsafeRawBufferPointer) throws -> Void) rethrows {
        var out = ProtoWriter()
        var inner = ProtoWriter()
        out.uint(1, ListsDomain.snapshotFormat)
        for (id, rank) in lists {
            guard let list = state.lists[id] else { continue }
            inner.removeAll()
            ListVersion(
                title: list.title, color: list.color, deleted: list.deleted, stamp: list.stamp, rank: rank,
                weight: weight
            ).encode(id, &inner)
            out.data(2, inner)
        }
        for slot in itemSlots {
            inner.removeAll()
            let id = state.items.id(atSlot: Int(slot))
            // Read in place: copying each record out retained and released its text.
            state.items.withRecord(atSlot: Int(slot)) {
                ItemVersion.encode(id, $0, rank: UInt64(ranks[Int(slot)]), weight: weight, &inner)
            }
            out.data(3, inner)
            try out.flush(to: sink, over: 1 << 16)
        }
        try out.flush(to: sink, over: 0)
    }

    /// The encoding's size in bytes (one pass of `write`).
    public var size: Int {
        var size = 0
        write { size += $0.count }
        return size
    }
}

/// One object's version in a snapshot, ordered for the join.
protocol ObjectVersion: Hashable {
    var stamp: OrderKey { get }
    var weight: UInt64 { get }
    var rank: UInt64 { get }
    func encode(_ id: ObjectID, _ out: inout ProtoWriter)
}

extension ObjectVersion {
    /// The version order of the join: `(stamp, weight, rank)`, then the encoded bytes, so it is total.
    func precedes(_ other: Self) -> Bool {
        if stamp != other.stamp { return stamp < other.stamp }
        if weight != other.weight { return weight < other.weight }
        if rank != other.rank { return rank < other.rank }
        var mine = ProtoWriter()
        var theirs = ProtoWriter()
        encode(ObjectID(high: 0, low: 0), &mine)
        other.encode(ObjectID(high: 0, low: 0), &theirs)
        return mine.bytes.lexicographicallyPrecedes(theirs.bytes)
    }
}

struct ListVersion: ObjectVersion {
    var title: String
    var color: String?
    var deleted: Bool
    var stamp: OrderKey
    var rank: UInt64
    var weight: UInt64

    func encode(_ id: ObjectID, _ out: inout ProtoWriter) {
        out.objectID(1, id)
        out.string(2, title)
        if let color { out.string(3, color) }
        out.bool(4, deleted)
        out.orderKey(5, stamp)
        out.uint(6, rank)
        out.uint(7, weight)
    }

}

struct ItemVersion: ObjectVersion {
    var list: ObjectID
    var text: String
    var completed: Bool
    var deleted: Bool
    var placedBy: ChangeRef
    var stamp: OrderKey
    var rank: UInt64
    var weight: UInt64

    init(
        list: ObjectID, text: String, completed: Bool, deleted: Bool, placedBy: ChangeRef, stamp: OrderKey,
        rank: UInt64, weight: UInt64
    ) {
        self.list = list
        self.text = text
        self.completed = completed
        self.deleted = deleted
        self.placedBy = placedBy
        self.stamp = stamp
        self.rank = rank
        self.weight = weight
    }

    init(_ record: borrowing ItemRecord, rank: UInt64, weight: UInt64) {
        self.init(
            list: record.list, text: record.text, completed: record.completed, deleted: record.deleted,
            placedBy: record.placedBy, stamp: record.stamp, rank: rank, weight: weight)
    }

    func encode(_ id: ObjectID, _ out: inout ProtoWriter) {
        Self.encode(
            id, list: list, text: text, completed: completed, deleted: deleted, placedBy: placedBy, stamp: stamp,
            rank: rank, weight: weight, &out)
    }

    /// `ItemVersion(record, rank:, weight:).encode(id, &out)` without building the version (the text written
    /// from the record's bytes in place).
    static func encode(
        _ id: ObjectID, _ record: borrowing ItemRecord, rank: UInt64, weight: UInt64, _ out: inout ProtoWriter
    ) {
        out.objectID(1, id)
        out.objectID(2, record.list)
        out.string(3, record.textBytes)
        encodeRest(
            completed: record.completed, deleted: record.deleted, placedBy: record.placedBy, stamp: record.stamp,
            rank: rank, weight: weight, &out)
    }

    private static func encode(
        _ id: ObjectID, list: ObjectID, text: String, completed: Bool, deleted: Bool, placedBy: ChangeRef,
        stamp: OrderKey, rank: UInt64, weight: UInt64, _ out: inout ProtoWriter
    ) {
        out.objectID(1, id)
        out.objectID(2, list)
        out.string(3, text)
        encodeRest(
            completed: completed, deleted: deleted, placedBy: placedBy, stamp: stamp, rank: rank, weight: weight, &out)
    }

    /// Fields 4 – 10, in order.
    private static func encodeRest(
        completed: Bool, deleted: Bool, placedBy: ChangeRef, stamp: OrderKey, rank: UInt64, weight: UInt64,
        _ out: inout ProtoWriter
    ) {
        out.bool(4, completed)
        out.bool(5, deleted)
        out.fixed64(6, placedBy.timeline.rawValue)
        out.uint(7, placedBy.seq)
        out.orderKey(8, stamp)
        out.uint(9, rank)
        out.uint(10, weight)
    }

}

/// The protobuf `ListsSnapshot` message of `plait.proto`, objects sorted by ID so equal sets encode equally.
struct ListsSnapshot {
    var lists: [ObjectID: ListVersion] = [:]
    var items: [ObjectID: ItemVersion] = [:]

    init() {}

    func encoded() -> [UInt8] {
        var writer = ProtoWriter()
        writer.uint(1, ListsDomain.snapshotFormat)
        for (id, list) in lists.sorted(by: { $0.key < $1.key }) {
            writer.message(2) { out in list.encode(id, &out) }
        }
        for (id, item) in items.sorted(by: { $0.key < $1.key }) {
            writer.message(3) { out in item.encode(id, &out) }
        }
        return writer.bytes
    }

    init(decoding bytes: ArraySlice<UInt8>) throws(CoreError) {
        var reader = ProtoReader(bytes)
        var format: UInt64 = 0
        while let (field, value) = try reader.next() {
            switch field {
            case 1: format = try value.uint()
            case 2:
                var inner = ProtoReader(try value.data())
                var id: ObjectID?
                var list = ListVersion(title: "", color: nil, deleted: false, stamp: .zero, rank: 0, weight: 0)
                while let (number, item) = try inner.next() {
                    switch number {
                    case 1: id = try item.objectID()
                    case 2: list.title = try item.string()
                    case 3: list.color = try item.string()
                    case 4: list.deleted = try item.bool()
                    case 5: list.stamp = try OrderKey(decoding: try item.data())
                    case 6: list.rank = try item.uint()
                    case 7: list.weight = try item.uint()
                    default: continue
                    }
                }
                guard let id else { throw .corruptSnapshot("a list without an ID") }
                // One version per object: two would leave which one counts to the order of decoding.
                guard lists.updateValue(list, forKey: id) == nil else { throw .corruptSnapshot("list \(id) twice") }
            case 3:
                var inner = ProtoReader(try value.data())
                var id: ObjectID?
                var list: ObjectID?
                var item = ItemVersion(
                    list: ObjectID(high: 0, low: 0), text: "", completed: false, deleted: false,
                    placedBy: ChangeRef(timeline: TimelineID(0), seq: 0), stamp: .zero, rank: 0, weight: 0)
                while let (number, field) = try inner.next() {
                    switch number {
                    case 1: id = try field.objectID()
                    case 2: list = try field.objectID()
                    case 3: item.text = try field.string()
                    case 4: item.completed = try field.bool()
                    case 5: item.deleted = try field.bool()
                    case 6: item.placedBy.timeline = TimelineID(try field.uint())
                    case 7: item.placedBy.seq = try field.uint()
                    case 8: item.stamp = try OrderKey(decoding: try field.data())
                    case 9: item.rank = try field.uint()
                    case 10: item.weight = try field.uint()
                    default: continue
                    }
                }
                guard let id, let list else { throw .corruptSnapshot("an item without an ID or list") }
                item.list = list
                guard items.updateValue(item, forKey: id) == nil else { throw .corruptSnapshot("item \(id) twice") }
            default: continue
            }
        }
        guard format >= 1 else { throw .corruptSnapshot("no snapshot format version") }
        guard format <= ListsDomain.snapshotFormat else {
            throw .unsupportedFormat(found: Int(format), supported: Int(ListsDomain.snapshotFormat))
        }
    }
}

extension ProtoWriter {
    mutating func orderKey(_ field: UInt32, _ key: OrderKey) {
        message(field) { out in
            out.uint(1, key.lamport)
            out.fixed64(2, key.timeline.rawValue)
            out.uint(3, key.seq)
        }
    }
}

extension OrderKey {
    init(decoding bytes: ArraySlice<UInt8>) throws(CoreError) {
        var reader = ProtoReader(bytes)
        self = .zero
        while let (field, value) = try reader.next() {
            switch field {
            case 1: lamport = try value.uint()
            case 2: timeline = TimelineID(try value.uint())
            case 3: seq = try value.uint()
            default: continue
            }
        }
    }
}
