import Foundation
import GRDB
import PlaitCore

/// What the store records about a timeline's author (DESIGN §11), beside its head.
public struct TimelineAuthority: Hashable, Sendable {
    public var timeline: TimelineID
    /// The certificate (DER) from the timeline's `timeline.begin`; nil for an unsigned protocol-1 timeline.
    public var certificate: [UInt8]?
    /// A begin superseded this timeline at this head: it holds the compaction cut-off only up to there.
    public var supersededSeq: UInt64?
    /// When (ms since 1970) a change of it last arrived from a peer; nil if none ever did.
    public var lastArrival: Int64?

    public init(
        timeline: TimelineID, certificate: [UInt8]? = nil, supersededSeq: UInt64? = nil, lastArrival: Int64? = nil
    ) {
        self.timeline = timeline
        self.certificate = certificate
        self.supersededSeq = supersededSeq
        self.lastArrival = lastArrival
    }
}

extension Store {
    /// The author records of every timeline held, ordered by timeline.
    public func timelineAuthorities() throws -> [TimelineAuthority] {
        try read { db in
            guard try Self.recordsAuthors(db) else {
                return try Self.heads(db).map { TimelineAuthority(timeline: $0.timeline) }
            }
            return try Row.fetchAll(
                db, sql: "SELECT tl, certificate, superseded_seq, last_arrival FROM timelines ORDER BY tl"
            ).map { row in
                TimelineAuthority(
                    timeline: TimelineID(timelineFromColumn(try row.decode(Int64.self, atIndex: 0))),
                    certificate: try row.decode(Data?.self, atIndex: 1).map { [UInt8]($0) },
                    supersededSeq: try row.decode(Int64?.self, atIndex: 2).map { UInt64(bitPattern: $0) },
                    lastArrival: try row.decode(Int64?.self, atIndex: 3))
            }
        }
    }

    /// The author record of one timeline (all nil when it is not held).
    static func authority(_ db: Database, of timeline: TimelineID) throws -> TimelineAuthority {
        let row = try Row.fetchOne(
            db, sql: "SELECT certificate, superseded_seq, last_arrival FROM timelines WHERE tl = ?",
            arguments: [timelineColumn(timeline.rawValue)])
        return TimelineAuthority(
            timeline: timeline, certificate: try row?.decode(Data?.self, atIndex: 0).map { [UInt8]($0) },
            supersededSeq: try row?.decode(Int64?.self, atIndex: 1).map { UInt64(bitPattern: $0) },
            lastArrival: try row?.decode(Int64?.self, atIndex: 2))
    }

    /// The certificate of a held timeline, nil when it is unsigned or not held.
    public func certificate(of timeline: TimelineID) throws -> [UInt8]? {
        try read { db in try Self.certificate(db, of: timeline) }
    }

    /// Whether the store has the author columns: one not yet migrated (on its first write) records none.
    static func recordsAuthors(_ db: Database) throws -> Bool {
        try db.columns(in: "timelines").contains { $0.name == "certificate" }
    }

    /// The largest Lamport time the store holds (its timelines' heads, a baseline's included): where an author's
    /// next change stands above, and what bounds an unsigned change or a baseline a peer sends (`Lamport.ceiling`).
    static func largestHeldLamport(_ db: Database) throws -> UInt64 {
        UInt64(clamping: try Int64.fetchOne(db, sql: "SELECT max(head_lamport) FROM timelines") ?? 0)
    }

    static func certificate(_ db: Database, of timeline: TimelineID) throws -> [UInt8]? {
        guard try recordsAuthors(db) else { return nil }
        return try Data.fetchOne(
            db, sql: "SELECT certificate FROM timelines WHERE tl = ?", arguments: [timelineColumn(timeline.rawValue)]
        ).map { [UInt8]($0) }
    }

    /// Records the certificate a timeline's begin carries (its row must exist: call after its head is set).
    static func recordCertificate(_ db: Database, _ timeline: TimelineID, _ certificate: [UInt8]) throws {
        try db.execute(
            sql: "UPDATE timelines SET certificate = ? WHERE tl = ?",
            arguments: [Data(certificate), timelineColumn(timeline.rawValue)])
    }

    /// Records that a begin superseded `timeline` at `seq` (the smallest such number, if several did). A
    /// timeline not held has no row to record it on.
    static func markSuperseded(_ db: Database, _ timeline: TimelineID, at seq: UInt64) throws {
        try db.execute(
            sql: "UPDATE timelines SET superseded_seq = min(coalesce(superseded_seq, ?), ?) WHERE tl = ?",
            arguments: [Int64(seq), Int64(seq), timelineColumn(timeline.rawValue)])
    }

    /// Records that changes of `timelines` arrived from a peer at `now` (ms), for the peer grace of authors
    /// nobody here paired (their rows must exist: call after their heads are set).
    static func noteArrival(_ db: Database, _ timelines: some Sequence<TimelineID>, at now: Int64) throws {
        let statement = try db.cachedStatement(
            sql: "UPDATE timelines SET last_arrival = max(coalesce(last_arrival, ?), ?) WHERE tl = ?")
        for timeline in timelines {
            try statement.execute(arguments: [now, now, timelineColumn(timeline.rawValue)])
        }
    }

