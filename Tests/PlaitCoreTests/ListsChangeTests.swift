import Testing

@testable import PlaitCore

@Suite("ListsChange payloads and Change encoding")
struct ListsChangeTests {
    static let id = objectID(0x42)
    static let other = objectID(0x43)
    static let observed = Summary([TimelineID(0xA): 3, TimelineID(.max): 1, TimelineID(0): 9])

    static let examples: [ListsChange] = [
        .listCreate(id: id, title: "groceries", color: "green", at: .top),
        .listCreate(id: id, title: "", color: nil, at: .bottom),
        .listCreate(id: id, title: "Übung 🧺", color: "", at: .after(other)),
        .listRename(id: id, title: "renamed"),
        .listRename(id: id, title: ""),
        .listRecolor(id: id, color: "blue"),
        .listRecolor(id: id, color: nil),
        .listRecolor(id: id, color: ""),
        .listMove(id: id, at: .top),
        .listMove(id: id, at: .bottom),
        .listMove(id: id, at: .after(other)),
        .listDelete(id: id, observed: observed),
        .listDelete(id: id, observed: .empty),
        .listDelete(
            id: id, observed: Summary([TimelineID(3): 4, TimelineID(9): 1]),
            heads: [TimelineID(3): [UInt8](repeating: 0xab, count: 32), TimelineID(9): [UInt8](repeating: 1, count: 32)]),
        .listDelete(id: id, observed: .empty, heads: [:]),
        .itemCreate(id: id, list: other, text: "milk", at: .top),
        .itemCreate(id: id, list: other, text: String(repeating: "x", count: 1_000), at: .after(objectID(7))),
        .itemEdit(id: id, text: "oat milk"),
        .itemEdit(id: id, text: ""),
        .itemComplete(id: id),
        .itemReopen(id: id),
        .itemMove(id: id, list: nil, at: .top),
        .itemMove(id: id, list: other, at: .bottom),
        .itemMove(id: id, list: other, at: .after(objectID(9))),
        .itemDelete(id: id),
    ]

    @Test(arguments: examples)
    func payloadRoundTrip(change: ListsChange) throws {
        #expect(ListsChange.kinds.contains(change.kind))
        let decoded = try ListsChange(kind: change.kind, version: change.version, payload: change.payload)
        #expect(decoded == change)
    }

    @Test func everyKindHasAnExample() {
        #expect(Set(Self.examples.map(\.kind)) == ListsChange.kinds)
    }

    @Test func randomPayloadsRoundTrip() throws {
        var rng = SplitMix64(seed: 10)
        for index in 0..<500 {
            let id = ObjectID.random(using: &rng)
            let other = ObjectID.random(using: &rng)
            let text = String((0..<rng.int(0...20)).map { _ in Character(Unicode.Scalar(UInt8(rng.int(32...126)))) })
            let at: Position = [.top, .bottom, .after(other)][rng.int(0...2)]
            let change: ListsChange = [
                .listCreate(id: id, title: text, color: rng.chance(50) ? nil : text, at: at),
                .listDelete(id: id, observed: SummaryTests.randomSummary(&rng)),
                .itemCreate(id: id, list: other, text: text, at: at),
                .itemMove(id: id, list: rng.chance(50) ? nil : other, at: at),
            ][index % 4]
            #expect(try ListsChange(kind: change.kind, payload: change.payload) == change, "index \(index)")
        }
    }

    @Test func anUnknownKindDecodesToNil() throws {
        #expect(try ListsChange(kind: "list.archive", payload: [0xff]) == nil)
        #expect(try ListsChange(kind: "timeline.end", payload: []) == nil)
    }

    @Test func unknownPayloadFieldsAreIgnored() throws {
        var writer = ProtoWriter()
        writer.objectID(1, Self.id)
        writer.string(2, "text")
        writer.uint(15, 99)
        writer.string(16, "from a newer plait")
        #expect(try ListsChange(kind: "item.edit", payload: writer.bytes) == .itemEdit(id: Self.id, text: "text"))
    }

    static let garbage: [(String, [UInt8])] = [
        ("item.edit", [0xff]),  // truncated varint
        ("item.edit", [0x0a, 0x10, 0x01]),  // length beyond the end
        ("item.complete", []),  // no ID
        ("item.delete", [0x0a, 0x03, 1, 2, 3]),  // a 3-byte ID
        ("item.reopen", [0x08, 0x01]),  // the ID as a varint
        ("list.rename", [0x0a, 0x10] + objectID(1).bytes + [0x12, 0x02, 0xc3, 0x28]),  // invalid UTF-8 title
        ("list.create", [0x0b]),  // wire type 3 (groups) is not supported
        ("list.move", [0x00, 0x01]),  // field number 0
        ("list.delete", [0x0a, 0x10] + objectID(1).bytes + [0x12, 0x02, 0x10, 0x01]),  // observed entry, no timeline
        ("item.create", [0x0a, 0x10] + objectID(1).bytes),  // no list
        ("item.move", [0x0a, 0x10] + objectID(1).bytes + [0x1a, 0x03, 0x1a, 0x01, 0x00]),  // a 1-byte anchor
        ("list.recolor", [0x0a, 0x10] + objectID(1).bytes + [0x11, 0x01]),  // truncated fixed64
    ]

