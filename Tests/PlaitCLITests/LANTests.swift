import Foundation
import PlaitCore
import PlaitNetnsSupport
import PlaitStore
import Testing

/// Why the LAN tests cannot run here (not root, a tool missing), or nil.
let lanTestsSkipReason: String? = NetnsLAN.skipReason

/// Agents on a LAN of network namespaces (DESIGN §8): each host has its own avahi-daemon, and the agents
/// find each other by mDNS alone (no --peer, no stored address).
@Suite(
    "Agents on a LAN of network namespaces", .serialized,
    .disabled(if: lanTestsSkipReason != nil, Comment(rawValue: lanTestsSkipReason ?? "")))
struct LANTests {
    let sync = SyncTests()

    /// One device per host: its home (on the shared file system), its store opened here to watch it, and
    /// its agent running inside the host.
    struct HostDevice {
        var home: String
        var id: String
        var store: Store
        var replica: Replica
    }

    func devices(_ sandbox: Sandbox, count: Int) throws -> [HostDevice] {
        try sync.devices(sandbox, (1...count).map { "h\($0)" }).map { device in
            let store = try Store.open(at: device.home + "/plait.db", synchronousFull: false)
            // The home's key signs what the test authors here, as the CLI would.
            let replica = try Replica(store: store, signer: P256Signer(directory: device.home))
            return HostDevice(home: device.home, id: device.id, store: store, replica: replica)
        }
    }

    /// Pairs every two of `devices` headlessly, with no address: they can only find each other by mDNS.
    func pairAll(_ sandbox: Sandbox, _ devices: [HostDevice]) throws {
        for a in devices {
            for b in devices where a.id != b.id { try sandbox.ok(["pair", "--trust", b.id, "--home", a.home]) }
        }
    }

    func startAgent(_ lan: NetnsLAN, _ device: HostDevice, on host: NetnsHost) throws -> HostProcess {
        try lan.spawn([try PlaitExecutable.path.get(), "agent", "--home", device.home, "--listen", "0.0.0.0:7400"], in: host)
    }

    /// Polls (every millisecond) until `condition` holds or `seconds` pass; returns how long it took, or nil.
    func time(within seconds: Double, _ condition: () throws -> Bool) rethrows -> Double? {
        let start = Date()
        while Date().timeIntervalSince(start) < seconds {
            if try condition() { return Date().timeIntervalSince(start) }
            usleep(1_000)
        }
        return try condition() ? Date().timeIntervalSince(start) : nil
    }

    func summaries(_ devices: [HostDevice]) throws -> [Summary] { try devices.map { try $0.store.summary() } }

    func agreed(_ devices: [HostDevice]) throws -> Bool { Set(try summaries(devices)).count == 1 }

    /// An item added through the device's own replica (as `plait add` would), committed when this returns.
    @discardableResult
    func add(_ device: HostDevice, to list: ObjectID, _ text: String) throws -> Change {
        try device.replica.edit { edit in
            try edit.append(.itemCreate(id: ObjectID.random(), list: list, text: text, at: .bottom))
        }
    }

    func list(_ device: HostDevice, _ title: String) throws -> ObjectID {
        try device.replica.refresh()
        let state = device.replica.state
        return try #require(state.liveListIDs.first { state.lists[$0]?.title == title })
    }

    /// Three paired hosts and an unpaired fourth: the three find each other by mDNS alone, converge after
    /// concurrent edits on every host, and push each edit within milliseconds; the fourth, which trusts
    /// them, receives nothing and is listed as pending.
    @Test func pairedAgentsFindEachOtherByMDNSAloneAndConverge() throws {
        let lan = try NetnsLAN(hosts: 4)
        defer { lan.tearDown() }
        try withSandbox { sandbox in
            let all = try devices(sandbox, count: 4)
            let paired = Array(all.prefix(3))
            let stranger = all[3]
            try pairAll(sandbox, paired)
            for device in paired { try sandbox.ok(["pair", "--trust", device.id, "--home", stranger.home]) }
            try sandbox.ok(["list", "add", "Shared", "--home", paired[0].home])
            let first = try paired[0].store.summary()

            let started = Date()
            var agents: [HostProcess] = []
            defer { for agent in agents { _ = agent.stop() } }
            for (index, device) in all.enumerated() { agents.append(try startAgent(lan, device, on: lan.hosts[index])) }
            let firstSync = try time(within: 20) { try paired[1].store.summary().covers(first) }
            #expect(firstSync != nil, "h2 never got h1's list: \(agents[1].transcript)")
            print(String(format: "LAN: agent start → first sync with a peer found by mDNS: %.2f s", Date().timeIntervalSince(started)))
            #expect(try time(within: 20) { try paired[2].store.summary().covers(first) } != nil, "h3: \(agents[2].transcript)")

            // Concurrent edits: every paired host adds items at once.
            let shared = try (0..<3).map { try list(paired[$0], "Shared") }
            let writers = (0..<3).map { index in
                Thread { for round in 0..<20 { _ = try? add(paired[index], to: shared[index], "h\(index + 1) item \(round)") } }
            }
            for writer in writers { writer.start() }
            let converged = try time(within: 30) {
                let all = try summaries(paired)
                // Each host's signed begin, the list, and 60 items.
                return Set(all).count == 1 && all[0].count == 3 + 1 + 60
            }
            let seen = try summaries(paired)
            #expect(converged != nil, "\(seen)\n\(agents[0].transcript)")
            let digests = try paired.map { try sync.status(sandbox, $0.home).digest }
            #expect(Set(digests).count == 1, "\(digests)")

            // Edit on h1 → applied on h2 and h3.
            var latencies: [Double] = []
            for index in 0..<30 {
                let change = try add(paired[0], to: shared[0], "latency \(index)")
                let start = Date()
                let arrived = try time(within: 10) {
                    try paired[1...].allSatisfy { try $0.store.summary().contains(change.ref) }
                }
                #expect(arrived != nil)
                latencies.append(Date().timeIntervalSince(start) * 1000)
            }
            latencies.sort()
            print(String(format: "LAN: edit on h1 → applied on h2 and h3 (30 edits): p50 %.1f ms, max %.1f ms",
                latencies[latencies.count / 2], latencies.last!))

            // The stranger found them (it trusts them) but was refused: it holds nothing of theirs.
            #expect(try stranger.store.summary().timelines == [try stranger.store.ownTimeline()])
            // The stranger dials when its browse finds h1, which under load can come after the edits above: wait for
            // h1 to record the refused handshake rather than read the pending list once.
            var pending: [String: Any] = [:]
            var ids: [String] = []
            _ = try eventually(30) {
                pending = try sandbox.ok(["peers", "--pending", "--json", "--home", paired[0].home]).json()
                ids = (pending["pending"] as? [[String: Any]])?.compactMap { $0["device"] as? String } ?? []
                return ids.contains(stranger.id)
            }
            #expect(ids.contains(stranger.id), "h1 lists the stranger as pending: \(pending)\n\(agents[0].transcript)")
        }
    }

