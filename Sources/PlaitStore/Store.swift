import CFileIdentity
import CSQLiteConfig
import Foundation
import GRDB
import GRDBSQLite
import PlaitCore
import Synchronization

/// One SQLite file per device home, in WAL mode so the CLI and the agent use it at once.
///
/// The store holds the changes (contiguous prefixes of timelines), the timeline heads (the summary), the
/// baseline, checkpoints and the materialized state. Writes go through `Replica`, one transaction each.
public final class Store: @unchecked Sendable {
    public let path: String
    /// Read transactions go through read-only connections: a command that only reads writes nothing to the
    /// store's files (opening a pool for writing switches the file to WAL mode and may create a table to
    /// make a WAL file, which rewrites the schema cookie).
    let readers: DatabasePool
    private let synchronousFull: Bool
    let busyTimeout: Double
    /// Opened on the first write; runs the migrations still pending then.
    private var writer: DatabasePool?
    private var migrationsPending: Bool
    private let writerLock = NSLock()
    /// Transactions run through this store (reads, writes, commit probes): a test checks an idle agent runs none.
    let transactionCounter = Atomic<Int>(0)

    /// How many transactions this store ran (reads, writes and `CommitProbe` checks), since it was opened.
    public var transactions: Int { transactionCounter.load(ordering: .relaxed) }

    /// How long a writer waits for another writer (another process or thread) before `busy`.
    public static let defaultBusyTimeout = 10.0

    private init(path: String, readers: DatabasePool, writer: DatabasePool?, migrationsPending: Bool,
        synchronousFull: Bool, busyTimeout: Double)
    {
        // Every hash this process computes from here on (chains, digests) goes through OpenSSL's SHA-256.
        FastSHA256.install()
        self.path = path
        self.readers = readers
        self.writer = writer
        self.migrationsPending = migrationsPending
        self.synchronousFull = synchronousFull
        self.busyTimeout = busyTimeout
    }

    /// Process-wide SQLite settings, made once before the first connection opens (every connection of the
    /// store's goes through `configuration`, which runs this first): memory statistics off. With them on, every
    /// allocation SQLite makes takes one process-wide mutex; perf of two agents in one process exchanging edits
    /// showed it behind most of the threads' lock waits. A process that opened SQLite before keeps its setting.
    static let sqliteSetUp: Void = { _ = plait_sqlite_disable_memstatus() }()

