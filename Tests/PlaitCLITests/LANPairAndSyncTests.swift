import Foundation
import PlaitCore
import PlaitNetnsSupport
import PlaitPairing
import Testing

/// Why the LAN tests cannot run here (the harness's reason, or no built `plait`), or nil.
let lanSkipReason: String? = {
    if let reason = NetnsLAN.skipReason { return reason }
    if case .failure(let failure) = PlaitExecutable.path { return failure.description }
    return nil
}()

/// `plait pair` (no address) and `plait sync` (no --peer) between hosts that share only a LAN: network
/// namespaces on a bridge, each with its own avahi-daemon, so devices find each other by real multicast DNS.
/// Homes live in a sandbox directory (the namespaces share the filesystem), so setting up and inspecting
/// them runs outside the namespaces; only the processes that talk to the LAN run inside. Every wait awaits
/// a line with a deadline; every process is stopped by its PID (the LAN's tearDown stops what is left).
@Suite(
    "plait pair and plait sync by mDNS on a LAN of namespaces", .serialized,
    .disabled(if: lanSkipReason != nil, Comment(rawValue: lanSkipReason ?? "")))
struct LANPairAndSyncTests {
    /// The environment of a plait run inside a host: the sandbox's, with the host's own bus (which `spawn`
    /// sets) rather than the sandbox's bus that leads nowhere.
    func environment(_ sandbox: Sandbox) -> [String: String] {
        var environment = sandbox.baseEnvironment
        environment["DBUS_SYSTEM_BUS_ADDRESS"] = nil
        environment["PLAIT_HOME"] = nil
        return environment
    }

    func plait(
        _ arguments: [String], in host: NetnsHost, on lan: NetnsLAN, _ sandbox: Sandbox
    ) throws -> HostProcess {
        try lan.spawn([try PlaitExecutable.path.get()] + arguments, in: host, environment: environment(sandbox))
    }

    /// A device home in the sandbox: (home, Device ID).
    func device(_ sandbox: Sandbox, _ name: String) throws -> (home: String, id: String) {
        let home = sandbox.root + "/" + name
        try sandbox.ok(["init", "--name", name, "--home", home])
        return (home, try sandbox.ok(["id", "--home", home]).lines.last!)
    }

    func peers(_ sandbox: Sandbox, _ home: String) throws -> [[String: Any]] {
        try sandbox.ok(["peers", "--json", "--home", home]).json()["peers"] as? [[String: Any]] ?? []
    }

    func since(_ start: Date, _ end: Date = Date()) -> String { String(format: "%.2f s", end.timeIntervalSince(start)) }

    /// Both run `plait pair`; each waits for the other to show up, both show a code, `answers` go in.
    /// Returns the two processes, once exited.
    func pairByDiscovery(
        _ lan: NetnsLAN, _ sandbox: Sandbox, _ alpha: (home: String, id: String), _ beta: (home: String, id: String),
        answers: (String, String)
    ) throws -> (HostProcess, HostProcess, codes: (String, String)) {
        let start = Date()
        let a = try plait(["pair", "--home", alpha.home, "--timeout", "60"], in: lan.hosts[0], on: lan, sandbox)
        let b = try plait(["pair", "--home", beta.home, "--timeout", "60"], in: lan.hosts[1], on: lan, sandbox)
        defer {
            a.stop()
            b.stop()
        }
        let aFound = try a.nextLine(timeout: .seconds(30)) { $0.hasPrefix("found in pairing mode: ") }
        let aFoundAt = Date()
        let bFound = try b.nextLine(timeout: .seconds(30)) { $0.hasPrefix("found in pairing mode: ") }
        let bFoundAt = Date()
        let aCode = try a.nextLine(timeout: .seconds(30)) { $0.hasPrefix("code: ") }
        let bCode = try b.nextLine(timeout: .seconds(30)) { $0.hasPrefix("code: ") }
        let codesAt = Date()
        a.send(answers.0)
        b.send(answers.1)
        let statuses = (a.waitForExit(timeout: .seconds(30)), b.waitForExit(timeout: .seconds(30)))
        let doneAt = Date()
        a.waitForEndOfOutput(timeout: .seconds(5))
        b.waitForEndOfOutput(timeout: .seconds(5))
        #expect(statuses.0 != nil && statuses.1 != nil, "both exit after answering:\n\(a.transcript)\n\(b.transcript)")

        // Exactly one side dialled (the other waited for it, or had its connection already).
        let dialled = [a, b].filter { $0.lines().contains { $0.hasPrefix("connecting to ") } }
        #expect(dialled.count == 1, "\(a.transcript)\n\(b.transcript)")
        // Found with the IPv4 address, which Avahi may resolve after the IPv6 one.
        #expect(aFound == "found in pairing mode: beta (\(lan.hosts[1].ipv4))", "\(a.transcript)")
        #expect(bFound == "found in pairing mode: alpha (\(lan.hosts[0].ipv4))", "\(b.transcript)")
        print(
            "pair by mDNS: alpha found beta after \(since(start, aFoundAt)), beta found alpha after "
                + "\(since(start, bFoundAt)); codes on both screens \(since(max(aFoundAt, bFoundAt), codesAt)) "
                + "after that; answers → both exited in \(since(codesAt, doneAt)); \(since(start, doneAt)) in all")
        let digits = { (line: String) in line.dropFirst("code: ".count).filter { $0 != " " } }
        return (a, b, (digits(aCode), digits(bCode)))
    }

