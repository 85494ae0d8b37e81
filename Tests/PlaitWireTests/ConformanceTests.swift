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
        #expect(hello.protocolVersion == 1)
        #expect(hello.domainName == fields["domain_name"] as! String)
        #expect(hello.deviceID == (vectors["device_id"] as! [String: Any])["text"] as! String)
        #expect(hello.summary.description == (vectors["summary"] as! [String: Any])["text"] as! String)
        #expect(hello.stateDigest.hexString == (vectors["state"] as! [String: Any])["digest"] as! String)
        #expect(hello.baselineDigest?.hexString == (vectors["baseline"] as! [String: Any])["digest"] as! String)
        #expect(hello.unknownCount == UInt64(fields["unknown_count"] as! Int))
        #expect(hello.maxFrameSize == Frame.defaultMaxSize)
    }

    /// A change that travels in any encoding but the canonical one is refused (PROTOCOL.md §8): here A1 with its
    /// zero wall time left out, as a generated proto3 encoder would write it.
    @Test func aChangeWithoutItsZeroFieldIsRefused() throws {
        let changes = try Self.vectors()["changes"] as! [[String: Any]]
        var canonical = try bytes(changes.first { $0["name"] as! String == "A1" }!["canonical"])
        let wallTime: [UInt8] = [0x38, 0x00]
        let at = try #require((0..<canonical.count - 1).first { Array(canonical[$0..<$0 + 2]) == wallTime })
        canonical.removeSubrange(at..<at + 2)
        var payload: [UInt8] = [0x0A]
        var length = canonical.count
        while length >= 0x80 {
            payload.append(UInt8(length & 0x7F) | 0x80)
            length >>= 7
        }
        payload.append(UInt8(length))
        payload += canonical
        #expect(throws: WireError.self) { try Message.decode(Frame(type: .changes, payload: payload)) }
    }
}

private func bytes(_ value: Any?) throws -> [UInt8] {
    let text = try #require(value as? String)
    var out: [UInt8] = []
    var index = text.startIndex
    while index < text.endIndex {
        let next = text.index(index, offsetBy: 2)
        out.append(try #require(UInt8(text[index..<next], radix: 16)))
        index = next
    }
    return out
}
