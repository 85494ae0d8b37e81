/// Where a list or item goes, relative to others: positions are never array indexes.
public enum Position: Hashable, Sendable {
    case top
    case bottom
    case after(ObjectID)
}

/// A change of the lists domain. Payloads are protobuf messages documented in `plait.proto`. Every kind is at
/// version 1 except `list.delete`, which has a version 2 that names the head hash of each timeline observed.
public enum ListsChange: Hashable, Sendable {
    case listCreate(id: ObjectID, title: String, color: String?, at: Position)
    case listRename(id: ObjectID, title: String)
    case listRecolor(id: ObjectID, color: String?)
    case listMove(id: ObjectID, at: Position)
    /// Removes the items the author saw in the list: those whose placing change the observed chains cover.
    /// `heads` nil is version 1 (a summary); version 2 carries, for each timeline of `observed`, the hash of the
    /// change at its number, so it covers exactly that chain whatever a fork renames it to (PROTOCOL.md §22.6).
    case listDelete(id: ObjectID, observed: Summary, heads: [TimelineID: [UInt8]]? = nil)
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

    /// The change's version: 2 for a `list.delete` with head hashes, else 1.
    public var version: UInt32 {
        if case .listDelete(_, _, .some) = self { return 2 }
        return 1
    }

    /// The newest version of each kind this build interprets.
    public static func newestVersion(of kind: String) -> UInt32 { kind == "list.delete" ? 2 : 1 }

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
        case let .listDelete(id, observed, heads):
            writer.objectID(1, id)
            for timeline in observed.timelines {
                writer.message(2) { entry in
                    entry.fixed64(1, timeline.rawValue)
                    entry.uint(2, observed[timeline])
                    if let hash = heads?[timeline] { entry.data(3, hash) }
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

    /// Decodes a payload of a known kind at `version`; nil for a kind this build does not know.
    public init?(kind: String, version: UInt32 = 1, payload: [UInt8]) throws(CoreError) {
        guard let code = KindCode(kind) else { return nil }
        let decoded = payload.withUnsafeBytes { raw in
            Result { () throws(CoreError) in try Self.decode(code, version: version, raw) }
        }
        switch decoded {
        case let .success(change): self = change
        case let .failure(error):
            if case .malformedPayload = error { throw error }
            throw .malformedPayload(kind: kind, reason: error.reason)
        }
    }

    /// Decodes straight from the payload's bytes: replay decodes every change, so no slices, no dictionaries.
    private static func decode(_ code: KindCode, version: UInt32, _ raw: UnsafeRawBufferPointer) throws(CoreError)
        -> ListsChange
    {
        var fields = RawFields()
        var reader = RawProtoReader(raw)
        var entries: [Range<Int>] = []
        while let field = try reader.next() {
            guard let range = field.bytes else { continue }
            if code == .listDelete && field.number == 2 { entries.append(range) } else { fields[field.number] = range }
        }
        func id(_ number: UInt32) throws(CoreError) -> ObjectID {
            guard let range = fields[number] else { throw .corruptSnapshot("field \(number) (an ID) is missing") }
            guard range.count == 16 else { throw .corruptSnapshot("an ID is \(range.count) bytes, not 16") }
            return ObjectID(raw: UnsafeRawBufferPointer(rebasing: raw[range]))
        }
        func string(_ number: UInt32) throws(CoreError) -> String {
            guard let range = fields[number] else { return "" }
            let bytes = UnsafeRawBufferPointer(rebasing: raw[range]).bindMemory(to: UInt8.self)
            guard let text = String(validating: bytes, as: UTF8.self) else { throw .corruptSnapshot("invalid UTF-8") }
            return text
        }
        func optionalString(_ number: UInt32) throws(CoreError) -> String? {
            fields[number] == nil ? nil : try string(number)
        }
        func position(_ number: UInt32) throws(CoreError) -> Position {
            guard let range = fields[number] else { return .bottom }
            var inner = RawProtoReader(UnsafeRawBufferPointer(rebasing: raw[range]))
            var result = Position.bottom
            while let field = try inner.next() {
                switch field.number {
                case 1: if field.value != 0 { result = .top }
                case 2: if field.value != 0 { result = .bottom }
                case 3:
                    guard let bytes = field.bytes, bytes.count == 16 else { throw .corruptSnapshot("a bad anchor ID") }
                    let start = range.lowerBound + bytes.lowerBound
                    result = .after(ObjectID(raw: UnsafeRawBufferPointer(rebasing: raw[start..<start + 16])))
                default: continue
                }
            }
            return result
        }
        switch code {
        case .listCreate:
            return .listCreate(id: try id(1), title: try string(2), color: try optionalString(3), at: try position(4))
        case .listRename: return .listRename(id: try id(1), title: try string(2))
        case .listRecolor: return .listRecolor(id: try id(1), color: try optionalString(2))
        case .listMove: return .listMove(id: try id(1), at: try position(2))
        case .listDelete:
            var observed = Summary()
            var heads: [TimelineID: [UInt8]]? = version >= 2 ? [:] : nil
            for range in entries {
                var inner = RawProtoReader(UnsafeRawBufferPointer(rebasing: raw[range]))
                var timeline: UInt64?
                var seq: UInt64 = 0
                var hash: [UInt8]?
                while let field = try inner.next() {
                    switch field.number {
                    case 1: timeline = field.value
                    case 2: seq = field.value
                    case 3:
                        guard let bytes = field.bytes else { continue }
                        let start = range.lowerBound + bytes.lowerBound
                        hash = Array(UnsafeRawBufferPointer(rebasing: raw[start..<start + bytes.count]))
                    default: continue
                    }
                }
                guard let timeline else { throw .corruptSnapshot("an observed entry has no timeline") }
                // Version 2 names one chain per timeline: a second entry or a missing hash is not canonical.
                if heads != nil {
                    guard let hash, hash.count == 32 else {
                        throw .corruptSnapshot("an observed entry of version 2 has no 32-byte head hash")
                    }
                    guard heads![TimelineID(timeline)] == nil else {
                        throw .corruptSnapshot("a timeline is observed twice")
                    }
                    heads![TimelineID(timeline)] = hash
                }
                observed[TimelineID(timeline)] = max(observed[TimelineID(timeline)], seq)
            }
            return .listDelete(id: try id(1), observed: observed, heads: heads)
        case .itemCreate:
            return .itemCreate(id: try id(1), list: try id(2), text: try string(3), at: try position(4))
        case .itemEdit: return .itemEdit(id: try id(1), text: try string(2))
        case .itemComplete: return .itemComplete(id: try id(1))
        case .itemReopen: return .itemReopen(id: try id(1))
        case .itemDelete: return .itemDelete(id: try id(1))
        case .itemMove:
            return .itemMove(id: try id(1), list: fields[2] == nil ? nil : try id(2), at: try position(3))
        }
    }
}

/// The kinds of version 1, matched once per change.
enum KindCode {
    case listCreate, listRename, listRecolor, listMove, listDelete
    case itemCreate, itemEdit, itemComplete, itemReopen, itemMove, itemDelete

    init?(_ kind: String) {
        switch kind {
        case "item.edit": self = .itemEdit
        case "item.create": self = .itemCreate
        case "item.complete": self = .itemComplete
        case "item.reopen": self = .itemReopen
        case "item.move": self = .itemMove
        case "item.delete": self = .itemDelete
        case "list.create": self = .listCreate
        case "list.rename": self = .listRename
        case "list.recolor": self = .listRecolor
        case "list.move": self = .listMove
        case "list.delete": self = .listDelete
        default: return nil
        }
    }
}

/// Byte ranges of fields 1…4 (payloads have no more).
private struct RawFields {
    var slots: (Range<Int>?, Range<Int>?, Range<Int>?, Range<Int>?) = (nil, nil, nil, nil)

    subscript(number: UInt32) -> Range<Int>? {
        get {
            switch number {
            case 1: return slots.0
            case 2: return slots.1
            case 3: return slots.2
            case 4: return slots.3
            default: return nil
            }
        }
        set {
            switch number {
            case 1: slots.0 = newValue
            case 2: slots.1 = newValue
            case 3: slots.2 = newValue
            case 4: slots.3 = newValue
            default: break
            }
        }
    }
}

/// A protobuf reader over raw bytes: yields each field's number and either its integer value or the range
/// of its bytes (relative to the buffer).
struct RawProtoReader {
    struct Field {
        var number: UInt32
        var value: UInt64
        var bytes: Range<Int>?
    }

    let raw: UnsafeRawBufferPointer
    var index = 0

    init(_ raw: UnsafeRawBufferPointer) { self.raw = raw }

    @inline(__always) mutating func varint() throws(CoreError) -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard index < raw.count else { throw .corruptSnapshot("truncated varint") }
            guard shift < 64 else { throw .corruptSnapshot("varint longer than 10 bytes") }
            let byte = raw[index]
            index += 1
            result |= UInt64(byte & 0x7f) << shift
            if byte & 0x80 == 0 { return result }
            shift += 7
        }
    }

