import Foundation
import PlaitNetnsSupport
import PlaitOutput
import Testing

/// What `plait peers` says about a paired device is what is true now (DESIGN §10: "in sync" only when it is), with
/// agents and commands as real processes over real TLS on loopback. Both cases were found by the third hostile
/// tester of 2026-11-25 (tests/hostile/2026-11-25-c).
@Suite(.serialized) struct PeerStateTests {
    func device(_ sandbox: Sandbox, _ name: String) throws -> (home: String, id: String) {
        let home = sandbox.root + "/" + name
        try sandbox.ok(["init", "--name", name, "--home", home])
        return (home, try sandbox.ok(["id", "--home", home]).lines.last!)
    }

    /// The one paired device of `home` as `plait peers --json` shows it.
    func peer(_ sandbox: Sandbox, _ home: String) throws -> [String: Any] {
        let peers = try sandbox.ok(["peers", "--json", "--home", home]).json()["peers"] as? [[String: Any]] ?? []
        try #require(peers.count == 1, "\(peers)")
        return peers[0]
    }

    func summary(_ sandbox: Sandbox, _ home: String) throws -> String {
        try sandbox.ok(["status", "--json", "--home", home]).json()["summary"] as? String ?? "?"
    }

    /// Awaits Y holding what X holds, then each one's `peers` showing the other "in sync" at that summary.
    func expectBothInSync(_ sandbox: Sandbox, _ x: String, _ y: String, round: Int) throws {
        let target = try summary(sandbox, x)
        let arrived = try eventually { try summary(sandbox, y) == target }
        #expect(arrived, "round \(round)")
        for home in [x, y] {
            let inSync = try eventually {
                let shown = try peer(sandbox, home)
                return shown["state"] as? String == "in sync" && shown["summary"] as? String == target
            }
            let shown = try peer(sandbox, home)
            #expect(inSync, "round \(round): \(shown)")
            #expect(shown["last_seen"] is String)
        }
    }

