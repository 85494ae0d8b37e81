import Foundation
import GRDB
import PlaitCore

/// A device's state as of one instant: what the divergence alarm compares (DESIGN §10).
public struct ReplicaStatus: Sendable, Equatable {
    /// The summary, heads and baseline of the same instant as the digest.
    public var view: LocalView
    public var summary: Summary { view.summary }
    /// SHA-256 of the encoded baseline; nil without one.
    public var baselineDigest: [UInt8]? { view.baselineDigest }
    public var stateDigest: [UInt8]
    /// Stored changes this build cannot interpret.
    public var uninterpretable: Int
}

/// A stored change whose hash does not continue its timeline's chain: it and the rest of its timeline are
/// set aside (quarantined), and the timeline ends at the change before it until good copies are pulled again.
public struct DamagedChange: Sendable, Equatable, CustomStringConvertible {
    public var ref: ChangeRef
    /// Changes of the timeline from `ref` to its head: all set aside with it.
    public var following: Int
    /// Sound changes before `ref` set aside with it (known once it is set aside): on a signed timeline, those after
    /// the last signed change, which no signature covers without the damaged one.
    public var unsignedBefore = 0

    public init(ref: ChangeRef, following: Int) {
        self.ref = ref
        self.following = following
    }

    public var description: String {
        (following > 1 ? "change \(ref) (and the \(following - 1) after it)" : "change \(ref)")
            + (unsignedBefore > 0
                ? ", with the \(unsignedBefore) sound change\(unsignedBefore == 1 ? "" : "s") before it that no signature "
                    + "covers without it" : "")
    }
}

/// A change set aside because its timeline's hash chain broke at or before it.
public struct QuarantinedRange: Sendable, Equatable {
    public var timeline: TimelineID
    public var seqs: ClosedRange<UInt64>
    public var reason: String
}

/// A timeline a peer holds with another history under the same numbers, as recorded by the last session.
public struct ForkRecord: Sendable, Equatable {
    public var peer: String
    public var timeline: TimelineID
    public var seq: UInt64
    public var detail: String
}

