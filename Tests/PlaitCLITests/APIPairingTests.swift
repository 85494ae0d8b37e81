import Foundation
import PlaitAPI
import PlaitPairing
import Testing

/// Pairing from the page: the agent connects to a `plait pair --listen` device, shows the code, and the user's
/// answer by POST decides, as `y` at the terminal would.
@Suite(.serialized) struct APIPairingTests {
    func pairing(_ api: APIAgent) throws -> [String: Any] {
        let reply = try api.client.send("GET", "/api/pairing", headers: [api.bearer])
        let object = try JSONSerialization.jsonObject(with: Data(reply.body)) as? [String: Any]
        return object?["session"] as? [String: Any] ?? [:]
    }

    @Test func aPairingStartedByPostShowsTheCodeAndPairsOnlyOnConfirm() throws {
        try withSandbox { sandbox in
            let devices = try sandbox.initHomes(["alpha", "beta"])
            let (homes, betaID) = (devices.map(\.home), devices[1].id)
            let api = try APIAgent(sandbox: sandbox, home: homes[0])
            defer { #expect(api.agent.stop() == 0, "\(api.agent.log)") }
            let post = { (path: String, fields: [String: Any]) in
                try api.client.send("POST", path, headers: [("Origin", api.origin), api.bearer], json: fields)
            }
            // Nothing to answer yet.
            #expect(try post("/api/pairing/confirm", [:]).status == 409)

            let beta = try RunningPair(
                sandbox: sandbox, ["pair", "--listen", "127.0.0.1:0", "--home", homes[1], "--timeout", "30"],
                answer: "y\n")
            defer { beta.stop() }
            let port = try beta.listeningPort()
            let started = try post("/api/pairing/start", ["address": "127.0.0.1:\(port)"])
            #expect(started.status == 200, "\(started.text)")
            var session: [String: Any] = [:]
            let comparing = try eventually(20) {
                session = try pairing(api)
                return session["state"] as? String == "comparing"
            }
            #expect(comparing, "\(session)")
            // The other side prints its code when it gets there, which under load can be after this side's state
            // changed: wait for the line rather than read it once.
            var shown: String?
            _ = eventually(20) {
                shown = beta.stdout.split(separator: "\n").first { $0.hasPrefix("code: ") }.map { String($0.dropFirst(6)) }
                return shown != nil
            }
            #expect(session["code"] as? String != nil && session["code"] as? String == shown, "\(session) \(beta)")
            #expect(session["device"] as? String == betaID)
            let before = try sandbox.ok(["peers", "--json", "--home", homes[0]]).json()["peers"] as? [Any]
            #expect(before?.isEmpty == true, "nothing is trusted before the answer")
            #expect(try post("/api/pairing/confirm", [:]).status == 200)
            var last: [String: Any] = [:]
            let paired = try eventually(20) {
                last = try pairing(api)
                return last["state"] as? String == "paired"
            }
            #expect(paired, "\(last)")
            beta.finish()
            #expect(beta.process.terminationStatus == 0, "\(beta)")
            let peers = try sandbox.ok(["peers", "--json", "--home", homes[0]]).json()["peers"] as? [[String: Any]]
            #expect(peers?.map { $0["device"] as? String } == [betaID])
        }
    }
}
