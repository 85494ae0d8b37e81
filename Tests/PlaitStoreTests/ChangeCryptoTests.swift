import COpenSSL
import Foundation
import PlaitCore
import PlaitTLS
import PlaitTestSupport
import Testing

@testable import PlaitStore

/// The ECDSA P-256 change signatures of DESIGN §11 (PROTOCOL.md §20): r ‖ s, low S, the context string, and
/// a verifier that refuses everything else without crashing.
@Suite struct ChangeCryptoTests {
    static let seed: UInt64 = 0xC0FF_EE11

    static func randomHash(_ random: inout SplitMix64) -> [UInt8] {
        (0..<32).map { _ in UInt8.random(in: 0...255, using: &random) }
    }

    static func signer(_ pair: TestKeyPair) throws -> P256Signer {
        try P256Signer(keyPEM: pair.keyPEM, certificatePEM: pair.certificatePEM)
    }

    @Test func signatureRoundTrips() throws {
        let pair = try TestKeyPair()
        let signer = try Self.signer(pair)
        #expect(signer.certificate == pair.certificateDER)
        var random = SplitMix64(seed: Self.seed)
        let hash = Self.randomHash(&random)
        let signature = try signer.sign(changeHash: hash)
        #expect(signature.count == ChangeSignature.size)
        #expect(P256Verifier().verify(signature: signature, changeHash: hash, certificate: pair.certificateDER))
    }

