import Foundation
import Logging
import PlaitCore
import PlaitNetnsSupport
@testable import PlaitSync
import PlaitTLS
import PlaitTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The agent learns of changes by events, not by reading the store in a loop (DESIGN §12): inotify on the
/// store's files for other processes' commits, a direct notice from the session that pulled changes. Agents run
/// in this process over real TLS on 127.0.0.1, on real store files; `plait` commands run as processes of
/// their own. Anti-entropy is pushed out of reach (an hour), so only the events can carry a change.
@Suite(.serialized) struct AgentEventTests {
    /// A change made by `plait add` in another process reaches the paired peer: the agent that shares the
    /// home is woken by inotify, as it polls nothing.
    @Test func changeByAnotherProcessReachesPeer() throws {
        try withTemporaryDirectory { directory in
            let (a, b) = try pairedHomes(directory, "a", "b")
            let recorder = LogRecorder()
            let agentB = try startAgent(b, recorder: recorder)
            defer { agentB.stop() }
            let agentA = try startAgent(a, recorder: recorder, peers: [agentB])
            defer { agentA.stop() }
            try awaitConnected(recorder, a, b)

            try runPlait(["list", "add", "Groceries", "--home", a.path])
            try runPlait(["add", "Groceries", "butter", "--home", a.path])
            let target = try a.store.summary()
            #expect(target.count > 0)
            let arrived = waitUntil(seconds: 10) { (try? b.store.summary().covers(target)) ?? false }
            #expect(arrived, "B holds \(String(describing: try? b.store.summary())), A \(target)")
            // A's agent has no reason to load the other process's commit into memory (its sessions send the
            // summary, not a digest, right after a change): read both states as a command would.
            try a.replica.refresh()
            try b.replica.refresh()
            #expect(hex(b.replica.digest) == hex(a.replica.digest))
        }
    }

    /// Two paired agents, connected and idle, run no store transaction at all (no read, no commit probe) over a
    /// window: they wake only for pings, anti-entropy and discovery. Then an edit still travels, so they were
    /// connected all along.
    @Test func idleAgentsReadNothing() throws {
        try withTemporaryDirectory { directory in
            let (a, b) = try pairedHomes(directory, "a", "b")
            var rng = SplitMix64(seed: 0xE7E7_0002)
            try randomEdits(a.replica, count: 20, rng: &rng)
            try randomEdits(b.replica, count: 20, rng: &rng)
            let recorder = LogRecorder()
            let agentB = try startAgent(b, recorder: recorder)
            defer { agentB.stop() }
            let agentA = try startAgent(a, recorder: recorder, peers: [agentB])
            defer { agentA.stop() }
            try awaitConnected(recorder, a, b)
            let synced = waitUntil(seconds: 10) {
                let same = (try? a.store.summary() == b.store.summary()) ?? false
                return same && hex(a.replica.digest) == hex(b.replica.digest)
            }
            #expect(synced, "the two did not converge after connecting")

            // The exchange after connecting is over once neither store has been touched for a while: longer than
            // the agents wait before recording what a connected peer said it holds (at most once a second).
            var last = (a.store.transactions, b.store.transactions)
            var quietSince = Date()
            let settleDeadline = Date().addingTimeInterval(10)
            let quiet = 0.3 + Double(Agent.liveRecordInterval.components.seconds)
            while Date() < settleDeadline && Date().timeIntervalSince(quietSince) < quiet {
                usleep(20_000)
                let now = (a.store.transactions, b.store.transactions)
                if now != last { (last, quietSince) = (now, Date()) }
            }
            // Absence is what is tested: a short window, then the counts must not have moved.
            let before = (a.store.transactions, b.store.transactions)
            usleep(1_500_000)
            let after = (a.store.transactions, b.store.transactions)
            #expect(after.0 == before.0, "agent A ran \(after.0 - before.0) store transactions while idle")
            #expect(after.1 == before.1, "agent B ran \(after.1 - before.1) store transactions while idle")

            try randomEdits(a.replica, count: 1, rng: &rng)
            let target = try a.store.summary()
            #expect(waitUntil(seconds: 10) { (try? b.store.summary().covers(target)) ?? false })
        }
    }

