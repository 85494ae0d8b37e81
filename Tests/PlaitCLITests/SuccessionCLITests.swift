import Foundation
import PlaitNetnsSupport
import PlaitStore
import PlaitTLS
import Testing

/// `plait rejoin --new-key` on a copied home, and the signed statement that lets its peers trust the new Device ID
/// (PROTOCOL.md §21): the real binary, real TLS on loopback, B's agent receiving.
@Suite(.serialized) struct SuccessionCLITests {
    struct Device {
        let home: String
        let id: String
    }

    func device(_ sandbox: Sandbox, _ name: String) throws -> Device {
        let home = sandbox.root + "/" + name
        try sandbox.ok(["init", "--name", name, "--home", home])
        return Device(home: home, id: try sandbox.ok(["id", "--home", home]).lines.last!)
    }

    func peers(_ sandbox: Sandbox, _ home: String) throws -> [[String: Any]] {
        try sandbox.ok(["peers", "--json", "--home", home]).json()["peers"] as? [[String: Any]] ?? []
    }

    func peer(_ rows: [[String: Any]], _ id: String) -> [String: Any]? { rows.first { $0["device"] as? String == id } }

    func copyHome(_ from: String, to: String) throws {
        let copied = try ChildProcess.run("/bin/cp", ["-a", from, to])
        guard copied.succeeded else { throw CLITestFailure("cp -a \(from) \(to) failed: \(copied.errors)") }
    }

    func mode(_ path: String) throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    func pendingItems(_ sandbox: Sandbox, _ home: String, list: String) throws -> Set<String> {
        let shown = try sandbox.ok(["show", "--json", "--home", home]).json()
        let lists = shown["lists"] as? [[String: Any]] ?? []
        let found = lists.first { $0["title"] as? String == list }
        return Set((found?["pending"] as? [[String: Any]])?.compactMap { $0["text"] as? String } ?? [])
    }

    /// A and B paired, B's agent running and A knowing its address; A's home then copied to A2 (no agent runs on
    /// A), and A2 made suspect the way a copy finds out: A writes and syncs, then A2 pulls A's change on its own
    /// timeline.
    func copiedHome(_ sandbox: Sandbox) throws -> (a: Device, b: Device, a2: String, agent: RunningAgent) {
        let a = try device(sandbox, "a")
        let b = try device(sandbox, "b")
        try sandbox.ok(["pair", "--trust", a.id, "--name", "laptop", "--home", b.home])
        try sandbox.ok(["batch", "--home", a.home], stdin: "list add Groceries\nadd Groceries milk\n")
        let agent = try RunningAgent(sandbox: sandbox, home: b.home)
        do {
            try sandbox.ok(["pair", "--trust", b.id, "--address", agent.address, "--home", a.home])
            try sandbox.ok(["sync", "--no-discovery", "--home", a.home])
            let a2 = sandbox.root + "/a2"
            try copyHome(a.home, to: a2)
            // A copy not noticed at its first write (a clone that keeps inodes; a noticed one goes on on a new
            // timeline and is never suspect: `HandRestoreTests`).
            try forgetStoreFile(home: a2)
            try sandbox.ok(["add", "Groceries", "eggs", "--home", a.home])
            try sandbox.ok(["sync", "--no-discovery", "--home", a.home])
            // A2 pulls a change of "its own" timeline beyond its head: it now knows another copy writes on it.
            let claim = try sandbox.fails(["sync", "--no-discovery", "--home", a2])
            #expect(claim.stderr.contains("rejoin"), "\(claim)")
            return (a, b, a2, agent)
        } catch {
            agent.stop()
            throw error
        }
    }

