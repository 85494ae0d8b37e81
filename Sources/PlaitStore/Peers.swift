import Foundation
import GRDB
import PlaitCore

/// A device this one trusts.
public struct PeerRecord: Hashable, Sendable {
    /// The Device ID in its grouped text form.
    public var deviceID: String
    public var name: String
    /// The last address it was reached at, `host:port`.
    public var address: String?
    /// Milliseconds since 1970.
    public var pairedAt: Int64
    public var lastSeen: Int64?
    /// Its summary when last seen: what it has acknowledged holding.
    public var lastSummary: Summary?
    /// The hash, as held here when it was acknowledged, of the change at each entry of `lastSummary` (an entry
    /// whose change was folded without its hash has none): what the acknowledgement covers after a fork renames.
    public var lastHeads: [TimelineID: [UInt8]] = [:]
    /// What the last session with it found wrong (DESIGN §10), one sentence each; nil when nothing.
    public var diverged: String?
    public var refused: String?
    public var claim: String?
    /// The Device ID that a statement signed by this device's key named as its successor (PROTOCOL.md §21).
    public var succeededBy: String?
    /// When (milliseconds since 1970) the peer last refused this device after the TLS handshake, if no session
    /// with it got as far as its Hello since: it does not hold this device as paired (any more).
    public var refusedThisDeviceAt: Int64?
    /// Why the last session with it failed to sync what the two hold, and when (milliseconds since 1970), if no
    /// session has ended well since.
    public var failed: String? = nil
    public var failedAt: Int64? = nil
}

/// A device that tried to connect without being paired. Its name is what it claimed: unverified.
public struct PendingPeerRecord: Hashable, Sendable {
    public var deviceID: String
    public var name: String
    public var address: String?
    public var firstSeen: Int64
    public var lastSeen: Int64
    public var attempts: Int
}

extension Store {
    /// Pending devices kept at most; the least recently seen is dropped first.
    public static let pendingLimit = 16

    /// Trusts a device (or updates its name and address). Removes it from the pending list and forgets that it
    /// was unpaired: trusting is the user's explicit pairing (`plait pair`), which alone undoes an unpair.
    public func trust(deviceID: String, name: String, address: String?, now: Int64) throws {
        try write { db in
            try db.execute(
                sql: """
                    INSERT INTO peers (device_id, name, address, paired_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT (device_id) DO UPDATE SET name = excluded.name,
                    address = coalesce(excluded.address, address)
                    """,
                arguments: [deviceID, name, address, now])
            try db.execute(sql: "DELETE FROM pending_peers WHERE device_id = ?", arguments: [deviceID])
            try db.execute(sql: "DELETE FROM unpaired_devices WHERE device_id = ?", arguments: [deviceID])
        }
    }

    /// Revokes trust and remembers that the user unpaired the device (no peer's succession statement brings it
    /// back, PROTOCOL.md §21); returns whether the device was paired. A baseline it was sending is dropped with it
    /// (up to 256 MiB kept for a resume that can no longer come), and any other staged for a device not paired.
    @discardableResult
    public func untrust(deviceID: String, now: Int64) throws -> Bool {
        try write { db in
            try db.execute(sql: "DELETE FROM peers WHERE device_id = ?", arguments: [deviceID])
            guard db.changesCount > 0 else { return false }
            try Self.dropUnpairedStagings(db)
            try db.execute(
                sql: """
                    INSERT INTO unpaired_devices (device_id, unpaired_at) VALUES (?, ?)
                    ON CONFLICT (device_id) DO UPDATE SET unpaired_at = excluded.unpaired_at
                    """,
                arguments: [deviceID, now])
            return true
        }
    }

    /// Drops the baselines staged from devices that are not paired (any more).
    static func dropUnpairedStagings(_ db: Database) throws {
        let unpaired = "SELECT peer FROM staged_baselines WHERE peer NOT IN (SELECT device_id FROM peers)"
        try db.execute(sql: "DELETE FROM staged_baseline_chunks WHERE peer IN (\(unpaired))")
        try db.execute(sql: "DELETE FROM staged_baselines WHERE peer IN (\(unpaired))")
    }

    /// The devices the user unpaired here and has not paired again, by Device ID.
    public func unpairedDevices() throws -> Set<String> {
        try read { db in Set(try String.fetchAll(db, sql: "SELECT device_id FROM unpaired_devices")) }
    }

    public func peers() throws -> [PeerRecord] {
        try read { db in try Self.peers(db) }
    }

    /// The paired devices, read through a read-only connection (`plait doctor` writes nothing).
    public static func peers(readOnlyAt path: String) throws -> [PeerRecord] {
        try readingOnly(at: path) { db in try peers(db) }
    }

    /// Runs `body` in a read transaction on a read-only connection to the store at `path` (`plait doctor`):
    /// nothing is written, and a writer at work is waited for like anywhere else.
    static func readingOnly<T>(at path: String, _ body: (Database) throws -> T) throws -> T {
        try precheck(path)
        let readOnly = configuration(synchronousFull: false, busyTimeout: defaultBusyTimeout, readonly: true)
        do {
            let queue = try DatabaseQueue(path: path, configuration: readOnly)
            defer { try? queue.close() }
            return try queue.read(body)
        } catch let error as DatabaseError {
            throw StoreDiagnosis.diagnose(error, path: path)
        }
    }

