import Foundation
import PlaitCore
import Testing

@testable import PlaitTLS

@Suite("DeviceID")
struct DeviceIDTests {
    /// Syncthing's own test vector (lib/protocol/deviceid_test.go): these 32 bytes format as `formatted`.
    static let syncthingDigest: [UInt8] = [
        0x7f, 0x7c, 0x87, 0x23, 0xec, 0xca, 0x5b, 0x4d, 0x22, 0x06, 0x1c, 0x49, 0x81, 0xb3, 0x4c, 0x34,
        0xd8, 0x65, 0xec, 0x37, 0x6b, 0xe1, 0xeb, 0x74, 0x33, 0x08, 0x73, 0xc9, 0xa6, 0xf9, 0xb2, 0x05,
    ]
    static let syncthingFormatted = "P56IOI7-MZJNU2Y-IQGDREY-DM2MGTI-MGL3BXN-PQ6W5BM-TBBZ4TJ-XZWICQ2"

    @Test func syncthingKnownAnswer() throws {
        let id = try DeviceID(digest: Self.syncthingDigest)
        #expect(id.description == Self.syncthingFormatted)
        #expect(try DeviceID(parsing: Self.syncthingFormatted) == id)
        #expect(id.shortForm == "P56IOI7")
    }

    /// Derived by hand: 32 bytes of 0xFF are 51 `7`s (value 31) then `Q` (one 1 bit, four padding
    /// bits). Thirteen 31s weigh 7 × 31 (factor 1) + 6 × (1 + 30) (factor 2, 62 = 1·32 + 30) = 403;
    /// 403 mod 32 = 19, check = 32 − 19 = 13 = `N`. The last chunk: twelve 31s = 372, plus `Q` = 16
    /// at factor 1 makes 388; 388 mod 32 = 4, check = 28 = `4`.
    @Test func handDerivedKnownAnswer() throws {
        let ones = try DeviceID(digest: [UInt8](repeating: 0xFF, count: 32))
        #expect(ones.description == "7777777-777777N-7777777-777777N-7777777-777777N-7777777-77777Q4")
        let zeros = try DeviceID(digest: [UInt8](repeating: 0, count: 32))
        #expect(zeros.description == "AAAAAAA-AAAAAAA-AAAAAAA-AAAAAAA-AAAAAAA-AAAAAAA-AAAAAAA-AAAAAAA")
    }

    @Test func certificateDERIsHashedWithSHA256() throws {
        // SHA-256("abc") from FIPS 180-2, appendix B.1.
        let id = DeviceID(certificateDER: Array("abc".utf8))
        let expected = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        #expect(id.digest.map { String(format: "%02x", $0) }.joined() == expected)
        #expect(id.description == "XJ4BNP4-PAHH6UO-QKBIDPF-3LRCEOI-YAGYNDS-YLXVHFZ-UCD7WD4-QACWWQW")
    }

    @Test func textFormShape() throws {
        for seed in 0..<50 {
            let id = DeviceID(certificateDER: Array("device \(seed)".utf8))
            let text = id.description
            #expect(text.count == 63)
            #expect(text.filter { $0 == "-" }.count == 7)
            #expect(text.split(separator: "-").allSatisfy { $0.count == 7 })
            #expect(text.allSatisfy { $0 == "-" || "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".contains($0) })
            #expect(id.shortForm == String(text.prefix(7)))
        }
    }

    @Test func roundTrip() throws {
        for seed in 0..<200 {
            let id = DeviceID(certificateDER: Array("round trip \(seed)".utf8))
            #expect(try DeviceID(parsing: id.description) == id)
            #expect(try DeviceID(digest: id.digest) == id)
        }
    }

    @Test func acceptsLowercaseWithoutDashesAndWithSpaces() throws {
        let id = try DeviceID(digest: Self.syncthingDigest)
        let variants = [
            Self.syncthingFormatted.lowercased(),
            Self.syncthingFormatted.replacingOccurrences(of: "-", with: ""),
            Self.syncthingFormatted.replacingOccurrences(of: "-", with: "").lowercased(),
            Self.syncthingFormatted.replacingOccurrences(of: "-", with: " "),
            "  " + Self.syncthingFormatted + "\n",
            "p56ioi7-MZJNU2Y iqgdrey-DM2MGTI-mgl3bxnPQ6W5BM-TBBZ4TJ-XZWICQ2",
        ]
        for text in variants {
            #expect(try DeviceID(parsing: text) == id, "\(text)")
        }
    }

