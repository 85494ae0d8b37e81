import PlaitCore
import PlaitOutput
import PlaitStore
import PlaitSync

/// One data edit as the user asked for it, with names not yet resolved.
public enum DataOperation: Equatable, Sendable {
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

    public func validate() throws {
        switch self {
        case let .listAdd(title, _, _, _), let .listRename(_, title):
            if Self.isBlank(title) {
                throw CommandError.invalid("a list needs a title with something visible in it, not '\(title.terminalSafe)'")
            }
        case let .add(_, text, _, _), let .edit(_, text):
            if Self.isBlank(text) {
                throw CommandError.invalid("an item needs text with something visible in it, not '\(text.terminalSafe)'")
            }
        default: break
        }
        switch self {
        case let .listAdd(_, _, top, after), let .add(_, _, top, after):
            if top && after != nil { throw CommandError.invalid("give either --top or --after, not both") }
        case let .listMove(_, top, after):
            if top && after != nil { throw CommandError.invalid("give either --top or --after, not both") }
            if !top && after == nil { throw CommandError.invalid("say where: --top or --after LIST") }
        case let .move(_, top, after, to):
            if top && after != nil { throw CommandError.invalid("give either --top or --after, not both") }
            if !top && after == nil && to == nil { throw CommandError.invalid("say where: --top, --after ITEM or --to LIST") }
        default: break
        }
    }

    /// Whether a title or text would show nothing: empty, or only spaces, line breaks, controls and
    /// invisible format characters (a zero-width space, a bidi mark).
    public static func isBlank(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy { scalar in
            scalar.properties.isWhitespace || scalar.properties.isDefaultIgnorableCodePoint
                || [.control, .format].contains(scalar.properties.generalCategory)
        }
    }

    /// Said after a list's title when other live lists have the same one: commands then need the list's ID (a new
    /// user made two "Groceries" and was asked for "a longer ID prefix" ever after). Empty when none has.
    static func namesakes(of title: String, besides id: ObjectID, in state: ListsState) -> String {
        let same = state.liveListIDs.filter { $0 != id && state.lists[$0]!.title == title }
        guard !same.isEmpty else { return "" }
        return "; note: \(same.count == 1 ? "another list has" : "\(same.count) other lists have") this title ("
            + same.map(Resolve.short).joined(separator: ", ") + "): name these lists by ID from now on"
    }

