/// One list, live or tombstoned. Its place in the list order and the ends of its two sections are links.
public struct ListRecord: Hashable, Sendable {
    public var title: String
    public var color: String?
    public var deleted: Bool
    /// The replay-order key of the last change that changed this record's own fields.
    public var stamp: OrderKey
    public var previous: ObjectID?
    public var next: ObjectID?
    public var pendingHead: ObjectID?
    public var pendingTail: ObjectID?
    public var completedHead: ObjectID?
    public var completedTail: ObjectID?

    public init(
        title: String, color: String?, deleted: Bool, stamp: OrderKey, previous: ObjectID? = nil,
        next: ObjectID? = nil, pendingHead: ObjectID? = nil, pendingTail: ObjectID? = nil,
        completedHead: ObjectID? = nil, completedTail: ObjectID? = nil
    ) {
        self.title = title
        self.color = color
        self.deleted = deleted
        self.stamp = stamp
        self.previous = previous
        self.next = next
        self.pendingHead = pendingHead
        self.pendingTail = pendingTail
        self.completedHead = completedHead
        self.completedTail = completedTail
    }
}

/// One item, live or tombstoned (a tombstone keeps its last fields and is in no section).
public struct ItemRecord: Hashable, Sendable {
    // Laid out for size (112 bytes, was 120): the flags byte sits in the text's tail padding, and the two
    // neighbour links are plain IDs with their presence in the flags (an `ObjectID?` pads to 24 bytes).
    public var list: ObjectID
    @usableFromInline var storedText: ItemText
    @usableFromInline var flags: UInt8
    /// The change that put the item in its list (its create, or the move into the list).
    public var placedBy: ChangeRef
    public var stamp: OrderKey
    /// The neighbours' IDs, meaningful where `flags` says the neighbour exists (zero otherwise, so that
    /// equal records compare and hash equal).
    @usableFromInline var previousID: ObjectID
    @usableFromInline var nextID: ObjectID

    @usableFromInline static let completedFlag: UInt8 = 1
    @usableFromInline static let deletedFlag: UInt8 = 2
    @usableFromInline static let previousFlag: UInt8 = 4
    @usableFromInline static let nextFlag: UInt8 = 8
    @usableFromInline static let none = ObjectID(high: 0, low: 0)

    public init(
        list: ObjectID, text: String, completed: Bool, deleted: Bool, placedBy: ChangeRef, stamp: OrderKey,
        previous: ObjectID? = nil, next: ObjectID? = nil
    ) {
        self.list = list
        self.storedText = ItemText(text)
        self.flags = 0
        self.placedBy = placedBy
        self.stamp = stamp
        self.previousID = Self.none
        self.nextID = Self.none
        self.completed = completed
        self.deleted = deleted
        self.previous = previous
        self.next = next
    }

    /// The text (a long one is copied out of the record's block: `textBytes` reads it in place).
    public var text: String {
        get { storedText.string }
        set { storedText = ItemText(newValue) }
    }

    /// The text as the record holds it (its UTF-8 bytes in place).
    @inlinable public var textBytes: ItemText { storedText }

    @inlinable public var completed: Bool {
        get { flags & Self.completedFlag != 0 }
        set { flags = newValue ? flags | Self.completedFlag : flags & ~Self.completedFlag }
    }

    @inlinable public var deleted: Bool {
        get { flags & Self.deletedFlag != 0 }
        set { flags = newValue ? flags | Self.deletedFlag : flags & ~Self.deletedFlag }
    }

    @inlinable public var previous: ObjectID? {
        get { flags & Self.previousFlag != 0 ? previousID : nil }
        set {
            previousID = newValue ?? Self.none
            flags = newValue != nil ? flags | Self.previousFlag : flags & ~Self.previousFlag
        }
    }

    @inlinable public var next: ObjectID? {
        get { flags & Self.nextFlag != 0 ? nextID : nil }
        set {
            nextID = newValue ?? Self.none
            flags = newValue != nil ? flags | Self.nextFlag : flags & ~Self.nextFlag
        }
    }
}

