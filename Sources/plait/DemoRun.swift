import Foundation
import PlaitCore
import PlaitNetnsSupport
import PlaitStore
import PlaitSync
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The signal that interrupted `plait demo` (SIGINT, SIGTERM or SIGHUP), or 0.
let demoInterruption = Atomic<Int32>(0)

/// `plait demo`'s signal handler. A file-scope function, not a closure in main-actor code (DESIGN §9: such a
/// closure called from another context crashes); it only records the signal, which is async-signal-safe,
/// and the demo's loops (none sleeps longer than 100 ms) see it and stop everything the demo started.
func recordDemoInterruption(_ number: Int32) {
    demoInterruption.store(number, ordering: .relaxed)
}

/// What can stop `plait demo`, each said in one sentence with what to do.
enum DemoError: Error, CustomStringConvertible {
    /// `--mode netns` where network namespaces cannot be built.
    case netnsUnavailable(reason: String)
    /// The demo cannot find its own executable to start the agents with.
    case executableNotFound
    /// Setting up the temporary devices failed.
    case setUp(String)
    /// An agent exited, or did not say it listens, before the edits began.
    case agentFailed(device: String, problem: String, log: String)
    /// An edit failed on a device.
    case edit(device: String, problem: String)
    /// A signal asked the demo to stop.
    case interrupted(signal: Int32)

    var description: String {
        switch self {
        case let .netnsUnavailable(reason):
            return "network namespaces are not available here (\(reason)); run as root with iproute2, dbus and "
                + "avahi-daemon installed, or use --mode loopback."
        case .executableNotFound:
            return "cannot find the plait executable to start the agents with; run plait by its path."
        case let .setUp(problem):
            return "cannot set up the demo devices: \(problem)."
        case let .agentFailed(device, problem, log):
            return "the agent of \(device) \(problem); its log:\n\(log)"
        case let .edit(device, problem):
            return "an edit on \(device) failed: \(problem)."
        case let .interrupted(signal):
            return "interrupted (signal \(signal)); stopped everything the demo started."
        }
    }
}

/// How the demo's devices reach each other.
enum DemoNetwork: String {
    /// Each device in a network namespace of its own with its own avahi-daemon, on a bridge.
    case netns
    /// Every device on 127.0.0.1, each agent on its own port, peers given by address.
    case loopback
}

/// One run of `plait demo`: temporary devices, their agents, the concurrent edits, the watching, and
/// stopping all of it. `stop()` is idempotent and runs whatever happened before it.
final class DemoRun {
    struct Settings {
        var devices: Int
        var edits: Int
        var network: DemoNetwork
        /// In netns mode: give agents each other's addresses rather than relying on mDNS discovery.
        var staticPeers: Bool
        var seed: UInt64
        var interval: Duration
        var timeout: Duration
        var keep: Bool
    }

    /// One temporary device.
    struct Device {
        var name: String
        /// Where its agent listens, as shown and as given to peers.
        var address: String
        /// The home the demo writes through (its own `Replica`, in this process).
        var home: Home
        /// A second view of the same store, read by the table.
        var view: Home
        var agent: HostProcess?
        var agentExit: Int32?
    }

    static let names = ["laptop", "desktop", "phone", "tablet", "nas", "pi", "kitchen", "tv"]
    /// The agents' port in netns mode (the default `agent.listen` port: each host has its own address).
    static let netnsPort = 7400

    let settings: Settings
    let executable: String
    let display: DemoDisplay
    let started = ContinuousClock.now
    private(set) var directory: String?
    private(set) var devices: [Device] = []
    private(set) var lan: NetnsLAN?
    private(set) var daemonPIDs: [Int32] = []
    private var editors: DemoEditors?
    private var stopped = false

    init(settings: Settings, executable: String, display: DemoDisplay) {
        self.settings = settings
        self.executable = executable
        self.display = display
    }

    deinit {
        stop()
    }

    var configPath: String? { directory.map { $0 + "/plait.toml" } }

    static func checkInterrupted() throws {
        let number = demoInterruption.load(ordering: .relaxed)
        if number != 0 { throw DemoError.interrupted(signal: number) }
    }

