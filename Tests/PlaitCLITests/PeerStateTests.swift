import Foundation
import PlaitNetnsSupport
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
}