extension Replica {
    /// Sets aside `damage.ref` and every later change of its timeline (on a signed timeline, from the change after
    /// its last signature before it), ends the timeline at the change before those (its hash recomputed from that
    /// change's own bytes), and replays the state without them. A damaged change
    /// of this device's own timeline also stops authoring on it (it may continue on a peer that holds it).
    /// Returns how many sound changes before the damaged one were set aside with it.
    @discardableResult
    public func quarantine(_ damage: DamagedChange, reason: String, now: Int64 = Replica.now()) throws -> Int {
        try transaction { db in
            let timeline = damage.ref.timeline
            let column = timelineColumn(timeline.rawValue)
            // Every stored head is a signed change (PROTOCOL.md §20.7): on a signed timeline the changes between
            // its last signature and the damage are set aside with it (no signature covers them any more, so no
            // peer would take them from here), to be pulled again with the rest. Unsigned history: from the damage.
            let lastSigned = try Int64.fetchOne(
                db, sql: "SELECT max(seq) FROM changes WHERE tl = ? AND seq < ? AND signature IS NOT NULL",
                arguments: [column, Int64(damage.ref.seq)])
            let from = lastSigned.map { $0 + 1 } ?? Int64(damage.ref.seq)
            let soundBefore = try Int.fetchOne(
                db, sql: "SELECT count(*) FROM changes WHERE tl = ? AND seq >= ? AND seq < ?",
                arguments: [column, from, Int64(damage.ref.seq)]) ?? 0
            // One reason for the whole stretch (the set-aside changes are reported per timeline): it names the
            // damaged change when sound ones before it go with it.
            let stated = soundBefore == 0
                ? reason
                : "change \(damage.ref): \(reason); the \(soundBefore) before it, which no signature covers without it, "
                    + "are set aside with it"
            try db.execute(
                sql: """
                    INSERT OR REPLACE INTO quarantine (\(ChangeRows.storedColumns), reason, at)
                    SELECT \(ChangeRows.storedColumns), ?, ? FROM changes
                    WHERE tl = ? AND seq >= ?
                    """,
                arguments: [stated, now, column, from])
            try db.execute(sql: "DELETE FROM changes WHERE tl = ? AND seq >= ?", arguments: [column, from])
            // The new head: the change before, if stored (its hash recomputed), else the baseline's head of it.
            // Saturating: a damaged row may carry any number, 0 included.
            let before = from <= 0 ? 0 : UInt64(from - 1)
            let previous = try Store.changes(db, of: timeline, from: before, limit: 1).first { $0.seq == before }
            if let previous {
                let hash = SHA256.hash(previous.canonicalBytes)
                try db.execute(
                    sql: "UPDATE timelines SET head_seq = ?, head_lamport = ?, head_hash = ?, ended = ? WHERE tl = ?",
                    arguments: [
                        Int64(previous.seq), Int64(previous.lamport), Data(hash),
                        previous.kind == Change.timelineEndKind ? 1 : 0, column,
                    ])
            } else if let baseline = try Store.baseline(db), baseline.summary[timeline] > 0,
                baseline.summary[timeline] == before, let hash = baseline.heads[timeline]
            {
                try db.execute(
                    sql: "UPDATE timelines SET head_seq = ?, head_lamport = ?, head_hash = ?, ended = ? WHERE tl = ?",
                    arguments: [
                        Int64(baseline.summary[timeline]), Int64(clamping: baseline.headLamports[timeline] ?? 0),
                        Data(hash), baseline.ended.contains(timeline) ? 1 : 0, column,
                    ])
            } else {
                try db.execute(sql: "DELETE FROM timelines WHERE tl = ?", arguments: [column])
            }
            if try Store.ownTimeline(db) == timeline {
                try Self.markOwnTimelineSuspect(
                    db, timeline,
                    reason: "its stored change \(damage.ref) is damaged; `plait sync` pulls it again from a peer that "
                        + "holds it", cause: .damage)
            }
            try db.execute(sql: "DELETE FROM checkpoints")
            try replayAll(db)
            return soundBefore
        }
    }

    /// Every stored change whose hash does not continue its timeline's chain, the first one per timeline.
    /// Reads the whole table once; writes nothing.
    public func damagedChanges() throws -> [DamagedChange] {
        try store.read { db in try Store.damagedChanges(db) }
    }

    /// Finds damaged changes and quarantines each (the agent does this when it starts). Returns them.
    ///
    /// Damage is looked for again after the store's indexes are rebuilt from its tables: the pass reads the changes
    /// through the `changes_by_timeline` index, and one flipped bit there made sound changes read as a broken
    /// chain — the agent's start and `repair` set 400 intact changes aside, and pulling them back failed on the
    /// damaged unique index (bad-luck tester 2026-11-25, H4). An index holds nothing of its own: when SQLite finds
    /// only indexes damaged, they are rebuilt from the rows (`Store.rebuildDamagedIndexes`), which are what the chain
    /// is checked on.
    @discardableResult
    public func quarantineDamaged() throws -> [DamagedChange] {
        try mendHeadRecords()
        var damaged = try damagedChanges()
        if !damaged.isEmpty, try !store.rebuildDamagedIndexes().isEmpty {
            damaged = try damagedChanges()
        }
        for index in damaged.indices {
            damaged[index].unsignedBefore = try quarantine(
                damaged[index], reason: "its hash does not continue the chain of its timeline")
        }
        return damaged
    }
}