    mutating func next() throws(CoreError) -> Field? {
        guard index < raw.count else { return nil }
        let key = try varint()
        let number = UInt32(truncatingIfNeeded: key >> 3)
        guard number > 0 else { throw .corruptSnapshot("field number 0") }
        switch key & 7 {
        case 0: return Field(number: number, value: try varint(), bytes: nil)
        case 1:
            guard raw.count - index >= 8 else { throw .corruptSnapshot("truncated fixed64") }
            var value: UInt64 = 0
            for offset in 0..<8 { value |= UInt64(raw[index + offset]) << UInt64(offset * 8) }
            index += 8
            return Field(number: number, value: value, bytes: nil)
        case 2:
            let length = try varint()
            guard length <= UInt64(raw.count - index) else { throw .corruptSnapshot("length beyond the end") }
            let range = index..<index + Int(length)
            index += Int(length)
            return Field(number: number, value: 0, bytes: range)
        case 5:
            guard raw.count - index >= 4 else { throw .corruptSnapshot("truncated fixed32") }
            var value: UInt64 = 0
            for offset in 0..<4 { value |= UInt64(raw[index + offset]) << UInt64(offset * 8) }
            index += 4
            return Field(number: number, value: value, bytes: nil)
        default:
            throw .corruptSnapshot("unsupported wire type \(key & 7)")
        }
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
