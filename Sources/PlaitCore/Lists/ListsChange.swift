/// Where a list or item goes, relative to others: positions are never array indexes.
public enum Position: Hashable, Sendable {
    case top
    case bottom
    case after(ObjectID)
}

/// A change of the lists domain, version 1. Payloads are protobuf messages documented in `plait.proto`.
public enum ListsChange: Hashable, Sendable {
    case listCreate(id: ObjectID, title: String, color: String?, at: Position)
    case listRename(id: ObjectID, title: String)
    case listRecolor(id: ObjectID, color: String?)
    case listMove(id: ObjectID, at: Position)
    /// Removes the items the author saw in the list: those whose placing change `observed` covers.
    case listDelete(id: ObjectID, observed: Summary)
    case itemCreate(id: ObjectID, list: ObjectID, text: String, at: Position)
    case itemEdit(id: ObjectID, text: String)
    case itemComplete(id: ObjectID)
    case itemReopen(id: ObjectID)
    case itemMove(id: ObjectID, list: ObjectID?, at: Position)
    case itemDelete(id: ObjectID)

    public static let kinds: Set<String> = [
        "list.create", "list.rename", "list.recolor", "list.move", "list.delete",
        "item.create", "item.edit", "item.complete", "item.reopen", "item.move", "item.delete",
    ]

    public var kind: String {
        switch self {
        case .listCreate: return "list.create"
        case .listRename: return "list.rename"
        case .listRecolor: return "list.recolor"
        case .listMove: return "list.move"
        case .listDelete: return "list.delete"
        case .itemCreate: return "item.create"
        case .itemEdit: return "item.edit"
        case .itemComplete: return "item.complete"
        case .itemReopen: return "item.reopen"
        case .itemMove: return "item.move"
        case .itemDelete: return "item.delete"
        }
    }

    public var payload: [UInt8] {
        var writer = ProtoWriter()
        switch self {
        case let .listCreate(id, title, color, at):
            writer.objectID(1, id)
            writer.string(2, title)
            if let color { writer.string(3, color) }
            writer.position(4, at)
        case let .listRename(id, title):
            writer.objectID(1, id)
            writer.string(2, title)
        case let .listRecolor(id, color):
            writer.objectID(1, id)
            if let color { writer.string(2, color) }
        case let .listMove(id, at):
            writer.objectID(1, id)
            writer.position(2, at)
        case let .listDelete(id, observed):
            writer.objectID(1, id)
            for timeline in observed.timelines {
                writer.message(2) { entry in
                    entry.fixed64(1, timeline.rawValue)
                    entry.uint(2, observed[timeline])
                }
            }
        case let .itemCreate(id, list, text, at):
            writer.objectID(1, id)
            writer.objectID(2, list)
            writer.string(3, text)
            writer.position(4, at)
        case let .itemEdit(id, text):
            writer.objectID(1, id)
            writer.string(2, text)
        case let .itemComplete(id), let .itemReopen(id), let .itemDelete(id):
            writer.objectID(1, id)
        case let .itemMove(id, list, at):
            writer.objectID(1, id)
            if let list { writer.objectID(2, list) }
            writer.position(3, at)
        }
        return writer.bytes
    }

    /// Decodes a version-1 payload of a known kind; nil for a kind this build does not know.
    public init?(kind: String, payload: [UInt8]) throws(CoreError) {
        guard Self.kinds.contains(kind) else { return nil }
        var fields = PayloadFields()
        do {
            var reader = ProtoReader(payload)
            while let (field, value) = try reader.next() {
                switch value {
                case .bytes(let slice): fields.bytes[field] = slice
                case .varint(let number), .fixed64(let number): fields.numbers[field] = number
                case .fixed32(let number): fields.numbers[field] = UInt64(number)
                }
                if field == 2 && kind == "list.delete", case .bytes(let slice) = value { fields.entries.append(slice) }
            }
        } catch {
            throw .malformedPayload(kind: kind, reason: error.description)
        }
        do {
            switch kind {
            case "list.create":
                self = .listCreate(
                    id: try fields.id(1), title: try fields.string(2), color: try fields.optionalString(3),
                    at: try fields.position(4))
            case "list.rename": self = .listRename(id: try fields.id(1), title: try fields.string(2))
            case "list.recolor": self = .listRecolor(id: try fields.id(1), color: try fields.optionalString(2))
            case "list.move": self = .listMove(id: try fields.id(1), at: try fields.position(2))
            case "list.delete":
                var observed = Summary()
                for entry in fields.entries {
                    var reader = ProtoReader(entry)
                    var timeline: UInt64?
                    var seq: UInt64 = 0
                    while let (field, value) = try reader.next() {
                        if field == 1 { timeline = try value.uint() } else if field == 2 { seq = try value.uint() }
                    }
                    guard let timeline else { throw CoreError.corruptSnapshot("an observed entry has no timeline") }
                    observed[TimelineID(timeline)] = max(observed[TimelineID(timeline)], seq)
                }
                self = .listDelete(id: try fields.id(1), observed: observed)
            case "item.create":
                self = .itemCreate(
                    id: try fields.id(1), list: try fields.id(2), text: try fields.string(3), at: try fields.position(4))
            case "item.edit": self = .itemEdit(id: try fields.id(1), text: try fields.string(2))
            case "item.complete": self = .itemComplete(id: try fields.id(1))
            case "item.reopen": self = .itemReopen(id: try fields.id(1))
            case "item.delete": self = .itemDelete(id: try fields.id(1))
            case "item.move":
                self = .itemMove(
                    id: try fields.id(1), list: fields.bytes[2] == nil ? nil : try fields.id(2),
                    at: try fields.position(3))
            default: return nil
            }
        } catch let error as CoreError {
            if case .malformedPayload = error { throw error }
            throw .malformedPayload(kind: kind, reason: error.description)
        } catch {
            throw .malformedPayload(kind: kind, reason: "\(error)")
        }
    }
}

private struct PayloadFields {
    var bytes: [UInt32: ArraySlice<UInt8>] = [:]
    var numbers: [UInt32: UInt64] = [:]
    var entries: [ArraySlice<UInt8>] = []

    func id(_ field: UInt32) throws(CoreError) -> ObjectID {
        guard let slice = bytes[field] else { throw .corruptSnapshot("field \(field) (an ID) is missing") }
        return try ObjectID(bytes: slice)
    }

    func string(_ field: UInt32) throws(CoreError) -> String {
        guard let slice = bytes[field] else { return "" }
        return try ProtoReader.Value.bytes(slice).string()
    }

    func optionalString(_ field: UInt32) throws(CoreError) -> String? {
        bytes[field] == nil ? nil : try string(field)
    }

    func position(_ field: UInt32) throws(CoreError) -> Position {
        guard let slice = bytes[field] else { return .bottom }
        var reader = ProtoReader(slice)
        var result = Position.bottom
        while let (number, value) = try reader.next() {
            switch number {
            case 1: if try value.bool() { result = .top }
            case 2: if try value.bool() { result = .bottom }
            case 3: result = .after(try value.objectID())
            default: continue
            }
        }
        return result
    }
}

extension ProtoWriter {
    mutating func position(_ field: UInt32, _ position: Position) {
        message(field) { inner in
            switch position {
            case .top: inner.bool(1, true)
            case .bottom: inner.bool(2, true)
            case let .after(id): inner.objectID(3, id)
            }
        }
    }
}
