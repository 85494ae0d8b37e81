import Foundation
import PlaitCore
import PlaitWire
import Testing

@Suite struct MessageTests {
    @Test(arguments: Fixtures.messages)
    func roundTripsThroughFramesAndTheDecoder(message: Message) throws {
        let bytes = message.encode()
        #expect(bytes == message.frame.encoded)
        var generator = SeededGenerator(seed: UInt64(bytes.count))
        var decoder = FrameDecoder()
        let (frames, error) = feed(bytes, to: &decoder, maxPiece: 7, using: &generator)
        #expect(error == nil)
        #expect(frames.count == 1)
        #expect(frames.first?.type == message.type)
        #expect(try Message.decode(try #require(frames.first)) == message)
        #expect(decoder.isAtFrameBoundary)
    }

    @Test(arguments: [1, 2, 3, 16, 1000])
    func everyMessageRoundTripsInOneStreamCutAtRandom(maxPiece: Int) throws {
        let stream = Fixtures.messages.flatMap { $0.encode() }
        var generator = SeededGenerator(seed: UInt64(maxPiece))
        var decoder = FrameDecoder()
        let (frames, error) = feed(stream, to: &decoder, maxPiece: maxPiece, using: &generator)
        #expect(error == nil)
        #expect(try frames.map { frame throws(WireError) in try Message.decode(frame) } == Fixtures.messages)
        #expect(decoder.isAtFrameBoundary)
    }

    @Test func changesTravelAsTheirCanonicalBytes() throws {
        let frame = Message.changes([Fixtures.unknownChange]).frame
        let proto = try Plait_Wire_V1_Changes(serializedBytes: frame.payload)
        #expect(proto.changes.map { [UInt8]($0) } == [Fixtures.unknownChange.canonicalBytes])
        #expect(try Message.decode(frame) == .changes([Fixtures.unknownChange]))
    }

    /// Protocol 2: signatures travel beside the changes (field 2, by index), never inside the hashed bytes.
    @Test func signaturesTravelBesideTheChangesTheySign() throws {
        let signature = [UInt8](repeating: 0x5A, count: 64)
        let batch = [EncodedChange(Fixtures.firstChange), EncodedChange(Fixtures.secondChange, signature: signature)]
        let frame = Message.changes(batch).frame
        let decoded = try Message.decode(frame)
        guard case let .changes(changes) = decoded else {
            Issue.record("decoded \(decoded)")
            return
        }
        #expect(changes.map(\.signature) == [nil, signature])
        #expect(changes.map { Array($0.bytes) } == batch.map { Array($0.bytes) })
        #expect(decoded == .changes(batch))
    }

    /// A `ChangeSignature` entry (field 2 of Changes) naming change `index`, with `size` bytes of `fill`.
    static func signatureEntry(index: UInt8, size: UInt8, fill: UInt8 = 1) -> [UInt8] {
        [0x12, size + 4, 0x08, index, 0x12, size] + [UInt8](repeating: fill, count: Int(size))
    }