/// The lists domain's replayed state: every list and item ever created, with the orders as doubly linked
/// lists so that top, bottom and `after(X)` placements are O(1).
///
/// Deleted lists keep their place in the list order (hidden), so a revived list comes back where it was.
public struct ListsState: Sendable {
    public internal(set) var lists: [ObjectID: ListRecord] = [:]
    /// Items outnumber everything else: kept in a `RecordTable` (packed records), not a dictionary.
    public internal(set) var items: RecordTable<ItemRecord> = [:]
    public internal(set) var listHead: ObjectID?
    public internal(set) var listTail: ObjectID?
    /// Records changed since the last `takeChanges()`: what a store must write back. Items are marked by their
    /// slot in `items`, a bit each: a set of IDs cost 16 – 43 bytes per item (more while it grew, and again in
    /// every checkpoint copy), about 4 MiB when a catch-up had added 100,000 items; the bits cost 12.5 KiB.
    /// Slots are stable: the state never removes an item record (deleted items stay, as tombstones).
    public private(set) var changedLists: Set<ObjectID> = []
    private var changedItemSlots: [UInt64] = []
    /// Whether records changed are remembered for `takeChanges()` (off while a store rewrites everything).
    public var trackChanges = true

    public init() {}

    /// Hands over and forgets the records changed since the last call: lists as a set, items as a list of IDs
    /// without repeats (in no particular order).
    public mutating func takeChanges() -> (lists: Set<ObjectID>, items: [ObjectID]) {
        var items: [ObjectID] = []
        items.reserveCapacity(changedItemSlots.reduce(0) { $0 + $1.nonzeroBitCount })
        for (index, word) in changedItemSlots.enumerated() where word != 0 {
            var bits = word
            while bits != 0 {
                let slot = index << 6 | bits.trailingZeroBitCount
                bits &= bits - 1
                if slot < self.items.count { items.append(self.items.entries[slot].id) }
            }
        }
        defer {
            changedLists = []
            changedItemSlots = []
        }
        return (changedLists, items)
    }

    /// Builds a state from stored records (the materialized tables).
    public init(lists: [ObjectID: ListRecord], items: RecordTable<ItemRecord>, listHead: ObjectID?, listTail: ObjectID?) {
        self.lists = lists
        self.items = items
        self.listHead = listHead
        self.listTail = listTail
    }

    /// Marks records as changed (to be saved), as if a change had touched them.
    public mutating func markChanged(lists: Set<ObjectID>, items: Set<ObjectID>) {
        guard trackChanges else { return }
        changedLists.formUnion(lists)
        for id in items { touchItem(id) }
    }

    public init(lists: [ObjectID: ListRecord], items: [ObjectID: ItemRecord], listHead: ObjectID?, listTail: ObjectID?) {
        self.init(lists: lists, items: RecordTable(items), listHead: listHead, listTail: listTail)
    }

    @inline(__always) mutating func touchList(_ id: ObjectID) { if trackChanges { changedLists.insert(id) } }
    /// Marks an item changed; an ID the state does not hold has no row to write, and is not marked.
    @inline(__always) mutating func touchItem(_ id: ObjectID) {
        guard trackChanges, let slot = items.slot(of: id) else { return }
        let word = Int(slot >> 6)
        if word >= changedItemSlots.count {
            changedItemSlots.append(contentsOf: repeatElement(0, count: word + 1 - changedItemSlots.count))
        }
        changedItemSlots[word] |= 1 << (UInt64(slot) & 63)
    }

    mutating func markAllChanged() {
        changedLists = Set(lists.keys)
        changedItemSlots = Array(repeating: ~0, count: (items.count + 63) >> 6)
    }

    /// The records that differ between two states (after a rollback and replay, what a store must rewrite).
    public static func differences(from old: ListsState, to new: ListsState) -> (lists: Set<ObjectID>, items: Set<ObjectID>) {
        var lists: Set<ObjectID> = []
        var items: Set<ObjectID> = []
        for (id, record) in new.lists where old.lists[id] != record { lists.insert(id) }
        for id in old.lists.keys where new.lists[id] == nil { lists.insert(id) }
        RecordTable.differingIDs(old.items, new.items, into: &items)
        return (lists, items)
    }

    // MARK: Reading in display order

    /// All lists in order, tombstones included. Walks only lists that exist, at most once each: a state read
    /// from damaged rows (see `checkConsistency`) never makes a reader loop or find a missing record.
    public var orderedListIDs: [ObjectID] {
        var out: [ObjectID] = []
        out.reserveCapacity(lists.count)
        var cursor = listHead
        while let id = cursor, let record = lists[id], out.count < lists.count {
            out.append(id)
            cursor = record.next
        }
        return out
    }

    /// Live lists in display order.
    public var liveListIDs: [ObjectID] { orderedListIDs.filter { lists[$0]?.deleted == false } }

    /// How many items are live (not deleted), counted in place.
    public var liveItemCount: Int { items.count(where: { !$0.deleted }) }

