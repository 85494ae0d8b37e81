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
            LIST is a list title or an ID prefix; ITEM is an ID prefix (4+ hex digits) or an item's exact text.
            """,
        version: version,
        subcommands: [
            Init.self, Id.self, Status.self, Rejoin.self,
            Lists.self, ListCommand.self, Add.self, Edit.self, Done.self, Reopen.self, Move.self, Remove.self,
            Show.self, Log.self, Compact.self, Batch.self, Pair.self, Unpair.self, Peers.self, Sync.self, Agent.self,
            Backup.self, Restore.self,
            Doctor.self, Repair.self, Gui.self, Demo.self, Bench.self,
        ])

    /// ArgumentParser's `main`, with three checks first and safe error text: arguments must be UTF-8 (else
    /// text would be stored with replacement characters), a word where a command belongs must name one
    /// (else ArgumentParser says "2 unexpected arguments"), and no error prints a control character raw.
    static func main() {
        let arguments = Array(CommandLine.arguments.dropFirst())
        do {
            try CommandLineCheck.utf8(argc: CommandLine.argc, argv: CommandLine.unsafeArgv)
            try CommandLineCheck.knownCommand(arguments, root: Plait.self, path: ["plait"])
            var command = try parseAsRoot(arguments)
            try command.run()
        } catch {
            let code = exitCode(for: error)
            let text = fullMessage(for: error)
            if code == .success {
                if !text.isEmpty { print(text) }
            } else if !text.isEmpty {
                // Help and usage text has its own line breaks; anything else that acts on a terminal is escaped.
                let safe = text.split(separator: "\n", omittingEmptySubsequences: false)
                    .map { String($0).terminalSafe }.joined(separator: "\n")
                FileHandle.standardError.write(Data((safe + "\n").utf8))
            }
            Foundation.exit(code.rawValue)
        }
    }
}

/// Checks of the raw command line that ArgumentParser cannot make.
enum CommandLineCheck {
    /// Swift decodes `argv` repairing invalid UTF-8, so the raw bytes are checked here.
    static func utf8(argc: Int32, argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) throws {
        for index in 1..<max(1, Int(argc)) {
            guard let pointer = argv[index] else { continue }
            if String(validatingCString: pointer) == nil {
                let bytes = UnsafeRawBufferPointer(start: pointer, count: strlen(pointer))
                let shown = String(decoding: bytes, as: UTF8.self).terminalExcerpt(limit: 40)
                throw ValidationError(
                    "argument \(index) ('\(shown)') is not valid UTF-8; plait stores text as UTF-8, so convert it "
                        + "first (e.g. with iconv) and try again")
            }
        }
    }

    /// Walks the command words: where a command with subcommands expects one, the word must name one.
    /// `path` is how the root is typed (`plait`; nothing for a line of `plait batch`).
    static func knownCommand(_ arguments: [String], root: ParsableCommand.Type, path: [String]) throws {
        var command = root
        var path = path
        for word in arguments {
            let subcommands = command.configuration.subcommands
            guard !subcommands.isEmpty, command.configuration.defaultSubcommand == nil, !word.hasPrefix("-")
            else { return }
            if word == "help" { return }
            let named = { (candidate: ParsableCommand.Type) in
                candidate._commandName == word || candidate.configuration.aliases.contains(word)
            }
            guard let next = subcommands.first(where: named) else {
                let names = subcommands.filter { $0.configuration.shouldDisplay }.map { $0._commandName }
                let typed = path.joined(separator: " ")
                let scope = path.count > 1 ? " for `\(typed)`" : ""
                let help = path.isEmpty ? "" : " (see `\(typed) --help`)"
                throw ValidationError(
                    "unknown command '\(word.terminalExcerpt(limit: 40))'\(scope); the commands are: "
                        + names.joined(separator: ", ") + help)
            }
            command = next
            path.append(word)
        }
    }
}

/// Options every command that touches a device takes.
struct GlobalOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The device home directory.", valueName: "dir"))
    var home: String?

    @Option(help: ArgumentHelp("The config file (TOML).", valueName: "file"))
    var config: String?

    var environment: [String: String] { ProcessInfo.processInfo.environment }

    /// An empty value is refused, not taken as "not given": `--home "$H"` with `H` unset would otherwise write to
    /// the default home.
    func validate() throws {
        if home?.isEmpty == true {
            throw ValidationError(
                "--home is empty (an unset shell variable?); pass a directory, or leave --home out to use "
                    + "$PLAIT_HOME or the default home.")
        }
        if config?.isEmpty == true {
            throw ValidationError(
                "--config is empty (an unset shell variable?); pass a file, or leave --config out to use "
                    + "$PLAIT_CONFIG or the default config.")
        }
    }

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
        Self.sayCopyNoticed(home)
        return home
    }

    /// A store found to be a copy at its first write is said on standard error, once (`Store.copyNotice`).
    static func sayCopyNoticed(_ home: Home) {
        home.store.onCopyNoticed { notice in FileHandle.standardError.write(Data("note: \(notice).\n".utf8)) }
    }
}

extension Array where Element == UInt8 {
    var hex: String { hexString }
}
