import COpenSSL
import Foundation
import Testing

@testable import PlaitTLS

/// Identities made once per test process (a P-256 key each), their files removed at once.
enum TestIdentities {
    static let alice = make("alice")
    static let bob = make("bob")
    static let mallory = make("mallory")

    private static func make(_ name: String) -> Identity {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("plait-tls-\(UUID().uuidString)")
        do {
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: false)
            defer { try? FileManager.default.removeItem(at: url) }
            return try Identity.create(directory: url.path, commonName: name)
        } catch {
            fatalError("cannot make the test identity \(name): \(error)")
        }
    }
}

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A body run on its own thread (not the test's cooperative pool, which blocking would starve).
final class BackgroundThread<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var outcome: Result<Value, any Error>?
    private let finished = DispatchSemaphore(value: 0)

    init(_ body: @escaping @Sendable () throws -> Value) {
        let thread = Thread { [self] in
            let result = Result { try body() }
            lock.withLock { outcome = result }
            finished.signal()
        }
        thread.start()
    }

    /// The body's result; a failure if it did not finish within `seconds`.
    @discardableResult
    func join(seconds: Double = 15) -> Result<Value, any Error> {
        if finished.wait(timeout: .now() + seconds) == .timedOut {
            return .failure(TestFailure("the background thread did not finish within \(seconds) s"))
        }
        finished.signal()  // a later join returns at once
        return lock.withLock { outcome! }
    }
}

/// Bytes from xorshift64*, different for each seed, so a misplaced or repeated chunk shows.
func testPattern(count: Int, seed: UInt64) -> [UInt8] {
    var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
    var bytes = [UInt8](repeating: 0, count: count)
    bytes.withUnsafeMutableBytes { raw in
        var index = 0
        while index < raw.count {
            state ^= state >> 12
            state ^= state << 25
            state ^= state >> 27
            var word = (state &* 0x2545_F491_4F6C_DD1D).littleEndian
            let chunk = min(8, raw.count - index)
            withUnsafeBytes(of: &word) {
                raw.baseAddress!.advanced(by: index).copyMemory(from: $0.baseAddress!, byteCount: chunk)
            }
            index += chunk
        }
    }
    return bytes
}

/// A server context for `identity` (sync only unless `acceptsPairing`) on 127.0.0.1, any port.
func makeListener(_ identity: Identity, acceptsPairing: Bool = false) throws -> TLSListener {
    try TLSListener(
        host: "127.0.0.1", port: 0,
        context: TLSContext(identity: identity, role: .server(acceptsPairing: acceptsPairing)))
}

/// Connects to 127.0.0.1:`port` as `identity`, trusting only `trusted`.
func connectClient(
    _ identity: Identity, port: UInt16, trusting trusted: DeviceID, offering: TLSApplicationProtocol = .sync,
    timeout: Duration = .seconds(5)
) throws -> TLSConnection {
    try TLSConnection.connect(
        host: "127.0.0.1", port: port, context: TLSContext(identity: identity, role: .client(offering: offering)),
        trust: { $0 == trusted }, timeout: timeout)
}

/// Serves one connection on its own thread: accept trusting only `trusted`, then `body`. The
/// connection is closed when `body` returns.
func serveOne<Value: Sendable>(
    _ listener: TLSListener, trusting trusted: Set<DeviceID>,
    _ body: @escaping @Sendable (TLSConnection) throws -> Value
) -> BackgroundThread<Value> {
    BackgroundThread {
        let connection = try listener.accept(
            trust: { trusted.contains($0) }, timeout: .seconds(5), handshakeTimeout: .seconds(5))
        defer { connection.close() }
        return try body(connection)
    }
}

