import Foundation
import PlaitCore
import PlaitPairing
import PlaitStore
import PlaitTLS

#if canImport(Glibc)
import Glibc
#endif

/// A device this one now trusts, after interactive or headless pairing.
public struct PairedDevice: Sendable, Equatable {
    public var deviceID: DeviceID
    /// The name stored for it.
    public var name: String
    /// Where it is dialled, when known.
    public var address: PeerAddress?
    /// The code both users confirmed (nil for headless pairing by ID).
    public var code: PairingCode?
    /// Trusted by ID when it was already paired here: only its stored name or address can have changed.
    public var alreadyPaired = false
}

/// Waits for one device to pair with this one (`plait pair --listen`): the responder's side.
///
/// Its TLS context accepts the pairing protocol, and nothing else gets through: its trust predicate
/// trusts nobody, so a sync client, paired or not, fails the handshake (an unpaired one with no byte of
/// data), while a client offering `plait-pair/1` is admitted whatever its certificate. Pairing is
/// accepted exactly as long as this object listens.
public final class PairingListener: @unchecked Sendable {
    public let home: Home
    /// Where it listens, with the port actually bound.
    public let address: PeerAddress
    private let listener: TLSListener

    /// Binds `address` (port 0: any free port, see `address`).
    public init(home: Home, address: PeerAddress) throws(PairingError) {
        self.home = home
        do {
            let context = try TLSContext(identity: home.pairingIdentity(), role: .server(acceptsPairing: true))
            listener = try TLSListener(host: address.host, port: address.port, context: context, backlog: 8)
        } catch let error as TLSError {
            throw .tls(error)
        } catch {
            throw .tls(.socket(operation: "listen on \(address)", reason: "\(error)"))
        }
        var bound = address
        bound.port = listener.port
        self.address = bound
    }

    deinit { listener.close() }

    /// Stops listening: pairing is no longer accepted. Idempotent.
    public func close() { listener.close() }

    /// The listening socket, for poll(2) (readable when a connection is pending); valid until `close`.
    public var fileDescriptor: Int32 { listener.fileDescriptor }

    /// Starts driving the handshakes of connections to this listener (see `PairingHandshakes`).
    /// With `awaitingFirstMessage`, a pairing connection is an outcome only once its first message arrived
    /// (`PairingHandshakes`).
    func handshakes(limits: HandshakeLimits = PairingHandshakes.limits, awaitingFirstMessage: Bool = false)
        -> PairingHandshakes
    {
        PairingHandshakes(
            listener: listener, identity: { try self.home.pairingIdentity() }, limits: limits,
            awaitingFirstMessage: awaitingFirstMessage)
    }

    /// Waits until a device connects with the pairing protocol, runs one attempt with it and, if both
    /// users said yes, trusts it (named `name`, else as its certificate names itself). All within
    /// `timeout`. A connection that fails its handshake (a sync client, a scan) is closed, reported to
    /// `onRefused` (one sentence), and the wait goes on. Handshakes run side by side (`PairingHandshakes`), and so
    /// does the wait for each pairing connection's first message (the initiator's nonce, its answer to this
    /// side's commitment): connections that stay silent, before or after TLS, hold up nothing but themselves,
    /// until the handshake deadline. The first connection whose nonce arrives is the run's only attempt.
    ///
    /// The initiator's address is not stored: the port it connected from is not one it listens on.
    public func pairOnce(
        timeout: Duration, name: String? = nil, onConnected: (@Sendable (DeviceID) -> Void)? = nil,
        onRefused: (@Sendable (String) -> Void)? = nil, confirm: @escaping @Sendable (PairingPrompt) -> Bool
    ) throws(PairingError) -> PairedDevice {
        let deadline = ContinuousClock.now + timeout
        let handshakes = handshakes(awaitingFirstMessage: true)
        defer { handshakes.closeAll() }
        while true {
            guard ContinuousClock.now < deadline else { throw .timedOut(after: timeout) }
            var entries = handshakes.pollEntries()
            let wake = min(deadline, handshakes.nextDue ?? deadline)
            _ = poll(&entries, nfds_t(entries.count), pollMilliseconds(until: wake))
            let outcomes = try handshakes.step(entries)
            for outcome in outcomes {
                switch outcome {
                case let .refused(reason):
                    onRefused?(reason)
                case .ownDevice:
                    throw .ownDevice
                case let .pairing(pairing):
                    // Another whose nonce came in the same step is not the attempt either: closed now, like the rest.
                    for case let .pairing(other) in outcomes where other !== pairing { other.connection.close() }
                    // One attempt per run: nobody else gets in meanwhile. The listening socket goes too, so that a
                    // device connecting now is refused at once, not left in the backlog until the attempt ends
                    // (fifth hostile tester of 2026-11-25).
                    handshakes.closeAll()
                    close()
                    onConnected?(pairing.peer)
                    let confirmed = try pairing.run(until: deadline, timeout: timeout, confirm: confirm)
                    return try home.storePaired(confirmed, name: name, address: nil)
                }
            }
        }
    }
}

