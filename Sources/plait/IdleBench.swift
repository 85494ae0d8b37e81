import Foundation
import PlaitNetnsSupport
import PlaitSync

#if canImport(Glibc)
import Glibc
#endif

/// The idle benchmark (issue 9: "< 0.3 % of one core each"): two paired devices whose agents run as processes of
/// their own, connected on loopback and left alone for `seconds`; each one's CPU time over that window, from
/// `/proc/PID/stat` (utime + stime), as a percentage of one core.
///
/// Everything goes through the `plait` executable, as a user would run it (init, id, pair --trust, agent), so
/// another build can be measured the same way: `PLAIT_BENCH_AGENT=/path/to/plait` runs that one instead of this
/// one (the figure before a change, say).
enum IdleBench {
    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// Measures `runs` times, each with two fresh homes under `directory`, for the JSON report: the window
    /// (`idle_seconds`), and per run the busier of the two agents (`idle_cpu_percent`, % of one core: the goal is
    /// for each) and both (`idle_cpu_percent_each`).
    static func measure(directory: String, seconds: Int, runs: Int, log: (String) -> Void) throws -> [String: Any] {
        var busier = Sample()
        var each = Sample()
        for run in 0..<runs {
            let (a, b) = try self.run(directory: directory + "/idle-\(run)", seconds: seconds)
            busier.add(max(a, b))
            each.add(a)
            each.add(b)
            try? FileManager.default.removeItem(atPath: directory + "/idle-\(run)")
        }
        log("idle agents, two paired and connected on loopback, \(seconds) s: \(busier.text("%.2f")) % of one core "
            + "(the busier of the two, per run; goal < 0.3 % each)")
        return ["idle_seconds": seconds, "idle_cpu_percent": busier.json, "idle_cpu_percent_each": each.json]
    }

    /// One measurement: the CPU of each of the two agents over `seconds`, in % of one core.
    static func run(directory: String, seconds: Int) throws -> (Double, Double) {
        let executable = try agentExecutable()
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let environment = isolatedEnvironment(directory: directory, config: directory + "/config")
        let homes = [directory + "/idle-a", directory + "/idle-b"]
        var ids: [String] = []
        for (index, home) in homes.enumerated() {
            let name = index == 0 ? "idle-a" : "idle-b"
            _ = try runToEnd(executable, ["init", "--home", home, "--name", name], environment)
            let lines = try runToEnd(executable, ["id", "--home", home], environment).split(separator: "\n")
            guard let id = lines.last.map(String.init) else { throw Failure("`plait id` printed nothing") }
            ids.append(id)
        }
        _ = try runToEnd(executable, ["pair", "--trust", ids[1], "--home", homes[0]], environment)
        _ = try runToEnd(executable, ["pair", "--trust", ids[0], "--home", homes[1]], environment)

        let b = try AgentProcess(executable, home: homes[1], log: directory + "/agent-b.log", peer: nil, environment)
        defer { b.stop() }
        let port = try b.awaitListening()
        let a = try AgentProcess(executable, home: homes[0], log: directory + "/agent-a.log", peer: port, environment)
        defer { a.stop() }
        _ = try a.awaitListening()
        for agent in [a, b] { try agent.awaitLine(containing: "connected to", seconds: 30) }
        // The greeting exchange takes milliseconds; the window starts well after it.
        usleep(1_000_000)

        let ticksPerSecond = Double(sysconf(Int32(_SC_CLK_TCK)))
        let start = (Date(), try a.cpuTicks(), try b.cpuTicks())
        usleep(useconds_t(seconds) * 1_000_000)
        let end = (Date(), try a.cpuTicks(), try b.cpuTicks())
        let wall = end.0.timeIntervalSince(start.0)
        for agent in [a, b] where agent.logText.contains("ended") {
            throw Failure("a session ended during the idle window; see \(agent.logPath)")
        }
        let percentA = Double(end.1 - start.1) / ticksPerSecond / wall * 100
        let percentB = Double(end.2 - start.2) / ticksPerSecond / wall * 100
        return (percentA, percentB)
    }

