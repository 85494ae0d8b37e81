import ArgumentParser
import Foundation
import PlaitCore
import PlaitStore
import PlaitSync

extension Plait {
    struct Bench: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Measure replay, late changes, batch import and disk use on a temporary device.",
            discussion: """
                Builds a synthetic history in a temporary home (deleted afterwards unless --keep), then \
                measures: full replay of every change from the store; integrating one late change (with the \
                agent's in-memory checkpoints, and cold from stored checkpoints); `plait batch` throughput; \
                bytes per change on disk; peak memory. Run it on a release build: \
                `swift run -c release plait bench`.
                """)

        @Option(help: "Changes in the synthetic history.") var changes = 1_000_000
        @Option(help: "Lists in the synthetic history.") var lists = 100
        @Option(help: "Live items the synthetic history keeps (once reached, adds are matched by deletes).")
        var items = 10_000
        @Option(help: "Lines fed to the batch benchmark.") var batchLines = 100_000
        @Option(help: "Seed of the synthetic workload.") var seed: UInt64 = 1
        @Flag(help: "Keep the temporary home and print its path.") var keep = false
        @Flag(help: "Print the result as JSON.") var json = false
        @Option(help: .hidden) var replayOnly: String?
        /// Profiling aid: only the network benchmarks.
        @Flag(help: .hidden) var networkOnly = false
        @Option(help: "Changes a fresh device catches up over TLS (0 skips the network benchmarks).")
        var networkChanges = 100_000
        @Option(help: "Edits whose agent-to-agent latency is measured.") var latencyEdits = 1_000

        func validate() throws {
            if changes < 1_000 { throw ValidationError("--changes must be at least 1000") }
            if lists < 1 { throw ValidationError("--lists must be at least 1") }
        }

        func run() throws {
            if let replayOnly {
                // Profiling aid: replay an existing home (kept with --keep) a few times.
                let home = try Home.open(at: replayOnly, config: Config())
                for _ in 0..<3 {
                    print(String(format: "scan only: %.3f s", try home.replica.measureScan()))
                    let result = try home.replica.rebuild()
                    print(String(format: "replayed %d changes in %.3f s", result.changes, result.replaySeconds))
                }
                print(String(format: "peak resident memory: %.0f MiB", Double(Self.peakResidentKiB()) / 1024))
                return
            }
            let directory = FileManager.default.temporaryDirectory.appendingPathComponent("plait-bench-\(UUID().uuidString)").path
            defer { if !keep { try? FileManager.default.removeItem(atPath: directory) } }
            if networkOnly {
                let network = try NetworkBench.run(
                    directory: directory, changes: networkChanges, edits: max(1, latencyEdits), log: { print($0) })
                print(String(format: "peak resident memory: %.0f MiB", Double(Self.peakResidentKiB()) / 1024))
                if json { try printFigures(network) }
                return
            }
            var results: [String: Any] = ["changes": changes, "seed": Int(seed)]
            let log = { (line: String) in if !json { print(line) } }
            log("building a history of \(changes) changes over \(lists) lists and about \(items) live items (seed \(seed)) in \(directory)")

            let home = try Home.create(at: directory + "/history", name: "bench", config: Config())
            var workload = Workload(seed: seed, lists: lists, items: items)
            let buildStart = Date()
            try workload.write(changes, to: home.replica)
            let buildSeconds = Date().timeIntervalSince(buildStart)
            results["build_changes_per_second"] = Int(Double(changes) / buildSeconds)
            log(String(format: "  written in %.1f s (%.0f changes/s, transactions of 50,000)", buildSeconds, Double(changes) / buildSeconds))

            try home.store.checkpointWAL()
            let bytes = home.store.fileSize()
            results["bytes_per_change"] = Double(bytes) / Double(changes)
            log(String(format: "disk: %d bytes, %.1f bytes per change (changes, index, materialized state)", bytes, Double(bytes) / Double(changes)))

            let rebuild = try home.replica.rebuild()
            results["full_replay_seconds"] = rebuild.replaySeconds
            log(String(format: "full replay of %d changes from the store: %.3f s (%.0f changes/s)",
                rebuild.changes, rebuild.replaySeconds, Double(rebuild.changes) / rebuild.replaySeconds))

            // A late change: another device's edit that sorts ~1,000 changes before the newest one.
            let position = home.replica.position
            let state = home.replica.state
            let target = state.items.first { !$0.value.deleted }!.key
            let late = Change(
                timeline: TimelineID(0x1234_5678), seq: 1, lamport: position.lamport - UInt64(min(1_000, changes / 4)),
                previousHash: Change.zeroHash, kind: "item.edit", version: 1, wallTime: Replica.now(),
                payload: ListsChange.itemEdit(id: target, text: "late edit").payload)
            var start = DispatchTime.now().uptimeNanoseconds
            let warm = try home.replica.integrate([late])
            let warmMs = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
            results["late_change_ms"] = warmMs
            log(String(format: "one late change, in-memory checkpoints: %.1f ms (replayed %d changes)", warmMs, warm.stats.replayed))

            let cold = try Replica(store: home.store)
            let late2 = Change(
                timeline: TimelineID(0x1234_5678), seq: 2, lamport: position.lamport - UInt64(min(500, changes / 8)),
                previousHash: late.hash, kind: "item.edit", version: 1, wallTime: Replica.now(),
                payload: ListsChange.itemEdit(id: target, text: "late edit 2").payload)
            start = DispatchTime.now().uptimeNanoseconds
            let coldResult = try cold.integrate([late2])
            let coldMs = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
            results["late_change_cold_ms"] = coldMs
            log(String(format: "one late change, fresh process (stored checkpoints): %.1f ms (replayed %d changes)", coldMs, coldResult.stats.replayed))

            start = DispatchTime.now().uptimeNanoseconds
            _ = try Replica(store: home.store)
            let loadMs = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
            results["state_load_ms"] = loadMs
            results["state_items"] = state.items.count
            log(String(format: "loading the materialized state (%d items, %d lists): %.1f ms", state.items.count, state.lists.count, loadMs))

            // Batch import into a fresh device.
            let batchHome = try Home.create(at: directory + "/batch", name: "batch", config: Config())
            var lines: [String] = []
            for list in 0..<10 { lines.append("list add 'List \(list)' --color blue") }
            for index in 0..<max(0, batchLines - 10) { lines.append("add 'List \(index % 10)' \"item \(index) with some text\"") }
            start = DispatchTime.now().uptimeNanoseconds
            let batch = try Batch.commit(lines: lines, to: batchHome.replica)
            let batchSeconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            results["batch_changes_per_second"] = Int(Double(batch.changes) / batchSeconds)
            log(String(format: "plait batch of %d lines: %.2f s (%.0f changes/s, one transaction)", lines.count, batchSeconds, Double(batch.changes) / batchSeconds))

            if networkChanges > 0 {
                let network = try NetworkBench.run(
                    directory: directory, changes: networkChanges, edits: max(1, latencyEdits), log: log)
                results.merge(network) { $1 }
            }

            let peak = Self.peakResidentKiB()
            results["peak_rss_mib"] = Double(peak) / 1024
            log(String(format: "peak resident memory: %.0f MiB", Double(peak) / 1024))
            if keep { log("kept \(directory)") }
            if json { try printFigures(results) }
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
