import Foundation
import PlaitAPI
import Testing

/// The page's devices part in a real headless browser against real agents and `plait` processes on loopback:
/// trusting a device that asked (the pending list's Trust button), and pairing with the code on screen (confirm,
/// refuse). tests/browser/devices_driver.py clicks; these tests start and stop everything and check each side.
@Suite(.serialized) struct PageDevicesTests {
    /// What a hostile device could call itself; the driver checks it shows as exactly this text.
    static let markupName = #"<img src=x onerror="window.__plaitPwned='device name'">phone"#
    static let markupItem = #"<img src=x onerror="window.__plaitPwned='trusted item'">from the phone"#
    static let phoneList = "From the phone"

    /// The browser and the driver for `scenario`, signed in to `api`'s page; both stopped by `body`'s caller.
    func openPage(
        _ sandbox: Sandbox, _ api: APIAgent, scenario: String, _ extra: [String: Any],
        _ body: (PythonDriver, HeadlessChromium) throws -> Void
    ) throws {
        let chromium = try #require(Chromium.path)
        let python = try DriverPython.locate()
        let gui = try sandbox.ok(["gui", "--home", api.home])
        let loginURL = try #require(gui.lines.first { $0.contains("?code=") }, "\(gui)")
        let browser = try HeadlessChromium(sandbox: sandbox, executable: chromium)
        defer { browser.stop() }
        let options = extra.merging(
            ["devtools_port": browser.devtoolsPort, "login_url": loginURL, "scenario": scenario]) { $1 }
        let driver = try PythonDriver(
            sandbox: sandbox, python: python, script: "devices_driver.py",
            options: String(decoding: try JSONSerialization.data(withJSONObject: options), as: UTF8.self))
        defer { driver.stop() }
        try body(driver, browser)
    }

    /// The agent's paired devices by the API (the store the page's agent writes).
    func pairedDevices(_ api: APIAgent) throws -> [String] {
        let reply = try api.client.send("GET", "/api/peers", headers: [api.bearer])
        let object = try JSONSerialization.jsonObject(with: Data(reply.body)) as? [String: Any]
        return (object?["peers"] as? [[String: Any]] ?? []).compactMap { $0["device"] as? String }
    }

    func pairedDevices(_ sandbox: Sandbox, home: String) throws -> [String] {
        let peers = try sandbox.ok(["peers", "--json", "--home", home]).json()["peers"] as? [[String: Any]]
        return (peers ?? []).compactMap { $0["device"] as? String }
    }

