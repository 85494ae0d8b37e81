import Foundation
import PlaitCore
import PlaitSession
import PlaitStore
import PlaitTestSupport
import PlaitWire
import Testing

/// Issue 10 over real sessions and real stores, with real ECDSA P-256 keys: a paired peer scripted message by
/// message plays the hostile side (DESIGN §11).
@Suite struct SignedSessionTests {
    /// A signed author: a store whose timeline begins with a signed `timeline.begin`, and its key.
    struct Author {
        let signer: P256Signer
        let store: Store
        let replica: Replica
        var timeline: TimelineID { get throws { try store.ownTimeline() } }

        init(_ name: String, in directory: TemporaryDirectory) throws {
            let key = try TestKeyPair(.p256, commonName: name)
            signer = try P256Signer(keyPEM: key.keyPEM, certificatePEM: key.certificatePEM)
            store = try Store.create(at: directory.file(name + ".db"), signer: signer, synchronousFull: false)
            replica = try Replica(store: store, signer: signer)
        }

        /// Everything of its own timeline as it travels, with the stored signatures.
        func encoded() throws -> [EncodedChange] { try store.encodedChanges(of: try timeline, from: 1, limit: 10_000) }
    }

    /// Plays a peer through a one-shot session: Hello with `summary`, a Want for nothing, `batch`, Done.
    func play(_ device: Device, summary: Summary, batch: [EncodedChange]) throws -> SessionResult {
        let (result, _) = try rawPeerSession(device) { peer in
            try peer.send(rawHello(summary: summary))
            let greeting = try peer.receive { if case .want = $0 { true } else { false } }
            guard case let .hello(hello)? = greeting.first else {
                Issue.record("the device did not open with Hello: \(greeting)")
                return
            }
            try peer.send(.want(Want(have: hello.summary, baselineOffset: nil)))
            try peer.send(.changes(batch))
            try peer.send(.done(summary))
            _ = try peer.receive { if case .close = $0 { true } else { false } }
            try peer.send(.close(reason: "done"))
        }
        return try result.get()
    }

