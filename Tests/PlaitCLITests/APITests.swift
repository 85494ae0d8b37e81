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

    /// Exchanges a code the way the page does; returns the reply (200, a cookie and the page key; or a refusal).
    func redeem(_ code: String) throws -> LoopbackClient.Reply {
        try client.send("POST", "/api/session", headers: [("Origin", origin)], json: ["code": code])
    }

    /// Signs in as the page does: the session's two headers, the Cookie the browser sends to every port of the
    /// host and the page key only the page's own origin holds.
    func signIn(_ sandbox: Sandbox) throws -> PageSession {
        let reply = try redeem(try loginCode(sandbox))
        guard reply.status == 200, let session = PageSession(reply) else {
            throw CLITestFailure("the sign-in gave no cookie and page key: \(reply.status) \(reply.text)")
        }
        return session
    }
}

/// A session as a browser holds it after POST /api/session.
struct PageSession {
    /// `plait-session-XXXXXXX=VALUE`, what the browser sends in Cookie (to every port of the host).
    let cookie: String
    /// What the page keeps in localStorage and sends in `Plait-Page-Key`.
    let key: String

    /// From the sign-in's answer; nil when it set no cookie or gave no key.
    init?(_ reply: LoopbackClient.Reply) {
        guard let cookie = reply.header("Set-Cookie")?.split(separator: ";").first.map(String.init),
            let body = try? JSONSerialization.jsonObject(with: Data(reply.body)) as? [String: Any],
            let key = body["page_key"] as? String
        else { return nil }
        self.init(cookie: cookie, key: key)
    }

    init(cookie: String, key: String) {
        self.cookie = cookie
        self.key = key
    }

    /// The cookie's value alone.
    var cookieValue: String { String(cookie.split(separator: "=", maxSplits: 1)[1]) }
    /// Both headers, as the page sends them.
    var headers: [(String, String)] { [("Cookie", cookie), ("Plait-Page-Key", key)] }
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
            #expect(first.status == 200, "\(first.text)")
            let setCookie = first.header("Set-Cookie") ?? ""
            let device = try sandbox.ok(["id"]).lines.last ?? ""
            #expect(setCookie.hasPrefix("plait-session-\(device.prefix(7))="), "\(setCookie)")
            #expect(setCookie.contains("HttpOnly") && setCookie.contains("SameSite=Strict"), "\(setCookie)")
            let session = try #require(PageSession(first), "\(first.text)")
            #expect(session.key.count >= 26 && session.key != session.cookieValue, "\(first.text)")
            let lists = try api.client.send("GET", "/api/lists", headers: session.headers)
            #expect(lists.status == 200, "\(lists.text)")
            // The session is a browser's: a change needs the page's Origin.
            let noOrigin = try api.client.send(
                "POST", "/api/edit", headers: session.headers, json: ["op": "list.add", "title": "x"])
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
            let mine = try a.signIn(sandbox)
            let theirs = try b.signIn(sandbox)
            let name = { (session: PageSession) in session.cookie.split(separator: "=")[0] }
            #expect(name(mine) != name(theirs), "cookie names differ per device")
            #expect(try a.client.send("GET", "/api/lists", headers: mine.headers).status == 200)
            // A browser sends every localhost cookie to every port: B's cookie reaches A, as is and renamed, even
            // with B's key (which B's page would never send to A's origin).
            let asIs = try a.client.send("GET", "/api/lists", headers: theirs.headers)
            #expect(asIs.status == 401, "\(asIs.text)")
            let renamed = PageSession(cookie: "\(name(mine))=\(theirs.cookieValue)", key: theirs.key)
            let forged = try a.client.send("GET", "/api/lists", headers: renamed.headers)
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

