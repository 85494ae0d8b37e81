import Foundation
import GRDB
import PlaitCore

/// A baseline being pulled from a peer: what has arrived so far, staged apart from the live data.
public struct StagedBaseline: Sendable, Equatable {
    /// The summary of the baseline being received.
    public var summary: Summary
    /// SHA-256 of the whole encoded baseline, when known (the peer's Hello announced it).
    public var digest: [UInt8]?
    /// Its encoded size.
    public var total: UInt64
    /// Bytes staged so far: where a resumed transfer continues.
    public var staged: UInt64
}

/// A device's own baseline as it travels: the encoded bytes exactly as stored (their SHA-256 is the digest
/// in Hello) and its summary.
public struct EncodedBaseline: Sendable, Equatable {
    public var summary: Summary
    public var bytes: [UInt8]
    /// Why the stored bytes are not the ones stored (`Store.baselineDamage`), with `bytes` empty: such a baseline is
    /// never sent, and a peer that needs it is refused.
    public var damage: String?

    public init(summary: Summary, bytes: [UInt8], damage: String? = nil) {
        self.summary = summary
        self.bytes = bytes
        self.damage = damage
    }
}

/// What adopting a pulled baseline did.
public struct BaselineAdoption: Sendable {
    /// False when the local baseline already covered it (nothing was written).
    public var changed: Bool
    /// The baseline now held (the join of the local one and the pulled one).
    public var summary: Summary
    /// Stored changes dropped because the joined baseline now holds them.
    public var foldedAway: Int
    /// Changes replayed on top of the new baseline.
    public var replayed: Int
    /// The baseline held this device's own timeline beyond its head: the timeline is marked as one that may
    /// continue elsewhere (see `Replica.IntegrateResult.ownTimelineContinued`).
    public var ownTimelineContinued: TimelineID?
    /// The changes of the own timeline the baseline folds but could not be checked against, kept aside (not
    /// dropped); those of the device's earlier timelines signed with its key are kept aside too (`plait doctor`).
    public var keptAside: ClosedRange<UInt64>? = nil
    /// With `ownTimelineContinued`: the next edit begins a new timeline by itself (the own timeline is signed, or
    /// lost a fork), so nothing waits for `plait rejoin`; false when authoring is stopped until then.
    public var authoringGoesOn = false
}

extension Store {
    /// This device's baseline as stored, or nil without one.
    public func encodedBaseline() throws -> EncodedBaseline? {
        try read { db in try Self.encodedBaseline(db) }
    }

    static func encodedBaseline(_ db: Database) throws -> EncodedBaseline? {
        guard let row = try Row.fetchOne(db, sql: "SELECT summary, data FROM baseline WHERE id = 1") else { return nil }
        let bytes = [UInt8](row[1] as Data)
        // A damaged baseline is never sent: the receiver would adopt the damage as source. Its summary still says
        // what it folds, so that a session can tell whether the peer needs it at all.
        let summary = try Summary(parsing: row[0] as String)
        if let damage = try baselineDamage(db, digest: SHA256.hash(bytes)) {
            return EncodedBaseline(summary: summary, bytes: [], damage: damage)
        }
        return EncodedBaseline(summary: summary, bytes: bytes)
    }

    /// The baseline staged from `peer`, or nil.
    public func stagedBaseline(from peer: String) throws -> StagedBaseline? {
        try read { db in try Self.stagedBaseline(db, from: peer) }
    }

    static func stagedBaseline(_ db: Database, from peer: String) throws -> StagedBaseline? {
        guard
            let row = try Row.fetchOne(
                db, sql: "SELECT summary, digest, total FROM staged_baselines WHERE peer = ?", arguments: [peer])
        else { return nil }
        let staged = try Int64.fetchOne(
            db, sql: "SELECT coalesce(sum(length(data)), 0) FROM staged_baseline_chunks WHERE peer = ?",
            arguments: [peer]) ?? 0
        return StagedBaseline(
            summary: try Summary(parsing: row[0] as String), digest: (row[1] as Data?).map { [UInt8]($0) },
            total: UInt64(row[2] as Int64), staged: UInt64(staged))
    }