    @Test(arguments: [
        ("wrong size", signatureEntry(index: 0, size: 1)),
        ("index beyond the batch", signatureEntry(index: 5, size: 64)),
        ("two for one change", signatureEntry(index: 0, size: 64) + signatureEntry(index: 0, size: 64, fill: 2)),
    ])
    func malformedSignaturesCloseTheBatch(_ case: (String, [UInt8])) {
        let payload = Message.changes([Fixtures.firstChange]).frame.payload + `case`.1
        #expect(throws: WireError.self, "\(`case`.0)") {
            try Message.decode(Frame(type: .changes, payload: payload))
        }
    }

    @Test func summariesTravelSorted() throws {
        let payload = Message.done(Fixtures.summary).frame.payload
        let proto = try Plait_Wire_V1_Done(serializedBytes: payload)
        #expect(proto.summary.map(\.timeline) == Fixtures.summary.timelines.map(\.rawValue))
    }

    @Test func unsortedSummariesAreAccepted() throws {
        let entries = [(Fixtures.timelineB, UInt64(4)), (Fixtures.timelineA, UInt64(2))].map { entry in
            Plait_Wire_V1_SummaryEntry.with {
                $0.timeline = entry.0.rawValue
                $0.seq = entry.1
            }
        }
        let message = try decode(.notify, Plait_Wire_V1_Notify.with { $0.summary = entries })
        #expect(message == .notify(Summary([Fixtures.timelineA: 2, Fixtures.timelineB: 4]), report: nil))
    }

    @Test func unknownFieldsAreIgnored() throws {
        // Field 15 (varint) from a newer peer, then the nonce.
        let payload: [UInt8] = [0x78, 0x05, 0x08, 0x2A]
        #expect(try Message.decode(Frame(type: .ping, payload: payload)) == .ping(nonce: 42))
    }

    /// Hello's field 16 marks a one-shot session (PROTOCOL.md §13.5): an agent's Hello leaves it out, so it reads
    /// as an agent's to older plait and an older plait's Hello reads as an agent's here.
    @Test func oneShotTravelsInHelloFieldSixteen() throws {
        let agent = Message.hello(Fixtures.hello)
        var hello = Fixtures.hello
        hello.oneShot = true
        let oneShot = Message.hello(hello)
        #expect(oneShot.frame.payload == agent.frame.payload + [0x80, 0x01, 0x01])
        #expect(try Message.decode(oneShot.frame) == oneShot)
        guard case let .hello(decoded) = try Message.decode(agent.frame) else {
            Issue.record("an agent's Hello did not decode as a Hello")
            return
        }
        #expect(!decoded.oneShot)
    }

    @Test func emptyPayloadsDecodeToDefaultsWhereThoseAreValid() throws {
        #expect(try Message.decode(Frame(type: .ping, payload: [])) == .ping(nonce: 0))
        #expect(try Message.decode(Frame(type: .done, payload: [])) == .done(.empty))
        #expect(try Message.decode(Frame(type: .want, payload: [])) == .want(Want(have: .empty)))
        #expect(try Message.decode(Frame(type: .pairConfirm, payload: [])) == .pairConfirm(accepted: false))
        for type in [MessageType.hello, .baselineChunk, .pairCommit, .pairNonce, .pairReveal] {
            #expect(malformedReason(Frame(type: type, payload: [])) != nil, "\(type)")
        }
    }

    @Test(arguments: MessageType.allCases)
    func garbagePayloadsAreMalformed(type: MessageType) {
        let garbage: [[UInt8]] = [
            [0xFF],  // a truncated varint key
            [0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF],  // a varint over 10 bytes
            [0x0A, 0x05, 0x01],  // field 1, 5 bytes announced, 1 present
            [0x00, 0x01],  // field number 0
            [0x0F],  // wire type 7
        ]
        for payload in garbage {
            let reason = malformedReason(Frame(type: type, payload: payload))
            #expect(reason != nil, "\(type) \(payload)")
        }
    }

    @Test func summaryEntriesAreValidated() {
        let zero = Plait_Wire_V1_Done.with { $0.summary = [entry(Fixtures.timelineA, 0)] }
        #expect(reason(.done, zero)?.contains("sequence number 0") == true)
        let twice = Plait_Wire_V1_Notify.with {
            $0.summary = [entry(Fixtures.timelineA, 1), entry(Fixtures.timelineB, 1), entry(Fixtures.timelineA, 3)]
        }
        #expect(reason(.notify, twice)?.contains("appears twice") == true)
        let shortCopy = Plait_Wire_V1_Notify.with { $0.copiedInstances = [Data(count: 16), Data(count: 8)] }
        #expect(reason(.notify, shortCopy)?.contains("a copied instance is 8 bytes, not 16") == true)
        let huge = Plait_Wire_V1_Want.with { $0.have = [entry(Fixtures.timelineA, UInt64(Int64.max) + 1)] }
        #expect(reason(.want, huge)?.contains("over 2^63-1") == true)
        var hello = proto(Fixtures.hello)
        hello.baselineSummary.append(entry(Fixtures.timelineC, 0))
        #expect(reason(.hello, hello)?.contains("baseline summary") == true)
    }

    @Test func helloFieldsAreValidated() {
        let valid = proto(Fixtures.hello)
        #expect(reason(.hello, valid) == nil)
        let cases: [(String, (inout Plait_Wire_V1_Hello) -> Void)] = [
            ("protocol version", { $0.protocolVersion = 0 }),
            ("domain name is empty", { $0.domainName = "" }),
            ("domain name is 65 bytes", { $0.domainName = String(repeating: "d", count: 65) }),
            ("domain version", { $0.domainVersion = 0 }),
            ("device ID is 0 bytes", { $0.deviceID = "" }),
            ("device ID is 129 bytes", { $0.deviceID = String(repeating: "A", count: 129) }),
            ("letters, digits and dashes", { $0.deviceID = "ABC DEF" }),
            ("letters, digits and dashes", { $0.deviceID = "ÄBC" }),
            ("name is 257 bytes", { $0.name = String(repeating: "n", count: 257) }),
            ("control character U+1B", { $0.name = "evil\u{1B}[2J" }),
            ("control character U+A", { $0.name = "two\nlines" }),
            ("control character U+85", { $0.name = "next\u{85}line" }),
            ("head hash of", { $0.headHashes[0].hash = Data(count: 31) }),
            ("appears twice", { $0.headHashes.append($0.headHashes[0]) }),
            ("head hashes: timeline", { $0.headHashes[0].seq = 0 }),
            ("baseline digest is 33 bytes", { $0.baselineDigest = Data(count: 33) }),
            ("state digest is 0 bytes", { $0.stateDigest = Data() }),
            ("max frame size 0", { $0.maxFrameSize = 0 }),
            ("max frame size 65535", { $0.maxFrameSize = 65535 }),
            ("instance nonce is 15 bytes", { $0.instanceNonce = Data(count: 15) }),
            ("instance nonce is 17 bytes", { $0.instanceNonce = Data(count: 17) }),
            // Fork records (PROTOCOL.md §22.9): each a consistent ForkRecord in canonical form, sorted, one per branch.
            ("fork record 1 is refused", { $0.forkRecords = [Data([0x01, 0x02])] }),
            ("fork record 2 is refused", {
                var bad = Fixtures.forkRecords[1]
                bad.base = 0
                $0.forkRecords = [Data(Fixtures.forkRecords[0].encoded), Data(bad.encoded)]
            }),
            ("fork record 1 is refused", {
                var bad = Fixtures.forkRecords[0]
                swap(&bad.firstHash, &bad.rivalHash)
                $0.forkRecords = [Data(bad.encoded)]
            }),
            ("fork record 1 is not in canonical form", {
                $0.forkRecords = [Data(Fixtures.forkRecords[0].encoded + [0x38, 0x01])]
            }),
            ("not sorted by branch", { $0.forkRecords = Fixtures.forkRecords.reversed().map { Data($0.encoded) } }),
            ("not sorted by branch", { $0.forkRecords = [Data(Fixtures.forkRecords[0].encoded), Data(Fixtures.forkRecords[0].encoded)] }),
            ("more than 4096", { $0.forkRecords = Array(repeating: Data(Fixtures.forkRecords[0].encoded), count: 4097) }),
        ]
        for (expected, mutate) in cases {
            var hello = valid
            mutate(&hello)
            let found = reason(.hello, hello)
            #expect(found?.contains(expected) == true, "expected '\(expected)', got \(found ?? "success")")
        }
        var longestName = valid
        longestName.name = String(repeating: "é", count: 128)  // 256 bytes
        #expect(reason(.hello, longestName) == nil)
    }

    @Test func changesThatDoNotDecodeOrAreNotCanonicalAreRefused() {
        let good = Data(Fixtures.firstChange.canonicalBytes)
        let garbage = Plait_Wire_V1_Changes.with { $0.changes = [good, Data([0x01, 0x02, 0x03])] }
        #expect(reason(.changes, garbage)?.contains("change 2 of the batch does not decode") == true)

        var shortHash = Fixtures.firstChange
        shortHash.previousHash = [UInt8](repeating: 0, count: 31)
        let invalid = Plait_Wire_V1_Changes.with { $0.changes = [Data(shortHash.canonicalBytes)] }
        #expect(reason(.changes, invalid)?.contains("change 1 of the batch does not decode") == true)

        var zeroSeq = Fixtures.firstChange
        zeroSeq.seq = 0
        let zero = Plait_Wire_V1_Changes.with { $0.changes = [Data(zeroSeq.canonicalBytes)] }
        #expect(reason(.changes, zero) != nil)

        // Valid protobuf, decodes as a change, but carries an extra field: forwarding it would rewrite it.
        let extended = Plait_Wire_V1_Changes.with { $0.changes = [good + Data([0x48, 0x01])] }
        #expect(reason(.changes, extended)?.contains("not in canonical form") == true)

        // Fields out of number order.
        var reordered = Fixtures.firstChange.canonicalBytes
        let head = Array(reordered[0..<9])  // fixed64 timeline: key + 8 bytes
        reordered.removeFirst(9)
        reordered += head
        let shuffled = Plait_Wire_V1_Changes.with { $0.changes = [Data(reordered)] }
        #expect(reason(.changes, shuffled)?.contains("not in canonical form") == true)
    }

    @Test func bytesFieldsMustBe32Bytes() {
        #expect(reason(.pairCommit, Plait_Wire_V1_PairCommit.with { $0.commitment = Data(count: 31) }) != nil)
        #expect(reason(.pairNonce, Plait_Wire_V1_PairNonce.with { $0.nonce = Data(count: 33) }) != nil)
        #expect(reason(.pairReveal, Plait_Wire_V1_PairReveal.with { $0.nonce = Data(count: 64) })?
            .contains("nonce is 64 bytes, not 32") == true)
    }

    @Test func closeReasonsAreBounded() {
        #expect(reason(.close, Plait_Wire_V1_Close.with { $0.reason = String(repeating: "r", count: 1024) }) == nil)
        let long = Plait_Wire_V1_Close.with { $0.reason = String(repeating: "r", count: 1025) }
        #expect(reason(.close, long)?.contains("over the limit of 1024") == true)
        #expect(reason(.close, Plait_Wire_V1_Close.with { $0.reason = "bye\u{7}" })?.contains("U+7") == true)
        // Invalid UTF-8: field 1, one byte 0xFF.
        #expect(malformedReason(Frame(type: .close, payload: [0x0A, 0x01, 0xFF])) != nil)
    }

    @Test func baselineChunksAreConsistent() {
        func chunk(_ total: UInt64, _ offset: UInt64, _ size: Int, last: Bool) -> Plait_Wire_V1_BaselineChunk {
            Plait_Wire_V1_BaselineChunk.with {
                $0.totalSize = total
                $0.offset = offset
                $0.data = Data(count: size)
                $0.last = last
            }
        }
        #expect(reason(.baselineChunk, chunk(10, 0, 10, last: true)) == nil)
        #expect(reason(.baselineChunk, chunk(10, 2, 3, last: false)) == nil)
        #expect(reason(.baselineChunk, chunk(0, 0, 0, last: true))?.contains("total size is missing") == true)
        #expect(reason(.baselineChunk, chunk(10, 11, 0, last: true))?.contains("run past") == true)
        #expect(reason(.baselineChunk, chunk(10, 8, 3, last: true))?.contains("run past") == true)
        #expect(reason(.baselineChunk, chunk(10, .max, 3, last: false))?.contains("run past") == true)
        #expect(reason(.baselineChunk, chunk(10, 0, 5, last: true))?.contains("short of") == true)
        #expect(reason(.baselineChunk, chunk(10, 5, 5, last: false))?.contains("not marked last") == true)
        #expect(reason(.baselineChunk, chunk(10, 5, 0, last: false))?.contains("is empty") == true)
        // The store keeps the total as a signed 64-bit integer: 2^63 trapped there and stopped the agent.
        #expect(reason(.baselineChunk, chunk(1 << 63, 0, 3, last: false))?.contains("over 2^63-1") == true)
        #expect(reason(.baselineChunk, chunk(1 << 63 - 1, 0, 3, last: false)) == nil)
    }

    // MARK: - Helpers

    private func entry(_ timeline: TimelineID, _ seq: UInt64) -> Plait_Wire_V1_SummaryEntry {
        Plait_Wire_V1_SummaryEntry.with {
            $0.timeline = timeline.rawValue
            $0.seq = seq
        }
    }

    private func proto(_ hello: Hello) -> Plait_Wire_V1_Hello {
        try! Plait_Wire_V1_Hello(serializedBytes: Message.hello(hello).frame.payload)
    }

    private func decode(_ type: MessageType, _ message: some ProtoMessage) throws -> Message {
        try Message.decode(Frame(type: type, payload: try message.serializedBytes()))
    }

    /// The reason a payload was refused, nil if it decoded.
    private func reason(_ type: MessageType, _ message: some ProtoMessage) -> String? {
        malformedReason(Frame(type: type, payload: try! message.serializedBytes()))
    }

    private func malformedReason(_ frame: Frame) -> String? {
        do {
            _ = try Message.decode(frame)
            return nil
        } catch let .malformedPayload(type, reason) {
            #expect(type == frame.type)
            return reason
        } catch {
            Issue.record("unexpected error \(error)")
            return "\(error)"
        }
    }
}
