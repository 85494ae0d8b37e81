import Foundation
import GRDB
import PlaitCore

/// An item or list that only a kept-aside change of this device created: no device shows it.
public struct KeptAsideObject: Sendable, Equatable {
    public enum Kind: String, Sendable { case item, list }
    public var kind: Kind
    /// The kept-aside change that created it.
    public var ref: ChangeRef
    public var id: ObjectID
    /// The item's text or the list's title, as created.
    public var text: String
}

/// What `Replica.bringBackKeptAside` authored again.
public struct KeptAsideReturn: Sendable, Equatable {
    /// The items and lists brought back, in the order their kept-aside creates were made.
    public var objects: [KeptAsideObject] = []
    /// Those of `objects` that show after it (not deleted again by the kept-aside changes made again with them).
    public var shown: [KeptAsideObject] = []
    /// Changes authored: the creates and the kept-aside edits of those same objects.
    public var changes = 0
    /// The timeline they were authored on (a new one when the own timeline had forked away).
    public var timeline: TimelineID?

    public var isEmpty: Bool { changes == 0 }

    public init() {}
}

/// Which kept-aside changes can be authored again without doubt (bad-luck tester 2026-11-25, H3).
///
/// A change is kept aside when a peer's baseline folds this device's timeline beyond it and nothing shows whether it
/// is among the folded changes (a restored backup's changes are; an edit made on the restored home before its first
/// sync is not). A create whose item (or list) this store does not hold at all — not even as a deleted one, whose
/// tombstone stays — cannot be among them: the baseline's state would hold the item. So such creates, and the kept-
/// aside edits of those same objects, are authored again as new changes of the own timeline, with the same IDs (a
/// second create of an ID that exists is a no-op everywhere, so a copy that turns up later collapses with it). An edit
/// of an object the store holds is left aside: it may be folded already, and authoring it again at a later time
/// could undo what came after it (a reopen after a complete).
enum KeptAsidePlan {
    /// The changes to author again, in the order the kept-aside ones were made, and the objects they bring back.
    static func plan(
        _ db: Database, holdsItem: (ObjectID) throws -> Bool, holdsList: (ObjectID) throws -> Bool
    ) throws -> (steps: [ListsChange], objects: [KeptAsideObject]) {
        guard try db.tableExists("kept_aside") else { return ([], []) }
        let statement = try db.makeStatement(
            sql: "SELECT \(ChangeRows.storedColumns) FROM kept_aside ORDER BY lamport, tl, seq")
        let domain = ListsDomain()
        var steps: [ListsChange] = []
        var objects: [KeptAsideObject] = []
        var items: Set<ObjectID> = []
        var lists: Set<ObjectID> = []
        // The list each item made again is in, and the items a kept-aside delete of a held list took with it: that
        // delete is not made again (the list is held), so neither are they (hostile tester 2026-11-25-i, I6: the
        // list came back with an item the user had deleted in it).
        var listOf: [ObjectID: ObjectID] = [:]
        var deletedWithList: Set<ObjectID> = []
        try ChangeRows.scan(statement, withChain: true) { change in
            // A kind this build does not know, or bytes that do not decode, stay aside (the doctor names the range).
            guard let decoded = try? domain.decode(change) else { return }
            switch decoded {
            case let .listCreate(id, title, _, _):
                guard !lists.contains(id), try !holdsList(id) else { return }
                lists.insert(id)
                objects.append(KeptAsideObject(kind: .list, ref: change.ref, id: id, text: title))
            case let .itemCreate(id, list, text, _):
                guard !items.contains(id), try !holdsItem(id) else { return }
                items.insert(id)
                listOf[id] = list
                objects.append(KeptAsideObject(kind: .item, ref: change.ref, id: id, text: text))
            case let .listDelete(id, _, _) where !lists.contains(id):
                for (item, list) in listOf where list == id { deletedWithList.insert(item) }
                return
            case let .listRename(id, _), let .listRecolor(id, _), let .listMove(id, _), let .listDelete(id, _, _):
                guard lists.contains(id) else { return }
            case let .itemMove(id, list, _):
                guard items.contains(id) else { return }
                if let list { listOf[id] = list }
            case let .itemEdit(id, _), let .itemComplete(id), let .itemReopen(id), let .itemDelete(id):
                guard items.contains(id) else { return }
            }
            steps.append(decoded)
        }
        guard !deletedWithList.isEmpty else { return (steps, objects) }
        return (
            steps.filter { step in item(of: step).map { !deletedWithList.contains($0) } ?? true },
            objects.filter { !deletedWithList.contains($0.id) })
    }

    /// The item a change of an item is about; nil for a list's.
    static func item(of change: ListsChange) -> ObjectID? {
        switch change {
        case let .itemCreate(id, _, _, _), let .itemEdit(id, _), let .itemComplete(id), let .itemReopen(id),
            let .itemMove(id, _, _), let .itemDelete(id):
            id
        case .listCreate, .listRename, .listRecolor, .listMove, .listDelete:
            nil
        }
    }

