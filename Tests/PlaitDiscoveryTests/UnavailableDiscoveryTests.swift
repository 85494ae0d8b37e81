import Foundation
import PlaitNetnsSupport
import Testing

/// Without any D-Bus system bus (a container, CI): a warning a user understands, no crash, a clean exit.
/// Runs in this process's own namespace with a bus address that leads nowhere, so no daemon of the
/// machine's is ever reached.
@Suite("Discovery without avahi-daemon")
struct UnavailableDiscoveryTests {
    @Test(.disabled(if: ProbeExecutable.missingReason != nil, Comment(rawValue: ProbeExecutable.missingReason ?? "")))
    func withoutDBusDiscoveryIsUnavailableAndSaysWhy() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("plait-no-bus-\(UUID())").path
        let probe = try HostProcess(
            label: "probe without a bus", executable: try #require(ProbeExecutable.path),
            arguments: ["--publish", "alpha", "--port", "7400", "--tag", "T", "--sum", "S", "--browse"],
            environment: [
                "DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(directory)/no-such-socket", "PATH": "/usr/bin:/bin",
                "PROBE_LOG": "debug",
            ])
        let state = try probe.next("state")
        #expect(state.state == "unavailable")
        let warning = try #require(state.warning)
        #expect(warning.hasPrefix("avahi-daemon cannot be reached"), "\(warning)")
        #expect(warning.hasSuffix("discovery is off, static peers still work"), "\(warning)")
        #expect(!warning.contains("\n"))
        // It keeps retrying (every 0.5 s in the probe), quietly: one warning however long it waits.
        var attempts = 0
        _ = try probe.waitForLine(on: .stderr, timeout: .seconds(10)) { line in
            if line.contains("connecting to avahi-daemon") { attempts += 1 }
            return attempts == 3
        }
        probe.send("quit")
        try probe.next("exit")
        #expect(probe.waitForExit(timeout: .seconds(10)) == 0, "\(probe.transcript)")
        #expect(probe.lines(.stderr).filter { $0.contains(" warning ") }.count == 1, "\(probe.transcript)")
    }
}
