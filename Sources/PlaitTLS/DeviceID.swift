import PlaitCore

/// A device's identity as peers pin it: the SHA-256 of its certificate's DER encoding.
///
/// The text form is Syncthing's: the 32 bytes in RFC 4648 base32 without padding (52 characters),
/// cut into four chunks of 13, each followed by a Luhn mod 32 check character, shown as eight
/// groups of seven joined by dashes (`P56IOI7-MZJNU2Y-IQGDREY-DM2MGTI-MGL3BXN-PQ6W5BM-TBBZ4TJ-XZWICQ2`).
/// Any single mistyped character is caught by a check character. IDs order by their bytes, which
/// is how two devices dialling each other at once agree which connection to keep.
public struct DeviceID: Hashable, Comparable, Sendable, CustomStringConvertible, Codable {
    /// Number of bytes in a SHA-256 digest.
    public static let digestLength = 32

    /// The SHA-256 digest of the certificate's DER encoding (always 32 bytes).
    public let digest: [UInt8]

    /// Wraps a digest computed elsewhere; throws `IdentityError.invalidDigestLength` unless it is 32 bytes.
    public init(digest: [UInt8]) throws {
        guard digest.count == Self.digestLength else {
            throw IdentityError.invalidDigestLength(digest.count)
        }
        self.digest = digest
    }

    /// The Device ID of a certificate, given its DER encoding.
    public init(certificateDER: [UInt8]) {
        self.digest = sha256(certificateDER)
    }

    /// Parses the text form, upper or lower case, with or without dashes and spaces.
    ///
    /// Throws `IdentityError.deviceIDWrongLength`, `.deviceIDInvalidCharacter` or
    /// `.deviceIDCheckMismatch` (naming the group whose check character does not match).
    public init(parsing text: String) throws {
        var characters: [UInt8] = []
        for scalar in text.unicodeScalars {
            if scalar == "-" || scalar == " " || scalar == "\t" || scalar == "\n" || scalar == "\r" {
                continue
            }
            guard let value = Base32.value(of: scalar) else {
                throw IdentityError.deviceIDInvalidCharacter(text: text, character: Character(scalar))
            }
            characters.append(value)
        }
        guard characters.count == Self.textLength else {
            throw IdentityError.deviceIDWrongLength(text: text, count: characters.count)
        }
        var data: [UInt8] = []
        data.reserveCapacity(Self.base32Length)
        for chunk in 0..<Self.chunkCount {
            let start = chunk * (Self.chunkLength + 1)
            let values = characters[start..<start + Self.chunkLength]
            guard LuhnBase32.checkValue(for: values) == characters[start + Self.chunkLength] else {
                // A chunk's check character is the last character of the second display group it spans.
                throw IdentityError.deviceIDCheckMismatch(text: text, group: (chunk + 1) * 2)
            }
            data.append(contentsOf: values)
        }
        guard let digest = Base32.decode(data, byteCount: Self.digestLength) else {
            // The last character carries one bit of the digest and four zero bits; a character
            // with any of those four bits set names no digest, whatever its check character says.
            throw IdentityError.deviceIDNotCanonical(text: text)
        }
        self.digest = digest
    }

    /// The grouped text form: 63 characters, eight groups of seven joined by dashes.
    public var description: String {
        let data = Base32.encode(digest)
        var characters: [UInt8] = []
        characters.reserveCapacity(Self.textLength)
        for chunk in 0..<Self.chunkCount {
            let values = data[chunk * Self.chunkLength..<(chunk + 1) * Self.chunkLength]
            characters.append(contentsOf: values)
            characters.append(LuhnBase32.checkValue(for: values))
        }
        var text = ""
        text.reserveCapacity(Self.textLength + Self.groupCount - 1)
        for (index, value) in characters.enumerated() {
            if index > 0 && index % Self.groupLength == 0 {
                text.append("-")
            }
            text.unicodeScalars.append(Base32.alphabet[Int(value)])
        }
        return text
    }

    /// The first group of the text form (seven characters), enough to tell devices apart on screen.
    /// Never pin or compare a short form: it carries only 35 bits.
    public var shortForm: String {
        String(description.prefix(Self.groupLength))
    }

    public static func < (lhs: DeviceID, rhs: DeviceID) -> Bool {
        lhs.digest.lexicographicallyPrecedes(rhs.digest)
    }

    /// Encodes as the grouped text form, so configuration and JSON files stay readable.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        let text = try container.decode(String.self)
        do {
            self = try DeviceID(parsing: text)
        } catch {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: String(describing: error))
        }
    }

    private static let base32Length = 52
    private static let chunkCount = 4
    private static let chunkLength = 13
    private static let textLength = 56
    private static let groupLength = 7
    private static let groupCount = 8
}


/// Syncthing's check character (`luhnBase32` in lib/protocol/luhn.go).
///
/// Like Luhn mod N, except that the factor starts at 1 on the first character rather than on the
/// last: every single substitution still changes the sum, which is what a typed ID needs.
enum LuhnBase32 {
    static func checkValue<Values: Collection>(for values: Values) -> UInt8 where Values.Element == UInt8 {
        let n = 32
        var factor = 1
        var sum = 0
        for value in values {
            let addend = factor * Int(value)
            factor = factor == 2 ? 1 : 2
            sum += addend / n + addend % n
        }
        return UInt8((n - sum % n) % n)
    }
}
