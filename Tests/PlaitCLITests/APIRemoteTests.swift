import Foundation
import PlaitAPI
import PlaitNetnsSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The API beyond loopback (DESIGN §12): refused without a password (sync goes on), else HTTPS with the GUI
/// certificate, password logins, and the brake on guessing. The agent runs in a test network namespace with the
/// address 10.77.0.1 and is reached from inside it: no traffic leaves the namespaces the test builds.
@Suite(
    "The API beyond loopback", .serialized,
    .disabled(if: lanTestsSkipReason != nil, Comment(rawValue: lanTestsSkipReason ?? "")))
struct APIRemoteTests {
    static let password = "correct horse battery staple"

    /// A device's home in the sandbox (shared with the namespace: one file system).
    func device(_ sandbox: Sandbox, _ name: String) throws -> (home: String, id: String) {
        let home = sandbox.root + "/" + name
        try sandbox.ok(["init", "--name", name, "--home", home])
        return (home, try sandbox.ok(["id", "--home", home]).lines.last ?? "")
    }

    func agent(_ lan: NetnsLAN, home: String, api: String, runtime: String? = nil) throws -> HostProcess {
        var environment = ["PLAIT_CONFIG": "", "XDG_CONFIG_HOME": home + "/no-config"]
        if let runtime { environment["XDG_RUNTIME_DIR"] = runtime }
        return try lan.spawn(
            [try PlaitExecutable.path.get(), "agent", "--home", home, "--listen", "10.77.0.1:7400", "--no-discovery",
             "--api-listen", api],
            in: lan.hosts[0], environment: environment)
    }

