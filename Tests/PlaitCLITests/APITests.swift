import Foundation
import PlaitAPI
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A `plait agent` serving its API on a free loopback port, as a browser or a script reaches it.
final class APIAgent {
    let agent: RunningAgent
    let home: String
    let client: LoopbackClient
    let token: String

    init(sandbox: Sandbox, home: String, environment: [String: String] = [:]) throws {
        self.home = home
        try? FileManager.default.removeItem(atPath: home + "/api.addr")
        let agent = try RunningAgent(
            sandbox: sandbox, home: home, extra: ["--api-listen", "127.0.0.1:0"], environment: environment)
        self.agent = agent
        var found: LoopbackClient?
        _ = eventually(20) {
            found = LoopbackClient(addressFileOf: home)
            return found != nil || !agent.process.isRunning
        }
        guard let found else {
            agent.stop()
            throw CLITestFailure("the agent wrote no api.addr: \(agent.log)")
        }
        client = found
        token = try sandbox.ok(["gui", "--token", "--home", home]).lines.last ?? ""
    }

    var origin: String { "http://\(client.authority)" }
    var bearer: (String, String) { ("Authorization", "Bearer \(token)") }

    /// `plait gui`'s login code (from the URL it prints).
    func loginCode(_ sandbox: Sandbox) throws -> String {
        let url = try sandbox.ok(["gui", "--home", home]).lines.last ?? ""
        guard url.hasPrefix(origin + "/?code="), let code = url.split(separator: "=").last else {
            throw CLITestFailure("`plait gui` printed no login URL of \(origin): \(url)")
        }
        return String(code)
    }

    /// Exchanges a code the way the page does; returns the reply (204 and a cookie, or a refusal).
    func redeem(_ code: String) throws -> LoopbackClient.Reply {
        try client.send("POST", "/api/session", headers: [("Origin", origin)], json: ["code": code])
    }
}

/// The local API's security rules (DESIGN §12), against the real agent on real loopback sockets.
@Suite(.serialized) struct APISecurityTests {
    /// The Cookie header value that a reply's Set-Cookie asks for.
    func cookie(of reply: LoopbackClient.Reply) -> String? {
        reply.header("Set-Cookie")?.split(separator: ";").first.map(String.init)
    }

