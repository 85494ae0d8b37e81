// Base32 as RFC 4648 defines it: Device IDs (PlaitTLS) and the discovery tag (PlaitDiscovery) share it.

/// RFC 4648 base32 without padding, on values 0...31 rather than characters.
public enum Base32 {
    public static let alphabet: [Unicode.Scalar] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".unicodeScalars)

    /// The value of an alphabet character, accepting lower case; nil for anything else.
    public static func value(of scalar: Unicode.Scalar) -> UInt8? {
        switch scalar.value {
        case 0x41...0x5A: return UInt8(scalar.value - 0x41)  // A-Z
        case 0x61...0x7A: return UInt8(scalar.value - 0x61)  // a-z
        case 0x32...0x37: return UInt8(scalar.value - 0x32 + 26)  // 2-7
        default: return nil
        }
    }

    /// Five bits per value, most significant first; the last value is padded with zero bits.
    public static func encode(_ bytes: [UInt8]) -> [UInt8] {
        var values: [UInt8] = []
        values.reserveCapacity((bytes.count * 8 + 4) / 5)
        var buffer: UInt32 = 0
        var bits = 0
        for byte in bytes {
            buffer = (buffer << 8) | UInt32(byte)
            bits += 8
            while bits >= 5 {
                bits -= 5
                values.append(UInt8((buffer >> UInt32(bits)) & 0x1F))
            }
        }
        if bits > 0 {
            values.append(UInt8((buffer << UInt32(5 - bits)) & 0x1F))
        }
        return values
    }

    /// Decodes exactly `byteCount` bytes; nil if the count does not fit or a padding bit is set,
    /// so every byte string has exactly one encoding.
    public static func decode(_ values: [UInt8], byteCount: Int) -> [UInt8]? {
        guard values.count == (byteCount * 8 + 4) / 5 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(byteCount)
        var buffer: UInt32 = 0
        var bits = 0
        for value in values {
            buffer = (buffer << 5) | UInt32(value & 0x1F)
            bits += 5
            if bits >= 8 {
                bits -= 8
                bytes.append(UInt8((buffer >> UInt32(bits)) & 0xFF))
            }
        }
        guard buffer & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return bytes
    }

    /// The text form: RFC 4648 characters, no padding.
    public static func string(_ bytes: [UInt8]) -> String {
        var text = String.UnicodeScalarView()
        for value in encode(bytes) { text.append(alphabet[Int(value)]) }
        return String(text)
    }
}
