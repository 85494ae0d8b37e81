import Foundation
import PlaitWire
import Testing

/// Hostile input: random streams and damaged valid frames must end in a frame, a typed error or a wait for
/// more bytes — never a crash, a hang or unbounded buffering.
///
/// Seeded: set `PLAIT_FUZZ_SEED` to replay a reported seed, or to `random` to explore new inputs.
@Suite struct FuzzTests {
    static let baseSeed: UInt64 = {
        let text = ProcessInfo.processInfo.environment["PLAIT_FUZZ_SEED"]
        if text == "random" {
            let seed = UInt64.random(in: 0...UInt64.max)
            print("fuzz base seed \(seed): replay with PLAIT_FUZZ_SEED=\(seed)")
            return seed
        }
        return text.flatMap { UInt64($0) } ?? 0x504C_4149_54
    }()

    /// How inputs ended, so a fuzz run that only ever exercises one path shows up as a failure.
    struct Outcomes {
        var messages = 0
        var malformedPayloads = 0
        var streamErrors = 0

        func expectEveryPath() {
            #expect(
                messages > 100 && malformedPayloads > 100 && streamErrors > 100,
                "base seed \(FuzzTests.baseSeed): \(self)")
        }
    }

    @Test func randomByteStreams() {
        var outcomes = Outcomes()
        for round in 0..<4000 {
            let seed = Self.baseSeed &+ UInt64(round)
            var generator = SeededGenerator(seed: seed)
            let stream = randomStream(using: &generator)
            run(stream, seed: seed, outcomes: &outcomes, using: &generator)
        }
        outcomes.expectEveryPath()
    }

    @Test func mutatedValidFrames() {
        let valid = Fixtures.messages.map { $0.encode() }
        var outcomes = Outcomes()
        for round in 0..<4000 {
            let seed = Self.baseSeed &+ 1_000_000 &+ UInt64(round)
            var generator = SeededGenerator(seed: seed)
            var frames = (0..<Int.random(in: 1...4, using: &generator)).map { _ in
                valid.randomElement(using: &generator)!
            }
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                let index = Int.random(in: 0..<frames.count, using: &generator)
                frames[index] = mutate(frames[index], using: &generator)
            }
            run(frames.flatMap { $0 }, seed: seed, outcomes: &outcomes, using: &generator)
        }
        outcomes.expectEveryPath()
    }

    /// Feeds `stream` in random pieces to a decoder with a random small limit, decoding every frame.
    private func run(
        _ stream: [UInt8], seed: UInt64, outcomes: inout Outcomes, using generator: inout SeededGenerator
    ) {
        let limit = [64, 256, 1024, 4096, Frame.defaultMaxSize].randomElement(using: &generator)!
        let maxPiece = [1, 3, 17, 256, 5000].randomElement(using: &generator)!
        var decoder = FrameDecoder(maxFrameSize: limit)
        var index = 0
        var stopped = false
        while index < stream.count && !stopped {
            let size = min(Int.random(in: 1...maxPiece, using: &generator), stream.count - index)
            decoder.append(stream[index..<index + size])
            index += size
            #expect(
                decoder.bufferedByteCount <= limit + Frame.lengthPrefixSize + size,
                "seed \(seed): \(decoder.bufferedByteCount) bytes buffered")
            // Each frame consumes at least 5 bytes, so more calls than that would be a hang.
            var calls = 0
            while calls <= stream.count / 5 + 1 {
                calls += 1
                let frame: Frame?
                do {
                    frame = try decoder.next()
                } catch {
                    #expect(decoder.bufferedByteCount == 0, "seed \(seed)")
                    outcomes.streamErrors += 1
                    stopped = true
                    break
                }
                guard let frame else { break }
                #expect(frame.length <= limit, "seed \(seed)")
                check(frame, seed: seed, outcomes: &outcomes)
            }
            #expect(calls <= stream.count / 5 + 1, "seed \(seed): the decoder does not make progress")
            #expect(
                decoder.bufferedByteCount < limit + Frame.lengthPrefixSize,
                "seed \(seed): more than one partial frame buffered")
        }
    }

    /// A frame either decodes to a message that survives another round trip, or is refused as malformed.
    private func check(_ frame: Frame, seed: UInt64, outcomes: inout Outcomes) {
        do {
            let message = try Message.decode(frame)
            outcomes.messages += 1
            #expect(message.type == frame.type, "seed \(seed)")
            #expect(try Message.decode(message.frame) == message, "seed \(seed): \(message)")
        } catch let .malformedPayload(type, _) {
            outcomes.malformedPayloads += 1
            #expect(type == frame.type, "seed \(seed)")
        } catch {
            Issue.record("seed \(seed): \(frame.type) gave \(error), not malformedPayload")
        }
    }

    /// Random bytes, plausible headers (small lengths, real and unknown type bytes) and valid frames, mixed.
    private func randomStream(using generator: inout SeededGenerator) -> [UInt8] {
        var stream: [UInt8] = []
        for _ in 0..<Int.random(in: 1...8, using: &generator) {
            switch Int.random(in: 0..<4, using: &generator) {
            case 0:
                stream += generator.bytes(Int.random(in: 0...300, using: &generator))
            case 1:
                let length = Int.random(in: 0...400, using: &generator)
                let type = Bool.random(using: &generator)
                    ? MessageType.allCases.randomElement(using: &generator)!.rawValue
                    : UInt8.random(in: 0...255, using: &generator)
                stream += [0, 0, UInt8(length >> 8), UInt8(length & 0xFF), type]
                stream += generator.bytes(max(0, length - 1))
            case 2:
                let type = MessageType.allCases.randomElement(using: &generator)!
                stream += encodeFrame(type: type, payload: generator.bytes(Int.random(in: 0...64, using: &generator)))
            default:
                stream += Fixtures.messages.randomElement(using: &generator)!.encode()
            }
        }
        return stream
    }

    /// Bit flips, truncation, a changed length prefix, inserted or deleted bytes.
    private func mutate(_ frame: [UInt8], using generator: inout SeededGenerator) -> [UInt8] {
        var bytes = frame
        // An earlier mutation may have cut the frame down to less than a header: grow it again.
        guard bytes.count >= 5 else { return bytes + generator.bytes(Int.random(in: 1...8, using: &generator)) }
        switch Int.random(in: 0..<6, using: &generator) {
        case 0:
            for _ in 0..<Int.random(in: 1...4, using: &generator) {
                let index = Int.random(in: 0..<bytes.count, using: &generator)
                bytes[index] ^= 1 << UInt8.random(in: 0...7, using: &generator)
            }
        case 1:
            bytes.removeLast(Int.random(in: 1...bytes.count, using: &generator))
        case 2:
            let length = UInt32(bytes.count - 4)
            let changed: UInt32
            switch Int.random(in: 0..<3, using: &generator) {
            case 0: changed = length &+ UInt32.random(in: 1...8, using: &generator)
            case 1: changed = length &- UInt32.random(in: 1...8, using: &generator)
            default: changed = UInt32.random(in: 0...UInt32.max, using: &generator)
            }
            for offset in 0..<4 { bytes[offset] = UInt8(truncatingIfNeeded: changed >> UInt32(24 - offset * 8)) }
        case 3:
            // Damage the payload only, keeping the frame intact: exercises Message.decode's validation.
            if bytes.count > 5 {
                let index = Int.random(in: 5..<bytes.count, using: &generator)
                bytes[index] = UInt8.random(in: 0...255, using: &generator)
            }
        case 4:
            let index = Int.random(in: 0...bytes.count, using: &generator)
            bytes.insert(contentsOf: generator.bytes(Int.random(in: 1...8, using: &generator)), at: index)
        default:
            let index = Int.random(in: 0..<bytes.count, using: &generator)
            bytes.removeSubrange(index..<min(bytes.count, index + Int.random(in: 1...8, using: &generator)))
        }
        return bytes
    }
}
