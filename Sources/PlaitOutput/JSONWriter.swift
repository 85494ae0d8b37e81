#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import PlaitCore

/// Writes pretty-printed JSON into a byte buffer that is handed to a file descriptor whenever it fills, so a
/// large output (`plait show --json` of 100,000 items) costs a 64 KiB buffer, not a copy of the whole text.
///
/// Values are written in the order they are given: the output types declare their properties in alphabetical
/// order, so objects come out with sorted keys, as they always did. Text is escaped as JSON requires, and DEL,
/// C1 controls and bidi characters are written as `\uXXXX` too, so JSON printed to a terminal cannot drive it
/// (a JSON reader decodes them to the same text).
public final class JSONWriter {
    /// The bytes not yet handed to the descriptor (all of them when there is none).
    public private(set) var bytes: [UInt8] = []
    private let descriptor: Int32?
    private let flushThreshold: Int
    /// One entry per open object or array: whether it has an element yet.
    private var open: [(isObject: Bool, hasElement: Bool)] = []
    /// Set after a key: the next value goes on the key's line.
    private var afterKey = false

    /// A writer that keeps everything in `bytes` (tests, the local API).
    public init() {
        descriptor = nil
        flushThreshold = .max
    }

    /// A writer that hands its bytes to `descriptor` each time `flushThreshold` bytes are buffered.
    public init(descriptor: Int32, flushThreshold: Int = 1 << 16) {
        self.descriptor = descriptor
        self.flushThreshold = flushThreshold
        bytes.reserveCapacity(flushThreshold + 4096)
    }

    /// The text written so far (for a writer without a descriptor).
    public var text: String { String(decoding: bytes, as: UTF8.self) }

    /// Hands the buffered bytes to the descriptor.
    public func flush() throws(OutputError) {
        guard let descriptor else { return }
        try writeAll(bytes, to: descriptor)
        bytes.removeAll(keepingCapacity: true)
    }

    @inline(__always) private func flushIfFull() throws(OutputError) {
        if bytes.count >= flushThreshold { try flush() }
    }

    // MARK: Structure

    /// Starts a value: the separator and indentation its place needs.
    private func beginValue() {
        if afterKey {
            afterKey = false
            return
        }
        guard let last = open.last else { return }
        if last.hasElement { bytes.append(UInt8(ascii: ",")) } else { open[open.count - 1].hasElement = true }
        newline()
    }

    private func newline() { Self.appendNewline(to: &bytes, depth: open.count) }

    public func beginObject() {
        beginValue()
        bytes.append(UInt8(ascii: "{"))
        open.append((true, false))
    }

    public func beginArray() {
        beginValue()
        bytes.append(UInt8(ascii: "["))
        open.append((false, false))
    }

    /// Ends the innermost object or array (`{}` / `[]` when it stayed empty).
    public func end() throws(OutputError) {
        guard let last = open.popLast() else { return }
        if last.hasElement { newline() }
        bytes.append(last.isObject ? UInt8(ascii: "}") : UInt8(ascii: "]"))
        if open.isEmpty { bytes.append(UInt8(ascii: "\n")) }
        try flushIfFull()
    }

    /// How many objects and arrays are open.
    public var depth: Int { open.count }

    /// Writes an object's key; the next value written is its value.
    public func key(_ key: String) {
        beginValue()
        appendString(key)
        bytes.append(contentsOf: [UInt8(ascii: ":"), 0x20])
        afterKey = true
    }

    // MARK: Scalars

    public func string(_ value: String) throws(OutputError) {
        beginValue()
        appendString(value)
        if open.isEmpty { bytes.append(UInt8(ascii: "\n")) }
        try flushIfFull()
    }

    /// An object ID as its 32 lowercase hexadecimal digits (its `description`), without building the text.
    public func objectID(_ id: ObjectID) throws(OutputError) {
        beginValue()
        Self.append(id, to: &bytes)
        if open.isEmpty { bytes.append(UInt8(ascii: "\n")) }
        try flushIfFull()
    }

    /// `{"<idKey>": <id>, "<textKey>": <text>}` as one value, in one pass over the buffer: the shape of
    /// `ShowItem`, which `show --json` writes once per item (the same bytes the general path writes).
    public func object(_ idKey: String, id: ObjectID, _ textKey: String, text: String) throws(OutputError) {
        beginValue()
        let depth = open.count
        Self.appendElement(to: &bytes, depth: depth, idKey: idKey, id: id, textKey: textKey, text: text)
        if open.isEmpty { bytes.append(UInt8(ascii: "\n")) }
        try flushIfFull()
    }

