import ArgumentParser
import Foundation
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
    func validate() throws { try operation.validate() }

    func run() throws {
        let home = try global.openHome()
        let result = try home.replica.edit { edit in try operation.perform(edit) }
        if json { try printJSON(result.output) } else { print(result.message) }
    }
}

/// `--top` / `--after X` as one position.
struct PlacementOptions: ParsableArguments {
    @Flag(help: "Put it at the top.")
    var top = false

    @Option(help: ArgumentHelp("Put it right after this one.", valueName: "other"))
    var after: String?
}

/// One data edit as the user asked for it, with names not yet resolved.
enum DataOperation: Equatable {
    case listAdd(title: String, color: String?, top: Bool, after: String?)
    case listRename(list: String, title: String)
    case listRecolor(list: String, color: String)
    case listMove(list: String, top: Bool, after: String?)
    case listRemove(list: String)
    case add(list: String, text: String, top: Bool, after: String?)
    case edit(item: String, text: String)
    case done(item: String)
    case reopen(item: String)
    case move(item: String, top: Bool, after: String?, to: String?)
    case remove(item: String)

    func validate() throws {
        switch self {
        case let .listAdd(title, _, _, _), let .listRename(_, title):
            if Self.isBlank(title) {
                throw ValidationError("a list needs a title with something visible in it, not '\(title.terminalSafe)'")
            }
        case let .add(_, text, _, _), let .edit(_, text):
            if Self.isBlank(text) {
                throw ValidationError("an item needs text with something visible in it, not '\(text.terminalSafe)'")
            }
        default: break
        }
        switch self {
        case let .listAdd(_, _, top, after), let .add(_, _, top, after):
            if top && after != nil { throw ValidationError("give either --top or --after, not both") }
        case let .listMove(_, top, after):
            if top && after != nil { throw ValidationError("give either --top or --after, not both") }
            if !top && after == nil { throw ValidationError("say where: --top or --after LIST") }
        case let .move(_, top, after, to):
            if top && after != nil { throw ValidationError("give either --top or --after, not both") }
            if !top && after == nil && to == nil { throw ValidationError("say where: --top, --after ITEM or --to LIST") }
        default: break
        }
    }

    /// Whether a title or text would show nothing: empty, or only spaces, line breaks, controls and
    /// invisible format characters (a zero-width space, a bidi mark).
    static func isBlank(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy { scalar in
            scalar.properties.isWhitespace || scalar.properties.isDefaultIgnorableCodePoint
                || [.control, .format].contains(scalar.properties.generalCategory)
        }
    }

