import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Logging
import PlaitCore
import PlaitDiscovery
import PlaitSession
import PlaitStore
import PlaitTLS
import PlaitWire

/// The background agent: listens, dials paired peers, keeps one session per peer open, pushes Notify right
/// after any change to the store (a local edit by any `plait` command, or changes pulled from another
/// peer), and compacts on a schedule.
///
/// It learns of changes by events, never by reading the store in a loop (DESIGN §12): a session that pulled
/// changes says so at once, and the other sessions pass them on; a commit by another process wakes the watch
/// thread through inotify on the store's files (`StoreFileEvents`), which confirms it with one `CommitProbe`
/// check. An idle agent wakes only for pings, anti-entropy, compaction and discovery.
///
/// Threads: one accepts and drives every handshake (within `HandshakeLimits`), one dials, one watches the store,
/// and one drives each session (its connection's only owner).
public final class Agent: @unchecked Sendable {
    public struct Settings: Sendable {
        public var listen: PeerAddress?
        public var staticPeers: [PeerAddress] = []
        public var dialTimeout: Duration = .seconds(5)
        public var maxBackoff: Duration = .seconds(30)
        public var compactionInterval: Duration = .seconds(3600)
        /// A peer unseen this long no longer holds compaction back.
        public var peerGrace: Duration = .seconds(30 * 24 * 3600)
        /// Publish and browse `_plait._tcp` through avahi-daemon (DESIGN §6). Off by default for embedders and
        /// tests; `plait agent` turns it on unless `--no-discovery`.
        public var discovery = false
        /// How often every session re-exchanges summaries whatever Notify and TXT records said.
        public var antiEntropyInterval: Duration = .seconds(60)
        /// The least time between two updates of the TXT `sum` (a burst of edits updates it once).
        public var sumUpdateInterval: Duration = .seconds(1)
        /// Connections still handshaking (not yet proved paired): caps per address and in total, and a deadline.
        public var handshakeLimits = HandshakeLimits()
        /// Whether the agent watches the store for other processes' commits (inotify on its files). Tests turn it
        /// off to show what the sessions' own notices do alone.
        var watchesStore = true

        public init() {}
    }

    private final class Running: @unchecked Sendable {
        let session: Session
        let peer: String
        let dialedByMe: Bool
        let started = ContinuousClock.now
        init(session: Session, peer: String, dialedByMe: Bool) {
            self.session = session
            self.peer = peer
            self.dialedByMe = dialedByMe
        }
    }

    /// A paired device as discovery last saw it.
    private struct Discovered {
        var instance: String
        var endpoint: PeerAddress
        var sum: String
    }

    public let home: Home
    public let settings: Settings
    let logger: Logger
    private let lock = NSLock()
    private var stopped = false
    private var sessions: [String: Running] = [:]
    /// Sessions with a device that already has one here (another process of its home): stopped with the agent.
    private var extraSessions: [ObjectIdentifier: Running] = [:]
    private var dialing: Set<String> = []
    private var backoff: [String: (next: ContinuousClock.Instant, delay: Duration)] = [:]
    private var trusted: Set<String> = []
    private var listener: TLSListener?
    /// Held from `start` to `stop`: one agent per home.
    private var homeLock: AgentLock?
    private var discovery: Discovery?
    /// The tag in the published TXT record (it changes with the UTC date).
    private var publishedTag: String?
    private var discoveryTask: Task<Void, Never>?
    /// Paired devices found on the LAN, by Device ID.
    private var discovered: [String: Discovered] = [:]
    /// Sessions younger than this are "simultaneous" when a second connection from the same peer arrives.
    static let simultaneousWindow: Duration = .seconds(2)
    /// A session that moved bytes this recently is alive, whatever a second connection from its peer suggests.
    static let activeWindow: Duration = .seconds(5)
    private let threads = DispatchGroup()
    /// Wakes the accept thread (to stop) and the watch thread (to stop, or to update the TXT record).
    private var acceptWake: Inbox<Wake>?
    private var watchWake: Inbox<Wake>?
    private enum Wake: Sendable { case wake }
    /// The highest store generation whose changes the sessions were told of.
    private var announcedGeneration: Int64 = -1
    /// The paired devices as the store last listed them (the dial thread's targets), read when a commit is seen.
    private var knownPeers: [PeerRecord] = []
    /// The summary changed since the TXT record was last published.
    private var txtStale = false
    /// Used when inotify cannot be had (its limits reached): how often the store is checked then.
    static let fallbackCheckInterval: Duration = .milliseconds(250)
    /// The port actually bound (useful with port 0).
    public private(set) var boundPort: UInt16?

