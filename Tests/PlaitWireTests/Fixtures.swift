import PlaitCore

/// The seeded generator of the wire tests.
typealias SeededGenerator = SplitMix64
import PlaitWire

enum Fixtures {
    static let timelineA = TimelineID(0x0123_4567_89AB_CDEF)
    static let timelineB = TimelineID(0xFEDC_BA98_7654_3210)
    static let timelineC = TimelineID(7)

    static func digest(_ seed: UInt8) -> [UInt8] {
        (0..<32).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ Int(seed)) }
    }

    static let firstChange = Change(
        timeline: timelineA, seq: 1, lamport: 1, previousHash: Change.zeroHash, kind: "list.create", version: 1,
        wallTime: 1_700_000_000_000, payload: [0x0A, 0x02, 0x01, 0x02])
    static let secondChange = Change(
        timeline: timelineA, seq: 2, lamport: 5, previousHash: firstChange.hash, kind: "item.complete", version: 1,
        wallTime: -1, payload: [])
    /// A kind and version no build knows: it must pass through untouched.
    static let unknownChange = Change(
        timeline: timelineB, seq: 1, lamport: 3, previousHash: Change.zeroHash, kind: "gizmo.spin", version: 9,
        wallTime: 42, payload: Array(repeating: 0xEE, count: 300))

    static let summary = Summary([timelineA: 2, timelineB: 1, timelineC: UInt64(Int64.max)])

    static let hello = Hello(
        domainName: "lists", domainVersion: 1,
        deviceID: "P56IOI7-MZJNU2Y-IQGDREY-DM2MGTI-MGL3BXN-PQ6W5BM-TBBZ4TJ-XZWICQ2", name: "Kitchen laptop ☕",
        summary: summary,
        headHashes: [
            timelineA: HeadHash(seq: 2, hash: secondChange.hash),
            timelineB: HeadHash(seq: 1, hash: unknownChange.hash),
        ],
        baselineSummary: Summary([timelineA: 1]), baselineDigest: digest(1), stateDigest: digest(2),
        unknownCount: 1, maxFrameSize: 1 << 20, instanceNonce: Array(0..<16))

    /// Two consistent fork records, sorted by branch (PROTOCOL.md §22.8).
    static let forkRecords: [ForkBranch.Record] = {
        let records = [digest(10), digest(11)].map { first in
            ForkBranch.Record(
                branch: ForkBranch.id(parent: timelineA, firstHash: first), root: timelineA, parent: timelineA, base: 1,
                firstHash: first, rivalHash: [UInt8](repeating: 0, count: 32))
        }
        return records.sorted { $0.branch < $1.branch }
    }()

    static let helloWithForkRecords: Hello = {
        var hello = Fixtures.hello
        hello.forkRecords = forkRecords
        return hello
    }()

    static let minimalHello = Hello(
        protocolVersion: 7, domainName: "x", domainVersion: UInt32.max, deviceID: "A", name: "", summary: .empty,
        headHashes: [:], baselineSummary: .empty, baselineDigest: nil, stateDigest: digest(3), unknownCount: 0,
        maxFrameSize: WireLimits.minimumMaxFrameSize)

    /// At least one of every message, with edge values.
    static let messages: [Message] = [
        .hello(hello),
        .hello(minimalHello),
        .hello(helloWithForkRecords),
        .want(Want(have: summary)),
        .want(Want(have: .empty, baselineOffset: 0)),
        .want(Want(have: Summary([timelineC: 1]), baselineOffset: 123_456_789)),
        .baselineChunk(
            BaselineChunk(totalSize: 10, offset: 0, data: [1, 2, 3], last: false, baselineSummary: summary)),
        .baselineChunk(
            BaselineChunk(totalSize: 10, offset: 3, data: Array(4...10), last: true, baselineSummary: summary)),
        .baselineChunk(BaselineChunk(totalSize: 10, offset: 10, data: [], last: true, baselineSummary: .empty)),
        .changes([EncodedChange]()),
        .changes([firstChange, secondChange, unknownChange]),
        .done(summary),
        .done(.empty),
        .notify(Summary([timelineB: 99]), report: nil),
        .notify(
            Summary([timelineB: 99]),
            report: StateReport(stateDigest: [UInt8](repeating: 7, count: 32), baselineDigest: nil, unknownCount: 3)),
        .ping(nonce: 0),
        .ping(nonce: .max),
        .pong(nonce: 0xDEAD_BEEF),
        .close(reason: ""),
        .close(reason: "shutting down — à bientôt"),
        .pairCommit(commitment: digest(4)),
        .pairNonce(nonce: digest(5)),
        .pairReveal(nonce: digest(6)),
        .pairConfirm(accepted: true),
        .pairConfirm(accepted: false),
    ]
}

/// Feeds `bytes` to `decoder` in random pieces of 1...`maxPiece` bytes, draining after each, and returns
/// the frames, or the error that stopped the stream.
func feed(
    _ bytes: [UInt8], to decoder: inout FrameDecoder, maxPiece: Int, using generator: inout SeededGenerator
) -> (frames: [Frame], error: WireError?) {
    var frames: [Frame] = []
    var index = 0
    while index < bytes.count {
        let size = min(Int.random(in: 1...maxPiece, using: &generator), bytes.count - index)
        decoder.append(bytes[index..<index + size])
        index += size
        do {
            while let frame = try decoder.next() { frames.append(frame) }
        } catch {
            return (frames, error)
        }
    }
    return (frames, nil)
}
