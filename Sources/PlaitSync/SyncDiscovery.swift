import Foundation
import PlaitDiscovery
import PlaitTLS

/// Paired devices seen on the LAN by mDNS, recognised by their daily tag (`DiscoveryTag.matchingDevice`):
/// where each one's agent listens. Devices in pairing mode (`pair=1`: a pairing listener, not an agent) and
/// strangers are ignored.
public struct PairedPeerSearch: Sendable {
    /// The Device IDs looked for.
    public let trusted: [String]
    /// Device ID → the endpoint its agent publishes (IPv4 preferred).
    public private(set) var endpoints: [String: PeerAddress] = [:]
    /// Instance name → Device ID, to forget a device whose service goes away.
    private var instances: [String: String] = [:]

    public init(trusted: [String]) {
        self.trusted = trusted
    }

    /// Discovery found or updated `service`. Returns the paired device it is, if it is one.
    @discardableResult
    public mutating func seen(_ service: DiscoveredService, date: Date = Date()) -> String? {
        guard let txt = TXTRecord(service.txt), !txt.pairing, let text = service.preferredEndpoint,
            let endpoint = try? PeerAddress(parsing: text),
            let device = DiscoveryTag.matchingDevice(tag: txt.tag, trusted: trusted, date: date)
        else {
            removed(instance: service.name)
            return nil
        }
        endpoints[device] = endpoint
        instances[service.name] = device
        return device
    }

    /// A service left the LAN.
    public mutating func removed(instance: String) {
        guard let device = instances.removeValue(forKey: instance) else { return }
        if !instances.values.contains(device) { endpoints[device] = nil }
    }

    /// Every device looked for has been found with an IPv4 address, so the search can stop early. (Avahi
    /// resolves each address family on its own: a device first seen over IPv6 is waited for until its IPv4
    /// address follows, or the search ends.)
    public var isComplete: Bool {
        trusted.allSatisfy { device in endpoints[device].map { !$0.host.contains(":") } ?? false }
    }
}

/// One device `plait sync` syncs with: the addresses to try, in order, until one syncs.
public struct SyncTarget: Sendable, Equatable {
    /// Where the first address came from.
    public enum Source: String, Sendable {
        /// `--peer`.
        case given
        /// The paired device's stored address.
        case stored
        /// Its agent's service, found by mDNS now.
        case discovered
    }

    /// The paired device meant (nil for a `--peer` address: whoever answers, if paired).
    public var deviceID: String?
    public var addresses: [PeerAddress]
    public var source: Source

    public init(deviceID: String?, addresses: [PeerAddress], source: Source) {
        self.deviceID = deviceID
        self.addresses = addresses
        self.source = source
    }

    /// Every paired device that has a discovered endpoint or a stored address, once, in the order of
    /// `paired`. The discovered endpoint goes first (where its agent says it listens now); the stored
    /// address, if different, is tried after it when it fails.
    public static func plan(
        paired: [(deviceID: String, address: PeerAddress?)], discovered: [String: PeerAddress]
    ) -> [SyncTarget] {
        var targets: [SyncTarget] = []
        var planned: Set<String> = []
        for peer in paired where planned.insert(peer.deviceID).inserted {
            switch (discovered[peer.deviceID], peer.address) {
            case (let found?, let stored?):
                targets.append(
                    SyncTarget(
                        deviceID: peer.deviceID, addresses: found == stored ? [found] : [found, stored],
                        source: .discovered))
            case (let found?, nil):
                targets.append(SyncTarget(deviceID: peer.deviceID, addresses: [found], source: .discovered))
            case (nil, let stored?):
                targets.append(SyncTarget(deviceID: peer.deviceID, addresses: [stored], source: .stored))
            case (nil, nil):
                continue
            }
        }
        return targets
    }
}

/// What a search for paired devices on the LAN found.
public struct PeerSearchResult: Sendable {
    /// Device ID → its agent's endpoint.
    public var endpoints: [String: PeerAddress]
    /// Why discovery could not run (avahi-daemon unreachable), one sentence; nil when it ran.
    public var warning: String?
    /// `warning` without discovery's own conclusion, to word one's own after it.
    public var reason: String? { warning.map(unavailabilityReason) }
    /// How long the search took.
    public var elapsed: Duration
}

extension Home {
    /// Browses `_plait._tcp` for at most `duration` and returns the paired devices found (stopping as soon as
    /// every paired device is found). Without avahi-daemon it returns at once, with a warning.
    public func searchPairedPeers(for duration: Duration) -> PeerSearchResult {
        let start = ContinuousClock.now
        let trusted = ((try? trustedDeviceIDs()) ?? []).sorted()
        var search = PairedPeerSearch(trusted: trusted)
        guard !trusted.isEmpty else { return PeerSearchResult(endpoints: [:], warning: nil, elapsed: .zero) }
        let inbox: Inbox<DiscoveryEvent>
        let discovery: Discovery
        do {
            inbox = try Inbox()
            discovery = try Discovery.forCommand()
        } catch {
            return PeerSearchResult(endpoints: [:], warning: "\(error)", elapsed: start.duration(to: .now))
        }
        defer { discovery.close() }
        let events = discovery.events
        Task.detached {
            for await event in events { inbox.post(event) }
        }
        discovery.startBrowsing()
        let deadline = start + duration
        while ContinuousClock.now < deadline && !search.isComplete {
            inbox.wait(until: deadline)
            for event in inbox.take() {
                switch event {
                case .state(.unavailable(let warning)):
                    return PeerSearchResult(
                        endpoints: search.endpoints, warning: warning, elapsed: start.duration(to: .now))
                case .found(let service), .updated(let service):
                    search.seen(service)
                case .removed(let name):
                    search.removed(instance: name)
                case .state, .published:
                    break
                }
            }
        }
        return PeerSearchResult(endpoints: search.endpoints, warning: nil, elapsed: start.duration(to: .now))
    }

    /// Syncs with `target`: its addresses in turn until one succeeds. Returns the successful outcome, else
    /// the last failure.
    public func syncOnce(
        with target: SyncTarget, timeout: Duration, onPulled: (@Sendable (Int) -> Void)? = nil
    ) -> PeerSyncOutcome {
        precondition(!target.addresses.isEmpty, "a sync target has at least one address (SyncTarget.plan)")
        var outcome: PeerSyncOutcome?
        for address in target.addresses {
            outcome = syncOnce(with: address, expecting: target.deviceID, timeout: timeout, onPulled: onPulled)
            if outcome?.succeeded == true { break }
        }
        return outcome!
    }
}