    /// The largest baseline a peer may stage here: far beyond real list data (a snapshot holds each live item's
    /// ID, list, position and text once). Without a bound one paired device staged 403 MB in 4 s (a hostile
    /// tester) and could have filled the disk; adoption reads the whole baseline into memory too.
    public static let maxBaselineBytes: UInt64 = 256 << 20

    /// Stages one chunk of a baseline pulled from `peer`, in its own transaction. A chunk at offset 0 starts
    /// the baseline afresh (dropping anything staged from that peer); any other must continue exactly where
    /// the staged one ends, with the same summary and size. Returns the bytes staged after it.
    public func stageBaselineChunk(
        from peer: String, summary: Summary, digest: [UInt8]?, total: UInt64, offset: UInt64, data: [UInt8]
    ) throws -> UInt64 {
        guard total <= Self.maxBaselineBytes else {
            throw StoreError.rejected(
                .corruptSnapshot(
                    "a baseline of \(total) bytes is larger than this device takes (\(Self.maxBaselineBytes >> 20) MiB)"))
        }
        return try write { db in
            if offset == 0 {
                try db.execute(sql: "DELETE FROM staged_baseline_chunks WHERE peer = ?", arguments: [peer])
                try db.execute(
                    sql: "INSERT OR REPLACE INTO staged_baselines (peer, summary, digest, total) VALUES (?, ?, ?, ?)",
                    arguments: [peer, summary.description, digest.map { Data($0) }, Int64(total)])
            } else {
                guard let staged = try Self.stagedBaseline(db, from: peer) else {
                    throw StoreError.rejected(.corruptSnapshot("a baseline chunk at offset \(offset) with nothing staged"))
                }
                guard staged.summary == summary, staged.total == total, staged.staged == offset else {
                    throw StoreError.rejected(
                        .corruptSnapshot(
                            "a baseline chunk at offset \(offset) does not continue the staged one "
                                + "(\(staged.staged) of \(staged.total) bytes staged)"))
                }
            }
            guard offset + UInt64(data.count) <= total else {
                throw StoreError.rejected(.corruptSnapshot("a baseline chunk runs past the baseline's size"))
            }
            if !data.isEmpty {
                try db.execute(
                    sql: "INSERT INTO staged_baseline_chunks (peer, offset, data) VALUES (?, ?, ?)",
                    arguments: [peer, Int64(offset), Data(data)])
            }
            return offset + UInt64(data.count)
        }
    }

    /// Drops what is staged from `peer`.
    public func discardStagedBaseline(from peer: String) throws {
        try write { db in
            try db.execute(sql: "DELETE FROM staged_baseline_chunks WHERE peer = ?", arguments: [peer])
            try db.execute(sql: "DELETE FROM staged_baselines WHERE peer = ?", arguments: [peer])
        }
    }
}

extension Replica {
    /// Swaps in the complete baseline staged from `peer`, in one transaction (`adopt`), and drops the
    /// staging. A staged baseline that is incomplete, does not match its digest or does not decode is
    /// dropped and refused, and nothing else changes.
    public func adoptStagedBaseline(from peer: String) throws -> BaselineAdoption {
        let assembled: (StagedBaseline, [UInt8])? = try store.read { db in
            guard let staged = try Store.stagedBaseline(db, from: peer) else { return nil }
            var bytes: [UInt8] = []
            bytes.reserveCapacity(Int(staged.total))
            let rows = try Data.fetchCursor(
                db, sql: "SELECT data FROM staged_baseline_chunks WHERE peer = ? ORDER BY offset", arguments: [peer])
            while let data = try rows.next() { bytes.append(contentsOf: data) }
            return (staged, bytes)
        }
        guard let (staged, bytes) = assembled else {
            throw StoreError.rejected(.corruptSnapshot("no baseline is staged from this peer"))
        }
        do {
            guard UInt64(bytes.count) == staged.total else {
                throw StoreError.rejected(
                    .corruptSnapshot("the staged baseline has \(bytes.count) of its \(staged.total) bytes"))
            }
            if let digest = staged.digest, SHA256.hash(bytes) != digest {
                throw StoreError.rejected(.corruptSnapshot("the pulled baseline does not match the digest its sender announced"))
            }
            let baseline: Baseline
            do {
                baseline = try Baseline(decoding: bytes[...])
            } catch {
                throw StoreError.rejected(error)
            }
            guard baseline.summary == staged.summary else {
                throw StoreError.rejected(.corruptSnapshot("the pulled baseline holds another summary than announced"))
            }
            return try adopt(baseline, droppingStagedFrom: peer)
        } catch {
            try? store.discardStagedBaseline(from: peer)
            throw error
        }
    }