    @Test func aCopyTakesANewKeyAndItsPeerTrustsItAfterTheNextSync() throws {
        try withSandbox { sandbox in
            let (a, b, a2, agent) = try copiedHome(sandbox)
            defer { #expect(agent.stop() == 0, "the agent exits cleanly on SIGTERM: \(agent.log)") }

            let rejoin = try sandbox.ok(["rejoin", "--new-key", "--home", a2])
            #expect(rejoin.stdout.contains("left timeline"), "another copy writes on it: not ended. \(rejoin)")
            #expect(rejoin.stdout.contains("1 paired device will learn the new ID"), "\(rejoin)")
            let newID = try sandbox.ok(["id", "--home", a2]).lines.last!
            #expect(newID != a.id && rejoin.lines.last == newID)
            let retired = a2 + "/retired/" + a.id.filter { $0 != "-" }
            #expect(try mode(retired) == 0o700)
            #expect(try mode(retired + "/key.pem") == 0o600)
            #expect(FileManager.default.fileExists(atPath: retired + "/succession.bin"))
            #expect(try Identity.load(directory: retired).deviceID.description == a.id, "the old key, kept")
            #expect(peer(try peers(sandbox, b.home), newID) == nil, "B has not heard of the new ID yet")

            try sandbox.ok(["add", "Groceries", "bread", "--home", a2])
            let told = try sandbox.ok(["sync", "--no-discovery", "--home", a2])
            #expect(told.stdout.contains("told it this device's new Device ID"), "\(told)")
            let rows = try peers(sandbox, b.home)
            #expect(rows.count == 2, "\(rows)")
            #expect(peer(rows, newID)?["name"] as? String == "laptop", "the new ID under the old one's name: \(rows)")
            #expect(peer(rows, a.id)?["succeeded_by"] as? String == newID, "\(rows)")
            #expect(agent.log.contains("has a new key"), "\(agent.log)")
            let shown = try sandbox.ok(["peers", "--home", b.home])
            #expect(shown.stdout.contains("succeeded by \(newID)"), "\(shown)")

            // The next sync is made with the new identity, which B now trusts (and records as seen).
            let again = try sandbox.ok(["sync", "--no-discovery", "--home", a2])
            #expect(!again.stdout.contains("told"), "\(again)")
            #expect(
                try eventually { peer(try peers(sandbox, b.home), newID)?["last_seen"] is String },
                "B saw a session from the new ID: \(agent.log)")
            #expect(connected(agent, newID), "\(agent.log)")

            // The original keeps its ID and its trust: it still syncs with B, and nothing was lost on either side.
            try sandbox.ok(["add", "Groceries", "butter", "--home", a.home])
            try sandbox.ok(["sync", "--no-discovery", "--home", a.home])
            try sandbox.ok(["sync", "--no-discovery", "--home", a2])
            let everything: Set<String> = ["milk", "eggs", "bread", "butter"]
            for home in [a.home, b.home, a2] {
                #expect(try pendingItems(sandbox, home, list: "Groceries") == everything, "\(home)")
            }
            // The copy's new timeline is the new key's: its begin carries the new cert.pem, on the copy and on B
            // (which took the copy's changes as signed by that key); the original's timeline stays the old key's.
            let newCertificate = try Identity.load(directory: a2).certificateDER
            let oldCertificate = try Identity.load(directory: a.home).certificateDER
            let copyTimeline = try Store.open(at: a2 + "/plait.db", synchronousFull: false).ownTimeline()
            let original = try Store.open(at: a.home + "/plait.db", synchronousFull: false).ownTimeline()
            for home in [a2, b.home] {
                let store = try Store.open(at: home + "/plait.db", synchronousFull: false)
                #expect(try store.certificate(of: copyTimeline) == newCertificate, "\(home)")
                #expect(try store.certificate(of: original) == oldCertificate, "\(home)")
            }
        }
    }

