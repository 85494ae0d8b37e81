import ArgumentParser
import Foundation
import PlaitCore
import PlaitStore
import PlaitOutput
import PlaitSync

extension Plait {
    struct Repair: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "repair",
            abstract: "Set damaged changes aside, rebuild derived state from the changes, re-pull what was set aside.",
            discussion: """
                The changes (with their hash chains) and the baseline are the source; the materialized lists \
                and items that commands read, the replay position and the checkpoints are derived from them. \
                repair replays the source and rewrites all derived state in one transaction: nothing the user \
                wrote is lost, and a crash midway leaves the store as it was. Safe to run at any time, also \
                while the agent runs (it reloads).

                Before that, every stored change whose hash does not continue its timeline's chain (bit rot, an \
                edited row) is set aside (quarantined, never deleted) with the rest of its timeline; afterwards, if \
                anything is set aside, repair syncs with every paired device that has a known address, which pulls \
                good copies back. Damaged derived state is also rebuilt automatically when a command meets it (with \
                a warning), and the agent sets damaged changes aside when it starts. Run repair when `plait doctor` \
                reports damaged changes, that the materialized state does not match a replay of the stored \
                changes, or that a checkpoint is damaged.

                Last, items and lists that only this device's kept-aside changes created (a home restored from a \
                backup whose edits a peer's baseline could not check; `plait doctor` lists them) are made again as \
                new changes, with the same IDs, and reach the peers at the next sync. Exits 0 once everything is \
                healed; 1 if changes are still set aside because no reachable device holds them, or such items \
                could not be made again.
                """)

        @OptionGroup var global: GlobalOptions

        @Flag(help: "Print the result as JSON.") var json = false

        func run() throws {
            // Not `openHome()`: damage met on opening is part of this report, not a separate warning.
            let home = try Home.open(at: global.homePath, config: try global.loadConfig())
            let found = RepairsFound()
            home.replica.onDerivedStateRepair { found.append($0) }
            GlobalOptions.sayCopyNoticed(home)
            let report = try PlaitSync.Repair.run(home: home, foundOnOpen: found.all)
            let derived = report.derived
            let previous: String
            let verdict: String
            if let problem = derived.problem {
                previous = "damaged"
                verdict = "it was damaged (\(problem))"
            } else if derived.matched {
                previous = "matched"
                verdict = "it already matched the replay"
            } else {
                previous = "differed"
                verdict = "it differed from the replay; it now shows what the changes say"
            }
            // Against what commands showed before the repair: setting changes aside hides what they made, which
            // the comparison above (made after the set-aside) cannot see.
            let before = report.before
            let after = report.after
            let shown: String
            if before == after {
                shown = "nothing visible changed"
            } else {
                let cause = report.setAside.isEmpty ? "what shows changed" : "setting changes aside changed what shows"
                shown = "\(cause): \(before.lists) lists and \(before.items) items before, \(after.lists) lists and "
                    + "\(after.items) items now"
            }
            let source = (derived.fromBaseline ? "the baseline and " : "") + "\(derived.changes) stored changes"
            if json {
                try printJSON(
                    RepairOutput(
                        checkpoints: .init(dropped: derived.checkpointsDropped, written: derived.checkpointsWritten),
                        foundOnOpen: report.foundOnOpen.map(\.description),
                        headRecordsMended: report.headRecordsMended.map(\.description), home: home.path,
                        indexesRebuilt: report.indexesRebuilt,
                        keptAsideMadeAgain: report.keptAside.brought.objects.map {
                            "\($0.kind.rawValue) '\($0.text)' (\($0.ref))"
                        },
                        keptAsideProblem: report.keptAside.failure,
                        materialized: .init(
                            changes: derived.changes, digest: derived.digest.hex, fromBaseline: derived.fromBaseline,
                            items: derived.items, lists: derived.lists, previous: previous, problem: derived.problem),
                        pulls: report.pulls.map { pull in
                            .init(
                                address: pull.address.description, error: pull.failure, ok: pull.failure == nil,
                                pulled: pull.result?.pulled ?? 0)
                        },
                        setAside: report.setAside.map(\.description),
                        stillSetAside: report.stillSetAside.map {
                            "\($0.timeline):\($0.seqs.lowerBound)-\($0.seqs.upperBound)"
                        },
                        shownBefore: Self.output(before), shownAfter: Self.output(after)))
                if !report.stillSetAside.isEmpty || report.keptAside.failure != nil { throw ExitCode(1) }
                return
            }
            print("plait repair: \(home.path)")
            if !report.indexesRebuilt.isEmpty {
                print("  rebuilt the store's indexes from its rows, which are sound (SQLite's integrity check: "
                    + report.indexesRebuilt.prefix(3).joined(separator: "; ").terminalSafe + ")")
            }
            for mended in report.headRecordsMended {
                print("  rewrote a damaged head record from its change: \(mended)")
            }
            print("  rebuilt the materialized state from \(source): \(derived.lists) lists, \(derived.items) items, "
                + "digest \(derived.digest.hex.prefix(16))")
            print("  \(verdict); \(shown)")
            for repair in report.foundOnOpen where !isTheRebuild(repair, derived) { print("  found: \(repair)") }
            print("  checkpoints: dropped \(derived.checkpointsDropped), wrote \(derived.checkpointsWritten)")
            for damage in report.setAside {
                print("  set aside \(damage): its hash does not continue the chain of its timeline")
            }
            for pull in report.pulls {
                if let failure = pull.failure {
                    print("  could not pull from \(pull.address): \(failure.terminalSafe)")
                } else {
                    print("  pulled \(pull.result?.pulled ?? 0) changes from \(pull.address)")
                }
            }
            report.keptAside.print(indent: "  ", failurePrefix: "plait repair: ")
            let keptAsideFailed = report.keptAside.failure != nil
            if report.stillSetAside.isEmpty {
                if !report.setAside.isEmpty || !report.pulls.isEmpty { print("  nothing is set aside any more") }
            } else {
                for range in report.stillSetAside {
                    let count = range.seqs.upperBound - range.seqs.lowerBound + 1
                    FileHandle.standardError.write(
                        Data(
                            ("plait repair: \(count) changes (\(range.timeline):\(range.seqs.lowerBound)-"
                                + "\(range.seqs.upperBound)) are still set aside: no reachable paired device holds "
                                + "them. Start the agents of your other devices and run repair again.\n").utf8))
                }
                throw ExitCode(1)
            }
            if keptAsideFailed { throw ExitCode(1) }
        }

        static func output(_ shown: PlaitSync.Repair.Shown) -> RepairOutput.Shown {
            RepairOutput.Shown(digest: shown.digest.hex, items: shown.items, lists: shown.lists)
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