    public init(home: Home, settings: Settings, logger: Logger) {
        self.home = home
        self.settings = settings
        self.logger = logger
    }

    /// Read after `start` loaded the identity (it is cached in the home from then on).
    private var myID: String { (try? home.identity)?.deviceID.description ?? "?" }

    public func start() throws {
        homeLock = try AgentLock.acquire(home: home.path)
        TLS.setUp()
        _ = try home.identity  // networking needs the certificate: say so before listening or dialling
        acceptWake = try Inbox()
        let watchWake = try Inbox<Wake>()
        self.watchWake = watchWake
        // Watching starts before the first read: a commit after that read wakes the watch thread.
        let watch: StoreWatch
        do {
            let files = [Home.storeFileName, Home.storeFileName + "-wal"]
            watch = settings.watchesStore ? .events(try StoreFileEvents(directory: home.path, files: files)) : .off
        } catch {
            logger.warning("\(error); checking the store for other processes' changes every 250 ms instead")
            watch = .polling
        }
        let probe = try home.store.makeCommitProbe()
        _ = try probe.changed()
        let generation = try home.store.generation()
        let peers = try home.store.peers()
        lock.withLock {
            announcedGeneration = generation
            knownPeers = peers
            trusted = Set(peers.map(\.deviceID))
        }
        if let listen = settings.listen {
            let context = try TLSContext(identity: home.identity, role: .server(acceptsPairing: false))
            let listener = try TLSListener(host: listen.host, port: listen.port, context: context)
            self.listener = listener
            boundPort = listener.port
            logger.info("listening on \(listen.host):\(listener.port) as \(myID) (\(home.deviceName.terminalSafe))")
            spawn("accept") { self.acceptLoop(listener) }
        }
        if settings.discovery, let port = boundPort { startDiscovery(port: port) }
        // Bit rot in the source heals like a re-pulled block: damaged changes are set aside at start (their
        // timeline ends before them) and pulled again from the first peer that holds them (DESIGN §10).
        spawn("verify") {
            do {
                for damage in try self.home.replica.quarantineDamaged() {
                    let what = "stored \(damage) is damaged (its hash does not continue its chain): set aside, to be "
                        + "pulled again from a paired device"
                    self.logger.error("\(what)")
                }
            } catch {
                self.logger.error("checking the stored hash chains failed: \(error)")
            }
        }
        spawn("watch") { self.watchLoop(watch, probe: probe, wake: watchWake) }
        spawn("dial") { self.dialLoop() }
    }

    /// Stops everything and waits for every thread.
    public func stop() {
        let running: [Running] = lock.withLock {
            stopped = true
            return Array(sessions.values) + Array(extraSessions.values)
        }
        // The accept thread owns the listener and closes it when it sees `stopped`.
        for entry in running { entry.session.stop() }
        acceptWake?.post(.wake)
        watchWake?.post(.wake)
        dialWake.signal()
        discovery?.close()
        threads.wait()
        discoveryTask?.cancel()
        homeLock?.release()
        logger.info("agent stopped")
    }

    private var isStopped: Bool { lock.withLock { stopped } }

    private func spawn(_ name: String, _ body: @escaping @Sendable () -> Void) {
        threads.enter()
        let thread = Thread {
            body()
            self.threads.leave()
        }
        thread.name = "plait-\(name)"
        thread.start()
    }

    private func trust(_ id: DeviceID) -> Bool { lock.withLock { trusted.contains(id.description) } }

    // MARK: Accepting

    /// When each address last had an unpaired device listed as pending.
    private var pendingRecorded: [String: ContinuousClock.Instant] = [:]
    static let pendingInterval: Duration = .seconds(60)
    /// Lists unpaired devices as pending off the accept thread: a store write may wait for another writer.
    private let pendingQueue = DispatchQueue(label: "plait.agent.pending")

