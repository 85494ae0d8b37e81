import Foundation
import PlaitSync

/// The CLI through the agent (issue 11: "`plait add` on a 100,000-item home with an agent running: goal ≤ 1.2×
/// the time on an empty home; `plait show --json` there ≤ 0.3 s"): each command a process, as a user runs it,
/// timed from outside (`ChildMeasurement`), with a `plait agent` process serving the home on its Unix socket.
enum AgentClientBench {
    /// Measures on `home` (the grown one) and on a fresh empty home under `directory`, `runs` times each.
    static func measure(home: String, directory: String, runs: Int, log: (String) -> Void) throws -> [String: Any] {
        let executable = try IdleBench.agentExecutable()
        let environment = IdleBench.isolatedEnvironment(directory: directory, config: directory + "/agent-bench-config")
        let empty = directory + "/agent-bench-empty"
        _ = try IdleBench.runToEnd(executable, ["init", "--home", empty, "--name", "empty"], environment)
        _ = try IdleBench.runToEnd(executable, ["list", "add", "--home", empty, "List 1"], environment)
        defer { try? FileManager.default.removeItem(atPath: empty) }

        let items = try Home.open(at: home, config: Config()).replica.state.items.count
        var results: [String: Any] = [:]
        let emptyAlone = try adds(home: empty, directory: directory, runs: runs)
        let emptyServed = try withAgent(executable, home: empty, directory: directory, environment) {
            try adds(home: empty, directory: directory, runs: runs)
        }
        let (grownServed, show) = try withAgent(executable, home: home, directory: directory, environment) {
            let add = try adds(home: home, directory: directory, runs: runs)
            var show = Sample()
            for _ in 0..<runs {
                let child = try ChildMeasurement.run(
                    [ChildMeasurement.executable, "show", "--json", "--home", home], captureOutput: false,
                    scratch: directory)
                guard child.exitStatus == 0 else {
                    throw PlaitError.usage("plait show --json through the agent exited \(child.exitStatus)")
                }
                show.add(child.seconds)
            }
            return (add, show)
        }
        results["add_empty_home_ms"] = emptyAlone.json
        results["add_empty_home_agent_ms"] = emptyServed.json
        results["add_agent_ms"] = grownServed.json
        results["add_agent_ratio_to_empty"] = grownServed.median / emptyAlone.median
        results["show_json_agent_seconds"] = show.json
        log("  through a running agent (its Unix socket), each a process:")
        log("    `plait add` on an empty home, no agent: \(emptyAlone.text("%.1f")) ms; with an agent: "
            + "\(emptyServed.text("%.1f")) ms")
        log("    `plait add` on the home of \(items) items with an agent: \(grownServed.text("%.1f")) ms, "
            + String(format: "%.2f× the empty home without one (medians; goal ≤ 1.2×)",
                grownServed.median / emptyAlone.median))
        log("    `plait show --json` there with an agent (output to /dev/null): \(show.text("%.3f")) s "
            + "(goal ≤ 0.3 s)")
        return results
    }

    /// `plait add` on `home`, `runs` times, in milliseconds.
    static func adds(home: String, directory: String, runs: Int) throws -> Sample {
        var add = Sample()
        for run in 0..<runs {
            let child = try ChildMeasurement.run(
                [ChildMeasurement.executable, "add", "--home", home, "List 1", "agent bench add \(run)"],
                captureOutput: false, scratch: directory)
            guard child.exitStatus == 0 else { throw PlaitError.usage("plait add exited \(child.exitStatus)") }
            add.add(child.seconds * 1000)
        }
        return add
    }

    /// Runs `body` while a `plait agent` process serves `home` (its Unix socket in place); stops it by its PID.
    static func withAgent<T>(
        _ executable: String, home: String, directory: String, _ environment: [String: String],
        _ body: () throws -> T
    ) throws -> T {
        let agent = try AgentProcess(
            executable, home: home, log: directory + "/agent-bench-\(UUID().uuidString).log", peer: nil, environment)
        defer { agent.stop() }
        try agent.awaitLine(containing: "local API for plait commands on", seconds: 60)
        return try body()
    }
}
