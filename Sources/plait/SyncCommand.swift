import ArgumentParser
import Foundation
import PlaitCore
import PlaitStore
import PlaitSync

extension Plait {
    struct Sync: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Sync with paired peers now, both ways, and print what moved.",
            discussion: """
                Connects over TLS to every paired peer with a known address (or to the --peer addresses \
                given), pulls what this device lacks and sends what the peer lacks. Exits 0 only if every \
                peer it tried succeeded; each failure gets a line saying why.
                """)

        @OptionGroup var global: GlobalOptions

        @Option(name: .customLong("peer"), help: ArgumentHelp("Sync with this address (repeatable).", valueName: "host:port"))
        var peers: [String] = []

        @Option(help: "Seconds to wait for a peer that stops answering.")
        var timeout: Int = 30

        @Flag(help: "Print the result as JSON.") var json = false

        func validate() throws {
            if timeout < 1 { throw ValidationError("--timeout must be at least 1 second") }
        }

        func run() throws {
            let home = try global.openHome()
            var addresses = try peers.map { try PeerAddress(parsing: $0) }
            if addresses.isEmpty {
                addresses = try home.store.peers().compactMap { $0.address }.map { try PeerAddress(parsing: $0) }
            }
            guard !addresses.isEmpty else {
                throw PlaitError.usage(
                    "no peer to sync with: pair with `plait pair --connect HOST:PORT` (or `--trust DEVICE-ID "
                        + "--address HOST:PORT`), or give --peer HOST:PORT.")
            }
            let terminal = isatty(STDOUT_FILENO) != 0 && !json
            var outcomes: [PeerSyncOutcome] = []
            for address in addresses {
                var progress: (@Sendable (Int) -> Void)?
                if terminal {
                    let label = address.description
                    let total = PulledCounter()
                    progress = { count in
                        let sum = total.add(count)
                        FileHandle.standardError.write(Data("\r\(label): pulled \(sum) changes…".utf8))
                    }
                }
                let outcome = home.syncOnce(with: address, timeout: .seconds(timeout), onPulled: progress)
                if terminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
                outcomes.append(outcome)
                if !json {
                    if outcome.succeeded {
                        print(Self.line(outcome))
                    } else {
                        FileHandle.standardError.write(Data((Self.line(outcome) + "\n").utf8))
                    }
                }
            }
            if json {
                printJSON([
                    "peers": outcomes.map { outcome -> [String: Any] in
                        [
                            "address": outcome.address.description, "device": outcome.deviceID ?? NSNull(),
                            "name": outcome.name ?? NSNull(), "ok": outcome.succeeded,
                            "error": outcome.failure ?? NSNull(), "pulled": outcome.result?.pulled ?? 0,
                            "sent": outcome.result?.sent ?? 0,
                            "bytes_received": outcome.result?.bytesReceived ?? 0,
                            "bytes_sent": outcome.result?.bytesSent ?? 0,
                            "baselines_pulled": outcome.result?.baselinesPulled ?? 0,
                            "baselines_sent": outcome.result?.baselinesSent ?? 0,
                            "summary": outcome.result?.finalSummary.description ?? NSNull(),
                            "forked": outcome.result?.forkedTimelines.map(\.description) ?? [],
                        ]
                    }
                ])
            }
            if outcomes.contains(where: { !$0.succeeded }) { throw ExitCode(1) }
        }

        static func line(_ outcome: PeerSyncOutcome) -> String {
            guard let result = outcome.result, outcome.succeeded else {
                return "\(outcome.address): failed: \(outcome.failure ?? "unknown error")"
            }
            let pulledBaseline = result.baselinesPulled > 0 ? " and its baseline" : ""
            let sentBaseline = result.baselinesSent > 0 ? " and this device's baseline" : ""
            var text = "\(result.peerName) (\(outcome.address)): pulled \(result.pulled) changes\(pulledBaseline), "
                + "sent \(result.sent)\(sentBaseline), "
                + "now at \(result.finalSummary.isEmpty ? "(empty)" : result.finalSummary.description)"
            for fork in result.forkedTimelines { text += "\n  WARNING: \(fork)" }
            if let change = result.timelineSwitch {
                text += "\n  this home was stale (restored from a copy): now authoring on timeline \(change.new)"
            }
            return text
        }
    }
}

/// The running total of changes pulled from one peer, for the progress line (called on the session's thread).
final class PulledCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var total = 0

    func add(_ count: Int) -> Int {
        lock.withLock {
            total += count
            return total
        }
    }
}
