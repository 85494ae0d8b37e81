import Foundation
import PlaitSync

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The CLI's line to the agent running on its home: one blocking HTTP/1.1 request per connection over the
/// agent's Unix socket (DESIGN §12: no token there; the agent checks the peer's uid). URLSession cannot speak
/// to a Unix socket on Linux, and a request this small needs no event loop: connect, write, read to the end.
final class AgentClient {
    /// The socket's path (for messages).
    let socketPath: String
    /// The home this client means: sent with each request, so an agent serving another directory (a copy of the
    /// home under the same Device ID, whose socket has the same name) refuses instead of acting on its own.
    let home: String
    private var descriptor: Int32

    /// How long an answer may take before the CLI gives up (an edit or a read is milliseconds; a wedged agent
    /// must not hang a script for ever).
    static let answerTimeoutSeconds = 60

    private init(socketPath: String, home: String, descriptor: Int32) {
        self.socketPath = socketPath
        self.home = home
        self.descriptor = descriptor
    }

    deinit { if descriptor >= 0 { close(descriptor) } }

    /// Connects to the agent serving `home`; nil when none listens there (no socket, a stale one left by a
    /// killed agent, or a path that cannot be computed). The caller then opens the store itself, saying nothing.
    static func connect(home: String, environment: [String: String]) -> AgentClient? {
        guard let path = UnixSocketPath.path(home: home, environment: environment),
            var address = UnixSocketAddress(path)
        else { return nil }
        let descriptor = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { return nil }
        var result: Int32
        repeat {
            result = address.withSockaddr { Glibc.connect(descriptor, $0, $1) }
        } while result != 0 && errno == EINTR
        guard result == 0 else {
            close(descriptor)
            return nil
        }
        var timeout = timeval(tv_sec: answerTimeoutSeconds, tv_usec: 0)
        _ = setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(descriptor, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        return AgentClient(socketPath: path, home: home, descriptor: descriptor)
    }

    /// One answer: status, header fields (names lower-cased) and the whole body.
    struct Response {
        var status: Int
        var headers: [String: String]
        var body: [UInt8]
    }

    /// Sends one request (`Connection: close`) and reads the whole answer; the connection is used up.
    func request(_ method: String, _ target: String, json body: [UInt8]? = nil) throws(AgentClientError) -> Response {
        var head = "\(method) \(target) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n"
        head += "Plait-Home: \(Self.percentEncoded(home))\r\n"
        if let body {
            head += "Content-Type: application/json\r\nContent-Length: \(body.count)\r\n"
        }
        head += "\r\n"
        try write(Array(head.utf8) + (body ?? []))
        var reader = Reader(client: self)
        return try reader.response()
    }

    private func write(_ bytes: [UInt8]) throws(AgentClientError) {
        var offset = 0
        while offset < bytes.count {
            // MSG_NOSIGNAL: an agent that hangs up must give an error here, not kill the CLI with SIGPIPE.
            let sent = bytes.withUnsafeBytes { raw in
                send(descriptor, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
            }
            if sent < 0 {
                if errno == EINTR { continue }
                throw .broken(socket: socketPath, problem: Self.errnoText())
            }
            offset += sent
        }
    }

    fileprivate func read(into buffer: inout [UInt8]) throws(AgentClientError) -> Int {
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
            if count >= 0 {
                buffer.append(contentsOf: chunk[..<count])
                return count
            }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK {
                throw .broken(socket: socketPath, problem: "no answer within \(Self.answerTimeoutSeconds) s")
            }
            throw .broken(socket: socketPath, problem: Self.errnoText())
        }
    }

    /// `text` with everything but unreserved characters and "/" percent-encoded (a header value, a query).
    static func percentEncoded(_ text: String, keeping extra: String = "/") -> String {
        var allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        allowed.insert(charactersIn: extra)
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }

    static func errnoText() -> String { String(cString: strerror(errno)) }

    /// Parses an HTTP/1.1 answer as it arrives: a status line, header fields, then a body framed by
    /// Content-Length, chunked transfer coding, or the end of the connection.
    private struct Reader {
        let client: AgentClient
        var buffer: [UInt8] = []
        var position = 0
        var ended = false

        init(client: AgentClient) { self.client = client }

        /// Reads more bytes; false at the end of the connection.
        mutating func fill() throws(AgentClientError) -> Bool {
            if ended { return false }
            if position > 1 << 20 {
                buffer.removeFirst(position)
                position = 0
            }
            if try client.read(into: &buffer) == 0 { ended = true }
            return !ended
        }

        /// The next line without its CRLF.
        mutating func line() throws(AgentClientError) -> String {
            while true {
                if let end = buffer[position...].firstIndex(of: UInt8(ascii: "\n")) {
                    var lineEnd = end
                    if lineEnd > position, buffer[lineEnd - 1] == UInt8(ascii: "\r") { lineEnd -= 1 }
                    let text = String(decoding: buffer[position..<lineEnd], as: UTF8.self)
                    position = end + 1
                    return text
                }
                guard try fill() else { throw malformed("the answer ended in its header") }
            }
        }

        mutating func bytes(_ count: Int) throws(AgentClientError) -> ArraySlice<UInt8> {
            while buffer.count - position < count {
                guard try fill() else { throw malformed("the answer ended before its body did") }
            }
            defer { position += count }
            return buffer[position..<position + count]
        }

        func malformed(_ problem: String) -> AgentClientError { .broken(socket: client.socketPath, problem: problem) }

        mutating func response() throws(AgentClientError) -> Response {
            let status = try line().split(separator: " ", maxSplits: 2)
            guard status.count >= 2, status[0].hasPrefix("HTTP/1."), let code = Int(status[1]) else {
                throw malformed("the answer does not start with an HTTP/1.1 status line")
            }
            var headers: [String: String] = [:]
            while true {
                let field = try line()
                if field.isEmpty { break }
                guard let colon = field.firstIndex(of: ":") else { throw malformed("a header line has no colon") }
                let name = field[..<colon].lowercased()
                let value = field[field.index(after: colon)...].trimmingCharacters(in: .whitespaces)
                headers[name] = headers[name].map { $0 + ", " + value } ?? value
            }
            var body: [UInt8] = []
            if headers["transfer-encoding"]?.lowercased().contains("chunked") == true {
                while true {
                    let sizeLine = try line().split(separator: ";").first.map(String.init) ?? ""
                    guard let size = Int(sizeLine.trimmingCharacters(in: .whitespaces), radix: 16), size >= 0 else {
                        throw malformed("a chunk size is not a hexadecimal number")
                    }
                    if size == 0 {
                        while try !line().isEmpty {}  // trailer fields, if any
                        break
                    }
                    body.append(contentsOf: try bytes(size))
                    guard try line().isEmpty else { throw malformed("a chunk does not end where its size says") }
                }
            } else if let length = headers["content-length"] {
                guard let count = Int(length), count >= 0 else { throw malformed("the Content-Length is not a number") }
                body = Array(try bytes(count))
            } else {
                while try fill() {}
                body = Array(buffer[position...])
            }
            return Response(status: code, headers: headers, body: body)
        }
    }
}

/// What can go wrong between the CLI and the agent it found on its home.
enum AgentClientError: Error, CustomStringConvertible {
    /// The connection broke or the answer was not HTTP: the agent crashed, was stopped, or is not plait's.
    case broken(socket: String, problem: String)
    /// The agent answered with an error; `message` is its sentence, printed as the CLI would have printed it.
    case agent(status: Int, message: String)
    /// The agent on the socket serves another directory (a copy of this home under the same Device ID) and did
    /// nothing: the command runs without it.
    case otherHome

    var description: String {
        switch self {
        case let .broken(socket, problem):
            return "the agent on this home stopped answering on \(socket) (\(problem)); the command may or may "
                + "not have taken effect: check with `plait show`, and restart `plait agent` if it is hung."
        case let .agent(_, message): return message
        case .otherHome: return "the agent on this home's socket serves another home; nothing was changed."
        }
    }
}