    static func peers(_ db: Database) throws -> [PeerRecord] {
            // A store read before its first write under this build is not migrated yet: columns added since are
            // read as absent (NULL), not as an error.
            let columns = Set(try db.columns(in: "peers").map(\.name))
            let added = ["refused_me_at", "failed", "failed_at"].map { columns.contains($0) ? $0 : "NULL" }
            return try Row.fetchAll(
                db,
                sql: """
                    SELECT device_id, name, address, paired_at, last_seen, last_summary, diverged, refused, claim,
                    succeeded_by, last_heads, \(added.joined(separator: ", ")) FROM peers ORDER BY name, device_id
                    """
            ).map { row in
                PeerRecord(
                    deviceID: row[0], name: row[1], address: row[2], pairedAt: row[3], lastSeen: row[4],
                    lastSummary: try (row[5] as String?).map { try Summary(parsing: $0) },
                    lastHeads: Acknowledgements.decode(row[10] as Data?), diverged: row[6],
                    refused: row[7], claim: row[8], succeededBy: row[9], refusedThisDeviceAt: row[11], failed: row[12],
                    failedAt: row[13])
            }
    }

    public func isTrusted(deviceID: String) throws -> Bool {
        try read { db in
            try Bool.fetchOne(db, sql: "SELECT 1 FROM peers WHERE device_id = ?", arguments: [deviceID]) ?? false
        }
    }

    /// Records that a paired peer was seen at `address` holding `summary` (this store's changes as the session
    /// ended), with the hash of the change at each of its entries as held now (PROTOCOL.md §22.7).
    public func peerSeen(deviceID: String, address: String?, summary: Summary?, now: Int64) throws {
        try write { db in
            let heads = try summary.map { try Acknowledgements.encode(Acknowledgements.hashes(db, of: $0)) }
            try db.execute(
                sql: """
                    UPDATE peers SET last_seen = ?, address = coalesce(?, address), refused_me_at = NULL, failed = NULL,
                    failed_at = NULL,
                    last_summary = coalesce(?, last_summary),
                    last_heads = CASE WHEN ? IS NULL THEN last_heads ELSE ? END WHERE device_id = ?
                    """,
                arguments: [now, address, summary?.description, summary?.description, heads, deviceID])
        }
    }

    /// Records why a session with the paired peer `deviceID` failed because the two histories disagree (the
    /// session's `SessionError.isSyncFailure`); the next session that ends well clears it (`peerSeen`).
    public func peerSessionFailed(deviceID: String, reason: String, now: Int64) throws {
        try write { db in
            try db.execute(
                sql: "UPDATE peers SET failed = ?, failed_at = ? WHERE device_id = ?", arguments: [reason, now, deviceID])
        }
    }

    /// Records that the paired peer `deviceID` refused this device after the TLS handshake (its alert, or the
    /// connection reset on the first read: PROTOCOL.md §3). Returns whether that is news: the last session
    /// with it had not been refused.
    @discardableResult
    public func peerRefusedThisDevice(deviceID: String, now: Int64) throws -> Bool {
        try write { db in
            let known = "SELECT refused_me_at IS NOT NULL FROM peers WHERE device_id = ?"
            let already = try Bool.fetchOne(db, sql: known, arguments: [deviceID]) ?? true
            try db.execute(sql: "UPDATE peers SET refused_me_at = ? WHERE device_id = ?", arguments: [now, deviceID])
            return !already
        }
    }

    /// The paired peer `deviceID` answered a session with its Hello: it holds this device as paired, whatever it
    /// refused before. Writes only when a refusal was recorded.
    public func peerAnsweredThisDevice(deviceID: String) throws {
        let recorded = "SELECT 1 FROM peers WHERE device_id = ? AND refused_me_at IS NOT NULL"
        guard try read({ try Bool.fetchOne($0, sql: recorded, arguments: [deviceID]) }) == true else { return }
        try write { db in
            try db.execute(sql: "UPDATE peers SET refused_me_at = NULL WHERE device_id = ?", arguments: [deviceID])
        }
    }

    /// Remembers a device that connected without being paired, keeping at most `pendingLimit`. A device trusted
    /// meanwhile (a succession statement can arrive before a refusal of its new ID is recorded) is left out.
    public func recordPending(deviceID: String, claimedName: String, address: String?, now: Int64) throws {
        try write { db in
            let trusted = "SELECT 1 FROM peers WHERE device_id = ?"
            guard try Bool.fetchOne(db, sql: trusted, arguments: [deviceID]) != true else { return }
            try db.execute(
                sql: """
                    INSERT INTO pending_peers (device_id, name, address, first_seen, last_seen) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (device_id) DO UPDATE SET name = excluded.name, address = excluded.address,
                    last_seen = excluded.last_seen, attempts = attempts + 1
                    """,
                arguments: [deviceID, String(claimedName.prefix(64)), address, now, now])
            try db.execute(
                sql: """
                    DELETE FROM pending_peers WHERE device_id NOT IN
                    (SELECT device_id FROM pending_peers ORDER BY last_seen DESC, device_id LIMIT ?)
                    """,
                arguments: [Self.pendingLimit])
        }
    }

    public func pendingPeers() throws -> [PendingPeerRecord] {
        try read { db in
            try Row.fetchAll(
                db,
                sql: "SELECT device_id, name, address, first_seen, last_seen, attempts FROM pending_peers ORDER BY last_seen DESC"
            ).map { row in
                PendingPeerRecord(
                    deviceID: row[0], name: row[1], address: row[2], firstSeen: row[3], lastSeen: row[4], attempts: row[5])
            }
        }
    }
}

extension Store {
    /// The Lamport time of a stored change (nil if it is not stored, e.g. folded into the baseline).
    public func lamport(of ref: ChangeRef) throws -> UInt64? { try read { db in try Self.lamport(db, of: ref) } }

    static func lamport(_ db: Database, of ref: ChangeRef) throws -> UInt64? {
        try Int64.fetchOne(
            db, sql: "SELECT lamport FROM changes WHERE tl = ? AND seq = ?",
            arguments: [timelineColumn(ref.timeline.rawValue), Int64(ref.seq)]
        ).map { UInt64($0) }
    }
}