    /// A session is its cookie and its page key together, of the same session: either alone, or with the key of
    /// another session, is refused; the key goes in the `Plait-Page-Key` header, and in the query only on the event
    /// stream (an EventSource cannot set a header), where events then arrive; signing out needs both too.
    @Test func aSessionIsItsCookieWithItsPageKeyOnEveryRouteTheStreamIncluded() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            try sandbox.ok(["list", "add", "Groceries"])
            let api = try APIAgent(sandbox: sandbox, home: sandbox.home)
            defer { #expect(api.agent.stop() == 0, "\(api.agent.log)") }
            let session = try api.signIn(sandbox)
            let other = try api.signIn(sandbox)
            func show(_ headers: [(String, String)], query: String = "") throws -> LoopbackClient.Reply {
                try api.client.send("GET", "/api/show" + query, headers: headers)
            }
            let both = try show(session.headers)
            #expect(both.status == 200 && both.text.contains("Groceries"), "\(both.status) \(both.text.prefix(200))")
            let wrongKey = (session.key.first == "A" ? "B" : "A") + session.key.dropFirst()
            let refused: [(String, [(String, String)])] = [
                // Its first character changed (to "A" it was the same key whenever the key began with "A").
                ("a wrong key", [("Cookie", session.cookie), ("Plait-Page-Key", wrongKey)]),
                ("the key of another session", [("Cookie", session.cookie), ("Plait-Page-Key", other.key)]),
                ("an empty key", [("Cookie", session.cookie), ("Plait-Page-Key", "")]),
                ("the key without the cookie", [("Plait-Page-Key", session.key)]),
            ]
            for (what, headers) in refused {
                let reply = try show(headers)
                #expect(reply.status == 401, "\(what): \(reply.status) \(reply.text.prefix(200))")
            }
            // The query carries the key on the event stream only.
            let inQuery = try show([("Cookie", session.cookie)], query: "?page_key=\(session.key)")
            #expect(inQuery.status == 401, "\(inQuery.status) \(inQuery.text.prefix(200))")
            let edit = try api.client.send(
                "POST", "/api/edit", headers: session.headers + [("Origin", api.origin)],
                json: ["op": "add", "list": "Groceries", "text": "milk"])
            #expect(edit.status == 200, "\(edit.text)")
            // The long-poll with the key in its header: it answers as soon as there are events after `since`.
            var since = 0
            var applied = false
            for _ in 0..<10 where !applied {
                let poll = try api.client.send("GET", "/api/events?since=\(since)&timeout=30", headers: session.headers)
                try #require(poll.status == 200, "\(poll.status) \(poll.text)")
                let events = (try JSONSerialization.jsonObject(with: Data(poll.body)) as? [String: Any])?["events"]
                for event in events as? [[String: Any]] ?? [] {
                    since = max(since, event["seq"] as? Int ?? 0)
                    applied = applied || event["kind"] as? String == "change.applied"
                }
            }
            #expect(applied, "the edit's event reached the long-poll")

            // The stream as the page opens it: the cookie, and the key in the query.
            let cookieOnly = EventStreamClient(port: api.client.port, token: "")
            try cookieOnly.open("/api/events/stream", headers: [("Cookie", session.cookie)])
            #expect(cookieOnly.status == 401)
            cookieOnly.close()
            let stream = EventStreamClient(port: api.client.port, token: "")
            defer { stream.close() }
            try stream.open(
                "/api/events/stream?page_key=\(session.key)&since=\(since)", headers: [("Cookie", session.cookie)])
            #expect(stream.status == 200, "\(stream.headers)")
            try sandbox.ok(["add", "Groceries", "bread"])
            var event: ServerSentEvent?
            repeat {
                event = try stream.nextEvent(timeout: 10)
            } while event != nil && event?.event != "change.applied"
            #expect(event?.payload["kind"] as? String == "item.create", "\(String(describing: event))")

            // Signing out: the cookie alone is refused (it signs no one out), both end the session.
            let cookieOut = try api.client.send(
                "DELETE", "/api/session", headers: [("Origin", api.origin), ("Cookie", session.cookie)], json: [:])
            #expect(cookieOut.status == 401, "\(cookieOut.text)")
            #expect(try show(session.headers).status == 200)
            let out = try api.client.send(
                "DELETE", "/api/session", headers: session.headers + [("Origin", api.origin)], json: [:])
            #expect(out.status == 204, "\(out.text)")
            #expect(out.header("Set-Cookie")?.contains("Max-Age=0") == true, "\(out.headers)")
            #expect(try show(session.headers).status == 401)
            #expect(try show(other.headers).status == 200, "the other session is not ended")
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
                eventually(10) { agent.log.contains("local API off: 127.0.0.1:\(port) is in use; the agent syncs") },
                "\(agent.log)")
            // Said plainly: not NIO's "bind(descriptor:ptr:bytes:): … (errno: 98))" (a new user's finding).
            #expect(!agent.log.contains("errno") && !agent.log.contains("bind(descriptor"), "\(agent.log)")
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
