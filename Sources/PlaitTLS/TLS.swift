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
    /// The sync protocol between paired devices (§5 of the design).
    case sync = "plait-sync/1"
    /// The pairing protocol, accepted only while `plait pair` runs on the server.
    case pairing = "plait-pair/1"
}
