/// Writes the Protocol Buffers wire format by hand, so change payloads and snapshots are protobuf messages
/// (documented in `plait.proto`) while the engine stays free of any library but Foundation.
public struct ProtoWriter: Sendable {
    public private(set) var bytes: [UInt8] = []

    public init() {}

    public mutating func varint(_ value: UInt64) {
        var value = value
        while value >= 0x80 {
            bytes.append(UInt8(truncatingIfNeeded: value) | 0x80)
            value >>= 7
        }
        bytes.append(UInt8(value))
    }

    private mutating func tag(_ field: UInt32, _ wireType: UInt8) { varint(UInt64(field) << 3 | UInt64(wireType)) }

    /// A varint field; zero is still written, so presence survives (proto3 `optional`).
    public mutating func uint(_ field: UInt32, _ value: UInt64) {
        tag(field, 0)
        varint(value)
    }

    public mutating func bool(_ field: UInt32, _ value: Bool) { uint(field, value ? 1 : 0) }

    public mutating func fixed64(_ field: UInt32, _ value: UInt64) {
        tag(field, 1)
        for shift in stride(from: 0, to: 64, by: 8) { bytes.append(UInt8(truncatingIfNeeded: value >> UInt64(shift))) }
    }

    public mutating func data(_ field: UInt32, _ value: [UInt8]) {
        tag(field, 2)
        varint(UInt64(value.count))
        bytes.append(contentsOf: value)
    }

    /// Its UTF-8 bytes, appended without an intermediate array (a state digest writes one per item).
    public mutating func string(_ field: UInt32, _ value: String) {
        tag(field, 2)
        varint(UInt64(value.utf8.count))
        bytes.append(contentsOf: value.utf8)
    }

    /// An item's text, from its bytes in place.
    public mutating func string(_ field: UInt32, _ value: ItemText) {
        value.withUTF8 { text in
            tag(field, 2)
            varint(UInt64(text.count))
            bytes.append(contentsOf: text)
        }
    }

    public mutating func message(_ field: UInt32, _ build: (inout ProtoWriter) -> Void) {
        var inner = ProtoWriter()
        build(&inner)
        data(field, inner.bytes)
    }

    /// The 16 bytes of `ObjectID.bytes` (big-endian high, then low word), without allocating them.
    public mutating func objectID(_ field: UInt32, _ id: ObjectID) {
        tag(field, 2)
        varint(16)
        withUnsafeBytes(of: (id.high.bigEndian, id.low.bigEndian)) { bytes.append(contentsOf: $0) }
    }

    /// A length-delimited field holding what `inner` wrote (a message built in a writer that is reused).
    public mutating func data(_ field: UInt32, _ inner: ProtoWriter) { data(field, inner.bytes) }

    /// Empties the writer, keeping its storage for the next message.
    public mutating func removeAll() { bytes.removeAll(keepingCapacity: true) }

    /// Hands what was written to `sink` and empties the writer once it holds more than `threshold` bytes (0:
    /// whatever it holds): an encoding written in pieces, never whole.
    public mutating func flush(to sink: (UnsafeRawBufferPointer) throws -> Void, over threshold: Int) rethrows {
        guard bytes.count > threshold || (threshold == 0 && !bytes.isEmpty) else { return }
        try bytes.withUnsafeBytes { try sink($0) }
        bytes.removeAll(keepingCapacity: true)
    }
}

/// Reads the Protocol Buffers wire format; skips fields it does not know, so newer writers stay readable.
public struct ProtoReader {
    public enum Value {
        case varint(UInt64)
        case fixed64(UInt64)
        case bytes(ArraySlice<UInt8>)
        case fixed32(UInt32)
    }

    let bytes: ArraySlice<UInt8>
    var index: Int

    public init(_ bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        self.index = bytes.startIndex
    }

    public init(_ bytes: [UInt8]) { self.init(bytes[...]) }

    public var isAtEnd: Bool { index >= bytes.endIndex }

    mutating func readVarint() throws(CoreError) -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard index < bytes.endIndex else { throw .corruptSnapshot("truncated varint") }
            let byte = bytes[index]
            index += 1
            guard shift < 64 else { throw .corruptSnapshot("varint longer than 10 bytes") }
            result |= UInt64(byte & 0x7f) << shift
            if byte & 0x80 == 0 { return result }
            shift += 7
        }
    }

    /// The next field, or nil at the end.
    public mutating func next() throws(CoreError) -> (field: UInt32, value: Value)? {
        guard !isAtEnd else { return nil }
        let key = try readVarint()
        let field = UInt32(truncatingIfNeeded: key >> 3)
        guard field > 0 else { throw .corruptSnapshot("field number 0") }
        switch key & 7 {
        case 0:
            return (field, .varint(try readVarint()))
        case 1:
            guard bytes.endIndex - index >= 8 else { throw .corruptSnapshot("truncated fixed64") }
            var value: UInt64 = 0
            for offset in 0..<8 { value |= UInt64(bytes[index + offset]) << UInt64(offset * 8) }
            index += 8
            return (field, .fixed64(value))
        case 2:
            let length = try readVarint()
            guard length <= UInt64(bytes.endIndex - index) else { throw .corruptSnapshot("length beyond the end") }
            let slice = bytes[index..<index + Int(length)]
            index += Int(length)
            return (field, .bytes(slice))
        case 5:
            guard bytes.endIndex - index >= 4 else { throw .corruptSnapshot("truncated fixed32") }
            var value: UInt32 = 0
            for offset in 0..<4 { value |= UInt32(bytes[index + offset]) << UInt32(offset * 8) }
            index += 4
            return (field, .fixed32(value))
        default:
            throw .corruptSnapshot("unsupported wire type \(key & 7)")
        }
    }
}

extension ProtoReader.Value {
    public func uint() throws(CoreError) -> UInt64 {
        switch self {
        case let .varint(value), let .fixed64(value): return value
        default: throw .corruptSnapshot("expected an integer")
        }
    }

    public func bool() throws(CoreError) -> Bool { try uint() != 0 }

    public func data() throws(CoreError) -> ArraySlice<UInt8> {
        guard case let .bytes(slice) = self else { throw .corruptSnapshot("expected bytes") }
        return slice
    }

    public func string() throws(CoreError) -> String {
        let slice = try data()
        guard let text = String(validating: slice, as: UTF8.self) else { throw .corruptSnapshot("invalid UTF-8") }
        return text
    }

    public func objectID() throws(CoreError) -> ObjectID { try ObjectID(bytes: try data()) }
}
