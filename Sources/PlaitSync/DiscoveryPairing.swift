import Foundation
import PlaitCore
import PlaitDiscovery
import PlaitPairing
import PlaitTLS
import PlaitWire

#if canImport(Glibc)
import Glibc
#endif

/// What `Home.pairByDiscovery` tells its user, and asks. The telling closures are called on the pairing
/// thread, in order; `choose` and `confirm` each on a thread of their own (they block on the user).
public struct DiscoveryPairingUser: Sendable {
    /// Pairing mode began: this device listens for pairing on `port` and is published as `instance`.
    public var started: @Sendable (_ instance: String, _ port: UInt16) -> Void
    /// A device in pairing mode was found.
    public var found: @Sendable (PairingCandidate) -> Void
    /// Several devices were found: which one (an answer for `PairingRendezvous.choice`; nil for none)?
    /// `problem` says what was wrong with the previous answer. Chosen `byUser`: asked once the first device is
    /// found, answered with the instance name of the one the user picks, whenever that is.
    public var choose: @Sendable (_ candidates: [PairingCandidate], _ problem: String?) -> String?
    /// This device connects to that one.
    public var connecting: @Sendable (PairingCandidate) -> Void
    /// This device waits for that one to connect.
    public var waiting: @Sendable (PairingCandidate) -> Void
    /// The attempt runs with this device (from its certificate), found as that candidate.
    public var connected: @Sendable (DeviceID, PairingCandidate) -> Void
    /// A connection was turned away, and why.
    public var refused: @Sendable (String) -> Void
    /// The code is known: do both screens show it? (see `Pairing.run`)
    public var confirm: @Sendable (PairingPrompt) -> Bool
    /// Chosen `byUser`: the devices in pairing mode found so far, whenever they change.
    public var offered: @Sendable ([PairingCandidate]) -> Void

    public init(
        started: @escaping @Sendable (String, UInt16) -> Void, found: @escaping @Sendable (PairingCandidate) -> Void,
        choose: @escaping @Sendable ([PairingCandidate], String?) -> String?,
        connecting: @escaping @Sendable (PairingCandidate) -> Void,
        waiting: @escaping @Sendable (PairingCandidate) -> Void,
        connected: @escaping @Sendable (DeviceID, PairingCandidate) -> Void,
        refused: @escaping @Sendable (String) -> Void, confirm: @escaping @Sendable (PairingPrompt) -> Bool,
        offered: @escaping @Sendable ([PairingCandidate]) -> Void = { _ in }
    ) {
        self.started = started
        self.found = found
        self.choose = choose
        self.connecting = connecting
        self.waiting = waiting
        self.connected = connected
        self.refused = refused
        self.confirm = confirm
        self.offered = offered
    }
}