    /// Low S always: OpenSSL's raw s is high about half the time, so 200 signatures all low means the signer
    /// normalizes (the chance that 200 raw signatures are all low by luck is 2^-200).
    @Test func everySignatureHasLowS() throws {
        let pair = try TestKeyPair()
        let signer = try Self.signer(pair)
        let verifier = P256Verifier()
        var random = SplitMix64(seed: Self.seed)
        for index in 0..<200 {
            let hash = Self.randomHash(&random)
            let signature = try signer.sign(changeHash: hash)
            #expect(signature.count == 64, "signature \(index), seed \(Self.seed)")
            #expect(!P256.isHigh(signature[32...]), "signature \(index), seed \(Self.seed): s is high")
            #expect(P256.isInRange(signature[0..<32]) && P256.isInRange(signature[32...]))
            #expect(
                verifier.verify(signature: signature, changeHash: hash, certificate: pair.certificateDER),
                "signature \(index), seed \(Self.seed)")
        }
    }

    /// (r, n − s) is as valid as (r, s) to ECDSA; plait accepts only the low one, so a relay cannot make a
    /// second valid signature out of the first.
    @Test func highSTwinIsRefused() throws {
        let pair = try TestKeyPair()
        let signer = try Self.signer(pair)
        var random = SplitMix64(seed: Self.seed)
        let hash = Self.randomHash(&random)
        let signature = try signer.sign(changeHash: hash)
        let twin = Array(signature[0..<32]) + P256.subtract(P256.order[...], signature[32...])
        #expect(P256.isHigh(twin[32...]))
        // The twin is a valid ECDSA signature (OpenSSL itself accepts it): the refusal is the low-S rule.
        #expect(
            try rawVerify(
                der: derEncoding(twin), message: ChangeSignature.message(forChangeHash: hash),
                certificate: pair.certificateDER))
        #expect(!P256Verifier().verify(signature: twin, changeHash: hash, certificate: pair.certificateDER))
    }

    @Test func aFlippedBitIsRefused() throws {
        let pair = try TestKeyPair()
        let signer = try Self.signer(pair)
        let verifier = P256Verifier()
        var random = SplitMix64(seed: Self.seed)
        let hash = Self.randomHash(&random)
        let signature = try signer.sign(changeHash: hash)
        #expect(verifier.verify(signature: signature, changeHash: hash, certificate: pair.certificateDER))
        for bit in [0, 7, 100, 255] {
            var flipped = hash
            flipped[bit / 8] ^= 1 << (bit % 8)
            #expect(
                !verifier.verify(signature: signature, changeHash: flipped, certificate: pair.certificateDER),
                "hash bit \(bit)")
        }
        for bit in [0, 9, 255, 256, 300, 511] {
            var flipped = signature
            flipped[bit / 8] ^= 1 << (bit % 8)
            #expect(
                !verifier.verify(signature: flipped, changeHash: hash, certificate: pair.certificateDER),
                "signature bit \(bit)")
        }
    }

    /// A signature by the same key over the hash under another context (no context, another version, the
    /// context without its NUL) is not a change signature.
    @Test func anotherContextIsRefused() throws {
        let pair = try TestKeyPair()
        let verifier = P256Verifier()
        var random = SplitMix64(seed: Self.seed)
        let hash = Self.randomHash(&random)
        // The raw signer is right when given plait's own message, so its other signatures fail for their context.
        let own = try rawSign(message: ChangeSignature.message(forChangeHash: hash), keyPEM: pair.keyPEM)
        #expect(verifier.verify(signature: own, changeHash: hash, certificate: pair.certificateDER))
        let others: [[UInt8]] = [
            hash, Array("plait-change-v2".utf8) + [0] + hash, Array("plait-change-v1".utf8) + hash,
            Array("plait-timeline".utf8) + hash,
        ]
        for message in others {
            let signature = try rawSign(message: message, keyPEM: pair.keyPEM)
            #expect(
                !verifier.verify(signature: signature, changeHash: hash, certificate: pair.certificateDER),
                "signed over \(message.count) bytes")
        }
    }

    @Test func anotherKeysSignatureIsRefused() throws {
        let alice = try TestKeyPair(commonName: "alice")
        let mallory = try TestKeyPair(commonName: "mallory")
        var random = SplitMix64(seed: Self.seed)
        let hash = Self.randomHash(&random)
        let forged = try Self.signer(mallory).sign(changeHash: hash)
        let verifier = P256Verifier()
        #expect(!verifier.verify(signature: forged, changeHash: hash, certificate: alice.certificateDER))
        #expect(verifier.verify(signature: forged, changeHash: hash, certificate: mallory.certificateDER))
    }

    /// Certificates that do not parse, carry trailing bytes, or hold another kind of key verify nothing.
    @Test func badCertificatesVerifyNothing() throws {
        let pair = try TestKeyPair()
        var random = SplitMix64(seed: Self.seed)
        let hash = Self.randomHash(&random)
        let signature = try Self.signer(pair).sign(changeHash: hash)
        let der = pair.certificateDER
        var garbage: [[UInt8]] = [
            [], [0x30], [0x30, 0x82, 0xFF, 0xFF], Array(der.dropLast()), der + [0], Array(der.prefix(der.count / 2)),
            (0..<300).map { _ in UInt8.random(in: 0...255, using: &random) },
        ]
        // The header bytes, then 300 single-byte corruptions at random places.
        for index in [0, 1, 2, 3, 4] + (0..<300).map({ _ in Int.random(in: 0..<der.count, using: &random) }) {
            var damaged = der
            damaged[index] ^= 0xFF
            garbage.append(damaged)
        }
        let verifier = P256Verifier()
        let key = try #require(publicKeyInfo(der))
        var stillParsed = 0
        for (index, certificate) in garbage.enumerated() {
            // A byte damaged in the name, the validity or the self-signature leaves a certificate with the same
            // key: plait does not check the self-signature (the pin is the trust), so only the key decides.
            let sameKey = publicKeyInfo(certificate) == key
            if sameKey { stillParsed += 1 }
            #expect(
                verifier.verify(signature: signature, changeHash: hash, certificate: certificate) == sameKey,
                "garbage \(index), seed \(Self.seed)")
        }
        #expect(stillParsed <= garbage.count - 7)
        for kind in [TestKeyPair.Kind.p384, .ed25519] {
            let other = try TestKeyPair(kind)
            #expect(!verifier.verify(signature: signature, changeHash: hash, certificate: other.certificateDER))
        }
        // And the real certificate still verifies after all that (the cache kept nothing wrong).
        #expect(verifier.verify(signature: signature, changeHash: hash, certificate: der))
    }

    @Test func malformedSignaturesAreRefused() throws {
        let pair = try TestKeyPair()
        var random = SplitMix64(seed: Self.seed)
        let hash = Self.randomHash(&random)
        let signature = try Self.signer(pair).sign(changeHash: hash)
        let r = Array(signature[0..<32])
        let s = Array(signature[32...])
        let zero = [UInt8](repeating: 0, count: 32)
        let order = P256.order
        let candidates: [[UInt8]] = [
            [], Array(signature.prefix(63)), signature + [0], r, zero + s, r + zero, order + s, r + order,
            [UInt8](repeating: 0xFF, count: 64), P256.halfOrder + P256.halfOrder,
            try derEncoding(signature),
        ]
        let verifier = P256Verifier()
        for (index, candidate) in candidates.enumerated() {
            #expect(
                !verifier.verify(signature: candidate, changeHash: hash, certificate: pair.certificateDER), "\(index)")
        }
        let certificate = pair.certificateDER
        #expect(!verifier.verify(signature: signature, changeHash: Array(hash.prefix(31)), certificate: certificate))
        #expect(!verifier.verify(signature: signature, changeHash: [], certificate: certificate))
        #expect(verifier.verify(signature: signature, changeHash: hash, certificate: pair.certificateDER))
    }

    /// The DER conversions: minimal INTEGERs (a zero byte before a set top bit, leading zeros dropped).
    @Test func derConversionIsMinimal() throws {
        var raw = [UInt8](repeating: 0, count: 64)
        raw[0] = 0x80  // r: top bit set → 33 bytes with a leading zero
        raw[31] = 1
        raw[62] = 0x01  // s = 0x0102: two bytes
        raw[63] = 0x02
        let der = try #require(P256.derSignature(fromRaw: raw))
        #expect(der == [0x30, 0x27, 0x02, 0x21, 0x00] + raw[0..<32] + [0x02, 0x02, 0x01, 0x02])
        #expect(P256.lowSSignature(fromDER: der[...]) == raw)
        #expect(P256.lowSSignature(fromDER: [0x30, 0x00][...]) == nil)
        #expect(P256.lowSSignature(fromDER: [][...]) == nil)
    }

    @Test func signerRefusesAKeyThatIsNotItsCertificates() throws {
        let alice = try TestKeyPair(commonName: "alice")
        let bob = try TestKeyPair(commonName: "bob")
        #expect {
            try P256Signer(keyPEM: alice.keyPEM, certificatePEM: bob.certificatePEM)
        } throws: { error in
            guard case StoreError.signingKeyMismatch = error else { return false }
            return "\(error)".contains("is not the certificate's key")
        }
        for kind in [TestKeyPair.Kind.p384, .ed25519] {
            let other = try TestKeyPair(kind)
            #expect("\(kind)") {
                try P256Signer(keyPEM: other.keyPEM, certificatePEM: other.certificatePEM)
            } throws: { error in
                guard case StoreError.signingIdentityUnusable(_, let detail) = error else { return false }
                return detail.contains("not an ECDSA P-256 key")
            }
        }
        #expect(throws: StoreError.self) {
            try P256Signer(keyPEM: Array("nope".utf8), certificatePEM: alice.certificatePEM)
        }
        #expect(throws: StoreError.self) { try P256Signer(keyPEM: alice.keyPEM, certificatePEM: []) }
    }

    @Test func signerReadsAHome() throws {
        try withTemporaryDirectory { directory in
            #expect {
                try P256Signer(directory: directory.path)
            } throws: { error in
                guard case StoreError.signingIdentityUnusable(let what, let detail) = error else { return false }
                return what == directory.file("key.pem") && detail == "it does not exist"
            }
            let pair = try TestKeyPair()
            try pair.write(to: directory.path)
            let signer = try P256Signer(directory: directory.path)
            #expect(signer.certificate == pair.certificateDER)
            let hash = [UInt8](repeating: 7, count: 32)
            #expect(
                P256Verifier().verify(
                    signature: try signer.sign(changeHash: hash), changeHash: hash, certificate: pair.certificateDER))
            #expect(throws: StoreError.self) { try signer.sign(changeHash: [1, 2, 3]) }
        }
    }

    /// One signer and one verifier shared by several threads, with valid and refused signatures interleaved.
    @Test func signAndVerifyFromSeveralThreadsAtOnce() async throws {
        let pairs = try (0..<3).map { try TestKeyPair(commonName: "author \($0)") }
        let signers = try pairs.map(Self.signer)
        let verifier = P256Verifier()
        let results = try await withThrowingTaskGroup(of: [String].self) { group in
            for worker in 0..<8 {
                group.addTask {
                    var random = SplitMix64(seed: Self.seed &+ UInt64(worker))
                    var failures: [String] = []
                    for round in 0..<40 {
                        let author = Int.random(in: 0..<3, using: &random)
                        let hash = Self.randomHash(&random)
                        let signature = try signers[author].sign(changeHash: hash)
                        let own = pairs[author].certificateDER
                        let other = pairs[(author + 1) % 3].certificateDER
                        if !verifier.verify(signature: signature, changeHash: hash, certificate: own) {
                            failures.append("worker \(worker) round \(round): valid signature refused")
                        }
                        if verifier.verify(signature: signature, changeHash: hash, certificate: other) {
                            failures.append("worker \(worker) round \(round): another key's certificate accepted")
                        }
                    }
                    return failures
                }
            }
            return try await group.reduce(into: []) { $0 += $1 }
        }
        #expect(results.isEmpty, "seed \(Self.seed): \(results.prefix(5))")
    }

    /// More certificates than the cache holds: evicted keys are parsed again and still verify.
    @Test func theKeyCacheIsBoundedAndStaysRight() throws {
        var random = SplitMix64(seed: Self.seed)
        let hash = Self.randomHash(&random)
        let pair = try TestKeyPair()
        let signature = try Self.signer(pair).sign(changeHash: hash)
        let verifier = P256Verifier()
        #expect(verifier.verify(signature: signature, changeHash: hash, certificate: pair.certificateDER))
        // Distinct unparsable "certificates" fill the cache (they are cached as verifying nothing).
        for index in 0..<(P256Verifier.cacheLimit + 10) {
            let filler = [0x30, 0x03, 0x02, 0x01, UInt8(index & 0xFF), UInt8(index >> 8)]
            #expect(!verifier.verify(signature: signature, changeHash: hash, certificate: filler))
        }
        #expect(verifier.cachedKeyCount <= P256Verifier.cacheLimit)
        #expect(verifier.verify(signature: signature, changeHash: hash, certificate: pair.certificateDER))
    }
}

