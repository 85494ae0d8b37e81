import ArgumentParser
import Foundation
import PlaitCore
import PlaitSession
import PlaitStore
import PlaitOutput
import PlaitSync
import PlaitTLS

extension Plait {
    struct Sync: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "sync",
            abstract: "Sync with paired peers now, both ways, and print what moved.",
            discussion: """
                Without --peer: every paired device with a known address, and every paired device found on \
                the LAN by mDNS (avahi-daemon) within discovery.browse_seconds (3 s by default; the search \
                stops as soon as every paired device is found). A paired device is recognised by the daily tag \
                its agent announces. A device known both ways is synced once: at the address discovery found, \
                then at its stored address if that fails. Without avahi-daemon, one warning, then the known \
                addresses; --no-discovery (or discovery.enabled = false) skips the search.

                With --peer: exactly those addresses, no search. Pulls what this device lacks and sends what \
                the peer lacks, both ways. One line per device; exits 0 only if every device it tried \
                succeeded, and each failure says why.
                """)

        @OptionGroup var global: GlobalOptions

        @Option(name: .customLong("peer"), help: ArgumentHelp("Sync with this address (repeatable).", valueName: "host:port"))
        var peers: [String] = []

        @Flag(help: "Do not look for paired devices by mDNS: only known addresses (or --peer).")
        var noDiscovery = false

        @Option(
            parsing: .unconditional,
            help: ArgumentHelp(
                "Seconds to wait for a peer that stops answering, or that answers only Pings without moving the "
                    + "sync on."))
        var timeout: Int = 30

        @Flag(help: "Print the result as JSON.") var json = false

        func validate() throws {
            if timeout < 1 { throw ValidationError("--timeout must be at least 1 second") }
        }

        func run() throws {
            let home = try global.openHome()
            let targets = try plan(home)
            // Paired devices this sync cannot reach: no stored address, and not found by mDNS. Named, not skipped
            // in silence (a new user's sync exited 0 without a word about the device that held the change).
            let planned = Set(targets.compactMap(\.deviceID))
            let unaddressed = peers.isEmpty ? try home.store.peers().filter { !planned.contains($0.deviceID) } : []
            let howToAddress = "A device paired here by `plait pair --listen`, or by `--trust ID` without --address, "
                + "has no address to dial (its own agent dials this one); store one with `plait pair --trust ID "
                + "--address HOST:PORT` (the address its agent listens on), or give --peer HOST:PORT."
            let noAddress = "no known address" + (searches(home) ? " and not found on the LAN" : "")
            let unreached = unaddressed.map {
                SyncUnreachedOutput(device: $0.deviceID, name: $0.name, reason: noAddress)
            }
            guard !targets.isEmpty else {
                // A script asked for JSON gets it on a failure too: no device synced, and the ones not reached.
                if json { try printJSON(SyncOutput(peers: [], unreached: unreached)) }
                if unaddressed.isEmpty && peers.isEmpty {
                    throw PlaitError.usage(
                        "no peer to sync with: this device is paired with no device. Pair with `plait pair` (on both "
                            + "devices), or give --peer HOST:PORT.")
                }
                throw PlaitError.usage(
                    "no peer to sync with: no paired device has a known address"
                        + (searches(home) ? " or was found on the LAN by mDNS" : "")
                        + " (\(unaddressed.map { peerLabel(name: $0.name, deviceID: $0.deviceID).terminalSafe }.joined(separator: ", "))). "
                        + howToAddress)
            }
            for peer in unaddressed {
                let label = peerLabel(name: peer.name, deviceID: peer.deviceID).terminalSafe
                FileHandle.standardError.write(
                    Data(
                        ("warning: \(label) (\(peer.deviceID)) was not synced: \(noAddress). \(howToAddress)\n").utf8))
            }
            let terminal = isatty(STDOUT_FILENO) != 0 && !json
            var outcomes: [(outcome: PeerSyncOutcome, source: SyncTarget.Source)] = []
            for target in targets {
                var progress: (@Sendable (Int) -> Void)?
                if terminal {
                    let label = target.addresses[0].description
                    let total = PulledCounter()
                    progress = { count in
                        let sum = total.add(count)
                        FileHandle.standardError.write(Data("\r\(label): pulled \(sum) changes…".utf8))
                    }
                }
                var outcome = home.syncOnce(with: target, timeout: .seconds(timeout), onPulled: progress)
                // Items only changes kept aside by an adopted baseline had made are made again (bad-luck tester
                // 2026-11-25, H3): they reach the peer in a second session.
                let keptAside = outcome.result == nil ? Home.KeptAsideOutcome() : home.bringBackKeptAside()
                if (outcome.succeeded && !outcome.notes.isEmpty) || outcome.onlyDeferred || !keptAside.brought.isEmpty {
                    // A fork was resolved by renaming during the session: a branch named here mid-session reaches
                    // the peer in a second one (the names now agree), so the sync leaves both sides complete.
                    // (What the peer held beyond this device is for the second session to say.)
                    var withoutAhead = outcome
                    withoutAhead.result?.peerSummary = nil
                    let notes = withoutAhead.notes + keptAside.notes
                    var again = home.syncOnce(with: target, timeout: .seconds(timeout), onPulled: progress)
                    if var first = outcome.result, let second = again.result {
                        first.pulled += second.pulled
                        first.sent += second.sent
                        first.finalSummary = second.finalSummary
                        first.peerSummary = second.peerSummary
                        first.untaken = second.untaken
                        // What the second session found of the own timeline holds now: a claim that it continues
                        // elsewhere is over once authoring went on, on a new timeline, to make the items again.
                        first.staleClaim = second.staleClaim
                        // Said once, in `notes` above (a fork note was printed twice: bad-luck tester 2026-11-25, H14).
                        first.keptAside = second.keptAside
                        first.forksResolved = second.forksResolved
                        // What the first left for a further session, the second took or left again.
                        first.deferred = second.deferred
                        again.result = first
                    }
                    outcome = again
                    outcome.extraNotes = notes
                } else {
                    outcome.extraNotes += keptAside.notes
                }
                if terminal { FileHandle.standardError.write(Data("\r\u{1B}[K".utf8)) }
                // A device found by mDNS and synced at its stored address after all: say which worked.
                outcomes.append((outcome, outcome.address == target.addresses[0] ? target.source : .stored))
                for note in outcome.notes {
                    FileHandle.standardError.write(Data("note: \(outcome.address): \(note)\n".utf8))
                }
                if !json {
                    if outcome.succeeded {
                        print(Self.line(outcome))
                    } else {
                        FileHandle.standardError.write(Data((Self.line(outcome) + "\n").utf8))
                    }
                }
            }
            if json {
                try printJSON(
                    SyncOutput(
                        peers: outcomes.map { outcome, source in
                            let result = outcome.result
                            return SyncPeerOutput(
                                address: outcome.address.description, baselinesPulled: result?.baselinesPulled ?? 0,
                                baselinesSent: result?.baselinesSent ?? 0, bytesReceived: result?.bytesReceived ?? 0,
                                bytesSent: result?.bytesSent ?? 0, device: outcome.deviceID,
                                diverged: result?.divergence != nil, error: outcome.failure,
                                forked: result?.forkedTimelines.map(\.description) ?? [],
                                foundBy: source == .discovered ? "mdns" : source.rawValue, name: outcome.name,
                                ok: outcome.succeeded, problems: outcome.problems, pulled: result?.pulled ?? 0,
                                sent: result?.sent ?? 0, summary: result?.finalSummary.description,
                                verifiedEqual: result?.verifiedEqual ?? false, toldNewID: outcome.toldSuccessor)
                        }, unreached: unreached))
            }
            if outcomes.contains(where: { !$0.outcome.succeeded }) { throw ExitCode(1) }
        }

        /// Whether `plan` looks for paired devices by mDNS.
        private func searches(_ home: Home) -> Bool { peers.isEmpty && !noDiscovery && home.config.discoveryEnabled }

        /// The --peer addresses; else the paired devices with a known address or found by mDNS, once each.
        private func plan(_ home: Home) throws -> [SyncTarget] {
            if !peers.isEmpty {
                return try peers.map {
                    SyncTarget(deviceID: nil, addresses: [try PeerAddress(parsing: $0)], source: .given)
                }
            }
            let paired = try home.store.peers().map { peer in
                (deviceID: peer.deviceID, address: peer.address.flatMap { try? PeerAddress(parsing: $0) })
            }
            var discovered: [String: PeerAddress] = [:]
            if searches(home) && !paired.isEmpty {
                let search = home.searchPairedPeers(for: .milliseconds(Int(home.config.browseSeconds * 1000)))
                if let reason = search.reason {
                    FileHandle.standardError.write(
                        Data(
                            ("warning: \(reason): not looking for paired devices on the LAN, syncing with known "
                                + "addresses only (--no-discovery skips the search)\n").utf8))
                }
                discovered = search.endpoints
            }
            return SyncTarget.plan(paired: paired, discovered: discovered)
        }

        static func line(_ outcome: PeerSyncOutcome) -> String {
            guard let result = outcome.result, outcome.failure == nil else {
                return "\(outcome.address): failed: \((outcome.failure ?? "unknown error").terminalSafe)"
            }
            let pulledBaseline = result.baselinesPulled > 0 ? " and its baseline" : ""
            let sentBaseline = result.baselinesSent > 0 ? " and this device's baseline" : ""
            let label = peerLabel(name: outcome.name ?? result.peerName, deviceID: result.peerDeviceID)
            let changes = result.pulled == 1 ? "change" : "changes"
            var text = "\(label) (\(outcome.address)): pulled \(result.pulled) \(changes)\(pulledBaseline), "
                + "sent \(result.sent)\(sentBaseline), "
                + "now at \(result.finalSummary.isEmpty ? "(empty)" : result.finalSummary.description)"
            if outcome.toldSuccessor { text += "; told it this device's new Device ID" }
            for problem in outcome.problems { text += "\n  ERROR: \(problem.terminalSafe)" }
            return text
        }
    }
}
