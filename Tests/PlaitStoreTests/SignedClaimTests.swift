import Foundation
import PlaitCore
import PlaitTestSupport
import Testing

@testable import PlaitStore

/// Stale-home claims act only on signed proof (DESIGN §11, issue 10): what a paired peer merely says about this
/// device's own signed timeline — a different head hash in its Hello, recorded as a fork — never stops this
/// device from authoring; it goes on, on a new signed timeline. A change signed by this key beyond the head is
/// proof, and stops authoring until `plait rejoin` (`IntegrateTests`).
@Suite("Claims about a signed own timeline")
struct SignedClaimTests {
    @Test func aPeersForkClaimDoesNotStopAuthoring() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0xC1A1_0001)
            let keys = try TestKeyPair(commonName: "me")
            let signer = try P256Signer(keyPEM: keys.keyPEM, certificatePEM: keys.certificatePEM)
            let replica = try Replica(
                store: try Store.create(at: directory.file("me.db"), signer: signer, synchronousFull: false),
                signer: signer)
            try randomEdits(replica, count: 4, rng: &rng)
            let own = try replica.store.ownTimeline()
            let head = try replica.store.summary()[own]
            // What a session records when a peer's Hello shows another hash at this timeline's head.
            try replica.store.recordForks(
                peer: "hostile", [(timeline: own, seq: head, detail: "a different hash at \(head)")], now: 1)
            #expect(try replica.store.ownTimelineSuspicion() == nil, "a bare claim does not stop authoring")
            #expect(try replica.store.forks().map(\.timeline) == [own], "it is still reported")
            try randomEdits(replica, count: 2, rng: &rng)
            let next = try replica.store.ownTimeline()
            #expect(next != own, "the next edit went on on a new signed timeline")
            #expect(try replica.store.summary()[own] == head, "nothing more was written on the claimed one")
            #expect(try replica.store.summary()[next] >= 2)
        }
    }
}