    // MARK: Setting up

    /// A temporary directory, a config of the demo's own (the user's is never read: its peers must not be
    /// dialled), the homes, and every two devices paired by Device ID; in netns mode the LAN first.
    func setUp() throws {
        var template = Array((FileManager.default.temporaryDirectory.path + "/plait-demo-XXXXXX").utf8CString)
        guard let created = mkdtemp(&template) else {
            throw DemoError.setUp("cannot create a temporary directory (\(String(cString: strerror(errno))))")
        }
        let directory = String(cString: created)
        self.directory = directory
        let configText =
            settings.network == .loopback
            ? """
            # plait demo, loopback mode: no mDNS, so no agent touches this machine's avahi-daemon or real
            # interfaces; peers are found by the addresses given at pairing and with --peer.
            [discovery]
            enabled = false

            """
            : """
            # plait demo, netns mode: defaults; each agent runs in a network namespace with its own avahi-daemon.

            """
        try write(configText, to: configPath!)
        let config = try Config.load(explicitPath: configPath, environment: [:]).0

        var addresses: [String]
        if settings.network == .netns {
            display.say("building a LAN of \(settings.devices) network namespaces, each with its own avahi-daemon…")
            let lan: NetnsLAN
            do {
                lan = try NetnsLAN(hosts: settings.devices)
            } catch {
                throw DemoError.setUp("building the LAN of network namespaces failed: \(error)")
            }
            self.lan = lan
            addresses = lan.hosts.map { "\($0.ipv4):\(Self.netnsPort)" }
            daemonPIDs = lan.hosts.compactMap { lan.avahiDaemon(on: $0)?.pid }
        } else {
            do {
                addresses = try LoopbackPorts.free(settings.devices).map { "127.0.0.1:\($0)" }
            } catch {
                throw DemoError.setUp("\(error)")
            }
        }
        try Self.checkInterrupted()

        for index in 0..<settings.devices {
            let name = Self.names[index]
            let path = directory + "/" + name
            let home = try Home.create(at: path, name: name, config: config)
            let view = try Home.open(at: path, config: config)
            devices.append(Device(name: name, address: addresses[index], home: home, view: view))
        }
        // Headless pairing, every two devices, as `plait pair --trust ID [--address]` does. In loopback mode
        // with the address, so the agents dial each other as static peers; in netns mode without, so that
        // mDNS discovery (or --static-peers) is what brings them together.
        for device in devices {
            for other in devices where other.name != device.name {
                _ = try device.home.trust(
                    other.home.identity.deviceID.description,
                    address: settings.network == .loopback ? other.address : nil, name: other.name)
            }
        }
    }

