import Foundation
import GRDB
import GRDBSQLite
import PlaitCore

/// What a device tells a peer about itself when a sync session opens, read in one transaction.
public struct LocalView: Sendable, Equatable {
    /// The head a device holds of one timeline.
    public struct Head: Sendable, Equatable {
        public var seq: UInt64
        /// SHA-256 of the head change: it names the whole history of the timeline up to `seq`.
        public var hash: [UInt8]
    }

    /// The timeline this device authors on.
    public var ownTimeline: TimelineID
    /// Every change held, the baseline included.
    public var summary: Summary
    /// Per timeline held (also those folded wholly into the baseline), its head.
    public var heads: [TimelineID: Head]
    /// The changes folded into the baseline (empty without one).
    public var baselineSummary: Summary
    /// SHA-256 of the encoded baseline; nil without one.
    public var baselineDigest: [UInt8]?
    /// Timelines that began with a signed `timeline.begin` (or branches of one): a fork of one is resolved by
    /// renaming (DESIGN §11), so both histories are exchanged.
    public var signedTimelines: Set<TimelineID> = []
    /// The own timeline forked and the other copy's history kept its name (DESIGN §11): a peer holding it beyond
    /// this device's head is holding that history, not a sign of a stale home.
    public var ownTimelineForkedAway = false
    /// The fork records held with both hashes, sorted by branch name: what Hello carries (PROTOCOL.md §22.9).
    public var forkRecords: [ForkBranch.Record] = []
}

extension Store {
    /// The summary, the head of every timeline, and the baseline's summary and digest, as of one instant.
    public func localView() throws -> LocalView {
        try read { db in try Self.localView(db) }
    }

    static func localView(_ db: Database) throws -> LocalView {
            var summary = Summary()
            var heads: [TimelineID: LocalView.Head] = [:]
            for row in try Self.heads(db) {
                summary[row.timeline] = row.seq
                heads[row.timeline] = LocalView.Head(seq: row.seq, hash: row.hash)
            }
            var baseline = try Row.fetchOne(db, sql: "SELECT summary, data FROM baseline WHERE id = 1").map {
                (summary: try Summary(parsing: $0[0] as String), digest: SHA256.hash([UInt8]($0[1] as Data)))
            }
            // A damaged baseline is announced as none: a peer then sends its own, which replaces it if it folds as
            // much (`adopt`), and nothing compares the damage with a peer's baseline.
            if let digest = baseline?.digest, try baselineDamage(db, digest: digest) != nil { baseline = nil }
            var view = LocalView(
                ownTimeline: try Self.ownTimeline(db), summary: summary, heads: heads,
                baselineSummary: baseline?.summary ?? Summary(), baselineDigest: baseline?.digest,
                signedTimelines: try recordsAuthors(db)
                    ? Set(try Int64.fetchAll(db, sql: "SELECT tl FROM timelines WHERE certificate IS NOT NULL").map {
                        TimelineID(timelineFromColumn($0))
                    }) : [])
            view.ownTimelineForkedAway = try Meta.get(db, .ownTimelineForkedAway) as String? != nil
            view.forkRecords = try forkRecords(db).sorted { $0.branch < $1.branch }
            return view
    }

    /// The changes folded into the baseline as its summary column says, nil without one (nothing is decoded).
    public func baselineSummaryIfAny() throws -> Summary? {
        try read { db in
            try String.fetchOne(db, sql: "SELECT summary FROM baseline WHERE id = 1").map { try Summary(parsing: $0) }
        }
    }

    /// The changes folded into the baseline (empty without one), without decoding the baseline itself.
    public func baselineSummary() throws -> Summary {
        try read { db in
            guard let text = try String.fetchOne(db, sql: "SELECT summary FROM baseline WHERE id = 1") else {
                return Summary()
            }
            return try Summary(parsing: text)
        }
    }

    /// The SHA-256 of a held change: the timeline's head hash, or the next change's `prev`. Nil when the
    /// change is not held, or is folded into the baseline short of its last folded change (its hash went
    /// with it).
    public func hash(of ref: ChangeRef) throws -> [UInt8]? {
        try read { db in try Self.hash(db, of: ref) }
    }

