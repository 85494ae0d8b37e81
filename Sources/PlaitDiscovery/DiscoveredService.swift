/// A plait device found on the LAN, resolved: where to connect and what its TXT record says.
public struct DiscoveredService: Sendable, Hashable, Codable {
    /// The DNS-SD instance name (the device name as published; unverified until a handshake).
    public var name: String
    /// Its mDNS host name, e.g. `laptop.local`.
    public var host: String
    /// Every address resolved, IPv4 first, then IPv6 (a link-local one carries its zone, `fe80::1%eth0`).
    public var addresses: [String]
    public var port: UInt16
    /// The TXT record as key → value (a key without `=` maps to ""); `TXTRecord(txt)` reads plait's keys.
    public var txt: [String: String]

    public init(name: String, host: String, addresses: [String], port: UInt16, txt: [String: String]) {
        self.name = name
        self.host = host
        self.addresses = addresses
        self.port = port
        self.txt = txt
    }

    /// The address to connect to: the first IPv4 address if there is one (no zone to get wrong, and what
    /// every LAN routes), else the first IPv6 one.
    public var preferredAddress: String? {
        addresses.first(where: { !$0.contains(":") }) ?? addresses.first
    }

    /// `host:port` for `preferredAddress`, with brackets around an IPv6 address.
    public var preferredEndpoint: String? {
        guard let address = preferredAddress else { return nil }
        return address.contains(":") ? "[\(address)]:\(port)" : "\(address):\(port)"
    }
}

/// Whether discovery works right now.
public enum DiscoveryState: Sendable, Hashable {
    /// avahi-daemon answers but is still registering its host name; services wait for it.
    case starting
    /// avahi-daemon runs: publishing and browsing work.
    case running
    /// avahi-daemon cannot be reached; `warning` says why in one sentence. Discovery retries by itself.
    case unavailable(warning: String)
    /// `close()` was called.
    case closed
}

/// What discovery reports, in order, through `Discovery.events`.
public enum DiscoveryEvent: Sendable, Hashable {
    /// The state changed.
    case state(DiscoveryState)
    /// This device's service is established on the LAN under `name` (after any renaming).
    case published(name: String)
    /// Another device's service appeared and resolved.
    case found(DiscoveredService)
    /// A device already found changed: TXT record (a new `sum`), addresses, host or port.
    case updated(DiscoveredService)
    /// A device's service left the LAN, or can no longer be seen (this host lost its link or its daemon).
    case removed(name: String)
}

/// The avahi-daemon discovery talks to, as it describes itself.
public struct DaemonInfo: Sendable, Hashable {
    /// Its version string, e.g. `avahi 0.8`.
    public var version: String
    /// The host name it publishes for this machine, e.g. `laptop.local`.
    public var hostName: String

    public init(version: String, hostName: String) {
        self.version = version
        self.hostName = hostName
    }
}