    private func write(_ text: String, to path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8)) else {
            throw DemoError.setUp("cannot write \(path)")
        }
    }

    // MARK: Agents

    /// The arguments of device `index`'s agent.
    func agentArguments(_ index: Int) -> [String] {
        let device = devices[index]
        var arguments = ["agent", "--home", device.home.path, "--config", configPath!]
        let others = devices.indices.filter { $0 != index }.map { devices[$0].address }
        switch settings.network {
        case .loopback:
            // Never on this machine's avahi-daemon and real interfaces: discovery is off (the config says so
            // too), the peers are given.
            arguments += ["--listen", device.address, "--no-discovery"] + others.flatMap { ["--peer", $0] }
        case .netns:
            arguments += ["--listen", "0.0.0.0:\(Self.netnsPort)"]
            if settings.staticPeers { arguments += others.flatMap { ["--peer", $0] } }
        }
        return arguments
    }

    /// `setpriv --pdeathsig TERM` where util-linux has it (it execs in place: the PID stays the agent's): an
    /// agent then gets SIGTERM if the demo dies without stopping it (SIGKILL, a crash).
    static let parentDeathSignal: [String] = NetnsLAN.findExecutable("setpriv").map { [$0, "--pdeathsig", "TERM"] } ?? []

    /// Starts every device's agent as a `plait agent` process of this very executable and waits until each
    /// has logged that it listens.
    func startAgents() throws {
        for index in devices.indices {
            let command = Self.parentDeathSignal + [executable] + agentArguments(index)
            let process: HostProcess
            do {
                if let lan {
                    process = try lan.spawn(command, in: lan.hosts[index])
                } else {
                    var environment = ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"]
                    environment["LANG"] = ProcessInfo.processInfo.environment["LANG"]
                    process = try HostProcess(
                        label: "\(devices[index].name): plait agent", executable: command[0],
                        arguments: Array(command.dropFirst()), environment: environment)
                }
            } catch {
                throw DemoError.agentFailed(device: devices[index].name, problem: "could not start", log: "\(error)")
            }
            devices[index].agent = process
        }
        for device in devices {
            try waitUntilListening(device)
        }
    }

    private func waitUntilListening(_ device: Device) throws {
        guard let agent = device.agent else { return }
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            try Self.checkInterrupted()
            do {
                _ = try agent.waitForLine(on: .stderr, timeout: .milliseconds(100)) { $0.contains("listening on") }
                return
            } catch let error as NetnsError {
                if case .exited(_, let status, _) = error {
                    throw DemoError.agentFailed(
                        device: device.name, problem: "exited (status \(status)) before listening",
                        log: Self.tail(agent, lines: 20))
                }
                if ContinuousClock.now > deadline {
                    throw DemoError.agentFailed(
                        device: device.name, problem: "did not say it listens within 30 s",
                        log: Self.tail(agent, lines: 20))
                }
            }
        }
    }

    /// The last lines an agent logged.
    static func tail(_ agent: HostProcess, lines count: Int) -> String {
        agent.lines(.stderr).suffix(count).map { "  " + $0 }.joined(separator: "\n")
    }

    // MARK: Editing and watching

    /// What the edits and the watching came to.
    struct Outcome {
        var converged: Bool
        /// From the start of the run (set-up included) to the first edit, to the last edit committed, and to
        /// convergence.
        var editingStarted: Duration
        var lastEdit: Duration
        var convergedAt: Duration?
        var made: [Int]
        var kinds: [[String: Int]]
        var readings: [DemoReading]
        /// What the table showed last.
        var rows: [DemoTable.Row]

        var editing: Duration { lastEdit - editingStarted }
        var convergence: Duration? { convergedAt.map { $0 - lastEdit } }
    }

    /// Starts one editing thread per device and watches the stores until, after the last edit, every
    /// device holds the same changes and the same state, or `timeout` passes.
    func editAndWatch() throws -> Outcome {
        let editors = DemoEditors(
            homes: devices.map(\.home), seed: settings.seed, edits: settings.edits, interval: settings.interval)
        self.editors = editors
        let editingStart = ContinuousClock.now
        let editingStarted = editingStart - started
        editors.start()
        var rows = devices.map { DemoTable.Row(name: $0.name, address: $0.address, reading: nil) }
        var lastDraw: ContinuousClock.Instant?
        while true {
            try Self.checkInterrupted()
            if let failure = editors.failure { throw DemoError.edit(device: failure.device, problem: failure.problem) }
            let now = ContinuousClock.now
            let total = settings.edits * devices.count
            if let lastEdit = editors.lastEditIfDone {
                // Cheap first: the summaries. Then the states, read after the summaries, so a state is never
                // older than the summary it is compared with.
                let summaries = try devices.map { try $0.view.store.summary() }
                if Set(summaries).count == 1 {
                    let readings = try devices.map { try read($0) }
                    rows = zip(rows, readings).map { DemoTable.Row(name: $0.name, address: $0.address, reading: $1) }
                    if Set(readings.map(\.digest)).count == 1 {
                        let outcome = Outcome(
                            converged: true, editingStarted: editingStarted, lastEdit: lastEdit - started,
                            convergedAt: now - started, made: editors.made, kinds: editors.kinds,
                            readings: readings, rows: rows)
                        display.show(rows, status: status(outcome), elapsed: (now - editingStart).seconds, force: true)
                        return outcome
                    }
                }
                if now - lastEdit > settings.timeout {
                    let readings = try devices.map { try read($0) }
                    rows = zip(rows, readings).map { DemoTable.Row(name: $0.name, address: $0.address, reading: $1) }
                    let outcome = Outcome(
                        converged: false, editingStarted: editingStarted, lastEdit: lastEdit - started,
                        convergedAt: nil, made: editors.made, kinds: editors.kinds, readings: readings, rows: rows)
                    display.show(rows, status: status(outcome), elapsed: (now - editingStart).seconds, force: true)
                    return outcome
                }
            }
            if lastDraw == nil || now - lastDraw! >= .milliseconds(100) {
                lastDraw = now
                rows = try zip(rows, devices).map { row, device in
                    DemoTable.Row(name: row.name, address: row.address, reading: try read(device))
                }
                let made = editors.made.reduce(0, +)
                let line: String
                if let lastEdit = editors.lastEditIfDone {
                    line = String(
                        format: "all %d edits made in %.2f s; converging for %.2f s", total,
                        (lastEdit - editingStart).seconds, (now - lastEdit).seconds)
                } else {
                    line = String(format: "editing: %d of %d edits, %.2f s", made, total, (now - editingStart).seconds)
                }
                display.show(rows, status: line, elapsed: (now - editingStart).seconds)
            }
            // Fine-grained after the last edit: the convergence time is measured to within a few milliseconds.
            Thread.sleep(forTimeInterval: editors.lastEditIfDone == nil ? 0.02 : 0.005)
        }
    }

    private func status(_ outcome: Outcome) -> String {
        if let convergence = outcome.convergence {
            return String(format: "converged in %.2f s after the last edit", convergence.seconds)
        }
        return String(format: "not converged %.0f s after the last edit", settings.timeout.seconds)
    }

    /// The last reading of each device and the store generation it was read at (or after).
    private var cache: [String: (generation: Int64, reading: DemoReading)] = [:]

    /// A device's summary and digest. The store's generation is read first: when it has not moved since
    /// the last reading nothing was written, and the digest (a hash of the whole state) is not recomputed.
    private func read(_ device: Device) throws -> DemoReading {
        let generation = try device.view.store.generation()
        if let cached = cache[device.name], cached.generation == generation { return cached.reading }
        let summary = try device.view.store.summary()
        try device.view.replica.refresh()
        let reading = DemoReading(summary: summary, digest: device.view.replica.digest)
        cache[device.name] = (generation, reading)
        return reading
    }

    /// Whether any agent logged a connection to a peer (a hint when nothing converged).
    var anyAgentConnected: Bool {
        devices.contains { $0.agent?.lines(.stderr).contains { $0.contains("connected to") } ?? false }
    }

    // MARK: Stopping

    /// Stops the editing threads, every agent (SIGTERM to each PID, SIGKILL after 5 s), the LAN (its daemons
    /// and namespaces), and removes the temporary directory unless `keep` (then each agent's log is saved
    /// in its home). Idempotent.
    func stop() {
        guard !stopped else { return }
        stopped = true
        editors?.stopAndWait()
        let agents = devices.compactMap(\.agent)
        for agent in agents where agent.isRunning { kill(agent.pid, SIGTERM) }
        for index in devices.indices {
            guard let agent = devices[index].agent else { continue }
            devices[index].agentExit = agent.stop(timeout: .seconds(5))
            agent.waitForEndOfOutput(timeout: .seconds(2))
            if settings.keep {
                let log = agent.lines(.stderr).joined(separator: "\n") + "\n"
                let path = devices[index].home.path + "/agent.log"
                _ = FileManager.default.createFile(atPath: path, contents: Data(log.utf8))
            }
        }
        lan?.tearDown()
        if !settings.keep, let directory {
            // The homes close when the last reference goes; their files can go now (this process is the
            // only one left that has them open).
            try? FileManager.default.removeItem(atPath: directory)
        }
    }
}