/// The handshakes of connections to a pairing listener, driven side by side from one thread (poll(2) on the
/// listener and every handshaking socket). Handshaken one at a time, each for up to 10 s, 8 silent TCP connections
/// from anyone on the network kept an honest device from pairing (third hostile tester of 2026-11-25). Now a
/// connection that does not finish its handshake holds up only itself, until `limits.deadline`; per address and in
/// all at most `limits` are kept, and to make room the oldest handshake of the address holding the most goes,
/// those whose ClientHello was not answered first: the agent's admission rules (DESIGN §10, `HandshakeAdmission`).
///
/// With `awaitingFirstMessage` (`plait pair --listen`), a connection that negotiated the pairing protocol is not
/// an outcome yet: this side sends its commitment and keeps the connection, under the same deadline and limits,
/// until the initiator's nonce arrives. A stranger that completed TLS and said nothing took the run's only
/// attempt until its `--timeout` (fourth hostile tester of 2026-11-25); now it is closed at the deadline, and an
/// honest device that answers meanwhile is the attempt. (Pairing by discovery holds pairing connections unstarted
/// on purpose, its rendezvous decides which one runs: there the outcome comes at the end of the TLS handshake.)
final class PairingHandshakes {
    /// What one step found: a connection ready to pair, one refused (why, one sentence), or one from this very
    /// device (its key: the user ran `plait pair --connect` on this home itself).
    enum Outcome {
        case pairing(Pairing)
        case refused(String)
        case ownDevice
    }

    /// Pairing's limits: a handshake on a slow link gets the 10 s one-at-a-time pairing always gave it.
    static var limits: HandshakeLimits {
        var limits = HandshakeLimits()
        limits.deadline = .seconds(10)
        limits.total = 32
        return limits
    }

    private let listener: TLSListener
    private let identity: () throws -> Identity
    private var admission: HandshakeAdmission
    /// Where a connection is: in its TLS handshake, or past it with this side's commitment sent, waiting for the
    /// initiator's first message.
    private enum Stage {
        case handshake(TLSConnection)
        case awaitingFirstMessage(Pairing)

        var connection: TLSConnection {
            switch self {
            case .handshake(let connection): connection
            case .awaitingFirstMessage(let pairing): pairing.connection
            }
        }
    }

    private let awaitingFirstMessage: Bool
    private var handshaking: [HandshakeAdmission.Ticket: (stage: Stage, waitsFor: Int16)] = [:]
    private var closed = false
    /// Refusals told one by one so far: past `toldRefusals` they are summed up once a minute (the admission's
    /// summary line), or a flood of 100 connections a second printed 1,000 lines in 10 s (fourth hostile tester).
    private var refusalsTold = 0
    static let toldRefusals = 5

    init(
        listener: TLSListener, identity: @escaping () throws -> Identity, limits: HandshakeLimits,
        awaitingFirstMessage: Bool = false
    ) {
        self.listener = listener
        self.identity = identity
        self.awaitingFirstMessage = awaitingFirstMessage
        admission = HandshakeAdmission(limits: limits)
    }

    /// Connections in their handshake (or waiting for their first message) now.
    var count: Int { handshaking.count }

    /// What to poll: the listening socket first, then every connection in its handshake.
    func pollEntries() -> [pollfd] {
        [pollfd(fd: closed ? -1 : listener.fileDescriptor, events: Int16(POLLIN), revents: 0)]
            + handshaking.sorted { $0.key < $1.key }.map { _, entry in
                pollfd(fd: entry.stage.connection.fileDescriptor, events: entry.waitsFor, revents: 0)
            }
    }

    /// When a handshake's deadline or the drops' summary falls next (nil: neither). The summary is taken when due
    /// (`step`): left due, it made poll(2) return at once, and the listener spun at 100 % of a core (fourth hostile
    /// tester of 2026-11-25).
    var nextDue: ContinuousClock.Instant? { admission.nextDue }