    /// B is paired with A and with C, which are not paired with each other. A change B pulls from A goes on to
    /// C at once: the session that pulled tells the agent, which notifies the others. B's inotify watch is off,
    /// so nothing else could carry it.
    @Test func pulledChangeIsRelayedAtOnce() throws {
        try withTemporaryDirectory { directory in
            let (a, b) = try pairedHomes(directory, "a", "b")
            let c = try Home.create(at: directory.file("c"), name: "c", config: Config())
            _ = try b.trust(c.identity.deviceID.description, address: nil, name: "c")
            _ = try c.trust(b.identity.deviceID.description, address: nil, name: "b")
            let recorder = LogRecorder()
            let agentB = try startAgent(b, recorder: recorder, watchesStore: false)
            defer { agentB.stop() }
            let agentA = try startAgent(a, recorder: recorder, peers: [agentB])
            defer { agentA.stop() }
            let agentC = try startAgent(c, recorder: recorder, peers: [agentB])
            defer { agentC.stop() }
            try awaitConnected(recorder, a, b)
            try awaitConnected(recorder, c, b)

            var rng = SplitMix64(seed: 0xE7E7_0003)
            for round in 0..<3 {
                try randomEdits(a.replica, count: 5, rng: &rng)
                let target = try a.store.summary()
                let relayed = waitUntil(seconds: 10) { (try? c.store.summary().covers(target)) ?? false }
                #expect(relayed, "round \(round): C holds \(String(describing: try? c.store.summary())), A \(target)")
            }
            #expect(hex(c.replica.digest) == hex(a.replica.digest))
        }
    }

    /// A device paired in another process just before it dials: the agent takes it though its store watch has not
    /// told it yet (here it never does: the watch is off), by looking a device it does not know up in the store.
    /// It was refused as "not paired" until the watch caught up.
    @Test func aDevicePairedByAnotherProcessIsTakenBeforeTheWatchSaysSo() throws {
        try withTemporaryDirectory { directory in
            let a = try Home.create(at: directory.file("a"), name: "a", config: Config())
            let b = try Home.create(at: directory.file("b"), name: "b", config: Config())
            let recorder = LogRecorder()
            let agentA = try startAgent(a, recorder: recorder, watchesStore: false)
            defer { agentA.stop() }
            // Another process's connection pairs b on a's store; b pairs a.
            let other = try Home.open(at: a.path, config: Config())
            _ = try other.trust(b.identity.deviceID.description, address: nil, name: "b")
            _ = try b.trust(a.identity.deviceID.description, address: nil, name: "a")
            let address = try PeerAddress(parsing: "127.0.0.1:\(try #require(agentA.boundPort))")
            let outcome = b.syncOnce(with: address, timeout: .seconds(10))
            #expect(outcome.succeeded, "\(outcome)\n\(recorder.all.joined(separator: "\n"))")
        }
    }

    /// `plait unpair` run in another process closes the agent's connection with that device: the agent reads
    /// the paired devices again when inotify shows a commit, not on a timer.
    @Test func unpairByAnotherProcessClosesTheConnection() throws {
        try withTemporaryDirectory { directory in
            let (a, b) = try pairedHomes(directory, "a", "b")
            let recorder = LogRecorder()
            let agentB = try startAgent(b, recorder: recorder)
            defer { agentB.stop() }
            let agentA = try startAgent(a, recorder: recorder, peers: [agentB])
            defer { agentA.stop() }
            try awaitConnected(recorder, a, b)
            let bID = try b.identity.deviceID.description
            try runPlait(["unpair", bID, "--home", a.path])
            let closed = waitUntil(seconds: 5) {
                recorder.all.contains { $0.contains("unpaired ") && $0.contains("(\(bID)): closing its connection") }
            }
            #expect(closed, "no connection closed:\n\(recorder.all.joined(separator: "\n"))")
        }
    }

    /// What the watch thread relies on: reads on open connections raise no event, so the agent's own reads never
    /// wake it; a commit raises one once it is readable (the WAL mark), and the probe then sees it, once.
    /// Opening a connection may raise one (SQLite, run as root, hands the WAL to the database's owner: an
    /// `IN_ATTRIB`); the probe then finds no commit, so it costs one check and nothing more.
    @Test func commitsWakeTheWatchAndReadsDoNot() throws {
        try withTemporaryDirectory { directory in
            let home = try Home.create(at: directory.file("home"), name: "home", config: Config())
            let events = try StoreFileEvents(
                directory: home.path, files: [Home.storeFileName, Home.storeFileName + "-wal"])
            let probe = try home.store.makeCommitProbe()
            #expect(try probe.changed(), "the first check has nothing to compare with")
            // Another process's view: a store and replica of their own on the same file, its connections open.
            let other = try Home.open(at: home.path, config: Config())
            let reads = {
                _ = try other.store.summary()
                _ = try home.store.peers()
                _ = try home.replica.status()
            }
            try reads()
            while readable(events, within: 0.2) { _ = events.drain() }
            #expect(try !probe.changed(), "opening connections counted as a commit")

            for _ in 0..<3 { try reads() }
            #expect(!readable(events, within: 0.2), "reads raised an event on the store's files")
            #expect(try !probe.changed(), "reads counted as a commit")

            // The first commit opens the other store's writing connection (an event of its own, as root).
            var rng = SplitMix64(seed: 0xE7E7_0005)
            try randomEdits(other.replica, count: 1, rng: &rng)
            while readable(events, within: 0.2) { _ = events.drain() }
            #expect(try probe.changed(), "the probe did not see the first commit")
            for round in 0..<3 {
                try randomEdits(other.replica, count: 1, rng: &rng)
                #expect(readable(events, within: 5) && events.drain(), "round \(round): a commit raised no event")
                #expect(try probe.changed(), "round \(round): the probe did not see the commit")
                #expect(try !probe.changed(), "round \(round): one commit seen twice")
            }
        }
    }

