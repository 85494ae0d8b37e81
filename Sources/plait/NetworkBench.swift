import Foundation
import Logging
import PlaitCore
import PlaitStore
import PlaitSync

/// The network half of `plait bench`: catch-up over TLS on loopback, and edit-to-peer latency between two
/// agents. Everything runs in this process on 127.0.0.1.
enum NetworkBench {
    static func run(directory: String, changes: Int, edits: Int, log: (String) -> Void) throws -> [String: Any] {
        var results: [String: Any] = [:]
        let quiet = Logger(label: "plait.bench", factory: { _ in SwiftLogNoOpLogHandler() })

        // A device with `changes` changes, and a fresh one that catches up from its agent.
        let source = try Home.create(at: directory + "/net-source", name: "source", config: Config())
        let fresh = try Home.create(at: directory + "/net-fresh", name: "fresh", config: Config())
        _ = try source.trust(fresh.identity.deviceID.description, address: nil, name: "fresh")
        _ = try fresh.trust(source.identity.deviceID.description, address: nil, name: "source")
        // Edits to a fixed set of 10,000 items (no deletes, so no tombstones): the state is the same size for
        // every history length, and the catch-up's memory can be compared across lengths.
        var workload = Workload(seed: 7, lists: 100, items: 10_000, deletes: false)
        try workload.write(changes, to: source.replica)
        try? fresh.store.checkpointWAL()
        var settings = Agent.Settings()
        settings.listen = try PeerAddress(parsing: "127.0.0.1:0", allowingPortZero: true)
        let sourceAgent = Agent(home: source, settings: settings, logger: quiet)
        try sourceAgent.start()
        defer { sourceAgent.stop() }
        let address = try PeerAddress(parsing: "127.0.0.1:\(sourceAgent.boundPort!)")
        // The fresh device is a `plait sync` child process, so its peak memory is its own (not the source's).
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL
        if !FileManager.default.isExecutableFile(atPath: process.executableURL!.path) {
            process.executableURL = Bundle.main.executableURL
        }
        process.arguments = ["sync", "--home", directory + "/net-fresh", "--peer", address.description, "--json", "--timeout", "300"]
        let output = Pipe()
        process.standardOutput = output
        let start = DispatchTime.now().uptimeNanoseconds
        try process.run()
        // The child's own peak (VmHWM of its /proc entry, read until it exits): getrusage's ru_maxrss for
        // children counts this (large) process too, since posix_spawn's child shares its memory until exec.
        let peak = PeakWatcher(pid: process.processIdentifier)
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        var usage = rusage()
        getrusage(RUSAGE_CHILDREN.rawValue, &usage)
        let childPeakMiB = Double(peak.finish()) / 1024
        let childCPU = Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
            + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
        guard process.terminationStatus == 0,
            let json = try JSONSerialization.jsonObject(with: data) as? [String: Any],
            let peer = (json["peers"] as? [[String: Any]])?.first, let pulled = peer["pulled"] as? Int
        else {
            throw PlaitError.usage("catch-up failed: \(String(decoding: data, as: UTF8.self))")
        }
        results["catchup_changes"] = pulled
        results["catchup_bytes_received"] = peer["bytes_received"] as? Int ?? 0
        results["catchup_changes_per_second"] = Int(Double(pulled) / seconds)
        results["catchup_peak_rss_mib"] = childPeakMiB
        results["catchup_cpu_seconds"] = childCPU
        log(String(format: "catch-up of %d changes over TLS on loopback by a `plait sync` process: %.2f s (%.0f changes/s, stored durably), %d bytes on the wire",
            pulled, seconds, Double(pulled) / seconds, peer["bytes_received"] as? Int ?? 0))
        log(String(format: "  that process: peak resident memory %.0f MiB, CPU %.2f s", childPeakMiB, childCPU))

        // Edit on one agent's device → applied on the other's, agents connected.
        let a = try Home.create(at: directory + "/net-a", name: "a", config: Config())
        let b = try Home.create(at: directory + "/net-b", name: "b", config: Config())
        _ = try a.trust(b.identity.deviceID.description, address: nil, name: "b")
        _ = try b.trust(a.identity.deviceID.description, address: nil, name: "a")
        let agentB = Agent(home: b, settings: settings, logger: quiet)
        try agentB.start()
        defer { agentB.stop() }
        var settingsA = settings
        settingsA.staticPeers = [try PeerAddress(parsing: "127.0.0.1:\(agentB.boundPort!)")]
        let agentA = Agent(home: a, settings: settingsA, logger: quiet)
        try agentA.start()
        defer { agentA.stop() }
        let list = ObjectID.random()
        try a.replica.edit { try $0.append(.listCreate(id: list, title: "latency", color: nil, at: .bottom)) }
        let timeline = try a.store.ownTimeline()
        guard waitUntil(seconds: 30, { (try? b.store.summary()[timeline]) ?? 0 >= 1 }) else {
            throw PlaitError.usage("the two agents did not connect within 30 s")
        }
        var latencies: [Double] = []
        for index in 0..<edits {
            let start = DispatchTime.now().uptimeNanoseconds
            let change = try a.replica.edit {
                try $0.append(.itemCreate(id: ObjectID.random(), list: list, text: "edit \(index)", at: .bottom))
            }
            guard waitUntil(seconds: 10, { (try? b.store.summary()[timeline]) ?? 0 >= change.seq }) else {
                throw PlaitError.usage("edit \(index) did not reach the other agent within 10 s")
            }
            latencies.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
        }
        latencies.sort()
        let p50 = latencies[latencies.count / 2]
        let p99 = latencies[min(latencies.count - 1, latencies.count * 99 / 100)]
        results["edit_latency_p50_ms"] = p50
        results["edit_latency_p99_ms"] = p99
        log(String(format: "edit on A → applied on B (agents on loopback, %d edits): p50 %.1f ms, p99 %.1f ms", edits, p50, p99))
        return results
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

/// Polls a process's peak resident set (VmHWM, KiB) every 2 ms until `finish()`; keeps the largest value read.
final class PeakWatcher: @unchecked Sendable {
    private let lock = NSLock()
    private var peak = 0
    private var done = false

    init(pid: Int32) {
        let path = "/proc/\(pid)/status"
        Thread { [self] in
            while !lock.withLock({ done }) {
                if let text = try? String(contentsOfFile: path, encoding: .utf8),
                    let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
                    let value = Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
                {
                    lock.withLock { peak = max(peak, value) }
                }
                usleep(2_000)
            }
        }.start()
    }

    /// Stops watching; the largest VmHWM seen, in KiB.
    func finish() -> Int {
        lock.withLock {
            done = true
            return peak
        }
    }
}