    /// After X unpairs Y, Y's `plait sync` and Y's agent are refused; Y's `plait peers` then says X refuses this
    /// device, not "in sync" (as it did, from the last session before the unpair). Once X pairs Y again, the next
    /// session of Y's agent with X clears it.
    @Test func aDeviceUnpairedThereIsShownAsRefusedUntilPairedAgain() throws {
        try withSandbox { sandbox in
            let x = try device(sandbox, "x")
            let y = try device(sandbox, "y")
            try sandbox.ok(["pair", "--trust", y.id, "--name", "x-box", "--home", x.home])
            try sandbox.ok(["pair", "--trust", x.id, "--name", "the server", "--home", y.home])
            try sandbox.ok(["batch", "--home", x.home], stdin: "list add Groceries\nadd Groceries milk\n")
            let agentX = try RunningAgent(sandbox: sandbox, home: x.home)
            defer { #expect(agentX.stop() == 0, "\(agentX.log)") }
            let first = try sandbox.ok(["sync", "--peer", agentX.address, "--home", y.home])
            // The sync's line names the peer as it was named at pairing here, not as its Hello names itself.
            #expect(first.stdout.contains("the server (\(agentX.address))"), "\(first)")
            #expect(try peer(sandbox, y.home)["state"] as? String == "in sync")

            try sandbox.ok(["unpair", y.id, "--home", x.home])
            let refused = try sandbox.fails(["sync", "--peer", agentX.address, "--home", y.home])
            // Named as stored here (it was the address alone).
            #expect(refused.stderr.contains("the server refused this device: it is not paired there"), "\(refused)")
            var shown = try peer(sandbox, y.home)
            #expect(shown["state"] as? String == "refuses this device (not paired there)", "\(shown)")
            #expect(shown["in_sync"] as? Bool == false)
            #expect(shown["refused_this_device"] is String, "\(shown)")

            // Y's agent, dialling X, is refused as well, and says so (once), by the name stored here.
            try sandbox.ok(["unpair", x.id, "--home", y.home])
            try sandbox.ok(["pair", "--trust", x.id, "--name", "the server", "--home", y.home])
            #expect(try peer(sandbox, y.home)["state"] as? String == "never seen")
            let agentY = try RunningAgent(sandbox: sandbox, home: y.home, extra: ["--peer", agentX.address])
            defer { #expect(agentY.stop() == 0, "\(agentY.log)") }
            let logged = eventually { agentY.log.contains("the server (\(x.id)) refused this device") }
            #expect(logged, "\(agentY.log)")
            shown = try peer(sandbox, y.home)
            #expect(shown["state"] as? String == "refuses this device (not paired there)", "\(shown)")

            // Paired again there: the agent's next session reaches X's Hello, and the refusal is over.
            try sandbox.ok(["pair", "--trust", y.id, "--home", x.home])
            let cleared = try eventually(30) { try peer(sandbox, y.home)["state"] as? String == "in sync" }
            let after = try peer(sandbox, y.home)
            #expect(cleared, "\(after)\n\(agentY.log)")
            #expect(after["refused_this_device"] is NSNull)
            let lines = agentY.log.split(separator: "\n").filter { $0.contains("refused this device") }
            #expect(lines.count == 1, "the refusal is logged once per streak, at warning level: \(lines)")
        }
    }

    /// Two agents stay connected; an edit goes across. Each one's `plait peers` shows the other as seen and
    /// "in sync" while their session still runs (it showed "never seen" until a session ended).
    @Test func aConnectedPeerIsShownInSyncWhileItsSessionRuns() throws {
        try withSandbox { sandbox in
            let x = try device(sandbox, "x")
            let y = try device(sandbox, "y")
            try sandbox.ok(["pair", "--trust", y.id, "--home", x.home])
            try sandbox.ok(["pair", "--trust", x.id, "--home", y.home])
            try sandbox.ok(["batch", "--home", y.home], stdin: "list add Work\nadd Work report\n")
            let agentX = try RunningAgent(sandbox: sandbox, home: x.home)
            defer { #expect(agentX.stop() == 0, "\(agentX.log)") }
            let agentY = try RunningAgent(sandbox: sandbox, home: y.home, extra: ["--peer", agentX.address])
            defer { #expect(agentY.stop() == 0, "\(agentY.log)") }
            #expect(try eventually { try summary(sandbox, x.home) == summary(sandbox, y.home) })

            try expectBothInSync(sandbox, x.home, y.home, round: 0)
            try sandbox.ok(["add", "Work", "slides", "--home", x.home])
            try expectBothInSync(sandbox, x.home, y.home, round: 1)
            // All of it while the one session ran.
            for log in [agentX.log, agentY.log] {
                #expect(!log.contains("ended: pulled"), "a session ended:\n\(log)")
            }
        }
    }

    /// What a new user met (tests/hostile/2026-11-25-f): `plait peers` said "in sync" for a peer that had made changes
    /// since (it is how the two stood when they last talked, and now says so); `plait sync` skipped a paired device
    /// without an address in silence, said "Start `plait agent` on the other device" when no paired device had one,
    /// and, given its own agent's address, advised `plait pair --trust` of its own ID, which is refused.
    @Test func peersAndSyncSayWhatANewUserNeeds() throws {
        try withSandbox { sandbox in
            let x = try device(sandbox, "x")
            let y = try device(sandbox, "y")
            let z = try device(sandbox, "z")
            let agentX = try RunningAgent(sandbox: sandbox, home: x.home)
            defer { #expect(agentX.stop() == 0, "\(agentX.log)") }
            try sandbox.ok(["pair", "--trust", y.id, "--home", x.home])
            try sandbox.ok(["pair", "--trust", x.id, "--address", agentX.address, "--home", y.home])
            try sandbox.ok(["sync", "--no-discovery", "--home", y.home])
            let listed = try sandbox.ok(["peers", "--home", y.home]).stdout
            #expect(listed.contains("in sync at last contact"), "\(listed)")

            // Y pairs with Z by ID only (no address): Y's sync names it instead of skipping it in silence.
            try sandbox.ok(["pair", "--trust", z.id, "--name", "zed", "--home", y.home])
            let partial = try sandbox.ok(["sync", "--no-discovery", "--home", y.home])
            #expect(partial.stderr.contains("warning: zed (\(z.id)) was not synced: no known address"), "\(partial)")
            #expect(partial.stderr.contains("--trust ID --address HOST:PORT"), "\(partial)")
            // X knows no address of Y (Y was trusted without one): not "start `plait agent` on the other device".
            let none = try sandbox.fails(["sync", "--no-discovery", "--home", x.home])
            #expect(none.stderr.contains("no paired device has a known address"), "\(none)")
            #expect(none.stderr.contains("store one with `plait pair --trust ID --address HOST:PORT`"), "\(none)")
            #expect(!none.stderr.contains("Start `plait agent`"), "\(none)")
            let lonely = try sandbox.fails(["sync", "--no-discovery", "--home", z.home])
            #expect(lonely.stderr.contains("this device is paired with no device"), "\(lonely)")
            // X's own agent: no advice to trust its own ID.
            let own = try sandbox.fails(["sync", "--peer", agentX.address, "--home", x.home])
            #expect(own.stderr.contains("is this device's own agent"), "\(own)")
            #expect(!own.stderr.contains("pair --trust"), "\(own)")
            try scriptsGetJSONOnEveryOutcome(sandbox, x: x, y: y, z: z)
        }
    }

    /// `sync --json` is JSON on stdout whether or not any device could be tried, and names the paired devices it
    /// could not try; trusting a device paired already says so.
    private func scriptsGetJSONOnEveryOutcome(
        _ sandbox: Sandbox, x: (home: String, id: String), y: (home: String, id: String), z: (home: String, id: String)
    ) throws {
        let partial = try sandbox.ok(["sync", "--no-discovery", "--json", "--home", y.home])
        let synced = try JSONDecoder().decode(SyncOutput.self, from: Data(partial.stdout.utf8))
        #expect(synced.peers.map(\.device) == [x.id] && synced.peers.allSatisfy(\.ok), "\(partial)")
        #expect(synced.unreached.map(\.device) == [z.id], "\(partial)")
        #expect(synced.unreached.first?.name == "zed", "\(partial)")
        let none = try sandbox.fails(["sync", "--no-discovery", "--json", "--home", x.home])
        let unsynced = try JSONDecoder().decode(SyncOutput.self, from: Data(none.stdout.utf8))
        #expect(unsynced.peers.isEmpty && unsynced.unreached.map(\.device) == [y.id], "\(none)")
        #expect(none.stderr.contains("no paired device has a known address"), "\(none)")
        let lonely = try sandbox.fails(["sync", "--no-discovery", "--json", "--home", z.home])
        #expect(try JSONDecoder().decode(SyncOutput.self, from: Data(lonely.stdout.utf8)) == SyncOutput(peers: []))

        let again = try sandbox.ok(["pair", "--trust", z.id, "--address", "127.0.0.1:9", "--home", y.home])
        #expect(again.stdout.hasPrefix("already paired with \(z.id) (\"zed\") at 127.0.0.1:9"), "\(again)")
        let json = try sandbox.ok(["pair", "--trust", z.id, "--json", "--home", y.home])
        let paired = try JSONDecoder().decode(PairOutput.self, from: Data(json.stdout.utf8))
        #expect(paired.alreadyPaired && paired.address == "127.0.0.1:9" && paired.name == "zed", "\(json)")
        let first = try sandbox.ok(["pair", "--trust", y.id, "--json", "--home", z.home])
        #expect(try !JSONDecoder().decode(PairOutput.self, from: Data(first.stdout.utf8)).alreadyPaired, "\(first)")
    }
}
