// The local HTTP API of `plait agent` (DESIGN §12; the reference is docs/openapi.yaml).
//
// Entry points, for the agent and for the other files of this module:
// - `APIContext`: what every handler reaches — the agent's home (replica, store), the running agent, the auth
//   state (`APIAuth`: token, login codes, sessions), the transport's bound address.
// - `makeAPIRouter(context:transport:)` → `Router<APIRequestContext>`: every route. `.tcp` puts the browser rules
//   in front (Host allowlist, Origin, JSON content type, session cookie with its page key or bearer token;
//   `APIGuard`); `.unixSocket` serves the same routes to the CLI without a token (the socket's owner checks the
//   peer's uid).
//   Routes live in `extension APIRoutes` functions named `add…Routes(to:context:)`; `makeAPIRouter` calls each
//   (one line per file: events add `addEventRoutes`, the page `addPageRoutes`).
// - `APIServer.start(router:host:port:logger:)`: binds and serves in the background of the (thread-based) agent;
//   returns once listening (with the bound port) or throws `APIError.listen`. `stop()` ends it.
// - `APIService.start(home:agent:listen:logger:)`: what `plait agent` calls: the token file, the router, the TCP
//   server and `<home>/api.addr`, and the Unix socket (`UnixSocketServer`); on failure it logs the warning and
//   leaves that listener off (sync goes on). A non-loopback address is served only with a password set
//   (`APIPassword`), and then over HTTPS with the GUI certificate (`GUICertificate`, Password.swift and
//   TLSCertificate.swift).
import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import Logging
import ServiceLifecycle
import PlaitPairing
import PlaitSync
import PlaitTLS

/// The request context of every API route: Hummingbird's core storage, and the body limit.
public struct APIRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// Set by `APIGuard`: how the request proved who sent it.
    public var credential: APICredential = .none
    /// The peer's IP address (nil on the Unix socket): password logins are rate-limited per source.
    public let remoteHost: String?
    /// Closes the connection: `APIGuard` does after refusing a request whose body it did not read.
    let closeConnection: @Sendable () -> Void

    public init(source: ApplicationRequestContextSource) {
        self.coreContext = .init(source: source)
        self.remoteHost = source.channel.remoteAddress?.ipAddress
        let channel = source.channel
        self.closeConnection = { channel.close(promise: nil) }
    }

    /// Bodies are small JSON objects (an edit, a code); anything larger is refused with 413.
    public var maxUploadSize: Int { APILimits.maxBody }
}

/// How a request was authenticated.
public enum APICredential: Sendable, Equatable {
    case none
    /// `Authorization: Bearer <api-token>`.
    case token
    /// A session a login code (or the password) was exchanged for: its per-device cookie and, in the
    /// `Plait-Page-Key` header, its page key, both of the same session.
    case session
    /// The Unix socket: the peer's uid was checked when it connected.
    case localSocket
}

/// The fixed limits of the API.
public enum APILimits {
    /// The largest request body, in bytes: room for an edit whose text is as long as a change may be
    /// (`store.max_change_bytes`, 1 MiB by default) even with every byte escaped in JSON. At 64 KiB, `plait add`
    /// with a 100 KB text failed with an agent running and worked without one (a hostile tester). Only a request
    /// with a credential has a body this large read.
    public static let maxBody = 8 << 20
    /// The largest body of the sign-in (`POST /api/session`), the one request read without a credential: a code or
    /// a password. At `maxBody`, 150 connections each sending a sign-in of 8 MiB grew an agent serving HTTPS to
    /// 1.4 GB before any password was asked (hostile tester, 2026-11-25, G4).
    public static let maxSignInBody = 4 << 10
}

/// Which listener a router serves: the rules differ (DESIGN §12).
public enum APITransport: Sendable {
    /// TCP (plain HTTP on loopback, HTTPS elsewhere): a browser may reach it, so Host, Origin, content type and a
    /// credential are checked.
    case tcp
    /// `<home>/api.sock`: only processes of the same user (or root) connect; no token.
    case unixSocket
}

/// What the API's handlers reach. One per agent; shared by the TCP and the Unix socket routers.
public final class APIContext: Sendable {
    public let home: Home
    /// The running agent (its peers, its events); nil when a test serves a home without one.
    public let agent: Agent?
    public let auth: APIAuth
    public let logger: Logger
    /// The pairing attempt started from the page, if any.
    let pairing = APIPairing()
    /// Whether the TCP listener serves HTTPS (a non-loopback address with a password set): origins, the login
    /// URL and the cookie's Secure flag follow it, and password logins are accepted.
    public let secure: Bool
    /// The brake on password guessing.
    public let limiter = LoginLimiter()
    /// "127.0.0.1:PORT" once the TCP listener is bound: the Host allowlist and the login URL use it.
    private let boundAddress = LockedValue<(host: String, port: Int)?>(nil)

    public init(home: Home, agent: Agent?, auth: APIAuth, logger: Logger, secure: Bool = false) {
        self.secure = secure
        self.home = home
        self.agent = agent
        self.auth = auth
        self.logger = logger
    }

