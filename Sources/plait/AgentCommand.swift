import ArgumentParser
import Dispatch
import Foundation
import Logging
import PlaitAPI
import PlaitCore
import PlaitSync
import PlaitTLS

extension Plait {
    struct Agent: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "agent",
            abstract: "Run the background agent: listen, connect to paired peers, push every change at once.",
            discussion: """
                Keeps a connection to every paired peer it can reach, sends each change made on this device \
                (by any plait command) within milliseconds, relays what peers send, and compacts history on a \
                schedule. Stops cleanly on SIGTERM or SIGINT. Logs go to standard error. Stops with status 1 \
                when its store file is deleted or replaced while it runs (a restore put in place): it would \
                otherwise write on into a file no command sees; started again, it uses the file now there.

                Peers are found three ways: by mDNS through avahi-daemon (this device is published as \
                _plait._tcp; paired devices recognise each other by a daily tag that strangers cannot link \
                to a device), at the addresses paired peers were last reached at, and at --peer / agent.peers \
                addresses. Without a running avahi-daemon it warns once and uses the other two.
                """)

        @OptionGroup var global: GlobalOptions

        @Option(help: ArgumentHelp("Where to listen for peers (default: agent.listen, 0.0.0.0:7400).", valueName: "host:port"))
        var listen: String?

        @Option(name: .customLong("peer"), help: ArgumentHelp("Also keep a connection to this address (repeatable).", valueName: "host:port"))
        var peers: [String] = []

        @Flag(help: "Do not publish this device or look for paired ones by mDNS (also: discovery.enabled = false).")
        var noDiscovery = false

        @Flag(name: .shortAndLong, help: "Log more (debug level).")
        var verbose = false

        @Option(help: ArgumentHelp(
            "Where to serve the local HTTP API and page (default: api.listen, 127.0.0.1:7480; \"\": off).",
            valueName: "host:port"))
        var apiListen: String?

        func validate() throws {
            if let apiListen, !apiListen.isEmpty {
                do { try Config.checkAPIListen(apiListen, origin: "--api-listen") } catch let error as PlaitError {
                    throw ValidationError("\(error)")
                }
            }
        }

        /// The soft limit on open files raised to the hard one. The agent holds a descriptor per peer session, API
        /// connection and event stream; at the usual soft limit of 1,024 a local user's idle connections to the
        /// API used them all up (a hostile tester: the owner's own requests and `plait lists` then hung).
        static func raiseOpenFileLimit() {
            let files = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
            var limit = rlimit()
            guard getrlimit(files, &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
            limit.rlim_cur = limit.rlim_max
            _ = setrlimit(files, &limit)
        }

        func run() throws {
            Self.raiseOpenFileLimit()
            let home = try global.openHome()
            let config = home.config
            var settings = PlaitSync.Agent.Settings()
            settings.listen = try PeerAddress(parsing: listen ?? config.listen, allowingPortZero: true)
            settings.staticPeers = try (config.staticPeers + peers).map { try PeerAddress(parsing: $0) }
            settings.compactionInterval = .seconds(config.compactionIntervalSeconds == 0 ? Int.max / 2 : config.compactionIntervalSeconds)
            settings.peerGrace = .seconds(config.peerGraceDays * 24 * 3600)
            settings.discovery = config.discoveryEnabled && !noDiscovery
            let level: Logger.Level = verbose ? .debug : Logger.Level(rawValue: config.logLevel) ?? .info
            LoggingSystem.bootstrap { label in
                var handler = StreamLogHandler.standardError(label: label)
                handler.logLevel = level
                return handler
            }
            let logger = Logger(label: "plait.agent")
            home.replica.onDerivedStateRepair { repair in logger.warning("\(repair)") }
            let agent = PlaitSync.Agent(home: home, settings: settings, logger: logger)
            // The store deleted or replaced under the agent: it stops, and exits with that sentence (status 1).
            let storeGone = LockedValue<String?>(nil)
            let finished = DispatchSemaphore(value: 0)
            agent.onStoreGone = { sentence in
                storeGone.value = sentence
                finished.signal()
            }
            // Handlers first: a SIGTERM right after "listening on" (a test, a service manager) must stop the
            // agent. SIG_IGN goes before the source is resumed: libdispatch catches the signal with a handler of
            // its own on Linux, which a later SIG_IGN would replace (the agent then ignored SIGTERM for good).
            var sources: [DispatchSourceSignal] = []
            for number in [SIGTERM, SIGINT] {
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
                source.setEventHandler { finished.signal() }
                source.resume()
                sources.append(source)
            }
            try agent.start()
            // After the agent: the API serves its state, and a taken port must not stop the sync (DESIGN §12).
            try APIAuth.ensureToken(homePath: home.path)
            let apiAddress = apiListen ?? config.apiListen
            // api.listen = "" turns TCP off; the Unix socket for plait commands is served all the same.
            let api = APIService.start(
                home: home, agent: agent, listen: apiAddress, codeLifetime: Self.loginCodeLifetime(),
                logger: Logger(label: "plait.api"))
            finished.wait()
            agent.events.close()  // open event streams end, so the API's shutdown does not wait for them
            api?.stop()
            agent.stop()
            _ = sources
            if let sentence = storeGone.value {
                throw PlaitError.file(path: home.path + "/" + Home.storeFileName, problem: sentence)
            }
        }

        /// How long a login code stays valid: 60 s; `PLAIT_TEST_LOGIN_CODE_MS` shortens it so a test sees a code
        /// expire without waiting a minute.
        static func loginCodeLifetime() -> Duration {
            if let text = ProcessInfo.processInfo.environment["PLAIT_TEST_LOGIN_CODE_MS"], let ms = Int(text), ms > 0 {
                return .milliseconds(ms)
            }
            return APIAuth.defaultCodeLifetime
        }
    }
}