    static func hash(_ db: Database, of ref: ChangeRef) throws -> [UInt8]? {
        guard ref.seq >= 1 else { return nil }
        let timeline = timelineColumn(ref.timeline.rawValue)
        guard
            let head = try Row.fetchOne(
                db, sql: "SELECT head_seq, head_hash FROM timelines WHERE tl = ?", arguments: [timeline])
        else { return nil }
        let headSeq = UInt64(head[0] as Int64)
        if ref.seq > headSeq { return nil }
        if ref.seq == headSeq { return [UInt8](head[1] as Data) }
        // Stored changes run from just past the baseline to the head, so the baseline's last folded change
        // has a stored successor too; only changes folded short of that are gone.
        return try Data.fetchOne(
            db, sql: "SELECT prev FROM changes WHERE tl = ? AND seq = ?", arguments: [timeline, Int64(ref.seq + 1)]
        ).map { [UInt8]($0) }
    }

    /// An upper bound on the bytes a change takes inside a `Changes` message: its canonical encoding (the
    /// header fields are at most 100 bytes with their tags and lengths) plus the field's own tag and length.
    public static func encodedSizeBound(of change: Change) -> Int {
        change.payload.count + change.kind.utf8.count + 128
    }

    /// `encodedSizeBound(of:)` plus the `ChangeSignature` entry a signed change brings (64 bytes, index, tags).
    static func encodedSizeBound(of change: Change, signature: [UInt8]?) -> Int {
        encodedSizeBound(of: change) + (signature == nil ? 0 : ChangeSignature.size + 12)
    }

    /// One page of the changes a peer lacks, in replay order: the stored changes with
    /// `have[tl] < seq ≤ cap[tl]` that sort after `cursor`, at most `limit` of them and, past the first, at
    /// most `maxBytes` by `encodedSizeBound(of:)`. Each carries its real previous hash.
    ///
    /// `cap` is the summary fixed when the peer's Want arrived: rows added since (local edits, pulls) stay
    /// out of the stream, so paging through a store that keeps growing ends. Pass the last change of a page
    /// as the next page's cursor; an empty page means the stream is complete. The scan starts at the
    /// smallest Lamport time among the first missing change of each timeline, so a small gap reads only
    /// the end of the table. Changes folded into the baseline are not returned: the caller checks
    /// `baselineSummary()` first.
    public func missing(
        for have: Summary, within cap: Summary, after cursor: OrderKey?, limit: Int, maxBytes: Int = .max
    ) throws -> [Change] {
        let ranges = Self.ranges(have: have, cap: cap)
        guard !ranges.isEmpty, limit > 0 else { return [] }
        return try read { db in try Self.missing(db, ranges: ranges, after: cursor, limit: limit, maxBytes: maxBytes) }
    }

    /// `missing`, and the summary of the baseline, read in one transaction: a stream that finds the baseline
    /// grew (a compaction folded rows it was about to send) sends the new baseline before going on. `damaged`
    /// names, per timeline, the first change of the page whose hash is not what its chain says (bit rot, an
    /// edited row): the sender must not send it or anything after it of that timeline (DESIGN §10). Each change
    /// comes as it travels: its canonical bytes, encoded once, and its stored signature (DESIGN §11).
    public func streamPageEncoded(
        for have: Summary, within cap: Summary, after cursor: OrderKey?, limit: Int, maxBytes: Int = .max
    ) throws -> (baselineSummary: Summary, changes: [EncodedChange], damaged: [ChangeRef]) {
        let ranges = Self.ranges(have: have, cap: cap)
        return try read { db in
            let baseline = try String.fetchOne(db, sql: "SELECT summary FROM baseline WHERE id = 1")
                .map { try Summary(parsing: $0) } ?? Summary()
            guard !ranges.isEmpty, limit > 0 else { return (baseline, [], []) }
            var page: [EncodedChange] = []
            try Self.missing(db, ranges: ranges, after: cursor, limit: limit, maxBytes: maxBytes) {
                page.append(EncodedChange($0, signature: $1))
            }
            return (baseline, page, try Self.damagedInPage(db, page.map { $0.change }))
        }
    }

