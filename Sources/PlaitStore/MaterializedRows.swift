import Foundation
import GRDB
import GRDBSQLite
import PlaitCore

/// The lists domain's materialized state as rows: one per list and per item, mirroring the records
/// (links included), so the CLI reads the state without replaying and a change rewrites only what it touched.
enum MaterializedRows {
    /// The state the rows hold, checked (`ListsState.checkConsistency`) before anyone walks its links. Throws
    /// `StoreError.damagedDerivedState` for a row that does not decode or links that do not hold together, and
    /// SQLite's error for a page it cannot read; the caller rebuilds from the changes (DESIGN §10).
    static func load(_ db: Database) throws -> ListsState {
        var lists: [ObjectID: ListRecord] = [:]
        var items = RecordTable<ItemRecord>()
        let listRows = try db.makeStatement(
            sql: """
                SELECT id, title, color, deleted, stamp_lamport, stamp_tl, stamp_seq, prev, next,
                pending_head, pending_tail, completed_head, completed_tail FROM lists
                """)
        var handle = listRows.sqliteStatement
        while try step(handle) {
            let id = try requiredID(handle, 0, "a list row")
            guard lists[id] == nil else { throw StoreError.damagedDerivedState("two rows for list \(id)") }
            lists[id] = ListRecord(
                title: text(handle, 1) ?? "", color: text(handle, 2), deleted: sqlite3_column_int64(handle, 3) != 0,
                stamp: key(handle, 4), previous: try objectID(handle, 7), next: try objectID(handle, 8),
                pendingHead: try objectID(handle, 9), pendingTail: try objectID(handle, 10),
                completedHead: try objectID(handle, 11), completedTail: try objectID(handle, 12))
        }
        let itemRows = try db.makeStatement(
            sql: """
                SELECT id, list, text, completed, deleted, placed_tl, placed_seq, stamp_lamport, stamp_tl,
                stamp_seq, prev, next FROM items
                """)
        handle = itemRows.sqliteStatement
        while try step(handle) {
            let id = try requiredID(handle, 0, "an item row")
            let added = items.insertNew(
                id,
                ItemRecord(
                    list: try requiredID(handle, 1, "item \(id)"), text: text(handle, 2) ?? "",
                    completed: sqlite3_column_int64(handle, 3) != 0, deleted: sqlite3_column_int64(handle, 4) != 0,
                    placedBy: ChangeRef(
                        timeline: TimelineID(timelineFromColumn(sqlite3_column_int64(handle, 5))),
                        seq: UInt64(bitPattern: sqlite3_column_int64(handle, 6))),
                    stamp: key(handle, 7), previous: try objectID(handle, 10), next: try objectID(handle, 11)))
            guard added else { throw StoreError.damagedDerivedState("two rows for item \(id)") }
        }
        let head: Data? = try Meta.get(db, .listHead)
        let tail: Data? = try Meta.get(db, .listTail)
        let state: ListsState
        do {
            state = ListsState(
                lists: lists, items: items, listHead: try head.map { try ObjectID(bytes: $0) },
                listTail: try tail.map { try ObjectID(bytes: $0) })
            try state.checkConsistency()
        } catch let error as CoreError {
            if case let .inconsistentState(problem) = error { throw StoreError.damagedDerivedState(problem) }
            throw StoreError.damagedDerivedState("the list order's ends do not decode")
        }
        return state
    }

    /// Writes the rows of the records `state` marks changed, and forgets the marks.
    static func save(_ state: inout ListsState, _ db: Database) throws {
        var changed = state.takeChanges()
        // Sorted in place, where the array is not shared: sorted inside `save` below, as its parameter, it was
        // copied (1.6 MiB after a catch-up of 100,000 items, at the peak of its memory).
        changed.items.sort()
        try save(state, lists: changed.lists, items: changed.items, db)
    }

    /// Writes the rows of `lists` and `items` (IDs without repeats, in ascending order) as `state` holds them; an
    /// ID it does not hold is skipped.
    static func save(_ state: ListsState, lists: Set<ObjectID>, items: [ObjectID], _ db: Database) throws {
        if !lists.isEmpty {
            let statement = try db.cachedStatement(
                sql: """
                    INSERT OR REPLACE INTO lists (id, title, color, deleted, stamp_lamport, stamp_tl, stamp_seq,
                    prev, next, pending_head, pending_tail, completed_head, completed_tail)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """)
            let handle = statement.sqliteStatement
            for id in lists.sorted() {
                guard let list = state.lists[id] else { continue }
                sqlite3_reset(handle)
                bind(handle, 1, id)
                bind(handle, 2, list.title)
                bind(handle, 3, list.color)
                sqlite3_bind_int64(handle, 4, list.deleted ? 1 : 0)
                bind(handle, 5, list.stamp)
                bind(handle, 8, list.previous)
                bind(handle, 9, list.next)
                bind(handle, 10, list.pendingHead)
                bind(handle, 11, list.pendingTail)
                bind(handle, 12, list.completedHead)
                bind(handle, 13, list.completedTail)
                try done(handle)
            }
        }
        if !items.isEmpty {
            let statement = try db.cachedStatement(
                sql: """
                    INSERT OR REPLACE INTO items (id, list, text, completed, deleted, placed_tl, placed_seq,
                    stamp_lamport, stamp_tl, stamp_seq, prev, next) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """)
            let handle = statement.sqliteStatement
            // In key order (callers sort `items`): the rows' primary keys are random IDs, and rows written in hash
            // order land on random pages of the table, which spill from SQLite's cache and are read back (after a
            // catch-up, 100,000 rows cost more than the changes). In order, each page is filled once.
            for id in items {
                // Bound from the record in place (a copy retained and released its text).
                try state.items.withRecord(id) { item in
                    sqlite3_reset(handle)
                    bind(handle, 1, id)
                    bind(handle, 2, item.list)
                    bind(handle, 3, item.textBytes)
                    sqlite3_bind_int64(handle, 4, item.completed ? 1 : 0)
                    sqlite3_bind_int64(handle, 5, item.deleted ? 1 : 0)
                    sqlite3_bind_int64(handle, 6, timelineColumn(item.placedBy.timeline.rawValue))
                    sqlite3_bind_int64(handle, 7, Int64(bitPattern: item.placedBy.seq))
                    bind(handle, 8, item.stamp)
                    bind(handle, 11, item.previous)
                    bind(handle, 12, item.next)
                    try done(handle)
                }
            }
        }
        try Meta.set(db, .listHead, state.listHead.map { Data($0.bytes) })
        try Meta.set(db, .listTail, state.listTail.map { Data($0.bytes) })
    }

