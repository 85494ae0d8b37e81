import Foundation
import PlaitCore
import PlaitSession
import PlaitTestSupport
import PlaitStore
import PlaitSync
import PlaitWire
import Testing

#if canImport(Glibc)
import Glibc
#endif

extension Device {
    var identity: SessionIdentity { SessionIdentity(deviceID: "DEVICE-" + name.uppercased(), name: name) }

    /// A cold view of the same file (what another process would load).
    func reopenedDigest() throws -> [UInt8] {
        try Replica(store: try Store.open(at: path, synchronousFull: false)).digest
    }

    /// A copy of the store file (after folding the WAL in), as a backup or a copied home would be.
    func copy(to path: String) throws {
        try store.checkpointWAL()
        try FileManager.default.copyItem(atPath: self.path, toPath: path)
    }

    /// Everything observable about the store: compared before and after a session that must change nothing.
    func snapshot() throws -> StoreSnapshot {
        StoreSnapshot(
            ownTimeline: try timeline, summary: try summary, heads: try store.heads(),
            changes: try store.changesInReplayOrder(limit: nil), digest: digest, coldDigest: try reopenedDigest())
    }
}

struct StoreSnapshot: Equatable {
    var ownTimeline: TimelineID
    var summary: Summary
    var heads: [TimelineHeadRow]
    var changes: [Change]
    var digest: [UInt8]
    var coldDigest: [UInt8]
}



/// Many cheap changes in one transaction (creates at the top or bottom of a few lists, completes, edits):
/// random edits look the state up for every change, which is too slow for tens of thousands.
func bulkEdits(_ replica: Replica, count: Int, textSize: Int = 0, rng: inout SplitMix64) throws {
    try replica.edit(now: fixedNow) { edit in
        var lists: [ObjectID] = []
        var recent: [ObjectID] = []
        for index in 0..<count {
            if lists.isEmpty || index % 1000 == 0 {
                let id = ObjectID.random(using: &rng)
                try edit.append(.listCreate(id: id, title: "bulk \(lists.count)", color: nil, at: .bottom))
                lists.append(id)
                continue
            }
            let roll = Int.random(in: 0..<10, using: &rng)
            if roll < 2, let item = recent.popLast() {
                try edit.append(.itemComplete(id: item))
            } else if roll < 3, let item = recent.last {
                try edit.append(.itemEdit(id: item, text: "edited \(index)"))
            } else {
                let id = ObjectID.random(using: &rng)
                let text = textSize > 0 ? String(repeating: "x", count: textSize) : "item \(index)"
                let list = lists.randomElement(using: &rng)!
                try edit.append(.itemCreate(id: id, list: list, text: text, at: rng.chance(50) ? .top : .bottom))
                recent.append(id)
                if recent.count > 64 { recent.removeFirst() }
            }
        }
    }
}

// MARK: Threads and sockets

/// A thread that can be joined (Foundation's `Thread` cannot), so a test leaves none behind.
///
/// `join` may be called more than once (a test's body and its `defer` both join): the thread is joined once, as
/// POSIX requires — a second `pthread_join` of an ended thread reads freed memory, and crashed a full test run.
final class JoinableThread<T>: @unchecked Sendable {
    private var thread = pthread_t()
    private let box: ResultBox<T>
    private let joinLock = NSLock()
    private var joined = false

    init(_ body: @escaping () throws -> T) {
        let box = ResultBox<T>()
        self.box = box
        let entry = ThreadEntry { box.result = Result { try body() } }
        let started = pthread_create(&thread, nil, threadMain, Unmanaged.passRetained(entry).toOpaque())
        precondition(started == 0, "pthread_create failed: \(started)")
    }

    func join() -> Result<T, any Error> {
        joinLock.withLock {
            if !joined {
                pthread_join(thread, nil)
                joined = true
            }
        }
        return box.result!
    }
}

private final class ResultBox<T>: @unchecked Sendable {
    var result: Result<T, any Error>?
}

private final class ThreadEntry {
    let run: () -> Void
    init(_ run: @escaping () -> Void) { self.run = run }
}

private func threadMain(_ argument: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    Unmanaged<ThreadEntry>.fromOpaque(argument!).takeRetainedValue().run()
    return nil
}

/// A connected pair of Unix stream sockets.
func socketPair() throws -> (Int32, Int32) {
    var fds: [Int32] = [-1, -1]
    guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0 else {
        throw TransportError(operation: "socketpair", code: errno)
    }
    return (fds[0], fds[1])
}