    /// Issue 10: "a forged change on another device's timeline refused with the store unchanged". A paired peer
    /// relays the author's honest timeline and appends one change of its own to it, signed with its own key (the
    /// hash chain continues). The device takes the honest part, refuses the forged change by its signature, and
    /// stores nothing of it: the rows of that timeline are exactly the author's.
    @Test func aForgedChangeOnAnotherDevicesTimelineIsRefusedAndNothingOfItStored() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x516_0001)
            let author = try Author("author", in: directory)
            try randomEdits(author.replica, count: 5, rng: &rng)
            let honest = try author.encoded()
            let last = honest.last!.change
            let payload = ListsChange.listCreate(id: objectID(&rng), title: "forged", color: nil, at: .top)
            let forged = Change(
                timeline: last.timeline, seq: last.seq + 1, lamport: last.lamport + 1,
                previousHash: Array(SHA256.hash(honest.last!.bytes)), kind: payload.kind, version: 1,
                wallTime: 0, payload: payload.payload)
            let hostileKey = try TestKeyPair(.p256, commonName: "hostile")
            let hostile = try P256Signer(keyPEM: hostileKey.keyPEM, certificatePEM: hostileKey.certificatePEM)
            let forgedEncoded = EncodedChange(forged, signature: try hostile.sign(changeHash: forged.hash))

            let device = try Device("d", in: directory, timeline: TimelineID(rng.next()))
            let outcome = try play(
                device, summary: Summary([last.timeline: forged.seq]), batch: honest + [forgedEncoded])
            #expect(outcome.refusedTimelines == [
                RefusedTimeline(timeline: last.timeline, refusal: .badSignature(seq: forged.seq))
            ])
            // The forged change's signature covered the honest changes before it too, so the batch took nothing
            // of that timeline from this sender; the next session with an honest peer brings them.
            let stored = try device.store.encodedChanges(of: last.timeline, from: 1, limit: 100)
            #expect(!stored.contains { $0.change.seq == forged.seq })
            #expect(stored.map(\.bytes) == Array(honest.map(\.bytes).prefix(stored.count)))
            // Without the forgery the same device takes the whole honest timeline from the same kind of session.
            let clean = try play(device, summary: Summary([last.timeline: last.seq]), batch: honest)
            #expect(clean.refusedTimelines.isEmpty)
            #expect(try device.summary[last.timeline] == last.seq)
            #expect(try device.store.encodedChanges(of: last.timeline, from: 1, limit: 100).map(\.bytes)
                == honest.map(\.bytes))
        }
    }

    /// Issue 10: "a relay planting a bad signature cannot make a later receiver refuse the honest chain". A relay
    /// sends the author's chain with a garbage signature planted on a change in the middle. The device does not
    /// need that signature (a later one covers the change), so it takes the chain and never stores the planted
    /// signature; a third device pulling from it takes the same chain whole.
    @Test func aPlantedBadSignatureIsNotStoredAndALaterReceiverTakesTheHonestChain() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x516_0002)
            let author = try Author("author", in: directory)
            try randomEdits(author.replica, count: 8, rng: &rng)
            var batch = try author.encoded()
            let planted = [UInt8](repeating: 0xEE, count: 64)
            let middle = batch[4]
            batch[4] = EncodedChange(change: middle.change, bytes: middle.bytes, signature: planted)
            let timeline = try author.timeline
            let head = batch.last!.change.seq

            let relay = try Device("relay", in: directory, timeline: TimelineID(rng.next()))
            let first = try play(relay, summary: Summary([timeline: head]), batch: batch)
            #expect(first.refusedTimelines.isEmpty)
            #expect(try relay.summary[timeline] == head)
            let kept = try relay.store.encodedChanges(of: timeline, from: 1, limit: 100)
            #expect(!kept.contains { $0.signature == planted }, "the planted signature was stored")
            #expect(kept.last?.signature != nil, "the head keeps its verified signature")

            let later = try Device("later", in: directory, timeline: TimelineID(rng.next()))
            let second = try play(later, summary: Summary([timeline: head]), batch: kept)
            #expect(second.refusedTimelines.isEmpty)
            #expect(try later.summary[timeline] == head)
            #expect(hex(later.replica.digest) == hex(relay.replica.digest))
        }
    }

    /// Issue 10: "a Lamport jump without a held witness refused, with one accepted, and the same verdict on every
    /// device". The author's store gets a change at Lamport 500 from another timeline, so its next change jumps and
    /// names it as witness. A device that holds the witness takes the jump; one sent the jump without its witness
    /// refuses it, and so does every such device.
    @Test func aLamportJumpIsTakenOnlyWithItsWitness() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x516_0003)
            let other = try Author("other", in: directory)
            // `other` authors 499 changes in one transaction: its head is at Lamport 500.
            try randomEdits(other.replica, count: 499, rng: &rng, perEdit: false)
            let witnessBatch = try other.encoded()
            let author = try Author("author", in: directory)
            _ = try author.replica.integrate(encoded: witnessBatch)
            try randomEdits(author.replica, count: 1, rng: &rng)
            let jumped = try author.encoded()
            let jump = try #require(jumped.last?.change)
            #expect(jump.lamport == 501)
            #expect(jump.witness == witnessBatch.last?.change.ref)

            let otherTimeline = try other.timeline
            let authorTimeline = try author.timeline
            for name in ["without-1", "without-2"] {
                let device = try Device(name, in: directory, timeline: TimelineID(rng.next()))
                let outcome = try play(device, summary: Summary([authorTimeline: jump.seq]), batch: jumped)
                #expect(outcome.refusedTimelines.map(\.refusal) == [
                    .witnessNotHeld(seq: jump.seq, witness: jump.witness!, lamport: jump.lamport)
                ])
                #expect(try device.summary[authorTimeline] == jump.seq - 1)
            }
            let holder = try Device("with", in: directory, timeline: TimelineID(rng.next()))
            let outcome = try play(
                holder, summary: Summary([otherTimeline: witnessBatch.last!.change.seq, authorTimeline: jump.seq]),
                batch: witnessBatch + jumped)
            #expect(outcome.refusedTimelines.isEmpty)
            #expect(try holder.summary[authorTimeline] == jump.seq)
        }
    }
}