    /// Resolves names against the edit's current state and appends the change.
    public func perform(_ edit: Replica.LocalEdit) throws -> (message: String, output: EditOutput) {
        switch self {
        case let .listAdd(title, color, top, after):
            let position: Position = try after.map { .after(try Resolve.list($0, in: edit.state)) } ?? (top ? .top : .bottom)
            let id = ObjectID.random()
            let namesake = Self.namesakes(of: title, besides: id, in: edit.state)
            try edit.append(.listCreate(id: id, title: title, color: color, at: position))
            return (
                "created list '\(title.shownInMessage)' (\(Resolve.short(id)))" + namesake,
                EditOutput(id: id.description, title: title))
        case let .listRename(list, title):
            let id = try Resolve.list(list, in: edit.state)
            let namesake = Self.namesakes(of: title, besides: id, in: edit.state)
            try edit.append(.listRename(id: id, title: title))
            return (
                "renamed list \(Resolve.short(id)) to '\(title.shownInMessage)'" + namesake,
                EditOutput(id: id.description, title: title))
        case let .listRecolor(list, color):
            let id = try Resolve.list(list, in: edit.state)
            let value = color == "none" ? nil : color
            try edit.append(.listRecolor(id: id, color: value))
            return (
                "recolored list \(Resolve.short(id)) to \(value?.shownInMessage ?? "none")",
                EditOutput(id: id.description, color: .some(value)))
        case let .listMove(list, _, after):
            let id = try Resolve.list(list, in: edit.state)
            let position: Position = try after.map { .after(try Resolve.list($0, in: edit.state)) } ?? .top
            if case let .after(anchor) = position, anchor == id { throw CommandError.invalid("a list cannot go after itself") }
            try edit.append(.listMove(id: id, at: position))
            return ("moved list \(Resolve.short(id))", EditOutput(id: id.description))
        case let .listRemove(list):
            let id = try Resolve.list(list, in: edit.state)
            let title = edit.state.lists[id]!.title
            try edit.append(try edit.listDelete(id))
            return ("deleted list '\(title.shownInMessage)' (\(Resolve.short(id)))", EditOutput(id: id.description))
        case let .add(list, text, top, after):
            let listID = try Resolve.list(list, in: edit.state)
            let position: Position = try after.map { .after(try Resolve.item($0, in: edit.state, list: listID)) }
                ?? (top ? .top : .bottom)
            let id = ObjectID.random()
            try edit.append(.itemCreate(id: id, list: listID, text: text, at: position))
            let listTitle = edit.state.lists[listID]!.title.shownInMessage
            return ("added '\(text.shownInMessage)' (\(Resolve.short(id))) to \(listTitle)",
                EditOutput(id: id.description, list: listID.description, text: text))
        case let .edit(item, text):
            let id = try Resolve.item(item, in: edit.state)
            // The same text again is no edit: no change is written (a new user's `edit rice rice` appended one each
            // time, which every device then stores and replays).
            guard edit.state.items[id]?.text != text else {
                return (
                    "\(Resolve.short(id)) already reads '\(text.shownInMessage)'; nothing was changed",
                    EditOutput(id: id.description, text: text))
            }
            try edit.append(.itemEdit(id: id, text: text))
            return ("edited \(Resolve.short(id)): '\(text.shownInMessage)'", EditOutput(id: id.description, text: text))
        case let .done(item):
            let id = try Resolve.item(item, in: edit.state, prefer: { !$0.completed })
            let record = edit.state.items[id]!
            guard !record.completed else {
                throw PlaitError.usage("'\(record.text.shownInMessage)' is already completed; nothing was changed.")
            }
            try edit.append(.itemComplete(id: id))
            return ("completed '\(record.text.shownInMessage)'", EditOutput(id: id.description))
        case let .reopen(item):
            let id = try Resolve.item(item, in: edit.state, prefer: { $0.completed })
            let record = edit.state.items[id]!
            guard record.completed else {
                throw PlaitError.usage("'\(record.text.shownInMessage)' is not completed; nothing was changed.")
            }
            try edit.append(.itemReopen(id: id))
            return ("reopened '\(record.text.shownInMessage)'", EditOutput(id: id.description))
        case let .move(item, _, after, to):
            let id = try Resolve.item(item, in: edit.state)
            let target = try to.map { try Resolve.list($0, in: edit.state) }
            let scope = target ?? edit.state.items[id]!.list
            let position: Position = try after.map { .after(try Resolve.item($0, in: edit.state, list: scope)) } ?? .top
            if case let .after(anchor) = position, anchor == id { throw CommandError.invalid("an item cannot go after itself") }
            try edit.append(.itemMove(id: id, list: target, at: position))
            return ("moved '\(edit.state.items[id]!.text.shownInMessage)'", EditOutput(id: id.description))
        case let .remove(item):
            let id = try Resolve.item(item, in: edit.state)
            let text = edit.state.items[id]!.text
            try edit.append(.itemDelete(id: id))
            return ("deleted '\(text.shownInMessage)' (\(Resolve.short(id)))", EditOutput(id: id.description))
        }
    }
}

/// The JSON form of a data edit, as `POST /api/edit` takes it (and the CLI sends it to a running agent):
/// `{"op": "add", "list": "Groceries", "text": "milk", "top": true}`. `op` names the command as typed after
/// `plait` with a dot for `list` ones ("list.add", "list.rename", "list.recolor", "list.move", "list.rm", "add",
/// "edit", "done", "reopen", "move", "rm"); the fields are the command's arguments and options by their names.
extension DataOperation: Codable {
    /// Every field any operation takes; which ones an operation needs is checked in `init(from:)`.
    private struct Fields: Codable {
        var op: String
        var list: String?
        var item: String?
        var title: String?
        var text: String?
        var color: String?
        var top: Bool?
        var after: String?
        var to: String?
    }

    /// The names `op` accepts, in the order the CLI's help lists the commands.
    public static let operationNames = [
        "list.add", "list.rename", "list.recolor", "list.move", "list.rm", "add", "edit", "done", "reopen", "move",
        "rm",
    ]

    public var operationName: String {
        switch self {
        case .listAdd: return "list.add"
        case .listRename: return "list.rename"
        case .listRecolor: return "list.recolor"
        case .listMove: return "list.move"
        case .listRemove: return "list.rm"
        case .add: return "add"
        case .edit: return "edit"
        case .done: return "done"
        case .reopen: return "reopen"
        case .move: return "move"
        case .remove: return "rm"
        }
    }

