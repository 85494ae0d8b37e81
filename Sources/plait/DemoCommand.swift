import ArgumentParser
import Foundation
import PlaitCore
import PlaitNetnsSupport
import PlaitOutput
import PlaitSync

#if canImport(Glibc)
import Glibc
#endif

/// `--mode` of `plait demo`.
enum DemoMode: String, ExpressibleByArgument, CaseIterable {
    case auto, netns, loopback
}

extension Plait {
    struct Demo: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "demo",
            abstract: "Run several devices on this machine, let them edit at once, and watch them converge.",
            discussion: """
                Creates --devices temporary devices (their homes in a new directory under $TMPDIR), pairs every \
                two of them by Device ID, starts a `plait agent` process for each, and has all of them edit at \
                once: each device creates a list, adds, completes, reopens, edits, moves and deletes items in \
                its own list and the others' once they arrived, renames, recolors and moves lists; halfway, \
                one device deletes the shared list Groceries at the very moment the others add to it (their \
                items survive and keep the list). The edits are made by this process, one thread per device \
                writing to that device's store, one change per transaction, as any program embedding plait's \
                store may; each agent notices a write within milliseconds and pushes it to its peers.

                A table shows each device's changes, summary and state digest, redrawn in place on a terminal \
                (a line per change otherwise), until every device holds the same changes and the same state. \
                Then it prints how long that took after the last edit, stops every process it started and \
                removes the homes (--keep keeps them). Ctrl-C stops everything too. Exits non-zero if the \
                devices did not converge within --timeout.

                Modes. netns: each device in a network namespace of its own, on a virtual LAN, with its own \
                dbus-daemon and avahi-daemon; the agents find each other by mDNS (or, with --static-peers, are \
                given each other's addresses). Needs root, iproute2, util-linux, dbus and avahi-daemon; nothing \
                touches this machine's real interfaces or its avahi-daemon. loopback: every agent on 127.0.0.1 \
                with a port of its own, given the others' addresses (static peers), discovery off; needs \
                nothing. auto (the default): netns when it can be built here, otherwise loopback, saying why.
                """)

        @Option(parsing: .unconditional, help: ArgumentHelp("How many devices (2 to 8).", valueName: "n"))
        var devices = 3

        @Option(parsing: .unconditional, help: ArgumentHelp("How many edits each device makes.", valueName: "n"))
        var edits = 200

        @Option(help: ArgumentHelp("auto, netns or loopback (see above).", valueName: "mode"))
        var mode: DemoMode = .auto

        @Flag(
            help: """
                netns mode: give each agent the other hosts' addresses (--peer) instead of relying on mDNS \
                discovery alone. (Loopback mode always uses static peers.)
                """)
        var staticPeers = false

        @Option(parsing: .unconditional, help: ArgumentHelp("Seed of the edit mix (default: a random one, printed).", valueName: "n"))
        var seed: UInt64?

        @Option(parsing: .unconditional, help: ArgumentHelp("Milliseconds each device waits between two of its edits.", valueName: "ms"))
        var interval = 10

        @Option(parsing: .unconditional, help: ArgumentHelp("Seconds to wait for convergence after the last edit.", valueName: "seconds"))
        var timeout = 60.0

        @Flag(help: "Keep the temporary homes (with each agent's log) and print where they are.")
        var keep = false

        @Flag(help: "Print only the final figures, as JSON (no live table).")
        var json = false

        func validate() throws {
            guard (2...8).contains(devices) else { throw ValidationError("--devices must be from 2 to 8") }
            guard (1...100_000).contains(edits) else { throw ValidationError("--edits must be from 1 to 100000") }
            guard (0...10_000).contains(interval) else {
                throw ValidationError("--interval must be from 0 to 10000 ms")
            }
            guard timeout > 0 && timeout <= 3600 else {
                throw ValidationError("--timeout must be more than 0 and at most 3600 seconds")
            }
        }

        func run() throws {
            // Handled even if the parent ignored or blocked them (a background job, a test's Dispatch thread):
            // whatever stops the demo, it stops what it started.
            var stopping = sigset_t()
            sigemptyset(&stopping)
            for number in [SIGINT, SIGTERM, SIGHUP] {
                sigaddset(&stopping, number)
                signal(number, recordDemoInterruption)
            }
            pthread_sigmask(SIG_UNBLOCK, &stopping, nil)
            let display = DemoDisplay(quiet: json)
            let (network, why) = try chooseNetwork()
            guard let executable = Self.executablePath() else { throw DemoError.executableNotFound }
            let seed = self.seed ?? UInt64.random(in: 1...999_999)
            let settings = DemoRun.Settings(
                devices: devices, edits: edits, network: network, staticPeers: staticPeers, seed: seed,
                interval: .milliseconds(interval), timeout: .milliseconds(Int(timeout * 1000)), keep: keep)
            let run = DemoRun(settings: settings, executable: executable, display: display)
            display.say("plait demo: \(devices) devices, \(edits) edits each, seed \(seed)")
            display.say(why)
            if json { demoWrite(why + "\n", to: STDERR_FILENO) }
            let outcome: DemoRun.Outcome
            do {
                try run.setUp()
                display.say("homes in \(run.directory!)\(keep ? "" : " (removed at the end; --keep keeps them)")")
                display.say("paired every two devices by Device ID (headless, as `plait pair --trust` does)")
                try run.startAgents()
                display.say(
                    "agents: "
                        + run.devices.map { "\($0.name) (pid \($0.agent?.pid ?? 0)) on \($0.address)" }.joined(
                            separator: ", "))
                display.say("")
                outcome = try run.editAndWatch()
                display.finish()
            } catch {
                display.finish()
                run.stop()
                // A Ctrl-C reaches the agents and daemons too (one process group): whatever failed because
                // they went away, the interruption is what to report.
                let number = demoInterruption.load(ordering: .relaxed)
                if number != 0 {
                    demoWrite("plait demo: \(DemoError.interrupted(signal: number))\n", to: STDERR_FILENO)
                    throw ExitCode(128 + number)
                }
                throw error
            }
            let noConnection = !outcome.converged && !run.anyAgentConnected
            let logs = outcome.converged ? "" : run.devices.compactMap { device in
                device.agent.map { "\(device.name):\n" + DemoRun.tail($0, lines: 8) }
            }.joined(separator: "\n")
            run.stop()
            if json {
                try printJSON(figures(run, outcome, network: network, seed: seed))
            } else {
                report(run, outcome, network: network)
            }
            guard outcome.converged else {
                var message = String(
                    format: "plait demo: the devices did not converge within %.0f s after the last edit", timeout)
                if noConnection {
                    message +=
                        network == .netns && !staticPeers
                        ? "; no agent connected to another: does this plait's agent find peers by mDNS? "
                            + "Try --static-peers."
                        : "; no agent connected to another."
                }
                demoWrite(message + "\nthe agents' last lines:\n" + logs + "\n", to: STDERR_FILENO)
                throw ExitCode(1)
            }
        }

        /// The network for `--mode`, and a sentence saying which and (in auto mode, for loopback) why.
        private func chooseNetwork() throws -> (DemoNetwork, String) {
            let netnsLine =
                "mode: netns, each device in a network namespace with its own avahi-daemon, "
                + (staticPeers ? "agents given each other's addresses (--static-peers)" : "peers found by mDNS")
            let loopbackLine = "mode: loopback, every device on 127.0.0.1, agents given each other's addresses"
            switch mode {
            case .loopback:
                return (.loopback, loopbackLine)
            case .netns:
                if let reason = NetnsLAN.skipReason { throw DemoError.netnsUnavailable(reason: reason) }
                return (.netns, netnsLine)
            case .auto:
                if let reason = NetnsLAN.skipReason {
                    return (.loopback, loopbackLine + " (network namespaces are not available: \(reason))")
                }
                return (.netns, netnsLine)
            }
        }

        /// This very executable, to start the agents with.
        static func executablePath() -> String? {
            if let url = Bundle.main.executableURL, FileManager.default.isExecutableFile(atPath: url.path) {
                return url.path
            }
            if let link = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
                return link
            }
            return nil
        }

        private func report(_ run: DemoRun, _ outcome: DemoRun.Outcome, network: DemoNetwork) {
            let edits = outcome.made.reduce(0, +)
            let kinds = outcome.kinds.reduce(into: [String: Int]()) { total, device in
                total.merge(device, uniquingKeysWith: +)
            }
            print("")
            print(
                "edits: \(edits) in \(String(format: "%.2f", outcome.editing.seconds)) s: "
                    + kinds.sorted { $0.value > $1.value }.map { "\($0.value) \($0.key)" }.joined(separator: ", "))
            if let convergence = outcome.convergence, let reading = outcome.readings.first {
                print(
                    String(
                        format: "converged in %.2f s after the last edit (%.2f s in all, set-up included)",
                        convergence.seconds, outcome.convergedAt!.seconds))
                let state = run.devices[0].view.replica.state
                let items = state.liveItemCount
                print(
                    "every device: \(reading.changes) changes, \(state.liveListIDs.count) lists, \(items) items, "
                        + "digest \(DemoTable.shortDigest(reading.digest))")
                if let story = groceriesStory(run, outcome) { print(story) }
            } else {
                print(String(format: "not converged within %.0f s after the last edit", timeout))
            }
            let exits = run.devices.compactMap(\.agentExit)
            var stopped = network == .netns ? "stopped the agents and the LAN" : "stopped the agents"
            if !exits.allSatisfy({ $0 == 0 }) {
                stopped += " (exit statuses \(exits.map(String.init).joined(separator: ", ")))"
            }
            if keep, let directory = run.directory {
                let example = "plait show --home \(directory)/\(run.devices[0].name)"
                stopped += "; kept the homes in \(directory): e.g. \(example)"
            } else {
                stopped += "; removed the homes"
            }
            print(stopped)
        }

        /// What became of the shared list that device 2 deleted while the others were adding to it.
        private func groceriesStory(_ run: DemoRun, _ outcome: DemoRun.Outcome) -> String? {
            guard run.devices.count > 1, outcome.kinds[1]["list.delete", default: 0] > 0 else { return nil }
            let shared = DemoScript(device: 0, name: "", edits: 0, seed: run.settings.seed).sharedList
            let state = run.devices[0].view.replica.state
            guard let list = state.lists[shared] else { return nil }
            let deleter = run.devices[1].name
            if list.deleted {
                return "\(DemoScript.sharedListTitle): deleted by \(deleter); no item was added to it concurrently, "
                    + "so it stayed deleted"
            }
            let held = [false, true].map { state.itemIDs(in: shared, completed: $0).count }.reduce(0, +)
            let renamed = list.title == DemoScript.sharedListTitle ? "" : " (now '\(list.title)')"
            return "\(DemoScript.sharedListTitle)\(renamed): deleted by \(deleter) at the moment the others added to "
                + "it; their adds survived the delete and kept the list, which holds \(held) items now"
        }

        private func figures(_ run: DemoRun, _ outcome: DemoRun.Outcome, network: DemoNetwork, seed: UInt64)
            -> DemoOutput
        {
            let devices = run.devices.enumerated().map { index, device in
                let reading = outcome.readings[index]
                return DemoOutput.Device(
                    address: device.address, agentExit: device.agentExit.map { Int($0) },
                    changes: Int(reading.changes), device: (try? device.home.identity)?.deviceID.description,
                    digest: reading.digest.hexString, editKinds: Counts(outcome.kinds[index]),
                    edits: outcome.made[index], home: device.home.path, name: device.name,
                    pid: device.agent.map { Int($0.pid) }, summary: reading.summary.description)
            }
            let first = outcome.readings.first
            let state = run.devices[0].view.replica.state
            return DemoOutput(
                agentPIDs: run.devices.compactMap { $0.agent.map { Int($0.pid) } },
                daemonPIDs: run.daemonPIDs.map { Int($0) }, convergeSeconds: outcome.convergence.map { $0.seconds },
                converged: outcome.converged, devices: devices,
                digest: outcome.converged ? first?.digest.hexString : nil, directory: run.directory,
                editingSeconds: outcome.editing.seconds, edits: outcome.made.reduce(0, +), editsPerDevice: edits,
                items: state.liveItemCount, kept: keep, lists: state.liveListIDs.count,
                mode: network.rawValue, namespaces: run.lan?.hosts.map(\.namespace) ?? [], seed: seed,
                staticPeers: network == .loopback || staticPeers,
                summary: outcome.converged ? first?.summary.description : nil,
                totalSeconds: outcome.convergedAt.map { $0.seconds })
        }
    }
}