/// Reads and writes at once on one connection, driven by poll(2) on the calling thread, until
/// `outgoing` is sent and `expected` bytes have arrived; returns what arrived.
func exchangeAtOnce(
    _ connection: TLSConnection, sending outgoing: [UInt8], expecting expected: Int
) throws -> [UInt8] {
    var received: [UInt8] = []
    received.reserveCapacity(expected)
    var buffer = [UInt8](repeating: 0, count: 64 * 1024)
    var sent = 0
    var readNeedsWritable = false
    var writeNeedsReadable = false
    while sent < outgoing.count || received.count < expected {
        var events: Int32 = 0
        if received.count < expected || writeNeedsReadable { events |= POLLIN }
        if sent < outgoing.count || readNeedsWritable { events |= POLLOUT }
        var entry = pollfd(fd: connection.fileDescriptor, events: Int16(events), revents: 0)
        guard poll(&entry, 1, 10_000) > 0 else {
            throw TestFailure("stalled: sent \(sent) of \(outgoing.count), received \(received.count) of \(expected)")
        }
        readNeedsWritable = false
        reading: while received.count < expected {
            switch try connection.read(into: &buffer) {
            case .bytes(let count): received.append(contentsOf: buffer[0..<count])
            case .wantRead: break reading
            case .wantWrite:
                readNeedsWritable = true
                break reading
            case .closed: throw TestFailure("closed after receiving \(received.count) bytes")
            }
        }
        writeNeedsReadable = false
        writing: while sent < outgoing.count {
            switch try connection.write(outgoing, from: sent) {
            case .bytes(let count): sent += count
            case .wantWrite: break writing
            case .wantRead:
                writeNeedsReadable = true
                break writing
            case .closed: throw TestFailure("closed after sending \(sent) bytes")
            }
        }
    }
    return received
}

/// A TLS client made with OpenSSL directly rather than `TLSContext`, as a stranger could write one:
/// no pin check of the server, an optional certificate (with an optional extra certificate in its
/// chain), any ALPN offer or none, a blocking socket with 5 s timeouts.
final class PlainTLSClient {
    private let context: OpaquePointer
    private let ssl: OpaquePointer
    private let descriptor: Int32

    init(
        port: UInt16, identity: Identity?, chainedTo extra: Identity? = nil,
        alpn: String? = TLSApplicationProtocol.sync.rawValue, maxVersion: Int32 = TLS1_3_VERSION
    ) throws {
        descriptor = try connectTCP(host: "127.0.0.1", port: port, deadline: Deadline(.seconds(5)))
        let flags = fcntl(descriptor, F_GETFL)
        _ = fcntl(descriptor, F_SETFL, flags & ~O_NONBLOCK)
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        _ = setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        context = SSL_CTX_new(TLS_client_method())!
        _ = plait_SSL_CTX_set_max_proto_version(context, maxVersion)
        SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nil)
        if let identity {
            _ = SSL_CTX_use_certificate(context, identity.x509)
            _ = SSL_CTX_use_PrivateKey(context, identity.privateKey)
        }
        if let extra {
            // SSL_CTX_add1_chain_cert is a macro over SSL_CTX_ctrl.
            _ = SSL_CTX_ctrl(context, SSL_CTRL_CHAIN_CERT, 1, UnsafeMutableRawPointer(extra.x509))
        }
        if let alpn {
            let wire = [UInt8(alpn.utf8.count)] + Array(alpn.utf8)
            _ = SSL_CTX_set_alpn_protos(context, wire, UInt32(wire.count))
        }
        ssl = SSL_new(context)!
        _ = SSL_set_fd(ssl, descriptor)
    }

    deinit {
        SSL_free(ssl)
        SSL_CTX_free(context)
        close(descriptor)
    }

    /// Whether SSL_connect succeeded (in TLS 1.3 it can before the server judged our certificate).
    func handshake() -> Bool {
        ERR_clear_error()
        return SSL_connect(ssl) == 1
    }

    /// What one SSL_read returns: the bytes, or nothing if it failed or the server closed.
    func readSome() -> [UInt8] {
        var buffer = [UInt8](repeating: 0, count: 256)
        let count = SSL_read(ssl, &buffer, Int32(buffer.count))
        ERR_clear_error()
        return count > 0 ? Array(buffer[0..<Int(count)]) : []
    }
}

/// Reads from `connection` until something other than `wantRead` comes (bytes, the end of the stream), waiting
/// with poll(2) up to `timeout`; throws what the read throws (a refusal's alert, a reset).
func readSomething(
    _ connection: TLSConnection, upTo count: Int = 64, timeout: Duration = .seconds(5), operation: String = "reading"
) throws -> TLSConnection.IOResult {
    var buffer = [UInt8](repeating: 0, count: count)
    var result = TLSConnection.IOResult.wantRead
    let deadline = Deadline(timeout)
    while result == .wantRead {
        try waitUntilReady(connection.fileDescriptor, for: POLLIN, deadline: deadline, operation: operation)
        result = try connection.read(into: &buffer)
    }
    return result
}
