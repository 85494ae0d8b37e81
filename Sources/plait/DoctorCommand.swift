import ArgumentParser
import Foundation
import PlaitCommands
import PlaitOutput
import PlaitSync
import PlaitTLS

extension Plait {
    struct Doctor: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "doctor",
            abstract: "Check this device: certificate, store, listen address, avahi-daemon, paired peers.",
            discussion: """
                Each check prints ok, WARN or FAIL; every failure says what to do. Nothing is written to the \
                home. Exits 0 when nothing failed (warnings allowed), 1 otherwise.

                Checks: the key and certificate load and match (and the key file is private); the store \
                opens and passes SQLite's integrity_check; the materialized state equals a replay of the \
                baseline and the stored changes (else: run `plait repair`), the baseline decodes, and the \
                stored checkpoints equal the replay at their changes; the agent's listen address is free (or held by \
                this home's own agent); avahi-daemon answers (at most 3 s; without it a warning, not a failure: \
                known addresses and static peers still sync, and `plait pair` works with --listen/--connect or \
                --trust; not checked when discovery.enabled = false); each paired peer with a known address is \
                reachable over TLS, is the device it should be, and has this device paired too.
                """)

        @OptionGroup var global: GlobalOptions

        @Option(help: ArgumentHelp("The listen address to check (default: agent.listen from the config).", valueName: "host:port"))
        var listen: String?

        @Option(parsing: .unconditional, help: "Seconds to wait for each paired peer.") var timeout: Double = 3

        @Flag(help: "Print the result as JSON.") var json = false

        func validate() throws {
            if !(timeout > 0 && timeout <= 600) { throw ValidationError("--timeout must be between 0 and 600 seconds") }
        }

        func run() throws {
            let config = try global.loadConfig()
            let path = global.homePath
            guard FileManager.default.fileExists(atPath: path) else {
                throw PlaitError.noHome(path: path)
            }
            let address = try PeerAddress(parsing: listen ?? config.listen, allowingPortZero: true)
            let checks = PlaitSync.Doctor.run(
                homePath: path, config: config, listen: address, peerTimeout: .milliseconds(Int(timeout * 1000)))
            if json {
                try printJSON(ReadOutputs.doctor(checks, home: path))
            } else {
                print("plait doctor: \(path)")
                for check in checks {
                    let mark = switch check.status {
                    case .ok: "ok  "
                    case .warning: "WARN"
                    case .failed: "FAIL"
                    }
                    print("  \(mark)  \(check.name.terminalSafe): \(check.detail.terminalSafe)")
                    if let advice = check.advice, check.status != .ok { print("        → \(advice.terminalSafe)") }
                }
            }
            if checks.contains(where: { $0.status == .failed }) { throw ExitCode(1) }
        }
    }
}
