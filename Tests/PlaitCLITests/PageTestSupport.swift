import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The repository checkout these tests were built from (the page's source files live in `page/`).
enum Repository {
    static let root: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    static func read(_ relativePath: String) throws -> String {
        try String(contentsOfFile: root + "/" + relativePath, encoding: .utf8)
    }
}

/// The local API address an agent wrote to `<home>/api.addr` once listening, waited for up to `seconds`.
func apiAddress(home: String, agent: RunningAgent, seconds: Double = 20) throws -> String {
    var address: String?
    _ = eventually(seconds) {
        let text = (try? String(contentsOfFile: home + "/api.addr", encoding: .utf8)) ?? ""
        address = text.split(separator: "\n").first.map { String($0).trimmingCharacters(in: .whitespaces) }
        return address?.isEmpty == false
    }
    guard let address, !address.isEmpty else {
        throw CLITestFailure("the agent wrote no \(home)/api.addr within \(seconds) s: \(agent.log)")
    }
    return address
}

/// The sandbox's config: the agents' local API on any free loopback port (never the default 7480, which the
/// machine's own agent or a parallel test may hold).
func writeAPIConfig(_ sandbox: Sandbox) throws {
    let directory = sandbox.configHome + "/plait"
    try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    try "[api]\nlisten = \"127.0.0.1:0\"\n".write(toFile: directory + "/plait.toml", atomically: true, encoding: .utf8)
}

/// One HTTP/1.1 exchange over a plain TCP socket to 127.0.0.1, so a test controls every header (Host included)
/// and sees the answer's headers as sent.
struct HTTPExchange {
    let status: Int
    /// Header names lowercased; a repeated header keeps every value, in order.
    let headers: [String: [String]]
    let body: Data

    func header(_ name: String) -> String? { headers[name.lowercased()]?.joined(separator: ", ") }
    var text: String { String(decoding: body, as: UTF8.self) }

    /// Sends `method path` with `headers` (Host defaults to the address) and reads until the server closes.
    static func request(
        _ method: String, _ path: String, to address: String, headers: [(String, String)] = [], body: Data = Data(),
        timeout: Double = 10
    ) throws -> HTTPExchange {
        guard let colon = address.lastIndex(of: ":"), let port = UInt16(address[address.index(after: colon)...])
        else { throw CLITestFailure("not a host:port address: \(address)") }
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw CLITestFailure("socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var limit = timeval(tv_sec: Int(timeout), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, socklen_t(MemoryLayout<timeval>.size))
        var socketAddress = sockaddr_in()
        socketAddress.sin_family = sa_family_t(AF_INET)
        socketAddress.sin_port = port.bigEndian
        socketAddress.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &socketAddress) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else { throw CLITestFailure("connect \(address): \(String(cString: strerror(errno)))") }
        var head = "\(method) \(path) HTTP/1.1\r\n"
        if !headers.contains(where: { $0.0.lowercased() == "host" }) { head += "Host: \(address)\r\n" }
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        head += "Content-Length: \(body.count)\r\nConnection: close\r\n\r\n"
        let bytes = Data(head.utf8) + body
        let sent = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == bytes.count else { throw CLITestFailure("send to \(address) wrote \(sent) bytes") }
        var answer = Data()
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = recv(fd, &buffer, buffer.count, 0)
            if count > 0 {
                answer.append(contentsOf: buffer[0..<count])
            } else if count == 0 {
                break
            } else {
                throw CLITestFailure("reading the answer from \(address): \(String(cString: strerror(errno)))")
            }
        }
        return try parse(answer)
    }

    static func parse(_ answer: Data) throws -> HTTPExchange {
        guard let end = answer.firstRange(of: Data("\r\n\r\n".utf8)) else {
            let text = String(decoding: answer, as: UTF8.self)
            throw CLITestFailure("no HTTP header block in \(answer.count) bytes: \(text)")
        }
        let lines = String(decoding: answer[..<end.lowerBound], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else {
            throw CLITestFailure("not an HTTP status line: \(lines[0])")
        }
        var headers: [String: [String]] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            let name = line[..<colon].lowercased()
            headers[name, default: []].append(line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
        }
        var body = Data(answer[end.upperBound...])
        if headers["transfer-encoding"]?.contains(where: { $0.lowercased().contains("chunked") }) == true {
            body = try dechunk(body)
        }
        return HTTPExchange(status: status, headers: headers, body: body)
    }

    static func dechunk(_ data: Data) throws -> Data {
        var out = Data()
        var rest = data[...]
        while let lineEnd = rest.firstRange(of: Data("\r\n".utf8)) {
            let sizeText = String(decoding: rest[..<lineEnd.lowerBound], as: UTF8.self)
            guard let size = Int(sizeText.split(separator: ";")[0], radix: 16) else {
                throw CLITestFailure("bad chunk size line: \(sizeText)")
            }
            if size == 0 { break }
            let start = lineEnd.upperBound
            guard rest.distance(from: start, to: rest.endIndex) >= size + 2 else {
                throw CLITestFailure("a chunk runs past the end of the answer")
            }
            let stop = rest.index(start, offsetBy: size)
            out.append(rest[start..<stop])
            rest = rest[rest.index(stop, offsetBy: 2)...]
        }
        return out
    }
}