    // MARK: Helpers

    /// Whether `events` has something to read within `seconds` (poll(2) on its descriptor).
    private func readable(_ events: StoreFileEvents, within seconds: Double) -> Bool {
        var entry = pollfd(fd: events.descriptor, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, Int32(seconds * 1000)) > 0
    }

    /// Two homes in `directory`, each trusting the other.
    func pairedHomes(
        _ directory: TemporaryDirectory, _ first: String, _ second: String
    ) throws -> (Home, Home) {
        let a = try Home.create(at: directory.file(first), name: first, config: Config())
        let b = try Home.create(at: directory.file(second), name: second, config: Config())
        _ = try a.trust(b.identity.deviceID.description, address: nil, name: second)
        _ = try b.trust(a.identity.deviceID.description, address: nil, name: first)
        return (a, b)
    }

    /// An agent on `home` listening on a free loopback port, dialling `peers`; anti-entropy an hour away.
    func startAgent(
        _ home: Home, recorder: LogRecorder, peers: [Agent] = [], watchesStore: Bool = true
    ) throws -> Agent {
        var settings = Agent.Settings()
        settings.listen = try PeerAddress(parsing: "127.0.0.1:0", allowingPortZero: true)
        settings.staticPeers = try peers.map { try PeerAddress(parsing: "127.0.0.1:\(try #require($0.boundPort))") }
        settings.antiEntropyInterval = .seconds(3600)
        settings.watchesStore = watchesStore
        let agent = Agent(home: home, settings: settings, logger: recorder.logger("plait.\(home.deviceName)"))
        try agent.start()
        return agent
    }

    /// Waits until both agents logged their session with the other.
    func awaitConnected(_ recorder: LogRecorder, _ dialer: Home, _ listener: Home) throws {
        for id in [try dialer.identity.deviceID.description, try listener.identity.deviceID.description] {
            let line = recorder.line(containing: ["connected to ", "(\(id))"])
            try #require(line != nil, "the agents did not connect:\n\(recorder.all.joined(separator: "\n"))")
        }
    }

    /// Polls `condition` (every 2 ms) until it holds or `seconds` pass.
    func waitUntil(seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            usleep(2_000)
        }
        return condition()
    }

    /// Runs the built `plait` (beside this test binary, or `PLAIT_EXECUTABLE`) to completion; it must succeed.
    func runPlait(_ arguments: [String]) throws {
        var environment = ProcessInfo.processInfo.environment
        environment["DBUS_SYSTEM_BUS_ADDRESS"] = "unix:path=/nonexistent/plait-tests-bus"
        let run = try ChildProcess.run(try plaitExecutable(), arguments, environment: environment)
        try #require(run.succeeded, "plait \(arguments.joined(separator: " ")) failed: \(run.errors)")
    }

    func plaitExecutable() throws -> String {
        if let explicit = ProcessInfo.processInfo.environment["PLAIT_EXECUTABLE"], !explicit.isEmpty {
            return explicit
        }
        // SwiftPM puts the test bundle beside the executables (`.build/debug/plaitPackageTests.xctest`).
        let candidates = [Bundle.main.executableURL, URL(fileURLWithPath: CommandLine.arguments[0])].compactMap { $0 }
        for start in candidates {
            var directory = start.resolvingSymlinksInPath().deletingLastPathComponent()
            for _ in 0..<4 {
                let candidate = directory.appendingPathComponent("plait").path
                var isDirectory: ObjCBool = false
                let manager = FileManager.default
                if manager.fileExists(atPath: candidate, isDirectory: &isDirectory), !isDirectory.boolValue,
                    manager.isExecutableFile(atPath: candidate)
                {
                    return candidate
                }
                directory = directory.deletingLastPathComponent()
            }
        }
        throw AgentEventTestFailure("cannot find the built `plait`; build it first or set PLAIT_EXECUTABLE")
    }
}

private struct AgentEventTestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
