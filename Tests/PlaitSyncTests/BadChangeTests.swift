import Foundation
import PlaitCore
import PlaitStore
import PlaitSync
import PlaitTestSupport
import Testing

/// A change from a peer whose payload does not decode is the peer's fault, said so (issue 8, case 12): it was
/// reported as "a stored snapshot does not decode… run `plait doctor`", blaming this device's store.
@Suite struct BadChangeTests {
    @Test func aChangeThatDoesNotDecodeNamesThePeerNotTheStore() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0xBAD_C4A6)
            let device = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(device.replica, count: 5, rng: &rng)
            let before = try device.snapshot()
            let foreign = TimelineID(rng.next())
            // An item.create whose first field claims 16 bytes and holds one.
            let bad = Change(
                timeline: foreign, seq: 1, lamport: 100, previousHash: Change.zeroHash, kind: "item.create",
                version: 1, wallTime: fixedNow, payload: [0x0A, 0x10, 0x01])
            let result = try device.replica.integrate([bad])
            let refused = try #require(result.refused.first, "the change was taken")
            let text = "\(refused)"
            #expect(text.contains("its change 1 has a payload that does not decode (item.create: "), "\(text)")
            #expect(!text.contains("stored snapshot") && !text.contains("run `plait doctor`"), "\(text)")
            #expect(try device.snapshot() == before, "nothing was stored")
        }
    }
}
