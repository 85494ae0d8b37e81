import PlaitCore
import Testing

@testable import PlaitStore

/// OpenSSL's SHA-256, injected into Core, against Core's pure-Swift reference.
@Suite struct FastSHA256Tests {
    @Test(arguments: [0x5AA_0001 as UInt64])
    func agreesWithTheReferenceOnRandomInputs(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        // Every length around the 64-byte block and padding boundaries, then longer ones.
        let lengths = Array(0...200) + (0..<50).map { _ in Int.random(in: 201...100_000, using: &random) }
        for length in lengths {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
            let fast = bytes.withUnsafeBytes { FastSHA256.function($0) }
            let reference = bytes.withUnsafeBytes { SHA256.reference($0) }
            #expect(fast == reference, "length \(length), seed \(seed)")
        }
    }

    @Test func knownAnswer() {
        // FIPS 180-4's "abc".
        let digest = Array("abc".utf8).withUnsafeBytes { FastSHA256.function($0) }
        #expect(digest.hexString == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }
}
