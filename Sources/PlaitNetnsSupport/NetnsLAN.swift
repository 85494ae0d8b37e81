import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A LAN of test hosts on one machine (DESIGN §8): each host a network namespace with one interface,
/// `eth0`, on a bridge that lives in a namespace of its own, and its own dbus-daemon and avahi-daemon
/// that see that interface only. Nothing touches the machine's real interfaces or its root namespace's
/// network.
///
///     let lan = try NetnsLAN(hosts: 2)
///     defer { lan.tearDown() }
///     let probe = try lan.spawn(["plait-discovery-probe", "--browse"], in: lan.hosts[1])
///
/// Host `i` (from 1) is `10.77.0.i/24` and `fd77::i/64`, its avahi host name `plait-h<i>.local`.
/// Namespaces are named `plaitnet-<pid>-<n>-…` (this process's PID, a counter), so parallel runs do not
/// clash; leftovers of dead runs (their PID gone) are removed when a LAN is built.
///
/// Each daemon runs as `ip netns exec H …`, so its PID is the daemon's own: dbus-daemon with a config
/// whose `<listen>` is a socket in this LAN's directory and whose policy lets anyone own names, and
/// avahi-daemon under `unshare -m` with a private tmpfs for its fixed `/run/avahi-daemon` (on a tmpfs over
/// `/run` when the directory does not exist), `--no-chroot --no-drop-root`, `allow-interfaces=eth0`,
/// `enable-wide-area=no`. A restart starts a fresh private mount, so each avahi-daemon run is independent.
/// `tearDown` (also on deinit) stops every process this LAN started, by PID, and deletes its namespaces.
public final class NetnsLAN: @unchecked Sendable {
    /// The prefix of every namespace and directory these LANs create.
    public static let prefix = "plaitnet"

    /// Why a LAN cannot be built on this machine (not root, a program missing, namespaces or mounts not
    /// permitted), in one sentence; nil when it can. Checked once, by creating and deleting a namespace.
    public static let skipReason: String? = checkSkipReason()

    /// The hosts, `hosts[0]` being `h1`.
    public let hosts: [NetnsHost]
    /// This LAN's directory (daemon configurations and D-Bus sockets), removed by `tearDown`.
    public let directory: String

    /// The namespace holding the bridge `br0` and each host's port `v<index>`.
    let bridgeNamespace: String
    private let lock = NSLock()
    private var processes: [HostProcess] = []
    private var dbusDaemons: [String: HostProcess] = [:]
    private var avahiDaemons: [String: HostProcess] = [:]
    private var namespaces: [String] = []
    private var tornDown = false

    private static let counter = Counter()

    /// What joins the hosts' interfaces.
    public enum Switching: Sendable {
        /// A kernel bridge in a namespace of its own, a veth pair to each host; `impair` uses `tc netem`.
        case kernelBridge
        /// A switch in this process, a TAP device in each host; `impair` works without netem in the kernel.
        case userspace
    }

    /// The userspace switch, when the LAN was built with one.
    let userspaceSwitch: UserspaceSwitch?

