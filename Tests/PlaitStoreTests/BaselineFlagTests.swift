import Foundation
import GRDB
@testable import PlaitCore
import PlaitTestSupport
import Testing

@testable import PlaitStore

/// PROTOCOL.md §20.9: a paired peer's baseline is believed for what it folds, not against what the receiver holds.
/// A hostile tester's baseline marked another device's timeline `ended`, or `superseded_at`, at a head the receiver
/// held and could see was neither; the receiver then refused every later change of that timeline.
@Suite("Baseline flags against held changes")
struct BaselineFlagTests {
    /// a: a signed device with `edits` edits; b: a device holding all of a's changes. Returns both and a's changes.
    static func aAndB(
        _ directory: TemporaryDirectory, seed: UInt64, edits: Int
    ) throws -> (a: Replica, aStore: Store, b: Device, changes: [EncodedChange]) {
        var rng = SplitMix64(seed: seed)
        let signer = try ForkFixtures.signer("a")
        let aStore = try Store.create(at: directory.file("a.db"), signer: signer, synchronousFull: false)
        let a = try Replica(store: aStore, signer: signer)
        try randomEdits(a, count: edits, rng: &rng)
        let changes = try aStore.encodedChanges(of: try aStore.ownTimeline(), from: 1, limit: .max)
        let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
        #expect(try b.replica.integrate(encoded: changes).refused.isEmpty)
        return (a, aStore, b, changes)
    }

    /// The baseline a peer would build from `changes` (in replay order), before any tampering.
    static func folded(_ changes: [EncodedChange]) throws -> Baseline {
        var folder = try BaselineFolder(domain: ListsDomain(), previous: nil)
        for change in changes.sorted(by: { ($0.change.lamport, $0.change.timeline) < ($1.change.lamport, $1.change.timeline) }) {
            try folder.add(change.change)
        }
        return folder.finish()
    }

    /// a writes `count` more edits and b takes them all: the timeline was not stopped at b.
    static func aGoesOnAndBTakesIt(
        _ a: Replica, _ aStore: Store, _ b: Device, timeline: TimelineID, after held: Int, seed: UInt64
    ) throws {
        var rng = SplitMix64(seed: seed ^ 1)
        try randomEdits(a, count: 3, rng: &rng)
        let later = try aStore.encodedChanges(of: timeline, from: UInt64(held) + 1, limit: .max)
        let taken = try b.replica.integrate(encoded: later)
        #expect(taken.refused.isEmpty, "seed \(seed): \(taken.refused)")
        #expect(try b.summary[timeline] == UInt64(held + 3), "seed \(seed)")
    }

    /// What of b a refused baseline must leave as it was.
    static func snapshot(_ b: Device) throws -> [String] {
        [
            try b.summary.description, hex(b.digest), "\(try b.store.baseline() == nil)",
            "\(try b.store.timelineAuthorities().map { "\($0.timeline) \(String(describing: $0.supersededSeq))" })",
        ]
    }

    static func refusal(_ body: () throws -> Void) -> String {
        do {
            try body()
            return "adopted"
        } catch let error as StoreError {
            return error.description
        } catch {
            return "\(error)"
        }
    }

