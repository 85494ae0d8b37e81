import Foundation
import PlaitCore
import PlaitOutput
import Testing

/// The writer and the encoder on plain values: what they write is JSON that Foundation reads back to the same
/// values, keys in the declared (sorted) order, terminal controls escaped, nulls kept.
@Suite struct JSONWriterTests {
    @Test func textIsEscapedAndReadsBackTheSame() throws {
        let texts = [
            "plain", "", "quote \" backslash \\ slash /", "line\nbreak\rtab\t", "nul \u{0} bell \u{7} esc \u{1B}[31m",
            "del \u{7F} c1 \u{85}\u{9B}", "bidi \u{202E}abc\u{202C} \u{2066}x\u{2069} \u{200F} \u{061C}",
            "separators \u{2028}\u{2029}", "café 🍎 日本", String(repeating: "long ", count: 10_000),
        ]
        for text in texts {
            let json = try JSONStreamEncoder.text([text])
            let back = try JSONDecoder().decode([String].self, from: Data(json.utf8))
            #expect(back == [text], "\(text.debugDescription) → \(json.debugDescription)")
            // Nothing a terminal would act on is left raw (the layout's line breaks are outside strings).
            let raw = json.unicodeScalars.filter { $0.actsOnTerminal && $0 != "\n" }
            #expect(raw.isEmpty, "\(json.debugDescription) holds \(raw.map { String($0.value, radix: 16) })")
        }
        #expect(try JSONStreamEncoder.text(["\u{202E}\u{7F}\"\\"]) == "[\n  \"\\u202e\\u007f\\\"\\\\\"\n]\n")
    }

    @Test func nullsAreWrittenAndAbsentFieldsLeftOut() throws {
        let list = ListSummary(color: nil, completed: 0, id: "a", pending: 2, title: "T")
        #expect(
            try JSONStreamEncoder.text(list)
                == "{\n  \"color\": null,\n  \"completed\": 0,\n  \"id\": \"a\",\n  \"pending\": 2,\n  \"title\": \"T\"\n}\n")
        #expect(try JSONStreamEncoder.text(EditOutput(id: "x")) == "{\n  \"id\": \"x\"\n}\n")
        #expect(try JSONStreamEncoder.text(EditOutput(id: "x", color: .some(nil))) == "{\n  \"color\": null,\n  \"id\": \"x\"\n}\n")
        let cleared = try JSONDecoder().decode(EditOutput.self, from: Data(#"{"color": null, "id": "x"}"#.utf8))
        #expect(cleared == EditOutput(id: "x", color: .some(nil)))
    }

    @Test func nestedValuesRoundTripThroughFoundation() throws {
        let repair = RepairOutput(
            checkpoints: .init(dropped: 1, written: 2), foundOnOpen: [], home: "/h",
            materialized: .init(
                changes: 3, digest: "d", fromBaseline: true, items: 4, lists: 5, previous: "matched", problem: nil),
            pulls: [.init(address: "127.0.0.1:1", error: "refused", ok: false, pulled: 0)], setAside: ["T:1"],
            stillSetAside: [], shownBefore: .init(digest: "b", items: 6, lists: 7),
            shownAfter: .init(digest: "a", items: 8, lists: 9))
        let text = try JSONStreamEncoder.text(repair)
        #expect(try JSONDecoder().decode(RepairOutput.self, from: Data(text.utf8)) == repair)
        // The same value through Foundation's encoder with sorted keys reads the same.
        let foundation = JSONEncoder()
        foundation.outputFormatting = [.sortedKeys]
        let viaFoundation = try JSONSerialization.jsonObject(with: foundation.encode(repair)) as? NSDictionary
        let viaWriter = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? NSDictionary
        #expect(viaFoundation == viaWriter)
        #expect(text.contains("\"checkpoints\": {\n    \"dropped\": 1,\n    \"written\": 2\n  },"))
        #expect(text.contains("\"found_on_open\": [],"))
    }

    @Test func figuresAreSortedAndTyped() throws {
        var figures = Figures()
        figures["zeta"] = .integer(3)
        figures["alpha"] = .decimal(0.25)
        figures["mid"] = .text("x")
        #expect(try JSONStreamEncoder.text(figures) == "{\n  \"alpha\": 0.25,\n  \"mid\": \"x\",\n  \"zeta\": 3\n}\n")
        #expect(throws: OutputError.self) { try JSONStreamEncoder.text([Double.nan]) }
    }

    /// A writer with a descriptor hands its bytes out as its buffer fills, and the whole is what one buffer holds.
    @Test func aDescriptorWriterFlushesAsItGoes() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("plait-writer-\(UUID()).json").path
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        #expect(descriptor >= 0)
        defer { try? FileManager.default.removeItem(atPath: path) }
        let writer = JSONWriter(descriptor: descriptor, flushThreshold: 1024)
        let memory = JSONWriter()
        let items = (0..<5_000).map { ShowItem(id: ObjectID(high: UInt64($0), low: 7).description, text: "item \($0)") }
        try JSONStreamEncoder.encode(items, into: writer)
        #expect(writer.bytes.count < 2048, "at most about one buffer is held: \(writer.bytes.count) bytes")
        try writer.flush()
        close(descriptor)
        try JSONStreamEncoder.encode(items, into: memory)
        let written = FileManager.default.contents(atPath: path) ?? Data()
        #expect(written == Data(memory.bytes))
        #expect(try JSONDecoder().decode([ShowItem].self, from: written) == items)
    }

    /// `objectID` writes an ID as its description, without building the text.
    @Test func objectIDsAreWrittenAsTheirDescription() throws {
        var generator = SplitMix64(seed: 9)
        for _ in 0..<100 {
            let id = ObjectID.random(using: &generator)
            let writer = JSONWriter()
            try writer.objectID(id)
            #expect(writer.text == "\"\(id.description)\"\n")
        }
    }
}
