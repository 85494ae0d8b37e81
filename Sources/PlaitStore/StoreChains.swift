import Foundation
import GRDB
import PlaitCore

/// Where a `list.delete`'s observed chains stand in this store (`ChainLocator`, PROTOCOL.md §22.6): bound to the
/// domain for the time a transaction or read replays, so deletes are covered by what the store holds.
struct StoreChains: ChainLocator {
    let db: Database
    /// Every fork branch held, by name (a small table: one row per branch ever seen).
    let branches: [TimelineID: ForkBranch.Branch]
    /// Per timeline a branch leaves, the smallest number (in its own numbering) where one does.
    let forkPoints: [TimelineID: UInt64]
    /// The timelines of every forked family (roots with branches, and the branches), where a renamed change is.
    let families: [Int64]

    init(_ db: Database) throws {
        self.db = db
        guard try Store.recordsForks(db) else {
            (branches, forkPoints, families) = ([:], [:], [])
            return
        }
        var branches: [TimelineID: ForkBranch.Branch] = [:]
        var columns = Set<Int64>()
        for row in try Row.fetchAll(db, sql: "SELECT tl, root, parent, base FROM fork_branches") {
            let id = TimelineID(timelineFromColumn(row[0] as Int64))
            let parent = TimelineID(timelineFromColumn(row[2] as Int64))
            branches[id] = ForkBranch.Branch(id: id, parent: parent, base: UInt64(clamping: row[3] as Int64))
            columns.insert(row[0] as Int64)
            columns.insert(row[1] as Int64)
        }
        var forkPoints: [TimelineID: UInt64] = [:]
        for branch in branches.values {
            // The branch leaves its parent at the author's number `base`: the parent's base − its own base.
            let parentBase = branches[branch.parent]?.base ?? 0
            guard branch.base >= parentBase else { continue }
            let point = branch.base - parentBase + 1
            forkPoints[branch.parent] = min(forkPoints[branch.parent] ?? point, point)
        }
        self.branches = branches
        self.forkPoints = forkPoints
        families = columns.sorted()
    }

    func branch(_ timeline: TimelineID) -> ForkBranch.Branch? { branches[timeline] }

    func forkPoint(of timeline: TimelineID) -> UInt64? { forkPoints[timeline] }

    func locate(hash: [UInt8], claimed: ChangeRef) -> ChangeRef? {
        // A lookup that fails (an I/O error mid-replay) finds nothing: the delete then covers less, never more,
        // and the failed transaction is rolled back anyway.
        try? locating(hash, claimed)
    }

    private func locating(_ hash: [UInt8], _ claimed: ChangeRef) throws -> ChangeRef? {
        let column = timelineColumn(claimed.timeline.rawValue)
        if let held = try Store.hash(db, of: claimed) {
            if held == hash { return claimed }
        } else if let head = try Int64.fetchOne(
            db, sql: "SELECT head_seq FROM timelines WHERE tl = ?", arguments: [column]),
            UInt64(clamping: head) >= claimed.seq, !families.contains(column)
        {
            // Folded into the baseline (held, its hash no longer known): baselines are trusted as their coverage
            // says (DESIGN §11), and no fork of this timeline is held to make the number ambiguous.
            return claimed
        }
        guard !families.isEmpty else { return nil }
        // Renamed by a fork: the change whose successor names it as `prev`, or a head, within the forked families.
        let list = families.map(String.init).joined(separator: ",")
        if let row = try Row.fetchOne(
            db, sql: "SELECT tl, seq FROM changes WHERE tl IN (\(list)) AND prev = ? ORDER BY tl, seq LIMIT 1",
            arguments: [Data(hash)])
        {
            let timeline = TimelineID(timelineFromColumn(row[0] as Int64))
            let seq = UInt64(clamping: row[1] as Int64)
            if seq > 1 { return ChangeRef(timeline: timeline, seq: seq - 1) }
            // The first change of a branch follows the change it left, on its parent.
            guard let branch = branches[timeline] else { return nil }
            let parentBase = branches[branch.parent]?.base ?? 0
            return branch.base > parentBase ? ChangeRef(timeline: branch.parent, seq: branch.base - parentBase) : nil
        }
        if let row = try Row.fetchOne(
            db, sql: "SELECT tl, head_seq FROM timelines WHERE tl IN (\(list)) AND head_hash = ? LIMIT 1",
            arguments: [Data(hash)])
        {
            let timeline = TimelineID(timelineFromColumn(row[0] as Int64))
            return ChangeRef(timeline: timeline, seq: UInt64(clamping: row[1] as Int64))
        }
        return nil
    }
}

extension ListsDomain {
    /// Runs `body` with this domain's deletes resolved against the store `db` is a scope of.
    func bound<T>(to db: Database, _ body: () throws -> T) throws -> T {
        try chains.binding(try StoreChains(db), body)
    }
}
