import Foundation
import PlaitTLS

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Where the agent serves the local API on a Unix socket (DESIGN §12). The agent and the CLI compute it with the
/// same function, so nothing needs to be written down for the CLI to find it.
///
/// `<home>/api.sock` when it fits in `sun_path`; else `$XDG_RUNTIME_DIR/plait-<first 7 of Device ID>.sock`
/// (a directory the user alone can enter); else there is no socket (the agent says so once in its log).
public enum UnixSocketPath {
    public static let fileName = "api.sock"

    /// `sun_path`'s size, its terminating NUL included (108 on Linux).
    public static let capacity = MemoryLayout.size(ofValue: sockaddr_un().sun_path)

    /// The agent binds in a private directory beside the final path (`<dir>/.XXXXXX/s`), sets the socket's
    /// mode and only then renames it into place, so nobody can connect before the mode is 0600. A path is used
    /// only when that bind path fits too.
    static func fits(directory: String, name: String) -> Bool {
        let final = directory.utf8.count + 1 + name.utf8.count
        let bind = directory.utf8.count + 1 + bindDirectoryTemplate.utf8.count + 2
        return max(final, bind) < capacity
    }

    /// mkdtemp's template for the private bind directory (relative to the socket's directory).
    public static let bindDirectoryTemplate = ".XXXXXX"

    /// The socket's path for `home` (absolute, as `Home.resolvePath` gives it), or nil when neither place fits.
    /// `deviceShortID` (the first group of the Device ID) is asked only when the home's path is too long.
    public static func path(
        home: String, environment: [String: String], deviceShortID: () -> String?
    ) -> String? {
        if fits(directory: home, name: fileName) { return home + "/" + fileName }
        guard let runtime = environment["XDG_RUNTIME_DIR"], runtime.hasPrefix("/"), let short = deviceShortID()
        else { return nil }
        let name = "plait-\(short).sock"
        return fits(directory: runtime, name: name) ? runtime + "/" + name : nil
    }

    /// The path as the CLI finds it: the Device ID, when needed, comes from the home's certificate.
    public static func path(home: String, environment: [String: String]) -> String? {
        path(home: home, environment: environment) {
            try? Identity.load(directory: home).deviceID.shortForm
        }
    }
}

/// What is at a socket path before the agent binds there.
public enum UnixSocketOccupant: Equatable, Sendable {
    /// Nothing: the path is free.
    case none
    /// A socket nobody listens on (an agent was killed): safe to replace.
    case stale
    /// A socket that accepts connections: another agent's (a copy of this home under the same Device ID).
    case live
    /// Something that is not a socket: never replaced.
    case other

    /// Looks at `path` without blocking: a non-blocking connect tells a listener (connected, or EAGAIN when its
    /// backlog is full) from a leftover file (ECONNREFUSED).
    public static func probe(_ path: String) -> UnixSocketOccupant {
        var status = stat()
        guard lstat(path, &status) == 0 else { return .none }
        guard status.st_mode & S_IFMT == S_IFSOCK else { return .other }
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
            | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard descriptor >= 0 else { return .live }
        defer { close(descriptor) }
        guard var address = UnixSocketAddress(path) else { return .other }
        let result = address.withSockaddr { connect(descriptor, $0, $1) }
        if result == 0 { return .live }
        switch errno {
        case ECONNREFUSED, ENOENT: return .stale
        default: return .live  // EAGAIN (backlog full), EACCES, …: someone is there or we cannot tell; keep it
        }
    }
}

/// A `sockaddr_un` for a path that fits (nil when it does not).
public struct UnixSocketAddress {
    private var storage = sockaddr_un()

    public init?(_ path: String) {
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count < UnixSocketPath.capacity else { return nil }
        storage.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &storage.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
    }

    /// Calls `body` with the address as a `sockaddr` pointer and its length.
    public mutating func withSockaddr<T>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
        withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                body($0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
    }
}
