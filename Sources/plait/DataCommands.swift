import ArgumentParser
import Foundation
import PlaitCommands
import PlaitCore
import PlaitStore
import PlaitOutput
import PlaitSync

/// A command that edits the data: it runs alone (one transaction) or as a line of `plait batch`.
protocol DataCommand: ParsableCommand {
    var global: GlobalOptions { get }
    var json: Bool { get }
    /// What the command asks for, independent of how it was parsed.
    var operation: DataOperation { get }
}

extension DataCommand {
    func validate() throws { try operation.validateAsCommand() }

    func run() throws {
        // With an agent on the home, it makes the edit (AgentClient+Commands.swift): same output, same errors.
        if let done = try global.throughAgent({ try $0.edit(operation) }) {
            if json { try printAgentJSON(done.json) } else { print(done.message) }
            return
        }
        let home = try global.openHome()
        let result = try home.replica.edit { edit in try operation.performAsCommand(edit) }
        if json { try printJSON(result.output) } else { print(result.message) }
    }
}

extension DataOperation {
    /// `validate()`, its complaint as ArgumentParser's usage error (printed with the command's usage).
    func validateAsCommand() throws {
        do { try validate() } catch let CommandError.invalid(message) { throw ValidationError(message) }
    }

    /// `perform(_:)`, its complaint as ArgumentParser's usage error.
    func performAsCommand(_ edit: Replica.LocalEdit) throws -> (message: String, output: EditOutput) {
        do { return try perform(edit) } catch let CommandError.invalid(message) { throw ValidationError(message) }
    }
}

/// `--top` / `--after X` as one position.
struct PlacementOptions: ParsableArguments {
    @Flag(help: "Put it at the top.")
    var top = false

    @Option(help: ArgumentHelp("Put it right after this one.", valueName: "other"))
    var after: String?
}

extension Plait {
    struct ListCommand: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list",
            abstract: "Create, rename, recolor, move or delete lists.",
            subcommands: [AddList.self, RenameList.self, RecolorList.self, MoveList.self, RemoveList.self])
    }

    struct AddList: DataCommand {
        static let configuration = CommandConfiguration(commandName: "add", abstract: "Create a list (at the bottom).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The list's title.") var title: String
        @Option(help: "A color name or #rrggbb.") var color: String?
        @OptionGroup var placement: PlacementOptions
        @Flag(help: "Print the result as JSON.") var json = false


        var operation: DataOperation { .listAdd(title: title, color: color, top: placement.top, after: placement.after) }
    }

    struct RenameList: DataCommand {
        static let configuration = CommandConfiguration(commandName: "rename", abstract: "Rename a list.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The list (title or ID prefix).") var list: String
        @Argument(help: "The new title.") var title: String
        @Flag(help: "Print the result as JSON.") var json = false


        var operation: DataOperation { .listRename(list: list, title: title) }
    }

    struct RecolorList: DataCommand {
        static let configuration = CommandConfiguration(commandName: "recolor", abstract: "Change a list's color.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The list (title or ID prefix).") var list: String
        @Argument(help: "A color name or #rrggbb; \"none\" clears it.") var color: String
        @Flag(help: "Print the result as JSON.") var json = false


        var operation: DataOperation { .listRecolor(list: list, color: color) }
    }

    struct MoveList: DataCommand {
        static let configuration = CommandConfiguration(
            commandName: "move", abstract: "Move a list (--top or --after LIST).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The list (title or ID prefix).") var list: String
        @OptionGroup var placement: PlacementOptions
        @Flag(help: "Print the result as JSON.") var json = false



        var operation: DataOperation { .listMove(list: list, top: placement.top, after: placement.after) }
    }

    struct RemoveList: DataCommand {
        static let configuration = CommandConfiguration(
            commandName: "rm", abstract: "Delete a list and the items in it.",
            discussion: "Items another device adds to it at the same time survive, and keep the list alive.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The list (title or ID prefix).") var list: String
        @Flag(help: "Print the result as JSON.") var json = false


        var operation: DataOperation { .listRemove(list: list) }
    }

    struct Add: DataCommand {
        static let configuration = CommandConfiguration(
            commandName: "add",
            abstract: "Add an item to a list (at the bottom of pending, or --top / --after ITEM).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The list (title or ID prefix).") var list: String
        @Argument(help: "The item's text.") var text: String
        @OptionGroup var placement: PlacementOptions
        @Flag(help: "Print the result as JSON.") var json = false


        var operation: DataOperation { .add(list: list, text: text, top: placement.top, after: placement.after) }
    }

    struct Edit: DataCommand {
        static let configuration = CommandConfiguration(commandName: "edit", abstract: "Change an item's text.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The item (ID prefix or exact text).") var item: String
        @Argument(help: "The new text.") var text: String
        @Flag(help: "Print the result as JSON.") var json = false


        var operation: DataOperation { .edit(item: item, text: text) }
    }

    struct Done: DataCommand {
        static let configuration = CommandConfiguration(
            commandName: "done", abstract: "Mark an item completed (it goes to the top of completed).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The item (ID prefix or exact text).") var item: String
        @Flag(help: "Print the result as JSON.") var json = false


        var operation: DataOperation { .done(item: item) }
    }

    struct Reopen: DataCommand {
        static let configuration = CommandConfiguration(
            commandName: "reopen", abstract: "Mark a completed item pending again (at the bottom).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The item (ID prefix or exact text).") var item: String
        @Flag(help: "Print the result as JSON.") var json = false


        var operation: DataOperation { .reopen(item: item) }
    }

    struct Move: DataCommand {
        static let configuration = CommandConfiguration(
            commandName: "move",
            abstract: "Move an item: --top, --after ITEM, and/or --to LIST (then to its top unless --after).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The item (ID prefix or exact text).") var item: String
        @OptionGroup var placement: PlacementOptions
        @Option(help: ArgumentHelp("Move it into this list.", valueName: "list")) var to: String?
        @Flag(help: "Print the result as JSON.") var json = false



        var operation: DataOperation { .move(item: item, top: placement.top, after: placement.after, to: to) }
    }

    struct Remove: DataCommand {
        static let configuration = CommandConfiguration(commandName: "rm", abstract: "Delete an item.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The item (ID prefix or exact text).") var item: String
        @Flag(help: "Print the result as JSON.") var json = false


        var operation: DataOperation { .remove(item: item) }
    }
}
