import Foundation
import PlaitCore
import PlaitPairing
import PlaitStore
import PlaitTLS

/// A device this one now trusts, after interactive or headless pairing.
public struct PairedDevice: Sendable, Equatable {
    public var deviceID: DeviceID
    /// The name stored for it.
    public var name: String
    /// Where it is dialled, when known.
    public var address: PeerAddress?
    /// The code both users confirmed (nil for headless pairing by ID).
    public var code: PairingCode?
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

    /// Takes a pending connection, if there is one, and completes its handshake within `handshakeTimeout`:
    /// an attempt ready to run, from a device that offered the pairing protocol. Returns nil when nothing
    /// was pending or the handshake stalled; throws for a connection that failed its handshake or does not
    /// pair (it is closed). Either way the listener goes on listening.
    public func acceptPending(handshakeTimeout: Duration) throws(PairingError) -> Pairing? {
        let connection: TLSConnection
        do {
            connection = try listener.accept(trust: { _ in false }, timeout: .zero, handshakeTimeout: handshakeTimeout)
        } catch let error as TLSError {
            if case .timeout = error { return nil }
            throw .tls(error)
        } catch {
            throw .tls(.socket(operation: "accept a connection", reason: "\(error)"))
        }
        guard connection.applicationProtocol == .pairing else {
            connection.close()
            throw .notPairing(negotiated: connection.negotiatedALPN)
        }
        return try Pairing(connection: connection, identity: home.pairingIdentity())
    }

    /// Waits until a device connects with the pairing protocol, runs one attempt with it and, if both
    /// users said yes, trusts it (named `name`, else as its certificate names itself). All within
    /// `timeout`. A connection that fails its handshake (a sync client, a scan) is closed, reported to
    /// `onRefused`, and the wait goes on; the first pairing connection is the only attempt.
    ///
    /// The initiator's address is not stored: the port it connected from is not one it listens on.
    public func pairOnce(
        timeout: Duration, name: String? = nil, onConnected: (@Sendable (DeviceID) -> Void)? = nil,
        onRefused: (@Sendable (String) -> Void)? = nil, confirm: @escaping @Sendable (PairingPrompt) -> Bool
    ) throws(PairingError) -> PairedDevice {
        let deadline = ContinuousClock.now + timeout
        while true {
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else { throw .timedOut(after: timeout) }
            let connection: TLSConnection
            do {
                connection = try listener.accept(
                    trust: { _ in false }, timeout: left, handshakeTimeout: min(.seconds(10), left))
            } catch let error as TLSError {
                if case .timeout = error, ContinuousClock.now >= deadline { throw .timedOut(after: timeout) }
                if case .socket = error { throw .tls(error) }
                onRefused?(error.description)
                continue
            } catch {
                throw .tls(.socket(operation: "accept a connection", reason: "\(error)"))
            }
            guard connection.applicationProtocol == .pairing else {
                connection.close()
                continue
            }
            let pairing = try Pairing(connection: connection, identity: home.pairingIdentity())
            onConnected?(pairing.peer)
            let confirmed = try pairing.run(until: deadline, timeout: timeout, confirm: confirm)
            return try home.storePaired(confirmed, name: name, address: nil)
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
            connection = try TLSConnection.connect(
                host: address.host, port: address.port, context: context, trust: { _ in false }, timeout: timeout)
        } catch let error as TLSError {
            if case .timeout = error { throw .timedOut(after: timeout) }
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
