import Foundation
import PlaitNetnsSupport
import Testing

@testable import PlaitCore

/// The conformance vectors of PROTOCOL.md §19 (`Tests/Vectors/conformance.json`), generated once and checked
/// by hand: any change to how the engine encodes, hashes or digests fails here, and so does any drift
/// between PROTOCOL.md and the vectors (the independent Python checker runs too).
@Suite("Conformance vectors")
struct ConformanceTests {
    static let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    static func vectors() throws -> [String: Any] {
        let url = repositoryRoot.appendingPathComponent("Tests/Vectors/conformance.json")
        return try #require(JSONSerialization.jsonObject(with: Data(contentsOf: url)) as? [String: Any])
    }

    @Test func timelineIDs() throws {
        for entry in try Self.vectors()["timeline_ids"] as! [[String: Any]] {
            let id = TimelineID(try hexTimeline(entry["hex"]))
            #expect(id.description == entry["text"] as! String)
            #expect(try TimelineID(parsing: entry["text"] as! String) == id)
        }
    }

    @Test func changesEncodeHashAndChain() throws {
        var heads: [TimelineID: Change] = [:]
        for entry in try Self.vectors()["changes"] as! [[String: Any]] {
            let name = entry["name"] as! String
            let change = try Self.change(entry)
            #expect(hex(change.canonicalBytes) == entry["canonical"] as! String, "change \(name)")
            #expect(hex(change.hash) == entry["sha256"] as! String, "change \(name)")
            // Decoding the canonical bytes gives the same change back.
            #expect(try Change(canonical: try unhex(entry["canonical"])[...]) == change, "change \(name)")
            #expect(change.previousHash == (heads[change.timeline]?.hash ?? Change.zeroHash), "chain at \(name)")
            heads[change.timeline] = change
            if let fields = entry["payload_fields"] as? [String: Any] {
                let expected = try Self.listsChange(kind: change.kind, fields)
                #expect(try ListsChange(kind: change.kind, payload: change.payload) == expected, "payload of \(name)")
                #expect(expected.payload == change.payload, "payload of \(name)")
            }
        }
    }

    @Test func payloadOfEveryKind() throws {
        for entry in try Self.vectors()["payloads"] as! [[String: Any]] {
            let kind = entry["kind"] as! String
            let expected = try Self.listsChange(kind: kind, entry["fields"] as! [String: Any])
            #expect(hex(expected.payload) == entry["hex"] as! String, "\(kind)")
            #expect(try ListsChange(kind: kind, payload: try unhex(entry["hex"])) == expected, "\(kind)")
        }
    }

    @Test func stateReplaysToItsCanonicalEncodingAndDigest() throws {
        let vectors = try Self.vectors()
        let changes = try (vectors["changes"] as! [[String: Any]]).map(Self.change)
        let state = vectors["state"] as! [String: Any]
        var engine = ReplayEngine(
            domain: ListsDomain(), state: ListsState(), position: .zero, checkpointInterval: Int.max)
        var skipped = 0
        for change in changes.sorted(by: { $0.orderKey < $1.orderKey }) {
            if engine.applyNext(change) == .uninterpretable { skipped += 1 }
        }
        #expect(hex(ListsDomain().canonicalEncoding(of: engine.state)) == state["canonical"] as! String)
        #expect(hex(engine.digest) == state["digest"] as! String)
        #expect(skipped == state["uninterpretable"] as! Int)
    }

    @Test func baselineFoldsEncodesAndRestores() throws {
        let vectors = try Self.vectors()
        let entries = vectors["changes"] as! [[String: Any]]
        let vector = vectors["baseline"] as! [String: Any]
        let folds = Set(vector["folds"] as! [String])
        let changes = try entries.map { ($0["name"] as! String, try Self.change($0)) }
        var folder = try BaselineFolder(domain: ListsDomain(), previous: nil)
        for (_, change) in changes.filter({ folds.contains($0.0) }).sorted(by: { $0.1.orderKey < $1.1.orderKey }) {
            try folder.add(change)
        }
        let baseline = folder.finish()
        #expect(hex(baseline.snapshot) == vector["snapshot"] as! String)
        #expect(hex(baseline.encoded()) == vector["encoded"] as! String)
        #expect(hex(SHA256.hash(baseline.encoded())) == vector["digest"] as! String)
        #expect(try Baseline(decoding: try unhex(vector["encoded"])[...]) == baseline)
        // A device holding this baseline and the later changes is in the state of the vectors.
        var engine = ReplayEngine(
            domain: ListsDomain(), state: try ListsDomain().restore(snapshot: baseline.snapshot[...]), position: .zero,
            checkpointInterval: Int.max)
        for (_, change) in changes.filter({ !folds.contains($0.0) }).sorted(by: { $0.1.orderKey < $1.1.orderKey }) {
            engine.applyNext(change)
        }
        #expect(hex(engine.digest) == (vectors["state"] as! [String: Any])["digest"] as! String)
    }