    /// A connection accepted and still in its handshake; owned by the accept thread.
    private struct Handshaking {
        let connection: TLSConnection
        /// The peer's address, read when accepted (a refused handshake closes the socket); nil if unknown.
        let address: String?
        /// The address as the log names it.
        var host: String { address ?? "an unknown address" }
        /// What poll(2) waits for before the next step (POLLIN or POLLOUT).
        var waitsFor: Int16
    }

    /// Accepts connections and drives every handshake from this one thread, polling the listener and the
    /// handshaking sockets together, within `settings.handshakeLimits` (DESIGN §10 "Admission under load"):
    /// strangers can exhaust neither threads nor the log, and cannot crowd out a paired device. A connection from
    /// a paired device goes to a thread of its own for its session once its handshake is done (~2 ms).
    private func acceptLoop(_ listener: TLSListener) {
        var admission = HandshakeAdmission(limits: settings.handshakeLimits)
        var handshaking: [HandshakeAdmission.Ticket: Handshaking] = [:]
        var acceptFailureLogged: ContinuousClock.Instant?
        while !isStopped {
            let tickets = Array(handshaking.keys)
            var descriptors = [
                pollfd(fd: listener.fileDescriptor, events: Int16(POLLIN), revents: 0),
                pollfd(fd: acceptWake?.readDescriptor ?? -1, events: Int16(POLLIN), revents: 0),
            ]
            for ticket in tickets {
                guard let entry = handshaking[ticket] else { continue }
                descriptors.append(pollfd(fd: entry.connection.fileDescriptor, events: entry.waitsFor, revents: 0))
            }
            // Idle, this thread sleeps until a connection comes, a deadline or summary is due, or `stop` wakes it.
            let due = admission.nextDue ?? .now + .seconds(3600)
            guard poll(&descriptors, nfds_t(descriptors.count), pollMilliseconds(until: due)) >= 0 else { continue }
            if descriptors[1].revents != 0 { _ = acceptWake?.take() }
            for (ticket, descriptor) in zip(tickets, descriptors.dropFirst(2)) where descriptor.revents != 0 {
                advance(ticket, &handshaking, &admission)
            }
            // At most a listener's backlog per turn, so the handshakes in progress are not kept waiting.
            for _ in 0..<(descriptors[0].revents != 0 ? 64 : 0) {
                let accepted: TLSConnection?
                do {
                    accepted = try listener.acceptPending(trust: { [weak self] in self?.trust($0) ?? false })
                } catch {
                    if isStopped { break }
                    // Out of file descriptors, say: once a minute in the log, and a pause rather than a busy loop.
                    if acceptFailureLogged.map({ ContinuousClock.now - $0 >= Self.pendingInterval }) ?? true {
                        acceptFailureLogged = ContinuousClock.now
                        logger.warning("accepting a connection failed: \(error)")
                    }
                    Thread.sleep(forTimeInterval: 0.05)
                    break
                }
                guard let connection = accepted else { break }
                let address = connection.peerHost
                if admission.isFull(for: address ?? "?") { refresh(&handshaking, &admission) }
                let (ticket, evicted) = admission.admit(host: address ?? "?", now: .now)
                if let evicted { handshaking.removeValue(forKey: evicted)?.connection.close() }
                handshaking[ticket] = Handshaking(connection: connection, address: address, waitsFor: Int16(POLLIN))
                advance(ticket, &handshaking, &admission)  // its ClientHello is often there already
            }
            let now = ContinuousClock.now
            for ticket in admission.expired(now: now) {
                handshaking.removeValue(forKey: ticket)?.connection.close()
                admission.drop(ticket, because: .pastDeadline, now: now)
            }
            if let line = admission.summary(now: now) { logger.warning("\(line)") }
        }
        for (ticket, entry) in handshaking {
            entry.connection.close()
            admission.release(ticket)
        }
        if let line = admission.summary(now: .now, final: true) { logger.warning("\(line)") }
        listener.close()
        pendingQueue.sync {}  // a pending device being listed is in the store before `stop()` returns
    }

