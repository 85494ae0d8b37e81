import GRDB

/// The store's side of `plait rejoin --new-key` (PROTOCOL.md §21): which peers still have to learn this device's
/// new Device ID, and, on a receiving device, which trusted device named which successor.
extension Store {
    /// Records that each of `peers` must still learn the new Device ID, through a statement signed by `retired`
    /// (the Device ID it trusts). A peer already waiting for an earlier succession keeps the retired ID it has:
    /// it trusts that one, not the ID in between.
    public func recordSuccessionPending(retired: String, peers: [String]) throws {
        try write { db in
            for peer in peers {
                try db.execute(
                    sql: "INSERT INTO succession_pending (peer, retired) VALUES (?, ?) ON CONFLICT (peer) DO NOTHING",
                    arguments: [peer, retired])
            }
        }
    }

    /// The trusted peers that still have to learn the new Device ID, each with the retired Device ID it trusts.
    public func successionPending() throws -> [String: String] {
        try read { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT s.peer, s.retired FROM succession_pending s JOIN peers p ON p.device_id = s.peer
                    ORDER BY s.peer
                    """)
            return Dictionary(uniqueKeysWithValues: rows.map { ($0[0] as String, $0[1] as String) })
        }
    }

    /// `peer` accepted the statement: later connections to it use the new identity.
    public func successionTold(peer: String) throws {
        try write { db in try db.execute(sql: "DELETE FROM succession_pending WHERE peer = ?", arguments: [peer]) }
    }

    /// A verified statement from the trusted device `old` names `new` as its successor: trusts `new` under `old`'s
    /// name and address (or leaves it as it is if already trusted), marks `old` as succeeded by it, and keeps
    /// trusting `old`. Nothing is written when `old` is not trusted or the user unpaired `new` here (§21 checks 5
    /// and 7: a peer's statement never undoes an unpair).
    public func acceptSuccession(old: String, new: String, now: Int64) throws -> SuccessionAcceptance {
        try write { db in
            let sql = "SELECT name, address FROM peers WHERE device_id = ?"
            guard let row = try Row.fetchOne(db, sql: sql, arguments: [old]) else { return .oldNotPaired }
            let unpaired = "SELECT 1 FROM unpaired_devices WHERE device_id = ?"
            guard try Bool.fetchOne(db, sql: unpaired, arguments: [new]) != true else { return .newUnpairedHere }
            let (name, address) = (row[0] as String, row[1] as String?)
            try db.execute(
                sql: """
                    INSERT INTO peers (device_id, name, address, paired_at) VALUES (?, ?, ?, ?)
                    ON CONFLICT (device_id) DO NOTHING
                    """,
                arguments: [new, name, address, now])
            try db.execute(sql: "UPDATE peers SET succeeded_by = ? WHERE device_id = ?", arguments: [new, old])
            try db.execute(sql: "DELETE FROM pending_peers WHERE device_id = ?", arguments: [new])
            let trusted = try String.fetchOne(db, sql: "SELECT name FROM peers WHERE device_id = ?", arguments: [new])
            return .trusted(name: trusted ?? name)
        }
    }
}

/// What the store made of a verified succession statement (`Store.acceptSuccession`).
public enum SuccessionAcceptance: Equatable, Sendable {
    /// The new Device ID is trusted under this name.
    case trusted(name: String)
    /// The old Device ID is not paired here: nothing was written.
    case oldNotPaired
    /// The user unpaired the new Device ID here: nothing was written.
    case newUnpairedHere
}
