import PlaitCore

/// What a device publishes about itself: its instance name, port and TXT record.
public struct Announcement: Sendable, Equatable {
    /// The DNS-SD instance name wanted: the device name. Avahi may publish it under another name
    /// (`laptop #2`) when a different service already uses it; `DiscoveryEvent.published` says which.
    public var name: String
    /// The TCP port of the sync listener.
    public var port: UInt16
    public var txt: TXTRecord

    public init(name: String, port: UInt16, txt: TXTRecord) {
        self.name = name
        self.port = port
        self.txt = txt
    }

    /// The longest instance name DNS allows, in UTF-8 bytes (one DNS label).
    public static let maximumNameBytes = 63
}

/// plait's TXT record (DESIGN §6). A hint only: anti-entropy runs whatever it says.
public struct TXTRecord: Sendable, Equatable {
    /// `DiscoveryTag.tag(deviceID:date:)` of the publisher, for today (UTC).
    public var tag: String
    /// The sync protocol version the publisher speaks.
    public var proto: Int
    /// A short hash of the publisher's summary (`summaryHash`): when it changes, a peer syncs now.
    public var sum: String
    /// True while `plait pair` runs on the publisher (`pair=1`): then its name is shown to the user.
    public var pairing: Bool

    public init(tag: String, proto: Int, sum: String, pairing: Bool = false) {
        self.tag = tag
        self.proto = proto
        self.sum = sum
        self.pairing = pairing
    }

    /// Reads a discovered service's TXT; nil when `tag` or a numeric `proto` is missing (not a plait
    /// record). A missing `sum` reads as empty; `pair=1` means pairing.
    public init?(_ txt: [String: String]) {
        guard let tag = txt["tag"], let protoText = txt["proto"], let proto = Int(protoText) else { return nil }
        self.init(tag: tag, proto: proto, sum: txt["sum"] ?? "", pairing: txt["pair"] == "1")
    }

    /// The `key=value` entries in the order they are published.
    public var entries: [(key: String, value: String)] {
        var entries = [("tag", tag), ("proto", String(proto)), ("sum", sum)]
        if pairing { entries.append(("pair", "1")) }
        return entries
    }

    /// Characters of `summaryHash`.
    public static let summaryHashLength = 8

    /// The `sum` value for `summary`: the first 8 base32 characters (40 bits) of SHA-256 over the UTF-8
    /// of its canonical text (`A:6,B:3`). Enough to notice a change; never trusted for anything else.
    public static func summaryHash(_ summary: Summary) -> String {
        String(Base32.string(Array(SHA256.hash(Array(summary.description.utf8)).prefix(5))).prefix(summaryHashLength))
    }
}