extension Store {
    /// Checks every timeline's stored changes against the chain: each change's hash must be the next change's
    /// `prev`, the last one's the head hash, and the first one's `prev` the hash the baseline (or nothing)
    /// leaves off at.
    static func damagedChanges(_ db: Database) throws -> [DamagedChange] {
        let heads = Dictionary(uniqueKeysWithValues: try Self.heads(db).map { ($0.timeline, $0) })
        // A head record that is itself the damaged part names no damaged change (`HeadRecordFault`).
        let faultyRecords = Set(try headRecordFaults(db).map(\.timeline))
        // A baseline that is damaged, or does not decode, is reported on its own (`baselineProblem`); the chains
        // are checked without it.
        let baseline = (try? Self.baseline(db)) ?? nil
        var damaged: [DamagedChange] = []
        // One pass over the table in (timeline, seq) order, holding one timeline's position at a time.
        var current: TimelineID?
        var expectedPrevious: [UInt8]?
        var previousSeq: UInt64 = 0
        var previousLamport: UInt64 = 0
        var isFirst = true
        /// The first damaged change of the current timeline, and how many stored changes follow it.
        var broken: (ref: ChangeRef, count: Int)?
        func finish() {
            guard let timeline = current else { return }
            // The last stored change must be what the head record says; where the record is not shown to be the
            // damaged part, the change is (a record one too high once hid a damaged last change entirely).
            if broken == nil, let head = heads[timeline], !faultyRecords.contains(timeline),
                previousSeq != head.seq || previousLamport != head.lamport || expectedPrevious != head.hash
            {
                broken = (ChangeRef(timeline: timeline, seq: previousSeq), 0)
            }
            if let broken {
                damaged.append(DamagedChange(ref: broken.ref, following: broken.count + 1))
            }
        }
        let statement = try db.makeStatement(sql: "SELECT \(try ChangeRows.columns(db)) FROM changes ORDER BY tl, seq")
        try ChangeRows.scan(statement, withChain: true) { change in
            if change.timeline != current {
                finish()
                current = change.timeline
                broken = nil
                isFirst = true
                previousSeq = change.seq == 0 ? 0 : change.seq - 1
                expectedPrevious = change.seq == 1 ? Change.zeroHash : nil
                // A fork branch (PROTOCOL.md §22) starts by continuing the change it left, not nothing.
                if change.seq == 1, let left = try Self.changeABranchLeaves(db, change.timeline) {
                    expectedPrevious = try Self.hash(db, of: left)
                }
                if change.seq > 1, let baseline, baseline.summary[change.timeline] == previousSeq {
                    expectedPrevious = baseline.heads[change.timeline]
                }
            }
            if var found = broken {
                found.count += 1
                broken = found
                return
            }
            if change.seq != previousSeq + 1 {
                broken = (change.ref, 0)
            } else if let expected = expectedPrevious, change.previousHash != expected {
                // The link into this change is broken: the change before it no longer hashes to what this one
                // names; for the first stored change of its timeline, its own link is the damaged part.
                broken = isFirst ? (change.ref, 0) : (ChangeRef(timeline: change.timeline, seq: previousSeq), 1)
            }
            isFirst = false
            previousSeq = change.seq
            previousLamport = change.lamport
            expectedPrevious = SHA256.hash(change.canonicalBytes)
        }
        finish()
        return damaged
    }

    /// The change a fork branch's first change continues (its parent's, under the parent's name), nil when
    /// `timeline` is not a branch.
    static func changeABranchLeaves(_ db: Database, _ timeline: TimelineID) throws -> ChangeRef? {
        guard try recordsForks(db) else { return nil }
        let sql = "SELECT parent, base FROM fork_branches WHERE tl = ?"
        guard let row = try Row.fetchOne(db, sql: sql, arguments: [timelineColumn(timeline.rawValue)]) else {
            return nil
        }
        let parent = TimelineID(timelineFromColumn(row[0] as Int64))
        let base = UInt64(clamping: row[1] as Int64)
        // Bases count in the author's numbering: the parent's own base (0 for the timeline itself) is taken off.
        let parentBase = try Row.fetchOne(db, sql: sql, arguments: [timelineColumn(parent.rawValue)])
            .map { UInt64(clamping: $0[1] as Int64) } ?? 0
        return base > parentBase ? ChangeRef(timeline: parent, seq: base - parentBase) : nil
    }

    /// Changes of one timeline from `seq` on, in sequence order, with their previous hashes.
    static func changes(_ db: Database, of timeline: TimelineID, from seq: UInt64, limit: Int) throws -> [Change] {
        let statement = try db.makeStatement(
            sql: "SELECT \(try ChangeRows.columns(db)) FROM changes WHERE tl = ? AND seq >= ? ORDER BY seq LIMIT ?")
        statement.arguments = [timelineColumn(timeline.rawValue), Int64(clamping: seq), Int64(clamping: limit)]
        var out: [Change] = []
        try ChangeRows.scan(statement, withChain: true) { out.append($0) }
        return out
    }

