import Foundation
import GRDB
import PlaitNetnsSupport
import PlaitStore
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A `plait` command running in the background, stopped by its PID at the latest when the test ends.
final class BackgroundRun {
    let process: ChildProcess
    private let outputPath: String
    private let errorPath: String

    init(sandbox: Sandbox, _ arguments: [String], stdinFile: String? = nil) throws {
        let io = sandbox.root + "/io/background-\(UUID().uuidString)"
        outputPath = io + ".out"
        errorPath = io + ".err"
        process = try ChildProcess(
            try PlaitExecutable.path.get(), arguments, environment: sandbox.baseEnvironment, stdin: stdinFile,
            stdout: outputPath, stderr: errorPath)
    }

    /// Waits for the exit (killing it after `timeout` seconds); returns the status and output.
    func wait(timeout: Double = 300) -> (status: Int32, stdout: String, stderr: String) {
        if process.wait(seconds: timeout) == nil {
            process.send(SIGKILL)
            process.waitUntilExit()
        }
        let read = { (path: String) in (try? String(contentsOfFile: path, encoding: .utf8)) ?? "" }
        return (process.terminationStatus, read(outputPath), read(errorPath))
    }

    deinit {
        process.send(SIGKILL)
    }
}

/// Sync that survives what happens to real processes: a sender killed mid-transfer, two large catch-ups at
/// once, a home restored from an old copy, two homes copied from one.
@Suite(.serialized) struct SyncRecoveryTests {
    let sync = SyncTests()

