import ArgumentParser
import Foundation
import PlaitCore
import PlaitSync

@main
struct Plait: ParsableCommand {
    static let version = "0.1.0"

    static let configuration = CommandConfiguration(
        commandName: "plait",
        abstract: "Keep ordered lists in sync between your machines, peer to peer, with nothing lost.",
        discussion: """
            Every device appends changes to its own timeline and replays everyone's changes in one \
            deterministic order, so every device that holds the same changes shows the same lists.

            The device home is --home, else $PLAIT_HOME, else $XDG_DATA_HOME/plait (~/.local/share/plait).
            The config is --config, else $PLAIT_CONFIG, else $XDG_CONFIG_HOME/plait/plait.toml, else defaults.
            LIST is a list title or an ID prefix; ITEM is an ID prefix (4+ characters) or an item's exact text.
            """,
        version: version,
        subcommands: [
            Init.self, Id.self, Status.self, Rejoin.self,
            Lists.self, ListCommand.self, Add.self, Edit.self, Done.self, Reopen.self, Move.self, Remove.self,
            Show.self, Log.self, Compact.self, Batch.self, Pair.self, Unpair.self, Peers.self, Sync.self, Agent.self,
            Doctor.self, Repair.self, Demo.self, Bench.self,
        ])
}

/// Options every command that touches a device takes.
struct GlobalOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The device home directory.", valueName: "dir"))
    var home: String?

    @Option(help: ArgumentHelp("The config file (TOML).", valueName: "file"))
    var config: String?

    var environment: [String: String] { ProcessInfo.processInfo.environment }

    var homePath: String { Home.resolvePath(explicit: home, environment: environment) }

    func loadConfig() throws -> Config {
        try Config.load(explicitPath: config, environment: environment).0
    }

    /// Opens the home; damaged derived data found on the way is rebuilt from the changes, with one warning.
    func openHome() throws -> Home {
        let home = try Home.open(at: homePath, config: try loadConfig())
        home.replica.onDerivedStateRepair { repair in
            FileHandle.standardError.write(Data("warning: \(repair).\n".utf8))
        }
        return home
    }
}

/// Prints a value as JSON (keys sorted, so output is stable).
func printJSON(_ value: Any) {
    let data = try! JSONSerialization.data(
        withJSONObject: value, options: [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes])
    print(String(decoding: data, as: UTF8.self))
}

extension Array where Element == UInt8 {
    var hex: String { hexString }
}