// MARK: - OpenSSL used directly, to make what the signer never makes

/// The subjectPublicKeyInfo (DER) of a certificate that parses as exactly one X.509 DER, else nil.
private func publicKeyInfo(_ certificate: [UInt8]) -> [UInt8]? {
    certificate.withUnsafeBufferPointer { buffer -> [UInt8]? in
        guard let base = buffer.baseAddress else { return nil }
        var cursor: UnsafePointer<UInt8>? = base
        guard let x509 = d2i_X509(nil, &cursor, buffer.count) else {
            ERR_clear_error()
            return nil
        }
        defer { X509_free(x509) }
        guard cursor == base + buffer.count, let key = X509_get0_pubkey(x509) else {
            ERR_clear_error()
            return nil
        }
        let length = i2d_PUBKEY(key, nil)
        guard length > 0 else { return nil }
        var out = [UInt8](repeating: 0, count: Int(length))
        _ = out.withUnsafeMutableBufferPointer { pointer -> Int32 in
            var write = pointer.baseAddress
            return i2d_PUBKEY(key, &write)
        }
        return out
    }
}

/// The DER ECDSA-Sig-Value of r ‖ s without plait's checks (so a high-S twin can be encoded).
private func derEncoding(_ raw: [UInt8]) throws -> [UInt8] {
    func integer(_ value: ArraySlice<UInt8>) -> [UInt8] {
        var digits = Array(value.drop { $0 == 0 })
        if digits.isEmpty || digits[0] & 0x80 != 0 { digits.insert(0, at: 0) }
        return [0x02, UInt8(digits.count)] + digits
    }
    let body = integer(raw[0..<32]) + integer(raw[32...])
    return [0x30, UInt8(body.count)] + body
}