    @Test func twoDevicesRunningPlaitPairFindEachOtherAndPairWhenBothSayYes() throws {
        let lan = try NetnsLAN(hosts: 2)
        defer { lan.tearDown() }
        try withSandbox { sandbox in
            let alpha = try device(sandbox, "alpha")
            let beta = try device(sandbox, "beta")
            let (a, b, codes) = try pairByDiscovery(lan, sandbox, alpha, beta, answers: ("y", "y"))
            #expect(codes.0 == codes.1 && codes.0.count == 6 && codes.0.allSatisfy(\.isNumber), "\(codes)")
            #expect(a.waitForExit(timeout: .zero) == 0, "\(a.transcript)")
            #expect(b.waitForExit(timeout: .zero) == 0, "\(b.transcript)")
            #expect(a.lines().contains { $0.hasPrefix("paired with \(beta.id)") }, "\(a.transcript)")

            let alphaPeers = try peers(sandbox, alpha.home)
            let betaPeers = try peers(sandbox, beta.home)
            #expect(alphaPeers.map { $0["device"] as? String } == [beta.id], "\(alphaPeers)")
            #expect(betaPeers.map { $0["device"] as? String } == [alpha.id], "\(betaPeers)")
            #expect(alphaPeers.first?["name"] as? String == "beta" && betaPeers.first?["name"] as? String == "alpha")
            // The pairing port is not where the other device syncs: no address is stored on either side.
            #expect(alphaPeers.first?["address"] is NSNull && betaPeers.first?["address"] is NSNull)
        }
    }

    @Test func aNoOnEitherSideStoresNothingOnEither() throws {
        let lan = try NetnsLAN(hosts: 2)
        defer { lan.tearDown() }
        try withSandbox { sandbox in
            let alpha = try device(sandbox, "alpha")
            let beta = try device(sandbox, "beta")
            let (a, b, codes) = try pairByDiscovery(lan, sandbox, alpha, beta, answers: ("y", "n"))
            #expect(codes.0 == codes.1)
            #expect(a.waitForExit(timeout: .zero) != 0 && b.waitForExit(timeout: .zero) != 0)
            #expect(b.lines(.stderr).joined().contains("codes were refused"), "\(b.transcript)")
            #expect(a.lines(.stderr).joined().contains("the other device refused"), "\(a.transcript)")
            #expect(try peers(sandbox, alpha.home).isEmpty && peers(sandbox, beta.home).isEmpty)
        }
    }