    /// Resolves names against the edit's current state and appends the change.
    func perform(_ edit: Replica.LocalEdit) throws -> (message: String, output: EditOutput) {
        switch self {
        case let .listAdd(title, color, top, after):
            let position: Position = try after.map { .after(try Resolve.list($0, in: edit.state)) } ?? (top ? .top : .bottom)
            let id = ObjectID.random()
            try edit.append(.listCreate(id: id, title: title, color: color, at: position))
            return (
                "created list '\(title.terminalSafe)' (\(Resolve.short(id)))", EditOutput(id: id.description, title: title))
        case let .listRename(list, title):
            let id = try Resolve.list(list, in: edit.state)
            try edit.append(.listRename(id: id, title: title))
            return (
                "renamed list \(Resolve.short(id)) to '\(title.terminalSafe)'", EditOutput(id: id.description, title: title))
        case let .listRecolor(list, color):
            let id = try Resolve.list(list, in: edit.state)
            let value = color == "none" ? nil : color
            try edit.append(.listRecolor(id: id, color: value))
            return (
                "recolored list \(Resolve.short(id)) to \(value?.terminalSafe ?? "none")",
                EditOutput(id: id.description, color: .some(value)))
        case let .listMove(list, _, after):
            let id = try Resolve.list(list, in: edit.state)
            let position: Position = try after.map { .after(try Resolve.list($0, in: edit.state)) } ?? .top
            if case let .after(anchor) = position, anchor == id { throw ValidationError("a list cannot go after itself") }
            try edit.append(.listMove(id: id, at: position))
            return ("moved list \(Resolve.short(id))", EditOutput(id: id.description))
        case let .listRemove(list):
            let id = try Resolve.list(list, in: edit.state)
            let title = edit.state.lists[id]!.title
            let observed = try edit.observedSummary()
            try edit.append(.listDelete(id: id, observed: observed))
            return ("deleted list '\(title.terminalSafe)' (\(Resolve.short(id)))", EditOutput(id: id.description))
        case let .add(list, text, top, after):
            let listID = try Resolve.list(list, in: edit.state)
            let position: Position = try after.map { .after(try Resolve.item($0, in: edit.state, list: listID)) }
                ?? (top ? .top : .bottom)
            let id = ObjectID.random()
            try edit.append(.itemCreate(id: id, list: listID, text: text, at: position))
            let listTitle = edit.state.lists[listID]!.title.terminalSafe
            return ("added '\(text.terminalSafe)' (\(Resolve.short(id))) to \(listTitle)",
                EditOutput(id: id.description, list: listID.description, text: text))
        case let .edit(item, text):
            let id = try Resolve.item(item, in: edit.state)
            try edit.append(.itemEdit(id: id, text: text))
            return ("edited \(Resolve.short(id)): '\(text.terminalSafe)'", EditOutput(id: id.description, text: text))
        case let .done(item):
            let id = try Resolve.item(item, in: edit.state, prefer: { !$0.completed })
            let record = edit.state.items[id]!
            guard !record.completed else {
                throw PlaitError.usage("'\(record.text.terminalSafe)' is already completed; nothing was changed.")
            }
            try edit.append(.itemComplete(id: id))
            return ("completed '\(record.text.terminalSafe)'", EditOutput(id: id.description))
        case let .reopen(item):
            let id = try Resolve.item(item, in: edit.state, prefer: { $0.completed })
            let record = edit.state.items[id]!
            guard record.completed else {
                throw PlaitError.usage("'\(record.text.terminalSafe)' is not completed; nothing was changed.")
            }
            try edit.append(.itemReopen(id: id))
            return ("reopened '\(record.text.terminalSafe)'", EditOutput(id: id.description))
        case let .move(item, _, after, to):
            let id = try Resolve.item(item, in: edit.state)
            let target = try to.map { try Resolve.list($0, in: edit.state) }
            let scope = target ?? edit.state.items[id]!.list
            let position: Position = try after.map { .after(try Resolve.item($0, in: edit.state, list: scope)) } ?? .top
            if case let .after(anchor) = position, anchor == id { throw ValidationError("an item cannot go after itself") }
            try edit.append(.itemMove(id: id, list: target, at: position))
            return ("moved '\(edit.state.items[id]!.text.terminalSafe)'", EditOutput(id: id.description))
        case let .remove(item):
            let id = try Resolve.item(item, in: edit.state)
            let text = edit.state.items[id]!.text
            try edit.append(.itemDelete(id: id))
            return ("deleted '\(text.terminalSafe)' (\(Resolve.short(id)))", EditOutput(id: id.description))
        }
    }
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
        static let configuration = CommandConfiguration(commandName: "move", abstract: "Move a list (--top or --after LIST).")
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
            abstract: "Add an item to a list (at the bottom of pending, or --top / --after ITEM).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The list (title or ID prefix).") var list: String
        @Argument(help: "The item's text.") var text: String
        @OptionGroup var placement: PlacementOptions
        @Flag(help: "Print the result as JSON.") var json = false


        var operation: DataOperation { .add(list: list, text: text, top: placement.top, after: placement.after) }
    }

    struct Edit: DataCommand {
        static let configuration = CommandConfiguration(abstract: "Change an item's text.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The item (ID prefix or exact text).") var item: String
        @Argument(help: "The new text.") var text: String
        @Flag(help: "Print the result as JSON.") var json = false


        var operation: DataOperation { .edit(item: item, text: text) }
    }

    struct Done: DataCommand {
        static let configuration = CommandConfiguration(abstract: "Mark an item completed (it goes to the top of completed).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The item (ID prefix or exact text).") var item: String
        @Flag(help: "Print the result as JSON.") var json = false


        var operation: DataOperation { .done(item: item) }
    }

    struct Reopen: DataCommand {
        static let configuration = CommandConfiguration(abstract: "Mark a completed item pending again (at the bottom).")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "The item (ID prefix or exact text).") var item: String
        @Flag(help: "Print the result as JSON.") var json = false


        var operation: DataOperation { .reopen(item: item) }
    }

    struct Move: DataCommand {
        static let configuration = CommandConfiguration(
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
