import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// inotify on a device home, reporting events on the store's files only: what wakes the agent when another
/// process may have committed (DESIGN §12, "Events, not polling"). The directory is watched, not the files, so
/// a WAL that is removed and made again (the last connection closing, then a new one) is still seen.
///
/// Watched: `IN_ATTRIB` (the mark every plait writer sets on the WAL once its commit is readable, see
/// `Store.markCommitted`), `IN_CLOSE_WRITE` (a writer that exits, such as a sqlite3 shell, which sets no mark),
/// `IN_CREATE` and `IN_MOVED_TO` (a file made or put in place), `IN_DELETE` and `IN_MOVED_FROM` (a file removed: the
/// agent stops when that is its store), `IN_MOVE_SELF` and `IN_DELETE_SELF` (the home itself moved away or removed,
/// the same for its store). Not `IN_MODIFY`: the WAL is written before its
/// commit can be read, so waking on it finds nothing yet, and a long catch-up would wake the agent for every
/// write; the mark that follows the commit is what counts.
final class StoreFileEvents: @unchecked Sendable {
    /// Readable (POLLIN) while events wait; non-blocking.
    let descriptor: Int32
    private let names: Set<String>
    private var buffer = [UInt8](repeating: 0, count: 16 << 10)

    static let mask = UInt32(
        IN_ATTRIB | IN_CLOSE_WRITE | IN_CREATE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM | IN_MOVE_SELF | IN_DELETE_SELF)

    /// Watches `directory` for events on the files named `files` in it.
    init(directory: String, files: [String]) throws(PlaitError) {
        let descriptor = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard descriptor >= 0 else {
            throw .file(path: directory, problem: "cannot start inotify (\(String(cString: strerror(errno))))")
        }
        guard inotify_add_watch(descriptor, directory, Self.mask) >= 0 else {
            let reason = String(cString: strerror(errno))
            _ = close(descriptor)
            throw .file(path: directory, problem: "cannot watch the directory with inotify (\(reason))")
        }
        self.descriptor = descriptor
        names = Set(files)
    }

    deinit { _ = close(descriptor) }

    /// Reads every queued event; whether one was about the store's files (or events were lost: the queue
    /// overflowed, so something may have been missed). A burst of events costs one answer.
    func drain() -> Bool {
        var relevant = false
        while true {
            let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return relevant }
            buffer.withUnsafeBytes { bytes in
                // struct inotify_event: wd, mask, cookie, len (4 bytes each), then `len` bytes of NUL-padded name.
                var offset = 0
                while offset + 16 <= count {
                    let mask = bytes.loadUnaligned(fromByteOffset: offset + 4, as: UInt32.self)
                    let length = Int(bytes.loadUnaligned(fromByteOffset: offset + 12, as: UInt32.self))
                    let nameBytes = bytes[(offset + 16)..<min(count, offset + 16 + length)]
                    let name = String(decoding: nameBytes.prefix { $0 != 0 }, as: UTF8.self)
                    // The home directory itself moved or removed: its store is no longer at its path either.
                    let moved = mask & UInt32(IN_MOVE_SELF | IN_DELETE_SELF) != 0
                    if mask & UInt32(IN_Q_OVERFLOW) != 0 || moved || names.contains(name) { relevant = true }
                    offset += 16 + length
                }
            }
        }
    }
}
