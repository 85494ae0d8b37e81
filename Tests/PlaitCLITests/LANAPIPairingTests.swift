import Foundation
import PlaitAPI
import PlaitDiscovery
import PlaitNetnsSupport
import PlaitPairing
import PlaitSync
import Testing

/// Pairing by mDNS from the agent's API (what the page's "Search nearby" does) on a LAN of network namespaces, each
/// host with its own avahi-daemon: alpha's agent (h0) searches, lists beta — in `plait pair` on h1 — and pairs only
/// once the user picked it; both show the same code; the answer given through the API decides. The test reaches
/// alpha's API through its Unix socket (a file in the sandbox), which needs no token and no route into h0; every
/// process runs inside a host and is stopped by its PID, the LAN's tearDown stops what is left.
@Suite(
    "pairing by mDNS from the API on a LAN of namespaces", .serialized,
    .disabled(if: lanSkipReason != nil, Comment(rawValue: lanSkipReason ?? "")))
struct LANAPIPairingTests {
    let lanTests = LANPairAndSyncTests()

    /// An agent on `host` (alpha's, h0, unless said), with its API; (the process, a client of its Unix socket).
    func agent(
        _ lan: NetnsLAN, _ sandbox: Sandbox, home: String, host: Int = 0
    ) throws -> (process: HostProcess, api: LoopbackClient) {
        let process = try lanTests.plait(
            ["agent", "--home", home, "--listen", "0.0.0.0:7400", "--api-listen", "127.0.0.1:0"],
            in: lan.hosts[host], on: lan, sandbox)
        _ = try process.waitForLine(on: .stderr, timeout: .seconds(20)) { $0.contains("listening on") }
        let socket = home + "/api.sock"
        #expect(eventually(20) { FileManager.default.fileExists(atPath: socket) }, "\(process.transcript)")
        return (process, LoopbackClient(unixSocketPath: socket))
    }

