import Foundation
import GRDB
import PlaitCore

/// Forks resolved by renaming, in the store (DESIGN §11, PROTOCOL.md §22): branches held, the lookups the intake
/// routes a forking change with, and the naming of every branch of a timeline again once a batch added one.
extension Store {
    /// Whether the store has the fork columns (a store not yet migrated has no branches).
    static func recordsForks(_ db: Database) throws -> Bool { try db.tableExists("fork_branches") }

    /// How many fork branches are held (0 in a store without the table): branches are permanent, so a change
    /// of this number means a commit named changes again.
    static func branchCount(_ db: Database) throws -> Int {
        guard try recordsForks(db) else { return 0 }
        return try Int.fetchOne(db, sql: "SELECT count(*) FROM fork_branches") ?? 0
    }

    /// The branches held of `root`, each with its head as the intake checks against it.
    static func branches(_ db: Database, root: TimelineID) throws -> [Intake<ListsDomain>.HeldBranch] {
        guard try recordsForks(db) else { return [] }
        let rows = try Row.fetchAll(
            db, sql: "SELECT tl, base, first_hash FROM fork_branches WHERE root = ? ORDER BY tl",
            arguments: [timelineColumn(root.rawValue)])
        var baselineLamport: UInt64??
        return try rows.compactMap { row in
            let id = TimelineID(timelineFromColumn(row[0] as Int64))
            let base = UInt64(clamping: row[1] as Int64)
            if let head = try heldHead(db, id) { return .init(id: id, base: base, head: head) }
            // Known from a record only: its first change may continue a change the baseline folds (§22.8).
            guard let first = row[2] as Data?, first.count == 32 else { return nil }
            if baselineLamport == nil {
                baselineLamport = try Int64.fetchOne(db, sql: "SELECT max_lamport FROM baseline WHERE id = 1")
                    .map { UInt64(clamping: $0) }
            }
            // Without a baseline nothing is folded: the record still names its first change where that continues a
            // held change (the intake's `besideHead`), never one continuing nothing held.
            let bound = baselineLamport ?? nil
            return .init(
                id: id, base: base,
                head: HeldHead(
                    seq: 0, lamport: bound ?? 0, hash: Change.zeroHash, certificate: try certificate(db, of: root)),
                recordedFirstHash: [UInt8](first), mayContinueFolded: bound != nil)
        }
    }

    /// The held change `ref` as a head (number, Lamport time, hash), nil when it is not stored and not the head of
    /// its timeline.
    static func heldChange(_ db: Database, _ ref: ChangeRef) throws -> HeldHead? {
        guard let hash = try hash(db, of: ref) else { return nil }
        let lamport = try Int64.fetchOne(
            db, sql: "SELECT lamport FROM changes WHERE tl = ? AND seq = ?",
            arguments: [timelineColumn(ref.timeline.rawValue), Int64(ref.seq)])
            ?? Int64.fetchOne(
                db, sql: "SELECT head_lamport FROM timelines WHERE tl = ? AND head_seq = ?",
                arguments: [timelineColumn(ref.timeline.rawValue), Int64(ref.seq)])
        guard let lamport else { return nil }
        return HeldHead(seq: ref.seq, lamport: UInt64(clamping: lamport), hash: hash)
    }

    /// The fork branches held (`plait status`, tests): name, root, parent, base.
    public func forkBranches() throws -> [ForkBranch.Branch] {
        try read { db in
            guard try Self.recordsForks(db) else { return [] }
            return try Row.fetchAll(db, sql: "SELECT tl, parent, base FROM fork_branches ORDER BY tl").map { row in
                ForkBranch.Branch(
                    id: TimelineID(timelineFromColumn(row[0] as Int64)),
                    parent: TimelineID(timelineFromColumn(row[1] as Int64)), base: UInt64(clamping: row[2] as Int64))
            }
        }
    }

    /// The fork records held with both hashes (what travels in a baseline and informs naming), of `root` or all.
    static func forkRecords(_ db: Database, root: TimelineID? = nil) throws -> [ForkBranch.Record] {
        guard try recordsForks(db) else { return [] }
        return try Row.fetchAll(
            db,
            sql: """
                SELECT tl, root, parent, base, first_hash, rival_hash FROM fork_branches
                WHERE first_hash IS NOT NULL AND rival_hash IS NOT NULL AND (? IS NULL OR root = ?) ORDER BY tl
                """,
            arguments: [root.map { timelineColumn($0.rawValue) }, root.map { timelineColumn($0.rawValue) }]
        ).map { row in
            ForkBranch.Record(
                branch: TimelineID(timelineFromColumn(row[0] as Int64)),
                root: TimelineID(timelineFromColumn(row[1] as Int64)),
                parent: TimelineID(timelineFromColumn(row[2] as Int64)), base: UInt64(clamping: row[3] as Int64),
                firstHash: [UInt8](row[4] as Data), rivalHash: [UInt8](row[5] as Data))
        }
    }