    /// The plan against the materialized rows (a read-only check: `plait doctor`).
    static func plan(_ db: Database) throws -> (steps: [ListsChange], objects: [KeptAsideObject]) {
        func holds(_ table: String, _ id: ObjectID) throws -> Bool {
            try Bool.fetchOne(db, sql: "SELECT 1 FROM \(table) WHERE id = ?", arguments: [Data(id.bytes)]) ?? false
        }
        return try plan(db, holdsItem: { try holds("items", $0) }, holdsList: { try holds("lists", $0) })
    }
}

extension Store {
    /// Items and lists that only kept-aside changes created (see `KeptAsidePlan`): what no device shows, and what
    /// `Replica.bringBackKeptAside` authors again.
    static func keptAsideUnshown(_ db: Database) throws -> [KeptAsideObject] {
        try KeptAsidePlan.plan(db).objects
    }

    public func keptAsideUnshown() throws -> [KeptAsideObject] { try read { db in try Self.keptAsideUnshown(db) } }
}

extension Store {
    /// This device's own signed timelines (those of `key`) that a peer holds another history of which cannot be
    /// resolved by renaming: for a signed timeline that is a fork inside that peer's baseline (its changes at the
    /// fork point are folded, so neither side can send them). The peer refuses to send its baseline then, and the two
    /// never converge (bad-luck tester 2026-11-25, a restored home that made more changes before its first sync than
    /// the backup lost, with a peer that had compacted). `rejoin` sets them aside (`setAside`).
    static func forkedOwnHistories(_ db: Database, key: [UInt8]?) throws -> [TimelineID] {
        guard let key else { return [] }
        return try Int64.fetchAll(db, sql: "SELECT DISTINCT tl FROM forks ORDER BY tl").map {
            TimelineID(timelineFromColumn($0))
        }.filter { try certificate(db, of: $0) == key }
    }

    /// Moves every stored change of `timelines` to `kept_aside` (bytes and signatures), and forgets their heads and
    /// recorded forks: a peer's history of them is then taken as for a timeline never held.
    static func setAside(_ timelines: [TimelineID], _ db: Database, now: Int64) throws {
        for timeline in timelines {
            let column = timelineColumn(timeline.rawValue)
            try keepAside(
                db, timeline, through: nil, now: now,
                reason: "a peer holds another history of this device's timeline inside its baseline (this home was "
                    + "restored from a backup, or copied): `plait rejoin` set this one aside and re-sent the lists "
                    + "and items on a new timeline, so that the peer's can be taken")
            for table in ["changes", "quarantine", "timelines", "forks"] {
                try db.execute(sql: "DELETE FROM \(table) WHERE tl = ?", arguments: [column])
            }
        }
    }

    /// Copies the stored changes of `timeline` (up to change `through`, or all of them) into `kept_aside`, bytes and
    /// signatures, with why; a change kept aside before is replaced.
    static func keepAside(_ db: Database, _ timeline: TimelineID, through: UInt64?, now: Int64, reason: String) throws {
        try db.execute(
            sql: """
                INSERT OR REPLACE INTO kept_aside (\(ChangeRows.storedColumns), reason, at)
                SELECT \(ChangeRows.storedColumns), ?, ? FROM changes WHERE tl = ? AND seq <= ?
                """,
            arguments: [reason, now, timelineColumn(timeline.rawValue), Int64(clamping: through ?? UInt64.max)])
    }
}

extension Replica {
    /// Authors again, as new changes of the own timeline, the kept-aside creates of items and lists this device
    /// does not hold at all, and the kept-aside edits of those objects (`KeptAsidePlan`), in one transaction. The
    /// kept-aside rows stay as they are. Writes nothing when there is nothing to bring back.
    ///
    /// Throws `StoreError.ownTimelineSuspect` while the own timeline may continue on another device (an unsigned
    /// timeline that a peer holds beyond this head): `rejoin` first, then this.
    public func bringBackKeptAside(now: Int64 = Replica.now()) throws -> KeptAsideReturn {
        let pending = try store.read { db in try KeptAsidePlan.plan(db) }
        guard !pending.objects.isEmpty else { return KeptAsideReturn() }
        return try edit(now: now) { edit in
            // Planned again inside the transaction, against the state it writes on.
            let state = edit.state
            let (steps, objects) = try KeptAsidePlan.plan(
                edit.db, holdsItem: { state.items[$0] != nil }, holdsList: { state.lists[$0] != nil })
            var result = KeptAsideReturn()
            result.objects = objects
            for step in steps {
                switch step {
                case let .listDelete(id, _, _):
                    // What it observed was this device's state then: a delete authored now observes what is held now.
                    try edit.append(try edit.listDelete(id))
                default:
                    try edit.append(step)
                }
                result.changes += 1
            }
            result.timeline = result.changes > 0 ? edit.ownTimeline : nil
            // What the note names: those that show now (one deleted again among the same changes does not).
            let after = edit.state
            result.shown = objects.filter {
                $0.kind == .item ? after.items[$0.id]?.deleted == false : after.lists[$0.id]?.deleted == false
            }
            return result
        }
    }
}