    /// Takes the handshake of `ticket` one step further: on to its session if done, closed and counted if it
    /// failed, else what to wait for next.
    private func advance(
        _ ticket: HandshakeAdmission.Ticket, _ handshaking: inout [HandshakeAdmission.Ticket: Handshaking],
        _ admission: inout HandshakeAdmission
    ) {
        guard var entry = handshaking[ticket] else { return }
        do {
            switch try entry.connection.handshake() {
            case .done:
                handshaking[ticket] = nil
                admission.release(ticket)
                let connection = entry.connection
                spawn("session") { self.run(connection, dialedByMe: false, address: nil) }
            case .wantRead:
                entry.waitsFor = Int16(POLLIN)
                handshaking[ticket] = entry
                if entry.connection.hasAnsweredClientHello { admission.answered(ticket) }
            case .wantWrite:
                entry.waitsFor = Int16(POLLOUT)
                handshaking[ticket] = entry
            }
        } catch {
            // The connection is closed already (a failed handshake closes it).
            handshaking[ticket] = nil
            if let reason = refused(error, from: entry) {
                admission.drop(ticket, because: reason, now: .now)
            } else {
                admission.release(ticket)
            }
        }
    }

    /// Takes every handshake whose socket is ready one step further, before one of them is dropped to make room:
    /// a ClientHello that came in since the last turn is answered first, and a paired device's handshake that is
    /// answered is not the one dropped.
    private func refresh(
        _ handshaking: inout [HandshakeAdmission.Ticket: Handshaking], _ admission: inout HandshakeAdmission
    ) {
        let tickets = Array(handshaking.keys)
        var descriptors = tickets.compactMap { ticket in
            handshaking[ticket].map { pollfd(fd: $0.connection.fileDescriptor, events: $0.waitsFor, revents: 0) }
        }
        guard descriptors.count == tickets.count, poll(&descriptors, nfds_t(descriptors.count), 0) > 0 else { return }
        for (ticket, descriptor) in zip(tickets, descriptors) where descriptor.revents != 0 {
            advance(ticket, &handshaking, &admission)
        }
    }

    /// What a failed handshake of `entry` counts as in the summary (nil: nothing, it was this very device). The
    /// first unpaired device from an address in a minute is listed as pending and logged; every other failure is
    /// only counted (and logged at debug level), so a flood adds one line a minute to the log.
    private func refused(_ error: any Error, from entry: Handshaking) -> HandshakeAdmission.Drop? {
        let (address, host) = (entry.address, entry.host)
        switch error {
        case let TLSError.peerNotTrusted(id) where id == (try? home.identity)?.deviceID:
            logger.debug("a connection from this very device (`plait doctor` checking the port); closed")
            return nil
        case let TLSError.peerNotTrusted(id):
            // At most one new pending entry per address and minute: one host cannot push the (16-entry) list's
            // real devices out by presenting fresh certificates.
            let now = ContinuousClock.now
            let key = HandshakeAdmission.addressKey(address ?? "?")
            let listed = lock.withLock { () -> Bool in
                if let last = pendingRecorded[key], now - last < Self.pendingInterval { return false }
                pendingRecorded[key] = now
                if pendingRecorded.count > 256 {
                    pendingRecorded = pendingRecorded.filter { now - $0.value < Self.pendingInterval }
                }
                return true
            }
            guard listed else {
                logger.debug("refused unpaired device \(id) from \(host) (not listed: listed less than a minute ago)")
                return .unpaired
            }
            pendingQueue.async { [home, logger] in
                try? home.store.recordPending(
                    deviceID: id.description, claimedName: "(unknown)", address: address, now: Replica.now())
                logger.notice("refused unpaired device \(id) from \(host); listed by `plait peers --pending`")
            }
            return nil
        default:
            logger.debug("a handshake from \(host) failed: \(error)")
            return .failed
        }
    }

    // MARK: Dialing