    /// Keeps aside, before a baseline is adopted, this device's own changes that it folds but that cannot be
    /// checked against it (DESIGN §10: nothing lost). A baseline names each timeline's last folded change by its hash
    /// only, so held changes of a timeline that stop short of that entry could be the ones it folds (a home restored
    /// from a backup) or another copy's changes at the same numbers (a copied home whose other copy compacted): only
    /// a held change at the entry (its hash compared) or a fork record saying where both copies part can tell. Other
    /// devices' changes are dropped as before (their author holds them); this device's own, on any timeline signed
    /// with its key, may exist nowhere else, so they move to `kept_aside` with their bytes and signatures.
    /// Returns the range kept aside of the current own timeline, if any.
    static func keepAsideUncheckedOwnChanges(
        _ db: Database, own: TimelineID, joined: Baseline, now: Int64 = Replica.now()
    ) throws -> ClosedRange<UInt64>? {
        let ownCertificate = try Store.certificate(db, of: own)
        var keptOfOwn: ClosedRange<UInt64>?
        for timeline in joined.summary.timelines {
            let folded = joined.summary[timeline]
            let ours = try timeline == own || (ownCertificate != nil && Store.certificate(db, of: timeline) == ownCertificate)
            guard ours else { continue }
            let column = timelineColumn(timeline.rawValue)
            guard let range = try Row.fetchOne(
                db, sql: "SELECT min(seq), max(seq) FROM changes WHERE tl = ? AND seq <= ?",
                arguments: [column, Int64(clamping: folded)]),
                let low = range[0] as Int64?, let high = range[1] as Int64?
            else { continue }
            // The change at the entry is held: its hash was compared with the entry's (a mismatch refused the baseline).
            if UInt64(clamping: high) == folded { continue }
            // A fork record says a branch left this timeline right after the held head: the rival that continues
            // the held head is on the timeline the baseline folds, so what is held here is shared by both copies.
            if try Store.forkRecords(db, root: timeline).contains(where: {
                $0.parent == timeline && $0.base == UInt64(clamping: high)
            }) { continue }
            try Store.keepAside(
                db, timeline, through: folded, now: now,
                reason: "a peer's baseline folds this timeline up to change \(folded), beyond these changes, and "
                    + "cannot show that they are among the changes it folds (this home was copied, or restored from a "
                    + "backup)")
            if timeline == own { keptOfOwn = UInt64(clamping: low)...UInt64(clamping: high) }
        }
        return keptOfOwn
    }

    /// A pulled baseline's `superseded_at` for a signed timeline is not believed (PROTOCOL.md §20.9): only a begin of
    /// the timeline's own key may supersede it (§20.5), and a baseline folds that begin without its signature, so
    /// nothing shows the key made it. The second hostile tester of 2026-11-25 sent a baseline marking an honest
    /// device's timeline superseded at the receiver's head of it, backed by a second timeline it invented under that
    /// device's certificate (anyone can derive a timeline ID from a certificate and a nonce of their choosing): the
    /// receiver then refused every later change of that timeline, and the author was told nothing. The flag is kept
    /// only where this store already holds it (its own baseline, or a begin it verified) and for unsigned timelines
    /// (§20.10: any key may supersede them). What is lost: a device that meets an owner's supersession only inside a
    /// baseline does not stop that timeline at its head (the owner's `timeline.end`, a signed change, still does).
    static func dropUnwitnessedSupersessions(
        _ db: Database, _ joined: inout Baseline, current: Baseline?, incoming: Baseline
    ) throws {
        guard try Store.recordsAuthors(db) else { return }
        for (timeline, seq) in joined.superseded.sorted(by: { $0.key < $1.key }) {
            if let known = current?.superseded[timeline], known <= seq { continue }
            let held = try heldHead(db, timeline)
            if let known = held?.supersededAt, known <= seq { continue }
            guard held?.certificate ?? incoming.certificates[timeline] ?? current?.certificates[timeline] != nil else {
                continue
            }
            joined.superseded[timeline] = current?.superseded[timeline]
        }
    }

