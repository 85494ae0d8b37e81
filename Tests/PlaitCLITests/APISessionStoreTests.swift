import Foundation
import PlaitAPI
import PlaitCore
import Testing

/// The page's sessions outlive an agent restart (DESIGN §12): kept in `<home>/api-sessions` as hashes with an
/// expiry, mode 0600; an expired or ended session is not accepted after the restart either. Real agents, real
/// loopback sockets; each agent is stopped by its PID before the next starts on the same home.
@Suite(.serialized) struct APISessionStoreTests {
    func cookie(of reply: LoopbackClient.Reply) -> String? {
        reply.header("Set-Cookie")?.split(separator: ";").first.map(String.init)
    }

    func status(_ api: APIAgent, _ cookie: String) throws -> Int {
        try api.client.send("GET", "/api/lists", headers: [("Cookie", cookie)]).status
    }

    /// Logs in with a `plait gui` code; the Cookie header value.
    func logIn(_ api: APIAgent, _ sandbox: Sandbox) throws -> String {
        let reply = try api.redeem(try api.loginCode(sandbox))
        #expect(reply.status == 204, "\(reply.text)")
        return try #require(cookie(of: reply))
    }

    @Test func aSessionStillWorksAfterARestartAndTheFileHoldsNoUsableSecret() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            let path = sandbox.home + "/api-sessions"
            var api = try APIAgent(sandbox: sandbox, home: sandbox.home)
            let session = try logIn(api, sandbox)
            #expect(try status(api, session) == 200)
            #expect(api.agent.stop() == 0, "\(api.agent.log)")

            // The file: mode 0600, the secret's SHA-256 and never the secret.
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            #expect((attributes[.posixPermissions] as? Int).map { $0 & 0o777 } == 0o600, "\(attributes)")
            let text = try String(contentsOfFile: path, encoding: .utf8)
            let secret = String(session.split(separator: "=", maxSplits: 1)[1])
            #expect(!text.contains(secret), "\(text)")
            #expect(text.contains(SHA256.hash(Array(secret.utf8)).hexString), "\(text)")
            // What the file holds, given as a cookie, is not a session.
            api = try APIAgent(sandbox: sandbox, home: sandbox.home)
            defer { #expect(api.agent.stop() == 0, "\(api.agent.log)") }
            let name = session.split(separator: "=")[0]
            let hash = SHA256.hash(Array(secret.utf8)).hexString
            #expect(try status(api, "\(name)=\(hash)") == 401)
            // The restarted agent takes the same cookie.
            #expect(try status(api, session) == 200, "\(api.agent.log)")
        }
    }

    @Test func anExpiredOrEndedSessionIsNotAcceptedAfterARestart() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            let path = sandbox.home + "/api-sessions"
            var api = try APIAgent(sandbox: sandbox, home: sandbox.home)
            let expiring = try logIn(api, sandbox)
            let ended = try logIn(api, sandbox)
            let kept = try logIn(api, sandbox)
            let signOut = try api.client.send(
                "DELETE", "/api/session", headers: [("Origin", api.origin), ("Cookie", ended)], json: [:])
            #expect(signOut.status == 204, "\(signOut.text)")
            #expect(try status(api, ended) == 401)
            #expect(api.agent.stop() == 0, "\(api.agent.log)")

            // One session's expiry moves to a minute ago, as if a week had passed since its login.
            let secret = String(expiring.split(separator: "=", maxSplits: 1)[1])
            let hash = SHA256.hash(Array(secret.utf8)).hexString
            var stored = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
            var sessions = try #require(stored["sessions"] as? [[String: Any]])
            #expect(sessions.count == 2, "the ended session is gone from the file: \(sessions)")
            let index = try #require(sessions.firstIndex { $0["sha256"] as? String == hash }, "\(sessions)")
            sessions[index]["expires"] = Int(Date().timeIntervalSince1970) - 60
            stored["sessions"] = sessions
            try JSONSerialization.data(withJSONObject: stored).write(to: URL(fileURLWithPath: path))

            api = try APIAgent(sandbox: sandbox, home: sandbox.home)
            defer { #expect(api.agent.stop() == 0, "\(api.agent.log)") }
            #expect(try status(api, expiring) == 401, "an expired session")
            #expect(try status(api, ended) == 401, "a session ended before the restart")
            #expect(try status(api, kept) == 200, "\(api.agent.log)")
        }
    }
}