    private func dialLoop() {
        while !isStopped {
            var targets: [(address: PeerAddress, id: String?)] = settings.staticPeers.map { ($0, nil) }
            // Where discovery last saw a paired device comes first: it is where the device is now.
            let found = lock.withLock { discovered }
            for (id, device) in found.sorted(by: { $0.key < $1.key }) where !targets.contains(where: { $0.id == id }) {
                targets.append((device.endpoint, id))
            }
            // The peers as the watch thread last read them: this loop reads no store.
            for peer in lock.withLock({ knownPeers }) where found[peer.deviceID] == nil {
                guard let text = peer.address, let address = try? PeerAddress(parsing: text) else { continue }
                if !targets.contains(where: { $0.address == address }) { targets.append((address, peer.deviceID)) }
            }
            let now = ContinuousClock.now
            // Sleep until the first backoff ends, or a signal (a session ended, a dial failed, discovery found a
            // device, the peers changed), at the latest at the next anti-entropy round.
            var wake = now + settings.antiEntropyInterval
            for target in targets {
                let key = target.id ?? target.address.description
                let due = lock.withLock { () -> Bool in
                    if let id = target.id, sessions[id] != nil { return false }
                    if sessions.values.contains(where: { $0.peer == key }) || dialing.contains(key) { return false }
                    if let wait = backoff[key], wait.next > now {
                        wake = min(wake, wait.next)
                        return false
                    }
                    dialing.insert(key)
                    return true
                }
                if due { spawn("dial-\(key.prefix(7))") { self.dial(target.address, key: key) } }
            }
            _ = dialWake.wait(timeout: .now() + .milliseconds(Int(pollMilliseconds(until: wake))))
        }
    }

    /// Signalled when the dial thread should look again at once (discovery found a device, a session ended, a
    /// dial failed, the paired devices changed).
    private let dialWake = DispatchSemaphore(value: 0)

    private func dial(_ address: PeerAddress, key: String) {
        defer {
            _ = lock.withLock { dialing.remove(key) }
            dialWake.signal()  // its backoff (if it failed) decides when it is dialled again
        }
        do {
            let context = try TLSContext(identity: home.identity, role: .client(offering: .sync))
            let connection = try TLSConnection.connect(
                host: address.host, port: address.port, context: context,
                trust: { [weak self] in self?.trust($0) ?? false }, timeout: settings.dialTimeout)
            lock.withLock { backoff[key] = nil }
            run(connection, dialedByMe: true, address: address)
        } catch {
            let delay = lock.withLock { () -> Duration in
                let previous = backoff[key]?.delay ?? .zero
                let next = min(settings.maxBackoff, max(.seconds(1), previous * 2))
                backoff[key] = (ContinuousClock.now + next, next)
                return next
            }
            logger.debug("could not reach \(address): \(error); retrying in \(delay)")
        }
    }

    // MARK: Sessions

