/// The identity of one timeline: a random 64-bit number, written as 13 sortable base32 characters.
///
/// The alphabet is Crockford's (`0-9A-Z` without `I L O U`), which is in ASCII order, and the width is
/// fixed, so sorting the text sorts the numbers.
public struct TimelineID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: UInt64

    public init(_ rawValue: UInt64) { self.rawValue = rawValue }

    static let alphabet: [UInt8] = Array("0123456789ABCDEFGHJKMNPQRSTVWXYZ".utf8)
    static let reverse: [Int8] = {
        var table = [Int8](repeating: -1, count: 256)
        for (index, character) in alphabet.enumerated() { table[Int(character)] = Int8(index) }
        return table
    }()

    public static func random() -> TimelineID {
        var generator = SystemRandomNumberGenerator()
        return TimelineID(generator.next())
    }

    /// Parses exactly 13 characters of the alphabet (upper case).
    public init(parsing text: Substring) throws(CoreError) {
        let scalars = Array(text.unicodeScalars)
        guard scalars.count == 13 else {
            throw .malformedTimelineID(String(text), reason: scalars.isEmpty ? "it is empty" : "it must be 13 characters")
        }
        var value: UInt64 = 0
        for (index, scalar) in scalars.enumerated() {
            let digit = scalar.value < 128 ? Self.reverse[Int(scalar.value)] : -1
            guard digit >= 0 else {
                throw .malformedTimelineID(String(text), reason: "character \(index + 1) is not in 0-9A-Z (without I, L, O, U)")
            }
            if index == 0 && digit > 15 {
                throw .malformedTimelineID(String(text), reason: "it is larger than 64 bits")
            }
            value = value << 5 | UInt64(digit)
        }
        rawValue = value
    }

    public init(parsing text: String) throws(CoreError) { try self.init(parsing: Substring(text)) }

    public var description: String {
        var out = [UInt8](repeating: 0, count: 13)
        var value = rawValue
        for index in stride(from: 12, through: 0, by: -1) {
            out[index] = Self.alphabet[Int(value & 31)]
            value >>= 5
        }
        return String(decoding: out, as: UTF8.self)
    }

    public static func < (lhs: TimelineID, rhs: TimelineID) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// One change's place in its timeline: `timeline:seq`.
public struct ChangeRef: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var timeline: TimelineID
    public var seq: UInt64

    public init(timeline: TimelineID, seq: UInt64) {
        self.timeline = timeline
        self.seq = seq
    }

    public var description: String { "\(timeline):\(seq)" }

    public static func < (lhs: ChangeRef, rhs: ChangeRef) -> Bool {
        (lhs.timeline.rawValue, lhs.seq) < (rhs.timeline.rawValue, rhs.seq)
    }
}

/// The replay order: `(lamport, timeline as unsigned 64-bit, seq)`. Total, and the same on every device.
public struct OrderKey: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var lamport: UInt64
    public var timeline: TimelineID
    public var seq: UInt64

    public init(lamport: UInt64, timeline: TimelineID, seq: UInt64) {
        self.lamport = lamport
        self.timeline = timeline
        self.seq = seq
    }

    /// Sorts before every real change.
    public static let zero = OrderKey(lamport: 0, timeline: TimelineID(0), seq: 0)

    public static func < (lhs: OrderKey, rhs: OrderKey) -> Bool {
        if lhs.lamport != rhs.lamport { return lhs.lamport < rhs.lamport }
        if lhs.timeline.rawValue != rhs.timeline.rawValue { return lhs.timeline.rawValue < rhs.timeline.rawValue }
        return lhs.seq < rhs.seq
    }

    public var description: String { "\(lamport)/\(timeline):\(seq)" }
}

/// A list or item identity: 128 random bits (a UUID), written as 32 lowercase hexadecimal digits.
public struct ObjectID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var high: UInt64
    public var low: UInt64

    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    public static func random() -> ObjectID {
        var generator = SystemRandomNumberGenerator()
        return random(using: &generator)
    }

    public static func random<G: RandomNumberGenerator>(using generator: inout G) -> ObjectID {
        // Version 4 UUID bits, so the ID reads as a UUID to other tools.
        let high = (generator.next() & 0xffff_ffff_ffff_0fff) | 0x0000_0000_0000_4000
        let low = (generator.next() & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000
        return ObjectID(high: high, low: low)
    }

    public init(bytes: some Collection<UInt8>) throws(CoreError) {
        guard bytes.count == 16 else { throw .corruptSnapshot("an object ID is \(bytes.count) bytes, not 16") }
        if let id = bytes.withContiguousStorageIfAvailable({ ObjectID(raw: UnsafeRawBufferPointer($0)) }) {
            self = id
            return
        }
        self = Array(bytes).withUnsafeBytes { ObjectID(raw: $0) }
    }

    /// Reads 16 big-endian bytes (the caller checked the count).
    public init(raw: UnsafeRawBufferPointer) {
        var high: UInt64 = 0
        var low: UInt64 = 0
        for index in 0..<8 {
            high = high << 8 | UInt64(raw[index])
            low = low << 8 | UInt64(raw[index + 8])
        }
        self.init(high: high, low: low)
    }

    /// Parses 32 hexadecimal digits, dashes allowed (a UUID's text form).
    public init(parsing text: String) throws(CoreError) {
        var high: UInt64 = 0
        var low: UInt64 = 0
        var count = 0
        for byte in text.utf8 where byte != UInt8(ascii: "-") {
            guard let digit = hexValue(byte), count < 32 else { throw .malformedObjectID(text) }
            if count < 16 { high = high << 4 | UInt64(digit) } else { low = low << 4 | UInt64(digit) }
            count += 1
        }
        guard count == 32 else { throw .malformedObjectID(text) }
        self.init(high: high, low: low)
    }

    public var bytes: [UInt8] {
        var out = [UInt8](repeating: 0, count: 16)
        for index in 0..<8 {
            out[index] = UInt8(truncatingIfNeeded: high >> UInt64(56 - index * 8))
            out[index + 8] = UInt8(truncatingIfNeeded: low >> UInt64(56 - index * 8))
        }
        return out
    }

    public var description: String { bytes.hexString }

    public static func < (lhs: ObjectID, rhs: ObjectID) -> Bool { (lhs.high, lhs.low) < (rhs.high, rhs.low) }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(high)
        hasher.combine(low)
    }

    // Replay looks IDs up several times per change. IDs are random 128-bit values, so a multiply-mix of
    // their bits with the table's seed spreads them as well as SipHash does, at a fraction of the cost.
    public func _rawHashValue(seed: Int) -> Int {
        var mixed = (high ^ UInt64(bitPattern: Int64(seed))) &* 0x9E37_79B9_7F4A_7C15
        mixed ^= low &* 0xC2B2_AE3D_27D4_EB4F
        return Int(truncatingIfNeeded: mixed ^ (mixed >> 29))
    }
}

@inline(__always) func hexValue(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
    default: return nil
    }
}
