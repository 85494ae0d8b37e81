import Dispatch
import Foundation
import Logging
import PlaitDiscovery

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A test helper, shipped in no product: runs one `Discovery` inside a test host (a network namespace)
/// and prints every event as one JSON line on standard output, with the wall-clock time it saw it.
///
///     plait-discovery-probe [--publish NAME --port N --tag T --proto P --sum S [--pair]] [--browse]
///
/// Standard input takes one command a line: `sum VALUE` and `pair on|off` update the TXT record,
/// `unpublish` withdraws the service, `quit` (or end of input, or SIGTERM) closes discovery and exits 0.
/// Logs go to standard error (`PROBE_LOG=debug` for more).
@main
struct Probe {
    static func main() async {
        let options: Options
        do {
            options = try Options(CommandLine.arguments.dropFirst())
        } catch {
            FileHandle.standardError.write(Data("plait-discovery-probe: \(error)\n".utf8))
            exit(2)
        }
        let level = ProcessInfo.processInfo.environment["PROBE_LOG"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        LoggingSystem.bootstrap { label in
            var handler = StreamLogHandler.standardError(label: label)
            handler.logLevel = level
            return handler
        }
        let discovery: Discovery
        do {
            discovery = try Discovery(logger: Logger(label: "plait.discovery"), retryDelay: .milliseconds(500))
        } catch {
            FileHandle.standardError.write(Data("plait-discovery-probe: \(error)\n".utf8))
            exit(1)
        }
        if let announcement = options.announcement {
            emit(ProbeLine(event: "publishing", name: announcement.name))
            do { try discovery.publish(announcement) } catch { fail(error) }
        }
        Commands.start(discovery, txt: options.announcement?.txt)
        if options.browse { discovery.startBrowsing() }

        let terminate = closeOnSIGTERM(discovery)
        defer { terminate.cancel() }

        for await event in discovery.events {
            switch event {
            case .state(let state): emit(ProbeLine(event: "state", state: state))
            case .published(let name): emit(ProbeLine(event: "published", name: name))
            case .found(let service): emit(ProbeLine(event: "found", name: service.name, service: service))
            case .updated(let service): emit(ProbeLine(event: "updated", name: service.name, service: service))
            case .removed(let name): emit(ProbeLine(event: "removed", name: name))
            }
        }
        emit(ProbeLine(event: "exit"))
    }

    static func fail(_ error: any Error) -> Never {
        FileHandle.standardError.write(Data("plait-discovery-probe: \(error)\n".utf8))
        exit(1)
    }
}

/// Closes `discovery` on SIGTERM. A file-scope function, not a closure written in `main`: that one would
/// be main-actor isolated, and Dispatch runs the handler on one of its threads, where Swift's isolation
/// check stops the process with SIGILL.
func closeOnSIGTERM(_ discovery: Discovery) -> any DispatchSourceSignal {
    signal(SIGTERM, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: SIGTERM, queue: .global())
    source.setEventHandler { discovery.close() }
    source.resume()
    return source
}

/// One line of output.
struct ProbeLine: Encodable {
    /// Seconds since 1970 (wall clock, shared by every probe on the machine).
    var time = Date().timeIntervalSince1970
    var event: String
    var state: String?
    var warning: String?
    var name: String?
    var service: DiscoveredService?

    init(event: String, state: DiscoveryState? = nil, name: String? = nil, service: DiscoveredService? = nil) {
        self.event = event
        self.name = name
        self.service = service
        switch state {
        case .starting?: self.state = "starting"
        case .running?: self.state = "running"
        case .unavailable(let warning)?:
            self.state = "unavailable"
            self.warning = warning
        case .closed?: self.state = "closed"
        case nil: break
        }
    }
}

private let output = NSLock()

/// Writes one JSON line straight to file descriptor 1 (no buffering: a test reads it at once).
func emit(_ line: ProbeLine) {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
    guard var data = try? encoder.encode(line) else { return }
    data.append(UInt8(ascii: "\n"))
    output.lock()
    defer { output.unlock() }
    FileHandle.standardOutput.write(data)
}

/// Reads commands from standard input on a thread of its own (never Avahi's).
enum Commands {
    static func start(_ discovery: Discovery, txt initial: TXTRecord?) {
        let thread = Thread {
            var txt = initial
            while let line = readLine() {
                let words = line.split(separator: " ", maxSplits: 1).map(String.init)
                switch (words.first, words.count > 1 ? words[1] : nil) {
                case ("quit", nil):
                    discovery.close()
                    return
                case ("unpublish", nil):
                    discovery.unpublish()
                case ("sum", let value?) where txt != nil:
                    txt?.sum = value
                case ("pair", let value?) where txt != nil:
                    txt?.pairing = value == "on"
                default:
                    FileHandle.standardError.write(Data("plait-discovery-probe: unknown command '\(line)'\n".utf8))
                    continue
                }
                if let txt {
                    do { try discovery.updateTXT(txt) } catch { Probe.fail(error) }
                }
            }
            discovery.close()
        }
        thread.start()
    }
}

struct Options {
    var announcement: Announcement?
    var browse = false

    struct UsageError: Error, CustomStringConvertible {
        let description: String
    }

    init(_ arguments: ArraySlice<String>) throws {
        var values: [String: String] = [:]
        var pairing = false
        var rest = arguments
        while let argument = rest.popFirst() {
            switch argument {
            case "--browse": browse = true
            case "--pair": pairing = true
            case "--publish", "--port", "--tag", "--proto", "--sum":
                guard let value = rest.popFirst() else { throw UsageError(description: "\(argument) needs a value") }
                values[argument] = value
            default: throw UsageError(description: "unknown argument \(argument)")
            }
        }
        if let name = values["--publish"] {
            guard let port = values["--port"].flatMap(UInt16.init) else {
                throw UsageError(description: "--publish needs --port N")
            }
            let txt = TXTRecord(
                tag: values["--tag"] ?? "", proto: values["--proto"].flatMap(Int.init) ?? 2, sum: values["--sum"] ?? "",
                pairing: pairing)
            announcement = Announcement(name: name, port: port, txt: txt)
        }
    }
}