    /// After poll(2) on `pollEntries()`: takes every connection pending on the listener, takes each handshake whose
    /// socket is ready one step further, and closes those past the deadline. Throws only when the listener fails.
    func step(_ entries: [pollfd]) throws(PairingError) -> [Outcome] {
        guard !closed else { return [] }
        var outcomes: [Outcome] = []
        let tickets = handshaking.keys.sorted()
        for (ticket, entry) in zip(tickets, entries.dropFirst()) where entry.revents != 0 {
            outcomes += advance(ticket)
        }
        if entries.first.map({ $0.revents != 0 }) ?? false {
            for _ in 0..<64 {
                let accepted: TLSConnection?
                do {
                    accepted = try listener.acceptPending(trust: { _ in false })
                } catch let error as TLSError {
                    throw .tls(error)
                } catch {
                    throw .tls(.socket(operation: "accept a connection", reason: "\(error)"))
                }
                guard let connection = accepted else { break }
                let (ticket, evicted) = admission.admit(host: connection.peerHost ?? "?", now: .now)
                if let evicted { handshaking.removeValue(forKey: evicted)?.stage.connection.close() }
                handshaking[ticket] = (.handshake(connection), Int16(POLLIN))
                outcomes += advance(ticket)  // its ClientHello is often there already
            }
        }
        let now = ContinuousClock.now
        for ticket in admission.expired(now: now) {
            let entry = handshaking.removeValue(forKey: ticket)
            entry?.stage.connection.close()
            // Dropped from the admission in any case: a ticket left there stays due, and poll(2) would not wait.
            admission.drop(ticket, because: .pastDeadline, now: now)
            guard let entry else { continue }
            let seconds = admission.limits.deadline.components.seconds
            switch entry.stage {
            case .handshake:
                outcomes.append(.refused("closed a connection that did not finish its TLS handshake within \(seconds) s"))
            case .awaitingFirstMessage(let pairing):
                outcomes.append(
                    .refused(
                        "closed a pairing connection from device \(pairing.peer) that did not send its first message "
                            + "within \(seconds) s"))
            }
        }
        // The first few refusals one by one, then what the admission sums up once a minute.
        var told: [Outcome] = []
        for outcome in outcomes {
            guard case .refused = outcome else {
                told.append(outcome)
                continue
            }
            refusalsTold += 1
            if refusalsTold <= Self.toldRefusals { told.append(outcome) }
            if refusalsTold == Self.toldRefusals {
                told.append(.refused("further refused connections are summed up once a minute"))
            }
        }
        if let line = admission.summary(now: now) { told.append(.refused(line)) }
        return told
    }

    /// Closes every connection still in its handshake; later steps take no more.
    func closeAll() {
        closed = true
        for (ticket, entry) in handshaking {
            entry.stage.connection.close()
            admission.release(ticket)
        }
        handshaking = [:]
    }

    private func advance(_ ticket: HandshakeAdmission.Ticket) -> [Outcome] {
        guard let entry = handshaking[ticket] else { return [] }
        let connection: TLSConnection
        switch entry.stage {
        case .handshake(let handshaking): connection = handshaking
        case .awaitingFirstMessage(let pairing): return awaitFirstMessage(ticket, pairing)
        }
        do {
            switch try connection.handshake() {
            case .done:
                guard connection.applicationProtocol == .pairing else {
                    handshaking[ticket] = nil
                    admission.release(ticket)
                    connection.close()
                    let error = PairingError.notPairing(negotiated: connection.negotiatedALPN)
                    return [.refused("refused a connection that was not pairing: \(error)")]
                }
                let pairing: Pairing
                do {
                    pairing = try Pairing(connection: connection, identity: identity())
                } catch {
                    handshaking[ticket] = nil
                    admission.release(ticket)
                    connection.close()
                    if case PairingError.ownDevice = error { return [.ownDevice] }
                    return [.refused("refused a connection that was not pairing: \(error)")]
                }
                guard awaitingFirstMessage else {
                    handshaking[ticket] = nil
                    admission.release(ticket)
                    return [.pairing(pairing)]
                }
                do {
                    // 40 bytes on a connection that just finished its handshake: the socket buffer takes them.
                    try pairing.begin(timeout: .seconds(1))
                } catch {
                    handshaking[ticket] = nil
                    admission.drop(ticket, because: .failed, now: .now)
                    return [.refused("closed a pairing connection from device \(pairing.peer): \(error)")]
                }
                handshaking[ticket] = (.awaitingFirstMessage(pairing), Int16(POLLIN))
                return awaitFirstMessage(ticket, pairing)
            case .wantRead:
                handshaking[ticket]?.waitsFor = Int16(POLLIN)
                if connection.hasAnsweredClientHello { admission.answered(ticket) }
            case .wantWrite:
                handshaking[ticket]?.waitsFor = Int16(POLLOUT)
            }
        } catch {
            // A failed handshake closed the connection already.
            handshaking[ticket] = nil
            admission.drop(ticket, because: .failed, now: .now)
            return [.refused("refused a connection that was not pairing: \(error)")]
        }
        return []
    }

