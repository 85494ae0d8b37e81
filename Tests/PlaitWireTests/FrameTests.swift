import PlaitWire
import Testing

@Suite struct FrameTests {
    @Test func encodesLengthTypeAndPayload() {
        #expect(encodeFrame(type: .ping, payload: [0xAA, 0xBB]) == [0, 0, 0, 3, MessageType.ping.rawValue, 0xAA, 0xBB])
        #expect(encodeFrame(type: .close, payload: []) == [0, 0, 0, 1, 9])
        let big = [UInt8](repeating: 1, count: 0x01_02_03)
        #expect(Array(encodeFrame(type: .changes, payload: big).prefix(5)) == [0, 0x01, 0x02, 0x04, 4])
        #expect(Frame(type: .done, payload: [1, 2]).length == 3)
    }

    @Test func decodesBackToBackFramesFedByteByByte() throws {
        let frames = [
            Frame(type: .ping, payload: [1]), Frame(type: .close, payload: []),
            Frame(type: .changes, payload: Array(repeating: 7, count: 1000)),
        ]
        var decoder = FrameDecoder()
        var decoded: [Frame] = []
        for byte in frames.flatMap(\.encoded) {
            decoder.append([byte])
            while let frame = try decoder.next() { decoded.append(frame) }
        }
        #expect(decoded == frames)
        #expect(decoder.isAtFrameBoundary)
        #expect(decoder.bufferedByteCount == 0)
    }

    @Test func truncatedFramesYieldNothingUntilCompleted() throws {
        let bytes = Frame(type: .notify, payload: [1, 2, 3, 4, 5, 6]).encoded
        for cut in 0..<bytes.count {
            var decoder = FrameDecoder()
            decoder.append(bytes[..<cut])
            #expect(try decoder.next() == nil, "cut at \(cut)")
            #expect(try decoder.next() == nil, "asking twice changes nothing")
            #expect(decoder.bufferedByteCount == cut)
            #expect(decoder.isAtFrameBoundary == (cut == 0))
            decoder.append(bytes[cut...])
            #expect(try decoder.next() == Frame(type: .notify, payload: [1, 2, 3, 4, 5, 6]), "cut at \(cut)")
            #expect(try decoder.next() == nil)
        }
    }

    @Test func oversizedLengthIsRejectedAsSoonAsItsFourBytesArrive() throws {
        var decoder = FrameDecoder(maxFrameSize: 1024)
        decoder.append([0, 0])
        #expect(try decoder.next() == nil)
        decoder.append([0x04, 0x01])  // 1025: one over
        #expect(decoder.failure == .frameTooLarge(size: 1025, limit: 1024))
        #expect(decoder.bufferedByteCount == 0)
        #expect(throws: WireError.frameTooLarge(size: 1025, limit: 1024)) { try decoder.next() }
        // The payload that follows is never buffered, and the error stays.
        decoder.append([UInt8](repeating: 0, count: 4096))
        #expect(decoder.bufferedByteCount == 0)
        #expect(throws: WireError.frameTooLarge(size: 1025, limit: 1024)) { try decoder.next() }
    }

    @Test func defaultLimitIs16MiB() throws {
        #expect(Frame.defaultMaxSize == 16 * 1024 * 1024)
        var decoder = FrameDecoder()
        decoder.append([0x01, 0x00, 0x00, 0x01, MessageType.changes.rawValue])
        #expect(throws: WireError.frameTooLarge(size: 16 * 1024 * 1024 + 1, limit: 16 * 1024 * 1024)) {
            try decoder.next()
        }
        var largest = FrameDecoder()
        largest.append([0x01, 0x00, 0x00, 0x00, MessageType.changes.rawValue])
        #expect(try largest.next() == nil)
        #expect(largest.failure == nil)
    }

    @Test func frameOfExactlyTheMaximumIsAccepted() throws {
        var decoder = FrameDecoder(maxFrameSize: 100)
        let frame = Frame(type: .changes, payload: Array(repeating: 3, count: 99))
        decoder.append(frame.encoded)
        #expect(try decoder.next() == frame)
    }

    @Test func lengthOverTheMaximumIsRejectedEvenWithThePayloadPresent() {
        var decoder = FrameDecoder(maxFrameSize: 100)
        decoder.append(Frame(type: .changes, payload: Array(repeating: 3, count: 100)).encoded)
        #expect(throws: WireError.frameTooLarge(size: 101, limit: 100)) { try decoder.next() }
        #expect(decoder.bufferedByteCount == 0)
    }

    @Test func zeroLengthIsAnError() {
        var decoder = FrameDecoder()
        decoder.append([0, 0, 0, 0])
        #expect(throws: WireError.emptyFrame) { try decoder.next() }
        #expect(!decoder.isAtFrameBoundary)
    }

    @Test(arguments: [UInt8(0), 10, 31, 36, 200, 255])
    func unknownTypeIsAnError(byte: UInt8) {
        var decoder = FrameDecoder()
        decoder.append([0, 0, 0, 200])  // the length is fine
        #expect(decoder.failure == nil)
        decoder.append([byte])  // the type byte is not: refused before the 199 payload bytes arrive
        #expect(throws: WireError.unknownType(byte)) { try decoder.next() }
        #expect(decoder.bufferedByteCount == 0)
    }

    @Test func errorsDoNotOvertakeEarlierFrames() throws {
        var decoder = FrameDecoder(maxFrameSize: 64)
        let good = Frame(type: .ping, payload: [8, 1])
        decoder.append(good.encoded + [0, 0, 0, 0] + good.encoded)
        #expect(try decoder.next() == good)
        #expect(throws: WireError.emptyFrame) { try decoder.next() }
        #expect(throws: WireError.emptyFrame) { try decoder.next() }
    }

    @Test func messageTypesMirrorTheProtoEnum() {
        let pairs: [(MessageType, Plait_Wire_V1_MessageType)] = [
            (.hello, .hello), (.want, .want), (.baselineChunk, .baselineChunk), (.changes, .changes),
            (.done, .done), (.notify, .notify), (.ping, .ping), (.pong, .pong), (.close, .close),
            (.pairCommit, .pairCommit), (.pairNonce, .pairNonce), (.pairReveal, .pairReveal),
            (.pairConfirm, .pairConfirm),
        ]
        #expect(pairs.count == MessageType.allCases.count)
        #expect(pairs.count == Plait_Wire_V1_MessageType.allCases.count - 1)  // without UNSPECIFIED
        for (swift, proto) in pairs {
            #expect(Int(swift.rawValue) == proto.rawValue, "\(swift)")
        }
    }

    @Test func errorsReadAsOneSentence() {
        let errors: [WireError] = [
            .frameTooLarge(size: 20_000_000, limit: 16_777_216), .emptyFrame, .unknownType(77),
            .malformedPayload(type: .hello, reason: "state digest is 3 bytes, not 32"),
        ]
        for error in errors {
            #expect(error.description.hasSuffix("."))
            #expect(!error.description.contains("\n"))
        }
        #expect(WireError.unknownType(77).description.contains("77"))
        #expect(WireError.malformedPayload(type: .hello, reason: "x").description.contains("Hello"))
    }
}
