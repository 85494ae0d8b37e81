import Foundation
import PlaitCore
import PlaitWire
import Testing

/// The frames of the conformance vectors (PROTOCOL.md §5, §13, §16): each decodes, validates and re-encodes to
/// exactly the bytes of the vector file, so a change to the wire encoding fails here.
@Suite("Conformance vectors: frames")
struct WireConformanceTests {
    static func vectors() throws -> [String: Any] {
        let url = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Vectors/conformance.json")
        return try #require(JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
    }

    @Test func everyFrameDecodesAndEncodesToItsBytes() throws {
        let frames = try Self.vectors()["frames"] as! [[String: Any]]
        #expect(Set(frames.map { $0["type"] as! Int }) == Set(MessageType.allCases.map { Int($0.rawValue) }))
        for entry in frames {
            let name = entry["name"] as! String
            let bytes = try bytes(entry["bytes"])
            var decoder = FrameDecoder()
            decoder.append(bytes)
            let frame = try #require(try decoder.next(), "frame \(name)")
            #expect(decoder.isAtFrameBoundary, "frame \(name) has trailing bytes")
            #expect(Int(frame.type.rawValue) == entry["type"] as! Int, "frame \(name)")
            let message = try Message.decode(frame)
            #expect(message.encode() == bytes, "frame \(name) re-encodes differently")
        }
    }

    @Test func helloCarriesTheVectorFields() throws {
        let vectors = try Self.vectors()
        let entry = (vectors["frames"] as! [[String: Any]]).first { $0["name"] as! String == "Hello" }!
        let fields = entry["fields"] as! [String: Any]
        var decoder = FrameDecoder()
        decoder.append(try bytes(entry["bytes"]))
        guard case let .hello(hello) = try Message.decode(try #require(try decoder.next())) else {
            Issue.record("the Hello vector is not a Hello")
            return
        }
        #expect(hello.protocolVersion == 2)
        #expect(hello.instanceNonce.hexString == fields["instance_nonce"] as! String)
        #expect(hello.domainName == fields["domain_name"] as! String)
        #expect(hello.deviceID == (vectors["device_id"] as! [String: Any])["text"] as! String)
        #expect(hello.summary.description == (vectors["summary"] as! [String: Any])["text"] as! String)
        #expect(hello.stateDigest.hexString == (vectors["state"] as! [String: Any])["digest"] as! String)
        #expect(hello.baselineDigest?.hexString == (vectors["baseline"] as! [String: Any])["digest"] as! String)
        #expect(hello.unknownCount == UInt64(fields["unknown_count"] as! Int))
        #expect(hello.maxFrameSize == Frame.defaultMaxSize)
    }

    /// Hello field 16 (PROTOCOL.md §13.5): set only in a one-shot session's Hello; every other Hello vector leaves
    /// it out and reads as an agent's.
    @Test func helloSaysOneShotInFieldSixteen() throws {
        let vectors = try Self.vectors()
        for entry in vectors["frames"] as! [[String: Any]] where (entry["name"] as! String).hasPrefix("Hello") {
            let fields = entry["fields"] as! [String: Any]
            var decoder = FrameDecoder()
            decoder.append(try bytes(entry["bytes"]))
            guard case let .hello(hello) = try Message.decode(try #require(try decoder.next())) else {
                Issue.record("\(entry["name"]!) is not a Hello")
                continue
            }
            #expect(hello.oneShot == (fields["one_shot"] as? Bool ?? false), "\(entry["name"]!)")
        }
        #expect((vectors["frames"] as! [[String: Any]]).contains { ($0["fields"] as? [String: Any])?["one_shot"] as? Bool == true })
    }

    /// Hello's fork records (PROTOCOL.md §22.9): the `fork_records` group's records, in branch order, read back
    /// from the frame as the consistent records they are.
    @Test func helloCarriesForkRecords() throws {
        let vectors = try Self.vectors()
        let entry = (vectors["frames"] as! [[String: Any]]).first { $0["name"] as! String == "Hello (with fork records)" }!
        var decoder = FrameDecoder()
        decoder.append(try bytes(entry["bytes"]))
        guard case let .hello(hello) = try Message.decode(try #require(try decoder.next())) else {
            Issue.record("the vector is not a Hello")
            return
        }
        let group = (vectors["fork_records"] as! [String: Any])["records"] as! [[String: Any]]
        let expected = try group.map { try ForkBranch.Record(decoding: try bytes($0["encoded"])[...]) }
            .sorted { $0.branch < $1.branch }
        #expect(hello.forkRecords == expected)
        #expect(hello.forkRecords.count == 3)
        #expect(hello.forkRecords.map { $0.encoded.hexString } == (entry["fields"] as! [String: Any])["fork_records"] as! [String])
    }

    /// Notify's state report (PROTOCOL.md §14.4): the vector's digests, read back from the frame.
    @Test func notifyCarriesTheStateReport() throws {
        let vectors = try Self.vectors()
        let frames = vectors["frames"] as! [[String: Any]]
        let entry = frames.first { $0["name"] as! String == "Notify (with its state report)" }!
        var decoder = FrameDecoder()
        decoder.append(try bytes(entry["bytes"]))
        guard case let .notify(summary, report, _) = try Message.decode(try #require(try decoder.next())) else {
            Issue.record("the Notify vector is not a Notify")
            return
        }
        #expect(summary.description == (vectors["summary"] as! [String: Any])["text"] as! String)
        #expect(report?.stateDigest.hexString == (vectors["state"] as! [String: Any])["digest"] as! String)
        #expect(report?.baselineDigest?.hexString == (vectors["baseline"] as! [String: Any])["digest"] as! String)
        #expect(report?.unknownCount == 1)
    }