    /// Refuses a baseline whose word about authors contradicts what this store holds (PROTOCOL.md §20.9). A baseline
    /// is believed for what it folds, since a snapshot cannot be checked without its changes; but a paired peer's
    /// baseline once marked another device's timeline ended, or superseded, at a head this store held and could see
    /// was neither, and every later change of that timeline was then refused here (and relayed baselines spread it).
    /// Refused, naming what contradicts:
    /// - `ended` at change N of a timeline held beyond N, or held up to N where change N is not a `timeline.end`
    ///   (the heads' hashes were compared before: the change at N is the very change the baseline folded);
    /// - a certificate for a timeline whose own begin this store holds with another certificate (the timeline ID
    ///   derives from the begin's certificate, PROTOCOL.md §20.5);
    /// - `superseded_at` for a signed timeline when no other timeline of the same certificate is held here or
    ///   folded in the baseline: only a begin of its own key may supersede it (§20.5). A peer that also invents
    ///   such a timeline in its baseline is believed, as for the rest of a baseline; an unsigned timeline may be
    ///   superseded by any key (§20.10).
    /// Flags this store already holds (from its own baseline or changes) are not judged again.
    static func refuseFlagsContradictingHeld(_ db: Database, _ incoming: Baseline, current: Baseline?) throws {
        func refuse(_ reason: String) -> StoreError { .rejected(.corruptSnapshot(reason)) }
        for timeline in incoming.ended.sorted() where current?.ended.contains(timeline) != true {
            let seq = incoming.summary[timeline]
            guard let held = try heldHead(db, timeline), !held.ended else { continue }
            if held.seq > seq {
                throw refuse(
                    "it marks timeline \(timeline) ended at change \(seq), but this device holds that timeline up to "
                        + "change \(held.seq)")
            }
            if held.seq == seq {
                throw refuse(
                    "it marks timeline \(timeline) ended at change \(seq), but this device holds change \(seq) and it "
                        + "is not a timeline.end")
            }
        }
        guard try Store.recordsAuthors(db) else { return }
        for (timeline, claimed) in incoming.certificates.sorted(by: { $0.key < $1.key }) {
            let held = try Store.certificate(db, of: timeline)
            if let held, held != claimed {
                throw refuse(
                    "it names another certificate for timeline \(timeline) than the one its timeline.begin, held "
                        + "here, carries")
            }
            // Item 5: a certificate this device does not hold yet is taken only with the nonce that derives the
            // timeline from it (§20.5). Without it a paired peer could name its own key for another device's
            // timeline, then sign changes of that timeline: they were taken, and the real ones refused as a fork.
            if let nonce = incoming.nonces[timeline] {
                if let problem = Baseline.keyProblem(timeline, certificate: claimed, nonce: nonce) { throw refuse(problem) }
            } else if held == nil {
                throw refuse(
                    "it names a certificate for timeline \(timeline) without the nonce of that timeline's begin, and "
                        + "this device holds neither the begin nor its certificate, so it cannot check that the "
                        + "certificate is that timeline's (a baseline folded by an older plait carries no nonce)")
            }
        }
        for (timeline, seq) in incoming.superseded.sorted(by: { $0.key < $1.key }) {
            if let known = current?.superseded[timeline], known <= seq { continue }
            let held = try heldHead(db, timeline)
            if let known = held?.supersededAt, known <= seq { continue }
            // The timeline's key as held, else as the baseline records it; neither: unsigned or unknown here.
            guard let key = held?.certificate ?? incoming.certificates[timeline] else { continue }
            let sameKeyFolded = incoming.certificates.contains { $0.key != timeline && $0.value == key }
            let sameKeyHeld = try Bool.fetchOne(
                db, sql: "SELECT EXISTS (SELECT 1 FROM timelines WHERE certificate = ? AND tl != ?)",
                arguments: [Data(key), timelineColumn(timeline.rawValue)]) ?? false
            if !sameKeyFolded && !sameKeyHeld {
                throw refuse(
                    "it marks timeline \(timeline) superseded at change \(seq), but no other timeline of that "
                        + "timeline's key is held here or folded in it, and only a timeline.begin of the same key may "
                        + "supersede a signed timeline")
            }
        }
    }