    @Test func summaryTextForm() throws {
        let vector = try Self.vectors()["summary"] as! [String: Any]
        var summary = Summary()
        for entry in vector["entries"] as! [[String: Any]] {
            summary[TimelineID(try hexTimeline(entry["timeline"]))] = UInt64(entry["seq"] as! Int)
        }
        #expect(summary.description == vector["text"] as! String)
        #expect(try Summary(parsing: vector["text"] as! String) == summary)
    }

    /// PROTOCOL.md §7: the text form parses strictly.
    @Test func summaryTextsAcceptedAndRefused() throws {
        let refused = try Self.vectors()["refused"] as! [String: Any]
        for text in refused["summary_texts_accepted"] as! [String] {
            #expect(try Summary(parsing: text).description == text, "\(text)")
        }
        for text in refused["summary_texts_refused"] as! [String] {
            #expect(throws: CoreError.self, "\(text)") { try Summary(parsing: text) }
        }
    }

    /// PROTOCOL.md §19: the Python checker recomputes every vector from the specification alone, so the vectors
    /// (and the Swift code tested against them above) agree with the document, not only with themselves.
    @Test func independentCheckerAgreesWithTheSpecification() throws {
        let python = ["/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"]
            .first { FileManager.default.isExecutableFile(atPath: $0) }
        guard let python else {
            print("python3 is not installed: scripts/check-vectors.py skipped")
            return
        }
        let run = try ChildProcess.run(
            python, [Self.repositoryRoot.appendingPathComponent("scripts/check-vectors.py").path])
        let text = run.output + run.errors
        #expect(run.succeeded, "scripts/check-vectors.py:\n\(text)")
        #expect(text.contains("checks agree with PROTOCOL.md"), "\(text)")
    }

    // MARK: Reading the vectors

    static func change(_ entry: [String: Any]) throws -> Change {
        var witness: ChangeRef?
        if let named = entry["witness"] as? [String: Any] {
            witness = ChangeRef(
                timeline: TimelineID(try hexTimeline(named["timeline"])), seq: UInt64(named["seq"] as! Int))
        }
        return Change(
            timeline: TimelineID(try hexTimeline(entry["timeline"])), seq: UInt64(entry["seq"] as! Int),
            lamport: UInt64(entry["lamport"] as! Int), previousHash: try unhex(entry["previous_hash"]),
            kind: entry["kind"] as! String, version: UInt32(entry["version"] as! Int),
            wallTime: Int64(entry["wall_time"] as! Int), payload: try unhex(entry["payload"]), witness: witness)
    }

    static func listsChange(kind: String, _ fields: [String: Any]) throws -> ListsChange {
        func id(_ key: String) throws -> ObjectID { try ObjectID(bytes: try unhex(fields[key])) }
        func position(_ key: String) throws -> Position {
            let at = fields[key] as! [String: Any]
            if at["top"] != nil { return .top }
            if at["bottom"] != nil { return .bottom }
            return .after(try ObjectID(bytes: try unhex(at["after"])))
        }
        let text = { (key: String) in fields[key] as! String }
        switch kind {
        case "list.create":
            return .listCreate(
                id: try id("id"), title: text("title"), color: fields["color"] as? String, at: try position("at"))
        case "list.rename": return .listRename(id: try id("id"), title: text("title"))
        case "list.recolor": return .listRecolor(id: try id("id"), color: fields["color"] as? String)
        case "list.move": return .listMove(id: try id("id"), at: try position("at"))
        case "list.delete":
            var observed = Summary()
            for entry in fields["observed"] as! [[String: Any]] {
                observed[TimelineID(try hexTimeline(entry["timeline"]))] = UInt64(entry["seq"] as! Int)
            }
            return .listDelete(id: try id("id"), observed: observed)
        case "item.create":
            return .itemCreate(id: try id("id"), list: try id("list"), text: text("text"), at: try position("at"))
        case "item.edit": return .itemEdit(id: try id("id"), text: text("text"))
        case "item.complete": return .itemComplete(id: try id("id"))
        case "item.reopen": return .itemReopen(id: try id("id"))
        case "item.delete": return .itemDelete(id: try id("id"))
        case "item.move":
            let list = fields["list"] == nil ? nil : try id("list")
            return .itemMove(id: try id("id"), list: list, at: try position("at"))
        default:
            throw VectorError("no kind \(kind) in version 1")
        }
    }
}

private struct VectorError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

private func hex(_ bytes: [UInt8]) -> String { bytes.hexString }

private func unhex(_ value: Any?) throws -> [UInt8] {
    guard let text = value as? String, text.utf8.count % 2 == 0 else {
        throw VectorError("not hex: \(value ?? "nil")")
    }
    var out: [UInt8] = []
    var high: UInt8?
    for byte in text.utf8 {
        guard let digit = hexValue(byte) else { throw VectorError("not hex: \(text)") }
        if let first = high {
            out.append(first << 4 | digit)
            high = nil
        } else {
            high = digit
        }
    }
    return out
}

private func hexTimeline(_ value: Any?) throws -> UInt64 {
    guard let text = value as? String, text.utf8.count == 16, let number = UInt64(text, radix: 16) else {
        throw VectorError("not a 16-digit timeline: \(value ?? "nil")")
    }
    return number
}