    @Test func everyAPIRequestNeedsATokenOrASessionAndEveryAnswerCarriesTheSecurityHeaders() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            let api = try APIAgent(sandbox: sandbox, home: sandbox.home)
            defer { #expect(api.agent.stop() == 0, "\(api.agent.log)") }
            let bare = try api.client.send("GET", "/api/status")
            #expect(bare.status == 401, "\(bare.text)")
            #expect(bare.errorMessage?.contains("plait gui") == true, "\(bare.text)")
            let wrong = try api.client.send("GET", "/api/lists", headers: [("Authorization", "Bearer AAAA")])
            #expect(wrong.status == 401, "\(wrong.text)")
            let guessed = try api.client.send("GET", "/api/lists", headers: [("Cookie", "plait-session-x=y")])
            #expect(guessed.status == 401, "\(guessed.text)")
            let edit = try api.client.send(
                "POST", "/api/edit", headers: [("Origin", api.origin)], json: ["op": "list.add", "title": "x"])
            #expect(edit.status == 401, "\(edit.text)")

            let status = try api.client.send("GET", "/api/status", headers: [api.bearer])
            #expect(status.status == 200, "\(status.text)")
            let body = try JSONSerialization.jsonObject(with: Data(status.body)) as? [String: Any]
            let cli = try sandbox.status()
            #expect(body?["digest"] as? String == cli["digest"] as? String)
            #expect(body?["device"] as? String == cli["device"] as? String)
            for reply in [bare, status] {
                #expect(reply.header("Content-Type") == "application/json")
                #expect(reply.header("Content-Security-Policy") == "default-src 'self'; frame-ancestors 'none'")
                #expect(reply.header("X-Content-Type-Options") == "nosniff")
                #expect(reply.header("Referrer-Policy") == "no-referrer")
                #expect(reply.header("Cache-Control") == "no-store")
                #expect(!reply.headers.contains { $0.name.lowercased().hasPrefix("access-control-") })
            }
            let missing = try api.client.send("GET", "/api/nothing-here", headers: [api.bearer])
            #expect(missing.status == 404 && missing.errorMessage != nil, "\(missing.text)")
        }
    }

    @Test func aForeignHostAForeignOriginAndOriginNullAreRefused() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            let api = try APIAgent(sandbox: sandbox, home: sandbox.home)
            defer { #expect(api.agent.stop() == 0, "\(api.agent.log)") }
            let port = api.client.port
            // DNS rebinding: a page of evil.example made its name resolve to 127.0.0.1; the browser sends its Host.
            for host in ["evil.example:\(port)", "127.0.0.1:1", "localhost.evil.example:\(port)", ""] {
                let reply = try api.client.send("GET", "/api/lists", headers: [("Host", host), api.bearer])
                #expect(reply.status == 403, "Host '\(host)': \(reply.text)")
            }
            for host in ["127.0.0.1:\(port)", "localhost:\(port)", "[::1]:\(port)"] {
                let reply = try api.client.send("GET", "/api/lists", headers: [("Host", host), api.bearer])
                #expect(reply.status == 200, "Host '\(host)': \(reply.text)")
            }
            let add = ["op": "list.add", "title": "Groceries"]
            for origin in ["http://evil.example", "null", "http://127.0.0.1:\(port + 1)", "https://127.0.0.1:\(port)"] {
                let reply = try api.client.send("POST", "/api/edit", headers: [("Origin", origin), api.bearer], json: add)
                #expect(reply.status == 403, "Origin '\(origin)': \(reply.text)")
            }
            let stored = try sandbox.ok(["lists", "--json"]).json()["lists"] as? [Any]
            #expect(stored?.isEmpty == true, "nothing refused was written: \(String(describing: stored))")
            let text = try api.client.send(
                "POST", "/api/edit", headers: [("Origin", api.origin), api.bearer, ("Content-Type", "text/plain")],
                body: Array(#"{"op":"list.add","title":"x"}"#.utf8))
            #expect(text.status == 415, "\(text.text)")
            // Declared, not sent: the guard refuses by Content-Length before reading, and 8 MiB pushed at a server
            // that stopped reading would block the client's write (until the 30 s idle close).
            let huge = try api.client.send(
                "POST", "/api/edit",
                headers: [
                    ("Origin", api.origin), api.bearer, ("Content-Type", "application/json"),
                    ("Content-Length", "\(APILimits.maxBody + 1)"),
                ])
            #expect(huge.status == 413, "\(huge.text)")
            let own = try api.client.send("POST", "/api/edit", headers: [("Origin", api.origin), api.bearer], json: add)
            #expect(own.status == 200, "\(own.text)")
            // A script with the token may leave Origin out; a browser session may not.
            let script = try api.client.send("POST", "/api/edit", headers: [api.bearer], json: ["op": "list.add", "title": "B"])
            #expect(script.status == 200, "\(script.text)")
        }
    }

    @Test func aLoginCodeWorksOnceAndNotAfterItExpired() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            let api = try APIAgent(sandbox: sandbox, home: sandbox.home)
            defer { #expect(api.agent.stop() == 0, "\(api.agent.log)") }
            let code = try api.loginCode(sandbox)
            let first = try api.redeem(code)
            #expect(first.status == 204, "\(first.text)")
            let setCookie = first.header("Set-Cookie") ?? ""
            let device = try sandbox.ok(["id"]).lines.last ?? ""
            #expect(setCookie.hasPrefix("plait-session-\(device.prefix(7))="), "\(setCookie)")
            #expect(setCookie.contains("HttpOnly") && setCookie.contains("SameSite=Strict"), "\(setCookie)")
            let session = try #require(cookie(of: first))
            let lists = try api.client.send("GET", "/api/lists", headers: [("Cookie", session)])
            #expect(lists.status == 200, "\(lists.text)")
            // The session is a browser's: a change needs the page's Origin.
            let noOrigin = try api.client.send(
                "POST", "/api/edit", headers: [("Cookie", session)], json: ["op": "list.add", "title": "x"])
            #expect(noOrigin.status == 403, "\(noOrigin.text)")
            let again = try api.redeem(code)
            #expect(again.status == 401, "a used code: \(again.text)")
            #expect(cookie(of: again) == nil)
        }
        try withSandbox { sandbox in
            try sandbox.initialize()
            let api = try APIAgent(
                sandbox: sandbox, home: sandbox.home, environment: ["PLAIT_TEST_LOGIN_CODE_MS": "300"])
            defer { #expect(api.agent.stop() == 0, "\(api.agent.log)") }
            let code = try api.loginCode(sandbox)
            // Waiting out the (shortened) lifetime is the point of this test, not a synchronisation.
            usleep(400_000)
            let late = try api.redeem(code)
            #expect(late.status == 401, "an expired code: \(late.text)")
            #expect(late.errorMessage?.contains("expired") == true)
        }
    }

    @Test func aSessionCookieOfAnotherDevicesAgentIsNotAccepted() throws {
        try withSandbox { sandbox in
            let homes = [sandbox.root + "/a", sandbox.root + "/b"]
            for (index, home) in homes.enumerated() {
                try sandbox.ok(["init", "--name", "device-\(index)", "--home", home])
            }
            let a = try APIAgent(sandbox: sandbox, home: homes[0])
            defer { #expect(a.agent.stop() == 0, "\(a.agent.log)") }
            let b = try APIAgent(sandbox: sandbox, home: homes[1])
            defer { #expect(b.agent.stop() == 0, "\(b.agent.log)") }
            #expect(a.client.port != b.client.port)
            let mine = try #require(cookie(of: try a.redeem(try a.loginCode(sandbox))))
            let theirs = try #require(cookie(of: try b.redeem(try b.loginCode(sandbox))))
            #expect(mine.split(separator: "=")[0] != theirs.split(separator: "=")[0], "cookie names differ per device")
            #expect(try a.client.send("GET", "/api/lists", headers: [("Cookie", mine)]).status == 200)
            // A browser sends every localhost cookie to every port: B's cookie reaches A, as is and renamed.
            let asIs = try a.client.send("GET", "/api/lists", headers: [("Cookie", theirs)])
            #expect(asIs.status == 401, "\(asIs.text)")
            let value = theirs.split(separator: "=", maxSplits: 1)[1]
            let renamed = "\(mine.split(separator: "=")[0])=\(value)"
            let forged = try a.client.send("GET", "/api/lists", headers: [("Cookie", renamed)])
            #expect(forged.status == 401, "\(forged.text)")
        }
    }

    /// Browsers send a 127.0.0.1 cookie to every port of 127.0.0.1: a local user's server on another port that the
    /// signed-in user visits receives the session cookie, and replays it from its own process (it can send any Host
    /// and leave Origin out on a GET). The cookie alone must not be a session (found by a hostile tester).
    @Test func aSessionCookieAloneAsAServerOnAnotherPortReceivesItIsRefused() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            let api = try APIAgent(sandbox: sandbox, home: sandbox.home)
            defer { #expect(api.agent.stop() == 0, "\(api.agent.log)") }
            let login = try api.redeem(try api.loginCode(sandbox))
            #expect((200..<300).contains(login.status), "\(login.text)")
            // All the other server has: the Cookie header the browser sent it.
            let leaked = try #require(cookie(of: login))
            let show = try api.client.send("GET", "/api/show", headers: [("Cookie", leaked)])
            #expect(show.status == 401, "the cookie alone was accepted: \(show.status) \(show.text.prefix(200))")
            let events = try api.client.send("GET", "/api/events?timeout=0", headers: [("Cookie", leaked)])
            #expect(events.status == 401, "\(events.status) \(events.text.prefix(200))")
        }
    }

    @Test func aTakenPortTurnsTheAPIOffWithAWarningAndTheAgentStillSyncs() throws {
        try withSandbox { sandbox in
            let homes = [sandbox.root + "/a", sandbox.root + "/b"]
            var ids: [String] = []
            for (index, home) in homes.enumerated() {
                try sandbox.ok(["init", "--name", "device-\(index)", "--home", home])
                ids.append(try sandbox.ok(["id", "--home", home]).lines.last ?? "")
            }
            try sandbox.ok(["pair", "--trust", ids[1], "--home", homes[0]])
            try sandbox.ok(["pair", "--trust", ids[0], "--home", homes[1]])
            try sandbox.ok(["list", "add", "Groceries", "--home", homes[1]])
            let (listener, port) = try occupyLoopbackPort()
            defer { close(listener) }
            let agent = try RunningAgent(
                sandbox: sandbox, home: homes[1], extra: ["--api-listen", "127.0.0.1:\(port)"])
            defer { #expect(agent.stop() == 0, "\(agent.log)") }
            #expect(
                eventually(10) { agent.log.contains("local API off: 127.0.0.1:\(port) is in use") }, "\(agent.log)")
            #expect(!FileManager.default.fileExists(atPath: homes[1] + "/api.addr"))
            try sandbox.ok(["sync", "--peer", agent.address, "--home", homes[0]])
            let titles = try sandbox.ok(["lists", "--json", "--home", homes[0]]).json()["lists"] as? [[String: Any]]
            #expect(titles?.map { $0["title"] as? String } == ["Groceries"], "the agent synced without its API")
        }
    }

    /// A listening TCP socket on a free loopback port, as another program holding the API's port would.
    func occupyLoopbackPort() throws -> (Int32, Int) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { raw in
                bind(descriptor, raw, length) == 0 && listen(descriptor, 1) == 0
                    && getsockname(descriptor, raw, &length) == 0
            }
        }
        guard descriptor >= 0, bound else { throw CLITestFailure("cannot occupy a loopback port") }
        return (descriptor, Int(UInt16(bigEndian: address.sin_port)))
    }
}