/// OpenSSL's own ECDSA verification of a DER signature over `message`, no low-S rule.
private func rawVerify(der: [UInt8], message: [UInt8], certificate: [UInt8]) throws -> Bool {
    var cursor: UnsafePointer<UInt8>? = nil
    let x509 = try certificate.withUnsafeBufferPointer { buffer in
        cursor = buffer.baseAddress
        return try #require(d2i_X509(nil, &cursor, buffer.count))
    }
    defer { X509_free(x509) }
    let key = try #require(X509_get_pubkey(x509))
    defer { EVP_PKEY_free(key) }
    let context = try #require(EVP_MD_CTX_new())
    defer { EVP_MD_CTX_free(context) }
    return EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1
        && EVP_DigestVerify(context, der, der.count, message, message.count) == 1
}

/// ECDSA P-256 with SHA-256 over any `message` with the key in `keyPEM`, as low-S r ‖ s.
private func rawSign(message: [UInt8], keyPEM: [UInt8]) throws -> [UInt8] {
    let bio = try #require(keyPEM.withUnsafeBytes { BIO_new_mem_buf($0.baseAddress, Int32($0.count)) })
    defer { BIO_free(bio) }
    let key = try #require(PEM_read_bio_PrivateKey(bio, nil, nil, nil))
    defer { EVP_PKEY_free(key) }
    let context = try #require(EVP_MD_CTX_new())
    defer { EVP_MD_CTX_free(context) }
    var der = [UInt8](repeating: 0, count: 80)
    var length = der.count
    #expect(EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key) == 1)
    #expect(EVP_DigestSign(context, &der, &length, message, message.count) == 1)
    return try #require(P256.lowSSignature(fromDER: der[0..<length]))
}
