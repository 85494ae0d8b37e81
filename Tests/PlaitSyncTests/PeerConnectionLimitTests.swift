import Foundation
import PlaitCore
import PlaitSync
import PlaitTLS
import PlaitTestSupport
import PlaitWire
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A hostile paired device against the agent's resources (found by a hostile tester, 2026-11-24): 2,000
/// connections that never sent a Hello, or sent one byte now and then, held 2,000 threads for good.
@Suite(.serialized) struct PeerConnectionLimitTests {
    /// What came on a connection until it closed (or until 15 s passed: `closed` false).
    struct Drained {
        var bytes: [UInt8] = []
        var closed = false
        var messages: [Message] { (try? decodeAll(bytes)) ?? [] }
        var closeReason: String? {
            if case let .close(reason) = messages.last { return reason }
            return nil
        }
    }

    /// Reads everything until the agent closes the connection; with `trickle`, writes one byte of a never
    /// finished frame every 100 ms meanwhile (a frame of 1 MiB announced, its bytes sent one at a time).
    static func drain(_ connection: TLSConnection, trickle: Bool) -> Drained {
        var drained = Drained()
        let deadline = ContinuousClock.now + .seconds(15)
        var toSend: [UInt8] = trickle ? [0x00, 0x10, 0x00, 0x00, 1] + [UInt8](repeating: 0x08, count: 1_000) : []
        var nextByte = ContinuousClock.now
        var buffer = [UInt8](repeating: 0, count: 4096)
        while ContinuousClock.now < deadline {
            if !toSend.isEmpty && ContinuousClock.now >= nextByte {
                if case .closed? = try? connection.write([toSend.removeFirst()]) {}
                nextByte = ContinuousClock.now + .milliseconds(100)
            }
            do {
                switch try connection.read(into: &buffer) {
                case let .bytes(count):
                    drained.bytes += buffer[..<count]
                    continue
                case .closed:
                    drained.closed = true
                    return drained
                case .wantRead, .wantWrite:
                    var descriptor = pollfd(fd: connection.fileDescriptor, events: Int16(POLLIN), revents: 0)
                    _ = poll(&descriptor, 1, 50)
                }
            } catch {
                drained.closed = true  // reset or refused: closed all the same
                return drained
            }
        }
        return drained
    }

    @Test func aPairedDeviceGetsAFewConnectionsAndEachMustSayHelloInTime() throws {
        try withTemporaryDirectory { directory in
            let (server, friend, rogue) = try serverFriendAndRogue(in: directory)
            var rng = SplitMix64(seed: 0xC0_0001)
            try randomEdits(server.replica, count: 20, rng: &rng)
            let recorder = LogRecorder()
            let (agent, port) = try Self.agent(server, limit: 3, helloTimeout: .seconds(2), recorder)
            defer { agent.stop() }
            let connect = try Self.connecting(rogue, to: server, port: port)

            // Five silent connections: three are run and closed for want of a Hello; two are closed unanswered.
            let silent = try (0..<5).map { _ in try connect() }
            // Meanwhile another paired device is served: the limit is per device.
            let outcome = friend.syncOnce(with: try PeerAddress(parsing: "127.0.0.1:\(port)"), timeout: .seconds(10))
            #expect(outcome.succeeded, "\(outcome.failure ?? "")")
            #expect(hex(friend.replica.digest) == hex(server.replica.digest))
            let results = silent.map { Self.drain($0, trickle: false) }
            for connection in silent { connection.close() }
            let closed = results.filter { $0.closed }.count
            #expect(closed == 5, "\(results.map { $0.messages })")
            let noHello = results.filter { $0.closeReason?.contains("no Hello within") == true }
            let unanswered = results.filter { $0.bytes.isEmpty }
            #expect(noHello.count == 3, "\(results.map { $0.closeReason ?? "(\($0.bytes.count) bytes)" })")
            #expect(unanswered.count == 2)
            #expect(recorder.line(containing: ["closed a connection from", try rogue.identity.deviceID.description])
                != nil)

            // One that keeps sending a byte at a time is closed all the same, and makes room again.
            let trickling = try connect()
            let trickled = Self.drain(trickling, trickle: true)
            trickling.close()
            #expect(trickled.closed && trickled.closeReason?.contains("no Hello within 2") == true,
                "\(trickled.messages)")
        }
    }

    /// A `plait sync` over the agent's per-device limit is closed cleanly, its Hello read first: it says the peer is
    /// busy, and neither says nor records that the peer refused this device. Closed with the Hello unread, the
    /// socket reset it, and the sync said "refused this device: it is not paired there" and recorded that in
    /// `peers` (fourth hostile tester of 2026-11-25, F5: 2 runs in 6 of 12 syncs at once).
    @Test func aSyncOverTheLimitIsNotTakenForARefusal() throws {
        try withTemporaryDirectory { directory in
            let (server, _, rogue) = try serverFriendAndRogue(in: directory)
            let (agent, port) = try Self.agent(server, limit: 1, helloTimeout: .seconds(60), LogRecorder())
            defer { agent.stop() }
            let serverID = try server.identity.deviceID
            // The one connection the agent takes from this device, held without a Hello.
            let held = try Self.connecting(rogue, to: server, port: port)()
            defer { held.close() }
            let address = try PeerAddress(parsing: "127.0.0.1:\(port)")
            var failures: [String] = []
            for _ in 0..<20 {
                let outcome = rogue.syncOnce(with: address, timeout: .seconds(10))
                failures.append(outcome.failure ?? "(succeeded)")
            }
            let refusals = failures.filter { $0.contains("refused this device") }
            #expect(refusals.isEmpty, "\(refusals.count) of 20 syncs said the peer refused this device: \(failures)")
            #expect(failures.allSatisfy { $0.contains("before its Hello: it is busy") }, "\(Set(failures))")
            let row = try #require(try rogue.store.peers().first { $0.deviceID == serverID.description })
            #expect(row.refusedThisDeviceAt == nil, "a refusal was recorded")
        }
    }

    /// `server`'s agent on a free loopback port, taking at most `limit` connections per device, each given
    /// `helloTimeout` for its Hello.
    static func agent(_ server: Home, limit: Int, helloTimeout: Duration, _ recorder: LogRecorder) throws
        -> (Agent, UInt16)
    {
        var settings = Agent.Settings()
        settings.listen = try PeerAddress(parsing: "127.0.0.1:0", allowingPortZero: true)
        settings.maxConnectionsPerPeer = limit
        settings.helloTimeout = helloTimeout
        let agent = Agent(home: server, settings: settings, logger: recorder.logger())
        try agent.start()
        guard let port = agent.boundPort else {
            agent.stop()
            throw TLSError.socket(operation: "listen", reason: "the agent bound no port")
        }
        return (agent, port)
    }

    /// Opens TLS sync connections of `device` to `server`'s agent on `port`, one per call.
    static func connecting(_ device: Home, to server: Home, port: UInt16) throws -> () throws -> TLSConnection {
        let serverID = try server.identity.deviceID
        let context = try TLSContext(identity: device.identity, role: .client(offering: .sync))
        return {
            try TLSConnection.connect(
                host: "127.0.0.1", port: port, context: context, trust: { $0 == serverID }, timeout: .seconds(5))
        }
    }
}
