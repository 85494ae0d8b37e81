import Foundation
import Logging
import PlaitCore
import PlaitStore
import PlaitSession
import PlaitSync
import PlaitTLS

/// The network half of `plait bench`: a fresh device catching up over TLS on loopback (two workloads, each
/// beside SQLite's own insert rate of the same rows and pycrdt's apply of the equivalent update), the commands
/// a user runs on the grown state (`show --json`, `add`), and edit-to-peer latency between two agents.
/// Everything listens and connects on 127.0.0.1 only.
enum NetworkBench {
    struct Options {
        var changes = 100_000
        var lists = 100
        var edits = 1_000
        /// Items both devices hold before a second round of edit-to-peer latency (0 skips it).
        var latencyItems = 100_000
        var runs = 3
        var pycrdtScript: String?
    }

    /// The two catch-up workloads.
    enum Scenario: String, CaseIterable {
        /// Today's edits: 10,000 items created, then every change edits one of them (no deletes), so the
        /// state stays 10,000 items however long the history.
        case edits
        /// The growing state: every change after the lists is an `item.create` of a new item in a random
        /// list, so the catching-up device ends with as many live items as changes.
        case growing

        var title: String {
            switch self {
            case .edits: return "edits (10,000 items edited)"
            case .growing: return "growing state (every change a new item)"
            }
        }
    }

    static func run(directory: String, options: Options, log: (String) -> Void) throws -> [String: Any] {
        var results: [String: Any] = [:]
        let pycrdtScript = PycrdtAnchor.script(explicit: options.pycrdtScript)
        let pycrdtMissing = PycrdtAnchor.unavailable(script: pycrdtScript)
        if let pycrdtMissing {
            results["pycrdt_skipped"] = pycrdtMissing
            log("pycrdt anchor skipped: \(pycrdtMissing)")
        }
        for workload in Scenario.allCases {
            let figures = try catchUp(
                workload, directory: directory, options: options, pycrdt: pycrdtMissing == nil ? pycrdtScript : nil,
                log: log)
            results.merge(figures) { $1 }
            // The same pull from an unsigned timeline, which the receiver takes without verifying (issue 10).
            let unsigned = try catchUp(
                workload, directory: directory, options: options, pycrdt: nil, signed: false, log: log)
            results.merge(unsigned) { $1 }
            let prefix = "catchup_\(workload.rawValue)_"
            if let signedRate = (figures[prefix + "changes_per_second"] as? [String: Any])?["median"] as? Double,
                let unsignedRate = (unsigned[prefix + "unsigned_changes_per_second"] as? [String: Any])?["median"]
                    as? Double, unsignedRate > 0
            {
                results[prefix + "signed_to_unsigned"] = signedRate / unsignedRate
                log(String(format: "  verifying costs the catch-up %.1f %% (signed / unsigned source, medians)",
                    100 * (1 - signedRate / unsignedRate)))
            }
        }
        results.merge(try latency(directory: directory, options: options, log: log)) { $1 }
        results.merge(try EventBench.latency(directory: directory, options: options, log: log)) { $1 }
        results.merge(try APIEditBench.latency(directory: directory, options: options, log: log)) { $1 }
        return results
    }

