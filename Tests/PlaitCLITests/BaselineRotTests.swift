import Foundation
import PlaitTestSupport
import Testing

/// One flipped bit in the stored baseline (bad-luck tester 2026-11-25, H1): the text `item-69` read `item-6y`.
/// `doctor` blamed the materialized state, `repair` rebuilt the state from the damaged baseline, `doctor` then said
/// all was well, and a new device syncing from the damaged home took the damage as source. The baseline's SHA-256 is
/// now kept beside it when it is written; a baseline whose bytes differ is neither used nor sent, and is reported.
@Suite struct BaselineRotTests {
    /// Turns the first `item-69` in the store's baseline bytes into `item-6y` (one bit: '9' 0x39 → 'y' 0x79).
    func rotTheBaseline(_ store: String) throws {
        let hex = try sqliteShell(store, "SELECT hex(data) FROM baseline").trimmingCharacters(in: .whitespacesAndNewlines)
        let text = "6974656D2D3639"  // item-69
        guard let range = hex.range(of: text) else { throw CLITestFailure("no item-69 in the baseline") }
        let rotted = hex.replacingCharacters(in: range, with: "6974656D2D3679")
        try sqliteShell(store, "UPDATE baseline SET data = X'\(rotted)'")
    }

    @Test func aRottedBaselineIsReportedNeitherRebuiltFromNorSent() throws {
        try withSandbox { sandbox in
            let devices = try sandbox.pairedHomes(["laptop", "newbie"])
            let (laptop, newbie) = (devices[0], devices[1])
            try sandbox.ok(["list", "add", "L", "--home", laptop.home])
            try sandbox.ok(
                ["batch", "--home", laptop.home], stdin: (60..<80).map { "add L item-\($0)\n" }.joined())
            try sandbox.ok(["compact", "--home", laptop.home])
            try rotTheBaseline(laptop.home + "/plait.db")

            let doctor = try sandbox.run(["doctor", "--listen", "127.0.0.1:0", "--home", laptop.home])
            #expect(doctor.status != 0, "\(doctor)")
            #expect(doctor.stdout.contains("the stored baseline is damaged: its bytes are not the ones stored"), "\(doctor)")
            // repair does not rebuild the state from it, and says why; what shows stays the user's text.
            let repair = try sandbox.fails(["repair", "--home", laptop.home])
            #expect(repair.stderr.contains("the stored baseline is damaged"), "\(repair)")
            let shown = try sandbox.ok(["show", "--json", "--home", laptop.home]).stdout
            #expect(shown.contains("item-69") && !shown.contains("item-6y"), "\(shown)")
            #expect(try sandbox.run(["doctor", "--listen", "127.0.0.1:0", "--home", laptop.home]).status != 0)

            // A new device is not given the damage.
            let agent = try RunningAgent(sandbox: sandbox, home: laptop.home)
            defer { agent.stop() }
            let sync = try sandbox.run(["sync", "--peer", agent.address, "--home", newbie.home])
            #expect(sync.status != 0, "\(sync)")
            let onNewbie = try sandbox.ok(["show", "--json", "--home", newbie.home]).stdout
            #expect(!onNewbie.contains("item-6y"), "\(onNewbie)")
            // status still shows (it read the baseline whole, and failed).
            #expect(try sandbox.ok(["status", "--home", laptop.home]).stdout.contains("baseline"))
        }
    }

    /// A damaged baseline is healed by a peer's baseline that folds all it folded, the same or more: replaced
    /// whole, after which `doctor` finds the store sound and the text is the user's. (A damaged baseline is
    /// announced as none, so a peer whose baseline folds the same sends it too.)
    @Test(arguments: [true, false])
    func aPeersBaselineThatFoldsAsMuchReplacesARottedOne(more: Bool) throws {
        try withSandbox { sandbox in
            let devices = try sandbox.pairedHomes(["laptop", "server"])
            let (laptop, server) = (devices[0], devices[1])
            try sandbox.ok(["list", "add", "L", "--home", laptop.home])
            try sandbox.ok(
                ["batch", "--home", laptop.home], stdin: (60..<80).map { "add L item-\($0)\n" }.joined())
            // Each side edits after the other's changes, so each one's compaction folds the laptop's timeline.
            var agent = try RunningAgent(sandbox: sandbox, home: server.home)
            try sandbox.ok(["sync", "--peer", agent.address, "--home", laptop.home])
            agent.stop()
            try sandbox.ok(["add", "L", "s1", "--home", server.home])
            agent = try RunningAgent(sandbox: sandbox, home: server.home)
            try sandbox.ok(["sync", "--peer", agent.address, "--home", laptop.home])
            try sandbox.ok(["compact", "--home", laptop.home])
            try rotTheBaseline(laptop.home + "/plait.db")
            if more {
                try sandbox.ok(["add", "L", "x1", "--home", laptop.home])
                try sandbox.ok(["sync", "--peer", agent.address, "--home", laptop.home])
            }
            agent.stop()
            try sandbox.ok(["add", "L", "s2", "--home", server.home])
            try sandbox.ok(["compact", "--home", server.home])
            agent = try RunningAgent(sandbox: sandbox, home: server.home)
            defer { agent.stop() }

            let sync = try sandbox.ok(["sync", "--peer", agent.address, "--home", laptop.home])
            #expect(sync.stdout.contains("baseline"), "\(sync)")
            let doctor = try sandbox.run(["doctor", "--listen", "127.0.0.1:0", "--home", laptop.home])
            #expect(!doctor.stdout.contains("damaged"), "\(doctor)")
            let shown = try sandbox.ok(["show", "--json", "--home", laptop.home]).stdout
            #expect(shown.contains("item-69") && !shown.contains("item-6y") && shown.contains("s2"), "\(shown)")
        }
    }
}
