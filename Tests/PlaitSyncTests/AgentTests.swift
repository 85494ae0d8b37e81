import Foundation
import Logging
import PlaitCore
import PlaitSync
import PlaitTLS
import PlaitTestSupport
import PlaitWire
import Testing

/// Log lines kept in memory, to check what an agent logged.
final class LogRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private var lines: [String] = []

    var all: [String] { lock.withLock { lines } }
    func append(_ line: String) { lock.withLock { lines.append(line) } }

    func logger(_ label: String = "plait.test") -> Logger {
        var logger = Logger(label: label) { _ in RecordingHandler(recorder: self) }
        logger.logLevel = .debug
        return logger
    }

    /// Waits (up to 20 s) until a line contains all of `parts`; returns it.
    func line(containing parts: [String]) -> String? {
        let deadline = Date().addingTimeInterval(20)
        while Date() < deadline {
            if let line = all.first(where: { line in parts.allSatisfy { line.contains($0) } }) { return line }
            usleep(5_000)
        }
        return nil
    }
}

private struct RecordingHandler: LogHandler {
    let recorder: LogRecorder
    var metadata: Logger.Metadata = [:]
    var logLevel: Logger.Level = .debug

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        recorder.append("\(event.level) \(event.message)")
    }
}

/// A server home paired with a well-behaved friend and a rogue (both paired both ways).
func serverFriendAndRogue(in directory: TemporaryDirectory) throws -> (server: Home, friend: Home, rogue: Home) {
    let server = try Home.create(at: directory.file("server"), name: "server", config: Config())
    let friend = try Home.create(at: directory.file("friend"), name: "friend", config: Config())
    let rogue = try Home.create(at: directory.file("rogue"), name: "rogue", config: Config())
    for other in [friend, rogue] {
        _ = try server.trust(other.identity.deviceID.description, address: nil, name: other.deviceName)
        _ = try other.trust(server.identity.deviceID.description, address: nil, name: "server")
    }
    return (server, friend, rogue)
}

/// The agent in this process over real TLS on 127.0.0.1.
@Suite(.serialized) struct AgentTests {
    /// A paired device that sends garbage, oversized or truncated frames loses that connection (the reason
    /// is logged); the agent goes on serving a well-behaved paired peer, during and after.
    @Test func badFramesCloseOnlyThatConnection() throws {
        try withTemporaryDirectory { directory in
            let (server, friend, rogue) = try serverFriendAndRogue(in: directory)
            var rng = SplitMix64(seed: 0xA6E7_0001)
            try randomEdits(server.replica, count: 50, rng: &rng)
            let recorder = LogRecorder()
            var settings = Agent.Settings()
            settings.listen = try PeerAddress(parsing: "127.0.0.1:0", allowingPortZero: true)
            let agent = Agent(home: server, settings: settings, logger: recorder.logger())
            try agent.start()
            defer { agent.stop() }
            let port = try #require(agent.boundPort)
            let address = try PeerAddress(parsing: "127.0.0.1:\(port)")

            let cases: [(label: String, bytes: [UInt8], endsWrite: Bool, logged: String)] = [
                ("garbage", Array("GET / HTTP/1.1\r\nHost: plait\r\n\r\n".utf8), false, "over the limit"),
                ("oversized", [0x7F, 0xFF, 0xFF, 0xF0, 1], false, "over the limit"),
                ("unknown type", [0, 0, 0, 3, 200, 1, 2], false, "unknown type 200"),
                ("truncated", [0, 0, 1, 0, 1, 8, 1], true, "in the middle of a frame"),
            ]
            let serverID = try server.identity.deviceID
            let trustServer: @Sendable (DeviceID) -> Bool = { $0 == serverID }
            for (label, bytes, endsWrite, logged) in cases {
                let context = try TLSContext(identity: rogue.identity, role: .client(offering: .sync))
                let connection = try TLSConnection.connect(
                    host: "127.0.0.1", port: port, context: context, trust: trustServer, timeout: .seconds(5))
                try connection.writeAll(bytes, timeout: .seconds(5))
                if endsWrite {
                    connection.close()
                } else {
                    // The agent answers with its Hello, then a Close naming the reason, then closes.
                    var received: [UInt8] = []
                    while let chunk = try? connection.readExactly(1, timeout: .seconds(10)) { received += chunk }
                    connection.close()
                    let messages = (try? decodeAll(received)) ?? []
                    guard case let .close(reason) = messages.last else {
                        Issue.record("\(label): no Close before the connection ended (\(messages.map(\.type)))")
                        continue
                    }
                    #expect(reason.contains(logged), "\(label): \(reason)")
                }
                let line = recorder.line(containing: ["session with", try rogue.identity.deviceID.description, logged])
                #expect(line != nil, "\(label): nothing logged about it:\n\(recorder.all.joined(separator: "\n"))")

                // The well-behaved peer is served all along.
                try randomEdits(server.replica, count: 5, rng: &rng)
                let outcome = friend.syncOnce(with: address, timeout: .seconds(10))
                #expect(outcome.succeeded, "\(label): \(outcome.failure ?? "")")
                #expect(try friend.store.summary() == server.store.summary())
                #expect(hex(friend.replica.digest) == hex(server.replica.digest))
            }
            // Its own timeline (its signed begin) is all it holds.
            let own = try rogue.store.ownTimeline()
            #expect(try rogue.store.summary().timelines.filter { $0 != own }.isEmpty, "the rogue pulled nothing")
        }
    }

    /// Unpaired devices are refused and listed as pending with their address, at most one new entry per
    /// address and minute: one host presenting fresh certificates cannot flush the list.
    @Test func pendingDevicesAreRateLimitedPerAddress() throws {
        try withTemporaryDirectory { directory in
            let server = try Home.create(at: directory.file("server"), name: "server", config: Config())
            let recorder = LogRecorder()
            var settings = Agent.Settings()
            settings.listen = try PeerAddress(parsing: "127.0.0.1:0", allowingPortZero: true)
            let agent = Agent(home: server, settings: settings, logger: recorder.logger())
            try agent.start()
            defer { agent.stop() }
            let port = try #require(agent.boundPort)
            var strangers: [String] = []
            for index in 0..<3 {
                let stranger = try Home.create(at: directory.file("stranger\(index)"), name: "s\(index)", config: Config())
                strangers.append(try stranger.identity.deviceID.description)
                let context = try TLSContext(identity: stranger.identity, role: .client(offering: .sync))
                let connection = try TLSConnection.connect(
                    host: "127.0.0.1", port: port, context: context, trust: { _ in true }, timeout: .seconds(5))
                // TLS 1.3: the refusal shows on the first read; nothing of the protocol arrives.
                #expect(throws: (any Error).self) { _ = try connection.readExactly(1, timeout: .seconds(10)) }
                connection.close()
                #expect(recorder.line(containing: ["refused unpaired device", strangers[index]]) != nil)
            }
            let pending = try server.store.pendingPeers()
            #expect(pending.map(\.deviceID) == [strangers[0]], "\(pending)")
            #expect(pending.first?.address == "127.0.0.1")
            #expect(recorder.line(containing: [strangers[2], "not listed"]) != nil)
        }
    }
}
