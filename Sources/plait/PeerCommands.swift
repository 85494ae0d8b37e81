import ArgumentParser
import Foundation
import PlaitCore
import PlaitStore
import PlaitSync

extension Plait {
    struct Pair: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Pair with another device, so the two may sync.",
            discussion: """
                Headless pairing: run `plait id` on the other device and pass its ID with --trust here; then \
                do the same on the other device with this one's ID. Only paired devices may sync. A typo in \
                the ID is caught by its check characters.

                Interactive pairing (a code confirmed on both screens) is not built yet; see the README.
                """)

        @OptionGroup var global: GlobalOptions

        @Option(help: ArgumentHelp("The other device's ID, as `plait id` prints it.", valueName: "device-id"))
        var trust: String?

        @Option(help: ArgumentHelp("Where the other device listens.", valueName: "host:port"))
        var address: String?

        @Option(help: "A name for the other device.")
        var name: String?

        @Flag(help: "Print the result as JSON.") var json = false

        func validate() throws {
            if trust == nil {
                throw ValidationError("interactive pairing is not built yet: pair with --trust DEVICE-ID (from `plait id` on the other device)")
            }
        }

        func run() throws {
            let home = try global.openHome()
            let paired = try home.trust(trust!, address: address, name: name)
            if json {
                printJSON(
                    [
                        "device": paired.deviceID.description, "name": paired.name,
                        "address": paired.address?.description ?? NSNull(),
                    ] as [String: Any])
            } else {
                print("paired with \(paired.deviceID) (\"\(paired.name)\")\(paired.address.map { " at \($0)" } ?? "")")
                print("Now, on that device: plait pair --trust \(home.identity.deviceID)")
            }
        }
    }

    struct Unpair: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop trusting a device: it can no longer sync with this one.")

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
            abstract: "List paired devices (address, last seen, last known summary), or --pending ones.")

        @OptionGroup var global: GlobalOptions
        @Flag(help: "List devices that tried to connect without being paired (names unverified).")
        var pending = false
        @Flag(help: "Print the result as JSON.") var json = false

        func run() throws {
            let home = try global.openHome()
            let formatter = ISO8601DateFormatter()
            let time = { (ms: Int64?) -> Any in
                ms.map { formatter.string(from: Date(timeIntervalSince1970: Double($0) / 1000)) } ?? NSNull()
            }
            if pending {
                let rows = try home.store.pendingPeers()
                if json {
                    printJSON([
                        "pending": rows.map {
                            [
                                "device": $0.deviceID, "name": $0.name, "name_verified": false,
                                "address": $0.address ?? NSNull(), "first_seen": time($0.firstSeen),
                                "last_seen": time($0.lastSeen), "attempts": $0.attempts,
                            ] as [String: Any]
                        }
                    ])
                    return
                }
                if rows.isEmpty { print("no pending devices") }
                for row in rows {
                    print("\(row.deviceID)  \"\(row.name)\" (unverified)  \(row.address ?? "-")  \(row.attempts) attempts")
                }
                if !rows.isEmpty { print("Trust one with: plait pair --trust DEVICE-ID (after checking the ID on that device)") }
                return
            }
            let summary = try home.store.summary()
            let rows = try home.store.peers()
            let state = { (peer: PeerRecord) -> String in
                guard let theirs = peer.lastSummary else { return "never seen" }
                if theirs == summary { return "in sync" }
                if summary.covers(theirs) { return "behind" }
                if theirs.covers(summary) { return "ahead" }
                return "diverged"
            }
            if json {
                printJSON([
                    "peers": rows.map {
                        [
                            "device": $0.deviceID, "name": $0.name, "address": $0.address ?? NSNull(),
                            "paired_at": time($0.pairedAt), "last_seen": time($0.lastSeen),
                            "summary": $0.lastSummary?.description ?? NSNull(), "in_sync": $0.lastSummary == summary,
                            "state": state($0),
                        ] as [String: Any]
                    }
                ])
                return
            }
            if rows.isEmpty { print("no paired devices: pair with `plait pair --trust DEVICE-ID`") }
            for row in rows {
                let seen = row.lastSeen.map { time($0) as! String } ?? "never"
                print("\(row.name)  \(row.deviceID)  \(row.address ?? "-")  seen \(seen)  \(state(row))")
            }
        }
    }
}
