import Foundation
import GRDB
import PlaitCore

/// A timeline's head record (its `timelines` row: number, Lamport time and hash of its last change) that does not
/// describe the last change stored for it, while that change is shown intact: its signature verifies over its own
/// hash, or the record's hash is that hash (only the number or the Lamport time is off).
///
/// The record is bookkeeping written beside the change rows in the same transaction; the change rows are the
/// source. One flipped bit in `head_hash` or `head_seq` (bad-luck tester 2026-11-25, H5) made the next local edit
/// chain to a wrong hash or take a number past a gap: `add` said "added", and every peer refused that edit, or the
/// sender set it aside as damaged. And `doctor` blamed the intact last change, or said nothing.
public struct HeadRecordFault: Sendable, Equatable, CustomStringConvertible {
    public var timeline: TimelineID
    /// What the record says.
    public var recorded: (seq: UInt64, lamport: UInt64)
    /// The last stored change of the timeline, with its hash: what the record must say.
    public var last: (seq: UInt64, lamport: UInt64, hash: [UInt8])
    /// Whether the recorded hash differs from the last change's.
    public var hashDiffers: Bool

    public static func == (a: Self, b: Self) -> Bool {
        a.timeline == b.timeline && a.recorded == b.recorded && a.last == b.last && a.hashDiffers == b.hashDiffers
    }

    public var description: String {
        var off: [String] = []
        if recorded.seq != last.seq { off.append("change \(recorded.seq)") }
        if recorded.lamport != last.lamport { off.append("Lamport time \(recorded.lamport)") }
        if hashDiffers { off.append("another hash") }
        return "the head record of timeline \(timeline) names \(off.joined(separator: ", ")), but its last stored "
            + "change is \(timeline):\(last.seq) (Lamport time \(last.lamport)), intact"
    }
}

extension Store {
    /// How a timeline's head record stands against its last stored change.
    enum HeadCheck {
        /// The record describes the last stored change (or nothing is stored: timelines held only in the baseline
        /// are not checked here).
        case agrees
        /// The record is the damaged part: the change is shown intact.
        case recordDamaged(HeadRecordFault)
        /// They differ and the change is not shown intact (its own bytes may be what changed), or a stale index
        /// entry hides the real last change: nothing to mend here.
        case mismatch(ChangeRef)
    }

    /// Every timeline whose head record does not describe its last stored change while that change is shown
    /// intact (`HeadRecordFault`). Reads one change per timeline; verifies a signature only where the record
    /// disagrees.
    static func headRecordFaults(_ db: Database) throws -> [HeadRecordFault] {
        try Row.fetchAll(db, sql: "SELECT tl, head_seq, head_lamport, head_hash FROM timelines").compactMap { row in
            guard case let .recordDamaged(fault) = try checkHead(db, row) else { return nil }
            return fault
        }
    }

    /// `checkHead` of one timeline's record; `.agrees` when it has none.
    static func checkHead(_ db: Database, of timeline: TimelineID) throws -> HeadCheck {
        guard let row = try Row.fetchOne(
            db, sql: "SELECT tl, head_seq, head_lamport, head_hash FROM timelines WHERE tl = ?",
            arguments: [timelineColumn(timeline.rawValue)])
        else { return .agrees }
        return try checkHead(db, row)
    }

    /// A head record (`tl, head_seq, head_lamport, head_hash`) against its timeline's last stored change, which is
    /// "shown intact" when the record's own hash is its hash (so its bytes are as written; only the number or the
    /// Lamport time is off) or its signature verifies over its hash under its timeline's key (every stored head of a
    /// signed timeline is signed).
    private static func checkHead(_ db: Database, _ row: Row) throws -> HeadCheck {
        let column = try row.decode(Int64.self, atIndex: 0)
        let recordedSeq = UInt64(bitPattern: try row.decode(Int64.self, atIndex: 1))
        let recordedLamport = UInt64(bitPattern: try row.decode(Int64.self, atIndex: 2))
        let recordedHash = [UInt8](try row.decode(Data.self, atIndex: 3))
        let last = try db.cachedStatement(
            sql: "SELECT \(try ChangeRows.columns(db)) FROM changes WHERE tl = ? ORDER BY seq DESC LIMIT 1")
        last.arguments = [column]
        var found: (Change, [UInt8]?)?
        try ChangeRows.scanSigned(last, withChain: true) { change, signature in found = (change, signature) }
        guard let (change, signature) = found else { return .agrees }
        let hash = SHA256.hash(change.canonicalBytes)
        if recordedSeq == change.seq && recordedLamport == change.lamport && recordedHash == hash { return .agrees }
        let intact = recordedHash == hash
            || signature.map { signature in
                ((try? certificate(db, of: change.timeline)) ?? nil).map {
                    Replica.verifier.verify(signature: signature, changeHash: hash, certificate: $0)
                } ?? false
            } ?? false
        guard intact else { return .mismatch(change.ref) }
        // The last change is found through the `changes_by_timeline` index; a stale entry there can hide the real
        // last one (H4). Later changes of a timeline have later Lamport times, so the table itself (its primary key
        // starts with the Lamport time) is asked for any beyond it: then the index, not the record, is what is
        // damaged, and `repair` rebuilds it.
        let beyond = try Int64.fetchOne(
            db, sql: "SELECT max(seq) FROM changes NOT INDEXED WHERE lamport >= ? AND tl = ?",
            arguments: [Int64(bitPattern: change.lamport), column])
        if let beyond, UInt64(bitPattern: beyond) > change.seq { return .mismatch(change.ref) }
        return .recordDamaged(
            HeadRecordFault(
                timeline: change.timeline, recorded: (recordedSeq, recordedLamport),
                last: (change.seq, change.lamport, hash), hashDiffers: recordedHash != hash))
    }

    /// Rewrites each faulty head record from its last stored change (the caller holds the transaction).
    static func mendHeadRecords(_ db: Database, _ faults: [HeadRecordFault]) throws {
        for fault in faults {
            try db.execute(
                sql: "UPDATE timelines SET head_seq = ?, head_lamport = ?, head_hash = ? WHERE tl = ?",
                arguments: [
                    Int64(fault.last.seq), Int64(fault.last.lamport), Data(fault.last.hash),
                    timelineColumn(fault.timeline.rawValue),
                ])
        }
    }
}

extension Replica {
    /// Finds head records that do not describe their timeline's intact last change and rewrites them from it
    /// (`HeadRecordFault`): what a sync, the agent's start and `repair` do first, so that the Hello's heads and the
    /// next edit's chain are the stored changes'. Writes only when it finds one. Returns what it mended.
    @discardableResult
    public func mendHeadRecords() throws -> [HeadRecordFault] {
        guard try !store.read({ db in try Store.headRecordFaults(db) }).isEmpty else { return [] }
        return try transaction { db in
            let faults = try Store.headRecordFaults(db)
            try Store.mendHeadRecords(db, faults)
            return faults
        }
    }
}
