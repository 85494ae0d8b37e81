import ArgumentParser
import Foundation
import PlaitCore
import PlaitStore
import PlaitSync

extension Plait {
    struct Repair: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Rebuild this device's derived state (the materialized lists, checkpoints) from its changes.",
            discussion: """
                The changes (with their hash chains) and the baseline are the source; the materialized lists \
                and items that commands read, the replay position and the checkpoints are derived from them. \
                repair replays the source and rewrites all derived state in one transaction: nothing the user \
                wrote is lost, and a crash midway leaves the store as it was. Safe to run at any time, also \
                while the agent runs (it reloads).

                Damaged derived state is also rebuilt automatically when a command meets it (with a warning); \
                run repair when `plait doctor` reports that the materialized state does not match a replay of \
                the stored changes, or that a checkpoint is damaged. Exits 0 once the rebuild is committed.
                """)

        @OptionGroup var global: GlobalOptions

        @Flag(help: "Print the result as JSON.") var json = false

        func run() throws {
            // Not `openHome()`: damage met on opening is part of this report, not a separate warning.
            let home = try Home.open(at: global.homePath, config: try global.loadConfig())
            let found = RepairsFound()
            home.replica.onDerivedStateRepair { found.append($0) }
            let report = try PlaitSync.Repair.run(home: home, foundOnOpen: found.all)
            let derived = report.derived
            let previous: String
            let verdict: String
            if let problem = derived.problem {
                previous = "damaged"
                verdict = "it was damaged (\(problem))"
            } else if derived.matched {
                previous = "matched"
                verdict = "it already matched the replay; nothing visible changed"
            } else {
                previous = "differed"
                verdict = "it differed from the replay; it now shows what the changes say"
            }
            let source = (derived.fromBaseline ? "the baseline and " : "") + "\(derived.changes) stored changes"
            if json {
                printJSON([
                    "home": home.path,
                    "materialized": [
                        "previous": previous, "problem": derived.problem ?? NSNull(), "changes": derived.changes,
                        "from_baseline": derived.fromBaseline, "lists": derived.lists, "items": derived.items,
                        "digest": derived.digest.hex,
                    ] as [String: Any],
                    "checkpoints": ["dropped": derived.checkpointsDropped, "written": derived.checkpointsWritten],
                    "found_on_open": report.foundOnOpen.map(\.description),
                ] as [String: Any])
                return
            }
            print("plait repair: \(home.path)")
            print("  rebuilt the materialized state from \(source): \(derived.lists) lists, \(derived.items) items, "
                + "digest \(derived.digest.hex.prefix(16))")
            print("  \(verdict)")
            for repair in report.foundOnOpen where !isTheRebuild(repair, derived) { print("  found: \(repair)") }
            print("  checkpoints: dropped \(derived.checkpointsDropped), wrote \(derived.checkpointsWritten)")
        }

        /// The rebuild on opening reports the same damage the repair found; say it once.
        private func isTheRebuild(_ repair: DerivedStateRepair, _ derived: Replica.DerivedStateRebuild) -> Bool {
            if case let .rebuilt(problem, _, _) = repair { return problem == derived.problem }
            return false
        }
    }
}

/// Repairs the replica reports while `plait repair` opens the home (its handler may run on any thread).
private final class RepairsFound: @unchecked Sendable {
    private let lock = NSLock()
    private var repairs: [DerivedStateRepair] = []

    func append(_ repair: DerivedStateRepair) { lock.withLock { repairs.append(repair) } }
    var all: [DerivedStateRepair] { lock.withLock { repairs } }
}
