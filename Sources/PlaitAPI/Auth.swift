import Foundation
import HTTPTypes
import Hummingbird
import PlaitCore
import PlaitOutput
import PlaitSync

/// Who may use the TCP API (DESIGN §12): the long-lived token of `<home>/api-token` (scripts), single-use login
/// codes (`plait gui`, valid `codeLifetime`), and the sessions they are exchanged for.
///
/// A session is two secrets that must come together: a cookie (HttpOnly, so no script reads it; named per device)
/// and a page key the page keeps in localStorage and sends in the `Plait-Page-Key` header. Browsers send a host's
/// cookies to every port of it, so a server of another local user on another port of 127.0.0.1 receives the
/// cookie; localStorage is kept per origin (scheme, host and port), so that server never sees the key. Sessions
/// outlive an agent restart: each is kept in `<home>/api-sessions` as the SHA-256 of both secrets with its expiry,
/// never a secret itself (the file gives no one a session), written whole and renamed into place, mode 0600.
public final class APIAuth: Sendable {
    public static let defaultCodeLifetime: Duration = .seconds(60)
    /// How long a session is accepted after its login (the page signs in again after that).
    public static let defaultSessionLifetime: TimeInterval = 7 * 24 * 3600
    public static let tokenFileName = "api-token"
    public static let sessionsFileName = "api-sessions"

    /// `plait-session-<first 7 characters of the Device ID>`: two agents on one machine (two homes, two ports)
    /// get two cookies, and neither accepts the other's (its value is not among its sessions either).
    public let cookieName: String
    private let token: String
    public let codeLifetime: Duration
    public let sessionLifetime: TimeInterval
    /// `<home>/api-sessions`.
    let sessionsPath: String
    private let state: LockedValue<Grants>

    private struct Grants {
        /// Unused login codes and when each stops being accepted.
        var codes: [String: ContinuousClock.Instant] = [:]
        /// Each session by the SHA-256 (hex) of its cookie's value.
        var sessions: [String: Session] = [:]
    }

    /// A session as the agent holds it: digests and an expiry, no secret.
    struct Session: Equatable {
        /// SHA-256 (hex) of the page key that must come with the cookie.
        var keySHA256: String
        /// When it stops being accepted (wall clock: it outlives the process).
        var expires: Date
    }

    /// The two secrets of a new session: the cookie's value and the page key.
    struct SessionSecrets {
        var cookie: String
        var pageKey: String
    }

    /// What `<home>/api-sessions` holds.
    struct StoredSessions: Codable, Equatable {
        struct Session: Codable, Equatable {
            /// SHA-256 of the cookie's value, lowercase hexadecimal.
            var sha256: String
            /// SHA-256 of the page key, lowercase hexadecimal. Absent in the sessions agents stored before there
            /// was a page key: those are dropped when the file is read (such a cookie alone is what a server on
            /// another port receives; the user signs in again with `plait gui`).
            var keySHA256: String?
            /// Seconds since 1970 (UTC) when it stops being accepted.
            var expires: Int64

            enum CodingKeys: String, CodingKey {
                case sha256
                case keySHA256 = "key_sha256"
                case expires
            }
        }
        var sessions: [Session]
    }

    public init(
        home: Home, codeLifetime: Duration = defaultCodeLifetime, sessionLifetime: TimeInterval = defaultSessionLifetime
    ) throws {
        self.token = try Self.ensureToken(homePath: home.path)
        self.cookieName = "plait-session-" + String(try home.identity.deviceID.description.prefix(7))
        self.codeLifetime = codeLifetime
        self.sessionLifetime = sessionLifetime
        self.sessionsPath = home.path + "/" + Self.sessionsFileName
        var grants = Grants()
        grants.sessions = try Self.loadSessions(path: sessionsPath, now: Date())
        self.state = LockedValue(grants)
    }

    /// The unexpired sessions with a page key in the file at `path` (none when there is no file). Sessions stored
    /// without a key (by agents before the key existed) are left out, not an error: the agent starts, those pages
    /// sign in again, and the next login or sign-out rewrites the file without them. A file that is not what this
    /// code writes is refused, saying what to do: deleting it only signs every page out.
    static func loadSessions(path: String, now: Date) throws -> [String: Session] {
        guard let data = FileManager.default.contents(atPath: path) else { return [:] }
        guard let stored = try? JSONDecoder().decode(StoredSessions.self, from: data) else {
            throw PlaitError.file(
                path: path, problem: "does not hold the API's sessions; delete it (pages then sign in again)")
        }
        var sessions: [String: Session] = [:]
        for session in stored.sessions {
            let expires = Date(timeIntervalSince1970: TimeInterval(session.expires))
            guard expires > now, let key = session.keySHA256 else { continue }
            sessions[session.sha256] = Session(keySHA256: key, expires: expires)
        }
        return sessions
    }