    private func run(_ connection: TLSConnection, dialedByMe: Bool, address: PeerAddress?) {
        defer { connection.close() }
        guard let peer = connection.peerDeviceID?.description else { return }
        var options = SessionOptions(mode: .agent)
        options.maxBatchChanges = home.config.batchChanges
        options.idleTimeout = .seconds(60)
        options.certifiedPeerID = peer
        let logger = self.logger
        options.onFinding = { finding in logger.error("with \(peer): \(finding.terminalSafe)") }
        // Pulled changes go on to the other peers at once, without waiting for the watch thread.
        options.onPulled = { [weak self] _ in
            guard let self else { return }
            self.announce(try? self.home.store.generation())
        }
        let session: Session
        do {
            session = try Session(
                transport: TLSFrameTransport(connection), replica: home.replica, identity: home.sessionIdentity,
                options: options)
        } catch {
            logger.error("cannot start a session with \(peer): \(error)")
            return
        }
        let entry = Running(session: session, peer: peer, dialedByMe: dialedByMe)
        // A second connection with a peer: two agents dialling each other at once keep the one dialled by the
        // smaller Device ID (both decide alike). Otherwise the newer one wins: a peer dials only when it holds no
        // session with this device, so the older one is dead on its side (a cut link; TCP has not noticed).
        let keep = lock.withLock { () -> Bool in
            if stopped { return false }
            if let existing = sessions[peer] {
                let existingDialer = existing.dialedByMe ? myID : peer
                let newDialer = dialedByMe ? myID : peer
                let simultaneous = ContinuousClock.now - existing.started < Self.simultaneousWindow
                    && existingDialer != newDialer
                if simultaneous && existingDialer <= newDialer { return false }
                // Both dialled by the peer's device while the older one is busy moving bytes: two processes of one
                // home (its agent, and a `plait sync` run there). Both are alive: the newer one runs beside it.
                // (An idle older one may be dead on a cut link: the newer one replaces it.)
                if !existing.dialedByMe && !dialedByMe
                    && ContinuousClock.now - existing.session.lastMoved < Self.activeWindow
                {
                    extraSessions[ObjectIdentifier(entry)] = entry
                    return true
                }
                existing.session.stop()
            }
            sessions[peer] = entry
            return true
        }
        guard keep else { return }
        defer { _ = lock.withLock { extraSessions.removeValue(forKey: ObjectIdentifier(entry)) } }
        logger.info("connected to \(peer)\(address.map { " at \($0)" } ?? "")")
        do {
            let result = try session.run()
            // The certificate's Device ID names the peer when the session ended before its Hello.
            let label = peerLabel(
                name: result.peerName, deviceID: result.peerDeviceID.isEmpty ? peer : result.peerDeviceID)
            logger.info("session with \(label) ended: pulled \(result.pulled), sent \(result.sent)")
            if dialedByMe, result.peerCloseReason == "stopped" { backOff(peer) }
            try? home.store.peerSeen(
                deviceID: peer, address: address?.description, summary: result.finalSummary, now: Replica.now())
        } catch {
            logger.info("session with \(peer) ended: \("\(error)".terminalSafe)")
            // A session that failed at once (the peer kept another one from this device, or refused this one):
            // re-dialing at once would only repeat it.
            if dialedByMe && ContinuousClock.now - entry.started < Self.activeWindow { backOff(peer) }
        }
        lock.withLock {
            if sessions[peer] === entry { sessions[peer] = nil }
        }
        dialWake.signal()  // a peer that is still (or again) to be found is dialled now, not at the next tick
    }

    /// Waits before dialing `peer` again, longer each time (up to `maxBackoff`): the peer stopped or refused the
    /// last session (it is shutting down, or keeps another one from this device, such as this home's own
    /// `plait sync`), and re-dialing at once would knock that one off or repeat the refusal.
    private func backOff(_ peer: String) {
        lock.withLock {
            let delay = min(settings.maxBackoff, max(.seconds(2), (backoff[peer]?.delay ?? .zero) * 2))
            backoff[peer] = (ContinuousClock.now + delay, delay)
        }
    }

    // MARK: Watching the store

    /// How often, with discovery on, the TXT tag is checked against the date (it changes at midnight UTC).
    static let dayCheckInterval: Duration = .seconds(60)

    /// How the watch thread learns of other processes' commits.
    private enum StoreWatch: Sendable {
        /// inotify on the store's files.
        case events(StoreFileEvents)
        /// A check every `fallbackCheckInterval` (inotify could not be had).
        case polling
        /// Not at all (tests of the sessions' own notices).
        case off
    }