/// Both outcomes of a session between two devices.
struct SessionPair {
    var a: Result<SessionResult, SessionError>
    var b: Result<SessionResult, SessionError>

    func results() throws -> (SessionResult, SessionResult) { (try a.get(), try b.get()) }
}

/// Runs a session between `a` and `b` over a socket pair, each side on its own thread, and closes
/// everything. `wrap` puts a transport around each socket (recording, buffering).
func runSession(
    _ a: Device, _ b: Device, options: SessionOptions = SessionOptions(), optionsB: SessionOptions? = nil,
    wrap: (SocketTransport) -> any FrameTransport = { $0 }
) throws -> SessionPair {
    try runSession((a.replica, a.identity), (b.replica, b.identity), options: options, optionsB: optionsB, wrap: wrap)
}

/// `runSession` for replicas that are not `Device`s (signed stores, a replica with its own signer).
func runSession(
    _ a: (replica: Replica, identity: SessionIdentity), _ b: (replica: Replica, identity: SessionIdentity),
    options: SessionOptions = SessionOptions(), optionsB: SessionOptions? = nil,
    wrap: (SocketTransport) -> any FrameTransport = { $0 }
) throws -> SessionPair {
    let (left, right) = try socketPair()
    let leftSocket = try SocketTransport(adopting: left)
    let rightSocket = try SocketTransport(adopting: right)
    defer {
        leftSocket.close()
        rightSocket.close()
    }
    let sessionA = try Session(transport: wrap(leftSocket), replica: a.replica, identity: a.identity, options: options)
    let sessionB = try Session(
        transport: wrap(rightSocket), replica: b.replica, identity: b.identity, options: optionsB ?? options)
    return try runSessions(sessionA, sessionB)
}

func runSessions(_ sessionA: Session, _ sessionB: Session) throws -> SessionPair {
    let threadA = JoinableThread { () throws(SessionError) in try sessionA.run() }
    let threadB = JoinableThread { () throws(SessionError) in try sessionB.run() }
    return SessionPair(
        a: threadA.join().mapError { $0 as! SessionError }, b: threadB.join().mapError { $0 as! SessionError })
}

/// Two sessions between `a` and `b` over a Unix socket pair, each running on its own thread (agent-mode sessions
/// stay open once in sync). `stop` stops A's session and joins both; `close` (in the test's `defer`) stops them
/// if the test did not, joins both threads and closes the sockets.
final class LiveSessions {
    let a: Session
    let b: Session
    let threadA: JoinableThread<SessionResult>
    let threadB: JoinableThread<SessionResult>
    private let sockets: (SocketTransport, SocketTransport)

    init(_ a: Device, _ b: Device, optionsA: SessionOptions, optionsB: SessionOptions) throws {
        let (left, right) = try socketPair()
        sockets = (try SocketTransport(adopting: left), try SocketTransport(adopting: right))
        self.a = try Session(transport: sockets.0, replica: a.replica, identity: a.identity, options: optionsA)
        self.b = try Session(transport: sockets.1, replica: b.replica, identity: b.identity, options: optionsB)
        let (sessionA, sessionB) = (self.a, self.b)
        threadA = JoinableThread { () throws(SessionError) in try sessionA.run() }
        threadB = JoinableThread { () throws(SessionError) in try sessionB.run() }
    }

    /// Stops A's session (B's ends with it) and returns both results.
    func stop() throws -> (SessionResult, SessionResult) {
        a.stop()
        return (try threadA.join().get(), try threadB.join().get())
    }

    func close() {
        a.stop()
        _ = threadA.join()
        _ = threadB.join()
        sockets.0.close()
        sockets.1.close()
    }
}

/// A transport that records every byte written, to look at the frames afterwards.
final class RecordingTransport: FrameTransport, @unchecked Sendable {
    let base: SocketTransport
    private(set) var written: [UInt8] = []

    init(_ base: SocketTransport) { self.base = base }

    var fileDescriptor: Int32 { base.fileDescriptor }
    var hasBufferedInput: Bool { false }
    func readSome(into buffer: inout [UInt8]) throws -> ReadResult { try base.readSome(into: &buffer) }

    func writeSome(_ bytes: ArraySlice<UInt8>) throws -> WriteResult {
        let result = try base.writeSome(bytes)
        if case let .wrote(count) = result { written += bytes.prefix(count) }
        return result
    }

