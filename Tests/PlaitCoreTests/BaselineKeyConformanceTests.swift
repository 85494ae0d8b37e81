import Foundation
import Testing

@testable import PlaitCore

/// The `baseline_keys` conformance vectors (PROTOCOL.md §20.9): the baseline folding the signed timeline S1–S5 of
/// `signed_timeline`, whose entry carries the begin's certificate (field 6) and nonce (field 8); the same baseline
/// as a build before the nonce wrote it; and baselines a reader MUST refuse as corrupt, each saying why.
///
/// The group is generated here (`PLAIT_WRITE_BASELINE_KEY_VECTORS=path` writes it to `path` as JSON, to be put into
/// Tests/Vectors/conformance.json); the tests check the stored group against `Baseline` and against what the
/// generator makes now. scripts/check-vectors.py checks it from PROTOCOL.md alone.
@Suite("Conformance vectors: baseline keys")
struct BaselineKeyConformanceTests {
    static func stored() throws -> [String: Any] {
        try #require(try ConformanceTests.vectors()["baseline_keys"] as? [String: Any])
    }

    @Test func theSignedBaselineDecodesToItsFieldsAndEncodesAsStored() throws {
        let group = try Self.stored()
        let bytes = try #require([UInt8](hexString: group["encoded"] as? String ?? ""))
        let baseline = try Baseline(decoding: bytes[...])
        #expect(baseline.encoded() == bytes)
        let timeline = TimelineID(try #require(UInt64(group["timeline"] as? String ?? "", radix: 16)))
        #expect(baseline.certificates[timeline]?.hexString == group["certificate_der"] as? String)
        #expect(baseline.nonces[timeline]?.hexString == group["nonce"] as? String)
        #expect(baseline.summary[timeline] == UInt64(try #require(group["seq"] as? Int)))
        #expect(SHA256.hash(bytes).hexString == group["digest"] as? String)
        // The older build's encoding decodes too: no nonce (a receiver that does not hold the begin refuses it at
        // adoption, §20.9 item 5, which is the store's test).
        let older = try #require([UInt8](hexString: group["without_nonce"] as? String ?? ""))
        let decoded = try Baseline(decoding: older[...])
        #expect(decoded.nonces.isEmpty && decoded.certificates[timeline] != nil)
        #expect(decoded.encoded() == older)
    }

    @Test func refusedBaselinesDoNotDecode() throws {
        let refused = try #require(try Self.stored()["refused"] as? [[String: Any]])
        #expect(refused.count == 4)
        for entry in refused {
            let bytes = try #require([UInt8](hexString: entry["encoded"] as? String ?? ""))
            #expect(throws: CoreError.self, "\(entry["why"] ?? "")") { try Baseline(decoding: bytes[...]) }
        }
    }

    @Test func theStoredGroupIsWhatTheGeneratorMakes() throws {
        let generated = try Self.generate()
        if let path = ProcessInfo.processInfo.environment["PLAIT_WRITE_BASELINE_KEY_VECTORS"] {
            try JSONSerialization.data(withJSONObject: generated, options: [.prettyPrinted, .sortedKeys])
                .write(to: URL(fileURLWithPath: path))
        }
        #expect(NSDictionary(dictionary: generated).isEqual(to: try Self.stored()))
    }

    // MARK: - The generator

    /// `baseline` (one timeline) encoded with its entry's nonce but not its certificate.
    static func entryWithoutCertificate(_ baseline: Baseline, _ timeline: TimelineID, _ nonce: [UInt8]) -> [UInt8] {
        var writer = ProtoWriter()
        writer.uint(1, UInt64(Baseline.format))
        writer.message(2) { entry in
            entry.fixed64(1, timeline.rawValue)
            entry.uint(2, baseline.summary[timeline])
            entry.data(3, baseline.heads[timeline] ?? [])
            entry.uint(4, baseline.headLamports[timeline] ?? 0)
            entry.bool(5, false)
            entry.data(8, nonce)
        }
        writer.uint(3, baseline.maxLamport)
        writer.data(4, baseline.snapshot)
        return writer.bytes
    }

    static func generate() throws -> [String: Any] {
        let vectors = try ConformanceTests.vectors()
        let signed = try #require(vectors["signed_timeline"] as? [String: Any])
        let changes = try (signed["changes"] as? [[String: Any]] ?? []).map(ConformanceTests.change)
        var folder = try BaselineFolder(domain: ListsDomain(), previous: nil)
        for change in changes.sorted(by: { ($0.lamport, $0.timeline, $0.seq) < ($1.lamport, $1.timeline, $1.seq) }) {
            try folder.add(change)
        }
        let baseline = folder.finish()
        let timeline = try #require(changes.first?.timeline)
        let certificate = try #require(baseline.certificates[timeline])
        let nonce = try #require(baseline.nonces[timeline])
        var older = baseline
        older.nonces = [:]
        let verdicts = try #require(vectors["intake_verdicts"] as? [String: Any])
        let forger = try #require([UInt8](hexString: verdicts["forger_certificate_der"] as? String ?? ""))
        func variant(_ why: String, _ edit: (inout Baseline) -> Void) -> [String: Any] {
            var copy = baseline
            edit(&copy)
            return ["why": why, "encoded": copy.encoded().hexString]
        }
        let refused = [
            variant("a nonce of 15 bytes") { $0.nonces[timeline] = Array(nonce.prefix(15)) },
            // A writer never writes this one (the nonce goes only with a certificate): its entry is written out here.
            ["why": "a nonce without a certificate", "encoded": Self.entryWithoutCertificate(baseline, timeline, nonce).hexString],
            variant("another nonce: certificate and nonce derive another timeline") {
                $0.nonces[timeline] = nonce.map { $0 ^ 0xff }
            },
            variant("another key's certificate (forger_certificate_der of intake_verdicts) with the begin's nonce") {
                $0.certificates[timeline] = forger
            },
        ]
        return [
            "about": "PROTOCOL.md §20.9: the baseline folding S1-S5 of signed_timeline; its one entry carries the "
                + "begin's certificate_der (field 6) and nonce (field 8), which derive its timeline (§20.5). "
                + "without_nonce is the same baseline as a build before the nonce wrote it (it decodes; a receiver "
                + "that holds neither the begin nor the certificate refuses it, §20.9 item 5). refused: baselines a "
                + "reader MUST refuse as corrupt, each saying why.",
            "folds": changes.indices.map { "S\($0 + 1)" },
            "timeline": ForkRecordConformanceTests.hex(timeline),
            "seq": Int(baseline.summary[timeline]),
            "certificate_der": certificate.hexString,
            "nonce": nonce.hexString,
            "encoded": baseline.encoded().hexString,
            "digest": SHA256.hash(baseline.encoded()).hexString,
            "without_nonce": older.encoded().hexString,
            "refused": refused,
        ]
    }
}