    // One exclusive access to `bytes` per call (a class's stored property is checked on every access).
    private static func appendElement(
        to bytes: inout [UInt8], depth: Int, idKey: String, id: ObjectID, textKey: String, text: String
    ) {
        bytes.append(UInt8(ascii: "{"))
        appendNewline(to: &bytes, depth: depth + 1)
        append(idKey, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        bytes.append(0x20)
        append(id, to: &bytes)
        bytes.append(UInt8(ascii: ","))
        appendNewline(to: &bytes, depth: depth + 1)
        append(textKey, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        bytes.append(0x20)
        append(text, to: &bytes)
        appendNewline(to: &bytes, depth: depth)
        bytes.append(UInt8(ascii: "}"))
    }

    private static func appendNewline(to bytes: inout [UInt8], depth: Int) {
        bytes.append(UInt8(ascii: "\n"))
        for _ in 0..<depth {
            bytes.append(0x20)
            bytes.append(0x20)
        }
    }

    private static func append(_ id: ObjectID, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        for word in [id.high, id.low] {
            for shift in stride(from: 60, through: 0, by: -4) {
                let digit = UInt8(truncatingIfNeeded: word >> UInt64(shift)) & 0xF
                bytes.append(digit < 10 ? 0x30 + digit : 0x57 + digit)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    public func integer<T: BinaryInteger>(_ value: T) {
        beginValue()
        bytes.append(contentsOf: String(value).utf8)
        if open.isEmpty { bytes.append(UInt8(ascii: "\n")) }
    }

    public func double(_ value: Double) throws(OutputError) {
        guard value.isFinite else { throw .notANumber(value) }
        beginValue()
        // Swift writes the shortest text that reads back as the same Double ("0.5", "1e-05"), valid JSON.
        bytes.append(contentsOf: value.description.utf8)
        if open.isEmpty { bytes.append(UInt8(ascii: "\n")) }
    }

    public func bool(_ value: Bool) {
        beginValue()
        bytes.append(contentsOf: value ? Array("true".utf8) : Array("false".utf8))
        if open.isEmpty { bytes.append(UInt8(ascii: "\n")) }
    }

    public func null() {
        beginValue()
        bytes.append(contentsOf: [0x6E, 0x75, 0x6C, 0x6C])  // null
        if open.isEmpty { bytes.append(UInt8(ascii: "\n")) }
    }

    private func appendString(_ value: String) { Self.append(value, to: &bytes) }

    /// Appends `value` as a JSON string. Plain ASCII text (nearly all of it) is copied in one go.
    private static func append(_ value: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        var value = value
        let plain = value.withUTF8 { utf8 -> Bool in
            for byte in utf8 where byte < 0x20 || byte >= 0x7F || byte == 0x22 || byte == 0x5C { return false }
            bytes.append(contentsOf: utf8)
            return true
        }
        if !plain { appendEscaped(value, to: &bytes) }
        bytes.append(UInt8(ascii: "\""))
    }

    private static func appendEscaped(_ value: String, to bytes: inout [UInt8]) {
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": bytes.append(contentsOf: [0x5C, 0x22])
            case "\\": bytes.append(contentsOf: [0x5C, 0x5C])
            case "\n": bytes.append(contentsOf: [0x5C, UInt8(ascii: "n")])
            case "\r": bytes.append(contentsOf: [0x5C, UInt8(ascii: "r")])
            case "\t": bytes.append(contentsOf: [0x5C, UInt8(ascii: "t")])
            default:
                // Every character a terminal acts on is in the Basic Multilingual Plane: one \uXXXX each.
                if scalar.actsOnTerminal {
                    bytes.append(contentsOf: [0x5C, UInt8(ascii: "u")])
                    for shift in stride(from: 12, through: 0, by: -4) {
                        let digit = UInt8(truncatingIfNeeded: scalar.value >> UInt32(shift)) & 0xF
                        bytes.append(digit < 10 ? 0x30 + digit : 0x57 + digit)
                    }
                } else {
                    bytes.append(contentsOf: String(scalar).utf8)
                }
            }
        }
    }
}

/// What can go wrong writing output.
/// Writes every byte of `bytes` to `descriptor`, however many `write` calls it takes (a pipe takes part of a large
/// buffer at a time), retrying when a signal interrupts one.
public func writeAll(_ bytes: [UInt8], to descriptor: Int32) throws(OutputError) {
    var offset = 0
    while offset < bytes.count {
        let written = bytes.withUnsafeBytes { raw in
            write(descriptor, raw.baseAddress! + offset, raw.count - offset)
        }
        if written < 0 {
            if errno == EINTR { continue }
            throw .writeFailed(errno: errno)
        }
        offset += written
    }
}

public enum OutputError: Error, CustomStringConvertible {
    /// Standard output could not be written (a closed pipe, a full disk).
    case writeFailed(errno: Int32)
    /// A figure was infinite or not a number, which JSON cannot hold.
    case notANumber(Double)

    public var description: String {
        switch self {
        case let .writeFailed(code):
            "could not write the output (\(String(cString: strerror(code)))); check where standard output goes"
        case let .notANumber(value): "a figure was \(value), which JSON cannot hold; this is a bug in plait"
        }
    }
}