    /// Notify's copied instances (PROTOCOL.md §13.2): the two nonces of the vector, read back from the frame.
    @Test func notifyCarriesCopiedInstances() throws {
        let frames = try Self.vectors()["frames"] as! [[String: Any]]
        let entry = frames.first { ($0["name"] as! String).hasPrefix("Notify (copied instances") }!
        var decoder = FrameDecoder()
        decoder.append(try bytes(entry["bytes"]))
        guard case let .notify(_, report, copies) = try Message.decode(try #require(try decoder.next())) else {
            Issue.record("the Notify vector is not a Notify")
            return
        }
        #expect(report == nil)
        #expect(copies.map(\.hexString) == (entry["fields"] as! [String: Any])["copied_instances"] as! [String])
    }

    /// A change that travels in any encoding but the canonical one is refused (PROTOCOL.md §8): A1 without its
    /// zero wall time (as a generated proto3 encoder would write it), with an unknown field, with a padded
    /// varint, with two fields swapped. The canonical A1 in the same frame is accepted.
    @Test func changesInAnotherEncodingAreRefused() throws {
        let vectors = try Self.vectors()
        let a1 = try bytes((vectors["changes"] as! [[String: Any]])[0]["canonical"])
        #expect(throws: Never.self) { try Message.decode(Frame(type: .changes, payload: changesPayload(a1))) }
        let witnessRefused = (vectors["witness_encoding"] as! [String: Any])["refused"] as! [[String: Any]]
        for entry in (vectors["refused"] as! [String: Any])["changes_refused"] as! [[String: Any]] + witnessRefused {
            let payload = changesPayload(try bytes(entry["hex"]))
            #expect(throws: WireError.self, "\(entry["why"]!)") {
                try Message.decode(Frame(type: .changes, payload: payload))
            }
        }
    }
}

extension WireConformanceTests {
    /// PROTOCOL.md §20.7: a `Changes` message carries signatures beside the changes (field 2, with the index of the
    /// change signed); it encodes to the vector's bytes and decodes to the same changes and signature, and a
    /// signature of another size, an index beyond the batch or two signatures for one change do not decode.
    @Test func changesCarryTheirSignatures() throws {
        let vectors = try Self.vectors()
        let group = vectors["changes_message"] as! [String: Any]
        let signed = (vectors["signed_timeline"] as! [String: Any])["changes"] as! [[String: Any]]
        var batch: [EncodedChange] = []
        for name in group["changes"] as! [String] {
            let entry = try #require(signed.first { $0["name"] as? String == name })
            batch.append(try EncodedChange(decoding: try bytes(entry["canonical"])[...]))
        }
        let signatures = group["signatures"] as! [[String: Any]]
        #expect(!signatures.isEmpty)
        for entry in signatures {
            let index = entry["index"] as! Int
            batch[index] = EncodedChange(
                change: batch[index].change, bytes: batch[index].bytes, signature: try bytes(entry["signature"]))
        }
        let frame = try bytes(group["bytes"])
        #expect(Message.changes(batch).encode() == frame)
        var decoder = FrameDecoder()
        decoder.append(frame)
        let decoded = try Message.decode(try #require(try decoder.next()))
        guard case let .changes(changes) = decoded else {
            Issue.record("the changes_message vector is not a Changes message")
            return
        }
        #expect(changes.map { Array($0.bytes) } == batch.map { Array($0.bytes) })
        #expect(changes.map(\.signature) == batch.map(\.signature))
        // A zero index may be written or left out (§6); plait's writer gives one of the two forms.
        let accepted = group["accepted"] as! [[String: Any]]
        #expect(!accepted.isEmpty)
        var forms: [[UInt8]] = []
        var decodedBatch: [EncodedChange] = []
        for entry in accepted {
            let frame = try bytes(entry["bytes"])
            forms.append(frame)
            var decoder = FrameDecoder()
            decoder.append(frame)
            guard case let .changes(changes) = try Message.decode(try #require(try decoder.next())) else {
                Issue.record("\(entry["why"]!): not a Changes message")
                continue
            }
            let names = entry["changes"] as! [String]
            let signedIndexes = Set(entry["signed"] as! [Int])
            #expect(changes.count == names.count, "\(entry["why"]!)")
            for (index, change) in changes.enumerated() where index < names.count {
                let vector = try #require(signed.first { $0["name"] as? String == names[index] })
                #expect(Array(change.bytes) == (try bytes(vector["canonical"])), "\(entry["why"]!)")
                let expected = signedIndexes.contains(index) ? try bytes(vector["signature"]) : nil
                #expect(change.signature == expected, "\(entry["why"]!)")
            }
            decodedBatch = changes
        }
        #expect(forms.contains(Message.changes(decodedBatch).encode()))
        let refused = group["refused"] as! [[String: Any]]
        #expect(refused.count >= 3)
        for entry in refused {
            var decoder = FrameDecoder()
            decoder.append(try bytes(entry["bytes"]))
            let frame = try #require(try decoder.next(), "\(entry["why"]!)")
            #expect(throws: WireError.self, "\(entry["why"]!)") { try Message.decode(frame) }
        }
    }
}

/// A `Changes` payload holding one change: field 1, length-delimited.
private func changesPayload(_ change: [UInt8]) -> [UInt8] {
    var payload: [UInt8] = [0x0A]
    var length = change.count
    while length >= 0x80 {
        payload.append(UInt8(length & 0x7F) | 0x80)
        length >>= 7
    }
    payload.append(UInt8(length))
    return payload + change
}

private func bytes(_ value: Any?) throws -> [UInt8] {
    let text = try #require(value as? String)
    return try #require([UInt8](hexString: text))
}
