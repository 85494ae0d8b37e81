import Foundation
import Testing

@testable import PlaitCore

/// The `signed_timeline` and `witness_encoding` conformance vectors (PROTOCOL.md §19, §20.5, §20.6): a signed
/// timeline's changes encode, hash and chain, its begin derives its timeline ID, a change with a witness differs
/// from the same change without one only by field 9, and every other encoding of field 9 is refused. The
/// signatures are checked with the real verifier in the store's tests (ECDSA is not in the engine).
@Suite("Conformance vectors: signed timeline and witnesses")
struct SignedTimelineConformanceTests {
    static func group(_ name: String) throws -> [String: Any] {
        try #require(try ConformanceTests.vectors()[name] as? [String: Any])
    }

    @Test func signedTimelineEncodesHashesAndChains() throws {
        let group = try Self.group("signed_timeline")
        let timeline = TimelineID(try #require(UInt64(group["timeline"] as? String ?? "", radix: 16)))
        let begin = TimelineBegin(certificate: try bytes(group["certificate_der"]), nonce: try bytes(group["nonce"]))
        #expect(begin.timelineID == timeline)
        #expect(timeline.description == group["timeline_text"] as? String)
        let entries = try #require(group["changes"] as? [[String: Any]])
        #expect(entries.count >= 4)
        var head: Change?
        var witnesses = 0
        for entry in entries {
            let name = entry["name"] as? String ?? "?"
            let change = try ConformanceTests.change(entry)
            #expect(change.timeline == timeline, "\(name)")
            #expect(change.canonicalBytes.hexString == entry["canonical"] as? String, "\(name)")
            #expect(change.hash.hexString == entry["sha256"] as? String, "\(name)")
            #expect(try Change(canonical: try bytes(entry["canonical"])[...]) == change, "\(name)")
            #expect(change.previousHash == (head?.hash ?? Change.zeroHash), "chain at \(name)")
            #expect(change.lamport > (head?.lamport ?? 0), "Lamport at \(name)")
            if change.lamport > (head?.lamport ?? 0) + 1 { #expect(change.witness != nil, "\(name) jumps") }
            if change.witness != nil { witnesses += 1 }
            if change.kind == TimelineBegin.kind {
                #expect(change.seq == 1, "\(name)")
                #expect(try TimelineBegin(payload: change.payload) == begin, "\(name)")
            } else {
                let fields = try #require(entry["payload_fields"] as? [String: Any], "\(name)")
                let expected = try ConformanceTests.listsChange(kind: change.kind, fields)
                #expect(expected.payload == change.payload, "\(name)")
            }
            head = change
        }
        #expect(witnesses >= 1)
        #expect(entries.last?["signature"] != nil, "the head is signed")
    }

    @Test func aWitnessIsFieldNineAfterTheUnchangedBytes() throws {
        let group = try Self.group("witness_encoding")
        let named = try #require(group["with"] as? String)
        let entries = try #require(try Self.group("signed_timeline")["changes"] as? [[String: Any]])
        let with = try ConformanceTests.change(try #require(entries.first { $0["name"] as? String == named }))
        let withoutEntry = try #require(group["without"] as? [String: Any])
        let without = try ConformanceTests.change(withoutEntry)
        #expect(with.witness != nil && without.witness == nil)
        var stripped = with
        stripped.witness = nil
        #expect(stripped == without)
        #expect(without.canonicalBytes.hexString == withoutEntry["canonical"] as? String)
        #expect(without.hash.hexString == withoutEntry["sha256"] as? String)
        #expect(with.canonicalBytes == without.canonicalBytes + (try bytes(group["field_9"])))
        #expect(try Change(canonical: without.canonicalBytes[...]) == without)
    }

    @Test func otherEncodingsOfTheWitnessAreRefused() throws {
        let refused = try #require(try Self.group("witness_encoding")["refused"] as? [[String: Any]])
        #expect(refused.count >= 5)
        for entry in refused {
            #expect(throws: CoreError.self, "\(entry["why"] ?? "?")") {
                try EncodedChange(decoding: try bytes(entry["hex"])[...])
            }
        }
    }
}

private func bytes(_ value: Any?) throws -> [UInt8] {
    let text = try #require(value as? String)
    return try #require([UInt8](hexString: text))
}
