import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// One server-sent event as the stream carried it.
struct ServerSentEvent: Equatable {
    var id: String?
    var event: String?
    var data: String

    /// The event's JSON (`data:`), decoded.
    var object: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(data.utf8)) as? [String: Any]) ?? [:]
    }

    var payload: [String: Any] { object["data"] as? [String: Any] ?? [:] }
    var seq: Int? { object["seq"] as? Int }
}

/// A test's HTTP/1.1 client for the agent's event endpoints on loopback, over a plain socket: it reads an SSE
/// stream as it arrives (chunked), event by event, which a general-purpose client does not let a test do, and it
/// can go away mid-stream like a closed browser tab. Used from one thread at a time.
final class EventStreamClient: @unchecked Sendable {
    let port: Int
    let token: String
    private var descriptor: Int32 = -1
    /// Bytes of the body read and de-chunked, not yet handed out.
    private var body: [UInt8] = []
    /// Raw bytes read past the headers, not yet de-chunked.
    private var raw: [UInt8] = []
    private(set) var status = 0
    private(set) var headers: [String: String] = [:]
    /// Comment lines seen (`: keep-alive`).
    private(set) var comments: [String] = []

    init(port: Int, token: String) {
        self.port = port
        self.token = token
    }

    deinit { close() }

    /// Opens `path` with the bearer token (none when it is empty) and `extra` headers; reads the status and headers.
    func open(_ path: String, headers extra: [(String, String)] = [], timeout: Double = 10) throws {
        close()
        body = []
        raw = []
        comments = []
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw CLITestFailure("socket() failed: errno \(errno)") }
        let connected = withLoopbackAddress(port: port) { connect(descriptor, $0, $1) }
        guard connected == 0 else { throw CLITestFailure("cannot connect to 127.0.0.1:\(port): errno \(errno)") }
        var request = "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n"
        if !token.isEmpty { request += "Authorization: Bearer \(token)\r\n" }
        for (name, value) in extra { request += "\(name): \(value)\r\n" }
        request += "\r\n"
        let bytes = Array(request.utf8)
        guard bytes.withUnsafeBytes({ send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == bytes.count
        else { throw CLITestFailure("cannot send the request") }
        // The head: up to the blank line.
        var head: [UInt8] = []
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let end = find(Array("\r\n\r\n".utf8), in: head) {
                raw = Array(head[(end + 4)...])
                head = Array(head[..<end])
                break
            }
            guard let more = try receive(until: deadline) else { throw CLITestFailure("the connection closed") }
            head += more
        }
        let lines = String(decoding: head, as: UTF8.self).components(separatedBy: "\r\n")
        status = Int(lines.first?.split(separator: " ").dropFirst().first ?? "") ?? 0
        self.headers = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            self.headers[name] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
    }

    /// The whole body of a finished (non-streaming) answer.
    func readBody(timeout: Double = 90) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        if let length = headers["content-length"].flatMap(Int.init) {
            while raw.count < length {
                guard let more = try receive(until: deadline) else { break }
                raw += more
            }
            return String(decoding: raw.prefix(length), as: UTF8.self)
        }
        while try !dechunk() {
            guard let more = try receive(until: deadline) else { break }
            raw += more
        }
        return String(decoding: body, as: UTF8.self)
    }

    /// The next event of the stream (comments are recorded and skipped); nil if none came within `timeout`.
    func nextEvent(timeout: Double) throws -> ServerSentEvent? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            _ = try dechunk()
            if let end = find([10, 10], in: body) {
                let block = String(decoding: body[..<end], as: UTF8.self)
                body.removeFirst(end + 2)
                var event = ServerSentEvent(id: nil, event: nil, data: "")
                var hasData = false
                for line in block.split(separator: "\n", omittingEmptySubsequences: false) {
                    if line.hasPrefix(":") {
                        comments.append(String(line.dropFirst()).trimmingCharacters(in: .whitespaces))
                    } else if line.hasPrefix("id: ") {
                        event.id = String(line.dropFirst(4))
                    } else if line.hasPrefix("event: ") {
                        event.event = String(line.dropFirst(7))
                    } else if line.hasPrefix("data: ") {
                        event.data += (hasData ? "\n" : "") + line.dropFirst(6)
                        hasData = true
                    }
                }
                if hasData { return event }
                continue
            }
            guard Date() < deadline, let more = try receive(until: deadline) else { return nil }
            raw += more
        }
    }

    func close() {
        if descriptor >= 0 { _ = Glibc.close(descriptor) }
        descriptor = -1
    }

    /// Moves complete chunks from `raw` to `body`; true once the last (empty) chunk was read.
    private func dechunk() throws -> Bool {
        while let lineEnd = find([13, 10], in: raw) {
            let sizeText = String(decoding: raw[..<lineEnd], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else {
                throw CLITestFailure("a malformed chunk size: \(sizeText)")
            }
            guard raw.count >= lineEnd + 2 + size + 2 else { return false }
            if size == 0 { return true }
            body += raw[(lineEnd + 2)..<(lineEnd + 2 + size)]
            raw.removeFirst(lineEnd + 2 + size + 2)
        }
        return false
    }

    /// Bytes that arrived before `deadline`; nil when the peer closed or the deadline passed.
    private func receive(until deadline: Date) throws -> [UInt8]? {
        let milliseconds = Int32(max(0, deadline.timeIntervalSinceNow * 1000))
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        guard poll(&entry, 1, milliseconds) > 0 else { return nil }
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        return Array(buffer[..<count])
    }

    private func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if Array(haystack[start..<(start + needle.count)]) == needle { return start }
        }
        return nil
    }
}
