#if canImport(Glibc)
import Glibc
#endif

/// Free TCP ports on loopback, for devices that must know each other's address before any of them listens
/// (`plait demo` on loopback, tests of agents dialling each other at once).
public enum LoopbackPorts {
    /// Why no free port could be had: the call and errno's text.
    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    /// `count` distinct free TCP ports on 127.0.0.1: bound together (so they differ), then released for the
    /// caller's listeners.
    public static func free(_ count: Int) throws -> [UInt16] {
        var sockets: [Int32] = []
        defer { for fd in sockets { close(fd) } }
        var ports: [UInt16] = []
        for _ in 0..<count {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else {
                throw Unavailable(description: "cannot open a socket (\(String(cString: strerror(errno))))")
            }
            sockets.append(fd)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = 0
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0
                }
            }
            guard bound else {
                throw Unavailable(description: "cannot find a free port on 127.0.0.1 (\(String(cString: strerror(errno))))")
            }
            ports.append(UInt16(bigEndian: address.sin_port))
        }
        return ports
    }
}