    public func itemIDs(in list: ObjectID, completed: Bool) -> [ObjectID] {
        guard let record = lists[list] else { return [] }
        var out: [ObjectID] = []
        var cursor = completed ? record.completedHead : record.pendingHead
        // Bounded and checked like `orderedListIDs`.
        while let id = cursor, let item = items[id], out.count < items.count {
            out.append(id)
            cursor = item.next
        }
        return out
    }

    /// Calls `body` with each item of a section in display order and its record in place (not copied out:
    /// `show --json` of 100,000 items). Walks like `itemIDs`: only records that exist, at most once each.
    public func forEachItem(
        in list: ObjectID, completed: Bool, _ body: (ObjectID, borrowing ItemRecord) throws -> Void
    ) rethrows {
        guard let record = lists[list] else { return }
        var cursor = completed ? record.completedHead : record.pendingHead
        var visited = 0
        while let id = cursor, visited < items.count {
            guard let next = try items.withRecord(id, { item in
                try body(id, item)
                return item.next
            }) else { return }
            cursor = next
            visited += 1
        }
    }

    // MARK: List order

    mutating func unlinkList(_ id: ObjectID) {
        guard let record = lists[id] else { return }
        if let previous = record.previous {
            lists[previous]!.next = record.next
            touchList(previous)
        } else {
            listHead = record.next
        }
        if let next = record.next {
            lists[next]!.previous = record.previous
            touchList(next)
        } else {
            listTail = record.previous
        }
        lists[id]!.previous = nil
        lists[id]!.next = nil
        touchList(id)
    }

    /// Links an unlinked list at `position`; `after(X)` with X missing, deleted or itself means top.
    mutating func linkList(_ id: ObjectID, at position: Position) {
        var anchor: ObjectID?
        switch position {
        case .top: anchor = nil
        case .bottom: anchor = listTail
        case let .after(other):
            anchor = (other != id && lists[other]?.deleted == false) ? other : nil
        }
        let next = anchor.map { lists[$0]!.next } ?? listHead
        lists[id]!.previous = anchor
        lists[id]!.next = next
        if let anchor {
            lists[anchor]!.next = id
            touchList(anchor)
        } else {
            listHead = id
        }
        if let next {
            lists[next]!.previous = id
            touchList(next)
        } else {
            listTail = id
        }
        touchList(id)
    }

    // MARK: Sections

    mutating func unlinkItem(_ id: ObjectID) {
        guard let record = items[id] else { return }
        let list = record.list
        if let previous = record.previous {
            items[previous]!.next = record.next
            touchItem(previous)
        } else if record.completed {
            lists[list]!.completedHead = record.next
            touchList(list)
        } else {
            lists[list]!.pendingHead = record.next
            touchList(list)
        }
        if let next = record.next {
            items[next]!.previous = record.previous
            touchItem(next)
        } else if record.completed {
            lists[list]!.completedTail = record.previous
            touchList(list)
        } else {
            lists[list]!.pendingTail = record.previous
            touchList(list)
        }
        items[id]!.previous = nil
        items[id]!.next = nil
        touchItem(id)
    }

    /// Links an unlinked item into the section its record names (`list`, `completed`). `after(X)` where X
    /// is not a live item of that same section falls back to the top.
    mutating func linkItem(_ id: ObjectID, at position: Position) {
        let record = items[id]!
        let list = record.list
        var anchor: ObjectID?
        switch position {
        case .top: anchor = nil
        case .bottom: anchor = record.completed ? lists[list]!.completedTail : lists[list]!.pendingTail
        case let .after(other):
            if other != id, let candidate = items[other], !candidate.deleted, candidate.list == list,
                candidate.completed == record.completed
            {
                anchor = other
            }
        }
        let head = record.completed ? lists[list]!.completedHead : lists[list]!.pendingHead
        let next = anchor.map { items[$0]!.next } ?? head
        items[id]!.previous = anchor
        items[id]!.next = next
        if let anchor {
            items[anchor]!.next = id
            touchItem(anchor)
        } else if record.completed {
            lists[list]!.completedHead = id
            touchList(list)
        } else {
            lists[list]!.pendingHead = id
            touchList(list)
        }
        if let next {
            items[next]!.previous = id
            touchItem(next)
        } else if record.completed {
            lists[list]!.completedTail = id
            touchList(list)
        } else {
            lists[list]!.pendingTail = id
            touchList(list)
        }
        touchItem(id)
    }

    /// Live items of a list, both sections.
    public func liveItems(of list: ObjectID) -> [ObjectID] {
        itemIDs(in: list, completed: false) + itemIDs(in: list, completed: true)
    }
}
