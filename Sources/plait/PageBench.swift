import Foundation
import PlaitAPI
import PlaitNetnsSupport

#if canImport(Glibc)
import Glibc
#endif

/// The page benchmark (issue 11: "the agent's idle CPU with a page open", goal < 0.5 % of a core, and "the page's
/// first load time on loopback"): one agent serving its API on loopback, a headless Chromium signed in to its
/// page, driven over the DevTools protocol by tests/browser/page_bench.py (the browser tests' CDP client).
///
/// Per run: `loads` first loads of the page, each in a fresh tab with the browser's cache disabled, timed in the
/// page's own clock from navigation start until it has drawn every list and item (the `plait-ready` mark app.js
/// sets); then the last tab stays open with its live event stream while the agent's CPU time is read from
/// /proc/PID/stat over `idleSeconds`. Skips, saying why, when Chromium or a Python with websocket-client is
/// missing. `PLAIT_BENCH_AGENT` runs another build's agent, as the idle benchmark does.
enum PageBench {
    /// Lists and items in the home the page shows.
    static let lists = 5
    static let itemsPerList = 20
    static let loadsPerRun = 10

    /// Why the benchmark cannot run here, or nil when it can.
    static func missing() -> String? {
        if chromium() == nil {
            return "Chromium is not installed (apt install chromium, or set PLAIT_CHROMIUM)"
        }
        if python() == nil {
            return "no python3 with websocket-client, the CDP client of the driver (scripts/install-deps makes "
                + "/opt/plait/browser-venv; or set PLAIT_BROWSER_PYTHON)"
        }
        return nil
    }

    static func measure(
        directory: String, driver: String, seconds: Int, runs: Int, log: (String) -> Void
    ) throws -> [String: Any] {
        if let reason = missing() {
            log("page benchmark skipped: \(reason)")
            return ["page_skipped": reason]
        }
        guard FileManager.default.fileExists(atPath: driver) else {
            throw IdleBench.Failure(
                "the page driver \(driver) does not exist: run from the repository's root or give --page-driver")
        }
        let executable = try IdleBench.agentExecutable()
        let environment = IdleBench.isolatedEnvironment(directory: directory, config: directory + "/config")
        let home = directory + "/page-home"
        _ = try IdleBench.runToEnd(executable, ["init", "--home", home, "--name", "page"], environment)
        var lines: [String] = []
        for list in 1...lists {
            lines.append("list add \"List \(list)\"")
            for item in 1...itemsPerList { lines.append("add \"List \(list)\" \"item \(item) of list \(list)\"") }
        }
        _ = try IdleBench.runToEnd(
            executable, ["batch", "--home", home], environment, input: lines.joined(separator: "\n") + "\n")

        let agent = try AgentProcess(
            executable, home: home, log: directory + "/page-agent.log", peer: nil, environment,
            extra: ["--api-listen", "127.0.0.1:0"])
        defer { agent.stop() }
        let deadline = Date().addingTimeInterval(30)
        var client = LoopbackClient(addressFileOf: home)
        while client == nil, Date() < deadline, agent.process.isRunning {
            usleep(10_000)
            client = LoopbackClient(addressFileOf: home)
        }
        guard let client else { throw IdleBench.Failure("the agent's API did not start: \(agent.logText)") }
        let gui = try IdleBench.runToEnd(executable, ["gui", "--home", home], environment)
        guard let loginURL = gui.split(separator: "\n").map(String.init).first(where: { $0.contains("?code=") })
        else { throw IdleBench.Failure("`plait gui` printed no login URL: \(gui)") }

        let browser = try BrowserProcess(chromium()!, profile: directory + "/chromium-profile", environment)
        defer { browser.stop() }
        let options: [String: Any] = [
            "devtools_port": browser.devtoolsPort, "login_url": loginURL,
            "page_url": "http://\(client.authority)/", "items": lists * itemsPerList, "loads": loadsPerRun,
            "runs": runs, "idle_seconds": seconds, "agent_pid": Int(agent.process.pid),
        ]
        let argument = String(decoding: try JSONSerialization.data(withJSONObject: options), as: UTF8.self)
        let printed = try IdleBench.runToEnd(python()!, [driver, argument], environment)
        guard let line = printed.split(separator: "\n").last,
            let result = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
            let loads = result["loads"] as? [[[Double]]], let idle = result["idle_percent"] as? [Double]
        else { throw IdleBench.Failure("the page driver printed no result: \(printed)") }

        var ready = Sample()
        var medians = Sample()
        var response = Sample()
        var domContentLoaded = Sample()
        for run in loads {
            let readies = Sample(run.map { $0[0] })
            medians.add(readies.median)
            for load in run {
                ready.add(load[0])
                response.add(load[1])
                domContentLoaded.add(load[2])
            }
        }
        log("the page, \(lists) lists of \(itemsPerList) items, first load on loopback (fresh tab, no cache), "
            + "navigation start → lists drawn: \(ready.text("%.1f")) ms over \(ready.values.count) loads "
            + "(medians per run \(medians.text("%.1f")) ms); response end \(response.text("%.1f")) ms, "
            + "DOMContentLoaded \(domContentLoaded.text("%.1f")) ms")
        log("the agent's CPU with the page open and idle, \(seconds) s: \(Sample(idle).text("%.3f")) % of one core "
            + "(per run; goal < 0.5 %)")
        return [
            "page_items": lists * itemsPerList, "page_load_ready_ms": ready.json,
            "page_load_ready_median_per_run_ms": medians.json, "page_load_response_end_ms": response.json,
            "page_load_dom_content_loaded_ms": domContentLoaded.json, "page_idle_seconds": seconds,
            "page_idle_cpu_percent": Sample(idle).json,
        ]
    }