    /// A held change with Lamport time exactly `lamport`, to name as a witness: a stored change (the primary
    /// key starts with the Lamport time), else the head of a timeline folded into the baseline (a real change
    /// the baseline holds). Nil when none is held.
    static func heldChange(_ db: Database, lamport: UInt64) throws -> ChangeRef? {
        // Named where its author wrote it (a change on a fork branch keeps its bytes' name): every device holding
        // it finds it under that name, whatever it calls the branch (DESIGN §11).
        let authored = try recordsForks(db)
            ? "coalesce(origin_tl, tl), coalesce(origin_seq, seq)" : "tl, seq"
        let stored = try Row.fetchOne(
            db, sql: "SELECT \(authored) FROM changes WHERE lamport = ? LIMIT 1", arguments: [Int64(lamport)])
        let row = try stored
            ?? Row.fetchOne(
                db, sql: "SELECT tl, head_seq FROM timelines WHERE head_lamport = ? ORDER BY tl LIMIT 1",
                arguments: [Int64(lamport)])
        return try row.map { row in
            ChangeRef(
                timeline: TimelineID(timelineFromColumn(try row.decode(Int64.self, atIndex: 0))),
                seq: UInt64(bitPattern: try row.decode(Int64.self, atIndex: 1)))
        }
    }

    /// The witness for a local change at `lamport + 1`: the held change at `lamport`. The author's clock is
    /// one above the largest head it holds, so one is always held; a store without it is inconsistent.
    static func witness(_ db: Database, lamport: UInt64) throws -> ChangeRef {
        guard let ref = try heldChange(db, lamport: lamport) else {
            throw StoreError.inconsistent("no held change has Lamport time \(lamport), the witness a new change needs")
        }
        return ref
    }

    /// The head this store holds of `timeline` as the intake checks against it: number, Lamport time, hash,
    /// whether it ended, the certificate of its begin (nil: unsigned) and where a begin superseded it. Nil when
    /// none of it is held.
    static func heldHead(_ db: Database, _ timeline: TimelineID) throws -> HeldHead? {
        let authors = try recordsAuthors(db)
        let sql =
            "SELECT head_seq, head_lamport, head_hash, ended, "
            + (authors ? "certificate, superseded_seq" : "NULL, NULL") + " FROM timelines WHERE tl = ?"
        return try Row.fetchOne(db, sql: sql, arguments: [timelineColumn(timeline.rawValue)]).map { row in
            HeldHead(
                seq: UInt64(clamping: row[0] as Int64), lamport: UInt64(clamping: row[1] as Int64),
                hash: [UInt8](row[2] as Data), ended: (row[3] as Int64) != 0,
                certificate: (row[4] as Data?).map { [UInt8]($0) },
                supersededAt: (row[5] as Int64?).map { UInt64(clamping: $0) })
        }
    }

    /// What an accepted batch tells the store about authors (call in the commit, after the heads are set):
    /// the certificate of each accepted `timeline.begin` on its timeline's row, each superseded timeline's
    /// stopping point on its row (when it is held), and, for changes that came from a peer, when they arrived.
    static func recordAuthors(
        _ db: Database, accepted: [Change], superseded: [TimelineBegin.Superseded], arrivedAt now: Int64?
    ) throws {
        for change in accepted where change.seq == 1 && change.kind == TimelineBegin.kind {
            try recordCertificate(db, change.timeline, try TimelineBegin(payload: change.payload).certificate)
        }
        for entry in superseded { try markSuperseded(db, entry.timeline, at: entry.seq) }
        if let now { try noteArrival(db, Set(accepted.map { $0.timeline }), at: now) }
    }

    /// Changes of one timeline from `seq` on, in sequence order, each with its canonical bytes and its stored
    /// signature: what a sender forwards.
    public func encodedChanges(of timeline: TimelineID, from seq: UInt64, limit: Int) throws -> [EncodedChange] {
        try read { db in
            let columns = try ChangeRows.columns(db)
            let statement = try db.makeStatement(
                sql: "SELECT \(columns) FROM changes WHERE tl = ? AND seq >= ? ORDER BY seq LIMIT ?")
            statement.arguments = [timelineColumn(timeline.rawValue), Int64(clamping: seq), Int64(clamping: limit)]
            var out: [EncodedChange] = []
            try ChangeRows.scanSigned(statement, withChain: true) { change, signature in
                out.append(EncodedChange(change, signature: signature))
            }
            return out
        }
    }

    /// Every stored change in replay order, each with its canonical bytes and stored signature (`plait log`,
    /// tests). `limit` keeps the newest `limit` ones.
    public func encodedChangesInReplayOrder(limit: Int? = nil) throws -> [EncodedChange] {
        try read { db in
            let columns = try ChangeRows.columns(db)
            let sql =
                limit.map {
                    """
                    SELECT * FROM (SELECT \(columns) FROM changes
                    ORDER BY lamport DESC, tl DESC, seq DESC LIMIT \(max(0, $0))) ORDER BY lamport, tl, seq
                    """
                } ?? "SELECT \(columns) FROM changes ORDER BY lamport, tl, seq"
            var out: [EncodedChange] = []
            try ChangeRows.scanSigned(try db.makeStatement(sql: sql), withChain: true) { change, signature in
                out.append(EncodedChange(change, signature: signature))
            }
            return out
        }
    }
}
