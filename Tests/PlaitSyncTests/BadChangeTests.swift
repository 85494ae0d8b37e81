import Foundation
import PlaitCore
import PlaitStore
import PlaitSync
import PlaitTestSupport
import PlaitWire
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
            let (error, seen) = try sessionAgainstRawPeer(device) { peer in
                let head = HeadHash(seq: 1, hash: bad.hash)
                try peer.send(rawHello(summary: Summary([foreign: 1]), heads: [foreign: head]))
                _ = try peer.receive { if case .want = $0 { true } else { false } }
                try peer.send(.changes([bad]))
            }
            let text = "\(error)"
            #expect(text.contains("the peer sent change \(foreign):1 whose bytes do not decode"), "\(text)")
            #expect(!text.contains("stored snapshot") && !text.contains("run `plait doctor`."), "\(text)")
            if case let .close(reason) = seen.last {
                #expect(!reason.contains("stored snapshot"), "the peer is told its change, not our store: \(reason)")
            }
            #expect(try device.snapshot() == before, "nothing was stored")
        }
    }
}