    public init(from decoder: any Decoder) throws {
        let fields = try Fields(from: decoder)
        let op = fields.op
        // A field the operation does not take is refused, as the CLI refuses an unknown option: a typo such as
        // "after" sent to "edit" must not be silently ignored.
        let given: [(String, Bool)] = [
            ("list", fields.list != nil), ("item", fields.item != nil), ("title", fields.title != nil),
            ("text", fields.text != nil), ("color", fields.color != nil), ("top", fields.top != nil),
            ("after", fields.after != nil), ("to", fields.to != nil),
        ]
        func require(_ name: String, _ value: String?) throws -> String {
            guard let value else { throw CommandError.malformed("\"\(op)\" needs the field \"\(name)\"") }
            return value
        }
        func allow(_ names: Set<String>) throws {
            if let extra = given.first(where: { $0.1 && !names.contains($0.0) }) {
                throw CommandError.malformed("\"\(op)\" takes no field \"\(extra.0)\" (it takes: "
                    + names.sorted().joined(separator: ", ") + ")")
            }
        }
        let top = fields.top ?? false
        switch op {
        case "list.add":
            try allow(["title", "color", "top", "after"])
            self = .listAdd(
                title: try require("title", fields.title), color: fields.color, top: top, after: fields.after)
        case "list.rename":
            try allow(["list", "title"])
            self = .listRename(list: try require("list", fields.list), title: try require("title", fields.title))
        case "list.recolor":
            try allow(["list", "color"])
            self = .listRecolor(list: try require("list", fields.list), color: try require("color", fields.color))
        case "list.move":
            try allow(["list", "top", "after"])
            self = .listMove(list: try require("list", fields.list), top: top, after: fields.after)
        case "list.rm":
            try allow(["list"])
            self = .listRemove(list: try require("list", fields.list))
        case "add":
            try allow(["list", "text", "top", "after"])
            self = .add(list: try require("list", fields.list), text: try require("text", fields.text), top: top,
                after: fields.after)
        case "edit":
            try allow(["item", "text"])
            self = .edit(item: try require("item", fields.item), text: try require("text", fields.text))
        case "done":
            try allow(["item"])
            self = .done(item: try require("item", fields.item))
        case "reopen":
            try allow(["item"])
            self = .reopen(item: try require("item", fields.item))
        case "move":
            try allow(["item", "top", "after", "to"])
            self = .move(item: try require("item", fields.item), top: top, after: fields.after, to: fields.to)
        case "rm":
            try allow(["item"])
            self = .remove(item: try require("item", fields.item))
        default:
            throw CommandError.malformed(
                "unknown op '\(op.terminalExcerpt(limit: 40))'; it is one of "
                    + Self.operationNames.joined(separator: ", "))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var fields = Fields(op: operationName)
        switch self {
        case let .listAdd(title, color, top, after):
            fields.title = title
            fields.color = color
            fields.top = top ? true : nil
            fields.after = after
        case let .listRename(list, title):
            fields.list = list
            fields.title = title
        case let .listRecolor(list, color):
            fields.list = list
            fields.color = color
        case let .listMove(list, top, after):
            fields.list = list
            fields.top = top ? true : nil
            fields.after = after
        case let .listRemove(list): fields.list = list
        case let .add(list, text, top, after):
            fields.list = list
            fields.text = text
            fields.top = top ? true : nil
            fields.after = after
        case let .edit(item, text):
            fields.item = item
            fields.text = text
        case let .done(item), let .reopen(item), let .remove(item): fields.item = item
        case let .move(item, top, after, to):
            fields.item = item
            fields.top = top ? true : nil
            fields.after = after
            fields.to = to
        }
        try fields.encode(to: encoder)
    }
}

extension String {
    /// A text or title as an edit's sentence shows it: terminal-safe, and cut after 200 characters with the size
    /// said. The sentence travels as an HTTP header from the agent (`Plait-Message`): with a 280 KB item whole in
    /// it, curl and Python failed on the header and the page called the stored edit a failure, so a retry stored it
    /// again (hostile tester 2026-11-25, G1).
    var shownInMessage: String { terminalExcerpt(limit: 200) }
}
