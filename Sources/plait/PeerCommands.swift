import ArgumentParser
import Foundation
import PlaitCommands
import PlaitCore
import PlaitPairing
import PlaitStore
import PlaitOutput
import PlaitSync
import PlaitTLS

extension Plait {
    struct Pair: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "pair",
            abstract: "Pair with another device, so the two may sync.",
            discussion: """
                Interactive pairing compares a code on both screens. On one device run `plait pair --listen \
                HOST:PORT`: it prints this device's ID and where it listens, and waits. On the other run `plait \
                pair --connect HOST:PORT` with that address. Each shows the other device's ID and a six-digit \
                code and asks "Do both screens show the same code? [y/N]". Answer y on both only if the two \
                codes are the same: a device in the middle would make them differ. Each device stores the other \
                only once both users said yes; a no, a different code, a timeout or a broken connection stores \
                nothing and exits non-zero. A device accepts pairing only while `plait pair --listen` runs \
                on it, and only one attempt per run: the first device that answers with its part of the code \
                (connections that say nothing are closed after 10 s). The connecting side remembers the address \
                it connected to (or --address) for syncing, so listen on the port the agent will use \
                (agent.listen, 7400) while the agent is not running.

                Headless pairing (scripts, servers): run `plait id` on the other device and pass its ID with \
                --trust here, then do the same there with this device's ID. A device listed by `plait peers \
                --pending` brings its name (marked unverified), not an address: what its refused dial told is \
                the host it came from, not the port it listens on, so give --address HOST:PORT, or let it dial \
                again or be found by mDNS. A typo in the ID is \
                caught by its check characters.

                With none of --listen, --connect and --trust, pairing finds the other device by mDNS: run \
                `plait pair` on both devices, on the same network. Each listens for pairing on a free port, \
                announces itself as "NAME (pairing)" with pair=1 in its TXT record, and prints the devices in \
                pairing mode it finds. With exactly one found it goes ahead; with several it asks which, by \
                number. Of the two devices, the one whose daily tag sorts lower connects and the other waits, so \
                they never dial each other at once; a device accepts only the device it found (its certificate \
                must match the tag it announced). Then the code is compared as above. No address is stored: the \
                pairing port is not where the other device syncs, and discovery finds its agent later. This needs \
                avahi-daemon; without it, plait says so and exits non-zero.
                """)

        @OptionGroup var global: GlobalOptions

        @Option(
            help: ArgumentHelp(
                "Wait for the other device to connect here and pair with it (port 0: any free port).",
                valueName: "host:port"))
        var listen: String?

        @Option(
            help: ArgumentHelp(
                "Connect to the other device, which runs `plait pair --listen` at this address, and pair with it.",
                valueName: "host:port"))
        var connect: String?

        @Option(
            help: ArgumentHelp(
                "Pair without a code: the other device's ID, as `plait id` prints it.", valueName: "device-id"))
        var trust: String?

        @Option(
            help: ArgumentHelp(
                "Where the other device listens for syncing (with --trust; with --connect, if not the address "
                    + "connected to).",
                valueName: "host:port"))
        var address: String?

        @Option(
            help: ArgumentHelp(
                "A name for the other device, at most 64 characters (default: the name it gives itself when pairing "
                    + "by code; with --trust, what it claimed when pending, else \"device\" and the start of its ID)."))
        var name: String?

        @Option(
            parsing: .unconditional,
            help: ArgumentHelp(
                "Seconds to wait for the other device (to be found, or to connect) and for both answers.",
                valueName: "seconds"))
        var timeout: Int = 120

        @Flag(help: "With --trust: print the result as JSON.") var json = false

        func validate() throws {
            if [listen, connect, trust].compactMap({ $0 }).count > 1 {
                throw ValidationError("give only one of --listen, --connect and --trust")
            }
            if address != nil && listen != nil {
                throw ValidationError(
                    "--address goes with --trust or --connect; the listening side learns no address to dial")
            }
            if address != nil && listen == nil && connect == nil && trust == nil {
                throw ValidationError(
                    "--address goes with --trust or --connect; pairing by discovery stores no address (the other "
                        + "device's agent is found by mDNS)")
            }
            if json && trust == nil {
                throw ValidationError("--json goes with --trust: interactive pairing talks to a person")
            }
            if timeout < 1 { throw ValidationError("--timeout must be at least 1 second") }
            if let name, let problem = Self.problem(withName: name) { throw ValidationError("--name \(problem)") }
        }

        /// Why `name` cannot name a paired device (nil: it can). A name is printed in every line about the device:
        /// a 5,000-character one filled `plait peers` (fifth hostile tester of 2026-11-25), a control or bidi
        /// character would be printed escaped. Names a device gives itself are cut to the same 64 characters.
        static func problem(withName name: String) -> String? {
            if name.trimmingCharacters(in: .whitespaces).isEmpty { return "cannot be empty" }
            if name.count > 64 { return "is \(name.count) characters long; a name has at most 64" }
            let bidi: ClosedRange<UInt32> = 0x202A...0x202E
            let isolates: ClosedRange<UInt32> = 0x2066...0x2069
            let unsafe = name.unicodeScalars.first { scalar in
                switch scalar.properties.generalCategory {
                case .control, .lineSeparator, .paragraphSeparator: return true
                default: return bidi.contains(scalar.value) || isolates.contains(scalar.value)
                }
            }
            if let unsafe {
                return "cannot hold control or text-direction characters (U+\(String(unsafe.value, radix: 16, uppercase: true)))"
            }
            return nil
        }

        func run() throws {
            let home = try global.openHome()
            if let trust {
                try pairByID(home, trust)
            } else if let listen {
                try pairListening(home, on: try PeerAddress(parsing: listen, allowingPortZero: true))
            } else if let connect {
                try pairConnecting(home, to: try PeerAddress(parsing: connect))
            } else {
                try pairByDiscovery(home)
            }
        }

        private func pairByDiscovery(_ home: Home) throws {
            let terminal = PairingTerminal()
            terminal.say("this device: \(try home.identity.deviceID) (\(home.deviceName))")
            let user = DiscoveryPairingUser(
                started: { instance, port in
                    terminal.say(
                        "looking for devices in pairing mode for \(timeout) s (this one is \"\(instance)\", pairing "
                            + "port \(port)); run `plait pair` on the other device too")
                },
                found: { terminal.say("found in pairing mode: \($0.description)") },
                choose: { terminal.choose($0, problem: $1) },
                connecting: { terminal.say("connecting to \($0.name.terminalSafe) at \($0.endpoint) to pair") },
                waiting: { terminal.say("waiting for \($0.name.terminalSafe) to connect") },
                connected: { terminal.say("device \($0) (\($1.name.terminalSafe)) connected") },
                refused: { terminal.say($0) },
                confirm: { terminal.ask($0) })
            do {
                let paired = try home.pairByDiscovery(timeout: .seconds(timeout), name: name, user: user)
                terminal.report(paired)
                terminal.say("Sync now with `plait sync`, or run `plait agent` on both devices: they find each other.")
            } catch {
                terminal.endPrompt()
                throw terminal.explain(error)
            }
        }

        private func pairByID(_ home: Home, _ text: String) throws {
            let paired = try home.trust(text, address: address, name: name)
            if json {
                try printJSON(
                    PairOutput(
                        address: paired.address?.description, alreadyPaired: paired.alreadyPaired,
                        device: paired.deviceID.description, name: paired.name))
            } else {
                // Trusting a device paired here already changes at most its stored name and address: said so, not
                // "paired with" as if it were new.
                print(
                    (paired.alreadyPaired ? "already paired with " : "paired with ")
                        + "\(paired.deviceID) (\"\(paired.name.terminalSafe)\")"
                        + (paired.address.map { " at \($0)" } ?? ""))
                print(
                    (paired.alreadyPaired ? "If that device does not trust this one yet, on it: " : "Now, on that device: ")
                        + "plait pair --trust \(try home.identity.deviceID)")
            }
        }

        private func pairListening(_ home: Home, on requested: PeerAddress) throws {
            let terminal = PairingTerminal()
            let listener = try PairingListener(home: home, address: requested)
            defer { listener.close() }
            let host = ["0.0.0.0", "::"].contains(listener.address.host) ? "THIS-HOST" : listener.address.host
            var hint = listener.address
            hint.host = host
            terminal.say("this device: \(try home.identity.deviceID) (\(home.deviceName))")
            terminal.say("listening for pairing on \(listener.address) for \(timeout) s")
            terminal.say("on the other device run: plait pair --connect \(hint)")
            do {
                let paired = try listener.pairOnce(
                    timeout: .seconds(timeout), name: name,
                    onConnected: { terminal.say("device \($0) connected") },
                    onRefused: { terminal.say($0) },
                    confirm: { terminal.ask($0) })
                terminal.report(paired)
                terminal.say("It will sync with this device once it runs `plait agent` or `plait sync`.")
            } catch {
                terminal.endPrompt()
                throw terminal.explain(error)
            }
        }

        private func pairConnecting(_ home: Home, to target: PeerAddress) throws {
            let terminal = PairingTerminal()
            let remembered = try address.map { try PeerAddress(parsing: $0) }
            terminal.say("this device: \(try home.identity.deviceID) (\(home.deviceName))")
            terminal.say("connecting to \(target) to pair")
            do {
                let paired = try home.pair(
                    connectingTo: target, rememberedAddress: remembered, name: name, timeout: .seconds(timeout),
                    confirm: { terminal.ask($0) })
                terminal.report(paired)
                terminal.say("Sync now with `plait sync`, or run `plait agent` on both devices.")
            } catch {
                terminal.endPrompt()
                throw terminal.explain(error)
            }
        }
    }

    struct Unpair: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "unpair",
            abstract: "Stop trusting a device: it can no longer sync with this one.",
            discussion: """
                Give its whole Device ID, as `plait peers` lists it. Its connections here are closed and refused \
                from now on. Changes it made still reach this device through other devices that trust it and \
                sync with both: unpair it on those too to keep it out. \
                The device stays unpaired until you pair it again here (`plait pair`): a succession statement \
                from another device (`plait rejoin --new-key`) naming it as that device's new key is refused.
                """)

        @OptionGroup var global: GlobalOptions
        @Argument(help: "The device's ID.") var deviceID: String

        func run() throws {
            let home = try global.openHome()
            let id = try home.untrust(deviceID)
            print("unpaired \(id)")
        }
    }

    struct Peers: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "peers",
            abstract: "List paired devices (address, when last seen, and how the two stood then), or --pending ones.",
            discussion: """
                Each row: the name stored at pairing, the Device ID, the address it is dialled at ("-": none \
                known; found by mDNS, or give one with `plait pair --trust ID --address HOST:PORT`), when the two \
                devices last talked, and how they stood then: "in sync at last contact", "behind" (the peer \
                lacked changes this device has), "ahead" (it held changes this device lacks), "out of step" (each \
                lacked some of the other's). A device offline since then may have changed: run `plait sync` to \
                know. What went wrong outranks those words: "refuses this device (not paired there)", "forked", \
                "diverged", "refused changes", "claims this device's timeline", "home copied", then "never seen". \
                --json gives the summary the peer last acknowledged.
                """)

        @OptionGroup var global: GlobalOptions
        @Flag(help: "List devices that tried to connect without being paired (names unverified).")
        var pending = false
        @Flag(help: "Print the result as JSON.") var json = false

        func run() throws {
            let home = try global.openHome()
            if pending {
                let rows = try ReadOutputs.pendingPeers(home).pending
                if json {
                    try printJSON(PendingPeersOutput(pending: rows))
                    return
                }
                if rows.isEmpty { print("no pending devices") }
                for row in rows {
                    print(
                        "\(row.device)  \"\(row.name.terminalSafe)\" (unverified)  \(row.address ?? "-")  "
                            + "\(row.attempts) \(row.attempts == 1 ? "attempt" : "attempts")")
                }
                if !rows.isEmpty { print("Trust one with: plait pair --trust DEVICE-ID (after checking the ID on that device)") }
                return
            }
            let rows = try ReadOutputs.peers(home).peers
            if json {
                try printJSON(PeersOutput(peers: rows))
                return
            }
            if rows.isEmpty {
                print(
                    "no paired devices: pair with `plait pair` on both devices (or --listen/--connect, or --trust ID)")
            }
            for row in rows {
                let seen = row.lastSeen ?? "never"
                // How the two stood when they last talked, not now: a device offline since may have changed (a new
                // user read "in sync" for a peer that had made changes after it went away).
                let asOfThen = ["in sync", "behind", "ahead"].contains(row.state) || row.state.hasPrefix("out of step")
                let state = asOfThen ? "\(row.state) at last contact" : row.state
                print("\(row.name.terminalSafe)  \(row.device)  \(row.address ?? "-")  seen \(seen)  \(state)")
                for fork in row.forked { print("  forked: \(fork.terminalSafe)") }
                if let successor = row.succeededBy { print("  succeeded by \(successor) (it has a new key)") }
                for finding in [row.diverged, row.refused, row.claim].compactMap({ $0 }) {
                    print("  \(finding.terminalSafe)")
                }
            }
        }
    }
}