    static func configuration(synchronousFull: Bool, busyTimeout: Double, readonly: Bool = false) -> Configuration {
        _ = sqliteSetUp
        var configuration = Configuration()
        configuration.readonly = readonly
        // Every connection waits for another process's lock (a writer, a closing connection's checkpoint,
        // WAL recovery) instead of failing at once. `write` begins IMMEDIATE, so a writer never has to
        // upgrade a read snapshot, a wait no busy handler can retry.
        configuration.busyMode = .timeout(busyTimeout)
        configuration.prepareDatabase { db in
            try db.execute(sql: synchronousFull ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL")
        }
        return configuration
    }

    /// The pool that writes; GRDB's WAL set-up runs `synchronous = NORMAL` after `prepareDatabase`, so the
    /// configured level is set again here.
    static func openWriter(path: String, synchronousFull: Bool, busyTimeout: Double) throws -> DatabasePool {
        let pool = try DatabasePool(
            path: path, configuration: configuration(synchronousFull: synchronousFull, busyTimeout: busyTimeout))
        try pool.writeWithoutTransaction { db in
            try db.execute(sql: synchronousFull ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL")
        }
        return pool
    }

    /// Creates a new store with its first timeline. Refuses an existing file.
    public static func create(
        at path: String, timeline: TimelineID, synchronousFull: Bool = true, busyTimeout: Double = defaultBusyTimeout
    ) throws -> Store {
        guard !FileManager.default.fileExists(atPath: path) else { throw StoreError.alreadyExists(path: path) }
        do {
            let pool = try openWriter(path: path, synchronousFull: synchronousFull, busyTimeout: busyTimeout)
            try Schema.migrator.migrate(pool)
            try pool.write { db in
                try Meta.set(db, .ownTimeline, Int64(bitPattern: timeline.rawValue))
                try Meta.set(db, .generation, 1)
                try recordFile(db, path: path)
                try Meta.set(db, .formatNote, "plait store; see plait.proto and Sources/PlaitStore/Schema.swift")
            }
            let readers = try DatabasePool(
                path: path,
                configuration: configuration(
                    synchronousFull: synchronousFull, busyTimeout: busyTimeout, readonly: true))
            return Store(
                path: path, readers: readers, writer: pool, migrationsPending: false, synchronousFull: synchronousFull,
                busyTimeout: busyTimeout)
        } catch {
            throw StoreDiagnosis.diagnose(error, path: path, busyTimeout: busyTimeout)
        }
    }

    /// Creates a new store on a signed timeline (DESIGN §11): its ID derives from `signer`'s certificate and a
    /// fresh nonce, and its first change, `timeline.begin`, carries both and is signed, in the same transaction
    /// as nothing else. Refuses an existing file.
    public static func create(
        at path: String, signer: any ChangeSigner, synchronousFull: Bool = true,
        busyTimeout: Double = defaultBusyTimeout
    ) throws -> Store {
        // The placeholder timeline never holds a change: the first edit moves the store onto a signed one.
        let store = try create(
            at: path, timeline: TimelineID.random(), synchronousFull: synchronousFull, busyTimeout: busyTimeout)
        do {
            try Replica(store: store, signer: signer).edit { _ in }
        } catch {
            try? store.readers.close()
            try? store.writer?.close()
            for file in [path, path + "-wal", path + "-shm"] { try? FileManager.default.removeItem(atPath: file) }
            throw error
        }
        return store
    }

    /// Opens an existing store; refuses a missing file, a damaged one, and one written by a newer plait.
    /// Opening writes nothing: the store is opened for writing (and migrated) on the first write.
    public static func open(
        at path: String, synchronousFull: Bool = true, busyTimeout: Double = defaultBusyTimeout
    ) throws -> Store {
        let pending = try precheck(path, busyTimeout: busyTimeout)
        do {
            let readers = try DatabasePool(
                path: StoreDiagnosis.readLocation(path),
                configuration: configuration(
                    synchronousFull: synchronousFull, busyTimeout: busyTimeout, readonly: true))
            return Store(
                path: path, readers: readers, writer: nil, migrationsPending: pending, synchronousFull: synchronousFull,
                busyTimeout: busyTimeout)
        } catch {
            throw StoreDiagnosis.diagnose(error, path: path, busyTimeout: busyTimeout)
        }
    }

    /// The writing pool, opened (and the store migrated) on first use.
    func writingPool() throws -> DatabasePool {
        var copied = false
        let pool = try writerLock.withLock { () throws -> DatabasePool in
            if let writer { return writer }
            // SQLite creates a missing file when it opens one for writing: a store deleted under a running agent
            // came back empty, and the home was then refused as "not a plait store" (H8). It is never created here.
            guard FileManager.default.fileExists(atPath: path) else { throw StoreError.deletedStore(path: path) }
            let pool = try Self.openWriter(path: path, synchronousFull: synchronousFull, busyTimeout: busyTimeout)
            if migrationsPending {
                try Schema.migrator.migrate(pool)
                migrationsPending = false
            }
            if let identity = Self.fileIdentity(of: path) { copied = try Self.noticeCopy(pool, identity: identity) }
            writer = pool
            if copied { noticed = true }
            return pool
        }
        // Called outside the lock: a handler may use the store.
        if copied, let handler = writerLock.withLock({ copyHandler }) { handler(Self.copyNotice) }
        return pool
    }

    /// Opens the store for writing now (migrating it, and noticing whether its file is a copy) rather than at the first
    /// write. A session reads the own timeline's state at its start: a copy must be noticed before (`noticeCopy`), or
    /// a peer holding the timeline beyond the head is taken for a restore that needs `plait rejoin`.
    public func openForWriting() throws {
        do {
            _ = try writingPool()
        } catch {
            throw StoreDiagnosis.diagnose(error, path: path, busyTimeout: busyTimeout)
        }
    }

    /// Whether this store's first write found its file to be a copy (`noticeCopy`): its own timeline was then marked
    /// to be left for a new one at the next edit.
    public var copyNoticed: Bool { writerLock.withLock { noticed } }
    private var noticed = false
    private var copyHandler: (@Sendable (String) -> Void)?

    /// What is said when a copy is noticed.
    public static let copyNotice =
        "this store's file is not the one it was last written in: the home was copied, or restored from a backup "
        + "by hand. Its timeline may have gone on where it was copied from, so this device goes on on a new timeline "
        + "from its next edit; what the other copy synced after the copy was made comes back from the peers, and what "
        + "it never synced is not here. If the home it was copied from is still in use, run `plait rejoin --new-key` "
        + "on one of the two"

    /// Calls `handler` with `copyNotice` when the first write finds the file to be a copy (at once, if it has).
    public func onCopyNoticed(_ handler: @escaping @Sendable (String) -> Void) {
        let already = writerLock.withLock {
            copyHandler = handler
            return noticed
        }
        if already { handler(Self.copyNotice) }
    }

    /// Filesystems whose inode numbers stay a file's own for its life, across mounts (`statfs`'s `f_type`): ext2–4,
    /// XFS, Btrfs, ZFS, F2FS, bcachefs, tmpfs, overlayfs. Elsewhere (FAT's numbers are made up at each lookup, FUSE's
    /// are the file system's to choose, NFS's may be reused) a copy is not looked for: a number that changed under an
    /// unchanged file would start a new timeline at every write.
    static let stableInodeFilesystems: Set<Int64> = [
        0xEF53, 0x5846_5342, 0x9123_683E, 0x2FC1_2FC1, 0xF2F5_2010, 0xCA45_1A4E, 0x0102_1994, 0x794C_7630,
    ]

    /// The identity of the file at `path`, when its filesystem keeps inode numbers (`stableInodeFilesystems`): its
    /// inode, and the time that inode was made where the filesystem keeps it ("INODE@SECONDS.NANOSECONDS"). The time
    /// tells a new file apart from the old one when it is given the number the old one freed: on ext4 here,
    /// `rm -rf home; cp -a backup home` gave the new `plait.db` the old one's inode number, and the tester's J2 script
    /// still diverged in 2 runs of 4 with the inode alone.
    public static func fileIdentity(of path: String) -> String? {
        guard stableInodeFilesystems.contains(plait_filesystem_type(path)) else { return nil }
        var inode: UInt64 = 0
        var seconds: Int64 = 0
        var nanoseconds: UInt32 = 0
        switch plait_file_identity(path, &inode, &seconds, &nanoseconds) {
        case 1: return "\(inode)@\(seconds).\(nanoseconds)"
        case 0: return "\(inode)"
        default: return nil
        }
    }

    /// A store remembers the identity of the file it is written in (`fileIdentity`). Another file is a copy: a
    /// backup put back by hand (`cp -a`), a home copied to another machine, one moved across filesystems. Its peers
    /// may hold later changes of its own timeline than it does (the original went on after the copy was made), and
    /// an edit made on it under the next number would fork that timeline; a fork whose point lies inside a device's
    /// baseline cannot be named alike by every device (bad-luck tester 2026-11-25-j, J2). So a copy's signed own
    /// timeline is left for a new one at its next edit, as `plait restore` does (`markRestored`): the original's later
    /// changes come from the peers as they are, and nothing is written at numbers they may hold. A store that never
    /// recorded its file (written before this build) records it now and is not taken for a copy. A copy that keeps
    /// the inode and its time (a filesystem snapshot's rollback or clone, a file copied over the store in place) is
    /// not noticed: a peer holding the timeline beyond its head shows it later, and a fork is resolved by renaming.
    /// Returns whether the file was found to be a copy whose timeline was marked.
    static func noticeCopy(_ pool: DatabasePool, identity: String) throws -> Bool {
        guard try pool.read({ db in try Meta.get(db, .storeFile) as String? }) != identity else { return false }
        // The record read again inside an IMMEDIATE transaction: another process opening the same copy at once may have
        // noticed it, and begun the new timeline, since (with the pre-check alone, 8 `plait add` started at once on a
        // copy began up to 5 new timelines: hostile tester 2026-11-25-k, K1).
        return try pool.writeWithoutTransaction { db in
            var marked = false
            try db.inTransaction(.immediate) {
                let recorded = try Meta.get(db, .storeFile) as String?
                guard recorded != identity else { return .commit }
                let same = recorded.map { Self.sameFile($0, identity) } ?? true
                // The same file read with a birth time where it was read without (or the reverse: a process whose
                // statx gives none) keeps the record that has one.
                if same, let recorded, recorded.contains("@"), !identity.contains("@") { return .commit }
                try Meta.set(db, .storeFile, identity)
                if !same, let own = try? ownTimeline(db), try certificate(db, of: own) != nil {
                    try Meta.set(db, .ownTimelineForkedAway, "1")
                    marked = true
                }
                return .commit
            }
            return marked
        }
    }

    /// Whether two identities (`fileIdentity`) name one file: the birth times match where both have one, the inodes
    /// otherwise. A birth time to the nanosecond is the file's own (a copy is born when it is made), while the inode
    /// number may change under the same file: overlayfs with its upper layer on another filesystem reports the lower
    /// file's number until a remount, then the upper one's (hostile tester 2026-11-25-k, K2: a second new timeline).
    static func sameFile(_ one: String, _ other: String) -> Bool {
        let (a, b) = (one.split(separator: "@"), other.split(separator: "@"))
        if a.count == 2, b.count == 2 { return a[1] == b[1] }
        return a.first == b.first
    }

    /// Records the identity of the store file at `path` as its own (a store just made, or a backup being put back by
    /// `plait restore`, which marks its timeline itself).
    static func recordFile(_ db: Database, path: String) throws {
        if let identity = fileIdentity(of: path) { try Meta.set(db, .storeFile, identity) }
    }

    /// What `plait doctor` reports about a store, read through a read-only connection that writes nothing.
    public struct Inspection: Sendable {
        /// SQLite's `PRAGMA integrity_check` lines: exactly `["ok"]` for a sound file.
        public var integrity: [String]
        public var changes: Int
        public var summary: Summary
    }

    /// Checks the store at `path` without writing to it: header, schema, `integrity_check`, and a count.
    public static func inspect(at path: String) throws -> Inspection {
        _ = try precheck(path, busyTimeout: defaultBusyTimeout)
        do {
            // Where reading the lists opens it: on a read-only mount the store is checked as `show` reads it.
            let queue = try DatabaseQueue(
                path: StoreDiagnosis.readLocation(path),
                configuration: configuration(synchronousFull: false, busyTimeout: defaultBusyTimeout, readonly: true))
            defer { try? queue.close() }
            return try queue.read { db in
                let integrity = try String.fetchAll(db, sql: "PRAGMA integrity_check")
                guard integrity == ["ok"] else { return Inspection(integrity: integrity, changes: 0, summary: Summary()) }
                return Inspection(
                    integrity: integrity, changes: try Int.fetchOne(db, sql: "SELECT count(*) FROM changes") ?? 0,
                    summary: try summary(db))
            }
        } catch {
            throw StoreDiagnosis.diagnose(error, path: path)
        }
    }

    /// Writes a copy of the store at `path` to `destination`, a file that must not exist: the whole database as one
    /// read transaction sees it (SQLite's `VACUUM INTO`), so writers may go on meanwhile and the copy is still one
    /// consistent moment — unlike a file copy of a store in WAL mode, which can tear between `plait.db` and its
    /// `-wal`. Reads through a read-only connection: nothing is written beside the store. The copy is synced to disk.
    /// A copy cut off (no space) is removed.
    public static func copy(at path: String, to destination: String) throws {
        _ = try precheck(path)
        do {
            let queue = try DatabaseQueue(
                path: StoreDiagnosis.readLocation(path),
                configuration: configuration(synchronousFull: false, busyTimeout: defaultBusyTimeout, readonly: true))
            defer { try? queue.close() }
            try queue.inDatabase { db in try db.execute(sql: "VACUUM INTO ?", arguments: [destination]) }
        } catch {
            try? FileManager.default.removeItem(atPath: destination)
            // Damage is the source's; space, permissions and the like are the destination's.
            if let failure = error as? DatabaseError, [.SQLITE_CORRUPT, .SQLITE_NOTADB].contains(failure.resultCode) {
                throw StoreDiagnosis.diagnose(error, path: path)
            }
            throw StoreDiagnosis.diagnose(error, path: destination)
        }
        let descriptor = Glibc.open(destination, O_RDONLY | O_CLOEXEC)
        defer { if descriptor >= 0 { close(descriptor) } }
        guard descriptor >= 0, fsync(descriptor) == 0 else {
            let code = errno
            try? FileManager.default.removeItem(atPath: destination)
            throw StoreError.io(path: destination, detail: String(cString: strerror(code)))
        }
    }

    /// Marks the store copy at `path` (a backup being put back, not yet in its home: no other process has it open)
    /// as one whose own timeline may have gone on past its head: its peers may hold later changes of it, made before
    /// the home was restored. A signed own timeline is left for a new one at the next edit, as when a baseline or a
    /// fork shows the same (DESIGN §11): the later changes are taken from peers as they come, and nothing more is
    /// written at numbers they may hold. Returns false, and marks nothing, for an unsigned own timeline (a store
    /// from before signed timelines): for that one a peer's later changes stop authoring until `plait rejoin`. The
    /// copy is switched to WAL mode either way.
    public static func markRestored(at path: String) throws -> Bool {
        do {
            let queue = try DatabaseQueue(path: path)
            defer { try? queue.close() }
            let marked = try queue.write { db in
                let own = try ownTimeline(db)
                // The file put in place is this one (renamed, not copied): it is the store's file from here on.
                try recordFile(db, path: path)
                guard try certificate(db, of: own) != nil else { return false }
                try Meta.set(db, .ownTimelineForkedAway, "1")
                return true
            }
            // A copy made by `VACUUM INTO` is in rollback-journal mode; a store is in WAL mode, where readers and a
            // writer do not wait for each other (closing the last connection removes the -wal and -shm again).
            try queue.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA journal_mode = WAL") }
            return marked
        } catch {
            throw StoreDiagnosis.diagnose(error, path: path)
        }
    }

    /// Whether the file at `path` holds nothing: no bytes, or a SQLite database of one page (its schema page) with
    /// schema cookie 0, that is with no table ever made, and no -wal bytes that could hold one. Such a store is
    /// what an interrupted `plait init` leaves, and `init` may replace it. Read from the file's header, without
    /// opening it with SQLite (which would make -wal and -shm files beside a store that is not empty).
    public static func isEmptyStore(at path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        let header = [UInt8](handle.readData(ofLength: 100))
        try? handle.close()
        if header.isEmpty { return true }
        guard header.count == 100, String(decoding: header.prefix(15), as: UTF8.self) == "SQLite format 3" else {
            return false
        }
        func bigEndian(_ offset: Int) -> UInt32 {
            header[offset..<(offset + 4)].reduce(0) { $0 << 8 | UInt32($1) }
        }
        let walBytes = (try? FileManager.default.attributesOfItem(atPath: path + "-wal")[.size] as? Int) ?? 0
        return bigEndian(28) <= 1 && bigEndian(40) == 0 && walBytes == 0
    }

    /// Refuses a missing file, one that is not SQLite or not a plait store, and one written by a newer plait,
    /// looking only through a read-only connection. Returns whether known migrations are still to run.
    @discardableResult
    static func precheck(_ path: String, busyTimeout: Double = defaultBusyTimeout) throws -> Bool {
        try StoreDiagnosis.checkReachable(path)
        // Look before opening in WAL mode (which writes): the header must be SQLite's.
        if let handle = FileHandle(forReadingAtPath: path) {
            let header = handle.readData(ofLength: 16)
            try? handle.close()
            // No bytes at all: a store whose creation was cut off (bad-luck tester 2026-11-25, H10). It holds nothing.
            if header.isEmpty { throw StoreError.emptyStore(path: path) }
            guard header.count == 16, String(decoding: header.prefix(15), as: UTF8.self) == "SQLite format 3" else {
                throw StoreError.corrupt(path: path, detail: "not a SQLite database")
            }
        }
        // Check through a read-only connection first: opening the pool switches the file to WAL mode and
        // writes, which must not happen to a foreign or newer file.
        let migrator = Schema.migrator
        do {
            let readOnly = configuration(synchronousFull: false, busyTimeout: busyTimeout, readonly: true)
            let queue = try DatabaseQueue(path: StoreDiagnosis.readLocation(path), configuration: readOnly)
            defer { try? queue.close() }
            let (hasMigrations, superseded, applied, all) = try queue.read { db in
                // No table at all (its -wal read too): nothing was ever stored in it. `init` cut off (H10), or a
                // store deleted under a running agent and made again by it (H8): plait's, and empty, not foreign.
                if try Int.fetchOne(db, sql: "SELECT count(*) FROM sqlite_master") == 0 {
                    throw StoreError.emptyStore(path: path)
                }
                let hasMigrations = try db.tableExists("grdb_migrations")
                guard hasMigrations else { return (false, false, Set<String>(), [String]()) }
                return (
                    true, try migrator.hasBeenSuperseded(db), try migrator.appliedIdentifiers(db),
                    try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations")
                )
            }
            guard hasMigrations, applied.contains("v1-changes-state") else {
                throw StoreError.notAPlaitStore(path: path, detail: "it has no plait tables")
            }
            if superseded {
                throw StoreError.newerSchema(path: path, unknown: Set(all).subtracting(migrator.migrations).sorted())
            }
            return !Set(migrator.migrations).isSubset(of: applied)
        } catch let error as StoreError {
            throw error
        } catch {
            throw StoreDiagnosis.diagnose(error, path: path, busyTimeout: busyTimeout)
        }
    }

    /// Runs `body` in a read transaction (a consistent snapshot, concurrent with writers). Errors the body
    /// throws pass through; SQLite's become `StoreError.sqlite`.
    public func read<T>(_ body: (Database) throws -> T) throws -> T {
        transactionCounter.add(1, ordering: .relaxed)
        do {
            return try readers.read(body)
        } catch let error as DatabaseError {
            throw StoreDiagnosis.diagnose(error, path: path, busyTimeout: busyTimeout)
        } catch let error as CoreError {
            throw StoreError.rejected(error)
        }
    }

    /// Runs `body` in one write transaction: it commits whole or not at all.
    func write<T>(_ body: (Database) throws -> T) throws -> T {
        transactionCounter.add(1, ordering: .relaxed)
        do {
            let value = try writingPool().writeWithoutTransaction { db in
                var result: T?
                try db.inTransaction(.immediate) {
                    result = try body(db)
                    return .commit
                }
                return result!
            }
            markCommitted()
            return value
        } catch let error as DatabaseError {
            throw StoreDiagnosis.diagnose(error, path: path, busyTimeout: busyTimeout)
        } catch let error as CoreError {
            throw StoreError.rejected(error)
        }
    }

    // MARK: Queries

    /// The device's display name.
    public func deviceName() throws -> String {
        try read { db in try Meta.get(db, .deviceName) ?? "" }
    }

    public func setDeviceName(_ name: String) throws {
        try write { db in try Meta.set(db, .deviceName, name) }
    }

    public func ownTimeline() throws -> TimelineID {
        try read { db in try Self.ownTimeline(db) }
    }

    static func ownTimeline(_ db: Database) throws -> TimelineID {
        guard let raw: Int64 = try Meta.get(db, .ownTimeline) else {
            throw StoreError.inconsistent("the store names no own timeline")
        }
        return TimelineID(UInt64(bitPattern: raw))
    }

    public func summary() throws -> Summary { try read { db in try Self.summary(db) } }

    static func summary(_ db: Database) throws -> Summary {
        var summary = Summary()
        let rows = try Row.fetchCursor(db, sql: "SELECT tl, head_seq FROM timelines")
        // Decoded with `try` and bit patterns: a damaged row is an error to report, never a trap.
        while let row = try rows.next() {
            summary[TimelineID(timelineFromColumn(try row.decode(Int64.self, atIndex: 0)))] =
                UInt64(bitPattern: try row.decode(Int64.self, atIndex: 1))
        }
        return summary
    }

    public func heads() throws -> [TimelineHeadRow] { try read { db in try Self.heads(db) } }

    static func heads(_ db: Database) throws -> [TimelineHeadRow] {
        try Row.fetchAll(db, sql: "SELECT tl, head_seq, head_lamport, head_hash, ended FROM timelines ORDER BY tl")
            .map { row in
                TimelineHeadRow(
                    timeline: TimelineID(timelineFromColumn(try row.decode(Int64.self, atIndex: 0))),
                    seq: UInt64(bitPattern: try row.decode(Int64.self, atIndex: 1)),
                    lamport: UInt64(bitPattern: try row.decode(Int64.self, atIndex: 2)),
                    hash: [UInt8](try row.decode(Data.self, atIndex: 3)),
                    ended: try row.decode(Int64.self, atIndex: 4) != 0)
            }
    }

    public func baseline() throws -> Baseline? { try read { db in try Self.baseline(db) } }

    static func baseline(_ db: Database) throws -> Baseline? {
        guard let data = try Data.fetchOne(db, sql: "SELECT data FROM baseline WHERE id = 1") else { return nil }
        let bytes = [UInt8](data)
        if let damage = try baselineDamage(db, digest: SHA256.hash(bytes)) { throw StoreError.damagedBaseline(damage) }
        return try Baseline(decoding: bytes[...])
    }

    /// Stores `baseline` as the store's baseline, with the SHA-256 of its bytes beside it: the baseline is source
    /// (DESIGN §10), and nothing else can show that its bytes are still the ones stored. One flipped bit in them
    /// changed an item's text or ID; `repair` then rebuilt the state from the damaged baseline, `doctor` said all
    /// was well, and a new device syncing from it took the damage (bad-luck tester 2026-11-25, H1).
    static func writeBaseline(_ db: Database, _ baseline: Baseline) throws {
        let bytes = baseline.encoded()
        try db.execute(
            sql: "INSERT OR REPLACE INTO baseline (id, summary, max_lamport, data) VALUES (1, ?, ?, ?)",
            arguments: [baseline.summary.description, Int64(baseline.maxLamport), Data(bytes)])
        try Meta.set(db, .baselineDigest, Data(SHA256.hash(bytes)))
        try Meta.set(db, .baselineDigestOf, "\(baseline.summary)|\(baseline.maxLamport)")
    }

    /// Why the stored baseline's bytes, whose SHA-256 is `digest` (the caller hashes the bytes it read from the row,
    /// once), are not the ones stored, or nil when they are (or when no digest was recorded with them: a baseline
    /// written before the digest was kept).
    static func baselineDamage(_ db: Database, digest: [UInt8]) throws -> String? {
        guard let recorded = try Meta.get(db, .baselineDigest) as Data?,
            let recordedFor = try Meta.get(db, .baselineDigestOf) as String?,
            let row = try Row.fetchOne(db, sql: "SELECT summary, max_lamport FROM baseline WHERE id = 1"),
            recordedFor == "\(row[0] as String)|\(UInt64(bitPattern: row[1] as Int64))"
        else { return nil }
        guard digest != [UInt8](recorded) else { return nil }
        return "its bytes are not the ones stored (their SHA-256 is \(digest.hexString.prefix(16)), "
            + "\([UInt8](recorded).hexString.prefix(16)) was recorded with them)"
    }

    /// Number of stored changes (not folded into the baseline).
    public func changeCount() throws -> Int {
        try read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM changes") ?? 0 }
    }

    /// The distinct kinds and versions of the stored changes, the version as stored (a damaged row's may not
    /// fit a `UInt32`).
    static func kinds(_ db: Database) throws -> [(kind: String, version: Int64)] {
        try Row.fetchAll(db, sql: "SELECT DISTINCT kind, version FROM changes").map {
            (kind: try $0.decode(String.self, atIndex: 0), version: try $0.decode(Int64.self, atIndex: 1))
        }
    }

    /// How many stored changes have this kind and version.
    static func changeCount(_ db: Database, kind: String, version: Int64) throws -> Int {
        try Int.fetchOne(
            db, sql: "SELECT count(*) FROM changes WHERE kind = ? AND version = ?", arguments: [kind, version]) ?? 0
    }

    /// The earliest stored change (in replay order) that `understands` rejects.
    static func earliestUninterpretable(_ db: Database, understands: (String, Int64) -> Bool) throws -> OrderKey? {
        var earliest: OrderKey?
        for (kind, version) in try kinds(db) {
            if understands(kind, version) { continue }
            if let row = try Row.fetchOne(
                db,
                sql: "SELECT lamport, tl, seq FROM changes WHERE kind = ? AND version = ? ORDER BY lamport, tl, seq LIMIT 1",
                arguments: [kind, version])
            {
                let key = OrderKey(
                    lamport: UInt64(row[0] as Int64), timeline: TimelineID(timelineFromColumn(row[1] as Int64)),
                    seq: UInt64(row[2] as Int64))
                earliest = earliest.map { min($0, key) } ?? key
            }
        }
        return earliest
    }

    /// Changes in replay order, for `plait log` (newest last). `limit` keeps the newest `limit` ones.
    public func changesInReplayOrder(limit: Int?) throws -> [Change] {
        try read { db in
            var out: [Change] = []
            let sql: String
            if let limit {
                sql = """
                    SELECT * FROM (SELECT \(try ChangeRows.columns(db)) FROM changes
                    ORDER BY lamport DESC, tl DESC, seq DESC LIMIT \(max(0, limit))) ORDER BY lamport, tl, seq
                    """
            } else {
                sql = "SELECT \(try ChangeRows.columns(db)) FROM changes ORDER BY lamport, tl, seq"
            }
            let statement = try db.makeStatement(sql: sql)
            try ChangeRows.scan(statement, withChain: true) { out.append($0) }
            return out
        }
    }

    /// Changes of one timeline from `seq` on, in sequence order.
    public func changes(of timeline: TimelineID, from seq: UInt64, limit: Int) throws -> [Change] {
        try read { db in
            let statement = try db.makeStatement(
                sql: """
                    SELECT \(try ChangeRows.columns(db)) FROM changes WHERE tl = ? AND seq >= ? ORDER BY seq LIMIT ?
                    """)
            statement.arguments = [timelineColumn(timeline.rawValue), Int64(seq), limit]
            var out: [Change] = []
            try ChangeRows.scan(statement, withChain: true) { out.append($0) }
            return out
        }
    }

    /// Runs SQLite's integrity check: "ok" or the problems found.
    public func integrityCheck() throws -> [String] {
        try read { db in try String.fetchAll(db, sql: "PRAGMA integrity_check") }
    }

    /// Whether SQLite's integrity lines (not "ok") say only that indexes disagree with their tables: the rows are
    /// sound, and `REINDEX` rebuilds the indexes from them. SQLite reports these only as text; these three forms are
    /// what its integrity check writes for an index entry missing, extra or duplicated.
    public static func onlyIndexesDamaged(_ lines: [String]) -> Bool {
        !lines.isEmpty && lines != ["ok"] && lines.allSatisfy { line in
            ["missing from index ", "wrong # of entries in index ", "non-unique entry in index "].contains {
                line.contains($0)
            }
        }
    }

    /// Rebuilds the indexes when SQLite's integrity check finds only them damaged (bad-luck tester 2026-11-25,
    /// H4: one flipped bit in `changes_by_timeline` made 400 sound changes look damaged). Returns the problems the
    /// check found, empty when there were none or when they were not only in indexes (nothing is done then).
    public func rebuildDamagedIndexes() throws -> [String] {
        let problems = try integrityCheck()
        guard Self.onlyIndexesDamaged(problems) else { return [] }
        try write { db in try db.execute(sql: "REINDEX") }
        return problems
    }

    /// Size of the database file and its WAL, in bytes.
    public func fileSize() -> Int {
        let manager = FileManager.default
        return [path, path + "-wal"].reduce(0) { total, file in
            total + ((try? manager.attributesOfItem(atPath: file)[.size] as? Int) ?? 0)
        }
    }

    /// Folds the WAL back into the main file (for measuring, and before copying a home).
    public func checkpointWAL() throws {
        do {
            _ = try writingPool().writeWithoutTransaction { db in try db.checkpoint(.truncate) }
        } catch {
            throw StoreDiagnosis.diagnose(error, path: path, busyTimeout: busyTimeout)
        }
    }
}

/// One row of the timelines table.
public struct TimelineHeadRow: Hashable, Sendable {
    public var timeline: TimelineID
    public var seq: UInt64
    public var lamport: UInt64
    public var hash: [UInt8]
    public var ended: Bool
}

/// Timeline IDs are stored with the sign bit flipped so SQLite's signed integer order is unsigned order.
@inline(__always) func timelineColumn(_ raw: UInt64) -> Int64 { Int64(bitPattern: raw ^ 0x8000_0000_0000_0000) }
@inline(__always) func timelineFromColumn(_ value: Int64) -> UInt64 { UInt64(bitPattern: value) ^ 0x8000_0000_0000_0000 }

/// Keys of the meta table.
enum Meta {
    enum Key: String {
        case ownTimeline = "own_timeline"
        /// Bumped by every write transaction, so a process notices another one wrote.
        case generation
        /// The order key of the last change the materialized state includes.
        case position
        /// The "applied up to" marker (DESIGN §12): the summary of the changes the materialized rows include.
        /// Changes committed beyond it (a batch saved lazily, then a crash) are replayed forward on load.
        /// Absent in stores written before it: their rows include every stored change.
        case appliedSummary = "applied_summary"
        case listHead = "list_head"
        case listTail = "list_tail"
        case formatNote = "format_note"
        /// The device's display name, chosen at `plait init`.
        case deviceName = "device_name"
        /// Why the own timeline may continue on another device (a fork, a peer holding it beyond the head, a
        /// damaged own change): nothing is authored on it until `plait rejoin` starts a new one. Absent: none.
        case ownTimelineSuspect = "own_timeline_suspect"
        /// Why it was marked (`Replica.SuspectCause`): a mark set by damage alone clears once healed.
        case ownTimelineSuspectCause = "own_timeline_suspect_cause"
        /// The own timeline forked and another copy's branch kept its name: the next edit begins a new timeline.
        case ownTimelineForkedAway = "own_timeline_forked_away"
        /// The SHA-256 of the baseline's bytes as they were stored (`Store.writeBaseline`). Absent in stores whose
        /// baseline was written before it: their baseline is not checked until it is next written.
        case baselineDigest = "baseline_sha256"
        /// The baseline row the digest was recorded for (`summary|max_lamport`): a baseline written by a plait built
        /// before the digest was kept (an older agent still running) is not checked against another's digest.
        case baselineDigestOf = "baseline_sha256_of"
        /// The identity of the file the store was last written in (`Store.fileIdentity`, `Store.noticeCopy`). Absent:
        /// not recorded yet (a store written before it was kept, or on a filesystem whose inode numbers are not
        /// stable).
        case storeFile = "store_file"
    }

    static func get<T: DatabaseValueConvertible>(_ db: Database, _ key: Key) throws -> T? {
        try T.fetchOne(db, sql: "SELECT value FROM meta WHERE key = ?", arguments: [key.rawValue])
    }

    static func set(_ db: Database, _ key: Key, _ value: (any DatabaseValueConvertible)?) throws {
        try db.execute(
            sql: "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            arguments: [key.rawValue, value])
    }
}