    @Test func theCopysAgentTellsItsPeerByItselfThenConnectsWithTheNewID() throws {
        try withSandbox { sandbox in
            let (a, b, a2, agent) = try copiedHome(sandbox)
            defer { #expect(agent.stop() == 0, "the agent exits cleanly on SIGTERM: \(agent.log)") }
            try sandbox.ok(["rejoin", "--new-key", "--home", a2])
            let newID = try sandbox.ok(["id", "--home", a2]).lines.last!
            let copy = try RunningAgent(sandbox: sandbox, home: a2)
            defer { #expect(copy.stop() == 0, "the copy's agent exits cleanly on SIGTERM: \(copy.log)") }
            #expect(
                try eventually { copy.log.contains("told ") && connected(agent, newID) },
                "the copy's agent told B, then dialled it as itself. copy: \(copy.log)\nB: \(agent.log)")
            let rows = try peers(sandbox, b.home)
            #expect(peer(rows, a.id)?["succeeded_by"] as? String == newID, "\(rows)")
            #expect(peer(rows, newID)?["name"] as? String == "laptop", "\(rows)")
        }
    }

    /// `plait sync --peer ADDRESS` does not know beforehand which device answers: the new identity is tried first,
    /// B refuses it (and lists it as pending), and the retired identity then tells B, which takes the new ID off
    /// its pending list.
    @Test func syncToAnAddressTriesTheNewIdentityThenTellsWithTheRetiredOne() throws {
        try withSandbox { sandbox in
            let (a, b, a2, agent) = try copiedHome(sandbox)
            defer { #expect(agent.stop() == 0, "the agent exits cleanly on SIGTERM: \(agent.log)") }
            try sandbox.ok(["rejoin", "--new-key", "--home", a2])
            let newID = try sandbox.ok(["id", "--home", a2]).lines.last!
            let told = try sandbox.ok(["sync", "--peer", agent.address, "--home", a2])
            #expect(told.stdout.contains("told it this device's new Device ID"), "\(told)")
            let rows = try peers(sandbox, b.home)
            #expect(peer(rows, a.id)?["succeeded_by"] as? String == newID, "\(rows)")
            #expect(
                try eventually { agent.log.contains("refused unpaired device \(newID)") },
                "the new ID was tried first: \(agent.log)")
            let pending = try sandbox.ok(["peers", "--pending", "--json", "--home", b.home]).json()
            #expect((pending["pending"] as? [[String: Any]])?.isEmpty == true, "\(pending)")
            let again = try sandbox.ok(["sync", "--peer", agent.address, "--home", a2, "--json"]).json()
            let first = (again["peers"] as? [[String: Any]])?.first
            #expect(first?["told_new_id"] as? Bool == false && first?["device"] as? String == b.id, "\(again)")
        }
    }

    /// Two `--new-key` runs before the peer heard of the first: the peer trusts only the first ID, so the first
    /// key's statement is signed again to name the newest certificate, and the peer goes straight to it.
    @Test func aSecondNewKeyBeforeThePeerHeardOfTheFirstLeadsItToTheNewest() throws {
        try withSandbox { sandbox in
            let (a, b, a2, agent) = try copiedHome(sandbox)
            defer { #expect(agent.stop() == 0, "the agent exits cleanly on SIGTERM: \(agent.log)") }
            try sandbox.ok(["rejoin", "--new-key", "--home", a2])
            let between = try sandbox.ok(["id", "--home", a2]).lines.last!
            try sandbox.ok(["rejoin", "--new-key", "--home", a2])
            let newest = try sandbox.ok(["id", "--home", a2]).lines.last!
            #expect(Set([a.id, between, newest]).count == 3)
            let told = try sandbox.ok(["sync", "--no-discovery", "--home", a2])
            #expect(told.stdout.contains("told it this device's new Device ID"), "\(told)")
            let rows = try peers(sandbox, b.home)
            #expect(peer(rows, a.id)?["succeeded_by"] as? String == newest, "\(rows)")
            #expect(peer(rows, newest)?["name"] as? String == "laptop", "\(rows)")
            #expect(peer(rows, between) == nil, "\(rows)")
            try sandbox.ok(["sync", "--no-discovery", "--home", a2])
            #expect(try eventually { peer(try peers(sandbox, b.home), newest)?["last_seen"] is String })
        }
    }

    @Test func theHelpSaysWhenAndWhatAndTheCommandRefusesWhileAnAgentRuns() throws {
        try withSandbox { sandbox in
            // Read as one line: where the help wraps depends on its width, not on what it says.
            let help = try sandbox.ok(["rejoin", "--help"]).stdout.split(whereSeparator: \.isWhitespace)
                .joined(separator: " ")
            for phrase in ["--new-key", "home copied", "next sync", "retired/", "no longer used", "and the new one"] {
                #expect(help.contains(phrase), "`rejoin --help` says \(phrase): \(help)")
            }
            let a = try device(sandbox, "a")
            let b = try device(sandbox, "b")
            try sandbox.ok(["pair", "--trust", b.id, "--home", a.home])
            let agent = try RunningAgent(sandbox: sandbox, home: a.home)
            let refused = try sandbox.fails(["rejoin", "--new-key", "--home", a.home])
            #expect(agent.stop() == 0, "\(agent.log)")
            #expect(refused.stderr.contains("agent"), "\(refused)")
            #expect(try sandbox.ok(["id", "--home", a.home]).lines.last == a.id, "nothing changed")
            #expect(!FileManager.default.fileExists(atPath: a.home + "/retired/" + a.id.filter { $0 != "-" }))
            // Without another copy writing on it, the old timeline is ended.
            let rejoin = try sandbox.ok(["rejoin", "--new-key", "--home", a.home])
            #expect(rejoin.stdout.contains("ended timeline"), "\(rejoin)")
            #expect(try sandbox.ok(["id", "--home", a.home]).lines.last != a.id)
        }
    }

    @Test func aForgedStatementIsRefusedAndChangesNothing() throws {
        try withSandbox { sandbox in
            let (a, b, a2, agent) = try copiedHome(sandbox)
            defer { #expect(agent.stop() == 0, "the agent exits cleanly on SIGTERM: \(agent.log)") }
            try sandbox.ok(["rejoin", "--new-key", "--home", a2])
            // Another device B trusts: a statement from its key, carried on A's connection, must not count.
            let stranger = try device(sandbox, "c")
            try sandbox.ok(["pair", "--trust", stranger.id, "--name", "phone", "--home", b.home])
            let old = try Identity.load(directory: a.home)
            let new = try Identity.load(directory: a2)
            let other = try Identity.load(directory: stranger.home)
            let file = a2 + "/retired/" + a.id.filter { $0 != "-" } + "/succession.bin"
            let genuine = try Data(contentsOf: URL(fileURLWithPath: file))

            let named = Succession(oldCertificate: old.certificateDER, newCertificate: new.certificateDER, issuedAt: 1)
                .encoded()
            let newSignature = try Succession.newSignature(over: named, by: new)
            let byOtherKey = named + (try Succession.signature(over: named, by: other)) + newSignature
            let otherCertificate = try Succession.sign(old: other, new: new, issuedAt: 1)
            var flipped = [UInt8](genuine)
            flipped[flipped.count - 100] ^= 0x01
            var flippedNew = [UInt8](genuine)
            flippedNew[flippedNew.count - 30] ^= 0x01
            // The hostile tester's finding: the old key alone named another device B trusts as its successor. The
            // key of that device never signed: whatever stands in for its signature, B refuses the statement.
            let (namingPhone, oldKeysSignature) = try Succession.sign(
                old: old, newCertificate: other.certificateDER, issuedAt: 1)
            let forgeries: [(String, [UInt8], String)] = [
                ("signed by another key", byOtherKey, "does not verify"),
                (
                    "naming another certificate than the connection's",
                    otherCertificate.statement + otherCertificate.signature + otherCertificate.newSignature,
                    "not the certificate this connection"
                ),
                ("with a damaged signature", flipped, "does not verify"),
                ("with a damaged new signature", flippedNew, "new signature does not verify"),
                (
                    "naming another paired device's certificate, signed by the old key only",
                    namingPhone + oldKeysSignature + (try Succession.newSignature(over: namingPhone, by: old)),
                    "new signature does not verify"
                ),
            ]
            let before = try sandbox.ok(["peers", "--json", "--home", b.home]).stdout
            let pendingBefore = try sandbox.ok(["peers", "--pending", "--json", "--home", b.home]).stdout
            for (label, bytes, reason) in forgeries {
                try Data(bytes).write(to: URL(fileURLWithPath: file))
                let run = try sandbox.fails(["sync", "--no-discovery", "--home", a2])
                #expect(run.stderr.contains("succession statement was refused"), "\(label): \(run)")
                #expect(run.stderr.contains(reason), "\(label): \(run)")
                #expect(try sandbox.ok(["peers", "--json", "--home", b.home]).stdout == before, "\(label)")
                #expect(try sandbox.ok(["peers", "--pending", "--json", "--home", b.home]).stdout == pendingBefore)
                #expect(agent.log.contains("refused a succession statement"), "\(label): \(agent.log)")
            }
            // The same steps with the genuine statement do change B's trust: the refusals above were the forgeries'.
            try genuine.write(to: URL(fileURLWithPath: file))
            let told = try sandbox.ok(["sync", "--no-discovery", "--home", a2])
            #expect(told.stdout.contains("told it this device's new Device ID"), "\(told)")
            #expect(try sandbox.ok(["peers", "--json", "--home", b.home]).stdout != before)
        }
    }

    /// The hostile tester's second case: B's user unpaired D, and a statement from a device B trusts, naming D's
    /// certificate, made B trust D again (D's `plait sync` then succeeded). Even signed by D's key too, such a
    /// statement is refused over real TLS, and D stays refused until B's user pairs it again.
    @Test func aStatementNamingADeviceUnpairedHereIsRefusedAndItStaysUnpaired() throws {
        try withSandbox { sandbox in
            let (a, b, a2, agent) = try copiedHome(sandbox)
            defer { #expect(agent.stop() == 0, "the agent exits cleanly on SIGTERM: \(agent.log)") }
            try sandbox.ok(["rejoin", "--new-key", "--home", a2])
            let d = try device(sandbox, "d")
            try sandbox.ok(["pair", "--trust", d.id, "--name", "tablet", "--home", b.home])
            try sandbox.ok(["pair", "--trust", b.id, "--address", agent.address, "--home", d.home])
            try sandbox.ok(["sync", "--no-discovery", "--home", d.home])
            try sandbox.ok(["unpair", d.id, "--home", b.home])
            // B's agent reads the unpair from its store when it sees the commit: D is refused from then on.
            #expect(
                try eventually { try sandbox.run(["sync", "--no-discovery", "--home", d.home]).status != 0 },
                "B's agent dropped D: \(agent.log)")

            let old = try Identity.load(directory: a.home)
            let named = try Succession.sign(old: old, new: try Identity.load(directory: d.home), issuedAt: 1)
            let file = a2 + "/retired/" + a.id.filter { $0 != "-" } + "/succession.bin"
            try Data(named.statement + named.signature + named.newSignature).write(to: URL(fileURLWithPath: file))
            let before = try sandbox.ok(["peers", "--json", "--home", b.home]).stdout
            let run = try sandbox.fails(["sync", "--no-discovery", "--home", a2])
            #expect(run.stderr.contains("succession statement was refused"), "\(run)")
            #expect(run.stderr.contains("was unpaired here"), "\(run)")
            #expect(try sandbox.ok(["peers", "--json", "--home", b.home]).stdout == before)
            #expect(peer(try peers(sandbox, b.home), d.id) == nil, "D is not trusted again")
            let still = try sandbox.fails(["sync", "--no-discovery", "--home", d.home])
            #expect(!still.stderr.isEmpty, "D's sync is still refused: \(still)")

            // The user pairs D again: that alone undoes the unpair, as `unpair --help` says.
            try sandbox.ok(["pair", "--trust", d.id, "--home", b.home])
            try sandbox.ok(["sync", "--no-discovery", "--home", d.home])
            let help = try sandbox.ok(["unpair", "--help"]).stdout.split(whereSeparator: \.isWhitespace)
                .joined(separator: " ")
            #expect(help.contains("until you pair it again") && help.contains("is refused"), "\(help)")
        }
    }

    /// Whether `agent` logged a connection with device `id` ("connected to NAME (ID) …").
    func connected(_ agent: RunningAgent, _ id: String) -> Bool {
        agent.log.split(separator: "\n").contains { $0.contains("connected to ") && $0.contains("(\(id))") }
    }
}