    /// A pairing connection past its handshake, this side's commitment sent: an outcome once the initiator's
    /// nonce is here, closed if the connection ends or the peer sends anything else.
    private func awaitFirstMessage(_ ticket: HandshakeAdmission.Ticket, _ pairing: Pairing) -> [Outcome] {
        switch pairing.awaitFirstMessage() {
        case .pending(let events):
            handshaking[ticket]?.waitsFor = events
            return []
        case .arrived:
            handshaking[ticket] = nil
            admission.release(ticket)
            return [.pairing(pairing)]
        case .failed(let error):
            handshaking[ticket] = nil
            pairing.connection.close()
            admission.drop(ticket, because: .failed, now: .now)
            if case .connectionLost = error {
                return [.refused("device \(pairing.peer) closed its pairing connection before its first message")]
            }
            return [.refused("closed a pairing connection from device \(pairing.peer): \(error)")]
        }
    }
}

extension Home {
    /// Pairs with the device listening at `address` (`plait pair --connect`): the initiator's side. Runs
    /// one attempt within `timeout`; if both users said yes, trusts the other device, named `name` (else
    /// as its certificate names itself), to be dialled at `rememberedAddress` (else `address`).
    public func pair(
        connectingTo address: PeerAddress, rememberedAddress: PeerAddress? = nil, name: String? = nil,
        timeout: Duration, onConnected: (@Sendable (DeviceID) -> Void)? = nil,
        confirm: @escaping @Sendable (PairingPrompt) -> Bool
    ) throws(PairingError) -> PairedDevice {
        try pair(
            connectingTo: address, remembering: rememberedAddress ?? address, name: name, timeout: timeout,
            onConnected: onConnected, confirm: confirm)
    }

    /// `pair(connectingTo:…)` that stores `remembering` as the other device's address (nil: none), and, with
    /// `expecting`, goes on only if the device that answered is the expected one (else `unexpectedPeer`).
    func pair(
        connectingTo address: PeerAddress, remembering: PeerAddress?, name: String?, timeout: Duration,
        expecting: (name: String, isExpected: @Sendable (DeviceID) -> Bool)? = nil,
        onConnected: (@Sendable (DeviceID) -> Void)?, onPeerStarted: (() -> Void)? = nil,
        confirm: @escaping @Sendable (PairingPrompt) -> Bool
    ) throws(PairingError) -> PairedDevice {
        let deadline = ContinuousClock.now + timeout
        let connection: TLSConnection
        do {
            let context = try TLSContext(identity: pairingIdentity(), role: .client(offering: .pairing))
            // The trust predicate is not consulted on a pairing connection (any certificate is admitted
            // there); it would refuse everyone if the server selected anything else.
            // The handshake within the listener's own 10 s (`limits`), not the whole pairing's time: an address
            // that accepts and stays silent (a wrong port, a busy or hostile service) held a pairing started from
            // the page in "connecting" for 2 minutes, with no way to cancel it (API tester 2026-11-25, G7).
            connection = try TLSConnection.connect(
                host: address.host, port: address.port, context: context, trust: { _ in false },
                timeout: min(timeout, PairingHandshakes.limits.deadline))
        } catch let error as TLSError {
            if case .timeout = error {
                guard PairingHandshakes.limits.deadline < timeout else { throw .timedOut(after: timeout) }
                throw .silentAddress(address.description, after: PairingHandshakes.limits.deadline)
            }
            throw .tls(error)
        } catch {
            throw .tls(.socket(operation: "connect to \(address)", reason: "\(error)"))
        }
        let pairing = try Pairing(connection: connection, identity: pairingIdentity())
        if let expecting, !expecting.isExpected(pairing.peer) {
            connection.close()
            throw .unexpectedPeer(name: expecting.name, connected: pairing.peer)
        }
        onConnected?(pairing.peer)
        let confirmed = try pairing.run(
            until: deadline, timeout: timeout, onPeerStarted: onPeerStarted, confirm: confirm)
        return try storePaired(confirmed, name: name, address: remembering)
    }

    /// Trusts the device both users confirmed. Its name is `name`, else the one in its certificate.
    func storePaired(_ confirmed: PairingPrompt, name: String?, address: PeerAddress?) throws(PairingError)
        -> PairedDevice
    {
        let stored = name ?? (confirmed.peerName.isEmpty ? "device \(confirmed.peer.shortForm)" : confirmed.peerName)
        do {
            try store.trust(
                deviceID: confirmed.peer.description, name: stored, address: address?.description, now: Replica.now())
        } catch let error as StoreError {
            throw .store(error)
        } catch {
            throw .store(.sqlite("\(error)"))
        }
        return PairedDevice(deviceID: confirmed.peer, name: stored, address: address, code: confirmed.code)
    }
}
