import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import PlaitSync

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The local API on the agent's Unix socket (DESIGN §12): the same routes as TCP without a token, for `plait`
/// commands run on this home (and `plait gui`). Where the socket lives is `UnixSocketPath`'s to say.
///
/// Nobody but the agent's user (and root) can connect, at any moment:
/// - the socket is bound inside a fresh 0700 directory beside its final path, made 0600, and only then renamed
///   into place, so there is no instant when it exists with the mode bind(2) gave it;
/// - every connection's peer is checked with `SO_PEERCRED` (`UnixSocketPeerCheck`).
/// A socket left at the path by a killed agent is replaced; one that accepts connections (another agent serving
/// a copy of this home under the same Device ID, in the `$XDG_RUNTIME_DIR` fallback) never is.
public final class UnixSocketServer: Sendable {
    /// Where the socket is.
    public let path: String
    private let running: BackgroundService
    /// The socket file's device and inode once in place: stop() removes the path only if it is still ours.
    private let file: (device: UInt64, inode: UInt64)

    private init(path: String, running: BackgroundService, file: (device: UInt64, inode: UInt64)) {
        self.path = path
        self.running = running
        self.file = file
    }

    /// Serves `context`'s API for the CLI on the home's socket. A failure is logged as one warning and gives nil:
    /// the agent goes on, and commands on the home open the store themselves.
    public static func start(
        context: APIContext, environment: [String: String] = ProcessInfo.processInfo.environment, logger: Logger
    ) -> UnixSocketServer? {
        let home = context.home
        guard
            let path = UnixSocketPath.path(
                home: home.path, environment: environment,
                deviceShortID: { try? home.identity.deviceID.shortForm })
        else {
            let text = "local socket off: \(home.path)/\(UnixSocketPath.fileName) is longer than a Unix socket path "
                + "may be (\(UnixSocketPath.capacity - 1) bytes) and XDG_RUNTIME_DIR names no short enough directory; "
                + "plait commands on this home open the store themselves. Use a shorter --home path."
            logger.warning("\(text)")
            return nil
        }
        do {
            let server = try bind(
                path: path, home: home.path, router: makeAPIRouter(context: context, transport: .unixSocket),
                logger: logger)
            logger.info("local API for plait commands on \(path)")
            return server
        } catch {
            logger.warning("local socket off: \(error); plait commands on this home open the store themselves.")
            return nil
        }
    }

    /// Binds in a private directory, sets the mode, renames into place; serves until `stop()`.
    static func bind(
        path: String, home: String, router: Router<APIRequestContext>, logger: Logger
    ) throws -> UnixSocketServer {
        try checkOccupant(path)
        let directory = (path as NSString).deletingLastPathComponent
        var template = Array((directory + "/" + UnixSocketPath.bindDirectoryTemplate).utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw APIError.unavailable("cannot make a private directory in \(directory) (\(errnoText()))")
        }
        let privateDirectory = String(cString: made)
        let bindPath = privateDirectory + "/s"
        defer {
            unlink(bindPath)
            rmdir(privateDirectory)
        }
        // Hummingbird logs its own "listening on <the private path>"; the agent says where the socket is instead.
        var quiet = logger
        quiet.logLevel = max(logger.logLevel, .warning)
        let homeIdentity = DirectoryIdentity(path: home)
        let outcome = StartOutcome()
        let app = Application(
            router: router,
            server: .http1(
                configuration: .init(additionalChannelHandlers: [
                    UnixSocketPeerCheck(home: home, homeIdentity: homeIdentity, logger: logger)
                ])),
            configuration: .init(address: .unixDomainSocket(path: bindPath), serverName: nil),
            onServerRunning: { _ in outcome.finish(nil) },
            logger: quiet)
        let running = BackgroundService(app, logger: quiet) { error in
            outcome.finish(error ?? APIError.unavailable("the server stopped before it listened"))
        }
        if let error = outcome.wait() {
            running.stop()
            throw APIError.unavailable("cannot listen on \(path) (\(error))")
        }
        do {
            guard chmod(bindPath, 0o600) == 0 else {
                throw APIError.unavailable("cannot make \(path) private (chmod: \(errnoText()))")
            }
            // Checked again just before the rename: another agent may have started meanwhile.
            try checkOccupant(path)
            guard rename(bindPath, path) == 0 else {
                throw APIError.unavailable("cannot put the socket at \(path) (rename: \(errnoText()))")
            }
            var status = stat()
            guard lstat(path, &status) == 0 else { throw APIError.unavailable("\(path) vanished (\(errnoText()))") }
            return UnixSocketServer(
                path: path, running: running, file: (UInt64(status.st_dev), UInt64(status.st_ino)))
        } catch {
            running.stop()
            throw error
        }
    }

    /// Throws unless `path` is free or holds a stale socket (which the rename then replaces).
    static func checkOccupant(_ path: String) throws {
        switch UnixSocketOccupant.probe(path) {
        case .none, .stale: return
        case .live:
            throw APIError.unavailable(
                "another plait agent is listening on \(path) (a copy of this home with the same Device ID?)")
        case .other:
            throw APIError.unavailable("\(path) is in the way and is not a socket; remove it and restart the agent")
        }
    }

    /// Stops serving and removes the socket, unless the path now holds someone else's.
    public func stop() {
        running.stop()
        var status = stat()
        if lstat(path, &status) == 0, UInt64(status.st_dev) == file.device, UInt64(status.st_ino) == file.inode {
            unlink(path)
        }
    }

    static func errnoText() -> String { String(cString: strerror(errno)) }

    /// "Listening" or the error that stopped it, handed from the server's task to the starting thread.
    private final class StartOutcome: @unchecked Sendable {
        private let lock = NSLock()
        private let ready = DispatchSemaphore(value: 0)
        private var finished = false
        private var error: (any Error)?

        func finish(_ error: (any Error)?) {
            let first = lock.withLock {
                guard !finished else { return false }
                finished = true
                self.error = error
                return true
            }
            if first { ready.signal() }
        }

        func wait() -> (any Error)? {
            ready.wait()
            return lock.withLock { error }
        }
    }
}