extension Home {
    /// Interactive pairing with a device found by mDNS (`plait pair` with no address), within `timeout`.
    ///
    /// Listens for pairing on an ephemeral port of every interface, publishes `_plait._tcp` as
    /// `<device name> (pairing)` with TXT `tag`, `proto`, `sum` and `pair=1`, and browses for the other
    /// devices doing the same; `PairingRendezvous` decides whom to pair with and which side dials. Then the
    /// usual attempt (commitment, code on both screens, both answers). Trusts the other device only if both
    /// users said yes, with no address: the pairing port is not where it syncs, and discovery finds its
    /// agent later. The listener is closed as soon as the attempt starts; the service is withdrawn then by the
    /// device that was dialled, and by the device that dials only once the other one runs the attempt (its first
    /// message): until then the other one may not have found it, and holds the connection until it does.
    ///
    /// `choosing` is how the device is chosen: as `plait pair` does, or only by the user's pick (the page).
    ///
    /// Throws `discoveryUnavailable` at once when avahi-daemon cannot be reached.
    public func pairByDiscovery(
        timeout: Duration, name: String? = nil, settleTime: Duration = PairingRendezvous.defaultSettleTime,
        choosing: PairingRendezvous.Choosing = .automatic, user: DiscoveryPairingUser
    ) throws(PairingError) -> PairedDevice {
        let deadline = ContinuousClock.now + timeout
        let inbox: Inbox<RendezvousItem>
        let discovery: Discovery
        do {
            inbox = try Inbox()
            discovery = try Discovery.forCommand()
        } catch let error as DiscoveryError {
            throw .discovery(error)
        } catch {
            throw .tls(.socket(operation: "start discovery", reason: "\(error)"))
        }
        defer { discovery.close() }
        // Without a daemon (or a bus) the state is known as the client is created: say so before anything else.
        if case .unavailable(let warning) = discovery.state { throw .discoveryUnavailable(warning: warning) }
        // Only then a port on every interface: a search that cannot happen opens nothing to the network.
        let listener = try Self.pairingListener(home: self)
        defer { listener.close() }
        let events = discovery.events
        Task.detached {
            for await event in events { inbox.post(.discovery(event)) }
        }

        let ownTag = DiscoveryTag.tag(deviceID: try pairingIdentity().deviceID.description, date: Date())
        let summary = (try? store.summary()) ?? Summary()
        let instance = PairingRendezvous.instanceName(deviceName: deviceName)
        let announcement = Announcement(
            name: instance, port: listener.address.port,
            txt: TXTRecord(
                tag: ownTag, proto: Int(Hello.currentProtocolVersion), sum: TXTRecord.summaryHash(summary),
                pairing: true))
        do {
            try discovery.publish(announcement)
        } catch {
            throw .discovery(error)
        }
        discovery.startBrowsing()
        user.started(instance, listener.address.port)

        let handshakes = listener.handshakes()
        defer { handshakes.closeAll() }
        var machine = PairingRendezvous(ownTag: ownTag, settleTime: settleTime, choosing: choosing)
        var held: [Int: Pairing] = [:]
        var nextConnection = 0
        var attempt: RendezvousAttempt?
        defer { for pairing in held.values { pairing.connection.close() } }

        func perform(_ actions: [PairingRendezvous.Action]) throws(PairingError) {
            for action in actions {
                switch action {
                case .show(let candidate):
                    user.found(candidate)
                case .offer(let candidates):
                    user.offered(candidates)
                case .ask(let candidates, let problem):
                    let choose = user.choose
                    let thread = Thread { inbox.post(.answer(choose(candidates, problem))) }
                    thread.name = "plait-pair-choose"
                    thread.start()
                case .connect(let candidate):
                    attempt = .connect(candidate)
                case .waitFor(let candidate):
                    user.waiting(candidate)
                case .accept(let connection, let candidate):
                    if let pairing = held.removeValue(forKey: connection) { attempt = .accept(pairing, candidate) }
                case .refuse(let connection, let reason):
                    if let pairing = held.removeValue(forKey: connection) {
                        pairing.connection.close()
                        user.refused("refused pairing with device \(pairing.peer): \(reason)")
                    }
                case .abort(let error):
                    throw error
                }
            }
        }

        try perform(machine.begin())
        while attempt == nil {
            for item in inbox.take() {
                switch item {
                case .discovery(.state(.unavailable(let warning))):
                    throw .discoveryUnavailable(warning: warning)
                case .discovery(.found(let service)), .discovery(.updated(let service)):
                    try perform(machine.found(service, now: .now))
                case .discovery(.removed(let name)):
                    try perform(machine.removed(instance: name))
                case .discovery:
                    break
                case .answer(let answer):
                    try perform(machine.answered(answer))
                }
                if attempt != nil { break }
            }
            if attempt != nil { break }
            try perform(machine.tick(now: .now))
            if attempt != nil { break }
            guard ContinuousClock.now < deadline else {
                throw machine.candidates.isEmpty ? .noDeviceFound(after: timeout) : .timedOut(after: timeout)
            }
            let wake = min(deadline, machine.nextDeadline ?? deadline, handshakes.nextDue ?? deadline)
            // The listener and every connection in its handshake (`PairingHandshakes`), then the inbox.
            var entries = handshakes.pollEntries()
            entries.append(pollfd(fd: inbox.readDescriptor, events: Int16(POLLIN), revents: 0))
            _ = poll(&entries, nfds_t(entries.count), pollMilliseconds(until: wake))
            for outcome in try handshakes.step(Array(entries.dropLast())) {
                switch outcome {
                case let .refused(reason):
                    user.refused(reason)
                case .ownDevice:
                    user.refused("refused a pairing connection from this device itself")
                case let .pairing(pairing):
                    nextConnection += 1
                    held[nextConnection] = pairing  // closed below if another one is the attempt
                    if attempt == nil {
                        try perform(machine.connected(nextConnection, deviceID: pairing.peer.description))
                    }
                }
            }
        }

        // One attempt per run: nobody else gets in (the service goes too, below, once it is safe to withdraw).
        handshakes.closeAll()
        listener.close()
        for pairing in held.values { pairing.connection.close() }
        held = [:]
        let left = max(.milliseconds(1), ContinuousClock.now.duration(to: deadline))
        switch attempt! {
        case .connect(let candidate):
            // Still published until the other device runs the attempt: it holds this connection until it has
            // found this device in pairing mode itself, which it may not have yet (its daemon resolves this
            // device's record later than this one resolved its own, or its user has not seen it yet).
            user.connecting(candidate)
            do {
                return try pair(
                    connectingTo: candidate.endpoint, remembering: nil, name: name, timeout: left,
                    expecting: (candidate.name, { candidate.isPublished(by: $0.description) }),
                    onConnected: { user.connected($0, candidate) }, onPeerStarted: { discovery.close() },
                    confirm: user.confirm)
            } catch .tls(.refused(let address, let reason)) {
                throw .unreachable(name: candidate.name, address: address, reason: reason)
            }
        case .accept(let pairing, let candidate):
            // The other device dialled: it found this one already.
            discovery.close()
            user.connected(pairing.peer, candidate)
            let confirmed = try pairing.run(until: deadline, timeout: timeout, confirm: user.confirm)
            return try storePaired(confirmed, name: name, address: nil)
        }
    }

    /// A pairing listener on an ephemeral port of every interface: IPv6 and IPv4 (`::`), or IPv4 only where
    /// IPv6 is off.
    static func pairingListener(home: Home) throws(PairingError) -> PairingListener {
        let everyInterface = { (text: String) in (try? PeerAddress(parsing: text, allowingPortZero: true))! }
        do {
            return try PairingListener(home: home, address: everyInterface("[::]:0"))
        } catch {
            return try PairingListener(home: home, address: everyInterface("0.0.0.0:0"))
        }
    }
}

/// What reaches the pairing thread from elsewhere.
private enum RendezvousItem: Sendable {
    case discovery(DiscoveryEvent)
    case answer(String?)
}

/// The one attempt a run makes.
private enum RendezvousAttempt {
    case connect(PairingCandidate)
    case accept(Pairing, PairingCandidate)
}
