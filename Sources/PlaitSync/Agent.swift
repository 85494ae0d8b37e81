import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Logging
import PlaitCore
import PlaitDiscovery
import PlaitPairing
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
        /// Events held for the local API's clients (a client further behind is told of a gap).
        public var eventCapacity = EventHub.defaultCapacity
        /// Connections from one paired device at once, sessions and connections still before their Hello (its
        /// agent's one and a few `plait sync` runs are all a device needs). Each costs a thread: a paired device
        /// that opened thousands held thousands (a hostile tester). One over it is closed at once, unanswered.
        public var maxConnectionsPerPeer = 8
        /// How long a paired device has to send its Hello once connected (`SessionOptions.helloTimeout`).
        public var helloTimeout: Duration = .seconds(10)

        public init() {}
    }

    /// A session, from its connection's handshake to its end. `instance` and `extra` change under the agent's lock.
    private final class Running: @unchecked Sendable {
        let session: Session
        let peer: String
        let dialedByMe: Bool
        let started = ContinuousClock.now
        /// The instance nonce of the peer's Hello, once the session was admitted (nil before).
        var instance: [UInt8]?
        /// A second process of the peer's home beside its agent (a `plait sync` run there): neither told of local
        /// changes nor re-synced, it ends by itself.
        var extra = false
        /// The peer's Hello said this is a one-shot session (PROTOCOL.md §13.5): always extra.
        var oneShot = false
        /// The name the peer's Hello gave, and the changes pulled so far (for events).
        var name: String?
        var pulled = 0
        /// The summary the peer's Hello announced: what it offers, for the "missing" of progress events.
        var offered: Summary?
        /// When `offered` was last recorded in the peers table while the session ran, and whether a record is due
        /// (`noteLiveAcknowledgement`).
        var liveRecordedAt: ContinuousClock.Instant?
        var liveRecordDue = false
        init(session: Session, peer: String, dialedByMe: Bool) {
            self.session = session
            self.peer = peer
            self.dialedByMe = dialedByMe
        }
    }

    /// Where a session's admission callback finds its entry, made after the session (`@unchecked`: set before the
    /// session runs, read on its thread).
    private final class EntrySlot: @unchecked Sendable {
        var entry: Running?
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
    /// What happens here, for the local API's long-polls and streams (DESIGN §12); a new epoch per agent.
    public let events: EventHub
    let eventState = AgentEventState()
    private let lock = NSLock()
    private var stopped = false
    /// Every session running, admitted or still waiting for its peer's Hello. A device has one admitted session per
    /// instance (one per copy of a copied home), and extra ones for other processes of one home.
    private var sessions: [ObjectIdentifier: Running] = [:]
    /// Per peer and instance (hexadecimal nonce), the summary its last session ended with, for the devices found
    /// running from several homes while this agent runs: the copies acknowledge apart, and the peers table stores
    /// what all of them hold.
    private var acknowledged: [String: [String: Summary]] = [:]
    /// The instances (hexadecimal nonces) of each device confirmed as copies of one home while this agent runs.
    private var copiedInstances: [String: Set<String>] = [:]
    private var dialing: Set<String> = []
    /// The Device ID each static peer (`--peer`, `agent.peers`: dialled by address) presented when last dialled. Without
    /// it a static peer was dialled again while it held a session it had dialled here, and the newer connection won:
    /// two agents with each other as static peers replaced their session every 2 – 4 s.
    private var staticPeerIDs: [String: String] = [:]
    /// Connections being run per paired Device ID (`Settings.maxConnectionsPerPeer`), and when the last refusal
    /// over it was logged per device (one line a minute).
    private var connectionsByPeer: [String: Int] = [:]
    private var overCapLogged: [String: ContinuousClock.Instant] = [:]
    private var backoff: [String: (next: ContinuousClock.Instant, delay: Duration)] = [:]
    /// Set while this device's own store fails sessions (it cannot be written: read-only, disk full): no peer is
    /// dialled and no session admitted until `next`, longer each time (under `lock`). Each peer's backoff could
    /// not hold this: an admitted session clears it, and the two agents took turns dialling each other, 962
    /// sessions in 15 s (bad-luck tester 2026-11-25, H7).
    private var storeFailure: (next: ContinuousClock.Instant, delay: Duration)?
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
    /// Left when the start-up check of the stored hash chains has ended (`awaitStartupCheck`).
    private let startupCheck = DispatchGroup()
    /// Wakes the accept thread (to stop) and the watch thread (to stop, or to update the TXT record).
    private var acceptWake: Inbox<Wake>?
    private var watchWake: Inbox<Wake>?
    private enum Wake: Sendable { case wake }
    /// The highest store generation whose changes the sessions were told of.
    private var announcedGeneration: Int64 = -1
    /// The paired devices as the store last listed them (the dial thread's targets), read when a commit is seen.
    private var knownPeers: [PeerRecord] = []
    /// Where running sessions' acknowledgements are written (`noteLiveAcknowledgement`), one at a time.
    private let liveRecords = DispatchQueue(label: "plait.agent.acknowledgements")
    /// The summary changed since the TXT record was last published.
    private var txtStale = false
    /// Used when inotify cannot be had (its limits reached): how often the store is checked then.
    static let fallbackCheckInterval: Duration = .milliseconds(250)
    /// The port actually bound (useful with port 0).
    public private(set) var boundPort: UInt16?
    /// Called once (on the watch thread) when the store file this agent opened is no longer at its path: deleted,
    /// or replaced by another file (a restore put in place). `plait agent` stops then, with the sentence given.
    /// Set before `start`.
    public var onStoreGone: (@Sendable (String) -> Void)?
    /// The store file as opened (device and inode), to tell when the path names another file or none.
    private var openedStoreFile: (device: UInt64, inode: UInt64)?
    private var storeGoneSaid = false

    public init(home: Home, settings: Settings, logger: Logger) {
        self.home = home
        self.settings = settings
        self.logger = logger
        events = EventHub(capacity: settings.eventCapacity)
    }

    /// Read after `start` loaded the identity (it is cached in the home from then on).
    private var myID: String { (try? home.identity)?.deviceID.description ?? "?" }

    /// How the log and events name the paired device `peer`: the name stored at pairing, never what its Hello or
    /// its mDNS record calls it (a paired peer's word); `fallback` only for a device no longer listed.
    private func storedLabel(_ peer: String, fallback: String = "") -> String {
        let stored = lock.withLock { knownPeers.first { $0.deviceID == peer }?.name }
        return peerLabel(name: stored ?? fallback, deviceID: peer)
    }

    /// The stored name and the Device ID, for the log lines of a connection and its session: names are the user's
    /// and need not be unique; the ID tells two devices of one name apart (fourth hostile tester of 2026-11-25:
    /// these lines named the peer by its ID alone).
    private func logLabel(_ peer: String, fallback: String = "") -> String {
        "\(storedLabel(peer, fallback: fallback)) (\(peer))"
    }

    public func start() throws {
        homeLock = try AgentLock.acquire(home: home.path, instanceNonce: InstanceNonce.process)
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
        // A copied store is noticed before any session reads the own timeline's state (`Store.openForWriting`); a
        // store that cannot be written fails the first write with its own error.
        home.store.onCopyNoticed { [logger] notice in logger.notice("\(notice)") }
        try? home.store.openForWriting()
        let probe = try home.store.makeCommitProbe()
        _ = try probe.changed()
        openedStoreFile = Self.deviceAndInode(home.path + "/" + Home.storeFileName)
        let generation = try home.store.generation()
        let peers = try home.store.peers()
        // Change events start from here: what is stored already is not news.
        let published = try home.store.summary()
        eventState.lock.withLock { eventState.published = published }
        home.replica.onDerivedStateRepair { [weak self, logger] repair in
            logger.warning("\(repair)")
            self?.publishRepair(repair)
        }
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
        startupCheck.enter()
        spawn("verify") {
            defer { self.startupCheck.leave() }
            do {
                for mended in try self.home.replica.mendHeadRecords() {
                    self.logger.warning("\(mended): the record is damaged, and was rewritten from that change")
                }
                for damage in try self.home.replica.quarantineDamaged() {
                    let what = "stored \(damage) is damaged (its hash does not continue its chain): set aside, to be "
                        + "pulled again from a paired device"
                    self.logger.error("\(what)")
                }
                self.noteQuarantine()
            } catch {
                self.logger.error("checking the stored hash chains failed: \(error)")
            }
            // Items only kept-aside changes made, left from a session whose making them again failed (no key, a
            // full disk) or from a plait before it did: made again now.
            self.bringBackKeptAside()
        }
        spawn("watch") { self.watchLoop(watch, probe: probe, wake: watchWake) }
        spawn("dial") { self.dialLoop() }
    }

    /// Waits until the check of every stored change against its chain, which `start` begins on a thread of its
    /// own, has ended (`plait bench` measures a catch-up from an agent that is past its start-up, as a peer that
    /// has been running meets it).
    public func awaitStartupCheck() {
        startupCheck.wait()
    }

    /// Stops everything and waits for every thread.
    public func stop() {
        events.close()  // open event streams end first: they would hold the API server's shutdown
        let running: [Running] = lock.withLock {
            stopped = true
            return Array(sessions.values)
        }
        // The accept thread owns the listener and closes it when it sees `stopped`.
        for entry in running { entry.session.stop() }
        acceptWake?.post(.wake)
        watchWake?.post(.wake)
        dialWake.signal()
        discovery?.close()
        threads.wait()
        liveRecords.sync {}  // a live acknowledgement being written is in the store before the lock goes
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

    /// Paired devices, and this very Device ID: a copy of this home that dials here is refused at its Hello, where
    /// its instance nonce shows it is a copy (reported), not at the handshake.
    /// A device not among those the agent read is looked up in the store: paired a moment ago (`plait pair
    /// --trust` in another process, then a dial at once), before the store's watch told the agent, it was refused
    /// as "not paired" (a test failing once in a full suite under load). A stranger costs one point read, far less
    /// than the handshake it came with.
    private func trust(_ id: DeviceID) -> Bool {
        if lock.withLock({ trusted.contains(id.description) }) || id == (try? home.identity)?.deviceID { return true }
        guard (try? home.store.isTrusted(deviceID: id.description)) == true else { return false }
        _ = lock.withLock { trusted.insert(id.description) }
        return true
    }

    /// The sessions admitted with `peer` (under `lock`), extra ones included.
    private func admitted(_ peer: String) -> [Running] {
        sessions.values.filter { $0.peer == peer && $0.instance != nil }
    }

    /// The sessions told of local changes and re-synced (under `lock`): admitted, not extra.
    private var primarySessions: [Running] { sessions.values.filter { $0.instance != nil && !$0.extra } }

    /// The sessions with `peer` told of local changes (admitted, not extra), each as whether this agent dialled it:
    /// what tests of one connection per pair of agents read.
    func primarySessionDialers(with peer: String) -> [Bool] {
        lock.withLock { admitted(peer).filter { !$0.extra }.map(\.dialedByMe) }
    }

    /// How many sessions with `peer` run as extra (a second process of its home), for the same tests.
    func extraSessionCount(with peer: String) -> Int {
        lock.withLock { admitted(peer).filter(\.extra).count }
    }

    // MARK: Accepting

    /// When each address last had an unpaired device listed as pending.
    private var pendingRecorded: [String: ContinuousClock.Instant] = [:]
    static let pendingInterval: Duration = .seconds(60)
    /// When each address was last told in the log that it speaks another protocol version.
    private var versionRefusalLogged: [String: ContinuousClock.Instant] = [:]
    /// Peers dialled that speak another protocol version, told in the log once.
    private var versionWarned: Set<String> = []
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
            // The name its certificate gives (what it was called at `plait init`): its own claim, shown as such.
            // Made displayable as pairing makes a certificate's name: no control characters, a bounded length.
            let claimed = entry.connection.untrustedPeerName.map(Pairing.displayable).flatMap { $0.isEmpty ? nil : $0 }
                ?? "(unknown)"
            pendingQueue.async { [home, logger, events] in
                try? home.store.recordPending(
                    deviceID: id.description, claimedName: claimed, address: address, now: Replica.now())
                logger.notice("refused unpaired device \(id) from \(host); listed by `plait peers --pending`")
                let data: [String: EventValue] = [
                    "device": .string(id.description), "name": .string(claimed), "address": .init(address),
                ]
                events.publish(.pendingDevice, data)
            }
            return nil
        case let TLSError.alpnMismatch(offered):
            // Another plait version (DESIGN §11 "Versions"): said once a minute per address, for the user to act on.
            guard let version = TLSApplicationProtocol.otherSyncVersion(in: offered) else {
                logger.debug("a handshake from \(host) failed: \(error)")
                return .failed
            }
            let now = ContinuousClock.now
            let key = HandshakeAdmission.addressKey(address ?? "?")
            let say = lock.withLock { () -> Bool in
                if let last = versionRefusalLogged[key], now - last < Self.pendingInterval { return false }
                versionRefusalLogged[key] = now
                return true
            }
            let mine = TLSApplicationProtocol.syncVersion
            let line = "device at \(host) speaks plait protocol \(version); this device speaks protocol \(mine): "
                + "upgrade plait \(version < mine ? "there" : "on this device")"
            if say { logger.warning("\(line)") } else { logger.debug("\(line)") }
            return .failed
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
            if let failing = lock.withLock({ storeFailure }), failing.next > now {
                _ = dialWake.wait(timeout: .now() + .milliseconds(Int(pollMilliseconds(until: failing.next))))
                continue
            }
            for target in targets {
                let key = target.id ?? target.address.description
                let due = lock.withLock { () -> Bool in
                    // A static peer is known by the Device ID its last dial met: a session it dialled here counts.
                    if let id = target.id ?? staticPeerIDs[key], sessions.values.contains(where: { $0.peer == id }) {
                        return false
                    }
                    if sessions.values.contains(where: { $0.peer == key }) || dialing.contains(key) { return false }
                    if let wait = backoff[key], wait.next > now {
                        wake = min(wake, wait.next)
                        return false
                    }
                    dialing.insert(key)
                    return true
                }
                if due { spawn("dial-\(key.prefix(7))") { self.dial(target.address, key: key, peer: target.id) } }
            }
            _ = dialWake.wait(timeout: .now() + .milliseconds(Int(pollMilliseconds(until: wake))))
        }
    }

    /// Signalled when the dial thread should look again at once (discovery found a device, a session ended, a
    /// dial failed, the paired devices changed).
    private let dialWake = DispatchSemaphore(value: 0)

    private func dial(_ address: PeerAddress, key: String, peer: String?) {
        defer {
            _ = lock.withLock { dialing.remove(key) }
            dialWake.signal()  // its backoff (if it failed) decides when it is dialled again
        }
        do {
            // A peer that has still to learn this device's new Device ID is dialled with the retired identity it
            // trusts, once, to tell it (PROTOCOL.md §21); the next dial uses the current identity.
            let telling = peer.flatMap { home.successionCredentials(for: $0) }
            let context = try TLSContext(identity: telling?.identity ?? home.identity, role: .client(offering: .sync))
            let connection = try TLSConnection.connect(
                host: address.host, port: address.port, context: context,
                trust: { [weak self] in self?.trust($0) ?? false }, timeout: settings.dialTimeout)
            // The backoff stays until a session lasts (`sessionLasted`): in TLS 1.3 a peer that refuses this device
            // completes the handshake first, and clearing it here had a refused agent dial every 2 s.
            let held = lock.withLock { () -> Bool in
                guard peer == nil, let id = connection.peerDeviceID?.description else { return false }
                staticPeerIDs[key] = id
                return sessions.values.contains { $0.peer == id }
            }
            // A static peer dialled before its Device ID was known here turned out to hold a session with this
            // device already (it dialled here meanwhile): a device dials only when it holds none (PROTOCOL.md §13.5).
            if held {
                connection.close()
                return
            }
            // A static peer is dialled by its address: a session that failed at once backs that off too.
            if run(connection, dialedByMe: true, address: address, telling: telling) { backOff(key) }
        } catch {
            let delay = lock.withLock { () -> Duration in
                let previous = backoff[key]?.delay ?? .zero
                let next = min(settings.maxBackoff, max(.seconds(1), previous * 2))
                backoff[key] = (ContinuousClock.now + next, next)
                return next
            }
            // A peer running another plait version: said once per address (it is retried, and says so each time).
            if case let TLSError.alpnMismatch(offered) = error, offered.contains(TLSApplicationProtocol.sync.rawValue),
                lock.withLock({ versionWarned.insert(key).inserted })
            {
                logger.warning("\(Home.explain(TLSError.alpnMismatch(offered: offered), address: address))")
            }
            logger.debug("could not reach \(address): \(error); retrying in \(delay)")
        }
    }

    // MARK: Sessions

    /// Runs a session on `connection` until it ends. Returns whether it failed at once (its dialer backs off).
    @discardableResult
    private func run(
        _ connection: TLSConnection, dialedByMe: Bool, address: PeerAddress?, telling: SuccessionCredentials? = nil
    ) -> Bool {
        defer { connection.close() }
        guard let peer = connection.peerDeviceID?.description else { return false }
        let (withinLimit, logOverCap) = lock.withLock { () -> (Bool, Bool) in
            guard connectionsByPeer[peer, default: 0] < settings.maxConnectionsPerPeer else {
                let now = ContinuousClock.now
                let log = overCapLogged[peer].map { now - $0 >= .seconds(60) } ?? true
                if log { overCapLogged[peer] = now }
                return (false, log)
            }
            connectionsByPeer[peer, default: 0] += 1
            return (true, false)
        }
        guard withinLimit else {
            if logOverCap {
                let limit = settings.maxConnectionsPerPeer
                logger.warning(
                    "closed a connection from \(logLabel(peer)): it already has \(limit) connections open here (more are closed unanswered; said once a minute)")
            }
            // Closed cleanly: a close_notify, then what the peer sent meanwhile (its Hello) read until it closes too.
            // Closed with its Hello unread, the socket sent a reset, which the peer's `plait sync` took for this
            // device refusing it as unpaired (fourth hostile tester of 2026-11-25, F5).
            connection.closeGracefully(timeout: Self.overCapClosing)
            return false
        }
        defer {
            lock.withLock {
                connectionsByPeer[peer, default: 1] -= 1
                if connectionsByPeer[peer] == 0 { connectionsByPeer[peer] = nil }
            }
        }
        // Telling a peer the new Device ID is one one-shot session under the retired identity.
        var options = SessionOptions(mode: telling == nil ? .agent : .oneShot)
        options.succession = telling?.statement
        let certificate = connection.peerCertificateDER
        options.onSuccession = { [weak self] statement in self?.tookSuccession(statement, certificate: certificate) }
        options.maxBatchChanges = home.config.batchChanges
        options.idleTimeout = .seconds(60)
        options.helloTimeout = settings.helloTimeout
        options.certifiedPeerID = peer
        let logger = self.logger
        let slot = EntrySlot()
        options.onFinding = { [weak self] finding in
            logger.error("with \(self?.logLabel(peer) ?? peer): \(finding.terminalSafe)")
            self?.noteQuarantine()  // a damaged change found while sending is set aside: watch for it to heal
        }
        options.onRecorded = { [weak self] record in self?.publishRecord(record) }
        // Items only kept-aside changes had made (a restored home) are made again, and go to every peer at once.
        options.onKeptAside = { [weak self] in self?.bringBackKeptAside() }
        // Pulled changes go on to the other peers at once, without waiting for the watch thread.
        options.onPulled = { [weak self] added in
            guard let self else { return }
            self.announce(try? self.home.store.generation())
            self.publishAppliedChanges(pulledFrom: peer)
            let (total, offered) = self.lock.withLock { () -> (Int, Summary?) in
                slot.entry?.pulled += added
                return (slot.entry?.pulled ?? added, slot.entry?.offered)
            }
            self.events.publish(
                .syncProgress,
                [
                    "device": .string(peer), "pulled": .init(total), "batch": .init(added),
                    "missing": .init(self.missing(of: offered)),
                ])
        }
        // What the peer holds, as it last said: a catch-up its Notify started counts "missing" against it.
        options.onOffered = { [weak self] summary in
            guard let self, let entry = self.lock.withLock({ () -> Running? in
                slot.entry?.offered = summary
                return slot.entry
            }) else { return }
            self.noteLiveAcknowledgement(entry)
        }
        options.admitPeer = { [weak self] hello in
            guard let self, let entry = slot.entry else { return false }
            return self.admit(entry, hello: hello)
        }
        let session: Session
        do {
            var me = try home.sessionIdentity
            if let telling { me.deviceID = telling.identity.deviceID.description }
            session = try Session(
                transport: TLSFrameTransport(connection), replica: home.replica, identity: me, options: options)
        } catch {
            logger.error("cannot start a session with \(logLabel(peer)): \(error)")
            return false
        }
        let entry = Running(session: session, peer: peer, dialedByMe: dialedByMe)
        slot.entry = entry
        // The session's options hold closures that hold `slot`, and `entry` holds the session: emptied when the
        // session ends, or the cycle kept every ended session, and its wake-up pipe, alive (two descriptors and
        // ~35 KB per connection, found by a hostile tester: ordinary reconnects used up the agent's descriptors).
        defer { lock.withLock { slot.entry = nil } }
        let registered = lock.withLock { () -> Bool in
            if stopped { return false }
            sessions[ObjectIdentifier(entry)] = entry
            return true
        }
        guard registered else { return false }
        logger.info("connected to \(logLabel(peer))\(address.map { " at \($0)" } ?? "")")
        var failedAtOnce = false
        do {
            let result = try session.run()
            lock.withLock { storeFailure = nil }
            // The certificate's Device ID names the peer when the session ended before its Hello.
            let label = logLabel(peer, fallback: result.peerName)
            logger.info("session with \(label) ended: pulled \(result.pulled), sent \(result.sent)")
            if entry.instance != nil {
                let offered = lock.withLock { entry.offered }
                let data: [String: EventValue] = [
                    "device": .string(peer), "pulled": .init(result.pulled), "sent": .init(result.sent), "ended": true,
                    "missing": .init(missing(of: offered)),
                ]
                events.publish(.syncProgress, data)
            }
            // A peer that stopped, or that ended at once a session it had no reason to end (an agent's session
            // lasts): dialling again at once would repeat it, as fast as the two can connect.
            if dialedByMe,
                result.peerCloseReason == "stopped" || ContinuousClock.now - entry.started < Self.activeWindow
            {
                backOff(peer)
                failedAtOnce = true
            } else {
                sessionLasted(entry)
            }
            try? home.store.peerSeen(
                deviceID: peer, address: address?.description, summary: acknowledgement(entry, result.acknowledged),
                now: Replica.now())
            if telling != nil {
                do {
                    try home.store.successionTold(peer: peer)
                    logger.notice("told \(label) this device's new Device ID; it is dialled with it from now on")
                } catch {
                    logger.error("\(label) took this device's new Device ID, but recording it failed: \(error)")
                }
            }
        } catch {
            // A damaged baseline refuses only the peers that need it (it is never sent): the store itself works,
            // and every other session goes on.
            if case let .store(failure) = error, !failure.isDamagedBaseline { storeFailed() }
            switch error {
            case .notKept:
                logger.debug("session with \(logLabel(peer)) ended: \(error)")
            case let .copiedHome(copied):
                // The two copies of this home met (DESIGN §11): both say so, and neither syncs with itself.
                logger.error("\(copied.description.terminalSafe)")
                try? home.store.recordCopiedHome(deviceID: peer, instances: copied.instances, now: Replica.now())
                publishCopiedHome(copied)
            default:
                if dialedByMe, entry.instance == nil, Home.refusalAfterHandshake(error) != nil {
                    // In TLS 1.3 the peer refuses this device after the handshake (PROTOCOL.md §3): it does not
                    // hold it as paired (any more). `plait peers` says so, and the log once per refusal streak.
                    let news = (try? home.store.peerRefusedThisDevice(deviceID: peer, now: Replica.now())) ?? true
                    let line = "\(logLabel(peer)) refused this device: it is not paired there (run "
                        + "`plait pair --trust \(myID)` on it if it should be); dialled again less and less often"
                    if news { logger.warning("\(line)") } else { logger.debug("\(line)") }
                } else {
                    if !dialedByMe, case .closedBeforeHello = error {
                        // The dialling side's words ("it is busy … or stopping") say nothing true here: a client that
                        // closes before its Hello is `plait doctor` checking this agent, or one that stopped (bad-luck
                        // tester 2026-11-25, H12).
                        let line = "\(logLabel(peer)) closed its connection before its Hello (`plait doctor` checking "
                            + "this agent does, or a sync that stopped)"
                        logger.info("\(line)")
                    } else {
                        logger.info("session with \(logLabel(peer)) ended: \("\(error)".terminalSafe)")
                    }
                }
            }
            // A session that failed at once (the peer kept another one from this device, or refused this one):
            // re-dialing at once would only repeat it.
            if dialedByMe && ContinuousClock.now - entry.started < Self.activeWindow {
                backOff(peer)
                failedAtOnce = true
            } else {
                sessionLasted(entry)
            }
        }
        let (wasAdmitted, name) = lock.withLock { () -> (Bool, String?) in
            sessions.removeValue(forKey: ObjectIdentifier(entry))
            // An agent session admitted as extra beside this one (a peer that does not mark its one-shot sessions,
            // or the older one seemed busy) is the peer's agent session now: it is told of changes again.
            if !entry.extra, let instance = entry.instance {
                let same = admitted(peer).filter { $0.instance == instance }
                if !same.contains(where: { !$0.extra }) {
                    same.filter { !$0.oneShot }.max { $0.started < $1.started }?.extra = false
                }
            }
            return (entry.instance != nil, entry.name)
        }
        if wasAdmitted { events.publish(.peerDisconnected, ["device": .string(peer), "name": .init(name)]) }
        dialWake.signal()  // a peer that is still (or again) to be found is dialled now, not at the next tick
        return failedAtOnce
    }

    /// What the peers table records as acknowledged by `entry`'s device: what its session acknowledged (the summary
    /// the peer last announced, `SessionResult.acknowledged`), or, when the device was found running from several
    /// homes (copies with their own instance nonces), what every copy's last session ended with (per timeline, the
    /// least): compaction must not fold what one copy still lacks.
    private func acknowledgement(_ entry: Running, _ summary: Summary) -> Summary {
        lock.withLock {
            guard let instance = entry.instance, !entry.extra, let copies = copiedInstances[entry.peer],
                copies.contains(instance.hexString)
            else { return summary }
            acknowledged[entry.peer, default: [:]][instance.hexString] = summary
            let all = acknowledged[entry.peer]!.filter { copies.contains($0.key) }.map(\.value)
            guard all.count > 1 else { return summary }
            var least = all[0].heads
            for other in all.dropFirst() {
                for (timeline, seq) in least { least[timeline] = min(seq, other[timeline]) }
            }
            return Summary(least)
        }
    }

    /// How often at most a running session's acknowledgement is written to the peers table.
    static let liveRecordInterval: Duration = .seconds(1)

    /// How long a connection over the per-device limit is drained for the peer's close (its thread held that long).
    static let overCapClosing: Duration = .milliseconds(500)

    /// The peer of `entry` said what it holds (its Hello, a Notify) or the anti-entropy tick came: the peers table
    /// records it as acknowledged while the session runs, not only when it ends, so `plait peers` and compaction
    /// follow a connected peer (the third hostile tester of 2026-11-25 saw "never seen" beside a live session).
    /// Written on `liveRecords`, never on the session's thread (a pull waits for no peers-table write); at most once
    /// per `liveRecordInterval` per session, and the last word always. Extra sessions (a peer's `plait sync`)
    /// record at their end only.
    private func noteLiveAcknowledgement(_ entry: Running) {
        let due = lock.withLock { () -> ContinuousClock.Instant? in
            guard entry.instance != nil, !entry.extra, !entry.liveRecordDue else { return nil }
            entry.liveRecordDue = true
            return entry.liveRecordedAt.map { $0 + Self.liveRecordInterval } ?? .now
        }
        guard let due else { return }
        liveRecords.asyncAfter(deadline: .now() + .milliseconds(Int(pollMilliseconds(until: due)))) { [weak self] in
            self?.recordLiveAcknowledgement(entry)
        }
    }

    private func recordLiveAcknowledgement(_ entry: Running) {
        let summary = lock.withLock { () -> Summary? in
            entry.liveRecordDue = false
            entry.liveRecordedAt = .now
            // A session that ended recorded its acknowledgement itself.
            return stopped || sessions[ObjectIdentifier(entry)] == nil || entry.extra ? nil : entry.offered
        }
        guard let summary else { return }
        do {
            try home.store.peerSeen(
                deviceID: entry.peer, address: nil, summary: acknowledgement(entry, summary), now: Replica.now())
        } catch {
            logger.debug("recording what \(entry.peer) holds failed: \(error)")
        }
    }

    /// At the peer's Hello: keeps `entry` or not, per instance of the peer's device (PROTOCOL.md §13.5). Against
    /// a session with the same instance, the rules of one connection per pair hold: two agents dialling each other
    /// at once keep the one dialled by the smaller Device ID (both decide alike); otherwise the newer one wins (a
    /// peer dials only when it holds no session with this device, so the older one is dead on its side: a cut
    /// link TCP has not noticed), unless both came from the peer and the older one is busy (two processes of one
    /// home). A session with another instance (a copied home) is never replaced: both run, and once the older one
    /// proves alive the copied home is reported.
    ///
    /// A one-shot session (its Hello says so) is none of these: it runs beside the peer's agent session, which it
    /// neither replaces nor yields to, and ends by itself. Taken for an agent session, the peer's `plait sync` was
    /// closed unsynced when this agent had dialled the peer's agent less than 2 s before and had the smaller Device
    /// ID (the rule for two agents dialling at once), and otherwise stopped the agents' session, whose redial could
    /// then refuse the next `plait sync` the same way or run beside it as a second process, never told of changes.
    private func admit(_ entry: Running, hello: Hello) -> Bool {
        let peer = entry.peer
        let nonce = hello.instanceNonce
        let isOther = { (instance: [UInt8]) in !instance.isEmpty && !nonce.isEmpty && instance != nonce }
        var others: [Running] = []
        let keep = lock.withLock { () -> Bool in
            if stopped { return false }
            if let failing = storeFailure, failing.next > .now { return false }
            let existing = admitted(peer).filter { $0 !== entry }
            // Only an agent session is probed as the other copy. Two one-shot sessions of other instances are not
            // two copies: each `plait sync` run without an agent speaks with a nonce of its own (a fourth hostile
            // tester's three syncs at once were reported as a copied home, with advice to change keys). Nor is a
            // `plait sync` still running when the same home's agent starts and dials (it started without an agent,
            // so with a nonce of its own). A real copy is still found: its next sync meets this agent session, or
            // its agent does.
            others = existing.filter { isOther($0.instance ?? []) && !$0.oneShot }
            entry.oneShot = hello.oneShot
            entry.extra = hello.oneShot
            let rivals = hello.oneShot ? [] : existing.filter { !$0.extra && !isOther($0.instance ?? []) }
            for older in rivals {
                let olderDialer = older.dialedByMe ? myID : peer
                let newDialer = entry.dialedByMe ? myID : peer
                let simultaneous = ContinuousClock.now - older.started < Self.simultaneousWindow
                    && olderDialer != newDialer
                if simultaneous && olderDialer <= newDialer { return false }
                if !older.dialedByMe && !entry.dialedByMe
                    && ContinuousClock.now - older.session.lastMoved < Self.activeWindow
                {
                    entry.extra = true
                    continue
                }
                older.session.stop()
            }
            entry.instance = nonce
            // The back-off is not lifted here but when a session lasts (`sessionLasted`): two agents whose sessions
            // end at once (a fork inside one's baseline) each lifted it as the other's dial came in, and dialled
            // again at once: 125 sessions a second (hostile tester 2026-11-25-i).
            entry.name = knownPeers.first { $0.deviceID == peer }?.name ?? hello.name
            entry.offered = hello.summary
            return true
        }
        if keep {
            events.publish(.peerConnected, ["device": .string(peer), "name": .init(entry.name)])
            noteLiveAcknowledgement(entry)
        }
        if keep && !others.isEmpty { probeCopies(newcomer: entry, others: others) }
        return keep
    }

    /// How many changes of `offered` (a peer's announced summary) this device still lacks; 0 when unknown.
    private func missing(of offered: Summary?) -> Int {
        guard let offered, let mine = try? home.store.summary() else { return 0 }
        return mine.missing(from: offered).reduce(0) { $0 + $1.seqs.count }
    }

    /// How long a session of another instance has to answer a Ping before a copied home is reported.
    static let copyProbeWait: Duration = .seconds(2)

    /// Another instance of `newcomer`'s device holds sessions here: a copied home, if they are alive (a restarted
    /// agent's old connection on a cut link is not). Each is pinged; those that answered within `copyProbeWait`
    /// make the copied home, reported (log, store) and told to every copy; those that did not are stopped.
    private func probeCopies(newcomer: Running, others: [Running]) {
        let since = ContinuousClock.now
        for other in others { other.session.probe() }
        let wait = Int(Self.copyProbeWait.components.seconds * 1000)
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(wait)) { [weak self] in
            guard let self else { return }
            let (alive, dead) = self.lock.withLock { () -> ([Running], [Running]) in
                guard !self.stopped, self.sessions[ObjectIdentifier(newcomer)] != nil else { return ([], []) }
                let running = others.filter { self.sessions[ObjectIdentifier($0)] != nil }
                let answered = running.filter { $0.session.lastHeard > since }
                return (answered, running.filter { entry in !answered.contains { $0 === entry } })
            }
            for entry in dead {
                self.logger.info("the older connection with \(self.logLabel(entry.peer)) did not answer; replaced")
                entry.session.stop()
            }
            guard !alive.isEmpty else { return }
            let copied = CopiedHome(deviceID: newcomer.peer, instances: ([newcomer] + alive).compactMap(\.instance))
            guard copied.instances.count > 1 else { return }
            self.lock.withLock {
                self.copiedInstances[copied.deviceID, default: []].formUnion(copied.instances.map(\.hexString))
            }
            self.logger.error("\(copied.description.terminalSafe)")
            try? self.home.store.recordCopiedHome(
                deviceID: copied.deviceID, instances: copied.instances, now: Replica.now())
            self.publishCopiedHome(copied)
            for entry in [newcomer] + alive { entry.session.tellCopies(copied.instances) }
        }
    }

    /// Checks a succession statement from the peer that presented `certificate`; trusts its new Device ID at once
    /// (not only once the watch thread reads the peers again), so it can connect with it right away.
    private func tookSuccession(_ statement: SuccessionStatement, certificate: [UInt8]?) -> String? {
        let (accepted, refusal) = home.acceptSuccession(statement, connectionCertificate: certificate)
        guard let accepted else {
            let reason = refusal ?? "unknown"
            logger.warning("refused a succession statement: \(reason); nothing was trusted because of it")
            return reason
        }
        _ = lock.withLock { trusted.insert(accepted.new) }
        let line = "device \(accepted.old) (\(accepted.name.terminalSafe)) has a new key: now trusting "
            + "\(accepted.new) under the same name; \(accepted.old) stays trusted, marked as succeeded"
        logger.notice("\(line)")
        return nil
    }

    /// Holds every session back after this device's store failed one, longer each time (up to `maxBackoff`); the
    /// first session that ends well lifts it.
    private func storeFailed() {
        let delay = lock.withLock { () -> Duration in
            let delay = min(settings.maxBackoff, max(.seconds(2), (storeFailure?.delay ?? .zero) * 2))
            storeFailure = (ContinuousClock.now + delay, delay)
            return delay
        }
        logger.warning("this device's store failed a session; no session is started or accepted for \(delay)")
    }

    /// Waits before dialing `peer` again, longer each time (up to `maxBackoff`): the peer stopped or refused the
    /// last session (it is shutting down, or keeps another one from this device, such as this home's own
    /// `plait sync`), and re-dialing at once would knock that one off or repeat the refusal.
    /// A session with `entry`'s peer that lasted (`activeWindow`) ended: the peer is dialled again at once.
    private func sessionLasted(_ entry: Running) {
        guard ContinuousClock.now - entry.started >= Self.activeWindow else { return }
        lock.withLock {
            backoff[entry.peer] = nil
            for (key, id) in staticPeerIDs where id == entry.peer { backoff[key] = nil }
        }
    }

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
                if ready > 0 && descriptors[1].revents != 0 && events.drain() {
                    checkStoreFile()
                    storeMayHaveChanged(probe)
                }
            case .polling:
                checkStoreFile()
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
                let running = lock.withLock { primarySessions }
                for entry in running {
                    entry.session.resync()
                    noteLiveAcknowledgement(entry)  // "last seen" stays within an interval for a connected peer
                }
            }
            if now - lastCompaction >= settings.compactionInterval {
                lastCompaction = now
                compact()
            }
        }
    }

    /// The device and inode of the file at `path`, nil when there is none.
    static func deviceAndInode(_ path: String) -> (device: UInt64, inode: UInt64)? {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        return (UInt64(status.st_dev), UInt64(status.st_ino))
    }

    /// Whether the store file this agent opened is still the one at its path. A store deleted under it (bad-luck
    /// tester 2026-11-25, H8) or replaced by a restore left the agent writing on into a file no command opens any
    /// more: every change it took or made from then on was lost when it stopped. It says so once, and `plait
    /// agent` stops (`onStoreGone`).
    private func checkStoreFile() {
        guard let opened = openedStoreFile, !storeGoneSaid else { return }
        let path = home.path + "/" + Home.storeFileName
        let now = Self.deviceAndInode(path)
        if let now, now == opened { return }
        storeGoneSaid = true
        let what = now == nil
            ? "was deleted while the agent ran (or its home was moved away)"
            : "was replaced by another file while the agent ran (a restore put in place, or the home moved away and "
                + "another put in its place)"
        let sentence = what + ": the agent stops, so that nothing more is written into a file no command sees. "
            + "Started again, it uses "
            + (now == nil
                ? "a new store (`plait init` makes one, and a sync fills it from a paired device)" : "that file")
        logger.critical("the store \(path.terminalSafe) \(sentence)")
        // Nothing more is taken from or sent to a peer into the file that is gone.
        let running = lock.withLock { Array(sessions.values) }
        for entry in running { entry.session.stop() }
        onStoreGone?(sentence)
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
        publishAppliedChanges(pulledFrom: nil)
        guard let peers = try? home.store.peers() else { return }
        let current = Set(peers.map(\.deviceID))
        let targets = { (records: [PeerRecord]) in records.map { [$0.deviceID, $0.address ?? ""] } }
        let (dropped, moved) = lock.withLock { () -> ([Running], Bool) in
            let moved = targets(peers) != targets(knownPeers)
            knownPeers = peers
            guard current != trusted else { return ([], moved) }
            trusted = current
            let running = Array(sessions.values)
            return (running.filter { !current.contains($0.peer) }, moved)
        }
        for entry in dropped {
            logger.notice("unpaired \(logLabel(entry.peer)): closing its connection")
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
            return primarySessions
        }
        guard let running else { return }
        for entry in running { entry.session.notify() }
        if discovery != nil { watchWake?.post(.wake) }  // the TXT record is now due within `sumUpdateInterval`
    }

    /// Makes again the items and lists only kept-aside changes of this device created (bad-luck tester 2026-11-25,
    /// H3), and tells every peer, as after a local edit.
    private func bringBackKeptAside() {
        let kept = home.bringBackKeptAside()
        for note in kept.notes {
            if kept.failure == nil {
                logger.notice("\(note.terminalSafe)")
            } else {
                logger.error("\(note.terminalSafe)")
            }
        }
        guard !kept.brought.isEmpty else { return }
        announce(try? home.store.generation())
        publishAppliedChanges(pulledFrom: nil)
    }

    /// Scheduled compaction, never past what a paired peer seen within the grace has acknowledged.
    func compact() {
        do {
            let graceMs = Int64(settings.peerGrace.components.seconds) * 1000
            // A paired peer never seen holds everything back (nil): it may need all of it. The others' limits read
            // their acknowledgements with head hashes, so a fork renamed since cannot fold what one lacks.
            guard let limits = try home.store.acknowledgementLimits(now: Replica.now(), graceMs: graceMs) else {
                return
            }
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
            // Another protocol version (DESIGN §11 "Versions"): no session could run, so it is not dialled here.
            guard txt.proto == Int(Hello.currentProtocolVersion) else {
                if lock.withLock({ versionWarned.insert("proto " + id).inserted }) {
                    let line = "paired device \(logLabel(id)) announces plait protocol "
                        + "\(txt.proto); this device speaks protocol \(Hello.currentProtocolVersion): upgrade plait on the older one"
                    logger.warning("\(line)")
                }
                return
            }
            let isNew: Bool
            let (previous, all) = lock.withLock { () -> (Discovered?, [Running]) in
                let previous = discovered[id]
                discovered[id] = Discovered(instance: service.name, endpoint: endpoint, sum: txt.sum)
                backoff[id] = nil
                return (previous, admitted(id).filter { !$0.extra })
            }
            if case .found = event { isNew = true } else { isNew = previous == nil || previous?.endpoint != endpoint }
            // The copies of a copied home announce one tag from two places: neither is a move.
            let copied = Set(all.compactMap(\.instance)).count > 1
            for running in all {
                if isNew && !copied {
                    // It (re)appeared, or moved: the session may be dead on a link that went away. Start afresh.
                    logger.info(
                        "paired device \(logLabel(id)) is back on the LAN at \(endpoint); reconnecting")
                    running.session.stop()
                } else if previous?.sum != txt.sum || copied {
                    running.session.resync()  // its summary changed: ask now, whatever Notify said
                }
            }
            if all.isEmpty && (isNew || previous?.sum != txt.sum) {
                logger.info("found paired device \(logLabel(id)) at \(endpoint)")
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