    /// Sleeps until the store's files change, `wake` is posted to, or a timer is due (anti-entropy, compaction,
    /// the TXT record): it never reads the store on a timer (unless inotify could not be had).
    private func watchLoop(_ watch: StoreWatch, probe: CommitProbe, wake: Inbox<Wake>) {
        let events: StoreFileEvents?
        if case let .events(watched) = watch { events = watched } else { events = nil }
        var lastCompaction = ContinuousClock.now
        var lastAntiEntropy = ContinuousClock.now
        var lastTXT = ContinuousClock.now
        var lastDayCheck = ContinuousClock.now
        while !isStopped {
            var due = min(lastAntiEntropy + settings.antiEntropyInterval, lastCompaction + settings.compactionInterval)
            if discovery != nil {
                due = min(due, lastDayCheck + Self.dayCheckInterval)
                if lock.withLock({ txtStale }) { due = min(due, lastTXT + settings.sumUpdateInterval) }
            }
            if case .polling = watch { due = min(due, .now + Self.fallbackCheckInterval) }
            var descriptors = [
                pollfd(fd: wake.readDescriptor, events: Int16(POLLIN), revents: 0),
                pollfd(fd: events?.descriptor ?? -1, events: Int16(POLLIN), revents: 0),
            ]
            let ready = poll(&descriptors, 2, pollMilliseconds(until: due))
            if isStopped { break }
            if ready > 0 && descriptors[0].revents != 0 { _ = wake.take() }
            // One check however many events a burst of commits queued (they are all read first).
            switch watch {
            case let .events(events):
                if ready > 0 && descriptors[1].revents != 0 && events.drain() { storeMayHaveChanged(probe) }
            case .polling:
                storeMayHaveChanged(probe)
            case .off:
                break
            }
            let now = ContinuousClock.now
            // The TXT record follows the summary, at most once per `sumUpdateInterval`; the tag follows the date.
            if discovery != nil {
                var dayChanged = false
                if now - lastDayCheck >= Self.dayCheckInterval {
                    lastDayCheck = now
                    dayChanged = DiscoveryTag.tag(deviceID: myID, date: Date()) != lock.withLock({ publishedTag })
                }
                let stale = lock.withLock { txtStale }
                if (stale && now - lastTXT >= settings.sumUpdateInterval) || dayChanged {
                    lastTXT = now
                    lock.withLock { txtStale = false }
                    updateTXT()
                }
            }
            if now - lastAntiEntropy >= settings.antiEntropyInterval {
                lastAntiEntropy = now
                let running = lock.withLock { Array(sessions.values) }
                for entry in running { entry.session.resync() }
            }
            if now - lastCompaction >= settings.compactionInterval {
                lastCompaction = now
                compact()
            }
        }
    }

    /// After an event on the store's files: if another connection committed (one `PRAGMA data_version`), tells
    /// the sessions when the generation moved, and reads the paired devices again (pairing and unpairing are
    /// commits too). The agent's own commits wake it as well; they cost these reads and nothing more.
    private func storeMayHaveChanged(_ probe: CommitProbe) {
        do {
            guard try probe.changed() else { return }
        } catch {
            logger.debug("checking the store for commits failed: \(error)")
            return
        }
        announce(try? home.store.generation())
        guard let peers = try? home.store.peers() else { return }
        let current = Set(peers.map(\.deviceID))
        let targets = { (records: [PeerRecord]) in records.map { [$0.deviceID, $0.address ?? ""] } }
        let (dropped, moved) = lock.withLock { () -> ([Running], Bool) in
            let moved = targets(peers) != targets(knownPeers)
            knownPeers = peers
            guard current != trusted else { return ([], moved) }
            trusted = current
            let running = Array(sessions.values) + Array(extraSessions.values)
            return (running.filter { !current.contains($0.peer) }, moved)
        }
        for entry in dropped {
            logger.notice("unpaired \(entry.peer): closing its connection")
            entry.session.stop()
        }
        if moved { dialWake.signal() }
    }

    /// Tells every session that the store reached `generation`, unless it was told of that one already: each
    /// sends its peer a Notify. Called by a session that pulled changes (so they go on to the other peers at
    /// once) and by the watch thread (another process's commit).
    private func announce(_ generation: Int64?) {
        guard let generation else { return }
        let running = lock.withLock { () -> [Running]? in
            guard generation > announcedGeneration else { return nil }
            announcedGeneration = generation
            txtStale = true
            return Array(sessions.values)
        }
        guard let running else { return }
        for entry in running { entry.session.notify() }
        if discovery != nil { watchWake?.post(.wake) }  // the TXT record is now due within `sumUpdateInterval`
    }