    /// Adopts a peer's baseline (DESIGN §2): the local baseline becomes the join of both, stored changes it
    /// now holds are dropped, timelines it holds further than this store are advanced to it, and the state is
    /// replayed as join + the changes it does not cover. One transaction; a baseline that contradicts a held
    /// history (another hash at one of its heads) is refused whole.
    public func adopt(_ incoming: Baseline, droppingStagedFrom peer: String? = nil) throws -> BaselineAdoption {
        try transaction { db in
            if let peer {
                try db.execute(sql: "DELETE FROM staged_baseline_chunks WHERE peer = ?", arguments: [peer])
                try db.execute(sql: "DELETE FROM staged_baselines WHERE peer = ?", arguments: [peer])
            }
            let current: Baseline?
            do {
                current = try Store.baseline(db)
            } catch StoreError.damagedBaseline {
                // A damaged baseline is healed by a peer's that folds everything it folded (DESIGN §10): replaced
                // whole, since nothing of it can be trusted to join. What it folded is read from its summary column
                // (its damaged bytes may say anything). A baseline that folds less is not adopted: every change it
                // folds is held here already, in the damaged baseline or as a stored change, so nothing is lost.
                let folded = try String.fetchOne(db, sql: "SELECT summary FROM baseline WHERE id = 1")
                    .map { try Summary(parsing: $0) } ?? Summary()
                guard folded.timelines.allSatisfy({ incoming.summary[$0] >= folded[$0] }) else {
                    return BaselineAdoption(changed: false, summary: folded, foldedAway: 0, replayed: 0)
                }
                current = nil
            }
            var joined: Baseline
            do {
                // Checking the snapshot up front (it is decoded there) refuses a damaged one, or one naming what the
                // baseline does not fold, before anything is written.
                try domain.checkSnapshot(
                    incoming.snapshot[...], folds: incoming.summary, maxLamport: incoming.maxLamport)
                joined = try current.map { try $0.joined(with: incoming, domain: domain) } ?? incoming
            } catch let error as CoreError {
                throw StoreError.rejected(error)
            }
            // Lamport bounds (DESIGN §10): a baseline claiming times past the limit is refused whole.
            if incoming.maxLamport > Lamport.max || incoming.headLamports.values.contains(where: { $0 > Lamport.max }) {
                throw StoreError.rejected(
                    .corruptSnapshot("the pulled baseline holds a Lamport time above the limit of 2^62"))
            }
            // Nor may it claim a time far beyond what this device holds (PROTOCOL.md §15, `Lamport.maxJump`): nothing
            // witnesses a baseline's times, and one at 2^62 - 1 would stop this device's writes for good.
            let heldLamport = max(try Store.largestHeldLamport(db), current?.maxLamport ?? 0)
            let ceiling = Lamport.ceiling(held: heldLamport, count: incoming.summary.count)
            let claimed = max(incoming.maxLamport, incoming.headLamports.values.max() ?? 0)
            if claimed > ceiling {
                throw StoreError.rejected(.corruptSnapshot(
                    "the pulled baseline claims Lamport time \(claimed), more than 2^32 above the largest this device "
                        + "holds (it takes at most \(ceiling)): no honest clock jumps so far"))
            }
            try Self.dropUnwitnessedSupersessions(db, &joined, current: current, incoming: incoming)
            if let current, joined == current {
                return BaselineAdoption(changed: false, summary: current.summary, foldedAway: 0, replayed: 0)
            }
            let own = try Store.ownTimeline(db)
            let ownHeadBefore = try Self.heldHead(db, own)
            // Fork records first (PROTOCOL.md §22.8): held changes a record says started a branch that lost are
            // named as the folding device named them, so what is folded below is dropped under the right name
            // and what it did not fold (a losing copy's later changes) stays.
            var renamed = false
            for root in try Store.learnForkRecords(db, incoming.forks).sorted() {
                renamed = try Store.renameForks(db, root: root) || renamed
            }
            for timeline in incoming.summary.timelines {
                let seq = incoming.summary[timeline]
                if let held = try Store.hash(db, of: ChangeRef(timeline: timeline, seq: seq)),
                    held != incoming.heads[timeline]
                {
                    throw StoreError.rejected(.fork(timeline: timeline, seq: seq))
                }
            }
            try Self.refuseFlagsContradictingHeld(db, incoming, current: current)
            let ownHead = try Int64.fetchOne(
                db, sql: "SELECT head_seq FROM timelines WHERE tl = ?", arguments: [timelineColumn(own.rawValue)]) ?? 0
            let keptAside = try Self.keepAsideUncheckedOwnChanges(db, own: own, joined: joined)
            var foldedAway = 0
            for timeline in joined.summary.timelines {
                let seq = joined.summary[timeline]
                let column = timelineColumn(timeline.rawValue)
                try db.execute(sql: "DELETE FROM changes WHERE tl = ? AND seq <= ?", arguments: [column, Int64(seq)])
                foldedAway += db.changesCount
                try db.execute(
                    sql: """
                        INSERT INTO timelines (tl, head_seq, head_lamport, head_hash, ended) VALUES (?, ?, ?, ?, ?)
                        ON CONFLICT (tl) DO UPDATE SET
                            head_seq = max(head_seq, excluded.head_seq),
                            head_lamport = CASE WHEN excluded.head_seq > head_seq THEN excluded.head_lamport ELSE head_lamport END,
                            head_hash = CASE WHEN excluded.head_seq > head_seq THEN excluded.head_hash ELSE head_hash END,
                            ended = max(ended, excluded.ended)
                        """,
                    arguments: [
                        column, Int64(seq), Int64(joined.headLamports[timeline] ?? 0),
                        Data(joined.heads[timeline] ?? Change.zeroHash), joined.ended.contains(timeline) ? 1 : 0,
                    ])
            }
            if try Store.recordsAuthors(db) {
                // What the baseline says of authors (DESIGN §11): the certificate of each signed timeline whose
                // begin it folds (a branch's is its root's), so the changes after it are still verified, and where
                // a folded begin superseded a timeline.
                for (timeline, certificate) in joined.certificates where try Store.certificate(db, of: timeline) == nil {
                    try Store.recordCertificate(db, timeline, certificate)
                }
                for record in joined.forks {
                    if let certificate = try Store.certificate(db, of: record.root) {
                        try Store.recordCertificate(db, record.branch, certificate)
                    }
                }
                for (timeline, seq) in joined.superseded { try Store.markSuperseded(db, timeline, at: seq) }
            }
            try Store.writeBaseline(db, joined)
            try db.execute(sql: "DELETE FROM checkpoints")
            var continued: TimelineID?
            // Whether the next edit begins a new timeline by itself (nothing waits for `plait rejoin`).
            var goesOn = false
            if renamed, let ownHeadBefore, try Self.heldHead(db, own)?.hash != ownHeadBefore.hash {
                // The own head now stands on a branch that lost (DESIGN §11): the next edit begins a new timeline.
                try Meta.set(db, .ownTimelineForkedAway, "1")
                continued = own
                goesOn = true
            } else if joined.summary[own] > UInt64(clamping: ownHead), try Store.certificate(db, of: own) != nil {
                // A signed own timeline: a baseline's summary is a paired peer's word, not a change signed by this
                // key (DESIGN §11), so authoring is not stopped; the next edit begins a new signed timeline, past
                // whatever the baseline says stands on this one. Reported all the same.
                try Meta.set(db, .ownTimelineForkedAway, "1")
                continued = own
                goesOn = true
            } else if joined.summary[own] > UInt64(clamping: ownHead) {
                // The peer held this device's own timeline beyond its head: a restored or copied home. Nothing more
                // is authored on it until `plait rejoin` (DESIGN §10: detect and report, never guess).
                try Self.markOwnTimelineSuspect(
                    db, own, reason: "a peer's baseline holds it beyond this device's head (this home was restored "
                        + "from a backup or copied)")
                continued = own
            }
            let replayed = try replayAll(db).changes
            return BaselineAdoption(
                changed: true, summary: joined.summary, foldedAway: foldedAway, replayed: replayed,
                ownTimelineContinued: continued, keptAside: keptAside,
                authoringGoesOn: goesOn)
        }
    }
}