    /// The messages written, in order.
    func messages() throws -> [Message] { try decodeAll(written) }
}

/// A transport that reads ahead into its own buffer and hands bytes out in small pieces, as TLS does with
/// decrypted records: a session that polled the socket without asking `hasBufferedInput` would stall.
final class ReadAheadTransport: FrameTransport, @unchecked Sendable {
    let base: SocketTransport
    private var buffered: [UInt8] = []
    private var scratch = [UInt8](repeating: 0, count: 256 << 10)

    init(_ base: SocketTransport) { self.base = base }

    var fileDescriptor: Int32 { base.fileDescriptor }
    var hasBufferedInput: Bool { !buffered.isEmpty }
    func writeSome(_ bytes: ArraySlice<UInt8>) throws -> WriteResult { try base.writeSome(bytes) }

    func readSome(into buffer: inout [UInt8]) throws -> ReadResult {
        if buffered.isEmpty {
            switch try base.readSome(into: &scratch) {
            case let .bytes(count): buffered = Array(scratch[0..<count])
            case .wouldBlock: return .wouldBlock
            case .closed: return .closed
            }
        }
        let count = min(buffered.count, buffer.count, 997)
        buffer.replaceSubrange(0..<count, with: buffered[0..<count])
        buffered.removeFirst(count)
        return .bytes(count)
    }
}

func decodeAll(_ bytes: [UInt8]) throws -> [Message] {
    var decoder = FrameDecoder()
    decoder.append(bytes)
    var out: [Message] = []
    while let frame = try decoder.next() { out.append(try Message.decode(frame)) }
    return out
}

/// A hand-driven peer that reads whole messages (over a plain socket or TLS).
protocol MessageReceiving {
    /// The next message, or nil at the end of the stream.
    func receive() throws -> Message?
}

extension MessageReceiving {
    /// Reads until a message matches; every message read.
    func receive(until matches: (Message) -> Bool) throws -> [Message] {
        var seen: [Message] = []
        while let message = try receive() {
            seen.append(message)
            if matches(message) { return seen }
        }
        return seen
    }

    /// Everything until the end of the stream.
    func receiveAll() throws -> [Message] {
        var seen: [Message] = []
        while let message = try receive() { seen.append(message) }
        return seen
    }
}

/// A hand-driven peer on a blocking socket: sends what a test says, reads what the session sends.
final class RawPeer: MessageReceiving {
    let fd: Int32
    private var decoder = FrameDecoder()

    init(fd: Int32) { self.fd = fd }

    func close() { _ = Glibc.close(fd) }

    func send(_ message: Message) throws { try send(bytes: message.encode()) }

    func send(bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let count = bytes[offset...].withUnsafeBytes {
                Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard count > 0 else { throw TransportError(operation: "send", code: errno) }
            offset += count
        }
    }

    /// The next message, or nil at the end of the stream.
    func receive() throws -> Message? {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            if let frame = try decoder.next() { return try Message.decode(frame) }
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count == 0 { return nil }
            guard count > 0 else { throw TransportError(operation: "read", code: errno) }
            decoder.append(buffer[0..<count])
        }
    }

}

/// A Hello as a hand-driven peer sends it.
func rawHello(deviceID: String = "RAW-PEER", summary: Summary = Summary(), heads: [TimelineID: HeadHash] = [:])
    -> Message
{
    .hello(
        Hello(
            domainName: ListsDomain.name, domainVersion: ListsDomain.version, deviceID: deviceID, name: "raw",
            summary: summary, headHashes: heads, baselineSummary: Summary(), baselineDigest: nil,
            stateDigest: Change.zeroHash, unknownCount: 0))
}

/// Counts events from other threads and lets a test wait for a total, without sleeping.
final class Counter: @unchecked Sendable {
    private let condition = NSCondition()
    private var total = 0

    func add(_ count: Int) {
        condition.lock()
        total += count
        condition.broadcast()
        condition.unlock()
    }

    /// Waits until the total reaches `target`; false after `seconds` without it.
    func wait(for target: Int, seconds: Double = 30) -> Bool {
        let deadline = Date(timeIntervalSinceNow: seconds)
        condition.lock()
        defer { condition.unlock() }
        while total < target {
            if !condition.wait(until: deadline) { return total >= target }
        }
        return true
    }

    var value: Int {
        condition.lock()
        defer { condition.unlock() }
        return total
    }
}
