import Foundation
import PlaitCore
import PlaitNetnsSupport
import PlaitStore
import PlaitTestSupport
import Testing

/// Issue 8's cases with the real binary, real stores and real TLS on loopback: what plait does when a peer
/// is hostile or a store is damaged, and that what `sync`, `peers` and `doctor` then say is true.
@Suite(.serialized) struct SadPathCLITests {
    func device(_ sandbox: Sandbox, _ name: String) throws -> (home: String, id: String) {
        let home = sandbox.root + "/" + name
        try sandbox.ok(["init", "--name", name, "--home", home])
        return (home, try sandbox.ok(["id", "--home", home]).lines.last!)
    }

    func pair(_ sandbox: Sandbox, _ a: (home: String, id: String), _ b: (home: String, id: String)) throws {
        try sandbox.ok(["pair", "--trust", b.id, "--home", a.home])
        try sandbox.ok(["pair", "--trust", a.id, "--home", b.home])
    }

    func sqlite(_ path: String, _ sql: String) throws {
        let shell = try ChildProcess.run("/usr/bin/sqlite3", [path, sql])
        guard shell.succeeded else { throw CLITestFailure("sqlite3 failed: \(sql): \(shell.errors)") }
    }

    /// The `tl` column value of a timeline (sign bit flipped, see PlaitStore).
    func column(_ timeline: TimelineID) -> Int64 { Int64(bitPattern: timeline.rawValue ^ 0x8000_0000_0000_0000) }

    /// The head of `timeline` in the summary `status --json` reports for `home` (0 when it holds none of it).
    func ownHead(_ sandbox: Sandbox, _ home: String, _ timeline: TimelineID) throws -> UInt64 {
        let summary = try status(sandbox, home)["summary"] as? String ?? ""
        let entry = summary.split(separator: ",").first { $0.hasPrefix("\(timeline):") }
        return entry.flatMap { UInt64($0.split(separator: ":").last ?? "") } ?? 0
    }

    func status(_ sandbox: Sandbox, _ home: String) throws -> [String: Any] {
        try sandbox.ok(["status", "--json", "--home", home]).json()
    }

    func doctorFailures(_ sandbox: Sandbox, _ home: String) throws -> [String] {
        let run = try sandbox.run(["doctor", "--json", "--home", home, "--listen", "127.0.0.1:0"])
        let object = try run.json()
        let checks = object["checks"] as? [[String: Any]] ?? []
        return checks.filter { $0["status"] as? String == "failed" }.map {
            "\($0["name"] ?? "?"): \($0["detail"] ?? "")"
        }
    }