    /// Of a page about to be sent, the changes whose hash is not what the chain says (the next stored change's
    /// `prev`, or the head hash): the first one per timeline. The sender stops that timeline before it.
    static func damagedInPage(_ db: Database, _ page: [Change]) throws -> [ChangeRef] {
        var byTimeline: [TimelineID: [Change]] = [:]
        for change in page { byTimeline[change.timeline, default: []].append(change) }
        var damaged: [ChangeRef] = []
        for (timeline, changes) in byTimeline {
            let sorted = changes.sorted { $0.seq < $1.seq }
            for (index, change) in sorted.enumerated() {
                let expected: [UInt8]?
                if index + 1 < sorted.count, sorted[index + 1].seq == change.seq + 1 {
                    expected = sorted[index + 1].previousHash
                } else {
                    expected = try Self.hash(db, of: change.ref)
                }
                if let expected, SHA256.hash(change.canonicalBytes) != expected {
                    damaged.append(change.ref)
                    break
                }
            }
        }
        return damaged.sorted { $0 < $1 }
    }

    /// Changes set aside as damaged, per timeline.
    public func quarantined() throws -> [QuarantinedRange] { try read { db in try Self.quarantined(db) } }

    static func quarantined(_ db: Database) throws -> [QuarantinedRange] {
        try Row.fetchAll(db, sql: "SELECT tl, min(seq), max(seq), min(reason) FROM quarantine GROUP BY tl ORDER BY tl")
            .map { row in
                QuarantinedRange(
                    timeline: TimelineID(timelineFromColumn(row[0] as Int64)),
                    seqs: UInt64(clamping: row[1] as Int64)...UInt64(clamping: row[2] as Int64), reason: row[3])
            }
    }

    /// This device's own changes kept aside when a baseline folded their timeline beyond them (they could not be
    /// checked against it), per timeline.
    public func keptAside() throws -> [QuarantinedRange] { try read { db in try Self.keptAside(db) } }

    static func keptAside(_ db: Database) throws -> [QuarantinedRange] {
        guard try db.tableExists("kept_aside") else { return [] }
        return try Row.fetchAll(
            db, sql: "SELECT tl, min(seq), max(seq), min(reason) FROM kept_aside GROUP BY tl ORDER BY tl"
        ).map { row in
            QuarantinedRange(
                timeline: TimelineID(timelineFromColumn(row[0] as Int64)),
                seqs: UInt64(clamping: row[1] as Int64)...UInt64(clamping: row[2] as Int64), reason: row[3])
        }
    }

    /// Why the own timeline may continue elsewhere (authoring on it is stopped), nil when it may not.
    public func ownTimelineSuspicion() throws -> String? {
        try read { db in try Meta.get(db, .ownTimelineSuspect) }
    }

    // MARK: What sessions found about peers

    /// Replaces what is recorded about forks with `peer` by what a session found now.
    public func recordForks(peer: String, _ forks: [(timeline: TimelineID, seq: UInt64, detail: String)], now: Int64)
        throws
    {
        try write { db in
            let keep = Set(forks.map { timelineColumn($0.timeline.rawValue) })
            for row in try Int64.fetchAll(db, sql: "SELECT tl FROM forks WHERE peer = ?", arguments: [peer])
            where !keep.contains(row) {
                try db.execute(sql: "DELETE FROM forks WHERE peer = ? AND tl = ?", arguments: [peer, row])
            }
            for fork in forks {
                try db.execute(
                    sql: """
                        INSERT INTO forks (peer, tl, seq, detail, first_seen, last_seen) VALUES (?, ?, ?, ?, ?, ?)
                        ON CONFLICT (peer, tl) DO UPDATE SET seq = excluded.seq, detail = excluded.detail,
                        last_seen = excluded.last_seen
                        """,
                    arguments: [
                        peer, timelineColumn(fork.timeline.rawValue), Int64(clamping: fork.seq), fork.detail, now, now,
                    ])
            }
            let own = try Self.ownTimeline(db)
            if let fork = forks.first(where: { $0.timeline == own }) {
                // A signed own timeline: a peer's word (its Hello's head hash) is no proof (DESIGN §11: stale-home
                // claims act only on a change signed by this key). Authoring is not stopped; the next edit begins a
                // new timeline, so nothing more is written where the peer says another history stands.
                if try Self.certificate(db, of: own) != nil {
                    try Meta.set(db, .ownTimelineForkedAway, "1")
                    return
                }
                try Replica.markOwnTimelineSuspect(
                    db, own,
                    reason: "another device holds a different history of it from change \(fork.seq) on (this home "
                        + "was probably copied, or restored from a backup)")
            }
        }
    }