    /// `count` lines for `plait batch`: a list and items in it.
    func batchFile(_ sandbox: Sandbox, list: String, count: Int) throws -> String {
        let path = sandbox.root + "/\(list).batch"
        var text = "list add \(list)\n"
        text.reserveCapacity(count * 24)
        for index in 0..<count { text += "add \(list) \"\(list) item \(index)\"\n" }
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    func changeCount(_ sandbox: Sandbox, _ home: String) throws -> Int {
        try sandbox.ok(["status", "--json", "--home", home]).json()["changes"] as? Int ?? -1
    }

    /// The sender dies (SIGKILL) in the middle of a large transfer: the receiver's store is at a batch
    /// boundary, and the next sync finishes with nothing lost and nothing duplicated.
    @Test func aSenderKilledMidTransferLeavesABatchBoundary() throws {
        try withSandbox { sandbox in
            let d = try sync.devices(sandbox, ["source", "receiver"])
            try sync.pair(sandbox, d[0], d[1])
            let total = 20_001
            let write = try BackgroundRun(
                sandbox: sandbox, ["batch", "--home", d[0].home], stdinFile: try batchFile(sandbox, list: "Big", count: total - 1))
            let written = write.wait()
            #expect(written.status == 0, "\(written)")
            let config = sandbox.root + "/small-batches.toml"
            try "[sync]\nbatch_changes = 200\n".write(toFile: config, atomically: true, encoding: .utf8)

            // The receiver's store, watched from here: a `plait status` per poll is slower than the transfer.
            let receiver = try Store.open(at: d[1].home + "/plait.db", synchronousFull: false)
            let agent = try RunningAgent(sandbox: sandbox, home: d[0].home, extra: ["--config", config])
            defer { agent.stop() }
            let pull = try BackgroundRun(sandbox: sandbox, ["sync", "--peer", agent.address, "--home", d[1].home])
            // As soon as the first batch is in, kill the sender (100 batches of 200, each a durable commit).
            var started = false
            let deadline = Date().addingTimeInterval(120)
            while !started && Date() < deadline {
                // More than its own timeline (its signed begin): the source's first changes are in.
                started = try receiver.summary().count > 1
                if !started { usleep(500) }
            }
            kill(agent.process.pid, SIGKILL)
            agent.stop()
            let interrupted = pull.wait()
            #expect(started, "no batch arrived")
            #expect(interrupted.status != 0, "the sync cannot have finished: \(interrupted)")
            #expect(interrupted.stderr.contains("failed"), "\(interrupted)")

            // The receiver's own begin is one of its changes; the rest came from the source.
            let held = try changeCount(sandbox, d[1].home) - 1
            let source = try sandbox.ok(["status", "--json", "--home", d[0].home]).json()["timeline"] as? String ?? "?"
            let summary = try sync.status(sandbox, d[1].home).summary
            #expect(held > 0 && held < total, "\(held) of \(total) changes arrived before the kill")
            // Pages are 200 changes, but a signed timeline is stored only up to a verified signature: the source's
            // begin (1) and every 1,000th change of its one long transaction after it (DESIGN §11).
            #expect((held - 1) % 1_000 == 0, "\(held) changes: not a signed boundary of the source's timeline")
            #expect(summary.contains("\(source):\(held)"), "the summary \(summary) names exactly what is stored")

            let again = try RunningAgent(sandbox: sandbox, home: d[0].home)
            defer { #expect(again.stop() == 0) }
            let completion = try sandbox.run(["sync", "--peer", again.address, "--home", d[1].home, "--json"], timeout: 120)
            #expect(completion.succeeded, "\(completion)")
            let run = try completion.json()
            let pulled = (run["peers"] as? [[String: Any]])?.first?["pulled"] as? Int
            // The source holds its begin besides the batch's `total` changes; the receiver its own begin besides.
            #expect(pulled == total + 1 - held, "the rest, and only the rest: \(run)")
            #expect(try changeCount(sandbox, d[1].home) == total + 2)
            #expect(try sync.status(sandbox, d[0].home) == sync.status(sandbox, d[1].home))
        }
    }

    /// The receiver dies (SIGKILL) between a batch's change commit and the save of its state (DESIGN §12: the
    /// materialized rows are saved when the pull ends): the store is at a batch boundary with its rows behind
    /// the "applied up to" marker; the next command replays forward from it, `doctor` finds nothing wrong, and
    /// the next sync finishes with nothing lost or duplicated.
    @Test func aReceiverKilledBetweenTheChangeCommitAndTheStateSaveLosesNothing() throws {
        try withSandbox { sandbox in
            let d = try sync.devices(sandbox, ["source", "receiver"])
            try sync.pair(sandbox, d[0], d[1])
            let config = sandbox.root + "/small-batches.toml"
            try "[sync]\nbatch_changes = 200\n".write(toFile: config, atomically: true, encoding: .utf8)
            let agent = try RunningAgent(sandbox: sandbox, home: d[0].home, extra: ["--config", config])
            defer { agent.stop() }
            // A first small sync, so the receiver's store carries its marker.
            try sandbox.ok(["batch", "--home", d[0].home], stdin: "list add First\nadd First one\n")
            try sandbox.ok(["sync", "--peer", agent.address, "--home", d[1].home])
            // Both homes' timeline.begin, two changes, then the list Big and its 6,000 items (30 batches of 200).
            let total = 2 + 2 + 1 + 6_000
            let write = try BackgroundRun(
                sandbox: sandbox, ["batch", "--home", d[0].home],
                stdinFile: try batchFile(sandbox, list: "Big", count: 6_000))
            let written = write.wait()
            #expect(written.status == 0, "\(written)")

            let database = try DatabaseQueue(
                path: d[1].home + "/plait.db", configuration: { var c = Configuration(); c.readonly = true; return c }())
            func marker() throws -> (applied: String, changes: Int) {
                try database.read { db in
                    (try String.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'applied_summary'") ?? "",
                        try Int.fetchOne(db, sql: "SELECT count(*) FROM changes") ?? 0)
                }
            }
            let before = try marker()
            let pull = try BackgroundRun(sandbox: sandbox, ["sync", "--peer", agent.address, "--home", d[1].home])
            // Kill the receiver once batches are committed and their state is not yet saved.
            var inWindow = false
            let deadline = Date().addingTimeInterval(120)
            while !inWindow && Date() < deadline {
                let now = try marker()
                inWindow = now.changes > before.changes && now.applied == before.applied
                if !inWindow { usleep(500) }
            }
            kill(pull.process.pid, SIGKILL)
            let killed = pull.wait()
            #expect(inWindow, "no batch was committed before the pull ended")
            #expect(killed.status != 0, "\(killed)")
            let after = try marker()
            #expect(after.applied == before.applied, "the kill landed before the state was saved: \(after)")
            let held = after.changes
            #expect(held > before.changes && held < total, "\(held) of \(total)")
            // A receiver stores a signed timeline only up to a verified signature (DESIGN §11, PROTOCOL.md §20.8),
            // not up to the end of each batch of 200: the source signed the end of the first transaction (its
            // seq 3) and then every 1,000th change of the Big one, so a commit ends 1,000 changes apart.
            #expect((held - before.changes) % 1_000 == 0, "\(held) changes: not a signed boundary")

            // Every command sees the whole state; doctor finds the store and its derived state sound.
            let doctor = try sandbox.run(["doctor", "--home", d[1].home])
            #expect(doctor.succeeded, "\(doctor)")
            #expect(try changeCount(sandbox, d[1].home) == held)
            let shown = try sandbox.ok(["show", "Big", "--json", "--home", d[1].home]).stdout
            #expect(shown.components(separatedBy: "\"text\"").count - 1 == held - before.changes - 1)

            let completion = try sandbox.run(["sync", "--peer", agent.address, "--home", d[1].home, "--json"], timeout: 120)
            #expect(completion.succeeded, "\(completion)")
            #expect(try changeCount(sandbox, d[1].home) == total)
            #expect(try sync.status(sandbox, d[0].home) == sync.status(sandbox, d[1].home))
            let saved = try marker()
            #expect(saved.applied == (try sync.status(sandbox, d[1].home).summary), "the pull's end saved the state")
        }
    }

    /// Both devices hold 100,000 changes the other lacks; their agents connect and stream to each other at
    /// once over one TLS connection: both finish, no deadlock, one state.
    @Test func bothSidesCatchUpOneHundredThousandAtOnce() throws {
        try withSandbox { sandbox in
            let d = try sync.devices(sandbox, ["a", "b"])
            try sync.pair(sandbox, d[0], d[1])
            let count = 100_000
            // Both histories at once (two processes), to keep the test short.
            let writes = [
                try BackgroundRun(
                    sandbox: sandbox, ["batch", "--home", d[0].home],
                    stdinFile: try batchFile(sandbox, list: "A", count: count - 1)),
                try BackgroundRun(
                    sandbox: sandbox, ["batch", "--home", d[1].home],
                    stdinFile: try batchFile(sandbox, list: "B", count: count - 1)),
            ]
            for write in writes {
                let result = write.wait()
                #expect(result.status == 0, "\(result)")
            }
            let agentB = try RunningAgent(sandbox: sandbox, home: d[1].home)
            defer { #expect(agentB.stop() == 0) }
            let started = Date()
            let agentA = try RunningAgent(sandbox: sandbox, home: d[0].home, extra: ["--peer", agentB.address])
            defer { #expect(agentA.stop() == 0) }
            let converged = try eventually(600) {
                // Each side's batch and its signed begin.
                try changeCount(sandbox, d[0].home) == 2 * count + 2 && changeCount(sandbox, d[1].home) == 2 * count + 2
            }
            print("100,000 changes each way between two agents: \(String(format: "%.1f", Date().timeIntervalSince(started))) s")
            #expect(converged, "a: \(agentA.log)\nb: \(agentB.log)")
            #expect(try sync.status(sandbox, d[0].home) == sync.status(sandbox, d[1].home))
        }
    }

    /// A home restored from an old copy of itself pulls back what it had lost, reports that a peer holds its
    /// own timeline beyond its head (exit 1), refuses to author on that timeline until `plait rejoin`, and then
    /// goes on with a new one; nothing is lost on either side (DESIGN §10: detect and report, never guess).
    @Test func aRestoredHomeIsReportedAndGoesOnAfterRejoin() throws {
        try withSandbox { sandbox in
            let d = try sync.devices(sandbox, ["laptop", "server"])
            try sync.pair(sandbox, d[0], d[1])
            let agent = try RunningAgent(sandbox: sandbox, home: d[1].home)
            defer { #expect(agent.stop() == 0) }
            try sandbox.ok(["batch", "--home", d[0].home], stdin: "list add Notes\nadd Notes before-backup\n")
            try sandbox.ok(["sync", "--peer", agent.address, "--home", d[0].home])
            let backup = sandbox.root + "/laptop-backup"
            try FileManager.default.copyItem(atPath: d[0].home, toPath: backup)
            let oldTimeline = try sandbox.ok(["status", "--json", "--home", d[0].home]).json()["timeline"] as? String

            try sandbox.ok(["add", "Notes", "after-backup", "--home", d[0].home])
            try sandbox.ok(["sync", "--peer", agent.address, "--home", d[0].home])
            // The disk is restored from the backup: "after-backup" and its number are gone from the laptop. Put back
            // in place, so the store file keeps its inode and the restore is not noticed before a peer shows it (one
            // put back as a new file is: `HandRestoreTests`).
            try restoreInPlace(backup, over: d[0].home)

            let run = try sandbox.run(["sync", "--peer", agent.address, "--home", d[0].home])
            #expect(run.status == 1 && run.stderr.contains("restored from a backup"), "\(run)")
            #expect(run.stderr.contains("plait rejoin"), "\(run)")
            let refused = try sandbox.run(["add", "Notes", "after-restore", "--home", d[0].home])
            #expect(refused.status != 0 && refused.stderr.contains("plait rejoin"), "\(refused)")
            let sameTimeline = try sandbox.ok(["status", "--json", "--home", d[0].home]).json()["timeline"] as? String
            #expect(sameTimeline == oldTimeline, "no timeline is switched without the user")
            try sandbox.ok(["rejoin", "--home", d[0].home])
            let newTimeline = try sandbox.ok(["status", "--json", "--home", d[0].home]).json()["timeline"] as? String
            #expect(newTimeline != oldTimeline)
            try sandbox.ok(["add", "Notes", "after-restore", "--home", d[0].home])
            try sandbox.ok(["sync", "--peer", agent.address, "--home", d[0].home])
            for home in [d[0].home, d[1].home] {
                let shown = try sandbox.ok(["show", "Notes", "--json", "--home", home]).json()
                let texts = ((shown["lists"] as? [[String: Any]])?.first?["pending"] as? [[String: Any]])?.compactMap {
                    $0["text"] as? String
                }
                #expect(Set(texts ?? []) == ["before-backup", "after-backup", "after-restore"], "\(home): \(shown)")
            }
            #expect(try sync.status(sandbox, d[0].home) == sync.status(sandbox, d[1].home))
        }
    }

    /// Two homes copied from one author different changes under the same numbers: a fork of a signed timeline,
    /// said, and resolved by renaming (DESIGN §11): the server and the copy each end with both histories and the
    /// same state.
    @Test func twoHomesCopiedFromOneAreAForkResolvedByRenaming() throws {
        try withSandbox { sandbox in
            let d = try sync.devices(sandbox, ["original", "server"])
            try sync.pair(sandbox, d[0], d[1])
            try sandbox.ok(["list", "add", "Shared", "--home", d[0].home])
            let copy = sandbox.root + "/copy"
            try FileManager.default.copyItem(atPath: d[0].home, toPath: copy)
            // Not noticed as a copy at its first write (a clone that keeps inodes), so the two fork.
            try forgetStoreFile(home: copy)
            try sandbox.ok(["add", "Shared", "from the original", "--home", d[0].home])
            try sandbox.ok(["add", "Shared", "from the copy", "--home", copy])

            let agent = try RunningAgent(sandbox: sandbox, home: d[1].home)
            defer { #expect(agent.stop() == 0) }
            try sandbox.ok(["sync", "--peer", agent.address, "--home", d[0].home])
            let run = try sandbox.run(["sync", "--peer", agent.address, "--home", copy, "--json"])
            #expect(run.status == 0, "\(run)")
            #expect((run.stdout + run.stderr).contains("forked"), "the fork is said: \(run)")
            let peer = (try run.json()["peers"] as? [[String: Any]])?.first
            #expect((peer?["forked"] as? [String] ?? []).isEmpty, "nothing kept apart: \(run)")
            let texts = { (home: String) throws -> Set<String> in
                let shown = try sandbox.ok(["show", "Shared", "--json", "--home", home]).json()
                let pending = (shown["lists"] as? [[String: Any]])?.first?["pending"] as? [[String: Any]] ?? []
                return Set(pending.compactMap { $0["text"] as? String })
            }
            #expect(try texts(d[1].home) == ["from the original", "from the copy"])
            #expect(try texts(copy) == ["from the original", "from the copy"])
            #expect(try sync.status(sandbox, d[1].home).digest == sync.status(sandbox, copy).digest)
        }
    }
}