    /// Without a password the agent refuses the address in one sentence that says what to do, serves no API, and
    /// still syncs: a second device pulls its list through it.
    @Test func aNonLoopbackAddressWithoutAPasswordIsRefusedAndSyncGoesOn() throws {
        let lan = try NetnsLAN(hosts: 1, avahi: false)
        defer { lan.tearDown() }
        try withSandbox { sandbox in
            let a = try device(sandbox, "a")
            let b = try device(sandbox, "b")
            try sandbox.ok(["pair", "--trust", b.id, "--home", a.home])
            try sandbox.ok(["pair", "--trust", a.id, "--home", b.home])
            try sandbox.ok(["list", "add", "From A", "--home", a.home])
            let process = try agent(lan, home: a.home, api: "10.77.0.1:7480")
            defer { _ = process.stop() }
            let warning = try process.waitForLine(on: .stderr, timeout: .seconds(20)) { $0.contains("local API off") }
            #expect(
                warning.contains(
                    "api.listen 10.77.0.1:7480 is not a loopback address, and serving other machines needs a "
                        + "password; the agent syncs as usual. Run `plait gui --set-password` and restart the agent"),
                "\(warning)")
            #expect(!FileManager.default.fileExists(atPath: a.home + "/api.addr"))
            #expect(!FileManager.default.fileExists(atPath: a.home + "/gui"), "no certificate made without a password")
            let synced = try lan.run(
                [try PlaitExecutable.path.get(), "sync", "--peer", "10.77.0.1:7400", "--home", b.home, "--json"],
                in: lan.hosts[0])
            #expect(synced.contains("\"peers\""), "\(synced)")
            let lists = try sandbox.ok(["lists", "--json", "--home", b.home]).stdout
            #expect(lists.contains("From A"), "B pulled A's list through the agent whose API was refused: \(lists)")
            #expect(process.isRunning, "\(process.transcript)")
        }
    }

    /// With a password: HTTPS with the certificate whose fingerprint `plait gui` prints, plain HTTP gets no HTTP
    /// answer, the right password gives a session (a Secure cookie), a wrong one is refused, and after three wrong
    /// ones even the right one waits (429 with Retry-After). No file of the home holds the password.
    @Test func withAPasswordItServesHTTPSAndRateLimitsLogins() throws {
        let lan = try NetnsLAN(hosts: 1, avahi: false)
        defer { lan.tearDown() }
        try withSandbox { sandbox in
            let a = try device(sandbox, "a")
            try sandbox.ok(["gui", "--set-password", "--home", a.home], stdin: Self.password + "\n")
            var info = stat()
            #expect(stat(a.home + "/" + APIPassword.fileName, &info) == 0 && info.st_mode & 0o777 == 0o600)
            // The home's path is too long for a socket in it: the agent's socket goes to a runtime directory short
            // enough, which `plait gui` finds when it has the same XDG_RUNTIME_DIR.
            let runtime = "/tmp/plait-rt-" + UUID().uuidString.prefix(8)
            try FileManager.default.createDirectory(
                atPath: runtime, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            defer { try? FileManager.default.removeItem(atPath: runtime) }
            let process = try agent(lan, home: a.home, api: "10.77.0.1:7480", runtime: runtime)
            defer { _ = process.stop() }
            let listening = eventually(20) { FileManager.default.fileExists(atPath: a.home + "/api.addr") }
            #expect(listening, "\(process.transcript)")
            var keyInfo = stat()
            #expect(stat(a.home + "/gui/key.pem", &keyInfo) == 0 && keyInfo.st_mode & 0o777 == 0o600)
            // Without the agent's socket (no XDG_RUNTIME_DIR here) it cannot mint a code: the address and the
            // fingerprint, and the password.
            let gui = try sandbox.ok(["gui", "--home", a.home], environment: ["XDG_RUNTIME_DIR": nil]).lines
            #expect(gui.first == "https://10.77.0.1:7480/", "\(gui)")
            let printed = try #require(gui.first { $0.hasPrefix("certificate SHA-256 fingerprint: ") })
                .dropFirst("certificate SHA-256 fingerprint: ".count)
            // Through the socket: a single-use login code in an https:// URL, with the fingerprint to check first.
            let viaSocket = try sandbox.ok(["gui", "--home", a.home], environment: ["XDG_RUNTIME_DIR": runtime]).lines
            let codeURL = try #require(viaSocket.first, "\(viaSocket)")
            #expect(codeURL.hasPrefix("https://10.77.0.1:7480/?code="), "\(viaSocket)")
            let code = String(codeURL.split(separator: "=").last ?? "")
            #expect(
                viaSocket.contains("certificate SHA-256 fingerprint: \(printed)"),
                "the fingerprint beside the code URL: \(viaSocket)")
            // The GUI certificate is not the device's identity.
            let deviceCertificate = try String(contentsOfFile: a.home + "/cert.pem", encoding: .utf8)
            #expect(try String(contentsOfFile: a.home + "/gui/cert.pem", encoding: .utf8) != deviceCertificate)

            let script = sandbox.root + "/client.py"
            try Self.client.write(toFile: script, atomically: true, encoding: .utf8)
            let output = try lan.run(
                ["/usr/bin/python3", script, "10.77.0.1", "7480", Self.password, code], in: lan.hosts[0],
                timeout: .seconds(60))
            let result = try #require(
                try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any], "\(output)")
            #expect(result["fingerprint"] as? String == String(printed), "\(result)")
            #expect(result["plain"] as? String == "no HTTP answer", "\(result)")
            #expect(result["wrong"] as? Int == 401, "\(result)")
            #expect(result["right"] as? Int == 200, "\(result)")
            let cookie = result["cookie"] as? String ?? ""
            #expect(cookie.contains("; Secure") && cookie.contains("HttpOnly"), "\(cookie)")
            #expect(result["status_with_session"] as? Int == 200, "\(result)")
            #expect(result["status_with_cookie_only"] as? Int == 401, "the cookie without its page key: \(result)")
            #expect(result["code_login"] as? Int == 200, "the code from `plait gui` over HTTPS: \(result)")
            #expect(result["code_status"] as? Int == 200, "\(result)")
            #expect(result["code_again"] as? Int == 401, "a used code: \(result)")
            #expect(result["status_without"] as? Int == 401, "\(result)")
            #expect(result["foreign_host"] as? Int == 403, "\(result)")
            #expect(result["guesses"] as? [Int] == [401, 401, 401], "\(result)")
            #expect(result["after_guesses"] as? Int == 429, "even the right password waits: \(result)")
            #expect((result["retry_after"] as? String).flatMap(Int.init) ?? 0 >= 1, "\(result)")
            #expect((result["limited_message"] as? String)?.contains("too many wrong passwords") == true, "\(result)")

            // Neither the home nor anything the agent wrote holds the password in clear.
            let needle = Array(Self.password.utf8)
            let files = FileManager.default.enumerator(atPath: a.home)?.compactMap { $0 as? String } ?? []
            #expect(files.contains(APIPassword.fileName))
            for file in files {
                guard let data = FileManager.default.contents(atPath: a.home + "/" + file) else { continue }
                #expect(!Array(data).contains(needle), "\(file) holds the password")
            }
            let stored = try String(contentsOfFile: a.home + "/" + APIPassword.fileName, encoding: .utf8)
            #expect(stored.hasPrefix("scrypt$ln=15,r=8,p=1$"), "\(stored)")
        }
    }

    /// Guesses sent together: each try is counted before its password is checked, so no more than the free tries
    /// are checked. (Checked first and counted after the slow scrypt, a hostile tester's 300 guesses at once were
    /// all checked: 300 × 401.)
    @Test func guessesSentTogetherAreCountedBeforeTheyAreChecked() throws {
        let lan = try NetnsLAN(hosts: 1, avahi: false)
        defer { lan.tearDown() }
        try withSandbox { sandbox in
            let a = try device(sandbox, "a")
            try sandbox.ok(["gui", "--set-password", "--home", a.home], stdin: Self.password + "\n")
            let process = try agent(lan, home: a.home, api: "10.77.0.1:7480")
            defer { _ = process.stop() }
            let listening = eventually(20) { FileManager.default.fileExists(atPath: a.home + "/api.addr") }
            #expect(listening, "\(process.transcript)")
            let script = sandbox.root + "/guesses.py"
            try Self.guesses.write(toFile: script, atomically: true, encoding: .utf8)
            let output = try lan.run(
                ["/usr/bin/python3", script, "10.77.0.1", "7480", "30"], in: lan.hosts[0], timeout: .seconds(120))
            let statuses = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [Int], "\(output)")
            #expect(statuses.count == 30, "\(output)")
            #expect(statuses.filter { $0 == 401 }.count <= LoginLimiter.freeTries, "\(statuses)")
            #expect(statuses.allSatisfy { $0 == 401 || $0 == 429 }, "\(statuses)")
        }
    }

    /// N wrong passwords at once (a thread each, all started before any answer), their statuses as a JSON list.
    static let guesses = #"""
        import http.client, json, ssl, sys, threading

        host, port, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        statuses, lock, start = [], threading.Lock(), threading.Barrier(count)

        def guess(n):
            connection = http.client.HTTPSConnection(host, port, context=context, timeout=60)
            connection.connect()
            start.wait()
            connection.request(
                "POST", "/api/session", body=json.dumps({"password": "guess %d" % n}),
                headers={"Origin": "https://%s:%d" % (host, port), "Content-Type": "application/json"})
            status = connection.getresponse().status
            connection.close()
            with lock:
                statuses.append(status)

        threads = [threading.Thread(target=guess, args=(n,)) for n in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        print(json.dumps(statuses))
        """#

    /// What a browser on another machine does, from inside the namespace, printed as one JSON object.
    static let client = #"""
        import hashlib, http.client, json, socket, ssl, sys

        host, port, password, code = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
        origin = "https://%s:%d" % (host, port)
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE  # self-signed: the test compares the fingerprint instead
        out = {}

        with socket.create_connection((host, port), timeout=10) as raw:
            with context.wrap_socket(raw) as tls:
                der = tls.getpeercert(binary_form=True)
                out["fingerprint"] = ":".join("%02X" % b for b in hashlib.sha256(der).digest())

        with socket.create_connection((host, port), timeout=10) as raw:
            raw.sendall(b"GET /api/status HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host.encode(), port))
            answer = b""
            try:
                while True:
                    chunk = raw.recv(4096)
                    if not chunk:
                        break
                    answer += chunk
            except (ConnectionResetError, socket.timeout):
                pass
            out["plain"] = "HTTP answer" if answer.startswith(b"HTTP/") else "no HTTP answer"

        def request(method, path, body=None, headers=None):
            connection = http.client.HTTPSConnection(host, port, context=context, timeout=20)
            sent = {"Origin": origin}
            if body is not None:
                sent["Content-Type"] = "application/json"
            sent.update(headers or {})
            connection.request(method, path, body=None if body is None else json.dumps(body), headers=sent)
            response = connection.getresponse()
            text = response.read().decode()
            connection.close()
            return response, text

        def login(secret):
            return request("POST", "/api/session", {"password": secret})

        out["wrong"] = login("not the password")[0].status
        response, text = login(password)
        out["right"] = response.status
        out["cookie"] = response.getheader("Set-Cookie") or ""

        # The headers the page sends: the cookie, and the page key of the sign-in's answer.
        def session(response, text):
            cookie = (response.getheader("Set-Cookie") or "").split(";")[0]
            key = json.loads(text).get("page_key", "") if response.status == 200 else ""
            return {"Cookie": cookie, "Plait-Page-Key": key}

        pair = session(response, text)
        out["status_with_session"] = request("GET", "/api/status", headers=pair)[0].status
        out["status_with_cookie_only"] = request("GET", "/api/status", headers={"Cookie": pair["Cookie"]})[0].status
        response, text = request("POST", "/api/session", {"code": code})
        out["code_login"] = response.status
        by_code = session(response, text)
        out["code_status"] = request("GET", "/api/status", headers=by_code)[0].status
        out["code_again"] = request("POST", "/api/session", {"code": code})[0].status
        out["status_without"] = request("GET", "/api/status")[0].status
        out["foreign_host"] = request(
            "GET", "/api/status", headers=dict(pair, Host="evil.example:%d" % port))[0].status
        out["guesses"] = [login("guess %d" % n)[0].status for n in range(3)]
        response, text = login(password)
        out["after_guesses"] = response.status
        out["retry_after"] = response.getheader("Retry-After")
        out["limited_message"] = json.loads(text).get("error", "")
        print(json.dumps(out))
        """#
}

/// `plait gui --set-password`: never from the command line, never empty, only a hash stored.
@Suite struct APIPasswordCommandTests {
    @Test func anEmptyOrShortPasswordIsRefusedAndNothingIsStored() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            for typed in ["\n", "", "short\n"] {
                let run = try sandbox.fails(["gui", "--set-password"], stdin: typed)
                #expect(run.stderr.split(separator: "\n").count == 1, "one sentence: \(run)")
                #expect(run.stderr.contains("password"), "\(run)")
            }
            #expect(!FileManager.default.fileExists(atPath: sandbox.home + "/" + APIPassword.fileName))
            // The password is not an option: nothing on the command line can carry it.
            try sandbox.fails(["gui", "--set-password", "hunter2hunter2"])
        }
    }

    @Test func thePasswordIsStoredAsAScryptHashThatVerifiesOnlyItself() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            try sandbox.ok(["gui", "--set-password"], stdin: "first password\n")
            let first = try String(contentsOfFile: sandbox.home + "/" + APIPassword.fileName, encoding: .utf8)
            #expect(!first.contains("first password"))
            #expect(APIPassword.verify("first password", homePath: sandbox.home))
            #expect(!APIPassword.verify("first passworD", homePath: sandbox.home))
            #expect(!APIPassword.verify("", homePath: sandbox.home))
            // Setting the same password again draws a new salt.
            try sandbox.ok(["gui", "--set-password"], stdin: "first password\n")
            let again = try String(contentsOfFile: sandbox.home + "/" + APIPassword.fileName, encoding: .utf8)
            #expect(again != first)
            try sandbox.ok(["gui", "--clear-password"])
            #expect(!APIPassword.verify("first password", homePath: sandbox.home))
        }
    }

    /// A password in the config file would sit there in clear: refused with what to do instead.
    @Test func aPasswordInTheConfigFileIsRefused() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            let config = sandbox.root + "/plait.toml"
            try "[api]\npassword = \"hunter2hunter2\"\n".write(toFile: config, atomically: true, encoding: .utf8)
            let run = try sandbox.fails(["status", "--config", config])
            #expect(run.stderr.contains("plait gui --set-password"), "\(run)")
        }
    }
}

/// The Host rule beyond loopback: the configured address, or on a wildcard address any IP literal, never a name.
@Suite struct APIHostRuleTests {
    @Test func hostsAllowedForEachKindOfAddress() {
        #expect(APIHosts.allows(host: "10.77.0.1:7480", boundHost: "10.77.0.1", port: 7480))
        #expect(!APIHosts.allows(host: "10.77.0.2:7480", boundHost: "10.77.0.1", port: 7480))
        #expect(!APIHosts.allows(host: "10.77.0.1:7481", boundHost: "10.77.0.1", port: 7480))
        #expect(!APIHosts.allows(host: "localhost:7480", boundHost: "10.77.0.1", port: 7480))
        #expect(APIHosts.allows(host: "192.168.1.5:7480", boundHost: "0.0.0.0", port: 7480))
        #expect(APIHosts.allows(host: "[fd77::1]:7480", boundHost: "::", port: 7480))
        #expect(!APIHosts.allows(host: "evil.example:7480", boundHost: "0.0.0.0", port: 7480))
        #expect(!APIHosts.allows(host: "192.168.1.5:80", boundHost: "0.0.0.0", port: 7480))
        #expect(APIHosts.allows(host: "[fd77::1]:7480", boundHost: "fd77::1", port: 7480))
        #expect(APIHosts.allows(host: "localhost:7480", boundHost: "127.0.0.1", port: 7480))
        #expect(!APIHosts.allows(host: "evil.example:7480", boundHost: "127.0.0.1", port: 7480))
    }
}

/// The brake on password guessing, on a clock the test moves.
@Suite struct LoginLimiterTests {
    @Test func eachSourceGetsThreeTriesThenWaitsTwiceAsLongEachTime() {
        let start = ContinuousClock.now
        let limiter = LoginLimiter(now: start)
        for _ in 1...2 { limiter.failed(source: "10.0.0.9", now: start) }
        #expect(limiter.wait(source: "10.0.0.9", now: start) == nil, "two wrong passwords cost nothing yet")
        limiter.failed(source: "10.0.0.9", now: start)
        #expect(limiter.wait(source: "10.0.0.9", now: start) == .seconds(2))
        #expect(limiter.wait(source: "10.0.0.8", now: start) == nil, "another source is not held back")
        let later = start + .seconds(2)
        #expect(limiter.wait(source: "10.0.0.9", now: later) == nil)
        limiter.failed(source: "10.0.0.9", now: later)
        #expect(limiter.wait(source: "10.0.0.9", now: later) == .seconds(4))
        limiter.failed(source: "10.0.0.9", now: later + .seconds(4))
        #expect(limiter.wait(source: "10.0.0.9", now: later + .seconds(4)) == .seconds(8))
        limiter.succeeded(source: "10.0.0.9")
        #expect(limiter.wait(source: "10.0.0.9", now: later + .seconds(4)) == nil, "a right password clears it")
    }

    @Test func theWaitIsCapped() {
        var now = ContinuousClock.now
        let limiter = LoginLimiter(now: now)
        for _ in 1...30 {
            limiter.failed(source: "10.0.0.7", now: now)
            now += .seconds(1)
        }
        let wait = limiter.wait(source: "10.0.0.7", now: now)
        #expect(wait != nil && wait! <= LoginLimiter.maxWait && wait! > .seconds(200), "\(String(describing: wait))")
    }

    @Test func manySourcesTogetherMeetTheGlobalLimit() {
        let start = ContinuousClock.now
        let limiter = LoginLimiter(now: start)
        for index in 0..<(LoginLimiter.globalFreeTries - 1) { limiter.failed(source: "10.0.1.\(index)", now: start) }
        #expect(limiter.wait(source: "10.0.2.1", now: start) == nil)
        limiter.failed(source: "10.0.1.250", now: start)
        #expect(limiter.wait(source: "10.0.2.1", now: start) == .seconds(2), "a fresh source waits too")
    }

    /// The attack of G5 (API tester 2026-11-25): the owner signs in, then 3 wrong passwords come from each of 7
    /// other addresses, and one more each time the wait ends. The owner, told "too many wrong passwords" though
    /// they had sent none, was kept out for minutes; an address they signed in from is now let through, while a
    /// new address still waits and the guesser gets no more tries than the shared budget allows.
    @Test func guessesFromManyAddressesDoNotKeepTheOwnerOut() {
        var now = ContinuousClock.now
        let limiter = LoginLimiter(now: now)
        #expect(limiter.beginTry(source: "127.0.0.9", now: now) == nil)
        limiter.succeeded(source: "127.0.0.9")
        var checked = 0
        for host in 2...8 {
            for _ in 1...3 where limiter.beginTry(source: "127.0.0.\(host)", now: now) == nil { checked += 1 }
        }
        #expect(checked == LoginLimiter.globalFreeTries, "the guesses checked before the shared back-off")
        #expect(limiter.wait(source: "127.0.0.10", now: now) != nil, "a new address waits")
        #expect(limiter.beginTry(source: "127.0.0.11", now: now)?.shared == true, "for the others' failures")
        for _ in 0..<5 {
            #expect(limiter.beginTry(source: "127.0.0.9", now: now) == nil, "the owner's try is checked")
            limiter.succeeded(source: "127.0.0.9")
            now += limiter.wait(source: "127.0.0.2", now: now) ?? .zero
            for host in 2...8 where limiter.beginTry(source: "127.0.0.\(host)", now: now) == nil { checked += 1 }
        }
        #expect(checked <= LoginLimiter.globalFreeTries + 5, "one guess per end of the shared wait: \(checked)")
        // Wrong passwords from the owner's own address still count against it.
        for _ in 1...3 { limiter.failed(source: "127.0.0.9", now: now) }
        #expect(limiter.wait(source: "127.0.0.9", now: now) != nil)
    }
}