    /// Writes the unexpired `sessions` to `path` (`PrivateFile.replace`: mode 0600, the old list or the new one
    /// after a crash).
    static func saveSessions(_ sessions: [String: Session], path: String) throws {
        let stored = StoredSessions(
            sessions: sessions.sorted { $0.key < $1.key }.map {
                StoredSessions.Session(
                    sha256: $0.key, keySHA256: $0.value.keySHA256,
                    expires: Int64($0.value.expires.timeIntervalSince1970.rounded(.up)))
            })
        try PrivateFile.replace(path, with: Array(try JSONEncoder().encode(stored)) + [0x0a])
    }

    /// The stored form of a session's secret (its cookie's value or its page key).
    static func digest(_ secret: String) -> String { SHA256.hash(Array(secret.utf8)).hexString }

    /// Whether `given` and `held` are the same, in time independent of where they differ (a secret compared byte
    /// by byte, stopping at the first difference, would tell an attacker how much of a guess was right).
    static func sameSecret(_ given: String, _ held: String) -> Bool {
        let given = Array(given.utf8)
        let held = Array(held.utf8)
        guard given.count == held.count else { return false }
        return zip(given, held).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    /// The API token of the home at `homePath`, made (mode 0600) if there is none yet: at `plait init`, or at the
    /// first agent start of a home made before the API existed.
    @discardableResult
    public static func ensureToken(homePath: String) throws -> String {
        let path = homePath + "/" + tokenFileName
        if let existing = try readToken(homePath: homePath) { return existing }
        let token = randomText(bytes: 32)
        // O_EXCL: two processes making it at once keep one token (the loser reads the winner's).
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if descriptor < 0 {
            if errno == EEXIST, let existing = try readToken(homePath: homePath) { return existing }
            throw PlaitError.file(path: path, problem: "cannot be created (\(String(cString: strerror(errno))))")
        }
        defer { close(descriptor) }
        let bytes = Array((token + "\n").utf8)
        guard write(descriptor, bytes, bytes.count) == bytes.count, fsync(descriptor) == 0 else {
            throw PlaitError.file(path: path, problem: "cannot be written (\(String(cString: strerror(errno))))")
        }
        return token
    }

    /// The token in `<home>/api-token`, or nil if the file does not exist. A token readable by others is refused:
    /// it grants everything the API does.
    public static func readToken(homePath: String) throws -> String? {
        let path = homePath + "/" + tokenFileName
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        if info.st_mode & 0o077 != 0 {
            throw PlaitError.file(
                path: path,
                problem: "is readable by other users; run `chmod 600 \(path)` (and consider the token leaked: "
                    + "delete the file and restart the agent for a new one)")
        }
        guard let data = FileManager.default.contents(atPath: path),
            let text = String(data: data, encoding: .utf8)?.trimmingCharacters(in: .whitespacesAndNewlines),
            text.count >= 20
        else {
            throw PlaitError.file(path: path, problem: "does not hold an API token; delete it and restart the agent")
        }
        return text
    }

    /// A new single-use login code and when it expires.
    public func mintCode(now: ContinuousClock.Instant = .now) -> (code: String, expires: Date) {
        let code = Self.randomText(bytes: 16)
        state.withLock { grants in
            grants.codes = grants.codes.filter { $0.value > now }
            grants.codes[code] = now + codeLifetime
        }
        let seconds = Double(codeLifetime.components.seconds) + Double(codeLifetime.components.attoseconds) / 1e18
        return (code, Date().addingTimeInterval(seconds))
    }

    /// Exchanges a login code for a new session; nil if the code is unknown, used or expired. The code is gone
    /// either way. Throws when the session cannot be stored (then there is none).
    func redeem(_ code: String, now: ContinuousClock.Instant = .now) throws -> SessionSecrets? {
        try state.withLock { grants in
            guard let expiry = grants.codes.removeValue(forKey: code), expiry > now else { return nil }
            return try newSession(in: &grants)
        }
    }

    /// A new session for a login proven another way (the password, over HTTPS).
    func openSession() throws -> SessionSecrets { try state.withLock { try newSession(in: &$0) } }

    /// Under the lock: ends every session held when the sessions file is gone (see `acceptsSession`), so that no
    /// later write brings them back.
    private func endSessionsIfTheFileIsGone(_ grants: inout Grants) {
        if !grants.sessions.isEmpty, !FileManager.default.fileExists(atPath: sessionsPath) { grants.sessions = [:] }
    }

    /// Under the lock: a new session, stored with the others that have not expired.
    private func newSession(in grants: inout Grants) throws -> SessionSecrets {
        endSessionsIfTheFileIsGone(&grants)
        let secrets = SessionSecrets(cookie: Self.randomText(bytes: 32), pageKey: Self.randomText(bytes: 32))
        let now = Date()
        var sessions = grants.sessions.filter { $0.value.expires > now }
        sessions[Self.digest(secrets.cookie)] = Session(
            keySHA256: Self.digest(secrets.pageKey), expires: now.addingTimeInterval(sessionLifetime))
        try Self.saveSessions(sessions, path: sessionsPath)
        grants.sessions = sessions
        return secrets
    }

    /// Ends the session of `cookie` if `pageKey` is its key (signing out); stored at once, so a restart does not
    /// bring it back. The key is asked for as on every request: a cookie alone signs no one out either.
    func endSession(cookie: String, pageKey: String) throws {
        try state.withLock { grants in
            endSessionsIfTheFileIsGone(&grants)
            let digest = Self.digest(cookie)
            let now = Date()
            guard let session = grants.sessions[digest], Self.matches(session, pageKey: pageKey, now: now) else {
                return
            }
            grants.sessions.removeValue(forKey: digest)
            grants.sessions = grants.sessions.filter { $0.value.expires > now }
            try Self.saveSessions(grants.sessions, path: sessionsPath)
        }
    }

    /// Whether `cookie` and `pageKey` are the two secrets of one unexpired session.
    ///
    /// The sessions file is where sessions are ended from outside the agent: it is written whole with every
    /// session held (never absent while one is), and `plait gui --set-password` and `--clear-password` delete it,
    /// as a user may. When it is gone, every session held ends (API hostile tester 2026-11-25, G9: a new password
    /// left the sessions opened with the old one working for their 7 days, until the agent restarted).
    func acceptsSession(cookie: String, pageKey: String, now: Date = Date()) -> Bool {
        let digest = Self.digest(cookie)
        let session = state.withLock { grants -> Session? in
            endSessionsIfTheFileIsGone(&grants)
            return grants.sessions[digest]
        }
        guard let session else { return false }
        return Self.matches(session, pageKey: pageKey, now: now)
    }

    /// The session is unexpired and `pageKey` is its key. The cookie needs no such comparison: it is found by its
    /// digest, and a lookup's timing tells nothing of a secret whose digest the caller cannot choose.
    private static func matches(_ session: Session, pageKey: String, now: Date) -> Bool {
        // Both sides of the comparison always run: an expired session answers no sooner than a wrong key.
        let sameKey = sameSecret(digest(pageKey), session.keySHA256)
        return sameKey && session.expires > now
    }

    func acceptsToken(_ value: String) -> Bool { Self.sameSecret(value, token) }

    /// `bytes` random bytes from the system's generator as base32 (128 bits: 26 characters).
    static func randomText(bytes count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return Base32.string((0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }
}

/// The browser rules in front of every route (DESIGN §12), the JSON error answer for anything thrown, and the
/// security headers on every response.
struct APIGuard: RouterMiddleware {
    typealias Context = APIRequestContext
    let api: APIContext
    let transport: APITransport

    init(context: APIContext, transport: APITransport) {
        self.api = context
        self.transport = transport
    }

    func handle(
        _ request: Request, context: APIRequestContext,
        next: (Request, APIRequestContext) async throws -> Response
    ) async throws -> Response {
        var response: Response
        var checked = false
        do {
            var context = context
            context.credential = try check(request)
            checked = true
            response = try await next(request, context)
        } catch {
            let failure = APIError.classify(error)
            if case .requestEnded = failure {
                // A client that hung up mid-body, or a request cut by the agent's stop: not the agent's error (500
                // such sign-ins wrote 500 error lines, hostile tester 2026-11-25, G8).
                api.logger.debug("API \(request.method) \(request.uri.path): \(error)")
            } else if case .unavailable = failure {
                api.logger.error("API \(request.method) \(request.uri.path): \(error)")
            }
            response = APIRoutes.errorResponse(failure)
            APIRoutes.markErrorKind(of: error, in: &response)
            if case let .tooManyTries(wait, _) = failure {
                response.headers[.retryAfter] = "\(APIError.seconds(wait))"
            }
            if !checked && request.method != .get && request.method != .head {
                // Refused before its body was read: the connection closes after the answer instead of reading the
                // body to its end. A client without a credential trickling a chunked body kept its connection, and
                // at the open-file limit the page and `plait gui` stopped answering (hostile tester 2026-11-25, G3).
                let close = context.closeConnection
                let answer = response.body
                response.headers[.connection] = "close"
                response.body = ResponseBody(contentLength: answer.contentLength) { writer in
                    try await answer.write(writer)
                    close()
                }
            }
        }
        response.headers[.contentSecurityPolicy] = "default-src 'self'; frame-ancestors 'none'"
        response.headers[.xContentTypeOptions] = "nosniff"
        response.headers[.init("Referrer-Policy")!] = "no-referrer"
        response.headers[.init("X-Frame-Options")!] = "DENY"
        if Self.isAPI(request.uri.path) { response.headers[.cacheControl] = "no-store" }
        return response
    }

    static func isAPI(_ path: String) -> Bool { path == "/api" || path.hasPrefix("/api/") }

    /// What a request without a credential may reach: the page's files (GET or HEAD of exactly their paths) and
    /// the sign-in (POST /api/session); everything else needs one.
    ///
    /// An allow-list of exact paths, not "anything outside /api/": the router ignores empty path segments, so
    /// `//api/show` reached `/api/show` while the guard took it for a page path and let it through unsigned
    /// (found by a hostile tester: every list, an edit and a trusted device with no credential).
    static func isOpen(_ request: Request) -> Bool {
        let path = request.uri.path
        if request.method == .post { return path == "/api/session" }
        return (request.method == .get || request.method == .head) && PageFile.all.contains { $0.path == path }
    }

    /// Applies the rules and says how the request is authenticated; throws the refusal.
    func check(_ request: Request) throws -> APICredential {
        let changes = request.method != .get && request.method != .head
        let host = transport == .tcp ? try checkHost(request) : ""
        if changes {
            // Before anything is read: a form posted cross-site is text/plain or form-encoded.
            let type = request.headers[.contentType]?.split(separator: ";").first?
                .trimmingCharacters(in: .whitespaces).lowercased()
            guard type == "application/json" else {
                throw APIError.unsupportedMediaType(
                    "a request that changes something must be sent as Content-Type: application/json.")
            }
            let limit = Self.isOpen(request) ? APILimits.maxSignInBody : APILimits.maxBody
            if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > limit {
                throw APIError.tooLarge(limit: limit)
            }
        }
        guard transport == .tcp else { return .localSocket }
        let credential = try credential(of: request)
        if credential == .none && !Self.isOpen(request) {
            throw APIError.unauthorized(
                "no valid session or API token: open the URL `plait gui` prints, or send "
                    + "`Authorization: Bearer TOKEN` with the token `plait gui --token` prints.")
        }
        if changes { try checkOrigin(request, host: host, credential: credential) }
        return credential
    }

    /// The Host must name this agent's own address: a page of another site that made its name resolve to
    /// 127.0.0.1 (DNS rebinding) sends its own name and is refused.
    private func checkHost(_ request: Request) throws -> String {
        guard let bound = api.tcpAddress, let base = api.baseURL else {
            throw APIError.unavailable("the API is still starting; retry.")
        }
        let host = (request.head.authority ?? "").lowercased()
        guard APIHosts.allows(host: host, boundHost: bound.host, port: bound.port) else {
            let shown = host.isEmpty ? "none" : "'\(host.terminalExcerpt(limit: 60))'"
            throw APIError.forbidden(
                "the Host header (\(shown)) is not this agent's address; open \(base)/ "
                    + "(other names are refused against DNS rebinding).")
        }
        return host
    }
}

/// Which Host headers name this agent (the DNS-rebinding rule of `APIGuard`).
public enum APIHosts {
    /// The Hosts a browser may name this agent by: on loopback the three loopback names, elsewhere the address
    /// api.listen names. A wildcard address (0.0.0.0, ::) is reached by any of the machine's addresses: any IP
    /// literal is accepted then, never a name (DNS rebinding needs a name the attacker controls).
    public static func allows(host: String, boundHost: String, port: Int) -> Bool {
        let bracketed = { (name: String) in name.contains(":") ? "[\(name)]:\(port)" : "\(name):\(port)" }
        if Config.isLoopback(host: boundHost) {
            return ["127.0.0.1:\(port)", "localhost:\(port)", "[::1]:\(port)", bracketed(boundHost.lowercased())]
                .contains(host)
        }
        if host == bracketed(boundHost.lowercased()) { return true }
        guard ["0.0.0.0", "::"].contains(boundHost), host.hasSuffix(":\(port)") else { return false }
        var name = String(host.dropLast(":\(port)".count))
        if name.hasPrefix("[") && name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, name, &v4) == 1 || inet_pton(AF_INET6, name, &v6) == 1
    }
}

extension APIGuard {
    /// A non-GET must come from the agent's own page: its Origin is exactly `http(s)://<Host>`. Scripts that send no
    /// Origin must use the token (a browser always sends one with a cross-site POST).
    private func checkOrigin(_ request: Request, host: String, credential: APICredential) throws {
        let origins = request.headers[values: .origin]
        guard let origin = origins.first else {
            if credential == .token { return }
            throw APIError.forbidden(
                "a request that changes something needs the Origin header of the agent's page (or a bearer token).")
        }
        let page = "\(api.scheme)://\(host)"
        guard origins.count == 1, origin.lowercased() == page else {
            throw APIError.forbidden(
                "the Origin '\(origin.terminalExcerpt(limit: 60))' is not this agent's page (\(page)); "
                    + "requests from other pages are refused.")
        }
    }

    /// The bearer token, else this device's session (its cookie and its page key together); `.none` if neither is
    /// valid. A cookie without its key is `.none`: it is what a server on another port of the host receives.
    private func credential(of request: Request) throws -> APICredential {
        if let authorization = request.headers[.authorization] {
            let parts = authorization.split(separator: " ", maxSplits: 1)
            guard parts.count == 2, parts[0].lowercased() == "bearer", api.auth.acceptsToken(String(parts[1])) else {
                throw APIError.unauthorized(
                    "the Authorization header holds no valid API token; `plait gui --token` prints it.")
            }
            return .token
        }
        if sessionCookie(of: request) != nil { return .session }
        return .none
    }

    /// The header that carries a session's page key.
    static let pageKeyHeader = HTTPField.Name("Plait-Page-Key")!
    /// The events stream's query parameter that carries it instead (an `EventSource` sends no header of its own).
    static let pageKeyParameter: Substring = "page_key"

    /// The page key of the request: the `Plait-Page-Key` header; on GET /api/events/stream only, `?page_key=`.
    ///
    /// Why a query there and not a stream read with `fetch()`: `EventSource` cannot set a header, and it is what
    /// resumes by itself with `Last-Event-ID` after a dropped connection; a `fetch()` reader would redo that by
    /// hand. The URL goes only to the agent's own origin (the page builds it relative), no Referer leaves the page
    /// (`no-referrer`), the agent logs no query, and an event stream's URL is no page a browser keeps in its
    /// history. Every other route takes the header only, so a key in a link or a form's URL authenticates nothing.
    func pageKey(of request: Request) -> String? {
        if let header = request.headers[Self.pageKeyHeader] { return header }
        guard request.method == .get, request.uri.path == "/api/events/stream" else { return nil }
        return request.uri.queryParameters[Self.pageKeyParameter].map(String.init)
    }

    /// The session cookie of the request that belongs with its page key: every cookie of the session's name is
    /// tried, not only the first. A server on another port of the host receives the cookie's name and can plant
    /// one of that name with a longer path, which the browser then sends first: taking the first signed the page
    /// out for good, a new sign-in included (hostile tester 2026-11-25, G2).
    func sessionCookie(of request: Request) -> String? {
        guard let key = pageKey(of: request) else { return nil }
        for header in request.headers[values: .cookie] {
            for pair in header.split(separator: ";") {
                let parts = pair.split(separator: "=", maxSplits: 1)
                guard parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces) == api.auth.cookieName
                else { continue }
                let cookie = parts[1].trimmingCharacters(in: .whitespaces)
                if api.auth.acceptsSession(cookie: cookie, pageKey: key) { return cookie }
            }
        }
        return nil
    }
}

extension APIRoutes {
    /// POST /api/session (a login code or, over HTTPS, the password for a session: its cookie, and its page key in
    /// the body), DELETE /api/session, POST /api/login-codes.
    static func addAuthRoutes(to router: Router<APIRequestContext>, context api: APIContext, transport: APITransport) {
        // Over HTTPS the cookie is Secure: a browser never sends it back over plain HTTP.
        let attributes = "Path=/; HttpOnly; SameSite=Strict" + (api.secure ? "; Secure" : "")
        router.post("/api/session") { request, context -> Response in
            struct Login: Decodable {
                let code: String?
                let password: String?
            }
            let login = try await decodeBody(Login.self, from: request, limit: APILimits.maxSignInBody)
            let session: APIAuth.SessionSecrets
            if let password = login.password {
                session = try await logIn(password: password, from: context.remoteHost ?? "", api: api)
            } else if let code = login.code, let redeemed = try api.auth.redeem(code) {
                session = redeemed
            } else if login.code == nil {
                throw APIError.badRequest("the body needs a \"code\" (from `plait gui`) or a \"password\".")
            } else {
                throw APIError.unauthorized(
                    "this login code is unknown, used or expired (codes work once, for "
                        + "\(api.auth.codeLifetime.components.seconds) s); run `plait gui` for a new one.")
            }
            var response = try json(SessionOutput(pageKey: session.pageKey))
            response.headers[.setCookie] = "\(api.auth.cookieName)=\(session.cookie); \(attributes)"
            return response
        }
        // Behind the guard like every route but the sign-in: a session signs out with its cookie and its key (a
        // cookie alone is refused, so a server that received it cannot sign the user out either), a token may
        // call it too and then only the cookie is expired.
        router.delete("/api/session") { request, context -> Response in
            let guardian = APIGuard(context: api, transport: transport)
            if context.credential == .session, let cookie = guardian.sessionCookie(of: request),
                let key = guardian.pageKey(of: request)
            {
                try api.auth.endSession(cookie: cookie, pageKey: key)
            }
            var response = Response(status: .noContent)
            response.headers[.setCookie] = "\(api.auth.cookieName)=; \(attributes); Max-Age=0"
            return response
        }
        // The Unix socket is the preferred caller (`plait gui` with an agent running). Over TCP only the token may
        // mint codes: a session must not extend itself, and the token can do everything a code gives anyway.
        router.post("/api/login-codes") { _, context -> Response in
            guard context.credential == .token || context.credential == .localSocket else {
                throw APIError.forbidden("login codes are minted with the API token or over the agent's socket.")
            }
            guard let base = api.baseURL else {
                throw APIError.unavailable(
                    "the TCP API is off (api.listen = \"\" in the config); there is no page to log in to. Set api.listen "
                        + "to an address such as 127.0.0.1:7480 and restart the agent.")
            }
            let minted = api.auth.mintCode()
            return try json(
                LoginCodeOutput(
                    code: minted.code, expires: ISO8601DateFormatter().string(from: minted.expires),
                    url: "\(base)/?code=\(minted.code)"))
        }
    }
}

extension APIRoutes {
    /// A password login: refused outright while `source` (or everyone) must wait, else checked against the stored
    /// hash off the event loop (scrypt takes ~0.1 s) and counted when wrong.
    static func logIn(password: String, from source: String, api: APIContext) async throws -> APIAuth.SessionSecrets {
        guard api.secure else {
            throw APIError.forbidden(
                "password logins are taken only over HTTPS (api.listen beyond loopback); on this machine open the "
                    + "URL `plait gui` prints.")
        }
        if let wait = api.limiter.beginTry(source: source) {
            throw APIError.tooManyTries(wait: wait.duration, shared: wait.shared)
        }
        let homePath = api.home.path
        let right = await withCheckedContinuation { continuation in
            DispatchQueue.global().async {
                continuation.resume(returning: APIPassword.verify(password, homePath: homePath))
            }
        }
        guard right else {
            // Counted already, by `beginTry`.
            api.logger.notice("API: a wrong password from \(source.isEmpty ? "an unknown address" : source)")
            throw APIError.unauthorized("wrong password; try again (repeated failures make you wait longer).")
        }
        api.limiter.succeeded(source: source)
        return try api.auth.openSession()
    }
}
