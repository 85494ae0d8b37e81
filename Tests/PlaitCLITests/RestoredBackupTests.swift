import Foundation
import PlaitTestSupport
import Testing

/// A home restored from a backup, edits made there before its first sync, and a peer that had compacted the home's
/// later changes into its baseline (bad-luck tester 2026-11-25, H3): the baseline folds the restored home's timeline
/// beyond its head, and nothing shows whether the changes it holds are among the folded ones, so they are kept aside.
/// The backup's own changes are (their items are in the baseline); the edits made after the restore are not, and
/// the item they created showed on no device: `doctor` said "the baseline holds them already", then "add those items
/// again". Now what only kept-aside changes created is made again, with the same IDs, and reaches the peer.
///
/// The backups here are put back in place (`restoreInPlace`: the store file keeps its inode), the one way of
/// restoring by hand that the store cannot notice at its first write (`HandRestoreTests` has the others).
@Suite struct RestoredBackupTests {
    /// The laptop, restored from a backup taken before its last changes, and a server that compacted those changes
    /// into its baseline, its agent running (stopped by the caller).
    private func restoredLaptop(_ sandbox: Sandbox) throws -> (laptop: String, server: String, agent: RunningAgent) {
        let devices = try sandbox.pairedHomes(["laptop", "server"])
        let (laptop, server) = (devices[0].home, devices[1].home)
        try sandbox.ok(["list", "add", "L", "--home", laptop])
        for text in ["x1", "x2"] { try sandbox.ok(["add", "L", text, "--home", laptop]) }
        var agent = try RunningAgent(sandbox: sandbox, home: server)
        try sandbox.ok(["sync", "--peer", agent.address, "--home", laptop])
        let backup = sandbox.root + "/backup"
        try FileManager.default.copyItem(atPath: laptop, toPath: backup)
        // More changes than the restored home makes before its sync: at the number the baseline names, it then holds
        // no change (one there with another hash is a fork inside the baseline, refused, and `rejoin` the way on).
        for text in ["y1", "y2", "y3", "y4", "y5"] { try sandbox.ok(["add", "L", text, "--home", laptop]) }
        try sandbox.ok(["sync", "--peer", agent.address, "--home", laptop])
        // The server edits after it (so its own head passes the laptop's), then compacts.
        agent.stop()
        try sandbox.ok(["add", "L", "b0", "--home", server])
        try sandbox.ok(["compact", "--home", server])
        agent = try RunningAgent(sandbox: sandbox, home: server)
        try restoreInPlace(backup, over: laptop)
        return (laptop, server, agent)
    }

    /// Every item's text, and whether it is completed, over all lists.
    private func texts(_ sandbox: Sandbox, _ home: String) throws -> [String: Bool] {
        let shown = try sandbox.ok(["show", "--json", "--home", home]).json()
        var out: [String: Bool] = [:]
        for list in shown["lists"] as? [[String: Any]] ?? [] {
            for (section, done) in [("pending", false), ("completed", true)] {
                for item in list[section] as? [[String: Any]] ?? [] { out[item["text"] as? String ?? "?"] = done }
            }
        }
        return out
    }