    /// Devices in pairing mode impersonated by probes, already on the LAN when `plait pair` starts: it lists
    /// them by number, asks again after a wrong answer, and then waits for the one chosen (its tag sorts
    /// lowest, so that one dials) or dials it (its tag sorts highest; nothing listens there, so that fails).
    @Test func withSeveralDevicesInPairingModeTheUserPicksOneByNumber() throws {
        let lan = try NetnsLAN(hosts: 3)
        defer { lan.tearDown() }
        try #require(ProbeLocation.path != nil, "plait-discovery-probe is not built next to the tests")
        try withSandbox { sandbox in
            let alpha = try device(sandbox, "alpha")
            // Base32 tags: "2…" sorts below every real tag, "Z…" above.
            var ghosts: [HostProcess] = []
            defer { for ghost in ghosts { ghost.stop() } }
            let fakes = [("lowghost", "2222222222222222"), ("highghost", "ZZZZZZZZZZZZZZZZ")]
            for (index, (name, tag)) in fakes.enumerated() {
                let ghost = try lan.spawn(
                    [
                        ProbeLocation.path!, "--publish", name + " (pairing)", "--port", "9", "--tag", tag,
                        "--proto", "1", "--sum", "S", "--pair",
                    ], in: lan.hosts[index + 1])
                _ = try ghost.nextLine(timeout: .seconds(20)) { $0.contains("\"published\"") }
                ghosts.append(ghost)
            }
            let addresses = (lan.hosts[2].ipv4, lan.hosts[1].ipv4)
            for (answer, expected) in [
                ("2", "waiting for lowghost to connect"), ("1", "connecting to highghost at \(addresses.0):9 to pair"),
            ] {
                let start = Date()
                let pair = try plait(
                    ["pair", "--home", alpha.home, "--timeout", "30"], in: lan.hosts[0], on: lan, sandbox)
                defer { pair.stop() }
                let heading = try pair.nextLine(timeout: .seconds(20)) { $0.hasPrefix("Several devices") }
                #expect(heading == "Several devices are in pairing mode:")
                let asked = Date()
                let listed = [try pair.nextLine(timeout: .seconds(5)), try pair.nextLine(timeout: .seconds(5))]
                #expect(
                    listed == ["  1. highghost (\(addresses.0))", "  2. lowghost (\(addresses.1))"],
                    "by name: \(pair.transcript)")
                pair.send("3")
                #expect(try pair.nextLine(timeout: .seconds(5)).hasSuffix("] 3"), "the answer, echoed")
                #expect(try pair.nextLine(timeout: .seconds(5)) == "'3' is not one of the numbers 1 to 2.")
                pair.send(answer)
                let next = try pair.nextLine(timeout: .seconds(10)) {
                    $0.hasPrefix("waiting") || $0.hasPrefix("connecting")
                }
                #expect(next == expected, "\(pair.transcript)")
                print("pair by mDNS: two devices already in pairing mode listed after \(since(start, asked))")
                if answer == "1" {
                    #expect(pair.waitForExit(timeout: .seconds(40)) == 1, "nothing listens there: \(pair.transcript)")
                    pair.waitForEndOfOutput(timeout: .seconds(5))
                    let error = pair.lines(.stderr).joined()
                    #expect(error.contains("could not connect to highghost at"), "\(pair.transcript)")
                } else {
                    #expect(pair.stop() != 0 && pair.isRunning == false)
                }
            }
            #expect(try peers(sandbox, alpha.home).isEmpty)
        }
    }

    // MARK: plait sync without --peer

    /// `plait sync` on alpha (h1) finds beta's agent (h2) by mDNS, recognises it by its tag, and syncs with it.
    /// `announce` starts whatever announces beta's agent, given beta's home and ID; nil: the agent itself.
    func syncFindsPairedDevice(
        _ lan: NetnsLAN, _ sandbox: Sandbox, announce: ((String, String) throws -> HostProcess)?
    ) throws {
        let alpha = try device(sandbox, "alpha")
        let beta = try device(sandbox, "beta")
        // Paired with no address on either side, as `plait pair` by discovery leaves them.
        // Named at pairing: `plait sync` names a peer as stored here, not as its Hello names itself.
        try sandbox.ok(["pair", "--trust", beta.id, "--name", "beta", "--home", alpha.home])
        try sandbox.ok(["pair", "--trust", alpha.id, "--home", beta.home])
        try sandbox.ok(["batch", "--home", beta.home], stdin: "list add Groceries\nadd Groceries milk\n")
        // A long browse window: finishing well within it shows the search stops once every peer is found.
        let config = sandbox.root + "/long-browse.toml"
        try Data("[discovery]\nbrowse_seconds = 20\n".utf8).write(to: URL(fileURLWithPath: config))

        #expect(try sandbox.fails(["sync", "--home", alpha.home]).stderr.contains("no peer to sync with"))

        let agent = try plait(
            ["agent", "--home", beta.home, "--listen", "0.0.0.0:7400"], in: lan.hosts[1], on: lan, sandbox)
        defer { #expect(agent.stop() == 0, "the agent exits cleanly: \(agent.transcript)") }
        _ = try agent.waitForLine(on: .stderr, timeout: .seconds(20)) { $0.contains("listening on") }
        let announcer = try announce?(beta.home, beta.id)
        defer { announcer?.stop() }

        let start = Date()
        let sync = try plait(["sync", "--home", alpha.home, "--config", config], in: lan.hosts[0], on: lan, sandbox)
        defer { sync.stop() }
        let status = sync.waitForExit(timeout: .seconds(60))
        let took = since(start)
        sync.waitForEndOfOutput(timeout: .seconds(5))
        #expect(status == 0, "\(sync.transcript)")
        #expect(sync.lines().count == 1, "one line for the one device: \(sync.transcript)")
        // Beta's timeline.begin and its two changes; alpha's own timeline.begin goes the other way.
        #expect(
            sync.lines().first?.hasPrefix("beta (\(lan.hosts[1].ipv4):7400): pulled 3 changes, sent 1") == true,
            "\(sync.transcript)")
        #expect(try summary(sandbox, alpha.home) == summary(sandbox, beta.home))
        #expect(sync.lines(.stderr).isEmpty, "\(sync.transcript)")
        #expect(Date().timeIntervalSince(start) < 15, "the search stops once every paired device is found")
        print("sync by mDNS: found beta and synced in \(took) (browse window 20 s)")

        // Now known both ways (the address it synced at is remembered): still one line, found by mDNS.
        let again = try plait(
            ["sync", "--home", alpha.home, "--config", config, "--json"], in: lan.hosts[0], on: lan, sandbox)
        defer { again.stop() }
        #expect(again.waitForExit(timeout: .seconds(60)) == 0, "\(again.transcript)")
        again.waitForEndOfOutput(timeout: .seconds(5))
        let json = try JSONSerialization.jsonObject(with: Data(again.lines().joined(separator: "\n").utf8))
        let results = (json as? [String: Any])?["peers"] as? [[String: Any]] ?? []
        #expect(results.count == 1 && results.first?["found_by"] as? String == "mdns", "\(again.transcript)")
        #expect(results.first?["device"] as? String == beta.id)
        // --no-discovery: the stored address alone.
        let known = try plait(
            ["sync", "--home", alpha.home, "--no-discovery", "--json"], in: lan.hosts[0], on: lan, sandbox)
        defer { known.stop() }
        #expect(known.waitForExit(timeout: .seconds(60)) == 0, "\(known.transcript)")
        known.waitForEndOfOutput(timeout: .seconds(5))
        #expect(known.lines().joined().contains("\"found_by\": \"stored\""), "\(known.transcript)")
    }

    func summary(_ sandbox: Sandbox, _ home: String) throws -> String {
        try sandbox.ok(["status", "--json", "--home", home]).json()["summary"] as? String ?? "?"
    }

    @Test
    func syncWithoutPeerFindsAPairedAgentByMDNS() throws {
        let lan = try NetnsLAN(hosts: 2)
        defer { lan.tearDown() }
        try withSandbox { sandbox in try syncFindsPairedDevice(lan, sandbox, announce: nil) }
    }


    @Test func doctorSeesTheHostsAvahiDaemon() throws {
        let lan = try NetnsLAN(hosts: 1)
        defer { lan.tearDown() }
        try withSandbox { sandbox in
            let alpha = try device(sandbox, "alpha")
            let doctor = try plait(
                ["doctor", "--home", alpha.home, "--listen", "127.0.0.1:0", "--json"], in: lan.hosts[0], on: lan,
                sandbox)
            defer { doctor.stop() }
            #expect(doctor.waitForExit(timeout: .seconds(30)) == 0, "\(doctor.transcript)")
            doctor.waitForEndOfOutput(timeout: .seconds(5))
            let json = try JSONSerialization.jsonObject(with: Data(doctor.lines().joined(separator: "\n").utf8))
            let checks = (json as? [String: Any])?["checks"] as? [[String: Any]] ?? []
            let avahi = checks.first { $0["check"] as? String == "avahi-daemon" }
            #expect(avahi?["status"] as? String == "ok", "\(doctor.transcript)")
            #expect((avahi?["detail"] as? String)?.contains("plait-h1.local") == true, "\(doctor.transcript)")
        }
    }
}

/// The built `plait-discovery-probe`, next to `plait`.
enum ProbeLocation {
    static let path: String? = {
        guard case .success(let plait) = PlaitExecutable.path else { return nil }
        let probe = URL(fileURLWithPath: plait).deletingLastPathComponent()
            .appendingPathComponent("plait-discovery-probe")
        return FileManager.default.isExecutableFile(atPath: probe.path) ? probe.path : nil
    }()
}

/// DESIGN §6's daily tag, computed here from its definition (SHA-256 of the Device ID's text and the UTC
/// date `YYYY-MM-DD`, base32, 16 characters), as a paired peer would.
enum DailyTag {
    static func tag(deviceID: String, date: Date) -> String {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.year, .month, .day], from: date)
        let day = String(format: "%04d-%02d-%02d", parts.year!, parts.month!, parts.day!)
        let digest = SHA256.hash(Array((deviceID + day).utf8))
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        let binary = digest.prefix(10).map { String($0, radix: 2) }
        var bits = binary.map { String(repeating: "0", count: 8 - $0.count) + $0 }.joined()[...]
        var text = ""
        while text.count < 16 {
            text.append(alphabet[Int(bits.prefix(5), radix: 2)!])
            bits = bits.dropFirst(5)
        }
        return text
    }
}
