/// A peer's address: `host:port`, IPv6 hosts in brackets (`[::1]:7400`).
public struct PeerAddress: Hashable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: UInt16

    /// Parses `host:port`; port 0 ("any free port") only with `allowingPortZero` (a listen address).
    public init(parsing text: String, allowingPortZero: Bool = false) throws(PeerAddressError) {
        let problem = PeerAddressError.notAnAddress(text)
        guard let colon = text.lastIndex(of: ":") else { throw problem }
        var host = String(text[..<colon])
        if host.hasPrefix("[") {
            guard host.hasSuffix("]"), host.count > 2 else { throw problem }
            host = String(host.dropFirst().dropLast())
        } else if host.contains(":") {
            throw problem
        }
        guard !host.isEmpty, !host.contains(where: { $0.isWhitespace }),
            let port = UInt16(text[text.index(after: colon)...]), port > 0 || allowingPortZero
        else { throw problem }
        self.host = host
        self.port = port
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// A text that is not `host:port`.
public enum PeerAddressError: Error, CustomStringConvertible, Sendable, Equatable {
    case notAnAddress(String)

    public var description: String {
        switch self {
        case let .notAnAddress(text):
            return "'\(text)' is not an address: write HOST:PORT, e.g. 192.0.2.7:7400 or [::1]:7400."
        }
    }
}
