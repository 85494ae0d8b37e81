import Foundation
import GRDB
import GRDBSQLite
import PlaitCore

/// The hot paths over the changes table, on SQLite's C API through GRDB's prepared statements: a full replay
/// reads a million rows, and a pulled batch inserts thousands in one transaction.
enum ChangeRows {
    /// The columns of a stored change, in the order `scan` reads them: its hashed fields (the witness too: it
    /// is hashed when present), then the signature beside them.
    static let storedColumns =
        "tl, seq, lamport, kind, version, wall, prev, payload, witness_tl, witness_seq, signature"

    /// `storedColumns` as `db` can select them: a store not yet migrated to signed timelines (it is migrated
    /// on its first write, and reading writes nothing) has no witnesses or signatures, read as NULL.
    static func columns(_ db: Database) throws -> String {
        let names = Set(try db.columns(in: "changes").map(\.name))
        return (names.contains("signature") ? storedColumns : "tl, seq, lamport, kind, version, wall, prev, payload, NULL, NULL, NULL")
            + (names.contains("origin_tl") ? ", origin_tl, origin_seq" : ", NULL, NULL")
    }

    /// Where the author wrote a renamed change (columns 11 and 12, `origin_tl`, `origin_seq`), nil when they are
    /// NULL or not selected.
    @inline(__always) static func origin(_ handle: OpaquePointer) -> ChangeRef? {
        guard sqlite3_column_count(handle) > 12, sqlite3_column_type(handle, 11) != SQLITE_NULL else { return nil }
        return ChangeRef(
            timeline: TimelineID(timelineFromColumn(sqlite3_column_int64(handle, 11))),
            seq: UInt64(bitPattern: sqlite3_column_int64(handle, 12)))
    }

    /// Steps `statement` (selecting `columns`) and hands each change to `body`. Without `withChain` the
    /// previous hash is left as zeros (replay does not need it) to save an allocation per row.
    static func scan(_ statement: Statement, withChain: Bool, _ body: (Change) throws -> Void) throws {
        try scanSigned(statement, withChain: withChain) { change, _ in try body(change) }
    }

    /// `scan`, handing each change with its stored signature (nil when it has none).
    static func scanSigned(
        _ statement: Statement, withChain: Bool, _ body: (Change, [UInt8]?) throws -> Void
    ) throws {
        let handle = statement.sqliteStatement
        var kinds = KindCache()
        defer { sqlite3_reset(handle) }
        while true {
            let code = sqlite3_step(handle)
            if code == SQLITE_DONE { break }
            guard code == SQLITE_ROW else { throw StoreDiagnosis.stepError(code, handle) }
            let timeline = TimelineID(timelineFromColumn(sqlite3_column_int64(handle, 0)))
            let seq = UInt64(bitPattern: sqlite3_column_int64(handle, 1))
            let lamport = UInt64(bitPattern: sqlite3_column_int64(handle, 2))
            let kind = kinds.string(
                sqlite3_column_text(handle, 3), count: Int(sqlite3_column_bytes(handle, 3)))
            let version = UInt32(truncatingIfNeeded: sqlite3_column_int64(handle, 4))
            let wall = sqlite3_column_int64(handle, 5)
            let previous = withChain ? blob(handle, 6) : Change.zeroHash
            let payload = blob(handle, 7)
            let signature = sqlite3_column_type(handle, 10) == SQLITE_NULL ? nil : blob(handle, 10)
            try body(
                Change(
                    timeline: timeline, seq: seq, lamport: lamport, previousHash: previous, kind: kind,
                    version: version, wallTime: wall, payload: payload, witness: witness(handle),
                    origin: origin(handle)),
                signature)
        }
    }

    /// The witness in columns 8 and 9 (`witness_tl`, `witness_seq`), nil when they are NULL.
    @inline(__always) static func witness(_ handle: OpaquePointer) -> ChangeRef? {
        guard sqlite3_column_type(handle, 8) != SQLITE_NULL else { return nil }
        return ChangeRef(
            timeline: TimelineID(timelineFromColumn(sqlite3_column_int64(handle, 8))),
            seq: UInt64(bitPattern: sqlite3_column_int64(handle, 9)))
    }