    /// The Chromium binary (Debian's /usr/bin/chromium is a script that execs it: the PID held is the browser's).
    static func chromium() -> String? {
        let environment = ProcessInfo.processInfo.environment
        if let explicit = environment["PLAIT_CHROMIUM"], !explicit.isEmpty {
            return FileManager.default.isExecutableFile(atPath: explicit) ? explicit : nil
        }
        return ["/usr/lib/chromium/chromium", "/usr/lib/chromium-browser/chromium-browser", "/opt/google/chrome/chrome"]
            .first { FileManager.default.isExecutableFile(atPath: $0) }
    }

    /// A python3 that can `import websocket`.
    static func python() -> String? {
        let environment = ProcessInfo.processInfo.environment
        var candidates: [String] = []
        if let explicit = environment["PLAIT_BROWSER_PYTHON"], !explicit.isEmpty { candidates.append(explicit) }
        candidates.append((environment["PLAIT_BROWSER_VENV"] ?? "/opt/plait/browser-venv") + "/bin/python3")
        candidates += (environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").map { $0 + "/python3" }
        for candidate in candidates where FileManager.default.isExecutableFile(atPath: candidate) {
            if (try? IdleBench.runToEnd(candidate, ["-c", "import websocket"], environment)) != nil { return candidate }
        }
        return nil
    }
}

/// A headless Chromium with its own profile, DevTools on a free loopback port, and every host name but 127.0.0.1
/// unresolvable; stopped by its PID.
final class BrowserProcess {
    let process: ChildProcess
    let devtoolsPort: Int

    init(_ executable: String, profile: String, _ environment: [String: String]) throws {
        try FileManager.default.createDirectory(atPath: profile, withIntermediateDirectories: true)
        let arguments = [
            "--headless=new", "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
            "--user-data-dir=" + profile, "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-extensions", "--disable-default-apps",
            "--no-proxy-server", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "about:blank",
        ]
        var environment = environment
        environment["HOME"] = profile
        process = try ChildProcess(executable, arguments, environment: environment)
        var port = 0
        let deadline = Date().addingTimeInterval(30)
        while port == 0, Date() < deadline, process.isRunning {
            let text = (try? String(contentsOfFile: profile + "/DevToolsActivePort", encoding: .utf8)) ?? ""
            port = Int(text.split(separator: "\n").first ?? "") ?? 0
            if port == 0 { usleep(20_000) }
        }
        devtoolsPort = port
        guard port > 0 else {
            stop()
            throw IdleBench.Failure("Chromium did not open its DevTools port within 30 s")
        }
    }

    /// SIGTERM, then SIGKILL after 10 s.
    func stop() { process.stop(grace: 10) }
}
