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

    /// A pairing started from the page towards an address that takes the connection and says nothing (a wrong
    /// port, a busy or hostile service) stayed "connecting" for the whole 120 s, with no way to cancel it, and then
    /// advised running `plait pair` on both devices (API tester 2026-11-25, G7). It now fails within the handshake
    /// deadline the listening side has (10 s), naming the address.
    @Test func aPairingToASilentAddressFailsWithinTheHandshakeDeadline() throws {
        try withSandbox { sandbox in
            let home = try sandbox.initHomes(["alpha"])[0].home
            let api = try APIAgent(sandbox: sandbox, home: home)
            defer { #expect(api.agent.stop() == 0, "\(api.agent.log)") }
            // Listening, never accepting: the kernel completes the TCP handshake, and nothing answers after it.
            let (silent, port) = try listeningOnLoopback()
            defer { close(silent) }
            let started = ContinuousClock.now
            let reply = try api.client.send(
                "POST", "/api/pairing/start", headers: [("Origin", api.origin), api.bearer],
                json: ["address": "127.0.0.1:\(port)"])
            #expect(reply.status == 200, "\(reply.text)")
            var session: [String: Any] = [:]
            let failed = try eventually(30) {
                session = try pairing(api)
                return session["state"] as? String == "failed"
            }
            #expect(failed, "still \(session) after \(ContinuousClock.now - started)")
            let error = session["error"] as? String ?? ""
            #expect(error.contains("127.0.0.1:\(port)") && error.contains("did not answer within"), "\(session)")
            // Pairing can start again at once.
            #expect(
                try api.client.send(
                    "POST", "/api/pairing/start", headers: [("Origin", api.origin), api.bearer],
                    json: ["address": "127.0.0.1:\(port)"]).status == 200)
        }
    }
}
