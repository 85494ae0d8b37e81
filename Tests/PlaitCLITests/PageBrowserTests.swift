import Foundation
import PlaitNetnsSupport
import PlaitAPI
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The Chromium this machine has, if any: the browser binary itself where the distribution puts it (Debian's
/// /usr/bin/chromium is a shell script that execs it; starting the binary directly means the PID a test holds is
/// the browser's). `PLAIT_CHROMIUM` overrides the search.
enum Chromium {
    static let path: String? = locate()

    static func locate() -> String? {
        let environment = ProcessInfo.processInfo.environment
        if let explicit = environment["PLAIT_CHROMIUM"], !explicit.isEmpty { return explicit }
        let known = [
            "/usr/lib/chromium/chromium", "/usr/lib/chromium-browser/chromium-browser", "/opt/google/chrome/chrome",
        ]
        if let found = known.first(where: PlaitExecutable.isExecutableFile) { return found }
        let directories = (environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").map(String.init)
        for name in ["chromium", "chromium-browser", "google-chrome"] {
            if let found = directories.map({ $0 + "/" + name }).first(where: PlaitExecutable.isExecutableFile) {
                return found
            }
        }
        return nil
    }

    static let absent =
        "Chromium is not installed (scripts/install-deps installs it from apt; or set PLAIT_CHROMIUM): "
        + "skipping the page's headless-browser test"
}

/// A Python that has the CDP client the driver uses (websocket-client): the virtual environment
/// scripts/install-deps makes, or `PLAIT_BROWSER_PYTHON`, or a `python3` on PATH that has it.
enum DriverPython {
    static func locate() throws -> String {
        let environment = ProcessInfo.processInfo.environment
        var candidates: [String] = []
        if let explicit = environment["PLAIT_BROWSER_PYTHON"], !explicit.isEmpty { candidates.append(explicit) }
        candidates.append((environment["PLAIT_BROWSER_VENV"] ?? "/opt/plait/browser-venv") + "/bin/python3")
        candidates += (environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":").map { $0 + "/python3" }
        for candidate in candidates where PlaitExecutable.isExecutableFile(candidate) {
            if try ChildProcess.run(candidate, ["-c", "import websocket"]).succeeded { return candidate }
        }
        throw CLITestFailure(
            "Chromium is here but no Python with websocket-client (the driver's CDP client): run "
                + "scripts/install-deps, or set PLAIT_BROWSER_PYTHON to a python3 that can `import websocket`; "
                + "looked at \(candidates)")
    }
}

/// A headless Chromium started by a test, with its own profile in the sandbox, DevTools on a free loopback port,
/// and every host name but 127.0.0.1 unresolvable (nothing leaves the machine). Stopped by its PID, always.
/// `launcher` runs it through a command that execs it in place (`ip netns exec NS`: in a test's namespace).
final class HeadlessChromium {
    let process: ChildProcess
    let profile: String
    let logPath: String
    private(set) var devtoolsPort = 0

    init(sandbox: Sandbox, executable: String, launcher: [String] = []) throws {
        profile = sandbox.root + "/chromium-profile"
        logPath = sandbox.root + "/chromium.log"
        try FileManager.default.createDirectory(atPath: profile, withIntermediateDirectories: true)
        let arguments = launcher.dropFirst() + (launcher.isEmpty ? [] : [executable]) + [
            "--headless=new", "--remote-debugging-port=0", "--remote-debugging-address=127.0.0.1",
            "--user-data-dir=" + profile,
            // As root (CI containers) Chromium's sandbox cannot start; the browser only ever loads our own page.
            "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-extensions", "--disable-default-apps",
            "--no-proxy-server", "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
            "about:blank",
        ]
        // The sandbox's HOME and XDG directories: nothing of the machine's own browser profile is read.
        process = try ChildProcess(
            launcher.first ?? executable, Array(arguments), environment: sandbox.baseEnvironment, stderr: logPath)
        // With port 0 the browser writes the port it bound to DevToolsActivePort in its profile.
        var port = 0
        let ready = eventually(30) {
            let text = (try? String(contentsOfFile: profile + "/DevToolsActivePort", encoding: .utf8)) ?? ""
            port = Int(text.split(separator: "\n").first ?? "") ?? 0
            return port > 0 || !process.isRunning
        }
        guard ready, port > 0 else {
            stop()
            throw CLITestFailure("Chromium did not open its DevTools port within 30 s: \(log)")
        }
        devtoolsPort = port
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// SIGTERM, then SIGKILL after 10 s. Its helper processes (renderer, zygote) exit with it.
    func stop() {
        process.stop(grace: 10)
    }
}

/// The page in a real headless browser against two real agents syncing over TLS on loopback.
@Suite(.serialized) struct PageBrowserTests {
    static let listTitle = "Groceries"
    // What a hostile peer could put in the data. The driver checks that each shows as exactly this text, that no
    // element was made from it, and that `window.__plaitPwned` (set by the markup if it ever ran) stays undefined.
    static let peerName = #"<img src=x onerror="window.__plaitPwned='name'">phone"#
    static let peerItem = #"<img src=x onerror="window.__plaitPwned='peer item'">from the phone"#
    static let pageItems = [
        "milk, added on the page",
        "<script>window.__plaitPwned='script'</script>",
        #"<img src=x onerror="window.__plaitPwned='img'">"#,
    ]
    static let doneItem = "milk, added on the page"
    static let liveItem = "bread, added on the phone while the page is open"
    /// How long the page stays open and idle at the end while the agent's CPU time is measured.
    static let idleSeconds = 5.0

    @Test(.enabled(if: Chromium.path != nil, Comment(rawValue: Chromium.absent)))
    func thePageSignsInShowsListsAndDevicesAddsItemsThatReachAPeerAndShowsMarkupAsText() throws {
        let chromium = try #require(Chromium.path)
        let python = try DriverPython.locate()
        try withSandbox { sandbox in
            var homes: [(home: String, id: String)] = []
            for name in ["laptop", Self.peerName] {
                let home = sandbox.root + "/home-\(homes.count)"
                try sandbox.ok(["init", "--name", name, "--home", home])
                homes.append((home, try sandbox.ok(["id", "--home", home]).lines.last!))
            }
            let (laptop, phone) = (homes[0], homes[1])
            // The phone calls itself by the markup name; the laptop's /api/peers shows the name stored at pairing,
            // never one from a Hello (README: a peer's name), so the same name is given at pairing too.
            try sandbox.ok(["pair", "--trust", phone.id, "--name", Self.peerName, "--home", laptop.home])
            try sandbox.ok(["pair", "--trust", laptop.id, "--home", phone.home])
            try sandbox.ok(["list", "add", Self.listTitle, "--home", laptop.home])

            // The phone serves no page here (its API off); the laptop's on a free loopback port.
            let phoneAgent = try RunningAgent(sandbox: sandbox, home: phone.home, extra: ["--api-listen", ""])
            defer { #expect(phoneAgent.stop() == 0, "the phone's agent exits cleanly: \(phoneAgent.log)") }
            let laptopAgent = try RunningAgent(
                sandbox: sandbox, home: laptop.home,
                extra: ["--peer", phoneAgent.address, "--api-listen", "127.0.0.1:0"])
            defer { #expect(laptopAgent.stop() == 0, "the laptop's agent exits cleanly: \(laptopAgent.log)") }
            let listening = eventually {
                LoopbackClient(addressFileOf: laptop.home) != nil || !laptopAgent.process.isRunning
            }
            try #require(listening && laptopAgent.process.isRunning, "the laptop's API: \(laptopAgent.log)")

            // The phone adds an item with markup to the laptop's list; it arrives at the laptop before the page opens.
            let listArrived = try eventually { try hasList(sandbox, phone.home) }
            try #require(listArrived, "the list reached the phone: \(phoneAgent.log)")
            try sandbox.ok(["add", Self.listTitle, Self.peerItem, "--home", phone.home])
            let arrived = try eventually { try texts(sandbox, laptop.home).pending.contains(Self.peerItem) }
            try #require(arrived, "the phone's item reached the laptop: \(laptopAgent.log)")

            let gui = try sandbox.ok(["gui", "--home", laptop.home])
            let loginURL = try #require(
                gui.lines.first { $0.hasPrefix("http://127.0.0.1:") && $0.contains("?code=") }, "\(gui)")

            let browser = try HeadlessChromium(sandbox: sandbox, executable: chromium)
            defer { browser.stop() }
            let options: [String: Any] = [
                "devtools_port": browser.devtoolsPort, "login_url": loginURL, "list": Self.listTitle,
                "peer_item": Self.peerItem, "peer_name": Self.peerName, "page_items": Self.pageItems,
                "done_item": Self.doneItem, "live_item": Self.liveItem, "idle_seconds": Self.idleSeconds,
            ]
            let driver = try PythonDriver(
                sandbox: sandbox, python: python, options: String(decoding: try JSONSerialization.data(
                    withJSONObject: options), as: UTF8.self))
            defer { driver.stop() }

            // What the page added reaches the second device's agent (done included), read there with the CLI.
            let expectedPending = Set(Self.pageItems.filter { $0 != Self.doneItem } + [Self.peerItem])
            var seen: (pending: [String], completed: [String]) = ([], [])
            let reached = try eventually(60) {
                seen = try texts(sandbox, phone.home)
                return Set(seen.pending) == expectedPending && seen.completed == [Self.doneItem] || !driver.isRunning
            }
            #expect(
                reached && Set(seen.pending) == expectedPending && seen.completed == [Self.doneItem],
                "the phone holds \(seen), not the page's items; driver: \(driver.output)")

            // Then the phone adds one more while the page is open: the page shows it without a reload.
            try sandbox.ok(["add", Self.listTitle, Self.liveItem, "--home", phone.home])

            // At the end the page stays open and idle: the laptop's agent's CPU time over that interval.
            let idle = eventually(90) { driver.stdout.contains(#"{"phase": "idle"}"#) || !driver.isRunning }
            let cpuBefore = try CPUTime(pid: laptopAgent.process.pid)
            let status = driver.wait(seconds: 120)
            let cpuAfter = try CPUTime(pid: laptopAgent.process.pid)
            try #require(
                idle && status == 0,
                "the page driver failed (exit \(status)): \(driver.output)\nbrowser: \(browser.log)")
            let last = driver.stdout.split(separator: "\n").last.map(String.init) ?? ""
            let figures = try #require(
                try JSONSerialization.jsonObject(with: Data(last.utf8)) as? [String: Any], "\(driver.output)")
            let busy = String(format: "%.2f", cpuAfter.percent(since: cpuBefore))
            let interval = String(format: "%.1f", cpuAfter.wall - cpuBefore.wall)
            print("page on loopback (Chromium headless, debug build): \(figures); agent CPU with the page open "
                + "and idle: \(busy) % of a core over \(interval) s")
            #expect(figures["login_to_lists_ms"] is NSNumber, "\(figures)")
        }
    }

    /// `show --json`'s texts of the test list on `home`.
    func texts(_ sandbox: Sandbox, _ home: String) throws -> (pending: [String], completed: [String]) {
        let object = try sandbox.ok(["show", "--json", "--home", home]).json()
        let lists = object["lists"] as? [[String: Any]] ?? []
        guard let list = lists.first(where: { $0["title"] as? String == Self.listTitle }) else { return ([], []) }
        let read = { (key: String) in (list[key] as? [[String: Any]] ?? []).compactMap { $0["text"] as? String } }
        return (read("pending"), read("completed"))
    }

    func hasList(_ sandbox: Sandbox, _ home: String) throws -> Bool {
        let object = try sandbox.ok(["show", "--json", "--home", home]).json()
        return (object["lists"] as? [[String: Any]] ?? []).contains { $0["title"] as? String == Self.listTitle }
    }
}

/// A process's CPU time (user + system, from /proc/PID/stat) at a moment.
struct CPUTime {
    let seconds: Double
    let wall: Double

    init(pid: Int32) throws {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        // The fields after the command name (in parentheses, which may hold spaces): state is field 3.
        guard let close = stat.lastIndex(of: ")") else { throw CLITestFailure("unreadable /proc/\(pid)/stat") }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else {
            throw CLITestFailure("unreadable /proc/\(pid)/stat: \(stat)")
        }
        seconds = (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
        wall = Date().timeIntervalSinceReferenceDate
    }

    /// The share of one core used between `earlier` and this.
    func percent(since earlier: CPUTime) -> Double {
        (seconds - earlier.seconds) / max(wall - earlier.wall, 0.001) * 100
    }
}

/// A driver in tests/browser/ (page_driver.py unless `script` says otherwise) run by the test's Python, its output in
/// files; stopped by its PID. `launcher` as for HeadlessChromium.
final class PythonDriver {
    let process: ChildProcess
    let outPath: String
    let errPath: String

    init(
        sandbox: Sandbox, python: String, script: String = "page_driver.py", options: String, launcher: [String] = []
    ) throws {
        outPath = sandbox.root + "/driver.out"
        errPath = sandbox.root + "/driver.err"
        // -B: no __pycache__ written into the checkout.
        let arguments =
            launcher.dropFirst() + (launcher.isEmpty ? [] : [python])
            + ["-B", Repository.root + "/tests/browser/" + script, options]
        process = try ChildProcess(
            launcher.first ?? python, Array(arguments),
            environment: ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin", "NO_PROXY": "*"],
            stdout: outPath, stderr: errPath)
    }

    var isRunning: Bool { process.isRunning }
    var stdout: String { (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? "" }
    var stderr: String { (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? "" }
    var output: String { "stdout: \(stdout)\nstderr: \(stderr)" }

    /// Waits for the driver to exit; kills it after `seconds`. Its exit status (-1 if it had to be killed).
    func wait(seconds: Double) -> Int32 {
        guard process.wait(seconds: seconds) != nil else {
            stop()
            return -1
        }
        return process.terminationStatus
    }

    func stop() {
        process.send(SIGKILL)
        process.waitUntilExit()
    }
}