    /// Builds the bridge and `hosts` hosts (1…250), and starts a dbus-daemon and, if `avahi`, an
    /// avahi-daemon in each, waiting until each daemon is ready. Throws (after tearing down what it
    /// built) if any step fails; check `skipReason` first.
    public init(hosts count: Int, avahi: Bool = true, switching: Switching = .kernelBridge) throws {
        precondition((1...250).contains(count), "a test LAN has 1 to 250 hosts")
        signal(SIGPIPE, SIG_IGN)
        Self.removeLeftovers()
        let base = "\(Self.prefix)-\(getpid())-\(Self.counter.next())"
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(base).path
        bridgeNamespace = base + "-br"
        userspaceSwitch = switching == .userspace ? UserspaceSwitch() : nil
        hosts = (1...count).map { index in
            NetnsHost(
                index: index, namespace: "\(base)-h\(index)", ipv4: "10.77.0.\(index)", ipv6: "fd77::\(index)",
                dbusAddress: "unix:path=\(FileManager.default.temporaryDirectory.path)/\(base)/h\(index)/dbus.sock")
        }
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try buildNetwork()
            for host in hosts {
                try FileManager.default.createDirectory(
                    atPath: directory + "/" + host.name, withIntermediateDirectories: true)
                try startDBus(on: host)
                if avahi { try startAvahi(on: host) }
            }
        } catch {
            tearDown()
            throw error
        }
    }

    deinit {
        tearDown()
    }

    // MARK: - Running things in a host

    /// Starts `arguments` (a program name looked up in PATH, or a path, and its arguments) inside `host`,
    /// with `DBUS_SYSTEM_BUS_ADDRESS` naming the host's bus (so Avahi clients reach its avahi-daemon),
    /// PATH and LANG inherited, and `environment` on top. The process is stopped by `tearDown` unless
    /// the caller stops it first (`stop()`, by its PID).
    public func spawn(_ arguments: [String], in host: NetnsHost, environment: [String: String] = [:]) throws
        -> HostProcess
    {
        let process = try HostProcess(
            label: "\(host.name): \(arguments.joined(separator: " "))", executable: Self.ip,
            arguments: ["netns", "exec", host.namespace] + arguments,
            environment: Self.baseEnvironment.merging(["DBUS_SYSTEM_BUS_ADDRESS": host.dbusAddress] ) { $1 }
                .merging(environment) { $1 })
        lock.withLock { processes.append(process) }
        return process
    }

    /// Runs `arguments` inside `host` to completion (at most `timeout`) and returns its standard output;
    /// throws `command` on a non-zero exit.
    @discardableResult
    public func run(_ arguments: [String], in host: NetnsHost, timeout: Duration = .seconds(30)) throws -> String {
        let process = try spawn(arguments, in: host)
        defer { forget(process) }
        guard let status = process.waitForExit(timeout: timeout) else {
            process.stop()
            throw NetnsError.timeout(
                waitingFor: "`\(arguments.joined(separator: " "))` to finish", after: timeout,
                output: process.transcript)
        }
        process.waitForEndOfOutput(timeout: .seconds(5))
        guard status == 0 else {
            throw NetnsError.command(
                arguments: arguments, status: status, output: process.lines(.stderr).joined(separator: "\n"))
        }
        return process.lines(.stdout).joined(separator: "\n")
    }

    // MARK: - Changing the LAN

    /// Takes `host`'s interface down (`up: false`) or up again. Addresses survive (IPv6 ones too:
    /// `keep_addr_on_down` is set).
    public func setLink(of host: NetnsHost, up: Bool) throws {
        try Self.ip(["-n", host.namespace, "link", "set", "eth0", up ? "up" : "down"])
    }

    /// Stops `host`'s avahi-daemon (SIGTERM to its PID: it sends goodbye packets for what it published)
    /// and waits for it to exit.
    public func stopAvahi(on host: NetnsHost) {
        let daemon = lock.withLock { avahiDaemons.removeValue(forKey: host.namespace) }
        daemon?.stop()
        if let daemon { forget(daemon) }
    }

    /// Starts an avahi-daemon in `host` (after `stopAvahi`, or on a LAN built with `avahi: false`) and
    /// waits until it reports its startup complete.
    public func startAvahi(on host: NetnsHost) throws {
        let config = directory + "/" + host.name + "/avahi-daemon.conf"
        try Data(Self.avahiConfiguration(hostName: host.hostName).utf8).write(to: URL(fileURLWithPath: config))
        // avahi-daemon's pid file path is fixed: give each run a private tmpfs for it. Where
        // /run/avahi-daemon does not exist, a private tmpfs over /run holds it (never creating it on the
        // machine's /run).
        let script =
            "if [ -d /run/avahi-daemon ]; then mount -t tmpfs tmpfs /run/avahi-daemon; "
            + "else mount -t tmpfs tmpfs /run && mkdir /run/avahi-daemon; fi && "
            + "exec avahi-daemon -f \"$0\" --no-chroot --no-drop-root --no-rlimits"
        let daemon = try spawn(["unshare", "-m", "sh", "-c", script, config], in: host)
        lock.withLock { avahiDaemons[host.namespace] = daemon }
        _ = try daemon.waitForLine(on: .stderr, timeout: .seconds(20)) { $0.contains("Server startup complete") }
    }

    /// Stops `host`'s avahi-daemon and starts a new one.
    public func restartAvahi(on host: NetnsHost) throws {
        stopAvahi(on: host)
        try startAvahi(on: host)
    }

    /// The avahi-daemon of `host`, while one runs (for its PID and log).
    public func avahiDaemon(on host: NetnsHost) -> HostProcess? {
        lock.withLock { avahiDaemons[host.namespace] }
    }

    /// Stops every process this LAN started (SIGTERM, then SIGKILL, each by its PID, the daemons last),
    /// deletes every namespace and the directory. Idempotent; also runs on deinit.
    public func tearDown() {
        let (started, daemons, names): ([HostProcess], [HostProcess], [String]) = lock.withLock {
            guard !tornDown else { return ([], [], []) }
            tornDown = true
            defer {
                processes = []
                avahiDaemons = [:]
                dbusDaemons = [:]
                namespaces = []
            }
            return (processes, Array(avahiDaemons.values) + Array(dbusDaemons.values), namespaces)
        }
        let clients = started.filter { process in !daemons.contains { $0 === process } }
        for process in clients.reversed() { process.stop() }
        for daemon in daemons { daemon.stop() }
        userspaceSwitch?.stop()
        for name in names.reversed() { _ = try? Self.ip(["netns", "delete", name]) }
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func forget(_ process: HostProcess) {
        lock.withLock { processes.removeAll { $0 === process } }
    }

    // MARK: - Building

    private func buildNetwork() throws {
        if let userspaceSwitch {
            for host in hosts {
                try addNamespace(host.namespace)
                try Self.ip(["-n", host.namespace, "link", "set", "lo", "up"])
                _ = try userspaceSwitch.addPort(namespace: host.namespace, interface: host.interface)
                try configureInterface(of: host)
            }
            try userspaceSwitch.start()
            return
        }
        try addNamespace(bridgeNamespace)
        try Self.ip(["-n", bridgeNamespace, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0"])
        try Self.ip(["-n", bridgeNamespace, "link", "set", "br0", "up"])
        for host in hosts {
            try addNamespace(host.namespace)
            let port = "v\(host.index)"
            // Both ends are created straight in their namespaces: nothing appears in the root one.
            try Self.ip([
                "-n", bridgeNamespace, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns",
                host.namespace,
            ])
            try Self.ip(["-n", bridgeNamespace, "link", "set", port, "master", "br0", "up"])
            try Self.ip(["-n", host.namespace, "link", "set", "lo", "up"])
            try configureInterface(of: host)
        }
    }

    /// Addresses on the host's `eth0` (which exists), multicast on, up.
    private func configureInterface(of host: NetnsHost) throws {
        // Without this, taking the link down flushes the IPv6 addresses and they never come back.
        try Self.ip([
            "netns", "exec", host.namespace, "sh", "-c",
            "echo 1 > /proc/sys/net/ipv6/conf/eth0/keep_addr_on_down",
        ])
        try Self.ip(["-n", host.namespace, "addr", "add", host.ipv4 + "/24", "dev", "eth0"])
        try Self.ip(["-n", host.namespace, "addr", "add", host.ipv6 + "/64", "dev", "eth0", "nodad"])
        try Self.ip(["-n", host.namespace, "link", "set", "eth0", "multicast", "on", "up"])
    }

    private func addNamespace(_ name: String) throws {
        try Self.ip(["netns", "add", name])
        lock.withLock { namespaces.append(name) }
    }

    private func startDBus(on host: NetnsHost) throws {
        let config = directory + "/" + host.name + "/dbus.conf"
        let socket = String(host.dbusAddress.dropFirst("unix:path=".count))
        try Data(Self.dbusConfiguration(socket: socket).utf8).write(to: URL(fileURLWithPath: config))
        let daemon = try spawn(
            ["dbus-daemon", "--nofork", "--nopidfile", "--print-address", "--config-file=" + config], in: host)
        lock.withLock { dbusDaemons[host.namespace] = daemon }
        _ = try daemon.nextLine(timeout: .seconds(20)) { $0.hasPrefix("unix:") }
    }

    static func dbusConfiguration(socket: String) -> String {
        """
        <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
         "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
        <busconfig>
          <type>system</type>
          <listen>unix:path=\(socket)</listen>
          <auth>EXTERNAL</auth>
          <policy context="default">
            <allow user="*"/>
            <allow own="*"/>
            <allow send_destination="*" eavesdrop="true"/>
            <allow eavesdrop="true"/>
          </policy>
        </busconfig>

        """
    }

    static func avahiConfiguration(hostName: String) -> String {
        """
        [server]
        host-name=\(hostName)
        use-ipv4=yes
        use-ipv6=yes
        allow-interfaces=eth0
        enable-dbus=yes
        ratelimit-interval-usec=1000000
        ratelimit-burst=1000

        [wide-area]
        enable-wide-area=no

        [publish]
        publish-hinfo=no
        publish-workstation=no

        [reflector]
        enable-reflector=no

        """
    }

    // MARK: - Helpers

    /// PATH (with the sbin directories, where `ip` and the daemons live) and LANG.
    static let baseEnvironment: [String: String] = {
        let inherited = ProcessInfo.processInfo.environment
        var path = inherited["PATH"] ?? "/usr/bin:/bin"
        for directory in ["/usr/sbin", "/sbin", "/usr/bin", "/bin"]
        where !path.split(separator: ":").contains(Substring(directory)) {
            path += ":" + directory
        }
        var environment = ["PATH": path]
        if let lang = inherited["LANG"] { environment["LANG"] = lang }
        return environment
    }()

    static let ip = findExecutable("ip") ?? "/usr/sbin/ip"

    /// Runs `ip ARGUMENTS` to completion; throws `command` with its output on failure.
    @discardableResult
    static func ip(_ arguments: [String]) throws -> String {
        try runCommand([ip] + arguments)
    }

    /// Runs a short command outside any test host, to completion.
    @discardableResult
    static func runCommand(_ arguments: [String]) throws -> String {
        let process = try HostProcess(
            label: arguments.joined(separator: " "), executable: arguments[0], arguments: Array(arguments.dropFirst()),
            environment: baseEnvironment)
        guard let status = process.waitForExit(timeout: .seconds(30)) else {
            process.stop()
            throw NetnsError.timeout(
                waitingFor: "`\(arguments.joined(separator: " "))`", after: .seconds(30), output: process.transcript)
        }
        process.waitForEndOfOutput(timeout: .seconds(5))
        guard status == 0 else {
            throw NetnsError.command(
                arguments: arguments, status: status,
                output: (process.lines(.stderr) + process.lines(.stdout)).joined(separator: "\n"))
        }
        return process.lines(.stdout).joined(separator: "\n")
    }

    /// The full path of `name` in PATH or the sbin directories, or nil.
    public static func findExecutable(_ name: String) -> String? {
        for directory in (baseEnvironment["PATH"] ?? "").split(separator: ":") {
            let candidate = "\(directory)/\(name)"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    private static func checkSkipReason() -> String? {
        guard geteuid() == 0 else {
            return "test LANs need root (network namespaces, mounts); this runs as uid \(geteuid())"
        }
        let needed = [
            ("ip", "iproute2"), ("unshare", "util-linux"), ("mount", "mount"), ("sh", "dash"),
            ("dbus-daemon", "dbus"), ("avahi-daemon", "avahi-daemon"),
        ]
        for (program, package) in needed where findExecutable(program) == nil {
            return "`\(program)` is not installed (apt-get install \(package))"
        }
        let name = "\(prefix)-\(getpid())-check"
        do {
            try ip(["netns", "add", name])
        } catch {
            return "network namespaces are not permitted here: \(error)"
        }
        defer { _ = try? ip(["netns", "delete", name]) }
        do {
            try ip(["netns", "exec", name, "unshare", "-m", "sh", "-c", "mount -t tmpfs tmpfs /run"])
        } catch {
            return "private mounts in a network namespace are not permitted here: \(error)"
        }
        return nil
    }

    /// Deletes namespaces (and kills what runs in them) and directories left by runs whose process is gone.
    static func removeLeftovers() {
        guard let list = try? ip(["netns", "list"]) else { return }
        for line in list.split(separator: "\n") {
            guard let name = line.split(separator: " ").first.map(String.init), let pid = ownerPID(of: name),
                pid != getpid(), kill(pid, 0) == -1, errno == ESRCH
            else { continue }
            if let pids = try? ip(["netns", "pids", name]) {
                for text in pids.split(separator: "\n") { if let stray = Int32(text) { kill(stray, SIGKILL) } }
            }
            _ = try? ip(["netns", "delete", name])
        }
        let temporary = FileManager.default.temporaryDirectory.path
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: temporary)) ?? [] {
            guard let pid = ownerPID(of: entry), kill(pid, 0) == -1, errno == ESRCH else { continue }
            try? FileManager.default.removeItem(atPath: temporary + "/" + entry)
        }
    }

    /// The PID in `plaitnet-<pid>-…`, or nil for any other name.
    static func ownerPID(of name: String) -> Int32? {
        let parts = name.split(separator: "-")
        guard parts.count >= 3, parts[0] == Substring(prefix) else { return nil }
        return Int32(parts[1])
    }

    private final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var value = 0
        func next() -> Int { lock.withLock { value += 1; return value } }
    }
}

/// One host of a test LAN: a network namespace with `eth0` on the LAN's bridge.
public struct NetnsHost: Sendable, Hashable {
    /// 1-based.
    public let index: Int
    /// The network namespace (for `ip -n` or `ip netns exec`).
    public let namespace: String
    /// Its IPv4 address on `eth0` (a /24).
    public let ipv4: String
    /// Its IPv6 address on `eth0` (a /64), besides the link-local one.
    public let ipv6: String
    /// `DBUS_SYSTEM_BUS_ADDRESS` for processes in this host: its own dbus-daemon.
    public let dbusAddress: String

    /// `h1`, `h2`, …
    public var name: String { "h\(index)" }
    /// The host name its avahi-daemon publishes (`plait-h1`, so `plait-h1.local`).
    public var hostName: String { "plait-h\(index)" }
    /// The interface on the LAN.
    public var interface: String { "eth0" }
}
