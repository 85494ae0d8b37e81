import Foundation
import GRDB
import Testing

/// `store.busy_timeout_seconds` (config/plait.toml): how long a write waits for another process writing the same
/// store. Before, the wait was fixed at 10 s and a user could not shorten or lengthen it.
@Suite struct BusyTimeoutTests {
    /// Another process holds the store's write lock (a `BEGIN IMMEDIATE` through SQLite, as a second writer would).
    /// `plait add` waits the configured 0.5 s, then says the store is busy, names the wait and the key, and writes
    /// nothing; once the lock is released the same command succeeds.
    @Test func aWriteWaitsTheConfiguredTimeThenSaysTheStoreIsBusy() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            try sandbox.ok(["list", "add", "Groceries"])
            let config = sandbox.root + "/busy.toml"
            try "[store]\nbusy_timeout_seconds = 0.5\n".write(toFile: config, atomically: true, encoding: .utf8)
            var holding = Configuration()
            holding.allowsUnsafeTransactions = true  // the lock is held across two accesses on purpose
            let queue = try DatabaseQueue(path: sandbox.home + "/plait.db", configuration: holding)
            try queue.writeWithoutTransaction { db in try db.execute(sql: "BEGIN IMMEDIATE") }
            let before = try sandbox.fingerprint()
            let busy = try sandbox.fails(["add", "Groceries", "milk", "--config", config])
            try queue.writeWithoutTransaction { db in try db.execute(sql: "ROLLBACK") }
            #expect(busy.stderr.contains("is busy"), "\(busy)")
            #expect(busy.stderr.contains("0.5 s"), "the configured wait is named: \(busy)")
            #expect(busy.stderr.contains("store.busy_timeout_seconds"), "\(busy)")
            #expect(try sandbox.fingerprint() == before, "nothing was written")
            try sandbox.ok(["add", "Groceries", "milk", "--config", config])
            #expect(try sandbox.shown().flatMap(\.pendingTexts) == ["milk"])
        }
    }

    @Test(arguments: ["0", "0.05", "3601", "\"ten\""])
    func anOutOfRangeTimeoutIsRefused(value: String) throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            let config = sandbox.root + "/busy.toml"
            try "[store]\nbusy_timeout_seconds = \(value)\n".write(toFile: config, atomically: true, encoding: .utf8)
            let refused = try sandbox.fails(["status", "--config", config])
            #expect(refused.stderr.contains("store.busy_timeout_seconds must be a number from 0.1 to 3600"), "\(refused)")
        }
    }
}