    @Test func itemsAddedOnARestoredHomeBeforeItsFirstSyncAreMadeAgainAndReachThePeer() throws {
        try withSandbox { sandbox in
            let (laptop, server, agent) = try restoredLaptop(sandbox)
            defer { agent.stop() }
            // Before the first sync: an item, completed; a new list with an item.
            try sandbox.ok(["add", "L", "z1", "--home", laptop])
            try sandbox.ok(["done", "z1", "--home", laptop])
            try sandbox.ok(["list", "add", "M", "--home", laptop])
            try sandbox.ok(["add", "M", "m1", "--home", laptop])

            let sync = try sandbox.run(["sync", "--peer", agent.address, "--home", laptop])
            #expect(sync.status == 0, "\(sync)")
            #expect(sync.stderr.contains("made again"), "\(sync)")
            #expect(!sync.stdout.contains("plait rejoin") && !sync.stderr.contains("plait rejoin"), "\(sync)")

            let shown = try texts(sandbox, laptop)
            #expect(shown["z1"] == true, "\(shown)")
            #expect(shown["m1"] == false, "\(shown)")
            for text in ["x1", "x2", "y1", "y5", "b0"] { #expect(shown[text] != nil, "\(text): \(shown)") }
            // The server holds them too (its CLI reads through its agent).
            let onServer = try texts(sandbox, server)
            #expect(onServer == shown, "server \(onServer), laptop \(shown)")
            let lists = try sandbox.ok(["lists", "--home", server]).stdout
            #expect(lists.contains("M"), "\(lists)")

            // What is kept aside stays, and is no longer something no device shows.
            let doctor = try sandbox.run(["doctor", "--listen", "127.0.0.1:0", "--home", laptop])
            #expect(doctor.stdout.contains("kept aside"), "\(doctor)")
            #expect(doctor.stdout.contains("every item and list they created is held here"), "\(doctor)")
            #expect(!doctor.stdout.contains("FAIL"), "\(doctor)")

            // Nothing is made twice: a repair and a further sync find nothing more to make.
            let repair = try sandbox.ok(["repair", "--json", "--home", laptop]).json()
            #expect((repair["kept_aside_made_again"] as? [String])?.isEmpty == true, "\(repair)")
            try sandbox.ok(["sync", "--peer", agent.address, "--home", laptop])
            #expect(try texts(sandbox, laptop) == shown)
        }
    }

    /// A restored home that syncs before any edit: its timeline is signed, so its next edit begins a new timeline
    /// by itself. The sync said "run `plait rejoin`" and failed (H11), though nothing waited for it.
    @Test func aRestoredHomeSyncingFirstIsNotToldToRejoin() throws {
        try withSandbox { sandbox in
            let (laptop, server, agent) = try restoredLaptop(sandbox)
            defer { agent.stop() }
            let sync = try sandbox.run(["sync", "--peer", agent.address, "--home", laptop])
            #expect(sync.status == 0, "\(sync)")
            #expect(!sync.stdout.contains("plait rejoin") && !sync.stderr.contains("plait rejoin"), "\(sync)")
            #expect(sync.stderr.contains("kept aside"), "\(sync)")
            try sandbox.ok(["add", "L", "z2", "--home", laptop])
            try sandbox.ok(["sync", "--peer", agent.address, "--home", laptop])
            #expect(try texts(sandbox, server)["z2"] == false)
            #expect(try texts(sandbox, laptop) == (try texts(sandbox, server)))
        }
    }

    /// More changes on the restored home than the backup lost: at the number the peer's baseline names, the home
    /// holds another change, a fork inside that baseline, which renaming cannot resolve (the baseline holds no
    /// change bytes to rename). The peer refused to send its baseline, and `plait rejoin`, the advice, changed
    /// nothing: the two never converged. `rejoin` now sets that history aside after re-sending the state.
    @Test func aRestoredHomeThatForkedInsideThePeersBaselineConvergesAfterRejoin() throws {
        try withSandbox { sandbox in
            let (laptop, server, agent) = try restoredLaptop(sandbox)
            defer { agent.stop() }
            for text in ["z1", "z2", "z3", "z4", "z5", "z6"] { try sandbox.ok(["add", "L", text, "--home", laptop]) }
            let refused = try sandbox.run(["sync", "--peer", agent.address, "--home", laptop])
            #expect(refused.status != 0, "\(refused)")
            #expect(refused.stderr.contains("plait rejoin"), "\(refused)")
            let rejoin = try sandbox.ok(["rejoin", "--home", laptop])
            #expect(rejoin.stdout.contains("set aside this device's history"), "\(rejoin)")
            let sync = try sandbox.run(["sync", "--peer", agent.address, "--home", laptop])
            #expect(sync.status == 0, "\(sync)")
            let shown = try texts(sandbox, laptop)
            for text in ["x1", "x2", "y1", "y5", "b0", "z1", "z6"] { #expect(shown[text] != nil, "\(text): \(shown)") }
            #expect(try texts(sandbox, server) == shown)
            #expect(
                try sandbox.ok(["status", "--json", "--home", laptop]).json()["digest"] as? String
                    == (try sandbox.ok(["status", "--json", "--home", server]).json()["digest"] as? String))
            let doctor = try sandbox.run(["doctor", "--listen", "127.0.0.1:0", "--home", laptop])
            #expect(!doctor.stdout.contains("FAIL"), "\(doctor)")
        }
    }

    /// The same, but the peer's baseline folds only part of what the backup lost (a change of the peer's own came
    /// between, so the cut-off fell inside them): the peer holds the rest as changes, the fork was taken for one that
    /// renaming resolves, and the restored home's adoption of the baseline refused it ("timeline … has forked at
    /// change 6") with no advice, nothing recorded, `doctor` silent on both devices, and `rejoin`, `repair` and
    /// `rejoin --new-key` changing nothing: the two never synced again (bad-luck tester 2026-11-25-j, J1).
    @Test func aRestoredHomeWhoseLostChangesThePeerFoldedInPartConvergesAfterRejoin() throws {
        try withSandbox { sandbox in
            let devices = try sandbox.pairedHomes(["laptop", "server"])
            let (laptop, server) = (devices[0].home, devices[1].home)
            try sandbox.ok(["list", "add", "L", "--home", laptop])
            for text in ["x1", "x2"] { try sandbox.ok(["add", "L", text, "--home", laptop]) }
            let agent = try RunningAgent(sandbox: sandbox, home: server)
            defer { agent.stop() }
            let sync = ["sync", "--peer", agent.address, "--home", laptop]
            try sandbox.ok(sync)
            let backup = sandbox.root + "/backup"
            try FileManager.default.copyItem(atPath: laptop, toPath: backup)
            try sandbox.ok(["add", "L", "y1", "--home", laptop])
            try sandbox.ok(sync)
            try sandbox.ok(["add", "L", "s1", "--home", server])  // the server's head: one above y1
            for text in ["y2", "y3", "y4"] { try sandbox.ok(["add", "L", text, "--home", laptop]) }
            try sandbox.ok(sync)
            // The cut-off is s1's Lamport time: y1 and y2 are folded, y3 and y4 stay as changes.
            let compact = try sandbox.ok(["compact", "--home", server])
            #expect(compact.stdout.contains("2 changes stay"), "\(compact)")
            try restoreInPlace(backup, over: laptop)
            for text in ["z1", "z2", "z3", "z4", "z5"] { try sandbox.ok(["add", "L", text, "--home", laptop]) }

            let refused = try sandbox.run(sync)
            #expect(refused.status != 0, "\(refused)")
            #expect(refused.stderr.contains("plait rejoin"), "the refusal says what to do: \(refused)")
            let doctor = try sandbox.run(["doctor", "--listen", "127.0.0.1:0", "--home", laptop])
            #expect(doctor.stdout.contains("FAIL") && doctor.stdout.contains("forked"), "\(doctor)")
            // J5: the failed session is recorded, and `peers` does not go on showing the last one that ended well.
            #expect(doctor.stdout.contains("the last session with it failed"), "\(doctor)")
            let peers = try sandbox.ok(["peers", "--json", "--home", laptop]).json()
            let row = (peers["peers"] as? [[String: Any]])?.first ?? [:]
            #expect((row["state"] as? String)?.contains("forked") == true && row["in_sync"] as? Bool == false, "\(peers)")
            let rejoin = try sandbox.ok(["rejoin", "--home", laptop])
            #expect(rejoin.stdout.contains("set aside this device's history"), "\(rejoin)")
            let after = try sandbox.run(sync)
            #expect(after.status == 0, "\(after)")
            let shown = try texts(sandbox, laptop)
            for text in ["x1", "x2", "y1", "y2", "y3", "y4", "s1", "z1", "z5"] {
                #expect(shown[text] != nil, "\(text): \(shown)")
            }
            #expect(try texts(sandbox, server) == shown)
            let healthy = try sandbox.run(["doctor", "--listen", "127.0.0.1:0", "--home", laptop])
            #expect(!healthy.stdout.contains("FAIL"), "\(healthy)")
        }
    }

    /// Before that `rejoin`, the two agents' sessions end at once (the peer refuses its baseline). Each agent lifted
    /// its back-off as the other's dial came in and dialled again at once: about 125 sessions a second, each with an
    /// error line (hostile tester 2026-11-25-i). They now back off until a session lasts.
    @Test func agentsWhoseSessionsEndAtOnceBackOff() throws {
        try withSandbox { sandbox in
            let (laptop, _, serverAgent) = try restoredLaptop(sandbox)
            defer { serverAgent.stop() }
            for text in ["z1", "z2", "z3", "z4", "z5", "z6"] { try sandbox.ok(["add", "L", text, "--home", laptop]) }
            let laptopAgent = try RunningAgent(sandbox: sandbox, home: laptop, extra: ["--peer", serverAgent.address])
            defer { laptopAgent.stop() }
            // A measurement window, not a wait for an event: how many sessions the two run in 4 s.
            usleep(4_000_000)
            let sessions = laptopAgent.log.components(separatedBy: "session with").count - 1
            #expect(sessions <= 12, "\(sessions) sessions in 4 s: \(laptopAgent.log.suffix(2_000))")
            #expect(sessions >= 1, "\(laptopAgent.log)")
        }
    }

    /// The same with the restored home's agent pulling the baseline: the agent makes the item again and sends it.
    @Test func aRestoredHomesAgentMakesTheItemAgain() throws {
        try withSandbox { sandbox in
            let (laptop, server, serverAgent) = try restoredLaptop(sandbox)
            serverAgent.stop()
            try sandbox.ok(["add", "L", "z1", "--home", laptop])
            let laptopAgent = try RunningAgent(sandbox: sandbox, home: laptop)
            defer { laptopAgent.stop() }
            // The server syncs with the laptop's agent: the agent pulls the server's baseline, keeps its own changes
            // aside, and makes z1 again; a later sync takes it.
            try sandbox.ok(["sync", "--peer", laptopAgent.address, "--home", server])
            #expect(try eventually { try texts(sandbox, laptop)["z1"] == false }, "\(laptopAgent.log)")
            #expect(laptopAgent.log.contains("made again"), "\(laptopAgent.log)")
            try sandbox.ok(["sync", "--peer", laptopAgent.address, "--home", server])
            #expect(try texts(sandbox, server)["z1"] == false, "\(laptopAgent.log)")
        }
    }
}

/// A home restored from a backup (no compaction anywhere) that adds an item before its first sync: its own timeline
/// forks with the peer's copy at that number, and the fork is resolved by renaming (DESIGN §11). The first sync said
/// "the peer ended its stream without changes it announced" (bad-luck tester 2026-11-25, H9: the peer renamed what
/// its Hello announced while the session ran) or "run `plait rejoin`" (H11), failing either way, and a fork note was
/// printed twice (H14); the next sync converged. Which copy keeps the name is drawn by hashes, so several rounds.
@Suite struct RestoredForkTests {
    @Test func aRestoredHomesFirstSyncAfterAnEditSucceedsAndSaysWhatHappened() throws {
        for round in 0..<6 {
            try withSandbox { sandbox in
                let devices = try sandbox.pairedHomes(["laptop", "server"])
                let (laptop, server) = (devices[0].home, devices[1].home)
                try sandbox.ok(["list", "add", "L", "--home", laptop])
                for text in ["x1", "x2", "x3"] { try sandbox.ok(["add", "L", text, "--home", laptop]) }
                let agent = try RunningAgent(sandbox: sandbox, home: server)
                defer { agent.stop() }
                try sandbox.ok(["sync", "--peer", agent.address, "--home", laptop])
                let backup = sandbox.root + "/backup"
                try FileManager.default.copyItem(atPath: laptop, toPath: backup)
                for text in ["y1", "y2", "y3"] { try sandbox.ok(["add", "L", text, "--home", laptop]) }
                try sandbox.ok(["sync", "--peer", agent.address, "--home", laptop])
                try sandbox.ok(["add", "L", "b1", "--home", server])
                try restoreInPlace(backup, over: laptop)
                try sandbox.ok(["add", "L", "z1", "--home", laptop])

                let sync = try sandbox.run(["sync", "--peer", agent.address, "--home", laptop])
                #expect(sync.status == 0, "round \(round): \(sync)")
                #expect(!sync.stderr.contains("without changes it announced"), "round \(round): \(sync)")
                #expect(!(sync.stdout + sync.stderr).contains("plait rejoin"), "round \(round): \(sync)")
                let notes = sync.stderr.components(separatedBy: "had forked").count - 1
                #expect(notes == 1, "round \(round): the fork is said once: \(sync)")
                let shown = try sandbox.ok(["show", "--home", laptop]).stdout
                for text in ["x1", "y1", "y3", "z1", "b1"] {
                    #expect(shown.contains(text), "round \(round): \(text) on the laptop: \(shown)")
                }
                #expect(
                    try sandbox.ok(["status", "--json", "--home", laptop]).json()["digest"] as? String
                        == (try sandbox.ok(["status", "--json", "--home", server]).json()["digest"] as? String),
                    "round \(round)")
            }
        }
    }
}