/// The editing threads of `plait demo`, one per device, each writing through its own home: one change per
/// transaction, as a person editing would. The agents see each commit within milliseconds (they watch
/// the store's generation) and push it.
final class DemoEditors: @unchecked Sendable {
    private let homes: [Home]
    private let seed: UInt64
    private let edits: Int
    private let interval: Duration
    private let lock = NSLock()
    private let group = DispatchGroup()
    private var stopRequested = false
    private var madeCounts: [Int]
    private var kindCounts: [[String: Int]]
    private var finished = 0
    private var lastCommit: ContinuousClock.Instant?
    private var firstFailure: (device: String, problem: String)?
    /// Where the threads meet before the scripts' `meeting` edit, so those edits are truly concurrent.
    private let meeting: DemoRendezvous

    init(homes: [Home], seed: UInt64, edits: Int, interval: Duration) {
        self.homes = homes
        self.seed = seed
        self.edits = edits
        self.interval = interval
        madeCounts = Array(repeating: 0, count: homes.count)
        kindCounts = Array(repeating: [:], count: homes.count)
        meeting = DemoRendezvous(parties: homes.count)
    }

    /// Edits made so far, per device.
    var made: [Int] { lock.withLock { madeCounts } }
    /// Edits made so far by kind (`item.create`…), per device.
    var kinds: [[String: Int]] { lock.withLock { kindCounts } }
    var failure: (device: String, problem: String)? { lock.withLock { firstFailure } }