    /// Case 1, Lamport poison: a paired peer relays a change with Lamport time 2^63-1 (hand-made in its store,
    /// with a consistent hash chain). It used to be accepted, after which `add` on the receiver trapped (exit
    /// 132). Now `sync` refuses that timeline with a reason naming the peer's fault and exits 1, the other
    /// timeline the peer relays is taken whole, and editing goes on.
    @Test func aLamportPoisonFromAPeerIsRefusedAndEditingGoesOn() throws {
        try withSandbox { sandbox in
            let hostile = try device(sandbox, "hostile")
            let victim = try device(sandbox, "victim")
            let other = try device(sandbox, "other")
            try pair(sandbox, hostile, victim)
            try pair(sandbox, hostile, other)
            try sandbox.ok(["batch", "--home", other.home], stdin: "list add Work\nadd Work report\nadd Work slides\n")
            // One command per change: each is signed, so the changes before the poisoned one stay covered.
            try sandbox.ok(["list", "add", "Home", "--home", hostile.home])
            try sandbox.ok(["add", "Home", "paint", "--home", hostile.home])
            try sandbox.ok(["add", "Home", "fix", "--home", hostile.home])
            do {
                let agent = try RunningAgent(sandbox: sandbox, home: hostile.home)
                defer { agent.stop() }
                try sandbox.ok(["sync", "--peer", agent.address, "--home", other.home])
            }
            // The hostile device rewrites its own last change with Lamport 2^63-1, hash chain and head kept
            // consistent, as a buggy or hostile implementation would send it.
            let storePath = hostile.home + "/plait.db"
            let (own, poisoned): (TimelineID, Change) = try {
                let store = try Store.open(at: storePath)
                let own = try store.ownTimeline()
                // Seq 1 is the timeline's begin: the last change is 4.
                var last = try #require(try store.changes(of: own, from: 4, limit: 1).first)
                last.lamport = UInt64(Int64.max)
                return (own, last)
            }()
            try sqlite(
                storePath,
                "UPDATE changes SET lamport = \(Int64.max) WHERE tl = \(column(own)) AND seq = 4; "
                    + "UPDATE timelines SET head_lamport = \(Int64.max), head_hash = X'\(poisoned.hash.hexString)' "
                    + "WHERE tl = \(column(own))")
            let agent = try RunningAgent(sandbox: sandbox, home: hostile.home)
            defer { agent.stop() }
            let sync = try sandbox.run(["sync", "--peer", agent.address, "--home", victim.home])
            #expect(sync.status == 1, "the refusal makes the sync fail: \(sync)")
            #expect(sync.stderr.contains("above the limit of 2^62"), "\(sync)")
            #expect(sync.stderr.contains(own.description), "the refusal names the timeline: \(sync)")
            let summary = try status(sandbox, victim.home)["summary"] as? String ?? ""
            let otherTimeline = try status(sandbox, other.home)["timeline"] as? String ?? "?"
            #expect(summary.contains("\(otherTimeline):4"), "the other timeline was taken whole: \(summary)")
            #expect(summary.contains("\(own):3"), "the poisoned timeline stops before the poison: \(summary)")
            // Editing goes on (it trapped with "Not enough bits to represent the passed value" before).
            let add = try sandbox.run(["add", "Work", "after", "--home", victim.home])
            #expect(add.status == 0, "\(add)")
            try sandbox.ok(["list", "add", "Later", "--home", victim.home])
            try sandbox.ok(["rejoin", "--home", victim.home])
        }
    }

    /// Case 2, forks pass silently: `cp -a X Xc`, then `add` on both, both syncing with Y's agent. The second
    /// branch used to vanish with `sync` exiting 0, `peers` saying in sync and `doctor` all ok; then it was
    /// reported and kept apart until `rejoin`. Now (DESIGN §11) the fork is said and resolved by renaming: both
    /// branches reach Y and both copies, the copy whose branch lost goes on authoring on a timeline of its own
    /// without `rejoin`, and all three end with the same state.
    @Test func aCopiedHomeForkIsResolvedWithNothingLost() throws {
        try withSandbox { sandbox in
            let x = try device(sandbox, "x")
            let y = try device(sandbox, "y")
            try pair(sandbox, x, y)
            try sandbox.ok(["batch", "--home", x.home], stdin: "list add Groceries\nadd Groceries milk\n")
            let agent = try RunningAgent(sandbox: sandbox, home: y.home)
            defer { agent.stop() }
            try sandbox.ok(["sync", "--peer", agent.address, "--home", x.home])
            let copy = sandbox.root + "/x-copy"
            let copied = try ChildProcess.run("/bin/cp", ["-a", x.home, copy])
            try #require(copied.succeeded, "cp -a: \(copied.errors)")
            // A copy not noticed as one at its first write (a clone that keeps inodes, `forgetStoreFile`; one
            // that is noticed goes on on a new timeline and never forks: `HandRestoreTests`).
            try forgetStoreFile(home: copy)
            try sandbox.ok(["add", "Groceries", "from-original", "--home", x.home])
            try sandbox.ok(["add", "Groceries", "from-copy", "--home", copy])
            try sandbox.ok(["sync", "--peer", agent.address, "--home", x.home])

            let sync = try sandbox.run(["sync", "--peer", agent.address, "--home", copy])
            #expect(sync.status == 0, "a fork resolved by renaming does not fail the sync: \(sync) agent: \(agent.log)")
            #expect(sync.stderr.contains("forked") && sync.stderr.contains("keeps the name"), "said: \(sync)")
            #expect(eventually { agent.log.contains("forked") }, "the agent says it too: \(agent.log)")
            for home in [y.home, copy] {
                let shown = try sandbox.ok(["show", "--json", "--home", home]).stdout
                #expect(shown.contains("from-copy") && shown.contains("from-original"), "both branches: \(shown)")
            }
            // Both copies go on editing without `rejoin`: the one whose branch lost on a new timeline.
            try sandbox.ok(["add", "Groceries", "copy-after", "--home", copy])
            try sandbox.ok(["add", "Groceries", "original-after", "--home", x.home])
            for home in [copy, x.home, copy, x.home] {
                try sandbox.ok(["sync", "--peer", agent.address, "--home", home])
            }
            // Each has learnt of the fork now: the next edit of the copy whose branch lost goes on a new timeline.
            try sandbox.ok(["add", "Groceries", "copy-last", "--home", copy])
            try sandbox.ok(["add", "Groceries", "original-last", "--home", x.home])
            for home in [copy, x.home, copy] {
                try sandbox.ok(["sync", "--peer", agent.address, "--home", home])
            }
            let digests = try [x.home, copy, y.home].map { try status(sandbox, $0)["digest"] as? String ?? "?" }
            #expect(Set(digests).count == 1, "the same state on all three: \(digests)")
            let timelines = try [x.home, copy].map { try status(sandbox, $0)["timeline"] as? String ?? "?" }
            #expect(timelines[0] != timelines[1], "the copies author on different timelines now: \(timelines)")
            let shown = try sandbox.ok(["show", "--json", "--home", y.home]).stdout
            for text in ["milk", "from-original", "from-copy", "copy-after", "original-after", "copy-last",
                "original-last"] {
                #expect(shown.contains(text), "\(text) reached y: \(shown)")
            }
            let peers = try sandbox.ok(["peers", "--json", "--home", copy]).json()
            let row = (peers["peers"] as? [[String: Any]])?.first
            #expect(row?["state"] as? String != "forked", "nothing is kept apart any more: \(peers)")
        }
    }

