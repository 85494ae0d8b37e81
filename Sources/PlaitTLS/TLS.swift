#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Process-wide set-up for plait's TLS transport.
public enum TLS {
    /// Ignores SIGPIPE for the whole process, once: `SSL_write` to a peer that has gone away
    /// writes to a closed socket, and the default action of SIGPIPE would kill the process instead
    /// of returning EPIPE. `TLSContext` calls it, so calling it yourself is only needed if you
    /// write to sockets before making a context. Safe to call from any thread, any number of times.
    public static func setUp() {
        _ = ignoreSIGPIPE
    }
}

// A global is initialized exactly once, atomically, on first use.
private let ignoreSIGPIPE: Void = {
    _ = signal(SIGPIPE, SIG_IGN)
}()

/// The application protocols (ALPN names) of plait; a connection speaks exactly one.
public enum TLSApplicationProtocol: String, Sendable, CaseIterable {
    /// The sync protocol between paired devices (§5 of the design), version `syncVersion`. Only this version is
    /// spoken: protocol 2 signs changes and gives `Change` field 9, which a version-1 peer cannot be served.
    case sync = "plait-sync/2"
    /// The pairing protocol, accepted only while `plait pair` runs on the server.
    case pairing = "plait-pair/1"
}

extension TLSApplicationProtocol {
    /// The sync protocol version this build speaks (the number in the ALPN name and in Hello).
    public static let syncVersion = 2
    /// What the sync protocol's ALPN names look like, before their version number.
    static let syncPrefix = "plait-sync/"

    /// The version of another sync protocol among `offered` ALPN names (`plait-sync/1` gives 1), when no name
    /// this build speaks was offered: the peer runs another plait, and the refusal can say which version it speaks.
    public static func otherSyncVersion(in offered: [String]) -> Int? {
        guard !offered.contains(where: { TLSApplicationProtocol(rawValue: $0) != nil }) else { return nil }
        return offered.compactMap { name -> Int? in
            guard name.hasPrefix(syncPrefix) else { return nil }
            return Int(name.dropFirst(syncPrefix.count))
        }.max()
    }
}
