import Foundation
import PlaitCore
import Testing

@testable import PlaitStore

/// The `signed_timeline` signatures and the `intake_verdicts` scenarios (PROTOCOL.md §19, §20.8), with the real
/// ECDSA P-256 verifier: every signature of the signed timeline verifies under its begin's certificate, and each
/// scenario's batch, checked by `Intake` against the scenario's held heads and witnesses, gives exactly the
/// accepted, held-back and refused changes and the kept signatures the vectors state. scripts/check-vectors.py
/// checks the same scenarios with its own curve arithmetic.
@Suite("Conformance vectors: signed timeline signatures and intake verdicts")
struct IntakeVerdictConformanceTests {
    static func vectors() throws -> [String: Any] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Vectors/conformance.json")
        return try #require(JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
    }

    /// Every change the scenarios name, by name, as it travels (canonical bytes; signatures come per batch).
    static func changes(_ vectors: [String: Any]) throws -> [String: EncodedChange] {
        let signed = try #require(vectors["signed_timeline"] as? [String: Any])
        var entries = try #require(vectors["changes"] as? [[String: Any]])
        entries += try #require(signed["changes"] as? [[String: Any]])
        entries.append(try #require((vectors["witness_encoding"] as? [String: Any])?["without"] as? [String: Any]))
        entries += try #require((vectors["intake_verdicts"] as? [String: Any])?["changes"] as? [[String: Any]])
        var out: [String: EncodedChange] = [:]
        for entry in entries {
            let name = try #require(entry["name"] as? String)
            out[name] = try EncodedChange(decoding: try bytes(entry["canonical"])[...])
        }
        return out
    }

    @Test func signedTimelineSignaturesVerify() throws {
        let group = try #require(try Self.vectors()["signed_timeline"] as? [String: Any])
        let certificate = try bytes(group["certificate_der"])
        let verifier = P256Verifier()
        var signed = 0
        for entry in try #require(group["changes"] as? [[String: Any]]) {
            guard let signature = entry["signature"] else { continue }
            let hash = try bytes(entry["sha256"])
            #expect(
                verifier.verify(signature: try bytes(signature), changeHash: hash, certificate: certificate),
                "\(entry["name"] ?? "?")")
            signed += 1
        }
        #expect(signed >= 3)
    }

    @Test func scenariosGiveTheirVerdicts() throws {
        let vectors = try Self.vectors()
        let changes = try Self.changes(vectors)
        let group = try #require(vectors["intake_verdicts"] as? [String: Any])
        let scenarios = try #require(group["scenarios"] as? [[String: Any]])
        #expect(scenarios.count >= 6)
        // By bytes: some changes share a `timeline:seq` (S4 with and without its witness, S5 and a forged S5).
        var nameOf: [[UInt8]: String] = [:]
        for (name, change) in changes { nameOf[Array(change.bytes)] = name }
        let intake = Intake(domain: ListsDomain(), maxChangeBytes: 1 << 20, verifier: P256Verifier())
        for scenario in scenarios {
            let title = scenario["name"] as? String ?? "?"
            let held = try #require(scenario["held"] as? [String: Any])
            var heads: [TimelineID: HeldHead] = [:]
            for head in try #require(held["heads"] as? [[String: Any]]) {
                heads[try timeline(head["timeline"])] = HeldHead(
                    seq: UInt64(try #require(head["seq"] as? Int)),
                    lamport: UInt64(try #require(head["lamport"] as? Int)), hash: try bytes(head["hash"]),
                    certificate: try head["certificate_der"].map { try bytes($0) })
            }
            var witnesses: [ChangeRef: UInt64] = [:]
            for witness in try #require(held["witnesses"] as? [[String: Any]]) {
                let ref = ChangeRef(
                    timeline: try timeline(witness["timeline"]), seq: UInt64(try #require(witness["seq"] as? Int)))
                witnesses[ref] = UInt64(try #require(witness["lamport"] as? Int))
            }
            var batch: [EncodedChange] = []
            for item in try #require(scenario["batch"] as? [[String: Any]]) {
                let change = try #require(changes[item["change"] as? String ?? ""], "\(title)")
                batch.append(EncodedChange(
                    change: change.change, bytes: change.bytes,
                    signature: try item["signature"].map { try bytes($0) }))
            }
            let result = intake.check(
                batch, head: { heads[$0] },
                heldHash: { ref in heads[ref.timeline].flatMap { $0.seq == ref.seq ? $0.hash : nil } },
                witness: { ref, lamport in witnesses[ref] == lamport })
            let accepted = result.accepted.map { nameOf[$0.change.canonicalBytes] }
            #expect(accepted == names(scenario["accepted"]), "\(title)")
            #expect(result.heldBack.map { nameOf[Array($0.bytes)] } == names(scenario["held_back"]), "\(title)")
            #expect(
                result.accepted.filter { $0.signature != nil }.map { nameOf[$0.change.canonicalBytes] }
                    == names(scenario["signatures_kept"]), "\(title)")
            let refused = result.refused.map {
                "\(String($0.timeline.rawValue, radix: 16)) \(Self.reason($0.refusal)) \($0.refusal.seq)"
            }
            let expected = try #require(scenario["refused"] as? [[String: Any]]).map {
                let number = String(try timeline($0["timeline"]).rawValue, radix: 16)
                return "\(number) \($0["reason"] ?? "?") \($0["seq"] ?? "?")"
            }
            #expect(refused == expected, "\(title)")
            // A signature is kept only once verified, and it is the one that travelled with the change.
            for accepted in result.accepted where accepted.signature != nil {
                #expect(batch.contains { $0.change.ref == accepted.change.ref && $0.signature == accepted.signature })
            }
        }
    }

    /// The rule's name as PROTOCOL.md §14.2 and §20.8 write it.
    static func reason(_ refusal: Refusal) -> String {
        switch refusal {
        case .gap: return "gap"
        case .brokenChain: return "brokenChain"
        case .fork: return "fork"
        case .lamportNotIncreasing: return "lamportNotIncreasing"
        case .lamportOutOfRange: return "lamportOutOfRange"
        case .lamportImplausible: return "lamportImplausible"
        case .tooLarge: return "tooLarge"
        case .badPayload: return "badPayload"
        case .afterEnd: return "afterEnd"
        case .badBegin: return "badBegin"
        case .afterSuperseded: return "afterSuperseded"
        case .badSignature: return "badSignature"
        case .unsigned: return "unsigned"
        case .missingWitness: return "missingWitness"
        case .witnessNotHeld: return "witnessNotHeld"
        }
    }
}

private func names(_ value: Any?) -> [String?] { (value as? [String] ?? []).map { $0 } }

private func timeline(_ value: Any?) throws -> TimelineID {
    TimelineID(try #require(UInt64(value as? String ?? "", radix: 16)))
}

private func bytes(_ value: Any?) throws -> [UInt8] {
    let text = try #require(value as? String)
    return try #require([UInt8](hexString: text))
}
