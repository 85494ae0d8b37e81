import Foundation
import GRDB
import PlaitCore
import PlaitTestSupport
import Testing

@testable import PlaitStore

/// Another connection, allowed to keep a transaction open between accesses.
func lockHolder(_ path: String) throws -> DatabaseQueue {
    var configuration = Configuration()
    configuration.allowsUnsafeTransactions = true
    return try DatabaseQueue(path: path, configuration: configuration)
}

/// A writer waits for another writer, and a wait that really times out says "busy", never "damaged".
@Suite struct StoreBusyTests {
    /// Another connection holds the write lock (BEGIN IMMEDIATE) past the busy timeout: the write fails
    /// after waiting about that long, as `busy` naming the path; released, the same store writes.
    @Test func aWriteLockHeldTooLongIsBusyNotDamage() throws {
        try withTemporaryDirectory { directory in
            let path = directory.file("busy.db")
            _ = try Store.create(at: path, timeline: TimelineID(7))
            let store = try Store.open(at: path, busyTimeout: 0.5)
            let holder = try lockHolder(path)
            try holder.writeWithoutTransaction { db in try db.execute(sql: "BEGIN IMMEDIATE") }
            let started = ContinuousClock.now
            #expect {
                try store.setDeviceName("kitchen")
            } throws: { error in
                guard case .busy(path, _) = error as? StoreError else { return false }
                return "\(error)".contains("is busy (another plait process is writing)")
                    && !"\(error)".contains("backup")
            }
            #expect(ContinuousClock.now - started >= .milliseconds(400), "it waited for the lock")
            try holder.writeWithoutTransaction { db in try db.execute(sql: "COMMIT") }
            try store.setDeviceName("kitchen")
            #expect(try store.deviceName() == "kitchen")
        }
    }

    /// A lock held for less than the timeout is waited for: the write succeeds once it is released.
    @Test func aShortLockIsWaitedFor() throws {
        try withTemporaryDirectory { directory in
            let path = directory.file("wait.db")
            _ = try Store.create(at: path, timeline: TimelineID(8))
            let store = try Store.open(at: path, busyTimeout: 10)
            let holder = try lockHolder(path)
            try holder.writeWithoutTransaction { db in try db.execute(sql: "BEGIN IMMEDIATE") }
            let released = DispatchSemaphore(value: 0)
            DispatchQueue.global().asyncAfter(deadline: .now() + 0.3) {
                try? holder.writeWithoutTransaction { db in try db.execute(sql: "COMMIT") }
                released.signal()
            }
            try store.setDeviceName("hall")
            released.wait()
            #expect(try store.deviceName() == "hall")
        }
    }
}
