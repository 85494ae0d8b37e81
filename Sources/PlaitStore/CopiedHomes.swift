import Foundation
import GRDB
import PlaitCore

/// A Device ID seen running from more than one home at once (DESIGN §11 "Copied homes"): by this device at a
/// peer's ID (two connections with different instance nonces), or at its own ID (a peer said so, or the copies
/// met). One row per Device ID, whichever instances were seen.
public struct CopiedHomeRecord: Hashable, Sendable {
    public var deviceID: String
    /// The instance nonces seen connected at once (16 bytes each), sorted.
    public var instances: [[UInt8]]
    /// Milliseconds since 1970: when first seen, and when last confirmed.
    public var firstSeen: Int64
    public var lastSeen: Int64
    /// The peer whose Notify said so, when this device did not see the instances itself (its own Device ID: a
    /// peer's report cannot be checked here, PROTOCOL.md §13.2 item 6); nil when it saw them itself.
    public var reportedBy: String?
}

extension Store {
    /// How long a copied home stays reported after it was last confirmed: the copies stop meeting once one of them
    /// ran `plait rejoin --new-key` (or was removed), and nothing else tells a device that it is over.
    public static let copiedHomeReportWindow: Int64 = 24 * 3600 * 1000
    /// Instances kept per Device ID at most (a home copied many times is named by its first few).
    static let copiedInstancesKept = 8

    /// Records (or confirms) that `deviceID` runs from the homes of `instances`; instances already known stay.
    /// `reportedBy`: the peer that said so, when this device did not see it itself. Once seen here, a row stays
    /// first-hand.
    public func recordCopiedHome(deviceID: String, instances: [[UInt8]], reportedBy: String? = nil, now: Int64) throws {
        try write { db in
            let known = try Self.copiedHomes(db).first { $0.deviceID == deviceID }
            let merged = Array(Set((known?.instances ?? []) + instances)).sorted { $0.lexicographicallyPrecedes($1) }
            let text = merged.prefix(Self.copiedInstancesKept).map(\.hexString).joined(separator: ",")
            let reporter = known.map { $0.reportedBy == nil ? nil : reportedBy } ?? reportedBy
            try db.execute(
                sql: """
                    INSERT INTO copied_homes (device_id, instances, first_seen, last_seen, reported_by)
                    VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (device_id) DO UPDATE SET instances = excluded.instances,
                        last_seen = excluded.last_seen, reported_by = excluded.reported_by
                    """,
                arguments: [deviceID, text, now, now, reporter])
        }
    }

    /// The copied homes confirmed within `copiedHomeReportWindow` before `now`, by Device ID.
    public func copiedHomes(now: Int64) throws -> [CopiedHomeRecord] {
        try read { db in try Self.copiedHomes(db).filter { now - $0.lastSeen <= Self.copiedHomeReportWindow } }
    }

    /// `copiedHomes(now:)` through a read-only connection (`plait doctor` writes nothing).
    public static func copiedHomes(readOnlyAt path: String, now: Int64) throws -> [CopiedHomeRecord] {
        try readingOnly(at: path) { db in try copiedHomes(db).filter { now - $0.lastSeen <= copiedHomeReportWindow } }
    }

    static func copiedHomes(_ db: Database) throws -> [CopiedHomeRecord] {
        try Row.fetchAll(
            db,
            sql: "SELECT device_id, instances, first_seen, last_seen, reported_by FROM copied_homes ORDER BY device_id"
        ).map { row in
            let text: String = row[1]
            let instances = text.split(separator: ",").compactMap { [UInt8](hexString: String($0)) }
            return CopiedHomeRecord(
                deviceID: row[0], instances: instances, firstSeen: row[2], lastSeen: row[3], reportedBy: row[4])
        }
    }
}