    /// Records fork records learnt from a baseline (PROTOCOL.md §22.8): a branch not held yet is added with the
    /// certificate of its root; one held without hashes gets them. Returns the roots they concern.
    static func learnForkRecords(_ db: Database, _ records: [ForkBranch.Record]) throws -> Set<TimelineID> {
        var roots = Set<TimelineID>()
        for record in records where record.isConsistent {
            try db.execute(
                sql: """
                    INSERT INTO fork_branches (tl, root, parent, base, first_hash, rival_hash) VALUES (?, ?, ?, ?, ?, ?)
                    ON CONFLICT (tl) DO UPDATE SET first_hash = coalesce(first_hash, excluded.first_hash),
                    rival_hash = coalesce(rival_hash, excluded.rival_hash)
                    """,
                arguments: [
                    timelineColumn(record.branch.rawValue), timelineColumn(record.root.rawValue),
                    timelineColumn(record.parent.rawValue), Int64(record.base), Data(record.firstHash),
                    Data(record.rivalHash),
                ])
            if let certificate = try certificate(db, of: record.root) {
                try recordCertificate(db, record.branch, certificate)
            }
            roots.insert(record.root)
        }
        return roots
    }

    /// Fills the hashes of fork records from the changes held (migration v10): the branch's first change, and
    /// the change its parent holds at that number.
    static func fillForkRecordHashes(_ db: Database) throws {
        let rows = try Row.fetchAll(db, sql: "SELECT tl, root, parent, base FROM fork_branches")
        var bases: [Int64: Int64] = [:]
        for row in rows { bases[row[0] as Int64] = row[3] as Int64 }
        for row in rows {
            let tl = row[0] as Int64
            let root = row[1] as Int64
            let parent = row[2] as Int64
            let base = row[3] as Int64
            let parentBase = parent == root ? 0 : (bases[parent] ?? 0)
            let first = try hash(db, of: ChangeRef(timeline: TimelineID(timelineFromColumn(tl)), seq: 1))
            let rival = base + 1 - parentBase >= 1 ? try hash(
                db, of: ChangeRef(timeline: TimelineID(timelineFromColumn(parent)), seq: UInt64(base + 1 - parentBase)))
                : nil
            guard let first, let rival, rival.lexicographicallyPrecedes(first) else { continue }
            try db.execute(
                sql: "UPDATE fork_branches SET first_hash = ?, rival_hash = ? WHERE tl = ?",
                arguments: [Data(first), Data(rival), tl])
        }
    }

    /// Records branches an accepted batch added (their changes and heads are stored already) with the
    /// certificate of the timeline they fork, which signs them too.
    static func recordBranches(_ db: Database, _ branches: [ForkBranch.Branch]) throws {
        for branch in branches {
            try db.execute(
                sql: "INSERT OR IGNORE INTO fork_branches (tl, root, parent, base) VALUES (?, ?, ?, ?)",
                arguments: [
                    timelineColumn(branch.id.rawValue), timelineColumn(branch.parent.rawValue),
                    timelineColumn(branch.parent.rawValue), Int64(branch.base),
                ])
            if let certificate = try certificate(db, of: branch.parent) {
                try recordCertificate(db, branch.id, certificate)
            }
        }
    }