    /// The TCP listener's address, once bound.
    public var tcpAddress: (host: String, port: Int)? { boundAddress.value }

    func setTCPAddress(host: String, port: Int) { boundAddress.value = (host, port) }

    /// The page's address as a browser types it (IPv6 in brackets).
    public var baseURL: String? {
        tcpAddress.map { "\(scheme)://\($0.host.contains(":") ? "[\($0.host)]" : $0.host):\($0.port)" }
    }

    /// "https" beyond loopback, "http" on it.
    public var scheme: String { secure ? "https" : "http" }
}

/// Every route of the API for one transport.
public func makeAPIRouter(context: APIContext, transport: APITransport) -> Router<APIRequestContext> {
    let router = Router(context: APIRequestContext.self)
    router.add(middleware: APIGuard(context: context, transport: transport))
    APIRoutes.addReadRoutes(to: router, context: context)
    APIRoutes.addEditRoutes(to: router, context: context)
    APIRoutes.addAuthRoutes(to: router, context: context, transport: transport)
    APIRoutes.addPairingRoutes(to: router, context: context)
    APIRoutes.addPageRoutes(to: router, context: context)
    APIRoutes.addEventRoutes(to: router, context: context)
    return router
}

/// Namespace of the route-adding functions (one per file).
public enum APIRoutes {}

/// A running HTTP listener serving one router in the background.
public final class APIServer: Sendable {
    private let running: BackgroundService
    /// The port actually bound (the one asked for, or the one the system picked for 0).
    public let port: Int

    private init(running: BackgroundService, port: Int) {
        self.running = running
        self.port = port
    }

    /// Binds `host:port` (0: any free port) and serves `router`, over TLS with `tls`. Blocks until listening or
    /// failed.
    /// Seconds an API connection may sit with no request before it is closed.
    public static let idleSeconds = 30

    public static func start(
        router: Router<APIRequestContext>, host: String, port: Int, tls: TLSConfiguration? = nil, logger: Logger
    ) throws -> APIServer {
        let outcome = Outcome()
        // A connection that sends no request for this long is closed (one being answered, an event stream, is
        // not): a local user's idle or half-sent connections held descriptors for good.
        let http1 = HTTP1Channel.Configuration(idleTimeout: .seconds(Int64(idleSeconds)))
        let app = Application(
            router: router,
            server: try tls.map { try .tls(.http1(configuration: http1), tlsConfiguration: $0) }
                ?? .http1(configuration: http1),
            // SO_REUSEADDR: without it the connections of the agent's previous run, in TIME-WAIT for a minute,
            // kept a restarted agent's API off. Linux still refuses the port while another socket listens on it.
            configuration: .init(address: .hostname(host, port: port), serverName: nil, reuseAddress: true),
            onServerRunning: { channel in outcome.finish(.success(channel.localAddress?.port ?? port)) },
            logger: logger)
        let running = BackgroundService(app, logger: logger) { error in
            if let error { outcome.finish(.failure(error)) }
        }
        switch outcome.wait() {
        case let .success(bound): return APIServer(running: running, port: bound)
        case let .failure(error):
            running.stop()
            let shown = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
            throw APIError.listen(address: shown, problem: Self.describe(error), detail: "\(error)")
        }
    }

    /// Stops listening and ends open connections (`BackgroundService.stop`).
    public func stop() { running.stop() }

    /// What a bind error means, said of the address (NIO's IOError reads "bind(descriptor:ptr:bytes:): Address
    /// already in use (errno: 98)").
    static func describe(_ error: any Error) -> String {
        let text = "\(error)"
        if text.contains("Address already in use") { return "is in use" }
        if text.contains("Cannot assign requested address") { return "is no address of this machine" }
        if text.contains("Permission denied") { return "may not be bound by this user" }
        return "cannot be bound"
    }

    /// The first of "running on port P" or "failed", handed from the server's task to the starting thread.
    private final class Outcome: @unchecked Sendable {
        private let lock = NSLock()
        private let ready = DispatchSemaphore(value: 0)
        private var result: Result<Int, any Error>?

        func finish(_ value: Result<Int, any Error>) {
            let first = lock.withLock {
                guard result == nil else { return false }
                result = value
                return true
            }
            if first { ready.signal() }
        }

        func wait() -> Result<Int, any Error> {
            ready.wait()
            return lock.withLock { result! }
        }
    }
}

/// What `plait agent` runs: the API on TCP, with its token file and `<home>/api.addr`.
public final class APIService: Sendable {
    public let context: APIContext
    /// The TCP listener; nil when `listen` is "" or could not be bound (the warning says why).
    public let tcp: APIServer?
    /// The Unix socket for `plait` commands on this home (UnixSocketServer.swift); served even when TCP is off,
    /// nil when it could not be set up (the warning says why).
    public let unixSocket: UnixSocketServer?

    private init(context: APIContext, tcp: APIServer?, unixSocket: UnixSocketServer?) {
        self.context = context
        self.tcp = tcp
        self.unixSocket = unixSocket
    }

