import Foundation
import GRDB
import PlaitCore

extension Store {
    /// The list item `id` is in as the stored rows say (nil: no such row): one primary-key read, for naming an
    /// item's list in an event without loading the state (the agent's events, DESIGN §12).
    public func list(ofItem id: ObjectID) throws -> ObjectID? {
        try read { db in
            let sql = "SELECT list FROM items WHERE id = ?"
            guard let data = try Data.fetchOne(db, sql: sql, arguments: [Data(id.bytes)]) else { return nil }
            return try? ObjectID(bytes: [UInt8](data))
        }
    }
}
