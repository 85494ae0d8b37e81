import Foundation
import PlaitSync

#if canImport(Glibc)
import Glibc
#endif

/// A small blocking HTTP/1.1 client for the agent's own API on loopback: `plait gui` asks the running agent for a
/// login code with it, and the API tests send exactly the headers they mean to (a foreign Host, `Origin: null`),
/// which a general-purpose client would not let them. One request per connection (`Connection: close`).
public struct LoopbackClient: Sendable {
    public let host: String
    public let port: Int
    /// When set, requests go to the agent's Unix socket at this path instead (no token needed there, and it is
    /// reached from outside the agent's network namespace); `host` and `port` then only make the Host header.
    public var unixSocketPath: String?
    /// How long one request may take, connect to last byte.
    public var timeout: Duration = .seconds(10)

    public init(host: String = "127.0.0.1", port: Int) {
        self.host = host
        self.port = port
    }

    /// A client of the agent's Unix socket at `path`.
    public init(unixSocketPath path: String) {
        self.init(host: "127.0.0.1", port: 7480)
        unixSocketPath = path
    }

    /// Reads `<home>/api.addr` ("127.0.0.1:PORT" or "[::1]:PORT"); nil if there is none (no agent serving).
    public init?(addressFileOf homePath: String) {
        guard let data = FileManager.default.contents(atPath: homePath + "/" + APIService.addressFileName),
            let line = String(data: data, encoding: .utf8)?.split(separator: "\n").first,
            let colon = line.lastIndex(of: ":"), let port = Int(line[line.index(after: colon)...])
        else { return nil }
        var host = String(line[..<colon])
        if host.hasPrefix("[") { host = String(host.dropFirst().dropLast()) }
        self.init(host: host, port: port)
    }

    /// The Host header a browser would send for this address.
    public var authority: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// One answer: status, headers (names as sent), body.
    public struct Reply: Sendable {
        public var status: Int
        public var headers: [(name: String, value: String)]
        public var body: [UInt8]