    /// Names every held change of `root` again (`ForkBranch.assign`) and moves the rows, heads and branch records
    /// that changed. Returns whether anything moved; the caller then replays from the baseline.
    static func renameForks(_ db: Database, root: TimelineID) throws -> Bool {
        let rootColumn = timelineColumn(root.rawValue)
        let held = try Row.fetchAll(
            db, sql: "SELECT tl FROM fork_branches WHERE root = ?", arguments: [rootColumn]
        ).map { TimelineID(timelineFromColumn($0[0] as Int64)) }
        guard !held.isEmpty else { return false }
        let certificate = try certificate(db, of: root)
        struct Stored {
            var change: Change
            var hash: [UInt8]
        }
        var stored: [Stored] = []
        let columns = try ChangeRows.columns(db)
        let statement = try db.makeStatement(sql: "SELECT \(columns) FROM changes WHERE tl = ? ORDER BY seq")
        for timeline in [root] + held {
            statement.arguments = [timelineColumn(timeline.rawValue)]
            try ChangeRows.scanSigned(statement, withChain: true) { change, _ in
                stored.append(Stored(change: change, hash: change.canonicalBytes.withUnsafeBytes { FastSHA256.function($0) }))
            }
        }
        let nodes = stored.map {
            ForkBranch.Node(seq: $0.change.authored.seq, hash: $0.hash, previousHash: $0.change.previousHash)
        }
        // What the baseline folded and the records held name the rest (PROTOCOL.md §22.8).
        let known = try forkRecords(db, root: root)
        // A damaged baseline names no anchors (a pulled baseline is replacing it, `adopt`); the records do.
        let folded = (try? baseline(db)) ?? nil
        let anchors = folded?.anchors(of: root) ?? []
        let naming = ForkBranch.name(root: root, nodes, anchors: anchors, known: known)
        let names = naming.names
        // Records naming did not derive again (their first change is folded or not held) stay: permanent.
        var records = naming.records
        let derived = Set(records.map(\.branch))
        records += known.filter { !derived.contains($0.branch) }
        let branches = records.map(\.asBranch)
        let moving = stored.filter { entry in
            guard let name = names[entry.hash] else { return false }
            return name.timeline != entry.change.timeline || name.seq != entry.change.seq
        }
        let oldBranches = Set(held)
        let newBranches = Set(branches.map(\.id))
        guard !moving.isEmpty || oldBranches != newBranches else {
            for record in records { try saveRecordHashes(db, record) }
            return false
        }
        // Out of the way first (numbers far above any real one), then to the new names: no two rows ever share
        // a (tl, seq) on the way.
        let parking: Int64 = 1 << 50
        for entry in moving {
            try db.execute(
                sql: "UPDATE changes SET seq = seq + ? WHERE tl = ? AND seq = ?",
                arguments: [parking, timelineColumn(entry.change.timeline.rawValue), Int64(entry.change.seq)])
        }
        for entry in moving {
            let name = names[entry.hash]!
            let authored = entry.change.authored
            let origin: ChangeRef? = name.timeline == root ? nil : authored
            try db.execute(
                sql: "UPDATE changes SET tl = ?, seq = ?, origin_tl = ?, origin_seq = ? WHERE tl = ? AND seq = ?",
                arguments: [
                    timelineColumn(name.timeline.rawValue), Int64(name.seq),
                    origin.map { timelineColumn($0.timeline.rawValue) }, origin.map { Int64($0.seq) },
                    timelineColumn(entry.change.timeline.rawValue), Int64(entry.change.seq) + parking,
                ])
        }
        try db.execute(sql: "DELETE FROM fork_branches WHERE root = ?", arguments: [rootColumn])
        for record in records {
            try db.execute(
                sql: "INSERT INTO fork_branches (tl, root, parent, base) VALUES (?, ?, ?, ?)",
                arguments: [
                    timelineColumn(record.branch.rawValue), rootColumn, timelineColumn(record.parent.rawValue),
                    Int64(record.base),
                ])
            try saveRecordHashes(db, record)
        }
        // Heads: the last change under each name.
        var heads: [TimelineID: (seq: UInt64, change: Change, hash: [UInt8])] = [:]
        for entry in stored {
            guard let name = names[entry.hash] else { continue }
            if name.seq > heads[name.timeline]?.seq ?? 0 { heads[name.timeline] = (name.seq, entry.change, entry.hash) }
        }
        // A branch no longer named keeps its head row only while the baseline folds some of it.
        for old in oldBranches.subtracting(newBranches) where (folded?.summary[old] ?? 0) == 0 {
            try db.execute(sql: "DELETE FROM timelines WHERE tl = ?", arguments: [timelineColumn(old.rawValue)])
        }
        for (timeline, head) in heads {
            try db.execute(
                sql: """
                    INSERT INTO timelines (tl, head_seq, head_lamport, head_hash, ended) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (tl) DO UPDATE SET head_seq = excluded.head_seq,
                    head_lamport = excluded.head_lamport, head_hash = excluded.head_hash, ended = excluded.ended
                    """,
                arguments: [
                    timelineColumn(timeline.rawValue), Int64(head.seq), Int64(head.change.lamport), Data(head.hash),
                    head.change.kind == Change.timelineEndKind ? 1 : 0,
                ])
            if timeline != root, let certificate { try recordCertificate(db, timeline, certificate) }
        }
        return true
    }

    /// Stores a record's hashes on its branch row.
    private static func saveRecordHashes(_ db: Database, _ record: ForkBranch.Record) throws {
        guard record.isConsistent else { return }
        try db.execute(
            sql: "UPDATE fork_branches SET first_hash = ?, rival_hash = ? WHERE tl = ?",
            arguments: [Data(record.firstHash), Data(record.rivalHash), timelineColumn(record.branch.rawValue)])
    }
}