/// The user's side of interactive pairing on standard input and output. The question is asked on the
/// pairing driver's asking thread while the command's thread may end the attempt, hence the lock. Output
/// goes straight to the descriptor, unbuffered, so whoever waits for "listening for pairing on" sees it
/// at once even through a pipe or a file.
final class PairingTerminal: @unchecked Sendable {
    private let lock = NSLock()
    private var promptOpen = false
    /// The question met the end of input, which is a no.
    private var inputEnded = false

    /// `error` as the user should read it: a no that was the end of input is said so (it read "codes were refused"
    /// when nobody had answered; a new user's finding).
    func explain(_ error: any Error) -> any Error {
        guard case PairingError.refusedHere = error, lock.withLock({ inputEnded }) else { return error }
        return PlaitError.usage(
            "no answer: standard input ended before a y or n, which counts as no; nothing stored. Run `plait pair` "
                + "where someone can answer, or pair without a question: `plait pair --trust ID` on both devices.")
    }

    private func write(_ text: String) {
        FileHandle.standardOutput.write(Data(text.utf8))
    }

    func say(_ line: String) {
        lock.withLock { write(line + "\n") }
    }

    /// Shows the other device and the code, and reads the answer: y or yes is yes, anything else
    /// (including the end of input) is no.
    func ask(_ prompt: PairingPrompt) -> Bool {
        lock.withLock {
            let name =
                prompt.peerName.isEmpty ? "no name" : "\"\(prompt.peerName.terminalSafe)\", the name it gives itself"
            write("other device: \(prompt.peer) (\(name))\ncode: \(prompt.code)\n")
            write("Do both screens show the same code? [y/N] ")
            promptOpen = true
        }
        let answer = readLine(strippingNewline: true)
        let accepted = ["y", "yes"].contains(answer?.trimmingCharacters(in: .whitespaces).lowercased() ?? "")
        lock.withLock {
            if answer == nil { inputEnded = true }
            // Input that is not a terminal was not echoed: show it, so the transcript reads as a dialogue.
            if promptOpen && (answer == nil || isatty(STDIN_FILENO) == 0) { write((answer ?? "") + "\n") }
            promptOpen = false
        }
        return accepted
    }

    /// Lists the devices found, numbered from 1, and reads which one to pair with (nil at the end of input).
    func choose(_ candidates: [PairingCandidate], problem: String?) -> String? {
        lock.withLock {
            var text = problem.map { "\($0).\n" } ?? "Several devices are in pairing mode:\n"
            for (index, candidate) in candidates.enumerated() {
                text += "  \(index + 1). \(candidate.description.terminalSafe)\n"
            }
            write(text + "Pair with which device? [1-\(candidates.count)] ")
            promptOpen = true
        }
        let answer = readLine(strippingNewline: true)
        lock.withLock {
            if promptOpen && (answer == nil || isatty(STDIN_FILENO) == 0) { write((answer ?? "") + "\n") }
            promptOpen = false
        }
        return answer
    }

    /// Ends an unanswered question's line, so an error does not follow it on the same line.
    func endPrompt() {
        lock.withLock {
            if promptOpen { write("\n") }
            promptOpen = false
        }
    }

    func report(_ paired: PairedDevice) {
        let address = paired.address.map { " at \($0)" } ?? ""
        say("paired with \(paired.deviceID) (\"\(paired.name.terminalSafe)\")" + address)
    }
}
