/// One Avahi browse result: a service instance seen on one interface over one protocol.
struct BrowseKey: Hashable {
    var interface: Int32
    /// AVAHI_PROTO_INET (0) or AVAHI_PROTO_INET6 (1).
    var proto: Int32
    var name: String
    var type: String
    var domain: String
}

/// What one resolver reported for one `BrowseKey`, copied out of Avahi's callback.
struct Resolution: Equatable {
    var host: String
    /// The address as text, a link-local IPv6 one with its zone; nil when Avahi gave none.
    var address: String?
    var port: UInt16
    var txt: [String: String]
}

/// Everything known about one instance name, merged over its interfaces and protocols: what turns
/// Avahi's per-(interface, protocol) browse and resolve results into found, updated and removed.
struct TrackedService {
    let name: String
    private(set) var keys: Set<BrowseKey> = []
    private var resolutions: [BrowseKey: Resolution] = [:]
    /// The key whose resolution came last: host, port and TXT are taken from it, as the freshest.
    private var latest: BrowseKey?
    /// What the last event said, nil until the first resolution.
    private(set) var reported: DiscoveredService?

    init(name: String) { self.name = name }

    mutating func browsed(_ key: BrowseKey) { keys.insert(key) }

    /// Records a resolution; returns `found` the first time, `updated` when the merged view changed.
    mutating func resolved(_ key: BrowseKey, _ resolution: Resolution) -> DiscoveryEvent? {
        guard keys.contains(key) else { return nil }
        resolutions[key] = resolution
        latest = key
        return report()
    }

    /// Forgets one browse result; returns `removed` when it was the last one of a service already
    /// reported, `updated` when the rest still resolve but the merged view changed.
    mutating func lost(_ key: BrowseKey) -> DiscoveryEvent? {
        keys.remove(key)
        resolutions[key] = nil
        if latest == key { latest = resolutions.keys.sorted(by: Self.order).first }
        if keys.isEmpty || resolutions.isEmpty {
            defer { reported = nil }
            return reported == nil ? nil : .removed(name: name)
        }
        return report()
    }

    private mutating func report() -> DiscoveryEvent? {
        guard let merged = merged() else { return nil }
        let previous = reported
        reported = merged
        if previous == nil { return .found(merged) }
        return previous == merged ? nil : .updated(merged)
    }

    func merged() -> DiscoveredService? {
        guard let latest, let fresh = resolutions[latest] else { return nil }
        var addresses: [String] = []
        for key in resolutions.keys.sorted(by: Self.order) {
            if let address = resolutions[key]?.address, !addresses.contains(address) { addresses.append(address) }
        }
        // IPv4 first, each family in the order of the keys; a stable order so equal views compare equal.
        addresses = addresses.filter { !$0.contains(":") } + addresses.filter { $0.contains(":") }
        return DiscoveredService(name: name, host: fresh.host, addresses: addresses, port: fresh.port, txt: fresh.txt)
    }

    private static func order(_ a: BrowseKey, _ b: BrowseKey) -> Bool {
        (a.proto, a.interface, a.type, a.domain) < (b.proto, b.interface, b.type, b.domain)
    }
}