    /// Scheduled compaction, never past what a paired peer seen within the grace has acknowledged.
    func compact() {
        do {
            let summary = try home.store.summary()
            let graceMs = Int64(settings.peerGrace.components.seconds) * 1000
            var limits: [CutOffLimit] = []
            for peer in try home.store.peers() {
                guard let seen = peer.lastSeen, Replica.now() - seen <= graceMs else { continue }
                let acknowledged = peer.lastSummary ?? Summary()
                if let limit = try Compaction.acknowledgementLimit(
                    peer: peer.name, acknowledged: acknowledged, held: summary,
                    lamportOf: { ref in try? self.home.store.lamport(of: ref) })
                {
                    limits.append(limit)
                }
            }
            // A paired peer never seen holds everything back: it may need all of it.
            if try home.store.peers().contains(where: { $0.lastSeen == nil }) { return }
            let report = try home.replica.compact(limits: limits, authors: try home.authorGrace(graceMs: graceMs))
            if report.folded > 0 { logger.info("compacted \(report.folded) changes (cut-off \(report.cutOff?.lamport ?? 0))") }
        } catch {
            logger.error("compaction failed: \(error)")
        }
    }
}

// MARK: Discovery

extension Agent {
    /// This device's TXT record now: today's tag, the protocol, a hash of the summary.
    private func currentTXT() -> TXTRecord {
        let summary = (try? home.store.summary()) ?? Summary()
        return TXTRecord(
            tag: DiscoveryTag.tag(deviceID: myID, date: Date()), proto: Int(Hello.currentProtocolVersion),
            sum: TXTRecord.summaryHash(summary))
    }

    private func startDiscovery(port: UInt16) {
        let discovery: Discovery
        do {
            discovery = try Discovery(logger: logger)
        } catch {
            logger.warning("discovery is off (\(error)); static peers and known addresses still work")
            return
        }
        let txt = currentTXT()
        do {
            try discovery.publish(Announcement(name: String(home.deviceName.prefix(Announcement.maximumNameBytes)), port: port, txt: txt))
            lock.withLock { publishedTag = txt.tag }
        } catch {
            logger.warning("cannot publish this device on the LAN: \(error)")
        }
        discovery.startBrowsing()
        self.discovery = discovery
        let events = discovery.events
        discoveryTask = Task.detached { [weak self] in
            for await event in events {
                guard let self else { return }
                self.handle(event)
            }
        }
    }

    private func updateTXT() {
        guard let discovery else { return }
        let txt = currentTXT()
        do {
            try discovery.updateTXT(txt)
            lock.withLock { publishedTag = txt.tag }
        } catch {
            logger.debug("cannot update the TXT record: \(error)")
        }
    }

    private func handle(_ event: DiscoveryEvent) {
        switch event {
        case let .found(service), let .updated(service):
            // A paired device running `plait pair` announces its pairing port with the same tag: not its agent.
            guard let txt = TXTRecord(service.txt), !txt.pairing, let text = service.preferredEndpoint,
                let endpoint = try? PeerAddress(parsing: text)
            else { return }
            let trusted = lock.withLock { Array(self.trusted) }
            guard let id = DiscoveryTag.matchingDevice(tag: txt.tag, trusted: trusted), id != myID else {
                logger.debug("found '\(service.name.terminalSafe)' on the LAN: not a paired device")
                return
            }
            let isNew: Bool
            let (previous, running) = lock.withLock { () -> (Discovered?, Running?) in
                let previous = discovered[id]
                discovered[id] = Discovered(instance: service.name, endpoint: endpoint, sum: txt.sum)
                backoff[id] = nil
                return (previous, sessions[id])
            }
            if case .found = event { isNew = true } else { isNew = previous == nil || previous?.endpoint != endpoint }
            if let running {
                if isNew {
                    // It (re)appeared, or moved: the session may be dead on a link that went away. Start afresh.
                    logger.info(
                        "paired device \(service.name.terminalSafe) is back on the LAN at \(endpoint); reconnecting")
                    running.session.stop()
                } else if previous?.sum != txt.sum {
                    running.session.resync()  // its summary changed: ask now, whatever Notify said
                }
            } else if isNew || previous?.sum != txt.sum {
                logger.info("found paired device \(service.name.terminalSafe) at \(endpoint)")
            }
            dialWake.signal()
        case let .removed(name):
            lock.withLock {
                for (id, device) in discovered where device.instance == name { discovered[id] = nil }
            }
        case .state, .published:
            break
        }
    }
}

extension Store {
    /// The store's write generation: it changes with every committed change, whichever process wrote it.
    public func generation() throws -> Int64 {
        try read { db in try Int64.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'generation'") ?? 0 }
    }
}
