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

    @Test(arguments: [0x5AA_0002 as UInt64])
    func streamFedInPiecesAgreesWithTheReference(seed: UInt64) {
        print("FastSHA256Tests stream seed \(seed)")
        var random = SplitMix64(seed: seed)
        let lengths = Array(0...130) + (0..<30).map { _ in Int.random(in: 131...200_000, using: &random) }
        for length in lengths {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
            let stream = FastSHA256.stream()
            var offset = 0
            while offset < bytes.count {
                let size = min(Int.random(in: 1...70_000, using: &random), bytes.count - offset)
                bytes[offset..<(offset + size)].withUnsafeBytes { stream.update($0) }
                offset += size
            }
            let reference = bytes.withUnsafeBytes { SHA256.reference($0) }
            #expect(stream.finalize() == reference, "length \(length), seed \(seed)")
        }
        // Installed (opening a store installs it), Core's stream is OpenSSL's.
        FastSHA256.install()
        #expect(SHA256.stream() is FastSHA256.Stream)
    }

    @Test func knownAnswer() {
        // FIPS 180-4's "abc".
        let digest = Array("abc".utf8).withUnsafeBytes { FastSHA256.function($0) }
        #expect(digest.hexString == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }
}
