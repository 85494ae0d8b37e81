import Testing

@testable import PlaitCore

@Suite("SHA256")
struct SHA256Tests {
    // FIPS 180-2 appendix B and the usual extra vectors; values checked with Python's hashlib.
    @Test func emptyString() {
        #expect(SHA256.hash([UInt8]()).hexString == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func abc() {
        let expected = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        #expect(SHA256.hash(Array("abc".utf8)).hexString == expected)
    }

    @Test func twoBlockMessage() {
        let message = Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)
        #expect(message.count == 56)
        #expect(SHA256.hash(message).hexString == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
    }

    @Test func oneMillionAs() {
        let expected = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
        #expect(SHA256.hash([UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)).hexString == expected)
        // The same fed in uneven pieces.
        var hasher = SHA256()
        var remaining = 1_000_000
        var piece = 1
        while remaining > 0 {
            let size = min(piece, remaining)
            hasher.update([UInt8](repeating: UInt8(ascii: "a"), count: size))
            remaining -= size
            piece = piece * 3 % 997 + 1
        }
        #expect(hasher.finalize().hexString == expected)
    }

    /// `bytes[i] = i % 251`, lengths around the padding boundaries (55/56 bytes fit one block or not).
    static let boundaryVectors: [(Int, String)] = [
        (55, "463eb28e72f82e0a96c0a4cc53690c571281131f672aa229e0d45ae59b598b59"),
        (56, "da2ae4d6b36748f2a318f23e7ab1dfdf45acdc9d049bd80e59de82a60895f562"),
        (57, "2fe741af801cc238602ac0ec6a7b0c3a8a87c7fc7d7f02a3fe03d1c12eac4d8f"),
        (63, "29af2686fd53374a36b0846694cc342177e428d1647515f078784d69cdb9e488"),
        (64, "fdeab9acf3710362bd2658cdc9a29e8f9c757fcf9811603a8c447cd1d9151108"),
        (65, "4bfd2c8b6f1eec7a2afeb48b934ee4b2694182027e6d0fc075074f2fabb31781"),
        (119, "da18797ed7c3a777f0847f429724a2d8cd5138e6ed2895c3fa1a6d39d18f7ec6"),
        (120, "f52b23db1fbb6ded89ef42a23ce0c8922c45f25c50b568a93bf1c075420bbb7c"),
        (127, "92ca0fa6651ee2f97b884b7246a562fa71250fedefe5ebf270d31c546bfea976"),
        (128, "471fb943aa23c511f6f72f8d1652d9c880cfa392ad80503120547703e56a2be5"),
        (129, "5099c6a56203f9687f7d33f4bfdf576d31dc91f6b695ecea38b2770c87631135"),
        (1000, "4e4c294b331f7a2099a379bec34b9f9fc03dc46ab465d998f4d683da53487e6d"),
    ]

    @Test(arguments: boundaryVectors)
    func lengthsAroundBlockBoundaries(length: Int, expected: String) {
        let message = (0..<length).map { UInt8($0 % 251) }
        #expect(SHA256.hash(message).hexString == expected, "length \(length)")
    }

    @Test func incrementalUpdatesEqualOneShot() {
        var rng = SplitMix64(seed: 0x5A256)
        for length in 0...300 {
            let message = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
            var hasher = SHA256()
            var index = 0
            while index < message.count {
                let size = rng.int(0...min(70, message.count - index))
                hasher.update(message[index..<index + size])
                index += size
            }
            #expect(hasher.finalize() == SHA256.hash(message), "length \(length)")
        }
    }

    @Test func stringUpdateHashesUTF8() {
        var hasher = SHA256()
        hasher.update("ab")
        hasher.update("c")
        #expect(hasher.finalize() == SHA256.hash(Array("abc".utf8)))
    }
}