    @Test(arguments: [0xBF1A_0001 as UInt64])
    func anEndedFlagAtAHeldHeadThatIsNoEndIsRefused(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            let (a, aStore, b, changes) = try Self.aAndB(directory, seed: seed, edits: 10)
            let timeline = try aStore.ownTimeline()
            let before = try Self.snapshot(b)

            // At the head b holds: b sees change N is no timeline.end.
            var atHead = try Self.folded(changes)
            #expect(!atHead.ended.contains(timeline))
            atHead.ended.insert(timeline)
            let headRefusal = Self.refusal { _ = try b.replica.adopt(atHead) }
            #expect(headRefusal.contains("ended at change \(changes.count)"), "seed \(seed): \(headRefusal)")
            #expect(headRefusal.contains("is not a timeline.end"), "seed \(seed): \(headRefusal)")
            #expect(try Self.snapshot(b) == before, "seed \(seed)")

            // Below the head b holds: b holds the timeline further, so it did not end there.
            var below = try Self.folded(Array(changes.prefix(6)))
            below.ended.insert(timeline)
            let belowRefusal = Self.refusal { _ = try b.replica.adopt(below) }
            #expect(belowRefusal.contains("holds that timeline up to change \(changes.count)"), "seed \(seed): \(belowRefusal)")
            #expect(try Self.snapshot(b) == before, "seed \(seed)")

            // a goes on, and b takes it (refused before the fix: the timeline had "ended").
            try Self.aGoesOnAndBTakesIt(a, aStore, b, timeline: timeline, after: changes.count, seed: seed)

            // The untampered baseline is adopted.
            #expect(Self.refusal { _ = try b.replica.adopt(try Self.folded(changes)) } == "adopted")
        }
    }

    @Test(arguments: [0xBF1A_0002 as UInt64])
    func aSupersededFlagWithoutABeginOfTheSameKeyIsRefused(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            let (a, aStore, b, changes) = try Self.aAndB(directory, seed: seed, edits: 8)
            let timeline = try aStore.ownTimeline()
            let before = try Self.snapshot(b)

            var hostile = try Self.folded(changes)
            hostile.superseded[timeline] = UInt64(changes.count)
            let refusal = Self.refusal { _ = try b.replica.adopt(hostile) }
            #expect(refusal.contains("superseded at change \(changes.count)"), "seed \(seed): \(refusal)")
            #expect(try Self.snapshot(b) == before, "seed \(seed)")

            // A certificate for a's timeline other than the one its begin (held by b) carries.
            var otherKey = try Self.folded(changes)
            otherKey.certificates[timeline] = try TestKeyPair(commonName: "m").certificateDER
            let keyRefusal = Self.refusal { _ = try b.replica.adopt(otherKey) }
            #expect(keyRefusal.contains("another certificate for timeline \(timeline)"), "seed \(seed): \(keyRefusal)")
            #expect(try Self.snapshot(b) == before, "seed \(seed)")

            // a's own rejoin supersedes the timeline with a begin of its key: that baseline is adopted, but its flag is
            // not believed (a folded begin carries no signature: `dropUnwitnessedSupersessions`).
            try a.rejoin(now: fixedNow)
            let all = try aStore.encodedChangesInReplayOrder()
            let honest = try Self.folded(all)
            let end = try aStore.summary()[timeline]
            #expect(honest.superseded[timeline] == end)
            #expect(Self.refusal { _ = try b.replica.adopt(honest) } == "adopted", "seed \(seed)")
            #expect(try b.store.timelineAuthorities().first { $0.timeline == timeline }?.supersededSeq == nil)
        }
    }

    /// A hostile tester (2026-11-25, F3) named its own certificate in a baseline entry for another device's timeline
    /// the receiver did not hold yet, then sent changes of that timeline signed with its own key: they were taken, and
    /// the real ones refused as a fork. A certificate the receiver does not hold is now taken only with the begin's
    /// nonce, and the two must derive the timeline's ID (PROTOCOL.md §20.9 item 5); the honest baseline, which
    /// carries it, is adopted by a device that never held the timeline.
    @Test(arguments: [0xBF1A_0004 as UInt64])
    func aCertificateForATimelineNotHeldIsTakenOnlyWithTheNonceThatDerivesIt(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let a = try ForkRecordHelloTests.device("a", in: directory)
            let aStore = a.store
            try randomEdits(a, count: 12, rng: &rng)
            let timeline = try aStore.ownTimeline()
            let certificate = try #require(try aStore.certificate(of: timeline))
            let changes = try aStore.encodedChanges(of: timeline, from: 1, limit: .max)
            let honest = try Self.folded(changes)
            try #require(honest.certificates[timeline] == certificate, "seed \(seed)")
            let nonce = try #require(honest.nonces[timeline], "seed \(seed)")
            #expect(TimelineBegin.timelineID(certificate: certificate, nonce: nonce) == timeline)

            // b has never held a's timeline.
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(b.replica, count: 5, rng: &rng)
            let before = try Self.snapshot(b)
            let hostileKey = try TestKeyPair(commonName: "m").certificateDER

            // m's certificate for a's timeline, without a nonce (as the hostile tester sent it).
            var bare = honest
            bare.certificates[timeline] = hostileKey
            bare.nonces[timeline] = nil
            let decodedBare = try Baseline(decoding: bare.encoded()[...])
            let bareRefusal = Self.refusal { _ = try b.replica.adopt(decodedBare) }
            #expect(bareRefusal.contains("without the nonce of that timeline's begin"), "seed \(seed): \(bareRefusal)")
            #expect(try Self.snapshot(b) == before, "seed \(seed)")
            #expect(try b.store.certificate(of: timeline) == nil, "seed \(seed)")

            // With a nonce: none makes m's certificate derive a's timeline. On the wire the entry does not decode.
            var withNonce = honest
            withNonce.certificates[timeline] = hostileKey
            var wrong = withNonce.encoded()
            #expect(throws: CoreError.self, "seed \(seed)") { _ = try Baseline(decoding: wrong[...]) }
            let nonceRefusal = Self.refusal { _ = try b.replica.adopt(withNonce) }
            #expect(nonceRefusal.contains("do not derive its timeline \(timeline)"), "seed \(seed): \(nonceRefusal)")
            #expect(try Self.snapshot(b) == before, "seed \(seed)")
            // A nonce of the wrong length, and a nonce without a certificate, do not decode either.
            var short = honest
            short.nonces[timeline] = Array(nonce.prefix(15))
            wrong = short.encoded()
            #expect(throws: CoreError.self, "seed \(seed)") { _ = try Baseline(decoding: wrong[...]) }

            // The honest baseline travels with its nonce and is adopted: b now verifies a's later changes with a's key.
            let decoded = try Baseline(decoding: honest.encoded()[...])
            #expect(decoded.nonces[timeline] == nonce)
            #expect(Self.refusal { _ = try b.replica.adopt(decoded) } == "adopted", "seed \(seed)")
            #expect(try b.store.certificate(of: timeline) == certificate, "seed \(seed)")
            try Self.aGoesOnAndBTakesIt(a, aStore, b, timeline: timeline, after: changes.count, seed: seed)
        }
    }

    /// The second hostile tester of 2026-11-25 marked a's timeline superseded at b's head of it in a baseline that
    /// also invented a second timeline under a's certificate (a nonce of its choosing derives a valid ID): b believed
    /// the flag and refused every later change of a's timeline, and a was told nothing. A baseline's `superseded_at`
    /// for a signed timeline is not believed now (PROTOCOL.md §20.9); the rest of the baseline is adopted.
    @Test(arguments: [0xBF1A_0006 as UInt64])
    func aSupersessionBackedOnlyByTheBaselineItselfIsNotBelieved(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            let (a, aStore, b, changes) = try Self.aAndB(directory, seed: seed, edits: 8)
            let timeline = try aStore.ownTimeline()
            var rng = SplitMix64(seed: seed)
            var hostile = try Self.folded(changes)
            let certificate = try #require(hostile.certificates[timeline])
            let nonce = (0..<16).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            let invented = TimelineBegin.timelineID(certificate: certificate, nonce: nonce)
            hostile.summary[invented] = 1
            hostile.heads[invented] = (0..<32).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
            hostile.headLamports[invented] = 1
            hostile.certificates[invented] = certificate
            hostile.nonces[invented] = nonce
            hostile.superseded[timeline] = UInt64(changes.count)
            let decoded = try Baseline(decoding: hostile.encoded()[...])
            #expect(Self.refusal { _ = try b.replica.adopt(decoded) } == "adopted", "seed \(seed)")
            #expect(try b.store.timelineAuthorities().first { $0.timeline == timeline }?.supersededSeq == nil,
                    "seed \(seed)")
            #expect(try b.store.baseline()?.superseded[timeline] == nil, "seed \(seed): nor kept to be passed on")

            // a goes on, and b takes it (refused before the fix: "where a newer timeline superseded it").
            try Self.aGoesOnAndBTakesIt(a, aStore, b, timeline: timeline, after: changes.count, seed: seed)
        }
    }

    /// A baseline's Lamport times are witnessed by nothing: one claiming 2^62 − 1 would stop the receiver's writes
    /// for good (PROTOCOL.md §15). A baseline claiming more than 2^32 above what the receiver holds is refused.
    @Test(arguments: [0xBF1A_0005 as UInt64])
    func aBaselineCannotSpendTheLamportRange(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            let changes = try Self.aAndB(directory, seed: seed, edits: 6).changes
            var rng = SplitMix64(seed: seed)
            let fresh = try Device("f", in: directory, timeline: TimelineID(rng.next()))
            let before = try Self.snapshot(fresh)
            for claim in [Lamport.max - 1, UInt64(1) << 40] {
                var hostile = try Self.folded(changes)
                hostile.maxLamport = claim
                let refusal = Self.refusal { _ = try fresh.replica.adopt(hostile) }
                #expect(refusal.contains("more than 2^32 above"), "seed \(seed), claim \(claim): \(refusal)")
                #expect(try Self.snapshot(fresh) == before, "seed \(seed)")
            }
            #expect(Self.refusal { _ = try fresh.replica.adopt(try Self.folded(changes)) } == "adopted")
            try randomEdits(fresh.replica, count: 5, rng: &rng)
        }
    }

    /// A hostile tester's baseline (2026-11-25) folded only its own `timeline.begin` and carried tombstones for
    /// another device's items, stamped at Lamport 2^62: the items vanished, with no delete in any log. A snapshot
    /// whose versions are stamped or placed by changes the baseline does not fold is refused, as is one holding an
    /// object twice; the honest snapshot of the same baseline is adopted.
    @Test(arguments: [0xBF1A_0003 as UInt64])
    func aSnapshotStampedBeyondWhatItsBaselineFoldsIsRefused(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            // b: its own items, not compacted. m: a paired peer whose baseline folds its own begin only.
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(b.replica, count: 30, rng: &rng)
            let items = b.replica.state.items.compactMap { $0.value.deleted ? nil : $0.key }
            try #require(!items.isEmpty, "seed \(seed)")
            let signer = try ForkFixtures.signer("m")
            let mStore = try Store.create(at: directory.file("m.db"), signer: signer, synchronousFull: false)
            let mTimeline = try mStore.ownTimeline()
            let honest = try Self.folded(try mStore.encodedChanges(of: mTimeline, from: 1, limit: .max))
            let before = try Self.snapshot(b)
            let shownBefore = Set(items)

            func tampered(_ edit: (inout ListsSnapshot) -> Void) throws -> Baseline {
                var snapshot = try ListsSnapshot(decoding: honest.snapshot[...])
                edit(&snapshot)
                var baseline = honest
                baseline.snapshot = snapshot.encoded()
                return baseline
            }
            func tombstones(_ stamp: OrderKey) throws -> Baseline {
                try tampered { snapshot in
                    for id in items {
                        snapshot.items[id] = ItemVersion(
                            list: b.replica.state.items[id]!.list, text: "", completed: false, deleted: true,
                            placedBy: ChangeRef(timeline: TimelineID(0), seq: 0), stamp: stamp, rank: 0, weight: 1)
                    }
                }
            }
            let cases: [(String, Baseline, String)] = [
                ("at Lamport 2^62", try tombstones(OrderKey(lamport: 1 << 62, timeline: mTimeline, seq: 1)), "Lamport time 4611686018427387904"),
                ("by a change not folded", try tombstones(OrderKey(lamport: 1, timeline: b.timeline, seq: 2)), "does not fold"),
                ("placed by a change not folded", try tampered { snapshot in
                    let id = items[0]
                    snapshot.items[id] = ItemVersion(
                        list: b.replica.state.items[id]!.list, text: "x", completed: false, deleted: false,
                        placedBy: ChangeRef(timeline: mTimeline, seq: 9), stamp: .zero, rank: 0, weight: 1)
                }, "placed by change"),
            ]
            for (name, baseline, expected) in cases {
                let refusal = Self.refusal { _ = try b.replica.adopt(baseline) }
                #expect(refusal.contains(expected), "seed \(seed), \(name): \(refusal)")
                #expect(try Self.snapshot(b) == before, "seed \(seed), \(name)")
                #expect(Set(b.replica.state.items.compactMap { $0.value.deleted ? nil : $0.key }) == shownBefore)
            }

            // The same object twice: the decoder refuses it (which version counted depended on the order read).
            var writer = ProtoWriter()
            writer.uint(1, ListsDomain.snapshotFormat)
            let list = ListVersion(title: "t", color: nil, deleted: false, stamp: .zero, rank: 0, weight: 1)
            writer.message(2) { list.encode(ObjectID(high: 1, low: 1), &$0) }
            writer.message(2) { list.encode(ObjectID(high: 1, low: 1), &$0) }
            var twice = honest
            twice.snapshot = writer.bytes
            let twiceRefusal = Self.refusal { _ = try b.replica.adopt(twice) }
            #expect(twiceRefusal.contains("twice"), "seed \(seed): \(twiceRefusal)")
            #expect(try Self.snapshot(b) == before)

            #expect(Self.refusal { _ = try b.replica.adopt(honest) } == "adopted", "seed \(seed)")
            #expect(Set(b.replica.state.items.compactMap { $0.value.deleted ? nil : $0.key }) == shownBefore)
        }
    }
}

