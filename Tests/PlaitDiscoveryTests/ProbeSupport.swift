import Foundation
import PlaitDiscovery
import PlaitNetnsSupport
import Testing

/// The built `plait-discovery-probe`, found next to the running test binary (SwiftPM puts executables and
/// the test bundle in the same products directory); `PLAIT_DISCOVERY_PROBE` overrides the search.
///
/// Discovery runs in-process, but a process is in one network namespace only: each test host runs its
/// own probe, which drives one `Discovery` and prints its events as JSON lines.
enum ProbeExecutable {
    static let path: String? = locate()

    static func locate() -> String? {
        if let explicit = ProcessInfo.processInfo.environment["PLAIT_DISCOVERY_PROBE"], !explicit.isEmpty {
            return explicit
        }
        var starts: [URL] = []
        if let main = Bundle.main.executableURL { starts.append(main) }
        if let first = CommandLine.arguments.first { starts.append(URL(fileURLWithPath: first)) }
        starts.append(Bundle.main.bundleURL)
        for start in starts {
            var directory = start.standardizedFileURL.resolvingSymlinksInPath().deletingLastPathComponent()
            for _ in 0..<5 {
                let candidate = directory.appendingPathComponent("plait-discovery-probe").path
                if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
                directory = directory.deletingLastPathComponent()
            }
        }
        return nil
    }

    /// Why the tests that need the probe cannot run, or nil.
    static var missingReason: String? {
        path == nil
            ? "plait-discovery-probe is not built next to the tests (swift build --build-tests), nor named by "
                + "PLAIT_DISCOVERY_PROBE"
            : nil
    }
}

/// Why the LAN tests are skipped here, or nil: the harness's reason, or a missing probe.
let lanSkipReason: String? = NetnsLAN.skipReason ?? ProbeExecutable.missingReason

/// One line a probe printed.
struct ProbeEvent: Decodable, CustomStringConvertible {
    var time: Double
    var event: String
    var state: String?
    var warning: String?
    var name: String?
    var service: DiscoveredService?

    var description: String {
        var text = event
        if let state { text += " \(state)" }
        if let name { text += " '\(name)'" }
        if let service { text += " \(service.addresses) port \(service.port) txt \(service.txt)" }
        if let warning { text += " (\(warning))" }
        return text
    }
}

struct ProbeFailure: Error, CustomStringConvertible {
    let description: String
}

extension HostProcess {
    /// Waits for the next event of one of `kinds` (about `name`, if given) that satisfies `predicate`,
    /// skipping others.
    @discardableResult
    func next(
        _ kinds: String..., name: String? = nil, timeout: Duration = .seconds(20),
        where predicate: (ProbeEvent) -> Bool = { _ in true }
    ) throws -> ProbeEvent {
        var matched: ProbeEvent?
        _ = try nextLine(timeout: timeout) { line in
            guard let event = try? JSONDecoder().decode(ProbeEvent.self, from: Data(line.utf8)),
                kinds.contains(event.event), name == nil || event.name == name, predicate(event)
            else { return false }
            matched = event
            return true
        }
        guard let matched else { throw ProbeFailure(description: "unreachable: a line matched but did not decode") }
        return matched
    }

    /// Waits for an event of one of `kinds` (about `name`, if given) satisfying `predicate` among everything
    /// printed, from the first line, whatever `next` consumed: for events whose order relative to others
    /// does not matter.
    @discardableResult
    func first(
        _ kinds: String..., name: String? = nil, timeout: Duration = .seconds(20),
        where predicate: (ProbeEvent) -> Bool = { _ in true }
    ) throws -> ProbeEvent {
        var matched: ProbeEvent?
        _ = try waitForLine(on: .stdout, timeout: timeout) { line in
            guard let event = try? JSONDecoder().decode(ProbeEvent.self, from: Data(line.utf8)),
                kinds.contains(event.event), name == nil || event.name == name, predicate(event)
            else { return false }
            matched = event
            return true
        }
        guard let matched else { throw ProbeFailure(description: "unreachable: a line matched but did not decode") }
        return matched
    }

    /// Every event printed so far (consumed or not).
    var events: [ProbeEvent] {
        lines().compactMap { try? JSONDecoder().decode(ProbeEvent.self, from: Data($0.utf8)) }
    }
}

extension NetnsLAN {
    /// Starts a probe in `host`: publishing `publish` (with `sum`) if given, browsing if `browse`.
    func probe(
        in host: NetnsHost, publish name: String? = nil, port: UInt16 = 7400, tag: String = "XCUETIOSOTTFEAFS",
        sum: String = "S1", browse: Bool = true
    ) throws -> HostProcess {
        var arguments = [ProbeExecutable.path ?? "plait-discovery-probe"]
        if let name {
            arguments += ["--publish", name, "--port", String(port), "--tag", tag, "--proto", "1", "--sum", sum]
        }
        if browse { arguments.append("--browse") }
        return try spawn(arguments, in: host)
    }
}

/// Seconds, to the millisecond, for the log.
func seconds(_ value: Double) -> String {
    String(format: "%.3f s", value)
}
