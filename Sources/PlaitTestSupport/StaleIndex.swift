import Foundation
import PlaitNetnsSupport

/// A failure of the sqlite3 shell a test damages a store with.
public struct SQLiteShellFailure: Error, CustomStringConvertible {
    public let description: String
}

/// Runs `sql` on the store file at `path` with the sqlite3 shell, as a user (or bit rot) would; returns its output.
@discardableResult
public func sqliteShell(_ path: String, _ sql: String) throws -> String {
    let shell = try ChildProcess.run("/usr/bin/sqlite3", [path, sql])
    guard shell.succeeded else { throw SQLiteShellFailure(description: "sqlite3 \(sql): \(shell.errors)") }
    return shell.output
}

/// Leaves the `changes_by_timeline` entry of change `seq` of the timeline stored as `timelineColumn` stale, as one
/// flipped bit in the index would: it names a Lamport time no row has, and the rows are untouched. The row's
/// Lamport time is moved (the index follows), the index taken out of the schema, the time moved back unseen by it,
/// and the index put back.
public func makeIndexEntryStale(store path: String, timelineColumn: Int64, seq: Int) throws {
    let row = "tl = \(timelineColumn) AND seq = \(seq)"
    try sqliteShell(path, "UPDATE changes SET lamport = lamport + 1000000 WHERE \(row)")
    let root = try sqliteShell(path, "SELECT rootpage FROM sqlite_master WHERE name = 'changes_by_timeline'")
    guard let page = Int(root.trimmingCharacters(in: .whitespacesAndNewlines)) else {
        throw SQLiteShellFailure(description: "no root page of changes_by_timeline: \(root)")
    }
    try sqliteShell(path, "PRAGMA writable_schema = ON; DELETE FROM sqlite_master WHERE name = 'changes_by_timeline'")
    try sqliteShell(path, "UPDATE changes SET lamport = lamport - 1000000 WHERE \(row)")
    try sqliteShell(
        path,
        "PRAGMA writable_schema = ON; INSERT INTO sqlite_master VALUES ('index', 'changes_by_timeline', 'changes', "
            + "\(page), 'CREATE UNIQUE INDEX changes_by_timeline ON changes (tl, seq)')")
}