        /// The first header of that name (case-insensitive).
        public func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name.lowercased() }?.value
        }

        public var text: String { String(decoding: body, as: UTF8.self) }

        /// The `error` sentence of a JSON error answer.
        public var errorMessage: String? {
            (try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])?["error"] as? String
        }
    }

    /// Why a request got no answer.
    public enum Failure: Error, CustomStringConvertible {
        case connect(String)
        case io(String)
        case malformed(String)

        public var description: String {
            switch self {
            case let .connect(problem): return "cannot connect: \(problem)"
            case let .io(problem): return "the connection failed: \(problem)"
            case let .malformed(problem): return "the answer is not HTTP: \(problem)"
            }
        }
    }

    /// Sends `method path` with `headers` (a Host header is added unless given) and `body`.
    public func send(
        _ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil
    ) throws -> Reply {
        let socket = try connect()
        defer { close(socket) }
        var head = "\(method) \(path) HTTP/1.1\r\n"
        if !headers.contains(where: { $0.0.lowercased() == "host" }) { head += "Host: \(authority)\r\n" }
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let body { head += "Content-Length: \(body.count)\r\n" }
        head += "Connection: close\r\n\r\n"
        try writeAll(socket, Array(head.utf8) + (body ?? []))
        return try Self.parse(try readAll(socket))
    }

    /// A JSON request: the body encoded, `Content-Type: application/json`.
    public func send(
        _ method: String, _ path: String, headers: [(String, String)] = [], json: [String: Any]
    ) throws -> Reply {
        let body: [UInt8]
        do { body = Array(try JSONSerialization.data(withJSONObject: json)) } catch {
            throw Failure.malformed("the request body does not encode: \(error)")
        }
        return try send(method, path, headers: headers + [("Content-Type", "application/json")], body: body)
    }

    private func connect() throws -> Int32 {
        if let unixSocketPath { return try connect(unixSocket: unixSocketPath) }
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICHOST
        var list: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &list) == 0, let info = list else {
            throw Failure.connect("'\(host)' is not a numeric address")
        }
        defer { freeaddrinfo(list) }
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        let socket = Glibc.socket(info.pointee.ai_family, type, 0)
        guard socket >= 0 else { throw Failure.connect(String(cString: strerror(errno))) }
        var limit = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        guard Glibc.connect(socket, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 else {
            let problem = String(cString: strerror(errno))
            close(socket)
            throw Failure.connect("\(authority): \(problem)")
        }
        return socket
    }

    private func connect(unixSocket path: String) throws -> Int32 {
        guard var address = UnixSocketAddress(path) else {
            throw Failure.connect("'\(path)' is too long for a socket path")
        }
        let socket = Glibc.socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard socket >= 0 else { throw Failure.connect(String(cString: strerror(errno))) }
        var limit = timeval(tv_sec: Int(timeout.components.seconds), tv_usec: 0)
        setsockopt(socket, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(socket, SOL_SOCKET, SO_SNDTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        guard address.withSockaddr({ Glibc.connect(socket, $0, $1) }) == 0 else {
            let problem = String(cString: strerror(errno))
            close(socket)
            throw Failure.connect("\(path): \(problem)")
        }
        return socket
    }

    private func writeAll(_ socket: Int32, _ bytes: [UInt8]) throws {
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes {
                Glibc.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            if count < 0 {
                if errno == EINTR { continue }
                // The server may answer (413, 403) and close before reading the whole body: read what it said.
                if errno == EPIPE || errno == ECONNRESET { return }
                throw Failure.io(String(cString: strerror(errno)))
            }
            sent += count
        }
    }

    private func readAll(_ socket: Int32) throws -> [UInt8] {
        var received: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { Glibc.recv(socket, $0.baseAddress, $0.count, 0) }
            if count == 0 { return received }
            if count < 0 {
                if errno == EINTR { continue }
                if errno == ECONNRESET && !received.isEmpty { return received }
                throw Failure.io(errno == EAGAIN ? "no answer within \(timeout)" : String(cString: strerror(errno)))
            }
            received += chunk[..<count]
        }
    }

    static func parse(_ bytes: [UInt8]) throws -> Reply {
        let separator: [UInt8] = Array("\r\n\r\n".utf8)
        guard let end = bytes.firstRange(of: separator) else { throw Failure.malformed("no end of headers") }
        let lines = String(decoding: bytes[..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let statusWords = lines[0].split(separator: " ")
        guard statusWords.count >= 2, let status = Int(statusWords[1]) else { throw Failure.malformed(lines[0]) }
        let headers = lines.dropFirst().compactMap { line -> (name: String, value: String)? in
            guard let colon = line.firstIndex(of: ":") else { return nil }
            return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        var body = Array(bytes[end.upperBound...])
        let chunked = headers.contains {
            $0.name.lowercased() == "transfer-encoding" && $0.value.lowercased().contains("chunked")
        }
        if chunked { body = try dechunk(body) }
        return Reply(status: status, headers: headers, body: body)
    }

    private static func dechunk(_ bytes: [UInt8]) throws -> [UInt8] {
        var output: [UInt8] = []
        var index = 0
        let crlf: [UInt8] = [13, 10]
        while index < bytes.count {
            guard let lineEnd = bytes[index...].firstRange(of: crlf) else {
                throw Failure.malformed("a chunk size line")
            }
            let sizeText = String(decoding: bytes[index..<lineEnd.lowerBound], as: UTF8.self)
            guard let size = Int(sizeText.split(separator: ";").first ?? "", radix: 16) else {
                throw Failure.malformed(sizeText)
            }
            if size == 0 { break }
            let start = lineEnd.upperBound
            guard start + size <= bytes.count else { throw Failure.malformed("a chunk runs past the end") }
            output += bytes[start..<start + size]
            index = start + size + 2
        }
        return output
    }
}
