import ArgumentParser
import Foundation
import PlaitCommands
import PlaitCore
import PlaitOutput
import PlaitStore
import PlaitSync

extension Plait {
    struct Lists: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the lists, in order, with item counts.")
        @OptionGroup var global: GlobalOptions
        @Flag(help: "Print the result as JSON.") var json = false

        func run() throws {
            let state = try global.openHome().replica.state
            let rows = ReadOutputs.lists(state).lists
            if json {
                try printJSON(ListsOutput(lists: rows))
                return
            }
            if rows.isEmpty { print("no lists yet: create one with `plait list add TITLE`") }
            for row in rows {
                let color = row.color.map { " (\($0.terminalSafe))" } ?? ""
                print("\(row.id.prefix(8))  \(row.title.terminalSafe)\(color)  \(row.pending) pending, "
                    + "\(row.completed) done")
            }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show lists and their items in display order.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "Only this list (title or ID prefix).") var list: String?
        @Flag(help: "Print the result as JSON.") var json = false

        func run() throws {
            let state = try global.openHome().replica.state
            let ids = try list.map { [try Resolve.list($0, in: state)] } ?? state.liveListIDs
            if json {
                try writeJSON { writer in try Self.stream(ids, of: state, into: writer) }
                return
            }
            if ids.isEmpty { print("no lists yet: create one with `plait list add TITLE`") }
            for id in ids {
                guard let list = state.lists[id] else { continue }
                let color = list.color.map { " (\($0.terminalSafe))" } ?? ""
                print("\(list.title.terminalSafe)\(color)  [\(Resolve.short(id))]")
                for item in state.itemIDs(in: id, completed: false) {
                    print("  [ ] \((state.items[item]?.text ?? "").terminalSafe)  \(Resolve.short(item))")
                }
                for item in state.itemIDs(in: id, completed: true) {
                    print("  [x] \((state.items[item]?.text ?? "").terminalSafe)  \(Resolve.short(item))")
                }
            }
        }

        /// Writes `ShowOutput` for `ids` list by list and item by item, as `JSONStreamEncoder` would encode the
        /// whole value (a test holds them equal), without building it: 100,000 items cost a buffer, not a copy.
        static func stream(_ ids: [ObjectID], of state: ListsState, into writer: JSONWriter) throws {
            typealias Keys = ShowList.CodingKeys
            writer.beginObject()
            writer.key(ShowOutput.CodingKeys.lists.stringValue)
            writer.beginArray()
            for id in ids {
                guard let list = state.lists[id] else { continue }
                writer.beginObject()
                writer.key(Keys.color.stringValue)
                if let color = list.color { try writer.string(color) } else { writer.null() }
                writer.key(Keys.completed.stringValue)
                try items(in: id, completed: true, of: state, into: writer)
                writer.key(Keys.id.stringValue)
                try writer.objectID(id)
                writer.key(Keys.pending.stringValue)
                try items(in: id, completed: false, of: state, into: writer)
                writer.key(Keys.title.stringValue)
                try writer.string(list.title)
                try writer.end()
            }
            try writer.end()
            try writer.end()
        }

        /// One section's items as an array of `ShowItem`.
        private static func items(
            in list: ObjectID, completed: Bool, of state: ListsState, into writer: JSONWriter
        ) throws {
            writer.beginArray()
            try state.forEachItem(in: list, completed: completed) { id, item in
                try writer.object(
                    ShowItem.CodingKeys.id.stringValue, id: id, ShowItem.CodingKeys.text.stringValue, text: item.text)
            }
            try writer.end()
        }
    }

    struct Log: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show stored changes in replay order: timeline:seq, Lamport time, kind, description.",
            discussion: "Changes folded into the baseline are no longer listed (see `plait status`).")
        @OptionGroup var global: GlobalOptions
        // Unconditional, so `--limit -1` reaches validate() instead of being taken for an option.
        @Option(parsing: .unconditional, help: "Show only the newest N changes.") var limit: Int?
        @Flag(help: "Print the result as JSON.") var json = false

        func validate() throws {
            if let limit, limit < 0 { throw ValidationError("--limit must be 0 or more") }
        }

        func run() throws {
            let home = try global.openHome()
            let rows = try ReadOutputs.log(home, limit: limit).changes
            if json {
                try printJSON(LogOutput(changes: rows))
                return
            }
            for row in rows {
                print("\(row.change)  \(row.lamport)  \(row.kind.terminalSafe)  \(row.description.terminalSafe)  \(row.time)")
            }
        }
    }
}
