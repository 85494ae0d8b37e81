import Foundation
import GRDB
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// How a process learns that another one committed to the store without reading it in a loop (DESIGN §12,
/// "Events, not polling").
///
/// A commit in WAL mode becomes visible when the wal-index in `-shm` is updated, through a memory map, after
/// the WAL was written and synced: inotify sees the WAL being written, but never the moment the commit can be
/// read. So every writer marks the WAL once it committed (`markCommitted`, its times set to now: an
/// `IN_ATTRIB` event), and the watcher then confirms with `CommitProbe` that another connection committed.
extension Store {
    /// The WAL file beside the store; it exists while any connection is open.
    public var walPath: String { path + "-wal" }

    /// Marks the WAL after a commit so a process watching it (the agent) wakes after the commit is readable.
    /// One system call; a missing WAL (no connection left open) needs no mark.
    func markCommitted() {
        _ = walPath.withCString { utimensat(AT_FDCWD, $0, nil, 0) }
    }

    /// A probe on a connection of its own, so that SQLite's `PRAGMA data_version` compares like with like.
    public func makeCommitProbe() throws -> CommitProbe {
        do {
            let queue = try DatabaseQueue(
                path: path,
                configuration: Self.configuration(synchronousFull: false, busyTimeout: busyTimeout, readonly: true))
            return CommitProbe(store: self, queue: queue)
        } catch {
            throw StoreDiagnosis.diagnose(error, path: path, busyTimeout: busyTimeout)
        }
    }
}

/// Tells whether any other connection (another process, or another connection of this one) committed to the
/// store since the last check: SQLite's `PRAGMA data_version`, read on one connection kept for it. One check
/// costs one statement, no table read.
public final class CommitProbe: @unchecked Sendable {
    private let store: Store
    private let queue: DatabaseQueue
    private var lastVersion: Int64?

    init(store: Store, queue: DatabaseQueue) {
        self.store = store
        self.queue = queue
    }

    /// Whether a commit happened since the last call (the first call says yes: nothing was read before it).
    /// Call from one thread at a time.
    public func changed() throws -> Bool {
        store.transactionCounter.add(1, ordering: .relaxed)
        let version: Int64
        do {
            version = try queue.inDatabase { db in try Int64.fetchOne(db, sql: "PRAGMA data_version") ?? 0 }
        } catch {
            throw StoreDiagnosis.diagnose(error, path: store.path, busyTimeout: Store.defaultBusyTimeout)
        }
        defer { lastVersion = version }
        return version != lastVersion
    }
}
