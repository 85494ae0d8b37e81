import ArgumentParser
import Foundation
import PlaitCore
import PlaitStore
import PlaitSync

extension Plait {
    struct Bench: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "bench",
            abstract: "Measure catch-up, replay, late changes, commands and latency on temporary devices.",
            discussion: """
                Run it on a release build (`bash scripts/build-release`, then `.build/release/plait bench`); \
                it takes several minutes and a few hundred MB of temporary disk. Every figure is measured \
                --runs times and printed as "lowest – highest (median)": this kind of machine is noisy, one run is \
                not a result. Everything is local: temporary homes (deleted afterwards unless --keep), agents \
                listening on 127.0.0.1 only. The figures:

                History (--changes, default 1,000,000 realistic edits over --lists lists and about --items live \
                items): full replay = rebuilding the materialized state from every stored change (what a repair or a \
                format upgrade costs); one late change = integrating another device's edit that sorts about 1,000 \
                changes before the newest, with the agent's in-memory checkpoints (what a sync costs when an offline \
                device comes back) and cold from stored checkpoints; state load = what every command pays to start; \
                `plait batch` throughput; bytes per change on disk. Signing (beside the same work on an unsigned \
                store, in the same run): `plait batch` of --batch-lines lines in one transaction and \
                --single-transactions one-line batches (a signed transaction each), with the signatures made and \
                the bytes per change on disk; and each catch-up below is also pulled from an unsigned source, \
                which the receiver takes without verifying, so the ratio is what verification costs.

                Catch-up (--network-changes, default 100,000; 0 skips everything below): a fresh device, a separate \
                `plait sync` process, pulls the whole history from an agent over TLS and stores it durably \
                (synchronous = full unless configured otherwise). Two workloads: "edits" (10,000 items edited over \
                and over: the history grows, the state does not) and "growing state" (every change creates a new \
                item: by default the device ends with 100,000 live items, the workload of a user who keeps adding). \
                For each: changes per second, and the peak resident memory of the catching-up process alone (wait4's \
                ru_maxrss, taken by a small helper process so it is not the benchmark's own). Beside it, in the same \
                run: SQLite inserting the very same change rows into a fresh store (same table, indexes, WAL and \
                synchronous setting, one transaction per batch the sync would send, one prepared statement) — the \
                practical ceiling on this machine, and plait's rate as a share of it (goal ≥ 70 %). And, when \
                `python3 -c 'import pycrdt'` works, pycrdt (Yjs in Rust) applying the equivalent update in memory \
                (scripts/pycrdt-anchor.py): an outside anchor that neither hashes, validates, nor writes to disk; \
                Yjs also drops overwritten values, so for the edits workload its update is much smaller than the \
                history plait transfers.

                Commands on the grown home (100,000 items, no agent running), each a process: `plait show --json` \
                (output to /dev/null) beside the sqlite3 CLI printing the same item rows as JSON; `plait add` (time \
                and peak memory). Latency: two connected agents, an item added on A until B has stored it, p50 and \
                p99 over --latency-edits edits per run, on empty homes and again with both holding --latency-items \
                items; an edit made in another connection until the agent raises \
                its event; and an item added by `POST /api/edit` on A's local API until B has stored it (at most \
                300 edits per run for these two). The load average printed at the start and end says how busy \
                the machine was: compare runs made at similar load, and prefer the ratios measured within one run \
                (plait to SQLite, plait to pycrdt, show to sqlite3) to absolute figures across runs.
                """)

        @Option(help: "Changes in the synthetic history.") var changes = 1_000_000
        @Option(help: "Lists in the synthetic history and the catch-up workloads.") var lists = 100
        @Option(help: "Live items the synthetic history keeps (once reached, adds are matched by deletes).")
        var items = 10_000
        @Option(help: "Lines fed to the batch benchmark.") var batchLines = 100_000
        @Option(help: "Seed of the synthetic workload.") var seed: UInt64 = 1
        @Option(help: "One-line batches (a signed transaction each) whose authoring rate is measured, per run.")
        var singleTransactions = 1_000
        @Option(help: "How many times each figure is measured (reported as a range).") var runs = 3
        @Flag(help: "Keep the temporary home and print its path.") var keep = false
        @Flag(help: "Print the result as JSON.") var json = false
        @Option(help: .hidden) var replayOnly: String?
        /// Profiling aid: only warm late changes (--runs of them) into an existing home (kept with --keep) of --changes.
        @Option(help: .hidden) var lateOnly: String?
        /// Profiling aid: only the network benchmarks.
        @Flag(help: .hidden) var networkOnly = false
        /// Profiling aid: only the signed catch-up of one workload (edits or growing), `--runs` times.
        @Option(help: .hidden) var catchupOnly: String?
        @Option(help: "Changes a fresh device catches up over TLS (0 skips the network benchmarks).")
        var networkChanges = 100_000
        @Option(help: "Edits whose agent-to-agent latency is measured, per run.") var latencyEdits = 1_000
        @Option(help: "Items both agents hold for a second latency round (0 skips it).") var latencyItems = 100_000
        @Option(help: ArgumentHelp("The pycrdt anchor script (default: scripts/pycrdt-anchor.py).", valueName: "file"))
        var pycrdtScript: String?
        @Option(help: "Seconds two paired, connected agents are left idle while their CPU is measured (0 skips it).")
        var idleSeconds = 60
        /// Profiling aid: only the edit-to-peer latency (`--runs` rounds of --latency-edits edits).
        @Flag(help: .hidden) var latencyOnly = false
        /// Only the idle benchmark (IdleBench.swift), `--runs` times.
        @Flag(help: .hidden) var idleOnly = false
        /// Only the page benchmark (PageBench.swift): first loads in headless Chromium, then the agent's CPU with the
        /// page open for --idle-seconds, --runs times.
        @Flag(help: "Only the page: its first load in headless Chromium and the agent's idle CPU with it open.")
        var pageOnly = false
        @Option(help: ArgumentHelp("The page benchmark's CDP driver (default: tests/browser/page_bench.py).",
            valueName: "file"))
        var pageDriver: String?
        /// Only the commands through a running agent (AgentClientBench.swift) on a home of --network-changes items.
        @Flag(help: .hidden) var agentCommandsOnly = false
        /// The measuring helper (see ChildMeasurement): runs the command after `--`, writes its rusage here.
        @Option(help: .hidden) var measureChild: String?
        @Argument(parsing: .postTerminator, help: .hidden) var childCommand: [String] = []

        func validate() throws {
            if measureChild != nil { return }
            if changes < 1_000 { throw ValidationError("--changes must be at least 1000") }
            if lists < 1 { throw ValidationError("--lists must be at least 1") }
            if runs < 1 { throw ValidationError("--runs must be at least 1") }
            if networkChanges < 0 { throw ValidationError("--network-changes must be 0 or more") }
            if latencyItems < 0 { throw ValidationError("--latency-items must be 0 or more") }
            if idleSeconds < 0 { throw ValidationError("--idle-seconds must be 0 or more") }
            if singleTransactions < 0 { throw ValidationError("--single-transactions must be 0 or more") }
        }

        var networkOptions: NetworkBench.Options {
            NetworkBench.Options(
                changes: networkChanges, lists: lists, edits: max(1, latencyEdits), latencyItems: latencyItems, runs: runs,
                pycrdtScript: pycrdtScript)
        }

        func run() throws {
            if let measureChild {
                try ChildMeasurement.measure(command: childCommand, resultPath: measureChild)
                return
            }
            if let lateOnly {
                let home = try Home.open(at: lateOnly, config: Config())
                var lateChanges = LateChanges(
                    replica: home.replica, changes: changes, timeline: TimelineID(UInt64.random(in: 1...(1 << 40))))
                var times = Sample()
                for _ in 0..<runs {
                    let change = lateChanges.next(back: 1_000)
                    let start = DispatchTime.now().uptimeNanoseconds
                    _ = try home.replica.integrate([change])
                    times.add(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
                }
                print("one late change, in-memory checkpoints: \(times.text("%.1f")) ms")
                return
            }
            if let replayOnly {
                // Profiling aid: replay an existing home (kept with --keep) a few times.
                let home = try Home.open(at: replayOnly, config: Config())
                for _ in 0..<runs {
                    print(String(format: "scan only: %.3f s", try home.replica.measureScan()))
                    let result = try home.replica.rebuild()
                    print(String(format: "replayed %d changes in %.3f s", result.changes, result.replaySeconds))
                }
                print(String(format: "peak resident memory: %.0f MiB", Double(Self.peakResidentKiB()) / 1024))
                return
            }
            let directory = FileManager.default.temporaryDirectory
                .appendingPathComponent("plait-bench-\(UUID().uuidString)").path
            defer { if !keep { try? FileManager.default.removeItem(atPath: directory) } }
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            if idleOnly {
                let idle = try IdleBench.measure(directory: directory, seconds: max(1, idleSeconds), runs: runs,
                    log: { if !json { print($0) } })
                if json { try printFigures(idle) }
                return
            }
            if pageOnly {
                let cores = ProcessInfo.processInfo.activeProcessorCount
                if !json {
                    let load = Self.loadAverage()
                    print(String(format: "machine: %d cores, load average %.2f at the start", cores, load))
                }
                var page = try PageBench.measure(
                    directory: directory, driver: pageDriver ?? "tests/browser/page_bench.py",
                    seconds: max(1, idleSeconds), runs: runs, log: { if !json { print($0) } })
                page["load_average_end"] = Self.loadAverage()
                if !json { print(String(format: "load average %.2f at the end", Self.loadAverage())) }
                if json { try printFigures(page) }
                return
            }
            if agentCommandsOnly {
                let home = try Home.create(at: directory + "/grown", name: "grown", config: Config())
                let written = try NetworkBench.write(.growing, changes: networkChanges, lists: lists, to: home.replica)
                print("a home of \(written) changes (\(home.replica.state.items.count) items) in \(directory)")
                try home.store.checkpointWAL()
                let figures = try NetworkBench.commands(
                    home: home, directory: directory, runs: runs, log: { print($0) })
                if json { try printFigures(figures) }
                return
            }
            if latencyOnly {
                let latency = try NetworkBench.latency(directory: directory, options: networkOptions, log: { print($0) })
                if json { try printFigures(latency) }
                return
            }
            if let catchupOnly {
                guard let workload = NetworkBench.Scenario(rawValue: catchupOnly) else {
                    throw ValidationError("--catchup-only takes edits or growing")
                }
                var options = networkOptions
                options.pycrdtScript = nil
                let figures = try NetworkBench.catchUp(
                    workload, directory: directory, options: options, pycrdt: nil, commands: false, log: { print($0) })
                if json { try printFigures(figures) }
                return
            }
            if networkOnly {
                let network = try NetworkBench.run(directory: directory, options: networkOptions, log: { print($0) })
                print(String(format: "peak resident memory: %.0f MiB", Double(Self.peakResidentKiB()) / 1024))
                if json { try printFigures(network) }
                return
            }
            var results: [String: Any] = ["changes": changes, "seed": Int(seed), "runs": runs]
            let log = { (line: String) in if !json { print(line) } }
            // Other work on the machine slows every figure: say how busy it was, so runs can be compared.
            let cores = ProcessInfo.processInfo.activeProcessorCount
            results["cores"] = cores
            results["load_average_start"] = Self.loadAverage()
            log(String(format: "machine: %d cores, load average %.1f at the start", cores, Self.loadAverage()))
            log("building a history of \(changes) changes over \(lists) lists and about \(items) live items "
                + "(seed \(seed)) in \(directory)")

            let home = try Home.create(at: directory + "/history", name: "bench", config: Config())
            var workload = Workload(seed: seed, lists: lists, items: items)
            let buildStart = Date()
            try workload.write(changes, to: home.replica)
            let buildSeconds = Date().timeIntervalSince(buildStart)
            results["build_changes_per_second"] = Int(Double(changes) / buildSeconds)
            log(String(format: "  written in %.1f s (%.0f changes/s, transactions of 50,000)",
                buildSeconds, Double(changes) / buildSeconds))

            try home.store.checkpointWAL()
            let bytes = home.store.fileSize()
            results["bytes_per_change"] = Double(bytes) / Double(changes)
            log(String(format: "disk: %d bytes, %.1f bytes per change (changes, index, materialized state)",
                bytes, Double(bytes) / Double(changes)))

            var replay = Sample()
            var replayed = 0
            for _ in 0..<runs {
                let rebuild = try home.replica.rebuild()
                replay.add(rebuild.replaySeconds)
                replayed = rebuild.changes
            }
            results["full_replay_seconds"] = replay.json
            log("full replay of \(replayed) changes from the store: \(replay.text("%.3f")) s "
                + "(median \(Int(Double(replayed) / replay.median)) changes/s)")

            // Late changes: another device's edits that sort ~1,000 (warm) or ~500 (cold) changes before the
            // newest one, one timeline whose changes chain and whose Lamport times rise.
            let state = home.replica.state
            var lateChanges = LateChanges(replica: home.replica, changes: changes)
            func late(back: Int) -> Change { lateChanges.next(back: back) }
            var warm = Sample()
            var warmReplayed = 0
            for _ in 0..<runs {
                let change = late(back: 1_000)
                let start = DispatchTime.now().uptimeNanoseconds
                let result = try home.replica.integrate([change])
                warm.add(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
                warmReplayed = result.stats.replayed
            }
            results["late_change_ms"] = warm.json
            log("one late change, in-memory checkpoints: \(warm.text("%.1f")) ms (replayed \(warmReplayed) changes)")

            var cold = Sample()
            var coldReplayed = 0
            for _ in 0..<runs {
                let replica = try Replica(store: home.store)
                let change = late(back: 500)
                let start = DispatchTime.now().uptimeNanoseconds
                let result = try replica.integrate([change])
                cold.add(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
                coldReplayed = result.stats.replayed
            }
            results["late_change_cold_ms"] = cold.json
            log("one late change, fresh process (stored checkpoints): \(cold.text("%.1f")) ms "
                + "(replayed \(coldReplayed) changes)")

            var load = Sample()
            for _ in 0..<runs {
                let start = DispatchTime.now().uptimeNanoseconds
                _ = try Replica(store: home.store)
                load.add(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
            }
            results["state_load_ms"] = load.json
            results["state_items"] = state.items.count
            log("loading the materialized state (\(state.items.count) items, \(state.lists.count) lists): "
                + "\(load.text("%.1f")) ms")

            // Batch import into a fresh device.
            var lines: [String] = []
            for list in 0..<10 { lines.append("list add 'List \(list)' --color blue") }
            for index in 0..<max(0, batchLines - 10) {
                lines.append("add 'List \(index % 10)' \"item \(index) with some text\"")
            }
            var batchRate = Sample()
            for run in 0..<runs {
                let batchHome = try Home.create(at: directory + "/batch-\(run)", name: "batch", config: Config())
                let start = DispatchTime.now().uptimeNanoseconds
                let batch = try Batch.commit(lines: lines, to: batchHome.replica)
                batchRate.add(Double(batch.changes) / (Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9))
                try? FileManager.default.removeItem(atPath: directory + "/batch-\(run)")
            }
            results["batch_changes_per_second"] = batchRate.json
            log("plait batch of \(lines.count) lines (one transaction): \(batchRate.text()) changes/s")
            results.merge(
                try SigningBench.authoring(
                    lines: lines, singles: singleTransactions, directory: directory, runs: runs, log: log)
            ) { $1 }

            if networkChanges > 0 {
                results.merge(try NetworkBench.run(directory: directory, options: networkOptions, log: log)) { $1 }
            }

            // Idle CPU of two paired, connected agents, each a process of its own (IdleBench.swift).
            if idleSeconds > 0 {
                let idle = try IdleBench.measure(directory: directory, seconds: idleSeconds, runs: runs, log: log)
                results.merge(idle) { $1 }
            }

            results["load_average_end"] = Self.loadAverage()
            log(String(format: "load average %.1f at the end (%d cores)", Self.loadAverage(), cores))
            let peak = Self.peakResidentKiB()
            results["peak_rss_mib"] = Double(peak) / 1024
            log(String(format: "peak resident memory of this benchmark process: %.0f MiB", Double(peak) / 1024))
            if keep { log("kept \(directory)") }
            if json { try printFigures(results) }
        }

        /// The one-minute load average (runnable processes), from /proc/loadavg.
        static func loadAverage() -> Double {
            let text = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? ""
            return Double(text.split(separator: " ").first ?? "") ?? 0
        }

        static func currentResidentKiB() -> Int { statusField("VmRSS:") }

        static func peakResidentKiB() -> Int { statusField("VmHWM:") }

        static func statusField(_ name: String) -> Int {
            guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
            for line in status.split(separator: "\n") where line.hasPrefix(name) {
                return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
            }
            return 0
        }
    }
}

/// A deterministic stream of realistic edits: adds, edits, completes, reopens, moves and deletes.
struct Workload {
    var random: SplitMix64
    var lists: [ObjectID] = []
    var live: [ObjectID] = []
    var completed: Set<ObjectID> = []
    var listOf: [ObjectID: ObjectID] = [:]
    let listCount: Int
    let itemCap: Int
    /// Whether items are ever deleted. Without deletes, once the cap is reached every change edits one of a
    /// fixed set of items: the state stops growing (no tombstones) however long the history.
    let deletes: Bool

    init(seed: UInt64, lists: Int, items: Int, deletes: Bool = true) {
        random = SplitMix64(seed: seed)
        listCount = lists
        itemCap = max(50, items)
        self.deletes = deletes
    }

    /// Appends the next `changes` changes to `replica`, in transactions of 50,000.
    mutating func write(_ changes: Int, to replica: Replica) throws {
        var written = 0
        while written < changes {
            let count = min(50_000, changes - written)
            try replica.edit { edit in
                for _ in 0..<count { try edit.append(next()) }
            }
            written += count
        }
    }

    mutating func next() -> ListsChange {
        if lists.count < listCount {
            let id = ObjectID.random(using: &random)
            lists.append(id)
            return .listCreate(id: id, title: "List \(lists.count)", color: nil, at: .bottom)
        }
        var roll = Int(random.next() % 100)
        // At the cap, an add becomes an edit: the state stays about the same size while the history grows.
        if roll < 35 && live.count >= itemCap { roll = 40 }
        if !deletes && (87..<89).contains(roll) { roll = 40 }
        if live.count < 50 || roll < 35 {
            let id = ObjectID.random(using: &random)
            let list = lists[Int(random.next() % UInt64(lists.count))]
            live.append(id)
            listOf[id] = list
            return .itemCreate(id: id, list: list, text: "item \(random.next() % 1_000_000)", at: .bottom)
        }
        let index = Int(random.next() % UInt64(live.count))
        let item = live[index]
        switch roll {
        case 35..<65:
            return .itemEdit(id: item, text: "edited \(random.next() % 1_000_000)")
        case 65..<77:
            if completed.contains(item) {
                completed.remove(item)
                return .itemReopen(id: item)
            }
            completed.insert(item)
            return .itemComplete(id: item)
        case 77..<87:
            let other = live[Int(random.next() % UInt64(live.count))]
            if random.next() % 4 == 0 {
                let list = lists[Int(random.next() % UInt64(lists.count))]
                listOf[item] = list
                return .itemMove(id: item, list: list, at: .top)
            }
            return .itemMove(id: item, list: nil, at: other == item ? .top : .after(other))
        case 87..<89:
            live.swapAt(index, live.count - 1)
            live.removeLast()
            completed.remove(item)
            return .itemDelete(id: item)
        default:
            let list = lists[Int(random.next() % UInt64(lists.count))]
            return .listRename(id: list, title: "List \(random.next() % 1000)")
        }
    }
}

/// Another device's edits that sort about `back` changes before the newest one the replica holds: one timeline
/// whose changes chain and whose Lamport times rise.
struct LateChanges {
    let position: OrderKey
    let target: ObjectID
    let changes: Int
    let timeline: TimelineID
    var previous = Change.zeroHash
    var seq: UInt64 = 0

    init(replica: Replica, changes: Int, timeline: TimelineID = TimelineID(0x1234_5678)) {
        position = replica.position
        target = replica.state.items.first { !$0.value.deleted }!.key
        self.changes = changes
        self.timeline = timeline
    }

    mutating func next(back: Int) -> Change {
        seq += 1
        let change = Change(
            timeline: timeline, seq: seq,
            lamport: position.lamport - UInt64(min(back, changes / 4)) + seq, previousHash: previous,
            kind: "item.edit", version: 1, wallTime: Replica.now(),
            payload: ListsChange.itemEdit(id: target, text: "late edit \(seq)").payload)
        previous = change.hash
        return change
    }
}