    /// Per timeline, what the peer lacks within the cap: `have < seq ≤ cap`.
    private static func ranges(have: Summary, cap: Summary) -> [(TimelineID, UInt64, UInt64)] {
        cap.timelines.compactMap { timeline in
            have[timeline] < cap[timeline] ? (timeline, have[timeline], cap[timeline]) : nil
        }
    }

    private static func missing(
        _ db: Database, ranges: [(TimelineID, UInt64, UInt64)], after cursor: OrderKey?, limit: Int, maxBytes: Int
    ) throws -> [Change] {
        var page: [Change] = []
        try missing(db, ranges: ranges, after: cursor, limit: limit, maxBytes: maxBytes) { change, _ in
            page.append(change)
        }
        return page
    }

    /// The rows of `missing`, each handed to `body` with its signature.
    private static func missing(
        _ db: Database, ranges: [(TimelineID, UInt64, UInt64)], after cursor: OrderKey?, limit: Int, maxBytes: Int,
        _ body: (Change, [UInt8]?) -> Void
    ) throws {
            let first = try db.cachedStatement(
                sql: "SELECT lamport FROM changes WHERE tl = ? AND seq > ? AND seq <= ? ORDER BY seq LIMIT 1")
            var startLamport: UInt64?
            for (timeline, low, high) in ranges {
                first.arguments = [timelineColumn(timeline.rawValue), Int64(low), Int64(high)]
                if let lamport = try Int64.fetchOne(first) {
                    startLamport = min(startLamport ?? .max, UInt64(lamport))
                }
            }
            guard let startLamport else { return }
            // Exclusive: every change at `startLamport` sorts after (startLamport, timeline 0, seq 0).
            var start = OrderKey(lamport: startLamport, timeline: TimelineID(0), seq: 0)
            if let cursor, cursor > start { start = cursor }
            // The ranges are filtered in SQL (numbers only, so they are written inline) with `+` so SQLite
            // walks the clustered primary key in replay order instead of sorting off the (tl, seq) index.
            let filter = ranges.map { timeline, low, high in
                "(+tl = \(timelineColumn(timeline.rawValue)) AND +seq > \(low) AND +seq <= \(high))"
            }.joined(separator: " OR ")
            let statement = try db.makeStatement(
                sql: """
                    SELECT \(try ChangeRows.columns(db)) FROM changes
                    WHERE (lamport, tl, seq) > (?, ?, ?) AND (\(filter))
                    ORDER BY lamport, tl, seq LIMIT ?
                    """)
            statement.arguments = [
                Int64(start.lamport), timelineColumn(start.timeline.rawValue), Int64(start.seq), limit,
            ]
            var count = 0
            var bytes = 0
            do {
                try ChangeRows.scanSigned(statement, withChain: true) { change, signature in
                    let size = Self.encodedSizeBound(of: change, signature: signature)
                    if count > 0 && bytes + size > maxBytes { throw StopIteration() }
                    bytes += size
                    count += 1
                    body(change, signature)
                }
            } catch is StopIteration {
            }
    }

    /// The query plan `missing` gets from SQLite, for tests that guard against a full sort.
    func missingQueryPlan(timelines: Int) throws -> [String] {
        try read { db in
            let filter = (0..<max(1, timelines)).map { "(+tl = \($0) AND +seq > 0 AND +seq <= 10)" }
                .joined(separator: " OR ")
            return try Row.fetchAll(
                db,
                sql: """
                    EXPLAIN QUERY PLAN SELECT \(try ChangeRows.columns(db)) FROM changes
                    WHERE (lamport, tl, seq) > (?, ?, ?) AND (\(filter)) ORDER BY lamport, tl, seq LIMIT ?
                    """,
                arguments: [0, 0, 0, 10]
            ).map { $0["detail"] as String }
        }
    }
}