    /// A host cut off (link down) while both sides edit, then brought back, catches up and everyone agrees.
    /// `outage` is how long the link stays down after the edits: none (TCP simply resumes), or long enough
    /// for TCP's retransmission back-off to grow past a second (then rediscovery starts fresh sessions).
    @Test(arguments: [0.0, 6.0])
    func aHostCutOffCatchesUpWhenItsLinkComesBack(outage: Double) throws {
        let lan = try NetnsLAN(hosts: 3)
        defer { lan.tearDown() }
        try withSandbox { sandbox in
            let devices = try devices(sandbox, count: 3)
            try pairAll(sandbox, devices)
            try sandbox.ok(["list", "add", "Notes", "--home", devices[0].home])
            var agents: [HostProcess] = []
            defer { for agent in agents { _ = agent.stop() } }
            for (index, device) in devices.enumerated() { agents.append(try startAgent(lan, device, on: lan.hosts[index])) }
            #expect(try time(within: 20) { try agreed(devices) } != nil, "no initial convergence")
            let notes = try devices.map { try list($0, "Notes") }

            try lan.setLink(of: lan.hosts[2], up: false)
            for round in 0..<5 {
                try add(devices[0], to: notes[0], "h1 while h3 is away \(round)")
                try add(devices[2], to: notes[2], "h3 while away \(round)")
            }
            // The two still connected agree; the one cut off cannot.
            #expect(try time(within: 10) { try devices[0].store.summary() == devices[1].store.summary() && devices[0].store.summary().count == 3 + 6 } != nil)
            #expect(try devices[2].store.summary() != devices[0].store.summary())
            // The length of the outage being simulated (not a wait for an event).
            Thread.sleep(forTimeInterval: outage)

            try lan.setLink(of: lan.hosts[2], up: true)
            // Three signed begins, the list and ten items.
            let back = try time(within: 30) { try agreed(devices) && devices[0].store.summary().count == 3 + 11 }
            let h3 = try devices[2].store.summary()
            #expect(back != nil, "h3 \(h3)\n\(agents[2].transcript)")
            if let back {
                print(String(format: "LAN: link back up after %.0f s down → all hosts agree: %.2f s", outage + 0, back))
            }
            let digests = try devices.map { try sync.status(sandbox, $0.home).digest }
            #expect(Set(digests).count == 1, "\(digests)")
        }
    }

    /// No avahi-daemon on the hosts (a dbus-daemon only): each agent warns once and static peers still work.
    @Test func withoutAvahiAgentsWarnOnceAndUseStaticPeers() throws {
        let lan = try NetnsLAN(hosts: 2, avahi: false)
        defer { lan.tearDown() }
        try withSandbox { sandbox in
            let devices = try devices(sandbox, count: 2)
            try pairAll(sandbox, devices)
            try sandbox.ok(["list", "add", "Static", "--home", devices[0].home])
            let a = try lan.spawn(
                [try PlaitExecutable.path.get(), "agent", "--home", devices[0].home, "--listen", "0.0.0.0:7400"], in: lan.hosts[0])
            defer { _ = a.stop() }
            let b = try lan.spawn(
                [
                    try PlaitExecutable.path.get(), "agent", "--home", devices[1].home, "--listen", "0.0.0.0:7400",
                    "--peer", "\(lan.hosts[0].ipv4):7400",
                ], in: lan.hosts[1])
            defer { _ = b.stop() }
            #expect(try time(within: 20) { try agreed(devices) } != nil, "\(b.transcript)")
            let warning = try b.waitForLine(on: .stderr, timeout: .seconds(10)) { $0.contains("avahi-daemon") }
            #expect(warning.contains("static peers still work"), "\(warning)")
            #expect(b.lines(.stderr).filter { $0.contains("avahi-daemon") && $0.contains("warning") }.count == 1, "\(b.transcript)")
        }
    }
}