    /// When the last edit was committed, once every device has made all its edits; nil before.
    var lastEditIfDone: ContinuousClock.Instant? {
        lock.withLock { finished == homes.count && firstFailure == nil ? lastCommit : nil }
    }

    func start() {
        for (index, home) in homes.enumerated() {
            let script = DemoScript(device: index, name: home.deviceName, edits: edits, seed: seed)
            group.enter()
            let thread = Thread { [self] in
                run(index, home, script)
                group.leave()
            }
            thread.name = "plait-demo-edit-\(index + 1)"
            thread.start()
        }
    }

    private func run(_ index: Int, _ home: Home, _ initial: DemoScript) {
        var script = initial
        let pause = interval.seconds
        // A thread that stops early no longer holds the others at the meeting.
        defer { meeting.leave() }
        for number in 0..<edits {
            if number == script.meeting { meeting.arrive(while: { self.shouldContinue }) }
            if !shouldContinue { break }
            do {
                let kind = try home.replica.edit { edit -> String in
                    let change = try script.change(at: number, in: edit.state, delete: { try edit.listDelete($0) })
                    try edit.append(change)
                    return change.kind
                }
                let now = ContinuousClock.now
                lock.withLock {
                    madeCounts[index] += 1
                    kindCounts[index][kind, default: 0] += 1
                    if lastCommit.map({ now > $0 }) ?? true { lastCommit = now }
                }
            } catch {
                lock.withLock {
                    if firstFailure == nil { firstFailure = (home.deviceName, "\(error)") }
                }
                break
            }
            if pause > 0 { Thread.sleep(forTimeInterval: pause) }
        }
        lock.withLock { finished += 1 }
    }

    private var shouldContinue: Bool {
        !lock.withLock({ stopRequested }) && demoInterruption.load(ordering: .relaxed) == 0
    }

    /// Asks the threads to stop after their current edit and waits for them.
    func stopAndWait() {
        lock.withLock { stopRequested = true }
        group.wait()
    }
}

/// A meeting point for the editing threads: each `arrive` waits until every party that is still editing
/// has arrived (or `while` turns false); a thread that ends calls `leave` so nobody waits for it.
final class DemoRendezvous: @unchecked Sendable {
    private let condition = NSCondition()
    private var parties: Int
    private var arrived = 0
    private var open = false

    init(parties: Int) {
        self.parties = parties
    }

    func arrive(while going: () -> Bool) {
        condition.lock()
        defer { condition.unlock() }
        arrived += 1
        if arrived >= parties { open = true }
        condition.broadcast()
        while !open && going() {
            _ = condition.wait(until: Date().addingTimeInterval(0.05))
        }
    }

    func leave() {
        condition.lock()
        defer { condition.unlock() }
        parties -= 1
        if arrived >= parties { open = true }
        condition.broadcast()
    }
}

extension Duration {
    /// The duration in seconds, as a Double.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