    /// What most tests start from: a LAN of two hosts, devices alpha and `betaName` in a sandbox (beta of pairing
    /// `role` towards alpha, if given), and alpha's agent on h0 with its API. The agent must exit cleanly when
    /// stopped after `body`; the LAN is torn down.
    func withAlphaAgent(
        _ label: String, beta betaName: String = "beta", role: PairingRendezvous.Role? = nil,
        _ body: (
            NetnsLAN, Sandbox, (home: String, id: String), (home: String, id: String), HostProcess, LoopbackClient
        ) throws -> Void
    ) throws {
        let lan = try NetnsLAN(hosts: 2)
        defer { lan.tearDown() }
        try withSandbox(label) { sandbox in
            let (alpha, beta) = try role.map { try devices(sandbox, beta: betaName, role: $0) }
                ?? (lanTests.device(sandbox, "alpha"), lanTests.device(sandbox, betaName))
            let (agent, api) = try agent(lan, sandbox, home: alpha.home)
            defer { #expect(agent.stop() == 0, "alpha's agent exits cleanly: \(agent.transcript)") }
            do {
                try body(lan, sandbox, alpha, beta, agent, api)
            } catch {
                // Something awaited did not happen: what each host's daemon saw, and alpha's agent, tell why.
                Issue.record("\(mdnsView(lan))\n\(agent.transcript)")
                throw error
            }
        }
    }

    func pairing(_ api: LoopbackClient) throws -> [String: Any] {
        let reply = try api.send("GET", "/api/pairing")
        #expect(reply.status == 200, "\(reply.text)")
        return try JSONSerialization.jsonObject(with: Data(reply.body)) as? [String: Any] ?? [:]
    }

    /// Events from `since` on, long-polled (each poll returns as soon as one is published) until `done` says the
    /// events so far suffice, or `seconds` passed (at least one poll); all of them, in order.
    func events(
        _ api: LoopbackClient, after since: Int, seconds: Double, until done: ([[String: Any]]) -> Bool
    ) throws -> [[String: Any]] {
        var seen: [[String: Any]] = []
        var position = since
        let deadline = Date().addingTimeInterval(seconds)
        repeat {
            let wait = seconds > 0 ? 5 : 0
            let reply = try api.send("GET", "/api/events?since=\(position)&timeout=\(wait)")
            #expect(reply.status == 200, "\(reply.text)")
            let object = try JSONSerialization.jsonObject(with: Data(reply.body)) as? [String: Any]
            let batch = object?["events"] as? [[String: Any]] ?? []
            seen += batch
            position = batch.last?["seq"] as? Int ?? position
        } while !done(seen) && Date() < deadline
        return seen
    }

    func post(_ api: LoopbackClient, _ path: String, _ fields: [String: Any] = [:]) throws -> LoopbackClient.Reply {
        try api.send("POST", path, headers: [("Origin", "http://\(api.authority)")], json: fields)
    }

    /// What each host's avahi-daemon holds for `_plait._tcp` (resolved, from its cache), for a failure message:
    /// which side did not see the other, and at which address and port.
    func mdnsView(_ lan: NetnsLAN) -> String {
        lan.hosts.map { host in
            let seen = (try? lan.run(["avahi-browse", "-rptk", "_plait._tcp"], in: host, timeout: .seconds(10)))
            return "avahi on \(host.name):\n" + (seen ?? "(no answer)")
        }.joined(separator: "\n")
    }

    /// GET /api/pairing for a failure message.
    func shown(_ api: LoopbackClient) -> String { (try? pairing(api)).map { "\($0)" } ?? "(no answer)" }

    func state(_ snapshot: [String: Any]) -> String? { (snapshot["session"] as? [String: Any])?["state"] as? String }

    /// Up to the code on both screens: alpha's API searches, beta runs `plait pair`, alpha's user picks beta.
    /// Returns beta's `plait pair` (still waiting for its user's answer) and alpha's session with the code.
    func searchPickAndCompare(
        _ lan: NetnsLAN, _ sandbox: Sandbox, api: LoopbackClient, beta: (home: String, id: String)
    ) throws -> (pair: HostProcess, session: [String: Any]) {
        let start = Date()
        let since = try events(api, after: 0, seconds: 0) { _ in true }.last?["seq"] as? Int ?? 0
        let started = try post(api, "/api/pairing/start")
        #expect(started.status == 200, "\(started.text)")
        #expect(try state(pairing(api)) == "searching")
        let pair = try lanTests.plait(
            ["pair", "--home", beta.home, "--timeout", "60"], in: lan.hosts[1], on: lan, sandbox)
        let betaFound = try pair.nextLine(timeout: .seconds(30)) { $0.hasPrefix("found in pairing mode: ") }
        #expect(betaFound.hasPrefix("found in pairing mode: alpha ("), "\(pair.transcript)")

        // Alpha announces beta as an event (what the page follows), with its IPv4 address once Avahi resolved it.
        let atIPv4 = { (event: [String: Any]) in
            event["kind"] as? String == "pairing.found"
                && ((event["data"] as? [String: Any])?["address"] as? String)?.hasPrefix(lan.hosts[1].ipv4 + ":")
                    == true
        }
        let announced = try events(api, after: since, seconds: 30) { $0.contains(where: atIPv4) }
        let foundAt = Date()
        let event = try #require(announced.first(where: atIPv4), "no pairing.found event for beta: \(announced)")
        #expect((event["data"] as? [String: Any])?["instance"] as? String == "beta (pairing)", "\(event)")
        let searching = announced.first { $0["kind"] as? String == "pairing.state" }?["data"] as? [String: Any]
        #expect(searching?["state"] as? String == "searching", "\(announced)")
        // The snapshot then lists it as well.
        let snapshot = try pairing(api)
        let devices = snapshot["devices"] as? [[String: Any]] ?? []
        #expect(devices.count == 1 && devices.first?["name"] as? String == "beta", "\(devices)")
        let instance = try #require(devices.first?["instance"] as? String)
        #expect(instance == "beta (pairing)")

        // Beta went ahead with the only device it found (it dials alpha, or waits for it). Alpha does not: the
        // page's user has not picked anything, so no code is on either screen.
        _ = try pair.nextLine(timeout: .seconds(30)) { $0.hasPrefix("connecting to ") || $0.hasPrefix("waiting for") }
        let unpicked = try pairing(api)
        #expect(state(unpicked) == "searching", "alpha went ahead without a pick: \(unpicked)")
        #expect(!pair.lines().contains { $0.hasPrefix("code: ") }, "\(pair.transcript)")

        // A pick of a device that is not there is refused, and the search goes on.
        let wrong = try post(api, "/api/pairing/pick", ["instance": "nobody (pairing)"])
        #expect(wrong.status == 409 && wrong.errorMessage?.contains("nobody (pairing)") == true, "\(wrong.text)")
        let picked = try post(api, "/api/pairing/pick", ["instance": instance])
        #expect(picked.status == 200, "\(picked.text)")
        let pickedAt = Date()
        let betaCode = try pair.nextLine(timeout: .seconds(30)) { $0.hasPrefix("code: ") }
        var session: [String: Any] = [:]
        let comparing = try eventually(30) {
            session = try pairing(api)["session"] as? [String: Any] ?? [:]
            return session["state"] as? String == "comparing"
        }
        try #require(comparing, "alpha shows no code: \(session)\n\(pair.transcript)")
        let digits = { (text: String) in text.filter(\.isNumber) }
        let code = session["code"] as? String ?? ""
        #expect(digits(code).count == 6 && digits(code) == digits(betaCode), "alpha \(code), beta \(betaCode)")
        #expect(session["device"] as? String == beta.id, "the device ID from beta's certificate: \(session)")
        #expect(session["name"] as? String == "beta")
        print(
            "API pairing by mDNS: beta listed after \(lanTests.since(start, foundAt)); picked → codes on both "
                + "screens in \(lanTests.since(pickedAt))")
        return (pair, session)
    }

    @Test func theAPIListsADeviceInPairingModeAndPairsWithItOnlyOnceItIsPickedAndConfirmed() throws {
        try withAlphaAgent("lan-api-pair") { lan, sandbox, alpha, beta, agent, api in
            let (pair, _) = try searchPickAndCompare(lan, sandbox, api: api, beta: beta)
            defer { pair.stop() }
            #expect(try lanTests.peers(sandbox, alpha.home).isEmpty, "nothing is trusted before the answers")

            #expect(try post(api, "/api/pairing/confirm").status == 200)
            pair.send("y")
            #expect(pair.waitForExit(timeout: .seconds(30)) == 0, "\(pair.transcript)")
            var last: [String: Any] = [:]
            let paired = try eventually(30) {
                last = try pairing(api)
                return state(last) == "paired"
            }
            #expect(paired, "\(last)\n\(agent.transcript)")
            let alphaPeers = try lanTests.peers(sandbox, alpha.home)
            let betaPeers = try lanTests.peers(sandbox, beta.home)
            #expect(alphaPeers.map { $0["device"] as? String } == [beta.id], "\(alphaPeers)")
            #expect(betaPeers.map { $0["device"] as? String } == [alpha.id], "\(betaPeers)")

            // Paired: an edit on beta reaches alpha's agent, which beta finds by mDNS. The agent takes the new
            // trust in when inotify tells it of the pairing's commit: a refusal in that moment is retried, 10 s.
            try sandbox.ok(["batch", "--home", beta.home], stdin: "list add Groceries\nadd Groceries milk\n")
            var sync: HostProcess?
            let synced = try eventually(10) {
                sync?.stop()
                sync = try lanTests.plait(["sync", "--home", beta.home], in: lan.hosts[1], on: lan, sandbox)
                return sync?.waitForExit(timeout: .seconds(30)) == 0
            }
            defer { sync?.stop() }
            #expect(synced, "\(sync?.transcript ?? "")\n\(agent.transcript)")
            let lists = try sandbox.ok(["show", "--json", "--home", alpha.home]).json()["lists"] as? [[String: Any]]
            let items = (lists?.first?["pending"] as? [[String: Any]] ?? []).compactMap { $0["text"] as? String }
            #expect(lists?.first?["title"] as? String == "Groceries" && items == ["milk"], "\(lists ?? [])")
        }
    }

    @Test func aRefusalThroughTheAPIStoresNothingOnEitherSide() throws {
        try withAlphaAgent("lan-api-pair") { lan, sandbox, alpha, beta, agent, api in
            let (pair, _) = try searchPickAndCompare(lan, sandbox, api: api, beta: beta)
            defer { pair.stop() }
            pair.send("y")
            #expect(try post(api, "/api/pairing/refuse").status == 200)
            #expect(pair.waitForExit(timeout: .seconds(30)) == 1, "\(pair.transcript)")
            pair.waitForEndOfOutput(timeout: .seconds(5))
            #expect(pair.lines(.stderr).joined().contains("the other device refused"), "\(pair.transcript)")
            var last: [String: Any] = [:]
            #expect(
                try eventually(30) {
                    last = try pairing(api)
                    return state(last) == "refused"
                }, "\(last)")
            #expect(try lanTests.peers(sandbox, alpha.home).isEmpty && lanTests.peers(sandbox, beta.home).isEmpty)

            // Searching again and stopping the search (the page's "Stop searching") ends it, nobody picked.
            #expect(try post(api, "/api/pairing/start").status == 200)
            #expect(try post(api, "/api/pairing/refuse").status == 200)
            #expect(
                try eventually(10) {
                    last = try pairing(api)
                    return state(last) == "refused"
                }, "\(last)")
            #expect(try post(api, "/api/pairing/start").status == 200, "a new search can start at once")
            let asked = Date()
            let again = try post(api, "/api/pairing/start")
            #expect(again.status == 409 && again.errorMessage?.contains("already running") == true, "\(again.text)")
            #expect(Date().timeIntervalSince(asked) < 2, "refused at once, not after waiting for the running search")
            #expect(try post(api, "/api/pairing/refuse").status == 200)
        }
    }

    /// A search started for a named device (`device`) goes ahead with that device as soon as it shows up, and
    /// never with another: before, the only device found was paired with whatever name was asked for.
    @Test func aSearchForANamedDevicePairsWithThatOneAndNeverWithAnother() throws {
        try withAlphaAgent("lan-api-pair") { lan, sandbox, alpha, beta, agent, api in

            // What each host's avahi-daemon sees, to await the end of the first search there (below).
            let browsers = try lan.hosts.map { try lan.spawn(["avahi-browse", "-pk", "_plait._tcp"], in: $0) }
            defer { for browser in browsers { browser.stop() } }

            // Asked for gamma; only beta is in pairing mode. Beta goes ahead with alpha; alpha waits for gamma.
            #expect(try post(api, "/api/pairing/start", ["device": "gamma"]).status == 200)
            let other = try lanTests.plait(
                ["pair", "--home", beta.home, "--timeout", "30"], in: lan.hosts[1], on: lan, sandbox)
            defer { other.stop() }
            _ = try other.nextLine(timeout: .seconds(30)) {
                $0.hasPrefix("connecting to ") || $0.hasPrefix("waiting for")
            }
            var snapshot: [String: Any] = [:]
            #expect(
                try eventually(30) {
                    snapshot = try pairing(api)
                    return (snapshot["devices"] as? [[String: Any]] ?? []).contains { $0["name"] as? String == "beta" }
                }, "\(snapshot)")
            // Nothing to await for what must not happen: a rendezvous that goes ahead does so 1 s (its settle time)
            // after the first device was found, and then has the code within milliseconds; 3 s bound it.
            let went = try eventually(3) { state(try pairing(api)) != "searching" }
            #expect(!went, "alpha paired with beta when asked for gamma: \(shown(api))\n\(other.transcript)")
            #expect(try post(api, "/api/pairing/refuse").status == 200, "stop searching")
            other.stop()
            // Both withdrew their pairing services. A search started again before the other host's daemon dropped
            // the old record can be found at the old pairing port (README: what is missing): await the removals.
            for (browser, gone) in [(browsers[1], "alpha"), (browsers[0], "beta")] {
                for family in ["IPv4", "IPv6"] {
                    let removal = "-;eth0;\(family);\(gone)\\032\\040pairing\\041;"
                    _ = try browser.waitForLine(on: .stdout, timeout: .seconds(20)) { $0.hasPrefix(removal) }
                }
            }

            // Asked for beta: it is picked as soon as it is found, no pick needed.
            #expect(try eventually(10) { state(try pairing(api)) == "refused" })
            #expect(try post(api, "/api/pairing/start", ["device": "beta"]).status == 200)
            let pair = try lanTests.plait(
                ["pair", "--home", beta.home, "--timeout", "30"], in: lan.hosts[1], on: lan, sandbox)
            defer { pair.stop() }
            _ = try pair.nextLine(timeout: .seconds(30)) { $0.hasPrefix("code: ") }
            #expect(try eventually(30) { state(try pairing(api)) == "comparing" }, "\(shown(api))")
            #expect(try post(api, "/api/pairing/confirm").status == 200)
            pair.send("y")
            #expect(pair.waitForExit(timeout: .seconds(30)) == 0, "\(pair.transcript)")
            #expect(try eventually(30) { state(try pairing(api)) == "paired" }, "\(shown(api))")
            #expect(try lanTests.peers(sandbox, alpha.home).map { $0["device"] as? String } == [beta.id])
        }
    }

    /// Devices alpha and beta, beta of pairing `role` towards alpha today: which of two devices dials is decided by
    /// their tags (`PairingRendezvous.role`), so a test of one side's behaviour picks its devices. Pairs are made
    /// until one fits: each does with odds of one half (both tags are fresh, so neither can sit at an extreme).
    func devices(
        _ sandbox: Sandbox, beta name: String, role: PairingRendezvous.Role
    ) throws -> (alpha: (home: String, id: String), beta: (home: String, id: String)) {
        let made = { (name: String, attempt: Int) throws -> (home: String, id: String) in
            let home = sandbox.root + "/\(name)-\(attempt)"
            try sandbox.ok(["init", "--name", name, "--home", home])
            return (home, try sandbox.ok(["id", "--home", home]).lines.last!)
        }
        for attempt in 0..<64 {
            let (alpha, beta) = (try made("alpha", attempt), try made(name, attempt))
            let tags = [alpha, beta].map { DiscoveryTag.tag(deviceID: $0.id, date: Date()) }
            if PairingRendezvous.role(ownTag: tags[1], peerTag: tags[0]) == role { return (alpha, beta) }
        }
        throw NetnsError.timeout(waitingFor: "two devices where beta is the \(role)", after: .zero, output: "")
    }

    /// The line `avahi-browse -pk _plait._tcp` prints when `device`'s pairing service is found ("+") or removed
    /// ("-") over IPv4.
    func browseLine(_ sign: String, _ device: String) -> String { "\(sign);eth0;IPv4;\(device)\\032\\040pairing\\041;" }

    /// The device that dials stays in pairing mode until the other one runs the attempt. Beta runs `plait pair`
    /// first; alpha's API then searches for beta by name, finds it at once in its daemon's cache and — its tag
    /// sorting lower — dials at once, before its own record was announced (probing takes 0.8 s). Before, alpha
    /// withdrew its record as it dialled: beta never found alpha, held its connection, and both waited until
    /// the timeout (the CI failure of the named search below, once in several runs; seen failing every time
    /// here before the fix).
    @Test func aDeviceThatDialsAtOnceStaysInPairingModeUntilTheOtherRunsTheAttempt() throws {
        try withAlphaAgent("lan-api-dial", role: .responder) { lan, sandbox, alpha, beta, _, api in
            let browser = try lan.spawn(["avahi-browse", "-pk", "_plait._tcp"], in: lan.hosts[0])
            defer { browser.stop() }
            let pair = try lanTests.plait(
                ["pair", "--home", beta.home, "--timeout", "30"], in: lan.hosts[1], on: lan, sandbox)
            defer { pair.stop() }
            _ = try browser.waitForLine(on: .stdout, timeout: .seconds(20)) { $0.hasPrefix(browseLine("+", "beta")) }
            #expect(try post(api, "/api/pairing/start", ["device": "beta"]).status == 200)
            let code = try? pair.nextLine(timeout: .seconds(20)) { $0.hasPrefix("code: ") }
            #expect(code != nil, "beta shows no code: \(pair.transcript)\n\(shown(api))\n\(mdnsView(lan))")
            #expect(try eventually(20) { state(try pairing(api)) == "comparing" }, "\(shown(api))")
            #expect(try post(api, "/api/pairing/confirm").status == 200)
            pair.send("y")
            #expect(pair.waitForExit(timeout: .seconds(30)) == 0, "\(pair.transcript)")
            #expect(try eventually(30) { state(try pairing(api)) == "paired" }, "\(shown(api))")
            #expect(try lanTests.peers(sandbox, alpha.home).map { $0["device"] as? String } == [beta.id])
        }
    }

    /// The other way round: beta (`plait pair`) dials alpha, whose page's user has not picked anyone yet; alpha
    /// holds the connection, and beta stays listed on alpha's page however long its user takes. Before, beta
    /// withdrew its record as it dialled, so a second after its dial it vanished from alpha's list and the
    /// user's pick was refused ("no longer in pairing mode").
    @Test func aDeviceThatDialsStaysListedOnThePageUntilItsUserPicksIt() throws {
        try withAlphaAgent("lan-api-held", role: .initiator) { lan, sandbox, alpha, beta, _, api in
            let browser = try lan.spawn(["avahi-browse", "-pk", "_plait._tcp"], in: lan.hosts[0])
            defer { browser.stop() }
            #expect(try post(api, "/api/pairing/start").status == 200)
            let pair = try lanTests.plait(
                ["pair", "--home", beta.home, "--timeout", "60"], in: lan.hosts[1], on: lan, sandbox)
            defer { pair.stop() }
            _ = try pair.nextLine(timeout: .seconds(30)) { $0.hasPrefix("connecting to ") }
            // A withdrawn record is gone from the other daemon a second after its goodbye: 3 s bound it (nothing
            // to await for what must not happen).
            let removed = try? browser.waitForLine(on: .stdout, timeout: .seconds(3)) {
                $0.hasPrefix(browseLine("-", "beta"))
            }
            #expect(removed == nil, "beta withdrew its pairing record while alpha's user had not answered")
            let picked = try post(api, "/api/pairing/pick", ["instance": "beta (pairing)"])
            #expect(picked.status == 200, "\(picked.text)\n\(pair.transcript)")
            let code = try? pair.nextLine(timeout: .seconds(20)) { $0.hasPrefix("code: ") }
            #expect(code != nil, "beta shows no code: \(pair.transcript)\n\(shown(api))")
            #expect(try eventually(20) { state(try pairing(api)) == "comparing" }, "\(shown(api))")
            #expect(try post(api, "/api/pairing/refuse").status == 200)
            pair.send("y")
            #expect(pair.waitForExit(timeout: .seconds(30)) == 1, "\(pair.transcript)")
            #expect(try lanTests.peers(sandbox, alpha.home).isEmpty && lanTests.peers(sandbox, beta.home).isEmpty)
        }
    }

    /// The page does the same in a real headless Chromium, run with its driver inside alpha's host (where the
    /// agent's page is on loopback): "Search nearby" by keyboard, beta listed with its name (markup) as text and a
    /// button of its own, picked by keyboard, the code on the page the one beta printed; confirmed on both, or
    /// refused on the page.
    @Test(.enabled(if: Chromium.path != nil, Comment(rawValue: Chromium.absent)), arguments: ["confirm", "refuse"])
    func thePageListsADeviceFoundNearbyAndPairsWithTheOnePickedByKeyboard(answer: String) throws {
        // Short enough that "<name> (pairing)" fits one DNS label uncut.
        let markup = #"<img src=x onerror="window.__plaitPwned=1">b"#
        try withAlphaAgent("lan-page-pair", beta: markup) { lan, sandbox, alpha, beta, agent, _ in
            let gui = try sandbox.ok(["gui", "--home", alpha.home])
            let loginURL = try #require(gui.lines.first { $0.contains("?code=") }, "\(gui)")

            let inAlpha = [NetnsLAN.findExecutable("ip") ?? "/usr/sbin/ip", "netns", "exec", lan.hosts[0].namespace]
            let browser = try HeadlessChromium(
                sandbox: sandbox, executable: try #require(Chromium.path), launcher: inAlpha)
            defer { browser.stop() }
            let options: [String: Any] = [
                "devtools_port": browser.devtoolsPort, "login_url": loginURL, "scenario": "nearby",
                "peer_name": markup, "answer": answer,
            ]
            let driver = try PythonDriver(
                sandbox: sandbox, python: try DriverPython.locate(), script: "devices_driver.py",
                options: String(decoding: try JSONSerialization.data(withJSONObject: options), as: UTF8.self),
                launcher: inAlpha)
            defer { driver.stop() }
            try #require(driver.awaitPhase("searching"), "the page did not search: \(driver.output)")
            let pair = try lanTests.plait(
                ["pair", "--home", beta.home, "--timeout", "60"], in: lan.hosts[1], on: lan, sandbox)
            defer { pair.stop() }
            try #require(
                driver.awaitPhase("nearby-code", seconds: 45),
                "\(driver.output)\n\(pair.transcript)\n\(agent.transcript)\n\(mdnsView(lan))")
            let betaCode = try pair.nextLine(timeout: .seconds(10)) { $0.hasPrefix("code: ") }
            let pageCode = driver.phases.first { $0["phase"] as? String == "nearby-code" }?["code"] as? String
            let digits = { (text: String) in text.filter(\.isNumber) }
            #expect(
                pageCode.map(digits) == digits(betaCode) && digits(betaCode).count == 6,
                "the page showed \(pageCode ?? "?"), beta \(betaCode)")
            pair.send("y")
            let status = driver.wait(seconds: 45)
            #expect(status == 0, "the page driver failed (exit \(status)): \(driver.output)\n\(agent.transcript)")
            let seen = driver.stdout.split(separator: "\n").last ?? ""
            print("page pairing by mDNS (Chromium headless in a namespace), \(answer): \(seen)")
            // Confirmed on the page: both trust each other. Refused: beta gives up, and nobody trusts anybody.
            let betaStatus = pair.waitForExit(timeout: .seconds(30))
            if answer == "confirm" {
                #expect(betaStatus == 0, "\(pair.transcript)")
                #expect(try lanTests.peers(sandbox, alpha.home).map { $0["device"] as? String } == [beta.id])
                #expect(try lanTests.peers(sandbox, beta.home).map { $0["device"] as? String } == [alpha.id])
            } else {
                #expect(betaStatus == 1, "\(pair.transcript)")
                #expect(try lanTests.peers(sandbox, alpha.home).isEmpty && lanTests.peers(sandbox, beta.home).isEmpty)
            }
        }
    }

    /// Both users pair from their pages: each agent searches, lists the other, and each user picks the other,
    /// one after the other (whoever dials first is held until the other's pick); the codes match, both confirm,
    /// and the two agents, paired, then find each other by mDNS and sync an edit.
    @Test func twoAgentsPairWhenEachUserPicksTheOther() throws {
        let lan = try NetnsLAN(hosts: 2)
        defer { lan.tearDown() }
        try withSandbox("lan-api-pair") { sandbox in
            let alpha = try lanTests.device(sandbox, "alpha")
            let beta = try lanTests.device(sandbox, "beta")
            let (alphaAgent, alphaAPI) = try agent(lan, sandbox, home: alpha.home, host: 0)
            defer { #expect(alphaAgent.stop() == 0, "alpha's agent exits cleanly: \(alphaAgent.transcript)") }
            let (betaAgent, betaAPI) = try agent(lan, sandbox, home: beta.home, host: 1)
            defer { #expect(betaAgent.stop() == 0, "beta's agent exits cleanly: \(betaAgent.transcript)") }
            let sides = [(alphaAPI, "beta (pairing)"), (betaAPI, "alpha (pairing)")]
            for (api, _) in sides { #expect(try post(api, "/api/pairing/start").status == 200) }
            for (api, other) in sides {
                var snapshot: [String: Any] = [:]
                let listed = try eventually(30) {
                    snapshot = try pairing(api)
                    let devices = snapshot["devices"] as? [[String: Any]] ?? []
                    return devices.contains { $0["instance"] as? String == other }
                }
                try #require(listed, "\(other) is not listed: \(snapshot)")
            }
            // Alpha's user picks first; beta's has not: no code anywhere yet.
            #expect(try post(alphaAPI, "/api/pairing/pick", ["instance": "beta (pairing)"]).status == 200)
            #expect(state(try pairing(betaAPI)) == "searching")
            #expect(try post(betaAPI, "/api/pairing/pick", ["instance": "alpha (pairing)"]).status == 200)
            var codes: [String] = []
            for (api, _) in sides {
                var session: [String: Any] = [:]
                let comparing = try eventually(30) {
                    session = try pairing(api)["session"] as? [String: Any] ?? [:]
                    return session["state"] as? String == "comparing"
                }
                try #require(comparing, "no code: \(session)")
                codes.append(session["code"] as? String ?? "")
            }
            #expect(codes[0] == codes[1] && codes[0].filter(\.isNumber).count == 6, "\(codes)")
            for (api, _) in sides { #expect(try post(api, "/api/pairing/confirm").status == 200) }
            for (api, _) in sides {
                #expect(try eventually(30) { state(try pairing(api)) == "paired" }, "\(shown(api))")
            }
            #expect(try lanTests.peers(sandbox, alpha.home).map { $0["device"] as? String } == [beta.id])
            #expect(try lanTests.peers(sandbox, beta.home).map { $0["device"] as? String } == [alpha.id])

            // Paired, the agents find each other by mDNS and sync: an edit on beta (through its agent) reaches alpha.
            try sandbox.ok(["list", "add", "Groceries", "--home", beta.home])
            var lists: [[String: Any]] = []
            let synced = try eventually(60) {
                let shown = try sandbox.ok(["show", "--json", "--home", alpha.home]).json()
                lists = shown["lists"] as? [[String: Any]] ?? []
                return lists.contains { $0["title"] as? String == "Groceries" }
            }
            #expect(synced, "\(lists)\n\(alphaAgent.transcript)\n\(betaAgent.transcript)")
        }
    }
}