    @inline(__always) static func blob(_ handle: OpaquePointer, _ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(handle, column))
        guard count > 0, let pointer = sqlite3_column_blob(handle, column) else { return [] }
        return [UInt8](UnsafeRawBufferPointer(start: pointer, count: count))
    }

    /// Inserts changes with one prepared statement (the caller holds the transaction), without signatures.
    static func insert(_ changes: [Change], _ db: Database) throws {
        try insert(changes, signatures: { _ in nil }, db)
    }

    /// Inserts changes with their signatures (only verified ones: a receiver stores no other).
    static func insert(_ changes: [EncodedChange], _ db: Database) throws {
        try insert(changes.map { $0.change }, signatures: { changes[$0].signature }, db)
    }

    /// Inserts changes the intake accepted, each with the signature it verified (nil: none).
    static func insert(_ accepted: [Intake<ListsDomain>.Accepted], _ db: Database) throws {
        try insert(accepted.map { $0.change }, signatures: { accepted[$0].signature }, db)
    }

    /// Inserts changes; `signatures(i)` is the signature to store with `changes[i]` (nil: none).
    static func insert(_ changes: [Change], signatures: (Int) -> [UInt8]?, _ db: Database) throws {
        let statement = try db.cachedStatement(
            sql: "INSERT INTO changes (\(storedColumns), origin_tl, origin_seq) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
        let handle = statement.sqliteStatement
        for (index, change) in changes.enumerated() {
            sqlite3_reset(handle)
            sqlite3_bind_int64(handle, 1, timelineColumn(change.timeline.rawValue))
            sqlite3_bind_int64(handle, 2, Int64(change.seq))
            sqlite3_bind_int64(handle, 3, Int64(change.lamport))
            change.kind.utf8CString.withUnsafeBufferPointer { text in
                _ = sqlite3_bind_text(handle, 4, text.baseAddress, Int32(text.count - 1), sqliteTransient)
            }
            sqlite3_bind_int64(handle, 5, Int64(change.version))
            sqlite3_bind_int64(handle, 6, change.wallTime)
            change.previousHash.withUnsafeBytes { bytes in
                _ = sqlite3_bind_blob(handle, 7, bytes.baseAddress, Int32(bytes.count), sqliteTransient)
            }
            change.payload.withUnsafeBytes { bytes in
                // A zero-length blob must still be a blob, not NULL.
                _ = bytes.count == 0
                    ? sqlite3_bind_zeroblob(handle, 8, 0)
                    : sqlite3_bind_blob(handle, 8, bytes.baseAddress, Int32(bytes.count), sqliteTransient)
            }
            if let witness = change.witness {
                sqlite3_bind_int64(handle, 9, timelineColumn(witness.timeline.rawValue))
                sqlite3_bind_int64(handle, 10, Int64(bitPattern: witness.seq))
            } else {
                sqlite3_bind_null(handle, 9)
                sqlite3_bind_null(handle, 10)
            }
            if let signature = signatures(index) {
                signature.withUnsafeBytes { bytes in
                    _ = sqlite3_bind_blob(handle, 11, bytes.baseAddress, Int32(bytes.count), sqliteTransient)
                }
            } else {
                sqlite3_bind_null(handle, 11)
            }
            if let origin = change.origin {
                sqlite3_bind_int64(handle, 12, timelineColumn(origin.timeline.rawValue))
                sqlite3_bind_int64(handle, 13, Int64(bitPattern: origin.seq))
            } else {
                sqlite3_bind_null(handle, 12)
                sqlite3_bind_null(handle, 13)
            }
            let code = sqlite3_step(handle)
            guard code == SQLITE_DONE else {
                let error = StoreDiagnosis.stepError(code, handle, doing: "inserting change \(change.ref)")
                sqlite3_reset(handle)
                throw error
            }
        }
        sqlite3_reset(handle)
        sqlite3_clear_bindings(handle)
    }
}

/// SQLite's SQLITE_TRANSIENT (a macro Swift cannot import): copy the bound bytes.
let sqliteTransient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// Kinds repeat: build each String once.
private struct KindCache {
    var entries: [([UInt8], String)] = []

    mutating func string(_ pointer: UnsafePointer<UInt8>?, count: Int) -> String {
        guard let pointer, count > 0 else { return "" }
        let bytes = UnsafeBufferPointer(start: pointer, count: count)
        for (key, value) in entries where key.count == count && key.elementsEqual(bytes) { return value }
        let value = String(decoding: bytes, as: UTF8.self)
        if entries.count < 64 { entries.append((Array(bytes), value)) }
        return value
    }
}

/// The store as the engine's change source: stored changes after a key, in replay order.
struct StoredChanges: ChangeSource {
    let db: Database

    func forEachChange(after key: OrderKey, _ body: (Change) throws -> Void) throws {
        let statement = try db.cachedStatement(
            sql: """
                SELECT \(try ChangeRows.columns(db)) FROM changes WHERE (lamport, tl, seq) > (?, ?, ?)
                ORDER BY lamport, tl, seq
                """)
        let handle = statement.sqliteStatement
        sqlite3_reset(handle)
        sqlite3_bind_int64(handle, 1, Int64(bitPattern: key.lamport))
        sqlite3_bind_int64(handle, 2, timelineColumn(key.timeline.rawValue))
        sqlite3_bind_int64(handle, 3, Int64(bitPattern: key.seq))
        try ChangeRows.scanBound(handle, after: key, body)
    }
}