    /// `PLAIT_BENCH_AGENT`, else this very executable.
    /// This process's environment for the `plait` processes a benchmark starts under `directory`: no user config
    /// (`config` is an empty config home), no avahi-daemon (an unreachable system bus), no `PLAIT_HOME`.
    static func isolatedEnvironment(directory: String, config: String) -> [String: String] {
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_CONFIG_HOME"] = config
        environment["DBUS_SYSTEM_BUS_ADDRESS"] = "unix:path=\(directory)/no-system-bus"
        environment["PLAIT_HOME"] = nil
        return environment
    }

    static func agentExecutable() throws -> String {
        if let explicit = ProcessInfo.processInfo.environment["PLAIT_BENCH_AGENT"], !explicit.isEmpty {
            return explicit
        }
        let own = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? Bundle.main.executablePath
        guard let own else { throw Failure("cannot find this executable's path to start the agents") }
        return own
    }

    /// Runs `executable arguments` to completion; its standard output, or a failure naming its standard error.
    static func runToEnd(
        _ executable: String, _ arguments: [String], _ environment: [String: String], input: String? = nil
    ) throws -> String {
        let run = try ChildProcess.run(executable, arguments, environment: environment, input: input)
        guard run.succeeded else {
            throw Failure("`plait \(arguments.joined(separator: " "))` failed: \(run.errors)")
        }
        return run.output
    }
}

/// One `plait agent` process, its log in a file; stopped by its PID.
final class AgentProcess {
    let process: ChildProcess
    let logPath: String

    init(
        _ executable: String, home: String, log: String, peer: UInt16?, _ environment: [String: String],
        extra: [String] = []
    ) throws {
        logPath = log
        process = try ChildProcess(
            executable,
            ["agent", "--home", home, "--listen", "127.0.0.1:0", "--no-discovery"]
                + (peer.map { ["--peer", "127.0.0.1:\($0)"] } ?? []) + extra,
            environment: environment, stderr: log)
    }

    var logText: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Waits (polling its log) until a line contains `text`; that line.
    @discardableResult
    func awaitLine(containing text: String, seconds: Double) throws -> String {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let line = logText.split(separator: "\n").first(where: { $0.contains(text) }) { return String(line) }
            guard process.isRunning else { throw IdleBench.Failure("the agent exited: \(logText)") }
            usleep(10_000)
        }
        throw IdleBench.Failure("the agent did not log \"\(text)\" within \(Int(seconds)) s: \(logText)")
    }

    /// The port it listens on, from its "listening on HOST:PORT" line.
    func awaitListening() throws -> UInt16 {
        let line = try awaitLine(containing: "listening on 127.0.0.1:", seconds: 30)
        guard let rest = line.split(separator: "listening on 127.0.0.1:").last,
            let port = UInt16(rest.prefix { $0.isNumber })
        else { throw IdleBench.Failure("no port in \"\(line)\"") }
        return port
    }

    /// User plus system CPU time so far, in clock ticks (fields 14 and 15 of /proc/PID/stat).
    func cpuTicks() throws -> Int {
        let path = "/proc/\(process.pid)/stat"
        guard let text = try? String(contentsOfFile: path, encoding: .utf8),
            let close = text.lastIndex(of: ")")
        else { throw IdleBench.Failure("cannot read \(path)") }
        // After "pid (comm)" come the fields from the third (state) on: utime and stime are the 12th and 13th.
        let fields = text[text.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Int(fields[11]), let system = Int(fields[12]) else {
            throw IdleBench.Failure("cannot parse \(path)")
        }
        return user + system
    }

    /// SIGTERM, then SIGKILL if it has not exited within 10 s.
    func stop() { process.stop(grace: 10) }
}