    @Test func everySingleSubstitutionIsRejected() throws {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
        var accepted: [String] = []
        var tried = 0
        for sample in [Self.syncthingFormatted, DeviceID(certificateDER: [1, 2, 3]).description] {
            let characters = Array(sample)
            for position in characters.indices where characters[position] != "-" {
                for replacement in alphabet where replacement != characters[position] {
                    var mistyped = characters
                    mistyped[position] = replacement
                    tried += 1
                    if (try? DeviceID(parsing: String(mistyped))) != nil {
                        accepted.append(String(mistyped))
                    }
                }
            }
        }
        #expect(tried == 2 * 56 * 31)
        #expect(accepted.isEmpty)
    }

    @Test func mismatchNamesTheGroupOfTheCheckCharacter() {
        // Group 3 lies in the second chunk, whose check character ends group 4.
        var characters = Array(Self.syncthingFormatted)
        characters[16] = characters[16] == "A" ? "B" : "A"
        let mistyped = String(characters)
        #expect(throws: IdentityError.deviceIDCheckMismatch(text: mistyped, group: 4)) {
            try DeviceID(parsing: mistyped)
        }
        let message = String(describing: IdentityError.deviceIDCheckMismatch(text: mistyped, group: 4))
        #expect(message.contains("the check character of group 4 does not match: the ID is mistyped"))
    }

    @Test func rejectsWrongLength() {
        let short = String(Self.syncthingFormatted.dropLast())
        #expect(throws: IdentityError.deviceIDWrongLength(text: short, count: 55)) {
            try DeviceID(parsing: short)
        }
        // Syncthing still reads the old 52-character form without check characters; plait does not.
        let unchecked = "P56IOI7MZJNU2IQGDREYDM2MGTMGL3BXNPQ6W5BTBBZ4TJXZWICQ"
        #expect(throws: IdentityError.deviceIDWrongLength(text: unchecked, count: 52)) {
            try DeviceID(parsing: unchecked)
        }
        #expect(throws: IdentityError.deviceIDWrongLength(text: "", count: 0)) {
            try DeviceID(parsing: "")
        }
        #expect(throws: IdentityError.invalidDigestLength(31)) {
            try DeviceID(digest: [UInt8](repeating: 0, count: 31))
        }
    }

    @Test func rejectsCharactersOutsideTheAlphabet() {
        for bad: Character in ["0", "1", "8", "9", "=", "_", "é", "+"] {
            var characters = Array(Self.syncthingFormatted)
            characters[3] = bad
            let text = String(characters)
            #expect(throws: IdentityError.deviceIDInvalidCharacter(text: text, character: bad)) {
                try DeviceID(parsing: text)
            }
        }
    }

    @Test func rejectsSetPaddingBitsEvenWithMatchingCheckCharacter() throws {
        // The last chunk of the Syncthing ID is `TBBZ4TJXZWICQ` + `2`. Its last data character `Q`
        // (10000) carries one digest bit and four zero padding bits; `R` (10001) sets one of them.
        // The check character is recomputed so that only the padding rule can reject the result.
        let chunk = "TBBZ4TJXZWICR".unicodeScalars.map { Base32.value(of: $0)! }
        let check = Character(Base32.alphabet[Int(LuhnBase32.checkValue(for: chunk))])
        let text = "P56IOI7-MZJNU2Y-IQGDREY-DM2MGTI-MGL3BXN-PQ6W5BM-TBBZ4TJ-XZWICR" + String(check)
        #expect(throws: IdentityError.deviceIDNotCanonical(text: text)) {
            try DeviceID(parsing: text)
        }
    }

    @Test func codableUsesTheTextForm() throws {
        let id = try DeviceID(digest: Self.syncthingDigest)
        let json = try JSONEncoder().encode([id])
        #expect(String(decoding: json, as: UTF8.self) == "[\"\(Self.syncthingFormatted)\"]")
        #expect(try JSONDecoder().decode([DeviceID].self, from: json) == [id])
        let bad = Data("[\"P56IOI7-MZJNU2Y\"]".utf8)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([DeviceID].self, from: bad) }
    }

    @Test func orderFollowsTheDigestBytes() throws {
        let low = try DeviceID(digest: [0x00] + [UInt8](repeating: 0xFF, count: 31))
        let high = try DeviceID(digest: [0x01] + [UInt8](repeating: 0x00, count: 31))
        #expect(low < high)
        #expect(!(high < low))
        #expect([high, low].sorted() == [low, high])
    }
}
