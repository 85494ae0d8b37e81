import PlaitCore
import Testing

/// Numbers a paired peer names that the store keeps as signed 64-bit integers: 2^63 and above trapped in the
/// store's conversions and stopped the agent (a hostile tester, 2026-11-24, five messages). Each is now refused
/// where it is decoded, as sequence numbers already were.
@Suite struct HostileNumberTests {
    static let over = UInt64(1) << 63

    @Test func aForkRecordBaseOver2To63IsRefused() throws {
        let parent = TimelineID(7)
        let firstHash = [UInt8](repeating: 0xEE, count: 32)
        let rivalHash = [UInt8](repeating: 0x11, count: 32)
        let branch = ForkBranch.id(parent: parent, firstHash: firstHash)
        for (base, refused) in [(Self.over - 1, false), (Self.over, true), (UInt64.max, true)] {
            let record = ForkBranch.Record(
                branch: branch, root: parent, parent: parent, base: base, firstHash: firstHash, rivalHash: rivalHash)
            #expect(record.isConsistent, "the record passes every other check")
            let decoded = Result { () throws(CoreError) in try ForkBranch.Record(decoding: record.encoded[...]) }
            if refused {
                #expect(throws: CoreError.self, "base \(base)") { try decoded.get() }
            } else {
                #expect(try decoded.get() == record)
            }
        }
    }

    @Test func aSupersededHeadOver2To63IsRefused() throws {
        for (seq, refused) in [(Self.over - 1, false), (Self.over, true)] {
            var superseded = ProtoWriter()
            superseded.fixed64(1, 42)
            superseded.uint(2, seq)
            superseded.data(3, [UInt8](repeating: 1, count: 32))
            var payload = ProtoWriter()
            payload.data(1, [0x30, 0x00])
            payload.data(2, [UInt8](repeating: 2, count: 16))
            payload.data(3, superseded.bytes)
            let decoded = Result { try TimelineBegin(payload: payload.bytes) }
            if refused {
                #expect(throws: CoreError.self, "seq \(seq)") { try decoded.get() }
            } else {
                #expect(try decoded.get().supersedes?.seq == seq)
            }
        }
    }

    @Test func aBaselineSupersededAtOrLamportOver2To63IsRefused() throws {
        let base = Baseline(
            summary: Summary([TimelineID(5): 3]), maxLamport: 9, heads: [TimelineID(5): [UInt8](repeating: 3, count: 32)],
            headLamports: [TimelineID(5): 9], ended: [], snapshot: [], superseded: [TimelineID(5): 3])
        _ = try Baseline(decoding: base.encoded()[...])
        var far = base
        far.superseded = [TimelineID(5): Self.over]
        #expect(throws: CoreError.self) { try Baseline(decoding: far.encoded()[...]) }
        far = base
        far.maxLamport = Self.over
        #expect(throws: CoreError.self) { try Baseline(decoding: far.encoded()[...]) }
    }
}
