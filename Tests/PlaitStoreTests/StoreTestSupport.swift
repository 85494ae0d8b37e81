import Foundation
import GRDB
import PlaitCore
import PlaitTestSupport
import Testing

@testable import PlaitStore

extension Device {
    var encoding: [UInt8] { replica.domain.canonicalEncoding(of: replica.state) }

    /// Every change this device holds (not folded into its baseline) that `other` lacks, in sequence order per
    /// timeline: what a peer would send after a Want.
    func changesMissing(from other: Device) throws -> [Change] {
        let theirs = try other.summary
        var out: [Change] = []
        for range in theirs.missing(from: try summary) {
            out += try store.changes(of: range.timeline, from: range.seqs.lowerBound, limit: Int.max)
        }
        return out
    }

    /// Pulls what `other` has and this device lacks, as one batch.
    @discardableResult
    func pull(from other: Device) throws -> Replica.IntegrateResult {
        try replica.integrate(try other.changesMissing(from: self))
    }

}

/// Both devices pull from each other until their summaries agree.
func sync(_ a: Device, _ b: Device) throws {
    try a.pull(from: b)
    try b.pull(from: a)
}


/// Every row of every table, in a stable order, blobs in hex: two equal dumps mean equal database content.
func dump(_ store: Store) throws -> [String] {
    try store.read { db in
        var out: [String] = []
        let tables = try String.fetchAll(
            db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        for table in tables {
            var rows: [String] = []
            for row in try Row.fetchAll(db, sql: "SELECT * FROM \(table)") {
                var fields: [String] = []
                for (column, value) in row {
                    let text: String
                    switch value.storage {
                    case .null: text = "NULL"
                    case .int64(let number): text = "\(number)"
                    case .double(let number): text = "\(number)"
                    case .string(let string): text = "'\(string)'"
                    case .blob(let data): text = "x'" + data.map { String(format: "%02x", $0) }.joined() + "'"
                    }
                    fields.append("\(column)=\(text)")
                }
                rows.append(table + ": " + fields.joined(separator: " "))
            }
            out.append("table \(table): \(rows.count) rows")
            out += rows.sorted()
        }
        return out
    }
}

/// The bytes of a file (empty if it does not exist).
func fileBytes(_ path: String) -> [UInt8] {
    FileManager.default.contents(atPath: path).map { [UInt8]($0) } ?? []
}

/// A file's size and SHA-256: compared instead of the bytes, so a failure prints two short lines.
func fingerprint(_ path: String) -> String {
    guard let data = FileManager.default.contents(atPath: path) else { return "(no file)" }
    return "\(data.count) bytes, sha256 \(SHA256.hash([UInt8](data)).hexString)"
}

func fingerprint(_ bytes: [UInt8]) -> String { "\(bytes.count) bytes, sha256 \(SHA256.hash(bytes).hexString)" }

/// The hex form of a digest, for readable failure messages.

/// A change built by hand (foreign timelines, damaged batches), chained to `previous` unless told otherwise.
func handMade(
    timeline: TimelineID, seq: UInt64, lamport: UInt64, after previous: Change?, kind: String, version: UInt32 = 1,
    payload: [UInt8]
) -> Change {
    Change(
        timeline: timeline, seq: seq, lamport: lamport, previousHash: previous?.hash ?? Change.zeroHash, kind: kind,
        version: version, wallTime: fixedNow, payload: payload)
}
