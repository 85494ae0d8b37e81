#if canImport(Glibc)
    import Glibc
#endif
import Foundation

/// Closes the sockets of refused clients without a reset (PROTOCOL.md §3).
///
/// In TLS 1.3 a server refuses an unknown client's certificate after the client finished its handshake, and the
/// client has usually sent its first frame by then. Closing a socket with those bytes unread makes the kernel
/// send a reset, which can reach the client before it read the alert: it then cannot tell the refusal from a
/// peer that was killed. So a refused connection's socket is shut for sending (the alert went out first) and
/// kept open, everything the client sends read and dropped, until the client closes too or `lingerFor` passes.
/// At most `limit` sockets linger at once (a flood of strangers costs no more): beyond that, one closes at once.
final class LingeringClose: @unchecked Sendable {
    static let shared = LingeringClose()
    static let limit = 64
    static let lingerFor: Duration = .seconds(2)

    private let lock = NSLock()
    /// The sockets lingering, each with when it closes anyway (under `lock`).
    private var sockets: [(descriptor: Int32, deadline: ContinuousClock.Instant)] = []
    /// Whether the thread that drains them runs (under `lock`); it ends when none is left.
    private var draining = false

    /// Takes ownership of `descriptor`: closed once the peer has closed, or at the latest after `lingerFor`.
    func close(_ descriptor: Int32) {
        let startThread: Bool? = lock.withLock {
            guard sockets.count < Self.limit else { return nil }
            sockets.append((descriptor, .now + Self.lingerFor))
            defer { draining = true }
            return !draining
        }
        guard let startThread else {
            closeSocket(descriptor)
            return
        }
        _ = shutdown(descriptor, Int32(SHUT_WR))
        if startThread {
            let thread = Thread { [self] in drain() }
            thread.name = "plait-linger"
            thread.start()
        }
    }

    /// How many sockets linger now (tests).
    var count: Int { lock.withLock { sockets.count } }

    private func drain() {
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            let watched: [(descriptor: Int32, deadline: ContinuousClock.Instant)]? = lock.withLock {
                if sockets.isEmpty {
                    draining = false
                    return nil
                }
                return sockets
            }
            guard let watched else { return }
            var entries = watched.map { pollfd(fd: $0.descriptor, events: Int16(POLLIN), revents: 0) }
            // A socket added meanwhile is looked at within 50 ms: nothing waits on it.
            _ = poll(&entries, nfds_t(entries.count), 50)
            let now = ContinuousClock.now
            var finished: Set<Int32> = []
            for (index, entry) in entries.enumerated() {
                if entry.revents != 0 && !readsToEnd(entry.fd, into: &buffer) { finished.insert(entry.fd) }
                if now >= watched[index].deadline { finished.insert(entry.fd) }
            }
            guard !finished.isEmpty else { continue }
            lock.withLock { sockets.removeAll { finished.contains($0.descriptor) } }
            for descriptor in finished { closeSocket(descriptor) }
        }
    }

    /// Reads what `descriptor` holds and drops it; false once the peer closed (or the socket failed).
    private func readsToEnd(_ descriptor: Int32, into buffer: inout [UInt8]) -> Bool {
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
            if count > 0 { continue }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) { return true }
            return false
        }
    }
}