    /// Builds the source device, then per run a fresh device (a `plait sync` process) catches up from the
    /// source's agent; SQLite's insert rate of the same rows and the pycrdt anchor follow.
    static func catchUp(
        _ workload: Scenario, directory: String, options: Options, pycrdt: String?, signed: Bool = true,
        commands runCommands: Bool = true, log: (String) -> Void
    ) throws -> [String: Any] {
        let quiet = Logger(label: "plait.bench", factory: { _ in SwiftLogNoOpLogHandler() })
        let config = Config()
        let variant = signed ? "" : "unsigned_"
        let prefix = "catchup_\(workload.rawValue)_" + variant
        var results: [String: Any] = [:]
        log("catch-up, \(workload.title)" + (signed ? ", signed source:" : ", unsigned source (not verified):"))

        let sourcePath = directory + "/net-\(workload.rawValue)-\(variant)source"
        var written = 0
        let source = signed
            ? try Home.create(at: sourcePath, name: "source", config: config)
            : try SigningBench.unsignedHome(at: sourcePath, name: "source", config: config) {
                written = try write(workload, changes: options.changes, lists: options.lists, to: $0)
            }
        if signed { written = try write(workload, changes: options.changes, lists: options.lists, to: source.replica) }
        let freshPaths = (0..<options.runs).map { directory + "/net-\(workload.rawValue)-\(variant)fresh-\($0)" }
        for (index, path) in freshPaths.enumerated() {
            let fresh = try Home.create(at: path, name: "fresh\(index)", config: config)
            _ = try source.trust(fresh.identity.deviceID.description, address: nil, name: "fresh\(index)")
            _ = try fresh.trust(source.identity.deviceID.description, address: nil, name: "source")
        }
        let items = source.replica.state.items.count
        log("  source: \(written) changes, \(source.replica.state.lists.count) lists, \(items) items")

        var settings = Agent.Settings()
        settings.listen = try PeerAddress(parsing: "127.0.0.1:0", allowingPortZero: true)
        let agent = Agent(home: source, settings: settings, logger: quiet)
        try agent.start()
        var agentRunning = true
        defer { if agentRunning { agent.stop() } }
        // The agent checks every stored change's hash chain when it starts (0.1 – 0.2 s for 100,000 changes on a
        // thread of its own): the first catch-up would share the two cores with it, the later ones not.
        agent.awaitStartupCheck()
        let address = try PeerAddress(parsing: "127.0.0.1:\(agent.boundPort!)")

        var rate = Sample()
        var peak = Sample()
        var cpu = Sample()
        var agentCPU = Sample()
        var coresBusy = Sample()
        var bytes = 0
        var diskBytes = 0
        var pulledTwice = 0
        var held = 0
        for path in freshPaths {
            // What a fresh device pulls: everything the source holds (the workload and its timeline.begin).
            held = Int(try source.store.summary().count)
            // A profiling aid: PLAIT_BENCH_CATCHUP_WRAP="/usr/bin/perf record -g -o FILE --" runs the catching-up
            // process under that command (its figures then include the wrapper's).
            let wrap = ProcessInfo.processInfo.environment["PLAIT_BENCH_CATCHUP_WRAP"]?
                .split(separator: " ").map(String.init) ?? []
            // This process's CPU meanwhile is the serving agent's (the benchmark itself only waits): with the
            // catching-up process's, what the catch-up costs the machine.
            let agentBefore = Self.ownCPUSeconds()
            let child = try ChildMeasurement.run(
                wrap + [ChildMeasurement.executable, "sync", "--home", path, "--peer", address.description, "--json",
                    "--timeout", "300"],
                captureOutput: true, scratch: directory)
            let agentSeconds = Self.ownCPUSeconds() - agentBefore
            guard child.exitStatus == 0,
                let json = try? JSONSerialization.jsonObject(with: child.output) as? [String: Any],
                let peer = (json["peers"] as? [[String: Any]])?.first, let pulled = peer["pulled"] as? Int
            else {
                throw PlaitError.usage("catch-up failed: \(String(decoding: child.output, as: UTF8.self))")
            }
            // A signed timeline is taken only up to a verified signature: a batch's uncovered tail is held back
            // and arrives again, so `pulled` may exceed what the source holds. The store says what arrived.
            let stored = try Home.open(at: path, config: config).store.changeCount()
            guard pulled >= held, stored == held + 1 else {
                throw PlaitError.usage(
                    "catch-up (\(prefix)) pulled \(pulled) changes and stored \(stored - 1) of \(held)")
            }
            if pulled > held { log("    (pulled \(pulled) changes for \(held): \(pulled - held) arrived twice)") }
            pulledTwice = max(pulledTwice, pulled - held)
            bytes = peer["bytes_received"] as? Int ?? 0
            rate.add(Double(held) / child.seconds)
            peak.add(child.peakMiB)
            cpu.add(child.cpuSeconds)
            agentCPU.add(agentSeconds)
            coresBusy.add((child.cpuSeconds + agentSeconds) / child.seconds)
            // What the received changes (with their signatures, if any) take on the receiver's disk.
            let received = path + "/" + Home.storeFileName
            diskBytes = [received, received + "-wal"].reduce(0) {
                $0 + ((try? FileManager.default.attributesOfItem(atPath: $1)[.size] as? Int) ?? 0)
            }
            try? FileManager.default.removeItem(atPath: path)
        }
        results[prefix + "changes"] = written
        results[prefix + "bytes_received"] = bytes
        results[prefix + "pulled_twice"] = pulledTwice
        results[prefix + "bytes_received_per_change"] = Double(bytes) / Double(held)
        results[prefix + "receiver_disk_bytes_per_change"] = Double(diskBytes) / Double(held)
        results[prefix + "changes_per_second"] = rate.json
        results[prefix + "peak_rss_mib"] = peak.json
        results[prefix + "cpu_seconds"] = cpu.json
        results[prefix + "serving_agent_cpu_seconds"] = agentCPU.json
        results[prefix + "cores_busy"] = coresBusy.json
        log("  a fresh device (`plait sync` process) catches up \(written) changes over TLS, durably: "
            + "\(rate.text()) changes/s, \(bytes) bytes on the wire "
            + String(format: "(%.1f per change; %.1f per change on its disk)",
                Double(bytes) / Double(held), Double(diskBytes) / Double(held)))
        log("    that process: peak resident memory \(peak.text("%.0f")) MiB, CPU \(cpu.text("%.2f")) s")
        log("    the serving agent meanwhile: CPU \(agentCPU.text("%.2f")) s; the two together kept "
            + "\(coresBusy.text("%.2f")) of the machine's \(ProcessInfo.processInfo.activeProcessorCount) cores busy")
        if !signed {
            // The ceiling, the anchor and the commands are measured once, with the signed source.
            try? FileManager.default.removeItem(atPath: sourcePath)
            return results
        }

        // SQLite's own rate for the same rows, batches and settings: the ceiling of any durable catch-up.
        let timeline = try source.store.ownTimeline()
        let rows = try source.store.changes(of: timeline, from: 1, limit: written + 1)
        let batches = SQLiteCeiling.batches(
            of: rows, batchChanges: config.batchChanges, batchBytes: SessionOptions().maxBatchBytes)
        var ceiling = Sample()
        for run in 0..<options.runs {
            let path = directory + "/ceiling-\(workload.rawValue)-\(run).sqlite"
            let seconds = try SQLiteCeiling.insertSeconds(batches, path: path, synchronousFull: config.synchronousFull)
            ceiling.add(Double(rows.count) / seconds)
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }
        results[prefix + "sqlite_insert_per_second"] = ceiling.json
        results[prefix + "ratio_to_sqlite"] = rate.median / ceiling.median
        // The CPU the goal leaves: at 70 % of the ceiling's rate the catch-up lasts ceiling time / 0.7, and the two
        // processes can spend at most that times the cores (more only if the work were spread perfectly).
        let goalSeconds = Double(held) / (0.7 * ceiling.median)
        let cores = Double(ProcessInfo.processInfo.activeProcessorCount)
        results[prefix + "cpu_seconds_the_goal_allows"] = goalSeconds * cores
        log("  SQLite inserting the same \(rows.count) rows (same table and indexes, synchronous = "
            + "\(config.synchronousFull ? "full" : "normal"), WAL, \(batches.count) transactions as the sync's "
            + "batches): \(ceiling.text()) rows/s")
        log(String(format: "    plait's catch-up is %.0f %% of it (medians; goal ≥ 70 %%)",
            100 * rate.median / ceiling.median))
        log(String(format: "    the goal means %.2f s for the catch-up: at most %.2f s of CPU on %.0f cores for both processes, "
            + "which spent %.2f s (medians)", goalSeconds, goalSeconds * cores, cores, cpu.median + agentCPU.median))

        if let pycrdt {
            let arguments = workload == .growing
                ? ["--workload", "growing", "--lists", "\(options.lists)", "--items", "\(written - options.lists)"]
                : ["--workload", "edits", "--lists", "\(options.lists)", "--changes", "\(written)", "--live", "10000"]
            let anchor = try PycrdtAnchor.run(script: pycrdt, arguments: arguments, runs: options.runs)
            let anchorRate = Sample(anchor.apply.values.map { Double(anchor.operations) / $0 })
            results[prefix + "pycrdt_operations_per_second"] = anchorRate.json
            results[prefix + "ratio_to_pycrdt"] = rate.median / anchorRate.median
            log("  pycrdt \(anchor.version) applying the equivalent update (\(anchor.operations) operations, "
                + "\(anchor.updateBytes) bytes) in memory: \(anchorRate.text()) operations/s")
            log(String(format: "    plait's catch-up is %.1f %% of it (medians)",
                100 * rate.median / anchorRate.median))
        }

        if workload == .growing && runCommands {
            // The commands a user runs on the grown state, each a process of its own, no agent running.
            agent.stop()
            agentRunning = false
            results.merge(try commands(home: source, directory: directory, runs: options.runs, log: log)) { $1 }
        }
        try? FileManager.default.removeItem(atPath: sourcePath)
        return results
    }