    @Test(.enabled(if: Chromium.path != nil, Comment(rawValue: Chromium.absent)))
    func aDeviceThatAskedIsTrustedWithTheTrustButtonAndThenSyncs() throws {
        try withSandbox { sandbox in
            let laptopHome = sandbox.root + "/laptop"
            let phoneHome = sandbox.root + "/phone"
            try sandbox.ok(["init", "--name", "laptop", "--home", laptopHome])
            try sandbox.ok(["init", "--name", Self.markupName, "--home", phoneHome])
            let laptopID = try sandbox.ok(["id", "--home", laptopHome]).lines.last ?? ""
            let phoneID = try sandbox.ok(["id", "--home", phoneHome]).lines.last ?? ""
            // The phone's user already trusts the laptop; the laptop's user trusts the phone on the page.
            try sandbox.ok(["pair", "--trust", laptopID, "--home", phoneHome])
            try sandbox.ok(["list", "add", Self.phoneList, "--home", phoneHome])
            try sandbox.ok(["add", Self.phoneList, Self.markupItem, "--home", phoneHome])

            let api = try APIAgent(sandbox: sandbox, home: laptopHome)
            defer { #expect(api.agent.stop() == 0, "the laptop's agent exits cleanly: \(api.agent.log)") }
            let sync = ["sync", "--peer", api.agent.address, "--no-discovery", "--timeout", "10", "--home", phoneHome]
            let options = ["device": phoneID, "name": Self.markupName, "item": Self.markupItem]
            try openPage(sandbox, api, scenario: "trust", options) { driver, _ in
                try #require(driver.awaitPhase("signed-in"), "the page did not sign in: \(driver.output)")
                // Unpaired, the phone is refused and listed as pending: the open page shows it (event stream).
                let refused = try sandbox.run(sync)
                #expect(refused.status != 0, "an unpaired device synced: \(refused)")
                #expect(try pairedDevices(api).isEmpty)

                try #require(driver.awaitPhase("trusted"), "Trust on the page failed: \(driver.output)")
                #expect(try pairedDevices(api) == [phoneID], "the API after Trust")
                #expect(try pairedDevices(sandbox, home: laptopHome) == [phoneID], "the store after Trust")
                // Trusted, the phone syncs: its item reaches the laptop, and the page shows it. The agent takes the
                // new trust in when inotify tells it of the commit, which can be just after the page saw it: a
                // refusal in that moment is retried, for at most 5 s.
                var synced = try sandbox.run(sync)
                _ = try eventually(5) {
                    if synced.status != 0 { synced = try sandbox.run(sync) }
                    return synced.status == 0
                }
                #expect(synced.status == 0, "the trusted device could not sync: \(synced)\n\(api.agent.log)")
                let status = driver.wait(seconds: 45)
                #expect(status == 0, "the page driver failed (exit \(status)): \(driver.output)")
                let seen = driver.stdout.split(separator: "\n").last ?? ""
                print("page trust (Chromium headless, debug build): \(seen)")
            }
            let lists = try sandbox.ok(["show", "--json", "--home", laptopHome]).json()["lists"] as? [[String: Any]]
            let list = lists?.first { $0["title"] as? String == Self.phoneList }
            let texts = (list?["pending"] as? [[String: Any]] ?? []).compactMap { $0["text"] as? String }
            #expect(texts == [Self.markupItem], "the laptop's store after the sync: \(lists ?? [])")
        }
    }

    @Test(.enabled(if: Chromium.path != nil, Comment(rawValue: Chromium.absent)))
    func pairingOnThePageShowsTheCodeOfTheOtherSideAndPairsOnlyOnConfirm() throws {
        try withSandbox { sandbox in
            let homes = ["alpha", "beta", "gamma"].map { sandbox.root + "/" + $0 }
            for (name, home) in zip(["alpha", "beta", Self.markupName], homes) {
                try sandbox.ok(["init", "--name", name, "--home", home])
            }
            let alphaID = try sandbox.ok(["id", "--home", homes[0]]).lines.last ?? ""
            let gammaID = try sandbox.ok(["id", "--home", homes[2]]).lines.last ?? ""
            let api = try APIAgent(sandbox: sandbox, home: homes[0])
            defer { #expect(api.agent.stop() == 0, "the agent exits cleanly: \(api.agent.log)") }
            // Two devices in pairing mode whose users say yes: the page's answer alone decides.
            let listen = { (home: String) in
                try RunningPair(
                    sandbox: sandbox, ["pair", "--listen", "127.0.0.1:0", "--home", home, "--timeout", "30"],
                    answer: "y\n")
            }
            let beta = try listen(homes[1])
            defer { beta.stop() }
            let gamma = try listen(homes[2])
            defer { gamma.stop() }
            let options: [String: Any] = [
                "refuse_address": "127.0.0.1:\(try beta.listeningPort())",
                "confirm_address": "127.0.0.1:\(try gamma.listeningPort())", "peer_name": Self.markupName,
            ]
            try openPage(sandbox, api, scenario: "pair", options) { driver, _ in
                let status = driver.wait(seconds: 60)
                #expect(status == 0, "the page driver failed (exit \(status)): \(driver.output)\n\(api.agent.log)")
                let seen = driver.stdout.split(separator: "\n").last ?? ""
                print("page pairing (Chromium headless, debug build): \(seen)")
                // The code on the page is the one the other device printed.
                let codes = driver.phases.compactMap { $0["code"] as? String }
                #expect(codes.count == 2, "\(driver.output)")
                #expect(codes.first == beta.code, "the page showed \(codes), beta \(beta)")
                #expect(codes.last == gamma.code, "the page showed \(codes), gamma \(gamma)")
            }
            // Refused on the page: beta gives up and trusts nothing; confirmed: alpha and gamma trust each other.
            #expect(beta.finish() != 0, "beta paired although the page refused: \(beta)")
            #expect(gamma.finish() == 0, "\(gamma)")
            #expect(try pairedDevices(sandbox, home: homes[1]).isEmpty, "beta trusts a device after a refusal")
            #expect(try pairedDevices(api) == [gammaID], "alpha's paired devices")
            #expect(try pairedDevices(sandbox, home: homes[2]) == [alphaID], "gamma's paired devices")
        }
    }
}

extension RunningPair {
    /// The code this side printed for its user to compare, once it did.
    var code: String? {
        stdout.split(separator: "\n").first { $0.hasPrefix("code: ") }.map { String($0.dropFirst(6)) }
    }
}

extension PythonDriver {
    /// The JSON lines the driver printed so far that name a phase.
    var phases: [[String: Any]] {
        stdout.split(separator: "\n").compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }.filter { $0["phase"] != nil }
    }

    /// Waits up to `seconds` for the driver to reach `phase`; false if it did not (or exited first).
    func awaitPhase(_ phase: String, seconds: Double = 30) -> Bool {
        eventually(seconds) { phases.contains { $0["phase"] as? String == phase } || !isRunning }
            && phases.contains { $0["phase"] as? String == phase }
    }
}
