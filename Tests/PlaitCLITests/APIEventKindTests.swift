import Foundation
import PlaitAPI
import Testing

/// The event kinds the page needs beyond changes and peers, from the real agent: `pairing.code` when a pairing
/// started from the page shows its code, and `sync.progress` saying how many changes are still missing from the
/// peer being pulled from.
@Suite(.serialized) struct APIEventKindTests {
    /// Every event the agent holds, as the long-poll answers them at once.
    func events(_ api: APIAgent) throws -> [[String: Any]] {
        let (status, body) = try api.get("/api/events?since=0&timeout=0")
        #expect(status == 200, "\(body)")
        let object = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
        return object?["events"] as? [[String: Any]] ?? []
    }

    /// A's agent with its API, then B's agent dialling it and sending changes in batches of 50; both stopped by
    /// the caller.
    func agentsOfAAndB(_ sandbox: Sandbox, _ devices: [(home: String, id: String)]) throws -> (APIAgent, RunningAgent) {
        let apiA = try APIAgent(sandbox: sandbox, home: devices[0].home)
        let config = sandbox.root + "/b.toml"
        try "[sync]\nbatch_changes = 50\n".write(toFile: config, atomically: true, encoding: .utf8)
        do {
            let agentB = try RunningAgent(
                sandbox: sandbox, home: devices[1].home, extra: ["--peer", apiA.agent.address, "--api-listen", ""],
                environment: ["PLAIT_CONFIG": config])
            return (apiA, agentB)
        } catch {
            _ = apiA.agent.stop()
            throw error
        }
    }