    /// This process's CPU time so far (user and system, every thread).
    static func ownCPUSeconds() -> Double {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return usage.cpuSeconds
    }

    /// Writes the workload's changes; returns how many.
    static func write(_ workload: Scenario, changes: Int, lists: Int, to replica: Replica) throws -> Int {
        switch workload {
        case .edits:
            var edits = Workload(seed: 7, lists: lists, items: 10_000, deletes: false)
            try edits.write(changes, to: replica)
            return changes
        case .growing:
            var random = SplitMix64(seed: 11)
            var listIDs: [ObjectID] = []
            try replica.edit { edit in
                for index in 0..<lists {
                    let id = ObjectID.random(using: &random)
                    listIDs.append(id)
                    try edit.append(.listCreate(id: id, title: "List \(index + 1)", color: nil, at: .bottom))
                }
            }
            var written = 0
            while written < changes {
                let count = min(50_000, changes - written)
                try replica.edit { edit in
                    for index in written..<(written + count) {
                        let list = listIDs[Int(random.next() % UInt64(listIDs.count))]
                        try edit.append(
                            .itemCreate(
                                id: ObjectID.random(using: &random), list: list,
                                text: "item \(index) \(random.next() % 1_000_000)", at: .bottom))
                    }
                }
                written += count
            }
            return lists + changes
        }
    }

