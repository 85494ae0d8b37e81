import Foundation
import PlaitNetnsSupport
import PlaitTLS
import Testing

/// Protocol versions and copied homes (DESIGN §11 "Versions", "Copied homes"), over real TLS on loopback with the
/// real binary: a peer speaking only protocol 1 is refused on both sides with both versions named, and a home copied
/// with `cp -a` is reported by the third device and by both copies, whose connections do not knock each other off.
@Suite(.serialized) struct VersionTests {
    func device(_ sandbox: Sandbox, _ name: String) throws -> (home: String, id: String) {
        let home = sandbox.root + "/" + name
        try sandbox.ok(["init", "--name", name, "--home", home])
        return (home, try sandbox.ok(["id", "--home", home]).lines.last!)
    }

    func pair(_ sandbox: Sandbox, _ a: (home: String, id: String), _ b: (home: String, id: String)) throws {
        try sandbox.ok(["pair", "--trust", b.id, "--home", a.home])
        try sandbox.ok(["pair", "--trust", a.id, "--home", b.home])
    }

    /// A certificate of a device that runs another plait (made with this build's code, speaking another ALPN).
    func otherIdentity(_ sandbox: Sandbox) throws -> Identity {
        let directory = sandbox.root + "/older-plait"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return try Identity.create(directory: directory, commonName: "older")
    }

