import PlaitCore
import PlaitOutput

extension ReadOutputs {
    /// `plait show [LIST] --json` written straight from the state, list by list and item by item, as
    /// `JSONStreamEncoder` would encode `show(state, list:)` (a test holds them equal), without building the value:
    /// 100,000 items cost a buffer, not a copy. The CLI streams it to standard output, the agent into its answer
    /// to GET /api/show (building and encoding the value there took most of `plait show --json`'s time through
    /// the agent).
    public static func streamShow(_ state: ListsState, list: String?, into writer: JSONWriter) throws {
        let ids = try list.map { [try Resolve.list($0, in: state)] } ?? state.liveListIDs
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
            try streamItems(in: id, completed: true, of: state, into: writer)
            writer.key(Keys.id.stringValue)
            try writer.objectID(id)
            writer.key(Keys.pending.stringValue)
            try streamItems(in: id, completed: false, of: state, into: writer)
            writer.key(Keys.title.stringValue)
            try writer.string(list.title)
            try writer.end()
        }
        try writer.end()
        try writer.end()
    }

    /// One section's items as an array of `ShowItem`.
    private static func streamItems(
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
