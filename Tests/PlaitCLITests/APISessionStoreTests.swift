import Foundation
import PlaitAPI
import PlaitCore
import Testing

/// The page's sessions outlive an agent restart (DESIGN §12): kept in `<home>/api-sessions` as hashes with an
/// expiry, mode 0600; an expired or ended session is not accepted after the restart either. Real agents, real
/// loopback sockets; each agent is stopped by its PID before the next starts on the same home.
@Suite(.serialized) struct APISessionStoreTests {
    func status(_ api: APIAgent, _ session: PageSession) throws -> Int {
        try api.client.send("GET", "/api/lists", headers: session.headers).status
    }

    func hash(_ secret: String) -> String { SHA256.hash(Array(secret.utf8)).hexString }

    @Test func aSessionStillWorksAfterARestartAndTheFileHoldsNoUsableSecret() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            let path = sandbox.home + "/api-sessions"
            var api = try APIAgent(sandbox: sandbox, home: sandbox.home)
            let session = try api.signIn(sandbox)
            #expect(try status(api, session) == 200)
            #expect(api.agent.stop() == 0, "\(api.agent.log)")

            // The file: mode 0600, each secret's SHA-256 and never a secret.
            let attributes = try FileManager.default.attributesOfItem(atPath: path)
            #expect((attributes[.posixPermissions] as? Int).map { $0 & 0o777 } == 0o600, "\(attributes)")
            let text = try String(contentsOfFile: path, encoding: .utf8)
            #expect(!text.contains(session.cookieValue) && !text.contains(session.key), "\(text)")
            #expect(text.contains(hash(session.cookieValue)) && text.contains(hash(session.key)), "\(text)")
            // What the file holds, given as the cookie and the key, is not a session.
            api = try APIAgent(sandbox: sandbox, home: sandbox.home)
            defer { #expect(api.agent.stop() == 0, "\(api.agent.log)") }
            let name = session.cookie.split(separator: "=")[0]
            let hashes = PageSession(cookie: "\(name)=\(hash(session.cookieValue))", key: hash(session.key))
            #expect(try status(api, hashes) == 401)
            // The restarted agent takes the same cookie with the same key, and not the cookie alone.
            #expect(try status(api, session) == 200, "\(api.agent.log)")
            let cookieOnly = try api.client.send("GET", "/api/lists", headers: [("Cookie", session.cookie)])
            #expect(cookieOnly.status == 401, "\(cookieOnly.text)")
        }
    }

    @Test func anExpiredOrEndedSessionIsNotAcceptedAfterARestart() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            let path = sandbox.home + "/api-sessions"
            var api = try APIAgent(sandbox: sandbox, home: sandbox.home)
            let expiring = try api.signIn(sandbox)
            let ended = try api.signIn(sandbox)
            let kept = try api.signIn(sandbox)
            let signOut = try api.client.send(
                "DELETE", "/api/session", headers: ended.headers + [("Origin", api.origin)], json: [:])
            #expect(signOut.status == 204, "\(signOut.text)")
            #expect(try status(api, ended) == 401)
            #expect(api.agent.stop() == 0, "\(api.agent.log)")

            // One session's expiry moves to a minute ago, as if a week had passed since its login.
            var stored = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
            var sessions = try #require(stored["sessions"] as? [[String: Any]])
            #expect(sessions.count == 2, "the ended session is gone from the file: \(sessions)")
            let digest = hash(expiring.cookieValue)
            let index = try #require(sessions.firstIndex { $0["sha256"] as? String == digest }, "\(sessions)")
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

    /// Agents before the page key stored each session as its cookie's hash alone. Such a file still loads (the
    /// agent and its API start, nothing to delete by hand), but its sessions are refused, with or without a key:
    /// a cookie alone is what a server on another port receives. The page signs in again (`plait gui`), and that
    /// login rewrites the file without them.
    @Test func sessionsStoredWithoutAPageKeyLoadButAreRefused() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            let path = sandbox.home + "/api-sessions"
            let name = "plait-session-" + (try sandbox.ok(["id"]).lines.last ?? "").prefix(7)
            // The old format, as an agent before the page key wrote it, with a session valid for another day.
            let old = "AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHHIIIIJJJJKKKKLLLLMMMM"
            let expires = Int(Date().timeIntervalSince1970) + 24 * 3600
            try Data(#"{"sessions":[{"expires":\#(expires),"sha256":"\#(hash(old))"}]}"#.utf8 + [0x0a])
                .write(to: URL(fileURLWithPath: path))

            let api = try APIAgent(sandbox: sandbox, home: sandbox.home)
            defer { #expect(api.agent.stop() == 0, "\(api.agent.log)") }
            #expect(!api.agent.log.contains("api-sessions"), "\(api.agent.log)")
            let cookieOnly = try api.client.send("GET", "/api/lists", headers: [("Cookie", "\(name)=\(old)")])
            #expect(cookieOnly.status == 401, "\(cookieOnly.text)")
            for key in ["", old, hash(old)] {
                let withKey = PageSession(cookie: "\(name)=\(old)", key: key)
                #expect(try status(api, withKey) == 401, "with the key '\(key)'")
            }
            // Signing in again works, and the file then holds only sessions with a key.
            let fresh = try api.signIn(sandbox)
            #expect(try status(api, fresh) == 200)
            let stored = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
            let sessions = stored["sessions"] as? [[String: Any]] ?? []
            #expect(sessions.count == 1 && sessions.allSatisfy { $0["key_sha256"] is String }, "\(sessions)")
            #expect(!sessions.contains { $0["sha256"] as? String == hash(old) }, "\(sessions)")
        }
    }

    /// A new password ends every session (API hostile tester 2026-11-25, G9): the sessions opened before
    /// `plait gui --set-password` worked on for their 7 days, until the agent restarted. Now setting (or clearing)
    /// the password deletes the sessions file, and the running agent ends them all; a new sign-in works, and the
    /// old session does not come back with it.
    @Test func aNewPasswordEndsEverySession() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            let api = try APIAgent(sandbox: sandbox, home: sandbox.home)
            defer { #expect(api.agent.stop() == 0, "\(api.agent.log)") }
            let old = try api.signIn(sandbox)
            #expect(try status(api, old) == 200)
            let set = try sandbox.ok(["gui", "--set-password"], stdin: "a new password of some length\n")
            #expect(set.stdout.contains("every page signed in to this device's agent is signed out"), "\(set)")
            #expect(try status(api, old) == 401)
            let fresh = try api.signIn(sandbox)
            #expect(try status(api, fresh) == 200)
            #expect(try status(api, old) == 401)
        }
    }
}