extension ChangeRows {
    /// Like `scan`, for a statement whose parameters are already bound through the C API.
    /// Rows must come in strictly increasing replay order after `after`: replay traps on anything else, and a
    /// damaged page can hand back rows out of order (or with negative numbers), so both are checked here.
    static func scanBound(_ handle: OpaquePointer, after: OrderKey = .zero, _ body: (Change) throws -> Void) throws {
        var kinds = KindCache()
        var last = after
        defer { sqlite3_reset(handle) }
        while true {
            let code = sqlite3_step(handle)
            if code == SQLITE_DONE { break }
            guard code == SQLITE_ROW else { throw StoreDiagnosis.stepError(code, handle) }
            let kind = kinds.string(sqlite3_column_text(handle, 3), count: Int(sqlite3_column_bytes(handle, 3)))
            let change = Change(
                timeline: TimelineID(timelineFromColumn(sqlite3_column_int64(handle, 0))),
                seq: UInt64(bitPattern: sqlite3_column_int64(handle, 1)),
                lamport: UInt64(bitPattern: sqlite3_column_int64(handle, 2)),
                previousHash: Change.zeroHash, kind: kind,
                version: UInt32(truncatingIfNeeded: sqlite3_column_int64(handle, 4)),
                wallTime: sqlite3_column_int64(handle, 5), payload: blob(handle, 7), witness: witness(handle))
            guard change.orderKey > last else {
                throw StoreError.inconsistent("stored change \(change.ref) is out of replay order (a damaged page)")
            }
            last = change.orderKey
            try body(change)
        }
    }
}

extension StoredChanges {
    /// Every stored change in replay order, read on a second thread while `body` applies them on this one:
    /// decoding rows and replaying them overlap on two cores. The connection is used by one thread at a time
    /// (this one waits for chunks and touches no SQLite while the reader runs).
    func forEachChangePipelined(_ body: (Change) throws -> Void) throws {
        let statement = try db.makeStatement(
            sql: "SELECT \(try ChangeRows.columns(db)) FROM changes ORDER BY lamport, tl, seq")
        let handle = StatementHandle(statement.sqliteStatement)
        let chunks = ChunkQueue()
        let reader = Thread {
            var chunk: [Change] = []
            chunk.reserveCapacity(ChunkQueue.chunkSize)
            do {
                try ChangeRows.scanBound(handle.pointer) { change in
                    chunk.append(change)
                    if chunk.count == ChunkQueue.chunkSize {
                        chunks.put(chunk)
                        chunk.removeAll(keepingCapacity: true)
                    }
                }
                chunks.put(chunk)
                chunks.finish(nil)
            } catch {
                chunks.finish(error)
            }
        }
        reader.stackSize = 1 << 20
        reader.start()
        var failure: Error?
        while let chunk = chunks.take() {
            if failure != nil { continue }  // drain, so the reader never blocks forever
            do {
                for change in chunk { try body(change) }
            } catch {
                failure = error
                chunks.cancel()
            }
        }
        if let failure { throw failure }
        if let error = chunks.error { throw error }
    }
}

/// A statement pointer handed to the reader thread; only one thread uses it at a time.
private final class StatementHandle: @unchecked Sendable {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
}

/// A bounded queue of change chunks between the reader thread and the replaying one.
private final class ChunkQueue: @unchecked Sendable {
    static let chunkSize = 4_096
    private let condition = NSCondition()
    private var chunks: [[Change]] = []
    private var finished = false
    private var cancelled = false
    private(set) var error: Error?

    func put(_ chunk: [Change]) {
        condition.lock()
        while chunks.count >= 4 && !cancelled { condition.wait() }
        if !cancelled { chunks.append(chunk) }
        condition.broadcast()
        condition.unlock()
    }

    func finish(_ error: Error?) {
        condition.lock()
        self.error = error
        finished = true
        condition.broadcast()
        condition.unlock()
    }

    func cancel() {
        condition.lock()
        cancelled = true
        chunks.removeAll()
        condition.broadcast()
        condition.unlock()
    }

    /// The next chunk, or nil once the reader finished and everything was taken.
    func take() -> [Change]? {
        condition.lock()
        defer { condition.unlock() }
        while chunks.isEmpty && !finished { condition.wait() }
        guard !chunks.isEmpty else { return nil }
        let chunk = chunks.removeFirst()
        condition.broadcast()
        return chunk
    }
}