    @Test func anAgentRefusesAClientSpeakingOnlyProtocol1AndSaysWhichVersionsMeet() throws {
        try withSandbox { sandbox in
            let new = try device(sandbox, "new")
            let agent = try RunningAgent(sandbox: sandbox, home: new.home)
            defer { #expect(agent.stop() == 0, "the agent exits cleanly: \(agent.log)") }
            let older = try TLSContext(
                identity: try otherIdentity(sandbox), isServer: false, rawApplicationProtocols: ["plait-sync/1"])
            var refusal: (any Error)?
            do {
                let connection = try TLSConnection.connect(
                    host: "127.0.0.1", port: agent.port, context: older, trust: { _ in true }, timeout: .seconds(5))
                connection.close()
            } catch {
                refusal = error
            }
            // The handshake itself fails: the server sent no_application_protocol, nothing else went either way.
            guard case let TLSError.alpnMismatch(offered)? = refusal else {
                Issue.record("the version-1 client was not refused at the handshake: \(String(describing: refusal))")
                return
            }
            #expect(offered == ["plait-sync/1"])
            let line = "device at 127.0.0.1 speaks plait protocol 1; this device speaks protocol 2: upgrade plait there"
            #expect(eventually(10) { agent.log.contains(line) }, "the agent names both versions: \(agent.log)")
        }
    }

    @Test func syncWithAServerSpeakingOnlyProtocol1FailsNamingBothVersions() throws {
        try withSandbox { sandbox in
            let new = try device(sandbox, "new")
            let identity = try otherIdentity(sandbox)
            let older = try TLSContext(identity: identity, isServer: true, rawApplicationProtocols: ["plait-sync/1"])
            let listener = try TLSListener(host: "127.0.0.1", port: 0, context: older)
            defer { listener.close() }
            let served = DispatchSemaphore(value: 0)
            let outcome = Outcome()
            Thread.detachNewThread {
                // `plait sync`, then `plait doctor` checking the peer.
                for _ in 0..<2 {
                    do {
                        _ = try listener.accept(trust: { _ in true }, timeout: .seconds(20))
                        outcome.set("the older server completed a handshake")
                    } catch {
                        outcome.set("\(error)")
                        outcome.alpn = (error as? TLSError).map { if case .alpnMismatch = $0 { true } else { false } }
                    }
                    served.signal()
                }
            }
            let address = "127.0.0.1:\(listener.port)"
            let run = try sandbox.fails(["sync", "--peer", address, "--no-discovery", "--home", new.home])
            #expect(served.wait(timeout: .now() + 20) == .success, "the listener thread ends")
            let sentence = "the peer at \(address) does not speak plait protocol 2 (it may run an older plait, "
                + "which speaks 1): upgrade plait there"
            #expect(run.stdout.contains(sentence) || run.stderr.contains(sentence), "\(run)")
            #expect(outcome.alpn == true, "the server side failed on ALPN: \(outcome.text)")

            // `plait doctor` says the same of a paired device at that address, and what to do.
            try sandbox.ok(["pair", "--trust", identity.deviceID.description, "--address", address, "--home", new.home])
            let doctor = try sandbox.run(["doctor", "--home", new.home])
            #expect(served.wait(timeout: .now() + 20) == .success, "the listener thread ends")
            #expect(doctor.status != 0 && doctor.stdout.contains(sentence), "\(doctor)")
            #expect(doctor.stdout.contains("install a plait that speaks protocol 2 on"), "\(doctor)")
        }
    }

    /// What a helper thread saw, read by the test after it signalled.
    final class Outcome: @unchecked Sendable {
        private let lock = NSLock()
        private var value = ""
        var alpn: Bool?
        func set(_ text: String) { lock.withLock { value = text } }
        var text: String { lock.withLock { value } }
    }

    func copiedAlarms(_ sandbox: Sandbox, _ home: String) throws -> [String] {
        try sandbox.ok(["status", "--json", "--home", home]).json()["copied"] as? [String] ?? []
    }

    func summary(_ sandbox: Sandbox, _ home: String) throws -> String {
        try sandbox.ok(["status", "--json", "--home", home]).json()["summary"] as? String ?? "?"
    }

    /// `cp -a SOURCE DESTINATION`, the way a user copies a home.
    func copyHome(_ source: String, to destination: String) throws {
        let copy = try ChildProcess.run("/bin/cp", ["-a", source, destination])
        guard copy.succeeded else { throw CLITestFailure("cp -a \(source) failed: \(copy.errors)") }
    }

    func connections(_ agent: RunningAgent) -> Int { agent.log.components(separatedBy: "connected to ").count - 1 }

    @Test func aCopiedHomeIsReportedByItsPeerAndBothCopiesWhoseConnectionsBothStay() throws {
        try withSandbox { sandbox in
            let a = try device(sandbox, "a")
            let c = try device(sandbox, "c")
            try pair(sandbox, a, c)
            // The home is copied while its agent is stopped, as a user backing it up or moving it would.
            let copy = sandbox.root + "/a-copy"
            try copyHome(a.home, to: copy)
            let agentC = try RunningAgent(sandbox: sandbox, home: c.home)
            defer { #expect(agentC.stop() == 0, "\(agentC.log)") }
            let agentA = try RunningAgent(sandbox: sandbox, home: a.home, extra: ["--peer", agentC.address])
            defer { #expect(agentA.stop() == 0, "\(agentA.log)") }
            let agentCopy = try RunningAgent(sandbox: sandbox, home: copy, extra: ["--peer", agentC.address])
            defer { #expect(agentCopy.stop() == 0, "\(agentCopy.log)") }

            let alarm = "home copied: device \(a.id) is running from two homes (instances "
            let advice = "); run `plait rejoin --new-key` on one of them"
            let reported = { (home: String) in
                try self.copiedAlarms(sandbox, home).contains { $0.hasPrefix(alarm) && $0.hasSuffix(advice) }
            }
            // The copies learn it from the third device's Notify: its report, said as such (PROTOCOL.md §13.2).
            let told = "peer \(c.id) reports that device \(a.id) (this device) is running from two homes (instances "
            let toldAdvice = " at once: if so, this home was copied; run `plait rejoin --new-key` on one of the copies"
            let reportedBy = { (home: String) in
                try self.copiedAlarms(sandbox, home).contains { $0.hasPrefix(told) && $0.hasSuffix(toldAdvice) }
            }
            #expect(try eventually(20) { try reported(c.home) }, "the third device: \(agentC.log)")
            #expect(try eventually(20) { try reportedBy(a.home) }, "the original: \(agentA.log)")
            #expect(try eventually(20) { try reportedBy(copy) }, "the copy: \(agentCopy.log)")
            let text = try sandbox.ok(["status", "--home", c.home]).stdout
            #expect(text.contains("alarm     " + alarm), "\(text)")
            let peers = try sandbox.ok(["peers", "--home", c.home]).stdout
            #expect(peers.contains("home copied"), "\(peers)")
            #expect(agentC.log.contains(alarm), "the third device's log says it: \(agentC.log)")

            // Both copies stay connected: a change made on the third device reaches both through their one
            // connection each, and nothing was replaced or re-dialled on the way.
            try sandbox.ok(["list", "add", "From c", "--home", c.home])
            let want = try summary(sandbox, c.home)
            #expect(try eventually(20) { try summary(sandbox, a.home) == want && summary(sandbox, copy) == want })
            #expect(connections(agentA) == 1, "the original connected once: \(agentA.log)")
            #expect(connections(agentCopy) == 1, "the copy connected once: \(agentCopy.log)")
            #expect(connections(agentC) == 2 && !agentC.log.contains("ended"), "\(agentC.log)")
            let doctor = try sandbox.run(["doctor", "--home", c.home])
            #expect(doctor.status != 0 && doctor.stdout.contains(alarm), "\(doctor)")

            // Acknowledgements per instance: the copy leaves holding `want`; the original then takes one more change
            // and leaves too. The third device records for the Device ID what both copies hold (so compaction
            // keeps what the copy lacks), not the summary of whichever session ended last.
            #expect(agentCopy.stop() == 0)
            let ended = { agentC.log.components(separatedBy: "ended: pulled").count - 1 }
            #expect(eventually(10) { ended() == 1 }, "\(agentC.log)")
            try sandbox.ok(["add", "From c", "one more", "--home", c.home])
            let newer = try summary(sandbox, c.home)
            #expect(try eventually(20) { try summary(sandbox, a.home) == newer }, "\(agentA.log)")
            #expect(agentA.stop() == 0)
            #expect(eventually(10) { ended() == 2 }, "\(agentC.log)")
            let rows = try sandbox.ok(["peers", "--json", "--home", c.home]).json()["peers"] as? [[String: Any]] ?? []
            let acknowledged = rows.first { $0["device"] as? String == a.id }?["summary"] as? String
            #expect(acknowledged == want && want != newer, "recorded \(acknowledged ?? "nothing"), copy held \(want)")
        }
    }

    @Test func theTwoCopiesMeetingEachOtherReportTheCopiedHomeAndDoNotSync() throws {
        try withSandbox { sandbox in
            let a = try device(sandbox, "a")
            let copy = sandbox.root + "/a-copy"
            try copyHome(a.home, to: copy)
            let agentA = try RunningAgent(sandbox: sandbox, home: a.home)
            defer { #expect(agentA.stop() == 0, "\(agentA.log)") }
            let agentCopy = try RunningAgent(sandbox: sandbox, home: copy, extra: ["--peer", agentA.address])
            defer { #expect(agentCopy.stop() == 0, "\(agentCopy.log)") }
            let alarm = "home copied: device \(a.id) is running from two homes"
            for (home, agent) in [(a.home, agentA), (copy, agentCopy)] {
                #expect(
                    try eventually(20) { try copiedAlarms(sandbox, home).contains { $0.hasPrefix(alarm) } },
                    "\(agent.log)")
                #expect(agent.log.contains(alarm), "\(agent.log)")
            }
            // Refused at Hello: neither pulled anything from the other.
            #expect(!agentA.log.contains("pulled 1") && !agentCopy.log.contains("ended: pulled"), "\(agentCopy.log)")
        }
    }
}
