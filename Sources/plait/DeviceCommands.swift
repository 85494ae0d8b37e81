import ArgumentParser
import Foundation
import PlaitAPI
import PlaitCommands
import PlaitCore
import PlaitStore
import PlaitOutput
import PlaitSync

extension Plait {
    struct Init: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "init",
            abstract: "Create this device: a key pair, a certificate, the store and a first timeline.",
            discussion: """
                Refuses to touch an existing device home. A home that holds its key.pem and cert.pem but no \
                store (a damaged store moved aside) gets a new, empty store and keeps its identity: the same \
                Device ID, which the other devices still trust. Pair them again here (`plait pair --trust ID`: \
                the devices this one trusts were listed in the old store), then `plait sync` brings the lists back.
                """)

        @OptionGroup var global: GlobalOptions

        @Option(help: "A name for this device, shown to peers (default: the host name).")
        var name: String?

        @Flag(help: "Print the result as JSON.")
        var json = false

        func validate() throws {
            // Peers refuse a Hello whose name holds a control character: such a device could never sync.
            if let name, name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) {
                throw ValidationError(
                    "a device name cannot hold control characters ('\(name.terminalSafe)'): peers would refuse it")
            }
        }

        func run() throws {
            let config = try global.loadConfig()
            let name = self.name ?? ProcessInfo.processInfo.hostName
            // An interrupted identity (a key beside an empty certificate) is moved aside and a new one made.
            let interrupted = Home.holdsInterruptedIdentity(at: global.homePath)
            let keptIdentity = Home.keepsIdentity(at: global.homePath) && !interrupted
            let home = try Home.create(at: global.homePath, name: name, config: config)
            try APIAuth.ensureToken(homePath: home.path)
            let timeline = try home.store.ownTimeline()
            if json {
                try printJSON(
                    InitOutput(
                        device: try home.identity.deviceID.description, home: home.path, name: name,
                        timeline: timeline.description))
            } else if keptIdentity {
                print("Created a new, empty store in \(home.path), keeping this home's key and certificate: the same")
                print("Device ID, which your other devices still trust. The list of devices this one trusts was in")
                print("the old store: pair them again here (`plait pair --trust ID`), then `plait sync` brings the")
                print("lists back.")
            } else {
                if interrupted {
                    print("This home held a key beside an empty cert.pem (an interrupted `plait init`): both were "
                        + "moved to \(Home.interruptedIdentityPrefix)… in the home, and a new key made.")
                }
                print("Created device '\(name.terminalSafe)' in \(home.path)")
                print("timeline \(timeline)")
                print("Device ID (give it to the devices you pair with):")
                print(try home.identity.deviceID.description)
            }
        }
    }

    struct Id: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "id",
            abstract: "Print this device's ID (on the last line), to pair other devices with it.")

        @OptionGroup var global: GlobalOptions

        @Flag(help: "Print the result as JSON.")
        var json = false

        func run() throws {
            let home = try global.openHome()
            if json {
                try printJSON(IdOutput(device: try home.identity.deviceID.description, name: home.deviceName))
            } else {
                print(home.deviceName.terminalSafe)
                print(try home.identity.deviceID.description)
            }
        }
    }

    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "status",
            abstract: "Show this device's timeline, summary, state digest and stored changes.")

        @OptionGroup var global: GlobalOptions

        @Flag(help: "Print the result as JSON.")
        var json = false

        func run() throws {
            // With an agent on the home, it answers from its memory (AgentClient+Commands.swift).
            guard let status = try global.readOutput("/api/status", json: json, local: ReadOutputs.status) else {
                return
            }
            let name = status.name.terminalSafe
            // A damaged certificate stops networking, not the status of the lists: say so in its place.
            if let device = status.device {
                print("device    \(device) (\(name))")
            } else {
                print("device    unavailable: \((status.deviceProblem ?? "").terminalSafe) (\(name))")
            }
            print("home      \(status.home)")
            print("timeline  \(status.timeline)")
            print("summary   \(status.summary.isEmpty ? "(empty)" : status.summary)")
            print("digest    \(status.digest)")
            print("changes   \(status.changes) stored" + (status.baseline.map { ", baseline \($0)" } ?? ", no baseline"))
            print("data      \(status.lists) lists, \(status.items) items")
            if status.unknown > 0 {
                // A kind this build does not know: a newer plait wrote it, or the row is damaged (its hash, not
                // checked here, tells: `plait doctor`).
                print("unknown   \(status.unknown) changes of kinds this plait does not know: from a newer plait, or "
                    + "damaged (`plait doctor` checks); kept and forwarded, not shown")
            }
            for sentence in status.copied { print("alarm     \(sentence.terminalSafe)") }
        }
    }

    struct Rejoin: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "rejoin",
            abstract: "End this device's timeline and start a new one, re-sending the current state.",
            discussion: """
                Appends `timeline.end` to the old timeline, so it no longer holds compaction back, starts a \
                new timeline and re-emits every list and item as create changes; other devices collapse the \
                duplicates.

                --new-key: use it on one of two copies of a home, when plait reports "home copied" (the home \
                was copied with cp, restored from a backup while the original lives on, or cloned with a \
                disk image). Both copies then hold the same key and Device ID; this gives this copy a key and \
                Device ID of its own. The old key and certificate are moved to retired/<old ID>/ in the home \
                with a statement, signed by the old key and the new one, that names the new Device ID; a new \
                timeline is started (the old one is ended only if no other copy may be writing on it). Paired \
                devices learn the new ID by themselves at the next sync with them (`plait sync` or the agent): \
                this device connects to each once more with its old identity and hands over the statement, and \
                each trusts the new ID under the old one's name. Once all have been told, the retired identity is \
                no longer used; its files stay in retired/ (keep them private). Stop `plait agent` on this \
                home first.
                """)

        @OptionGroup var global: GlobalOptions

        @Flag(help: "Also make a new key and Device ID for this device (after \"home copied\"; see below).")
        var newKey = false

        /// Items that only changes kept aside by a peer's baseline had made wait for a timeline to be made again on
        /// (an unsigned one that may go on elsewhere stops authoring): now there is one (bad-luck tester 2026-11-25,
        /// H3).
        static func bringBackKeptAside(_ home: Home) {
            home.bringBackKeptAside().print(failurePrefix: "warning: ")
        }

        func run() throws {
            let home = try global.openHome()
            guard newKey else {
                let result = try home.rejoin()
                if let keySwap = result.keySwap { print(keySwap) }
                if !result.setAside.isEmpty {
                    // A peer holds another history of it inside its baseline: set aside, so the peer's is taken.
                    let names = result.setAside.map(\.description).joined(separator: ", ")
                    print("set aside this device's history of timeline \(names) (a peer holds another history of it in "
                        + "its baseline: this home was restored from a backup, or copied; nothing is deleted, `plait "
                        + "doctor` lists it); now on \(result.new); re-sent \(result.emitted) changes, and the next "
                        + "sync takes the peer's history")
                } else if result.ended {
                    print("ended timeline \(result.old); now on \(result.new); re-sent \(result.emitted) changes")
                } else {
                    print("left timeline \(result.old) without an end (it may go on elsewhere: another copy of this "
                        + "home, or the history after a restored backup; or its key is no longer in this home); now on "
                        + "\(result.new); re-sent \(result.emitted) changes")
                }
                Self.bringBackKeptAside(home)
                return
            }
            let rekeyed = try home.rejoinWithNewKey()
            if rekeyed.endedOldTimeline {
                print("ended timeline \(rekeyed.oldTimeline); now on \(rekeyed.newTimeline); "
                    + "re-sent \(rekeyed.emitted) changes")
            } else {
                print("left timeline \(rekeyed.oldTimeline) as it is (another copy of this home may be writing "
                    + "on it); now on \(rekeyed.newTimeline); re-sent \(rekeyed.emitted) changes")
            }
            Self.bringBackKeptAside(home)
            print("old Device ID \(rekeyed.oldDeviceID) retired to \(rekeyed.retiredPath)")
            let count = rekeyed.peersToTell.count
            print(count == 0
                ? "no paired device to tell"
                : "\(count) paired device\(count == 1 ? "" : "s") will learn the new ID at the next sync")
            print("Device ID (new):")
            print(rekeyed.newDeviceID.description)
        }
    }

    struct Compact: ParsableCommand {
        /// "1 change stays", "3 changes stay" (it read "1 changes stay": bad-luck tester 2026-11-25, H13).
        static func stay(_ count: Int) -> String { count == 1 ? "1 change stays" : "\(count) changes stay" }

        static let configuration = CommandConfiguration(
            commandName: "compact",
            abstract: "Fold history into the baseline, up to the cut-off every timeline has passed.",
            discussion: """
                The cut-off is the smallest Lamport time among the timelines' head changes (ended timelines \
                do not count, nor superseded ones held to where they were superseded, nor signed timelines of \
                authors nobody here paired that were quiet longer than compaction.peer_grace_days), lowered \
                below the earliest change this build cannot interpret. Every change at or below it is folded; \
                the state does not change.
                """)

        @OptionGroup var global: GlobalOptions

        @Flag(help: "Print the result as JSON.")
        var json = false

        func run() throws {
            let home = try global.openHome()
            let graceMs = Int64(home.config.peerGraceDays) * 24 * 3600 * 1000
            let report = try home.replica.compact(authors: try home.authorGrace(graceMs: graceMs))
            if json {
                try printJSON(
                    CompactOutput(
                        baseline: report.baseline.map { $0.summary.description },
                        cutoff: report.cutOff.map { Int($0.lamport) }, folded: report.folded,
                        limit: report.cutOff?.description, remaining: report.remaining))
                return
            }
            guard let cut = report.cutOff else {
                print("nothing to compact: no changes yet")
                return
            }
            print("cut-off \(cut.lamport), set by \(cut)")
            if report.folded == 0 {
                print("nothing new to fold; \(Self.stay(report.remaining))")
            } else {
                print("folded \(report.folded) changes into the baseline (now \(report.baseline!.summary)); "
                    + Self.stay(report.remaining))
            }
        }
    }
}

extension Home.KeptAsideOutcome {
    /// Prints what was made again (standard output) or why it could not be (standard error, after `failurePrefix`).
    func print(indent: String = "", failurePrefix: String) {
        for note in notes {
            if failure == nil {
                Swift.print(indent + note.terminalSafe + "; they reach the peers at the next sync")
            } else {
                FileHandle.standardError.write(Data((failurePrefix + note.terminalSafe + "\n").utf8))
            }
        }
    }
}