    /// Case 3, one rotted change row: it used to stop everything (a fresh peer got 0 of 2,001 changes) while
    /// the sender logged "sent 2001" and its doctor said ok. Now the sender's doctor names the damaged change,
    /// a fresh peer gets everything up to it (its last signed change), and the damage heals from a healthy peer.
    @Test func aRottedRowHealsFromAHealthyPeer() throws {
        try withSandbox { sandbox in
            let sender = try device(sandbox, "sender")
            let healthy = try device(sandbox, "healthy")
            let fresh = try device(sandbox, "fresh")
            try pair(sandbox, sender, healthy)
            try pair(sandbox, sender, fresh)
            try pair(sandbox, healthy, fresh)
            // Two transactions, so the change just before the rotted one ends a transaction and is signed: the
            // sender's timeline is its timeline.begin (1), the list and d1-d997 (2-999, signed at 999), then
            // d998-d2000 (1000-2002). A receiver stores a signed timeline only up to a verified signature
            // (DESIGN §11, PROTOCOL.md §20.8), so "everything up to the damage" now means up to the last signed
            // change before it; with the damage inside a run, the uncovered part is held back and refused at Done
            // (unsigned), and the fresh peer would stop at the signature before that run.
            var script = "list add Big\n"
            for index in 1...997 { script += "add Big d\(index)\n" }
            try sandbox.ok(["batch", "--home", sender.home], stdin: script)
            script = ""
            for index in 998...2_000 { script += "add Big d\(index)\n" }
            try sandbox.ok(["batch", "--home", sender.home], stdin: script)
            let firstHealthy = try RunningAgent(sandbox: sandbox, home: healthy.home)
            try sandbox.ok(["sync", "--peer", firstHealthy.address, "--home", sender.home])
            // The healthy device goes away for now: with it reachable, the sender's agent heals at once (it sets
            // the damage aside at start, and that commit wakes its session with the healthy peer).
            #expect(firstHealthy.stop() == 0)
            let own = try TimelineID(parsing: try status(sandbox, sender.home)["timeline"] as? String ?? "")
            try sqlite(
                sender.home + "/plait.db",
                "UPDATE changes SET payload = payload || X'00' WHERE tl = \(column(own)) AND seq = 1000")

            // The sender's doctor names the damaged change, and who holds good copies.
            let failures = try doctorFailures(sandbox, sender.home)
            #expect(
                failures.contains { $0.contains("\(own):1000") && $0.contains("held them when last seen") },
                "\(failures)")

            let senderAgent = try RunningAgent(sandbox: sandbox, home: sender.home)
            defer { senderAgent.stop() }
            let first = try sandbox.run(["sync", "--peer", senderAgent.address, "--home", fresh.home])
            #expect(first.status == 0, "\(first)")
            // Every home's summary now holds its own begin too: the sender's timeline is checked on its own.
            #expect(try ownHead(sandbox, fresh.home, own) == 999, "up to the last good (and signed) change")
            #expect(eventually { senderAgent.log.contains("damaged") }, "\(senderAgent.log)")

            // The sender pulls good copies back from the healthy peer; then everyone has all 2,002.
            let healthyAgent = try RunningAgent(sandbox: sandbox, home: healthy.home)
            defer { healthyAgent.stop() }
            try sandbox.ok(["sync", "--peer", healthyAgent.address, "--home", sender.home])
            #expect(try ownHead(sandbox, sender.home, own) == 2002)
            #expect(try doctorFailures(sandbox, sender.home).filter { $0.contains("hash chains") }.isEmpty)
            try sandbox.ok(["sync", "--peer", senderAgent.address, "--home", fresh.home])
            let a = try status(sandbox, fresh.home)
            let b = try status(sandbox, healthy.home)
            #expect(try ownHead(sandbox, fresh.home, own) == 2002)
            #expect(a["digest"] as? String == b["digest"] as? String)
            try sandbox.ok(["add", "Big", "after-heal", "--home", sender.home])
        }
    }

    /// A rotted row inside one signed run (one transaction of 2,001 changes, signed at 1,001 and at its end):
    /// the changes before it are not covered by any signature the sender can send, so the sender sets them aside
    /// with the damage (every stored head is signed, PROTOCOL.md §20.7) and serves its timeline up to the begin.
    /// Before, it set aside only from the damage, kept an unsigned head, streamed the uncovered run and promised
    /// it in its Done; the receiver refused it as unsigned, blaming an honest peer: `sync` exited 1 with
    /// "refused" and the peer was recorded as refusing. (A signed run is stored only up to a verified signature.)
    @Test func aRottedRowInsideASignedRunIsNotBlamedOnTheSender() throws {
        try withSandbox { sandbox in
            let sender = try device(sandbox, "sender")
            let fresh = try device(sandbox, "fresh")
            try pair(sandbox, sender, fresh)
            var script = "list add Big\n"
            for index in 1...2_000 { script += "add Big d\(index)\n" }
            try sandbox.ok(["batch", "--home", sender.home], stdin: script)
            let own = try TimelineID(parsing: try status(sandbox, sender.home)["timeline"] as? String ?? "")
            try sqlite(
                sender.home + "/plait.db",
                "UPDATE changes SET payload = payload || X'00' WHERE tl = \(column(own)) AND seq = 1000")
            let senderAgent = try RunningAgent(sandbox: sandbox, home: sender.home)
            defer { senderAgent.stop() }
            let first = try sandbox.run(["sync", "--peer", senderAgent.address, "--home", fresh.home])
            #expect(first.status == 0 && !first.stderr.contains("refused"), "\(first)")
            #expect(try ownHead(sandbox, fresh.home, own) == 1, "up to the last signature before the damage")
            #expect(eventually { senderAgent.log.contains("damaged") }, "\(senderAgent.log)")
            let peers = try sandbox.ok(["peers", "--json", "--home", fresh.home]).json()
            let row = (peers["peers"] as? [[String: Any]])?.first
            #expect(row?["refused"] is NSNull && row?["state"] as? String == "in sync", "\(peers)")
        }
    }

    /// The same rot found while sending (a one-shot `sync` pushing to a fresh agent finds it in a page): the
    /// run before it was already streamed uncovered, so the sender stops the timeline at its last signature
    /// and the receiver drops what it held back beyond the sender's Done instead of refusing an honest peer.
    @Test func aRottedRowFoundWhileSendingIsNotBlamedOnTheSender() throws {
        try withSandbox { sandbox in
            let sender = try device(sandbox, "sender")
            let fresh = try device(sandbox, "fresh")
            try pair(sandbox, sender, fresh)
            var script = "list add Big\n"
            for index in 1...2_000 { script += "add Big d\(index)\n" }
            try sandbox.ok(["batch", "--home", sender.home], stdin: script)
            let own = try TimelineID(parsing: try status(sandbox, sender.home)["timeline"] as? String ?? "")
            try sqlite(
                sender.home + "/plait.db",
                "UPDATE changes SET payload = payload || X'00' WHERE tl = \(column(own)) AND seq = 1000")
            let freshAgent = try RunningAgent(sandbox: sandbox, home: fresh.home)
            defer { freshAgent.stop() }
            let push = try sandbox.run(["sync", "--peer", freshAgent.address, "--home", sender.home])
            #expect(push.stderr.contains("damaged") || push.stdout.contains("damaged"), "\(push)")
            #expect(try ownHead(sandbox, fresh.home, own) == 1, "up to the last signature before the damage")
            #expect(!freshAgent.log.contains("refused"), "\(freshAgent.log)")
        }
    }

    /// The second hostile tester of 2026-11-25: a `plait sync` whose changes the peer's agent refused (§14.2)
    /// exited 0, and its `plait peers` said "in sync" with a summary the peer did not hold. The sender here is
    /// honest: it took an unsigned timeline whose Lamport time climbed in two jumps of under 2^32, and the fresh
    /// agent, taking both at once, refuses the second (PROTOCOL.md §15). The agent's closing report now tells the
    /// sync what it stored: the sync names what the peer did not store and exits 1, and `peers` says the peer is
    /// behind. The next sync (the agent now holds the first jump) takes the rest, and then both say "in sync".
    @Test func aSyncWhoseChangesThePeerRefusedSaysSo() throws {
        try withSandbox { sandbox in
            let sender = try device(sandbox, "sender")
            let receiver = try device(sandbox, "receiver")
            try pair(sandbox, sender, receiver)
            try sandbox.ok(["batch", "--home", sender.home], stdin: "list add Home\nadd Home paint\n")
            var rng = SplitMix64(seed: 0x5AD_C11_0009)
            let jumps: [[Change]] = [Lamport.maxJump - 100, 2 * Lamport.maxJump - 200].map { lamport in
                listCreateChain(TimelineID(rng.next()), count: 2, lamport: lamport, title: "j", rng: &rng)
            }
            do {
                let replica = try Replica(store: try Store.open(at: sender.home + "/plait.db"))
                for chain in jumps { #expect(try replica.integrate(chain).refused.isEmpty) }
            }
            let refused = jumps[1][0].timeline
            let agent = try RunningAgent(sandbox: sandbox, home: receiver.home)
            defer { agent.stop() }
            let sync = try sandbox.run(["sync", "--peer", agent.address, "--home", sender.home])
            #expect(sync.status == 1, "\(sync)")
            #expect(sync.stderr.contains("the peer did not store changes \(refused):1…2"), "\(sync)")
            #expect(eventually { agent.log.contains("more than 2^32 above") }, "\(agent.log)")
            var row = (try sandbox.ok(["peers", "--json", "--home", sender.home]).json()["peers"] as? [[String: Any]])?
                .first
            #expect(row?["in_sync"] as? Bool == false && row?["state"] as? String == "behind", "\(row ?? [:])")
            #expect((row?["summary"] as? String)?.contains("\(refused)") == false, "\(row ?? [:])")

            let again = try sandbox.run(["sync", "--peer", agent.address, "--home", sender.home])
            #expect(again.status == 0, "\(again)")
            row = (try sandbox.ok(["peers", "--json", "--home", sender.home]).json()["peers"] as? [[String: Any]])?
                .first
            #expect(row?["in_sync"] as? Bool == true, "\(row ?? [:])")
            #expect(try ownHead(sandbox, receiver.home, refused) == 2)
        }
    }

    /// Case 5, divergence never reported: a device whose state digest differs at equal summaries used to be
    /// "in sync" with exit 0. Now `sync` exits 1 naming the divergence, `peers` says "diverged", `doctor`
    /// fails, and the other side's agent logs it.
    @Test func aDivergenceIsReportedEverywhere() throws {
        try withSandbox { sandbox in
            let a = try device(sandbox, "a")
            let b = try device(sandbox, "b")
            try pair(sandbox, a, b)
            try sandbox.ok(
                ["batch", "--home", a.home], stdin: "list add Groceries\nadd Groceries milk\nadd Groceries eggs\n")
            do {
                let agent = try RunningAgent(sandbox: sandbox, home: b.home)
                defer { agent.stop() }
                try sandbox.ok(["sync", "--peer", agent.address, "--home", a.home])
            }
            // B's materialized state is changed behind its engine's back.
            try sqlite(b.home + "/plait.db", "UPDATE items SET text = 'tampered' WHERE text = 'milk'")
            let agent = try RunningAgent(sandbox: sandbox, home: b.home)
            defer { agent.stop() }
            let sync = try sandbox.run(["sync", "--peer", agent.address, "--home", a.home])
            #expect(sync.status == 1, "\(sync)")
            #expect(sync.stderr.contains("diverged"), "\(sync)")
            #expect(eventually { agent.log.contains("diverged") }, "\(agent.log)")
            let peers = try sandbox.ok(["peers", "--json", "--home", a.home]).json()
            let row = (peers["peers"] as? [[String: Any]])?.first
            #expect(row?["state"] as? String == "diverged", "\(peers)")
            #expect(row?["in_sync"] as? Bool == false)
            #expect(try doctorFailures(sandbox, a.home).contains { $0.contains("diverged") })
            // `plait repair` on the damaged side rebuilds its state; the next sync verifies both equal.
            agent.stop()
            try sandbox.ok(["repair", "--home", b.home])
            let healed = try RunningAgent(sandbox: sandbox, home: b.home)
            defer { healed.stop() }
            try sandbox.ok(["sync", "--peer", healed.address, "--home", a.home])
            let after = try sandbox.ok(["peers", "--json", "--home", a.home]).json()
            #expect((after["peers"] as? [[String: Any]])?.first?["state"] as? String == "in sync", "\(after)")
        }
    }

    /// `plait repair` sets rotted changes aside and pulls good copies from the paired devices it can reach;
    /// with none reachable, it says what is still set aside and exits 1 (never "nothing lost").
    @Test func repairPullsGoodCopiesOfRottedChanges() throws {
        try withSandbox { sandbox in
            let sender = try device(sandbox, "sender")
            let healthy = try device(sandbox, "healthy")
            try pair(sandbox, sender, healthy)
            var script = "list add Big\n"
            for index in 1...200 { script += "add Big d\(index)\n" }
            try sandbox.ok(["batch", "--home", sender.home], stdin: script)
            let healthyAgent = try RunningAgent(sandbox: sandbox, home: healthy.home)
            try sandbox.ok(["sync", "--peer", healthyAgent.address, "--home", sender.home])
            let own = try TimelineID(parsing: try status(sandbox, sender.home)["timeline"] as? String ?? "")
            try sqlite(
                sender.home + "/plait.db",
                "UPDATE changes SET payload = payload || X'00' WHERE tl = \(column(own)) AND seq = 150")
            healthyAgent.stop()
            let alone = try sandbox.run(["repair", "--home", sender.home])
            #expect(alone.status == 1, "\(alone)")
            #expect(alone.stdout.contains("set aside change \(own):150"), "\(alone)")
            // The timeline begins with its signed `timeline.begin` (seq 1), so the list and its 200 items are 2-202,
            // one transaction signed at 202. Every stored head is a signed change (PROTOCOL.md §20.7): the changes
            // between the last signature before the damage (the begin) and it are set aside with it.
            #expect(alone.stderr.contains("201 changes (\(own):2-202) are still set aside"), "\(alone)")
            // The healthy device is back (at a new port: its address is given again).
            let back = try RunningAgent(sandbox: sandbox, home: healthy.home)
            defer { back.stop() }
            try sandbox.ok(["pair", "--trust", healthy.id, "--address", back.address, "--home", sender.home])
            let repaired = try sandbox.ok(["repair", "--home", sender.home])
            #expect(repaired.stdout.contains("pulled 201 changes"), "\(repaired)")
            #expect(repaired.stdout.contains("nothing is set aside any more"), "\(repaired)")
            // (The summary also holds the healthy device's own begin: the sender's timeline is checked alone.)
            #expect(try ownHead(sandbox, sender.home, own) == 202)
            try sandbox.ok(["add", "Big", "after-repair", "--home", sender.home])
        }
    }
}
