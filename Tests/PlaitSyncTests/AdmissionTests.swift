import Foundation
import PlaitCore
import PlaitSync
import PlaitTLS
import PlaitTestSupport
import Testing

/// The agent in this process, over real TLS on loopback, under a flood of strangers (DESIGN §10 "Admission under
/// load"), with limits lowered so that a small flood reaches every one of them.
@Suite(.serialized) struct AdmissionTests {
    static let seed: UInt64 = 0xAD_0151_0010

    func startAgent(_ home: Home, _ limits: HandshakeLimits, _ recorder: LogRecorder) throws -> Agent {
        var settings = Agent.Settings()
        settings.listen = try PeerAddress(parsing: "127.0.0.1:0", allowingPortZero: true)
        settings.handshakeLimits = limits
        let agent = Agent(home: home, settings: settings, logger: recorder.logger())
        try agent.start()
        return agent
    }

    /// Strangers from eight addresses hold more handshakes than the total cap allows; the paired device, holding
    /// one at a time from 127.0.0.1, is never the one dropped: 8 of 8 syncs succeed. The drops are summed up in
    /// one line per summary interval.
    @Test func strangersFromManyAddressesCannotStarveAPairedDevice() throws {
        try withTemporaryDirectory { directory in
            let server = try Home.create(at: directory.file("server"), name: "server", config: Config())
            let friend = try Home.create(at: directory.file("friend"), name: "friend", config: Config())
            _ = try server.trust(friend.identity.deviceID.description, address: nil, name: "friend")
            _ = try friend.trust(server.identity.deviceID.description, address: nil, name: "server")
            var rng = SplitMix64(seed: Self.seed)
            try randomEdits(server.replica, count: 20, rng: &rng)
            var limits = HandshakeLimits()
            limits.perAddress = 4
            limits.total = 16
            limits.deadline = .seconds(2)
            limits.summaryInterval = .seconds(1)
            let recorder = LogRecorder()
            let agent = try startAgent(server, limits, recorder)
            var agentStopped = false
            defer { if !agentStopped { agent.stop() } }
            let port = try #require(agent.boundPort)

            let sources = (2...9).map { "127.0.0.\($0)" }
            let flood = HandshakeFlood(
                port: port,
                plan: HandshakeFlood.Plan(
                    sources: sources, connections: 64, opensPerSecond: 300, duration: .seconds(60),
                    maximumOpens: 18_000, seed: Self.seed))
            flood.start()
            defer { flood.stop() }
            let context = "seed \(String(Self.seed, radix: 16))"
            #expect(flood.wait { $0.opened >= 64 && $0.closedByListener >= 32 }, "\(context): \(flood.tally)")

            let address = try PeerAddress(parsing: "127.0.0.1:\(port)")
            let started = ContinuousClock.now
            var failures: [String] = []
            for round in 0..<8 {
                try randomEdits(server.replica, count: 3, rng: &rng)
                let outcome = friend.syncOnce(with: address, timeout: .seconds(10))
                if let failure = outcome.failure { failures.append("round \(round): \(failure)") }
            }
            // The flood goes on until two intervals have been summed up (or 10 s have passed).
            let deadline = Date().addingTimeInterval(10)
            while recorder.all.filter({ $0.contains("at the handshake") }).count < 2, Date() < deadline {
                usleep(10_000)
            }
            let tally = flood.stop()
            let elapsed = ContinuousClock.now - started
            #expect(failures.isEmpty, "\(context), flood \(tally):\n\(failures.joined(separator: "\n"))")
            #expect(try friend.store.summary() == server.store.summary())
            #expect(hex(friend.replica.digest) == hex(server.replica.digest))
            agent.stop()
            agentStopped = true

            let summaries = recorder.all.filter { $0.contains("at the handshake") }
            let seconds = Int(elapsed.components.seconds) + 3  // the warm-up, the last partial window, the stop
            #expect(
                summaries.count >= 2 && summaries.count <= seconds + 2,
                "one summary per interval (\(summaries.count) in \(elapsed)):\n\(summaries.joined(separator: "\n"))")
            #expect(summaries.contains { $0.contains("over 4 per address or 16 in all") }, "\(summaries)")
            #expect(summaries.contains { $0.contains("from 8 addresses") }, "\(summaries)")
            let others = recorder.all.filter { $0.hasPrefix("warning") && !$0.contains("at the handshake") }
            #expect(others.isEmpty, "no other warning: \(others.prefix(5))")
        }
    }

    /// A silent stranger is closed when its handshake deadline passes (not 10 s later), and counted as such.
    @Test func aSilentStrangerIsClosedAtTheDeadline() throws {
        try withTemporaryDirectory { directory in
            let server = try Home.create(at: directory.file("server"), name: "server", config: Config())
            var limits = HandshakeLimits()
            limits.deadline = .seconds(1)
            let recorder = LogRecorder()
            let agent = try startAgent(server, limits, recorder)
            var agentStopped = false
            defer { if !agentStopped { agent.stop() } }
            let port = try #require(agent.boundPort)
            let flood = HandshakeFlood(
                port: port,
                plan: HandshakeFlood.Plan(
                    sources: ["127.0.0.2"], connections: 1, duration: .seconds(20), maximumOpens: 1, seed: Self.seed,
                    silentPercent: 100))
            let started = ContinuousClock.now
            flood.start()
            defer { flood.stop() }
            #expect(flood.wait(seconds: 10) { $0.closedByListener == 1 }, "\(flood.tally)")
            let held = ContinuousClock.now - started
            #expect(held >= .milliseconds(900) && held < .seconds(4), "closed after \(held)")
            agent.stop()
            agentStopped = true
            let summaries = recorder.all.filter { $0.contains("at the handshake") }
            #expect(summaries.count == 1, "\(recorder.all)")
            #expect(
                summaries.first?.contains("dropped 1 connection from 1 address") == true
                    && summaries.first?.contains("1 past the 1 s deadline") == true,
                "\(summaries)")
        }
    }
}