    @Test(arguments: garbage)
    func garbagePayloadsThrowMalformedPayload(kind: String, payload: [UInt8]) {
        #expect {
            try ListsChange(kind: kind, payload: payload)
        } throws: { error in
            guard case let CoreError.malformedPayload(reportedKind, reason) = error else { return false }
            return reportedKind == kind && !reason.isEmpty
        }
    }

    @Test func garbageThatDecodesOnlyPartlyIsStillRefused() {
        // Random bytes: either a clean decode (then it re-encodes to something that decodes equal) or
        // malformedPayload — never another error, never a crash.
        var rng = SplitMix64(seed: 11)
        for index in 0..<2_000 {
            let kind = ListsChange.kinds.sorted()[index % ListsChange.kinds.count]
            let bytes = (0..<rng.int(0...40)).map { _ in UInt8.random(in: 0...255, using: &rng) }
            do {
                if let decoded = try ListsChange(kind: kind, payload: bytes) {
                    #expect(try ListsChange(kind: kind, payload: decoded.payload) == decoded, "index \(index)")
                }
            } catch {
                guard case .malformedPayload = error else {
                    Issue.record("index \(index): \(error)")
                    continue
                }
            }
        }
    }

    // MARK: Change

    static func sample() -> Change {
        Change(
            timeline: TimelineID(0xFEDC_BA98_7654_3210), seq: 42, lamport: 1_000_000,
            previousHash: SHA256.hash([1, 2, 3]),
            kind: "item.edit", version: 1, wallTime: -5,
            payload: ListsChange.itemEdit(id: Self.id, text: "milk").payload)
    }

    @Test func canonicalRoundTrip() throws {
        let change = Self.sample()
        let bytes = change.canonicalBytes
        let decoded = try Change(canonical: bytes[...])
        #expect(decoded == change)
        #expect(decoded.canonicalBytes == bytes)
        #expect(decoded.hash == change.hash)
        #expect(change.hash == SHA256.hash(bytes))
        // Inside a larger buffer (a slice not starting at 0).
        let framed = [0xAA, 0xBB] + bytes + [0xCC]
        #expect(try Change(canonical: framed[2..<(2 + bytes.count)]) == change)

        var first = change
        first.seq = 1
        first.previousHash = Change.zeroHash
        first.version = UInt32.max
        first.wallTime = .min
        first.payload = []
        #expect(try Change(canonical: first.canonicalBytes[...]) == first)
    }

    @Test func theHashChangesWhenAnyFieldChanges() {
        let change = Self.sample()
        let edits: [(String, (inout Change) -> Void)] = [
            ("timeline", { $0.timeline = TimelineID($0.timeline.rawValue ^ 1) }),
            ("seq", { $0.seq += 1 }),
            ("lamport", { $0.lamport += 1 }),
            ("previousHash", { $0.previousHash[31] ^= 1 }),
            ("kind", { $0.kind = "item.edix" }),
            ("version", { $0.version = 2 }),
            ("wallTime", { $0.wallTime = 5 }),
            ("payload", { $0.payload[$0.payload.count - 1] ^= 1 }),
            ("payload length", { $0.payload.append(0) }),
        ]
        var hashes: Set<[UInt8]> = [change.hash]
        for (name, edit) in edits {
            var edited = change
            edit(&edited)
            #expect(edited.canonicalBytes != change.canonicalBytes, "\(name)")
            #expect(edited.hash != change.hash, "\(name)")
            hashes.insert(edited.hash)
        }
        #expect(hashes.count == edits.count + 1)
    }

    @Test func malformedCanonicalBytesAreRefused() {
        let change = Self.sample()
        func without(_ field: UInt32) -> [UInt8] {
            var writer = ProtoWriter()
            if field != 1 { writer.fixed64(1, change.timeline.rawValue) }
            if field != 2 { writer.uint(2, change.seq) }
            if field != 3 { writer.uint(3, change.lamport) }
            writer.data(4, change.previousHash)
            if field != 5 { writer.string(5, change.kind) }
            return writer.bytes
        }
        for field: UInt32 in [1, 2, 3, 5] {
            #expect(throws: CoreError.self, "field \(field)") { try Change(canonical: without(field)[...]) }
        }
        var zeroSeq = change
        zeroSeq.seq = 0
        #expect(throws: CoreError.self) { try Change(canonical: zeroSeq.canonicalBytes[...]) }
        var shortHash = change
        shortHash.previousHash = [1, 2, 3]
        #expect(throws: CoreError.self) { try Change(canonical: shortHash.canonicalBytes[...]) }
        var hugeVersion = ProtoWriter()
        hugeVersion.fixed64(1, 1)
        hugeVersion.uint(2, 1)
        hugeVersion.uint(3, 1)
        hugeVersion.string(5, "item.edit")
        hugeVersion.uint(6, UInt64(UInt32.max) + 1)
        #expect(throws: CoreError.self) { try Change(canonical: hugeVersion.bytes[...]) }
        let bytes = change.canonicalBytes
        #expect(throws: CoreError.self) { try Change(canonical: bytes.dropLast()) }
        #expect(throws: CoreError.self) { try Change(canonical: [0xff][...]) }
    }
}