    public func forks() throws -> [ForkRecord] { try read { db in try Self.forks(db) } }

    static func forks(_ db: Database) throws -> [ForkRecord] {
        try Row.fetchAll(db, sql: "SELECT peer, tl, seq, detail FROM forks ORDER BY peer, tl").map { row in
            ForkRecord(
                peer: row[0], timeline: TimelineID(timelineFromColumn(row[1] as Int64)),
                seq: UInt64(clamping: row[2] as Int64), detail: row[3])
        }
    }

    /// Records what the last session with `peer` found: a divergence, refused changes, a claim on the own
    /// timeline (nil clears each).
    public func recordPeerFindings(peer: String, diverged: String?, refused: String?, claim: String?) throws {
        try write { db in
            try db.execute(
                sql: "UPDATE peers SET diverged = ?, refused = ?, claim = ? WHERE device_id = ?",
                arguments: [diverged, refused, claim, peer])
        }
    }
}

/// What `plait doctor` reports about the source and about what sessions found, read without writing.
public struct HistoryReport: Sendable {
    /// Stored changes whose hash does not continue their chain (not yet set aside).
    public var damaged: [DamagedChange]
    /// Changes set aside as damaged, waiting for good copies.
    public var quarantined: [QuarantinedRange]
    /// Why the own timeline may continue elsewhere, if it may.
    public var ownTimelineSuspicion: String?
    public var ownTimeline: TimelineID
    public var forks: [ForkRecord]
    public var peers: [PeerRecord]
    public var summary: Summary
    /// Whether the baseline decodes (nil: no baseline), and why not.
    public var baselineProblem: String?
    /// This device's own changes kept aside when an adopted baseline folded their timeline beyond them.
    public var keptAside: [QuarantinedRange] = []
    /// Items created by kept-aside own changes that this device does not hold at all (not even deleted): edits
    /// that exist only in the `kept_aside` table, with their texts.
    public var keptAsideUnshown: [KeptAsideObject] = []
    /// Head records that do not describe their timeline's intact last change.
    public var headRecords: [HeadRecordFault] = []
    /// The certificate the own timeline was begun with (nil: unsigned).
    public var ownTimelineCertificate: [UInt8]?
}

extension Store {
    /// Reads the history report of the store at `path` through a read-only connection.
    public static func historyReport(readOnlyAt path: String) throws -> HistoryReport {
        try readingOnly(at: path) { db in
            var baselineProblem: String?
            do {
                _ = try baseline(db)
            } catch StoreError.damagedBaseline {
                // Reported, with what to do, by the derived-state check (`DerivedStateVerification.baseline`).
            } catch {
                baselineProblem = "\(error)"
            }
            return HistoryReport(
                damaged: try damagedChanges(db), quarantined: try quarantined(db),
                ownTimelineSuspicion: try Meta.get(db, .ownTimelineSuspect), ownTimeline: try ownTimeline(db),
                forks: try forks(db), peers: try peers(db), summary: try summary(db), baselineProblem: baselineProblem,
                keptAside: try keptAside(db), keptAsideUnshown: try keptAsideUnshown(db),
                headRecords: try headRecordFaults(db),
                ownTimelineCertificate: try certificate(db, of: try ownTimeline(db)))
        }
    }
}