    /// The file the agent writes its API address to, one line `127.0.0.1:PORT`, once listening. An address beyond
    /// loopback is always served over HTTPS (that is the only way it is served), so the line needs no scheme.
    public static let addressFileName = "api.addr"

    /// Starts the API on the home's Unix socket and on `listen` ("HOST:PORT"; "" for no TCP). A failure of
    /// either listener (the port taken) is logged as a warning and leaves that one off: the agent goes on
    /// syncing. nil only when the API cannot start at all. `codeLifetime`: how long a login code stays valid.
    public static func start(
        home: Home, agent: Agent?, listen: String, codeLifetime: Duration = APIAuth.defaultCodeLifetime,
        logger: Logger
    ) -> APIService? {
        let addressFile = home.path + "/" + addressFileName
        try? FileManager.default.removeItem(atPath: addressFile)
        let context: APIContext
        // A TCP address beyond loopback is served over HTTPS: the context's cookies and Origin rule follow.
        let parsed = listen.isEmpty ? nil : try? PeerAddress(parsing: listen, allowingPortZero: true)
        let secure = parsed.map { !Config.isLoopback(host: $0.host) } ?? false
        do {
            let auth = try APIAuth(home: home, codeLifetime: codeLifetime)
            context = APIContext(home: home, agent: agent, auth: auth, logger: logger, secure: secure)
        } catch {
            logger.warning("\(APIError.turnedOff(by: error))")
            return nil
        }
        let unixSocket = UnixSocketServer.start(context: context, logger: logger)
        guard !listen.isEmpty else { return APIService(context: context, tcp: nil, unixSocket: unixSocket) }
        do {
            let address = try PeerAddress(parsing: listen, allowingPortZero: true)
            // Beyond loopback other machines reach the API: only with a password, and only over HTTPS.
            var tls: TLSConfiguration?
            var certificate: GUICertificate?
            if secure {
                guard APIPassword.isSet(homePath: home.path) else { throw APIError.noPassword(address: listen) }
                certificate = try GUICertificate.ensure(homePath: home.path)
                tls = try certificate?.serverConfiguration()
            }
            let router = makeAPIRouter(context: context, transport: .tcp)
            let server = try APIServer.start(
                router: router, host: address.host, port: Int(address.port), tls: tls, logger: logger)
            context.setTCPAddress(host: address.host, port: server.port)
            let host = address.host.contains(":") ? "[\(address.host)]" : address.host
            let shown = "\(host):\(server.port)"
            try Data((shown + "\n").utf8).write(to: URL(fileURLWithPath: addressFile), options: .atomic)
            if let certificate {
                let note = "log in with api.password; certificate SHA-256 \(certificate.fingerprint)"
                logger.info("local API and page on https://\(shown)/ (\(note))")
            } else {
                logger.info("local API and page on http://\(shown)/ (`plait gui` prints a login URL)")
            }
            return APIService(context: context, tcp: server, unixSocket: unixSocket)
        } catch {
            logger.warning("\(APIError.turnedOff(by: error))")
            return APIService(context: context, tcp: nil, unixSocket: unixSocket)
        }
    }

    public func stop() {
        tcp?.stop()
        unixSocket?.stop()
        try? FileManager.default.removeItem(atPath: context.home.path + "/" + Self.addressFileName)
    }
}

/// A value behind a lock, for the few mutable fields of otherwise immutable shared objects.
public final class LockedValue<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value

    public init(_ value: Value) { stored = value }

    public var value: Value {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }

    public func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        try lock.withLock { try body(&stored) }
    }
}

/// A Hummingbird application served in the background of the (thread-based) agent until `stop`.
///
/// In a service group, so that `stop` ends it gracefully: cancelled, Hummingbird logged "Waiting on child channel:
/// CancellationError()" at error level at every agent stop, once per server. The agent handles signals itself.
struct BackgroundService: Sendable {
    private let group: ServiceGroup
    private let task: Task<Void, any Error>

    /// How long `stop` waits for open connections to end after it stopped listening, before it cuts them.
    static let gracefulStop: Duration = .seconds(1)

    /// Starts `service`; `ended` is told how its run ended (nil: it returned), from the server's task.
    init(_ service: some Service, logger: Logger, ended: @escaping @Sendable ((any Error)?) -> Void) {
        let group = ServiceGroup(
            configuration: .init(services: [service], gracefulShutdownSignals: [], cancellationSignals: [], logger: logger))
        self.group = group
        task = Task {
            do {
                try await group.run()
                ended(nil)
            } catch {
                ended(error)
                throw error
            }
        }
    }

    /// Stops listening and ends open connections: gracefully (an answer being written is finished), and after
    /// `gracefulStop` by cancelling what is still open (an event stream). Returns once the server ended (5 s at most).
    func stop() {
        let done = DispatchSemaphore(value: 0)
        let (task, group) = (self.task, self.group)
        Task {
            await group.triggerGracefulShutdown()
            _ = await task.result
            done.signal()
        }
        let graceful = Int(Self.gracefulStop.components.seconds * 1000)
        if done.wait(timeout: .now() + .milliseconds(graceful)) == .success { return }
        task.cancel()
        _ = done.wait(timeout: .now() + 4)
    }
}
