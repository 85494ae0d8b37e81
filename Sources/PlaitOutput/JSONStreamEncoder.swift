/// Encodes `Encodable` values straight into a `JSONWriter`, without building a tree or a whole-output string:
/// what `--json` prints is written piece by piece as the value is walked.
///
/// `Encoder` says nothing when a container is done, so each container knows the writer depth it lives at and
/// closes whatever deeper container is still open before it writes; an encoded value's own containers are
/// closed when its `encode(to:)` returns.
public enum JSONStreamEncoder {
    /// Writes `value` as JSON into `writer`.
    public static func encode<T: Encodable>(_ value: T, into writer: JSONWriter) throws {
        try encodeValue(value, into: writer, codingPath: [])
    }

    /// `value` as JSON text (tests; small outputs).
    public static func text<T: Encodable>(_ value: T) throws -> String {
        let writer = JSONWriter()
        try encode(value, into: writer)
        return writer.text
    }

    static func encodeValue<T: Encodable>(_ value: T, into writer: JSONWriter, codingPath: [any CodingKey]) throws {
        // The scalars every output is full of go straight to the writer.
        switch value {
        case let value as String: try writer.string(value)
        case let value as Int: writer.integer(value)
        case let value as Bool: writer.bool(value)
        case let value as Double: try writer.double(value)
        default:
            let encoder = WriterEncoder(writer: writer, codingPath: codingPath)
            try value.encode(to: encoder)
            try encoder.finish()
        }
    }
}

private final class WriterEncoder: Encoder {
    let writer: JSONWriter
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }
    /// The depth this value starts at; its own container, if any, is at `base + 1`.
    let base: Int
    private var wrote = false
    private var opened = false

    init(writer: JSONWriter, codingPath: [any CodingKey]) {
        self.writer = writer
        self.codingPath = codingPath
        base = writer.depth
    }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if !opened {
            opened = true
            wrote = true
            writer.beginObject()
        }
        return KeyedEncodingContainer(KeyedWriter<Key>(writer: writer, depth: base + 1, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if !opened {
            opened = true
            wrote = true
            writer.beginArray()
        }
        return UnkeyedWriter(writer: writer, depth: base + 1, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer {
        wrote = true
        return SingleValueWriter(writer: writer, codingPath: codingPath)
    }

    /// Closes what this value opened; a value that wrote nothing is `{}`, as Foundation's encoder writes it.
    func finish() throws {
        if !wrote {
            writer.beginObject()
            try writer.end()
            return
        }
        try writer.close(downTo: base)
    }
}

extension JSONWriter {
    /// Ends open objects and arrays until `depth` are left.
    func close(downTo depth: Int) throws(OutputError) {
        while self.depth > depth { try end() }
    }
}

private struct KeyedWriter<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let writer: JSONWriter
    let depth: Int
    let codingPath: [any CodingKey]

    private func key(_ key: Key) throws {
        try writer.close(downTo: depth)
        writer.key(key.stringValue)
    }

    mutating func encodeNil(forKey key: Key) throws {
        try self.key(key)
        writer.null()
    }

    mutating func encode(_ value: String, forKey key: Key) throws {
        try self.key(key)
        try writer.string(value)
    }

    mutating func encode(_ value: Bool, forKey key: Key) throws {
        try self.key(key)
        writer.bool(value)
    }

    mutating func encode(_ value: Int, forKey key: Key) throws {
        try self.key(key)
        writer.integer(value)
    }

    mutating func encode(_ value: Double, forKey key: Key) throws {
        try self.key(key)
        try writer.double(value)
    }

    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try self.key(key)
        try JSONStreamEncoder.encodeValue(value, into: writer, codingPath: codingPath + [key])
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        try? self.key(key)
        writer.beginObject()
        return KeyedEncodingContainer(
            KeyedWriter<NestedKey>(writer: writer, depth: writer.depth, codingPath: codingPath + [key]))
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        try? self.key(key)
        writer.beginArray()
        return UnkeyedWriter(writer: writer, depth: writer.depth, codingPath: codingPath + [key])
    }

    mutating func superEncoder() -> any Encoder { superEncoder(forKey: Key(stringValue: "super")!) }

    mutating func superEncoder(forKey key: Key) -> any Encoder {
        try? self.key(key)
        return WriterEncoder(writer: writer, codingPath: codingPath + [key])
    }
}

private struct UnkeyedWriter: UnkeyedEncodingContainer {
    let writer: JSONWriter
    let depth: Int
    let codingPath: [any CodingKey]
    private(set) var count = 0

    init(writer: JSONWriter, depth: Int, codingPath: [any CodingKey]) {
        self.writer = writer
        self.depth = depth
        self.codingPath = codingPath
    }

    private mutating func element() throws {
        try writer.close(downTo: depth)
        count += 1
    }

    mutating func encodeNil() throws {
        try element()
        writer.null()
    }

    mutating func encode(_ value: String) throws {
        try element()
        try writer.string(value)
    }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try element()
        try JSONStreamEncoder.encodeValue(value, into: writer, codingPath: codingPath)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type)
        -> KeyedEncodingContainer<NestedKey>
    {
        try? element()
        writer.beginObject()
        return KeyedEncodingContainer(
            KeyedWriter<NestedKey>(writer: writer, depth: writer.depth, codingPath: codingPath))
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        try? element()
        writer.beginArray()
        return UnkeyedWriter(writer: writer, depth: writer.depth, codingPath: codingPath)
    }

    mutating func superEncoder() -> any Encoder {
        try? element()
        return WriterEncoder(writer: writer, codingPath: codingPath)
    }
}

private struct SingleValueWriter: SingleValueEncodingContainer {
    let writer: JSONWriter
    let codingPath: [any CodingKey]

    mutating func encodeNil() throws { writer.null() }
    mutating func encode(_ value: Bool) throws { writer.bool(value) }
    mutating func encode(_ value: String) throws { try writer.string(value) }
    mutating func encode(_ value: Double) throws { try writer.double(value) }
    mutating func encode(_ value: Float) throws { try writer.double(Double(value)) }
    mutating func encode(_ value: Int) throws { writer.integer(value) }
    mutating func encode(_ value: Int8) throws { writer.integer(value) }
    mutating func encode(_ value: Int16) throws { writer.integer(value) }
    mutating func encode(_ value: Int32) throws { writer.integer(value) }
    mutating func encode(_ value: Int64) throws { writer.integer(value) }
    mutating func encode(_ value: UInt) throws { writer.integer(value) }
    mutating func encode(_ value: UInt8) throws { writer.integer(value) }
    mutating func encode(_ value: UInt16) throws { writer.integer(value) }
    mutating func encode(_ value: UInt32) throws { writer.integer(value) }
    mutating func encode(_ value: UInt64) throws { writer.integer(value) }

    mutating func encode<T: Encodable>(_ value: T) throws {
        try JSONStreamEncoder.encodeValue(value, into: writer, codingPath: codingPath)
    }
}
