import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Items handed from other threads (discovery's event stream, a question asked on a thread of its own) to
/// one thread that waits for them with poll(2), alongside its own sockets, through `readDescriptor`.
///
/// Whoever posts keeps the inbox alive while it may still post, so a late item never writes into a
/// descriptor number that was closed and reused.
public final class Inbox<Item: Sendable>: @unchecked Sendable {
    /// Readable while items wait (poll it for POLLIN).
    public let readDescriptor: Int32
    private let writeDescriptor: Int32
    private let lock = NSLock()
    private var items: [Item] = []

    public init() throws(TLSError) {
        var descriptors: [Int32] = [-1, -1]
        guard pipe(&descriptors) == 0 else {
            throw .socket(operation: "create a pipe", reason: String(cString: strerror(errno)))
        }
        for descriptor in descriptors {
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
        }
        readDescriptor = descriptors[0]
        writeDescriptor = descriptors[1]
    }

    deinit {
        _ = close(readDescriptor)
        _ = close(writeDescriptor)
    }

    public func post(_ item: Item) {
        lock.withLock { items.append(item) }
        var byte: UInt8 = 1
        _ = write(writeDescriptor, &byte, 1)
    }

    /// Every item posted since the last call, oldest first (their wake-up bytes with them).
    public func take() -> [Item] {
        var sink = [UInt8](repeating: 0, count: 64)
        while read(readDescriptor, &sink, sink.count) > 0 {}
        return lock.withLock {
            defer { items = [] }
            return items
        }
    }

    /// Waits until an item is posted or `deadline` passes (at once if items are waiting).
    public func wait(until deadline: ContinuousClock.Instant) {
        var entry = pollfd(fd: readDescriptor, events: Int16(POLLIN), revents: 0)
        _ = poll(&entry, 1, pollMilliseconds(until: deadline))
    }
}

/// Milliseconds to `deadline` for poll(2), rounded up, 0 if it passed.
public func pollMilliseconds(until deadline: ContinuousClock.Instant) -> Int32 {
    let left = ContinuousClock.now.duration(to: deadline)
    guard left > .zero else { return 0 }
    let (seconds, attoseconds) = left.components
    return Int32(clamping: seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000)
}