    /// `plait show --json` and `plait add` on the grown home, timed as processes, beside the sqlite3 CLI
    /// reading the same rows.
    static func commands(home: Home, directory: String, runs: Int, log: (String) -> Void) throws -> [String: Any] {
        var results: [String: Any] = [:]
        let items = home.replica.state.items.count
        try home.store.checkpointWAL()
        var show = Sample()
        var showPeak = Sample()
        for _ in 0..<runs {
            let child = try ChildMeasurement.run(
                [ChildMeasurement.executable, "show", "--json", "--home", home.path],
                captureOutput: false, scratch: directory)
            guard child.exitStatus == 0 else { throw PlaitError.usage("plait show --json exited \(child.exitStatus)") }
            show.add(child.seconds)
            showPeak.add(child.peakMiB)
        }
        results["show_json_seconds"] = show.json
        results["show_json_peak_rss_mib"] = showPeak.json
        log("  `plait show --json` of \(items) items (a process, output to /dev/null): \(show.text("%.3f")) s, "
            + "peak resident memory \(showPeak.text("%.0f")) MiB")

        if let sqlite3 = findExecutable("sqlite3") {
            let query = "SELECT hex(id), hex(list), text, completed FROM items WHERE deleted = 0"
            let count = try ChildMeasurement.run(
                [sqlite3, "-readonly", home.storePath, "SELECT count(*) FROM items WHERE deleted = 0"],
                captureOutput: true, scratch: directory)
            let rows = String(decoding: count.output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            var cli = Sample()
            for _ in 0..<runs {
                let child = try ChildMeasurement.run(
                    [sqlite3, "-readonly", "-json", home.storePath, query], captureOutput: false, scratch: directory)
                guard child.exitStatus == 0 else { throw PlaitError.usage("sqlite3 exited \(child.exitStatus)") }
                cli.add(child.seconds)
            }
            results["sqlite3_cli_json_seconds"] = cli.json
            results["sqlite3_cli_rows"] = Int(rows) ?? 0
            log("    sqlite3 CLI printing the same items as JSON (\(rows) rows of the items table): "
                + "\(cli.text("%.3f")) s; plait show takes "
                + String(format: "%.1f× that (medians)", show.median / cli.median))
        } else {
            log("    sqlite3 CLI comparison skipped: no sqlite3 on PATH")
        }

        var add = Sample()
        var addPeak = Sample()
        var floor = 0
        for run in 0..<runs {
            let child = try ChildMeasurement.run(
                [ChildMeasurement.executable, "add", "--home", home.path, "List 1", "bench add \(run)"],
                captureOutput: false, scratch: directory)
            guard child.exitStatus == 0 else { throw PlaitError.usage("plait add exited \(child.exitStatus)") }
            add.add(child.seconds * 1000)
            addPeak.add(child.peakMiB)
            floor = child.floorKiB
        }
        results["add_ms"] = add.json
        results["add_peak_rss_mib"] = addPeak.json
        log("  `plait add` there, no agent running (a process): \(add.text("%.0f")) ms, peak resident memory "
            + "\(addPeak.text("%.0f")) MiB (measuring floor \(floor / 1024) MiB)")
        results.merge(try AgentClientBench.measure(home: home.path, directory: directory, runs: runs, log: log)) { $1 }
        return results
    }

    /// Edit on one agent's device → applied on the other's, agents connected; `runs` rounds of `edits` edits.
    /// Edit-to-peer latency twice: with `store.synchronous = "full"` (the default: the edit on A and the pulled
    /// batch on B each wait for the disk) and `"normal"` (neither waits), beside the time one `fsync` of a file
    /// in the same directory takes. Two `fsync`s lie on the durable path, so their sum is its floor on this disk,
    /// whatever the software does; the "normal" figure is what the software itself costs.
    static func latency(directory: String, options: Options, log: (String) -> Void) throws -> [String: Any] {
        var results: [String: Any] = [:]
        let floor = try fsyncLatency(directory: directory, count: max(50, min(options.edits, 400)))
        log("fsync of a 4 KiB append in the bench directory (\(floor.count) calls): p50 "
            + String(format: "%.1f ms, p99 %.1f ms", floor.p50, floor.p99)
            + " — twice that is the floor of a durable edit-to-peer path (A's commit, then B's)")
        results["fsync_p50_ms"] = floor.p50
        results["fsync_p99_ms"] = floor.p99
        for durable in [true, false] {
            let figures = try latency(directory: directory, options: options, durable: durable)
            let label = durable ? "synchronous = full (default)" : "synchronous = normal (no fsync on commit)"
            log("edit on A → applied on B (agents on loopback, \(label), \(options.runs) rounds of "
                + "\(options.edits) edits): p50 \(figures.p50.text("%.1f")) ms, p99 \(figures.p99.text("%.1f")) ms")
            let suffix = durable ? "" : "_synchronous_normal"
            results["edit_latency_p50_ms" + suffix] = figures.p50.json
            results["edit_latency_p99_ms" + suffix] = figures.p99.json
        }
        if options.latencyItems > 0 {
            // The same on the home of a user who keeps adding: every message and check that walks the state
            // shows here and not on empty homes.
            let figures = try latency(directory: directory, options: options, durable: true, items: options.latencyItems)
            log("edit on A → applied on B, both holding \(options.latencyItems) items (synchronous = full, "
                + "\(options.runs) rounds of \(options.edits) edits): p50 \(figures.p50.text("%.1f")) ms, p99 "
                + "\(figures.p99.text("%.1f")) ms")
            results["edit_latency_grown_items"] = options.latencyItems
            results["edit_latency_grown_p50_ms"] = figures.p50.json
            results["edit_latency_grown_p99_ms"] = figures.p99.json
        }
        return results
    }

    /// p50 and p99 of `fsync` after appending 4 KiB to a file in `directory` (what a WAL commit waits for).
    static func fsyncLatency(directory: String, count: Int) throws -> (p50: Double, p99: Double, count: Int) {
        let path = directory + "/fsync-probe"
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard descriptor >= 0 else { throw PlaitError.usage("cannot create \(path) to time fsync") }
        defer {
            close(descriptor)
            unlink(path)
        }
        let block = [UInt8](repeating: 0x5a, count: 4096)
        var times: [Double] = []
        for _ in 0..<count {
            guard block.withUnsafeBytes({ Glibc.write(descriptor, $0.baseAddress, $0.count) }) == block.count else {
                throw PlaitError.usage("cannot write to \(path) to time fsync")
            }
            let start = DispatchTime.now().uptimeNanoseconds
            fsync(descriptor)
            times.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
        }
        let (p50, p99) = percentiles(times)
        return (p50, p99, count)
    }

    static func latency(
        directory: String, options: Options, durable: Bool, items: Int = 0
    ) throws -> (p50: Sample, p99: Sample) {
        var config = Config()
        config.synchronousFull = durable
        let agents = try PairedAgents(
            directory: directory + "/net-\(durable ? "full" : "normal")\(items > 0 ? "-grown" : "")", config: config)
        defer { agents.stop() }
        let (a, b) = (agents.a, agents.b)
        // The grown home's items are written before the latency list, so B has caught up on them when it holds it.
        if items > 0 { _ = try write(.growing, changes: items, lists: options.lists, to: a.replica) }
        let list = ObjectID.random()
        _ = try a.replica.edit { try $0.append(.listCreate(id: list, title: "latency", color: nil, at: .bottom)) }
        let timeline = try a.store.ownTimeline()
        let ready = try a.store.summary()[timeline]
        guard waitUntil(seconds: 120, { (try? b.store.summary()[timeline]) ?? 0 >= ready }) else {
            throw PlaitError.usage("the two agents did not connect and catch up within 120 s")
        }
        var p50 = Sample()
        var p99 = Sample()
        for run in 0..<options.runs {
            var latencies: [Double] = []
            for index in 0..<options.edits {
                let start = DispatchTime.now().uptimeNanoseconds
                let change = try a.replica.edit {
                    try $0.append(
                        .itemCreate(id: ObjectID.random(), list: list, text: "edit \(run).\(index)", at: .bottom))
                }
                guard waitUntil(seconds: 10, { (try? b.store.summary()[timeline]) ?? 0 >= change.seq }) else {
                    throw PlaitError.usage("edit \(index) did not reach the other agent within 10 s")
                }
                latencies.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
            }
            let round = percentiles(latencies)
            p50.add(round.p50)
            p99.add(round.p99)
        }
        return (p50, p99)
    }

    /// Two homes paired with each other under `directory`, each with an agent on 127.0.0.1 (A dials B): what the
    /// latency benchmarks edit on. `stop()` stops both agents.
    struct PairedAgents {
        let a: Home
        let b: Home
        let agentA: Agent
        let agentB: Agent

        init(directory: String, config: Config) throws {
            let quiet = Logger(label: "plait.bench", factory: { _ in SwiftLogNoOpLogHandler() })
            var settings = Agent.Settings()
            settings.listen = try PeerAddress(parsing: "127.0.0.1:0", allowingPortZero: true)
            a = try Home.create(at: directory + "-a", name: "a", config: config)
            b = try Home.create(at: directory + "-b", name: "b", config: config)
            _ = try a.trust(b.identity.deviceID.description, address: nil, name: "b")
            _ = try b.trust(a.identity.deviceID.description, address: nil, name: "a")
            agentB = Agent(home: b, settings: settings, logger: quiet)
            try agentB.start()
            do {
                var settingsA = settings
                settingsA.staticPeers = [try PeerAddress(parsing: "127.0.0.1:\(agentB.boundPort!)")]
                agentA = Agent(home: a, settings: settingsA, logger: quiet)
                try agentA.start()
            } catch {
                agentB.stop()
                throw error
            }
        }

        func stop() {
            agentA.stop()
            agentB.stop()
        }
    }

    static func findExecutable(_ name: String) -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(name)" }
            .first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// Polls `condition` every half millisecond (the benchmark measures when it turns true).
    static func waitUntil(seconds: Double, _ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition() { return true }
            usleep(500)
        }
        return condition()
    }
}