    /// Replaces every row (after a full replay or a baseline swap).
    static func replaceAll(_ state: inout ListsState, _ db: Database) throws {
        _ = state.takeChanges()
        try db.execute(sql: "DELETE FROM lists; DELETE FROM items")
        var items = state.items.keys
        items.sort()
        try save(state, lists: Set(state.lists.keys), items: items, db)
    }

    // MARK: C API helpers

    static func step(_ handle: OpaquePointer) throws -> Bool {
        let code = sqlite3_step(handle)
        if code == SQLITE_ROW { return true }
        sqlite3_reset(handle)
        if code == SQLITE_DONE { return false }
        throw StoreDiagnosis.stepError(code, handle)
    }

    static func done(_ handle: OpaquePointer) throws {
        let code = sqlite3_step(handle)
        guard code == SQLITE_DONE else {
            let error = StoreDiagnosis.stepError(code, handle)
            sqlite3_reset(handle)
            throw error
        }
    }

    static func objectID(_ handle: OpaquePointer, _ column: Int32) throws -> ObjectID? {
        guard sqlite3_column_type(handle, column) != SQLITE_NULL else { return nil }
        let count = Int(sqlite3_column_bytes(handle, column))
        guard count == 16, let pointer = sqlite3_column_blob(handle, column) else {
            throw StoreError.damagedDerivedState("a materialized row holds an ID of \(count) bytes")
        }
        return ObjectID(raw: UnsafeRawBufferPointer(start: pointer, count: 16))
    }

    /// A column that must hold an ID (NOT NULL in the schema, but rows read back can be damaged).
    static func requiredID(_ handle: OpaquePointer, _ column: Int32, _ what: @autoclosure () -> String) throws
        -> ObjectID
    {
        guard let id = try objectID(handle, column) else {
            throw StoreError.damagedDerivedState("\(what()) has no ID where one is required")
        }
        return id
    }

    static func text(_ handle: OpaquePointer, _ column: Int32) -> String? {
        guard sqlite3_column_type(handle, column) != SQLITE_NULL, let pointer = sqlite3_column_text(handle, column)
        else { return nil }
        return String(
            decoding: UnsafeBufferPointer(start: pointer, count: Int(sqlite3_column_bytes(handle, column))),
            as: UTF8.self)
    }

    static func key(_ handle: OpaquePointer, _ column: Int32) -> OrderKey {
        OrderKey(
            lamport: UInt64(bitPattern: sqlite3_column_int64(handle, column)),
            timeline: TimelineID(timelineFromColumn(sqlite3_column_int64(handle, column + 1))),
            seq: UInt64(bitPattern: sqlite3_column_int64(handle, column + 2)))
    }

    static func bind(_ handle: OpaquePointer, _ index: Int32, _ id: ObjectID?) {
        guard let id else {
            sqlite3_bind_null(handle, index)
            return
        }
        // Big-endian, as `ObjectID.bytes`, without allocating an array per column.
        var words = (id.high.bigEndian, id.low.bigEndian)
        withUnsafeBytes(of: &words) { _ = sqlite3_bind_blob(handle, index, $0.baseAddress, 16, sqliteTransient) }
    }

    /// An item's text from its bytes in place (SQLite copies them).
    static func bind(_ handle: OpaquePointer, _ index: Int32, _ text: ItemText) {
        text.withUTF8 { bindUTF8(handle, index, $0) }
    }

    static func bind(_ handle: OpaquePointer, _ index: Int32, _ text: String?) {
        guard let text else {
            sqlite3_bind_null(handle, index)
            return
        }
        // A native string's UTF-8 in place (SQLite copies it): no C string built per column.
        var native = text
        native.withUTF8 { bindUTF8(handle, index, $0) }
    }

    private static func bindUTF8(_ handle: OpaquePointer, _ index: Int32, _ buffer: UnsafeBufferPointer<UInt8>) {
        if let base = buffer.baseAddress {
            let characters = UnsafeRawPointer(base).assumingMemoryBound(to: CChar.self)
            _ = sqlite3_bind_text(handle, index, characters, Int32(buffer.count), sqliteTransient)
        } else {
            // Empty: a null pointer would bind NULL, not "".
            _ = sqlite3_bind_text(handle, index, "", 0, sqliteTransient)
        }
    }

    static func bind(_ handle: OpaquePointer, _ index: Int32, _ key: OrderKey) {
        // Bit patterns, as `key(_:_:)` reads them: a value read back is written back, never trapped on.
        sqlite3_bind_int64(handle, index, Int64(bitPattern: key.lamport))
        sqlite3_bind_int64(handle, index + 1, timelineColumn(key.timeline.rawValue))
        sqlite3_bind_int64(handle, index + 2, Int64(bitPattern: key.seq))
    }
}