    @Test func aPairingShowingItsCodePublishesIt() throws {
        try withSandbox { sandbox in
            let devices = try sandbox.initHomes(["alpha", "beta"])
            let (homes, betaID) = (devices.map(\.home), devices[1].id)
            let api = try APIAgent(sandbox: sandbox, home: homes[0])
            defer { #expect(api.agent.stop() == 0, "\(api.agent.log)") }
            let beta = try RunningPair(
                sandbox: sandbox, ["pair", "--listen", "127.0.0.1:0", "--home", homes[1], "--timeout", "30"],
                answer: "n\n")
            defer { beta.stop() }
            let port = try beta.listeningPort()
            let started = try api.client.send(
                "POST", "/api/pairing/start", headers: [("Origin", api.origin), api.bearer],
                json: ["address": "127.0.0.1:\(port)"])
            #expect(started.status == 200, "\(started.text)")
            var published: [String: Any]?
            let seen = try eventually(20) {
                published = try events(api).first { $0["kind"] as? String == "pairing.code" }?["data"]
                    as? [String: Any]
                return published != nil
            }
            #expect(seen, "\(api.agent.log)")
            // The other side prints its code when it gets there, which under load can be after this side's state
            // changed: wait for the line rather than read it once.
            var shown: String?
            _ = eventually(20) {
                shown = beta.stdout.split(separator: "\n").first { $0.hasPrefix("code: ") }.map { String($0.dropFirst(6)) }
                return shown != nil
            }
            #expect(published?["code"] as? String != nil && published?["code"] as? String == shown, "\(beta)")
            #expect(published?["device"] as? String == betaID)
            #expect(published?["name"] as? String == "beta")
            _ = try api.client.send(
                "POST", "/api/pairing/refuse", headers: [("Origin", api.origin), api.bearer], json: [:])
        }
    }

    /// Events from `since` on, long-polled (each poll returns as soon as one is published) until `done` says the
    /// events so far suffice, or `seconds` passed; all of them, in order.
    func events(
        _ api: APIAgent, after since: Int, seconds: Double, until done: ([[String: Any]]) -> Bool
    ) throws -> [[String: Any]] {
        var seen: [[String: Any]] = []
        var position = since
        let deadline = Date().addingTimeInterval(seconds)
        while !done(seen), Date() < deadline {
            let (status, body) = try api.get("/api/events?since=\(position)&timeout=5")
            #expect(status == 200, "\(body)")
            let object = try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
            let batch = object?["events"] as? [[String: Any]] ?? []
            seen += batch
            position = batch.last?["seq"] as? Int ?? position
        }
        return seen
    }

    /// A pairing started from the API announces each move of its state (the page follows these, never polls):
    /// connecting, comparing (with the code), confirmed once the user says yes here, paired once the other side did.
    @Test func aPairingFromTheAPIPublishesEachMoveOfItsState() throws {
        try withSandbox { sandbox in
            let devices = try sandbox.initHomes(["alpha", "beta"])
            let (homes, betaID) = (devices.map(\.home), devices[1].id)
            let api = try APIAgent(sandbox: sandbox, home: homes[0])
            defer { #expect(api.agent.stop() == 0, "\(api.agent.log)") }
            let start = try events(api).last?["seq"] as? Int ?? 0
            let beta = try RunningPair(
                sandbox: sandbox, ["pair", "--listen", "127.0.0.1:0", "--home", homes[1], "--timeout", "30"],
                answer: "y\n")
            defer { beta.stop() }
            let port = try beta.listeningPort()
            let post = { (path: String) in
                try api.client.send(
                    "POST", path, headers: [("Origin", api.origin), api.bearer],
                    json: path.hasSuffix("start") ? ["address": "127.0.0.1:\(port)"] : [:])
            }
            #expect(try post("/api/pairing/start").status == 200)
            let states = { (events: [[String: Any]]) in
                events.filter { $0["kind"] as? String == "pairing.state" }
                    .compactMap { ($0["data"] as? [String: Any])?["state"] as? String }
            }
            var seen = try events(api, after: start, seconds: 20) { states($0).contains("comparing") }
            #expect(states(seen) == ["connecting", "comparing"], "\(seen)")
            let comparing = seen.last { $0["kind"] as? String == "pairing.state" }?["data"] as? [String: Any]
            #expect(comparing?["device"] as? String == betaID, "\(seen)")
            #expect(comparing?["name"] as? String == "beta")

            #expect(try post("/api/pairing/confirm").status == 200)
            let last = seen.last?["seq"] as? Int ?? start
            seen = try events(api, after: last, seconds: 20) { states($0).contains("paired") }
            #expect(states(seen) == ["confirmed", "paired"], "\(seen)")
            beta.finish()
            #expect(beta.process.terminationStatus == 0, "\(beta)")
        }
    }

    /// B holds 151 changes A lacks and sends them in batches of 50: each of A's progress events says how many
    /// are still missing, falling to 0, and what was pulled plus what was missing is B's whole offer.
    @Test func syncProgressSaysHowManyChangesAreStillMissing() throws {
        try withSandbox { sandbox in
            let devices = try sandbox.pairedHomes(["a", "b"])
            let script = "list add Many\n" + (1...150).map { "add Many item\($0)\n" }.joined()
            try sandbox.ok(["batch", "--home", devices[1].home], stdin: script)
            let (apiA, agentB) = try agentsOfAAndB(sandbox, devices)
            defer { #expect(apiA.agent.stop() == 0, "\(apiA.agent.log)") }
            defer { #expect(agentB.stop() == 0, "\(agentB.log)") }
            var progress: [[String: Any]] = []
            let done = try eventually(20) {
                progress = try events(apiA).filter {
                    $0["kind"] as? String == "sync.progress"
                        && ($0["data"] as? [String: Any])?["device"] as? String == devices[1].id
                }.compactMap { $0["data"] as? [String: Any] }
                return progress.contains { $0["missing"] as? Int == 0 && ($0["pulled"] as? Int ?? 0) > 0 }
            }
            #expect(done, "A's progress events: \(progress)\n\(apiA.agent.log)")
            let missing = progress.compactMap { $0["missing"] as? Int }
            #expect(missing.count == progress.count, "every progress event says what is missing: \(progress)")
            // Batches of 50 (the receiver may integrate several at once): at least one event mid-way, one at the end.
            #expect(progress.count >= 2, "151 changes in batches of 50: \(progress)\n\(agentB.log)")
            #expect((missing.first ?? 0) > 0, "\(progress)")
            #expect(missing == missing.sorted(by: >), "missing only falls: \(missing)")
            let first = try #require(progress.first)
            let pulledAtEnd = progress.compactMap { $0["pulled"] as? Int }.max() ?? 0
            #expect(
                (first["pulled"] as? Int ?? 0) + (first["missing"] as? Int ?? 0) == pulledAtEnd,
                "pulled + missing is B's whole offer: \(progress)")
        }
    }

    /// Two agents already connected and in sync: B gets 2,000 changes, its Notify tells A, and A pulls them in
    /// batches of 50. What is missing counts against what B's Notify said, not against B's Hello of before —
    /// which A already held, so every event of such a pull said "missing 0" while most were still to come.
    @Test func syncProgressOfAPullANotifyStartedCountsAgainstTheNotify() throws {
        try withSandbox { sandbox in
            let devices = try sandbox.pairedHomes(["a", "b"])
            let (apiA, agentB) = try agentsOfAAndB(sandbox, devices)
            defer { #expect(apiA.agent.stop() == 0, "\(apiA.agent.log)") }
            defer { #expect(agentB.stop() == 0, "\(agentB.log)") }
            // Connected and in sync (each pulled the other's timeline.begin of `plait init`).
            let summary = { (home: String) in try sandbox.ok(["status", "--json", "--home", home]).json()["summary"] }
            let inSync = try eventually(20) {
                let (a, b) = (try summary(devices[0].home) as? String, try summary(devices[1].home) as? String)
                return a != nil && a == b && a?.contains(",") == true
            }
            try #require(inSync, "\(apiA.agent.log)\n\(agentB.log)")
            let before = try events(apiA).compactMap { $0["seq"] as? Int }.max() ?? 0

            let total = 2_000
            let script = "list add Many\n" + (1..<total).map { "add Many item\($0)\n" }.joined()
            try sandbox.ok(["batch", "--home", devices[1].home], stdin: script)
            var progress: [[String: Any]] = []
            let done = try eventually(30) {
                progress = try events(apiA).filter {
                    ($0["seq"] as? Int ?? 0) > before && $0["kind"] as? String == "sync.progress"
                        && ($0["data"] as? [String: Any])?["device"] as? String == devices[1].id
                }.compactMap { $0["data"] as? [String: Any] }
                return progress.reduce(0) { $0 + ($1["batch"] as? Int ?? 0) } >= total
            }
            #expect(done, "A's progress events: \(progress)\n\(apiA.agent.log)")
            // The receiver commits what arrived while the last batch committed, so batches merge; 40 of them make
            // several commits.
            #expect(progress.count >= 2, "\(progress)")
            var pulled = 0
            for event in progress {
                pulled += event["batch"] as? Int ?? 0
                #expect(
                    (event["missing"] as? Int).map { $0 + pulled } == total,
                    "what was pulled so far and what is missing are B's 2,000 changes: \(event) of \(progress)")
            }
        }
    }
}
