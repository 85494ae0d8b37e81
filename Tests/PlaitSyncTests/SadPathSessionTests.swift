import Foundation
import PlaitCore
import PlaitNetnsSupport
import PlaitSession
import PlaitStore
import PlaitTLS
@testable import PlaitSync
import PlaitTestSupport
import PlaitWire
import Testing

/// Issue 8's protocol-level cases (DESIGN §10), each against real stores: a peer scripted message by message
/// plays the hostile or broken side.
@Suite struct SadPathSessionTests {
    /// Plays a peer through a whole one-shot session: its Hello, a Want for nothing, `batches`, Done(`done`),
    /// then the device's Done, state report and Close. Returns what the device sent.
    func play(_ peer: RawPeer, hello: Message, batches: [[Change]], done: Summary) throws -> [Message] {
        try peer.send(hello)
        let greeting = try peer.receive { if case .want = $0 { true } else { false } }
        guard case let .hello(device)? = greeting.first else {
            Issue.record("the device did not open with Hello: \(greeting)")
            return greeting
        }
        try peer.send(.want(Want(have: device.summary, baselineOffset: nil)))
        for batch in batches { try peer.send(.changes(batch)) }
        try peer.send(.done(done))
        let rest = try peer.receive { if case .close = $0 { true } else { false } }
        try peer.send(.close(reason: "done"))
        return greeting + rest
    }

    /// A chain of `count` list creations on `timeline`, Lamport times from `lamport` on.
    func chain(_ timeline: TimelineID, count: Int, lamport: UInt64, rng: inout SplitMix64) -> [Change] {
        listCreateChain(timeline, count: count, lamport: lamport, rng: &rng)
    }

    /// The summary whose entries are the heads of `changes`.
    func summary(of changes: [Change]) -> Summary {
        Summary(heads(changes).mapValues(\.seq))
    }

    func heads(_ changes: [Change]) -> [TimelineID: HeadHash] {
        var out: [TimelineID: HeadHash] = [:]
        for change in changes where (out[change.timeline]?.seq ?? 0) < change.seq {
            out[change.timeline] = HeadHash(seq: change.seq, hash: change.hash)
        }
        return out
    }

    /// Issue 8 case 1, "Lamport poison": one change with Lamport time 2^63-1 (or just over 2^62) used to be
    /// accepted and relayed, after which every authoring command trapped. Now it is refused with a reason that
    /// names the peer's fault, only its timeline stops, the session's other timeline is taken, and editing works.
    @Test(arguments: [UInt64(Int64.max), Lamport.max + 1])
    func aLamportPoisonStopsOnlyItsTimeline(poison: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x5AD_0001)
            let device = try Device("d", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(device.replica, count: 4, rng: &rng)
            let good = chain(TimelineID(rng.next()), count: 3, lamport: 10, rng: &rng)
            var poisoned = chain(TimelineID(rng.next()), count: 2, lamport: 20, rng: &rng)
            poisoned[1].lamport = poison
            let all = good + poisoned
            let summary = self.summary(of: all)
            let (result, sent) = try rawPeerSession(device) { peer in
                _ = try play(
                    peer, hello: rawHello(summary: summary, heads: heads(all)), batches: [poisoned + good],
                    done: summary)
            }
            let outcome = try result.get()
            #expect(outcome.refusedTimelines.count == 1)
            let refusal = try #require(outcome.refusedTimelines.first)
            #expect(refusal.timeline == poisoned[0].timeline)
            #expect(refusal.refusal == .lamportOutOfRange(seq: 2, lamport: poison))
            #expect(refusal.description.contains("above the limit of 2^62"))
            #expect(try device.summary[good[0].timeline] == 3, "the other timeline of the session was taken")
            #expect(try device.summary[poisoned[0].timeline] == 1, "the poisoned timeline stops before the poison")
            #expect(!sent.contains { if case .close(let reason) = $0 { reason != "done" } else { false } })
            // Editing goes on, with small Lamport times.
            try randomEdits(device.replica, count: 3, rng: &rng)
            #expect(try device.store.heads().map(\.lamport).max()! < 100)
        }
    }

    /// Issue 8 case 2: a change arriving under a number already held used to be skipped without comparing
    /// hashes. A different one is now a fork: found by hash, reported, recorded, nothing of it stored.
    /// The hostile tester of 2026-11-25 opened a new unsigned timeline whose first change (a `list.delete` of
    /// version 1) stood at Lamport 2^62 − 1, just under the limit: it was taken and relayed, and after one more edit
    /// every device failed every write ("the Lamport clock … reached its limit"), `rejoin` included, for good. An
    /// unsigned change has no witness (§20.6); one more than 2^32 above what the receiver holds is now refused
    /// (PROTOCOL.md §15), only its timeline stops, and a plausible jump on another unsigned timeline is taken.
    @Test(arguments: [Lamport.max - 1, Lamport.max, 1 << 40])
    func anUnsignedTimelineCannotSpendTheLamportRange(poison: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x5AD_0002)
            let device = try Device("d", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(device.replica, count: 4, rng: &rng)
            let held = try device.store.heads().map(\.lamport).max()!
            let plausible = chain(TimelineID(rng.next()), count: 3, lamport: held + 5_000, rng: &rng)
            var poisoned = chain(TimelineID(rng.next()), count: 1, lamport: 0, rng: &rng)
            poisoned[0].lamport = poison
            let all = plausible + poisoned
            let summary = self.summary(of: all)
            let (result, _) = try rawPeerSession(device) { peer in
                _ = try play(
                    peer, hello: rawHello(summary: summary, heads: heads(all)), batches: [poisoned + plausible],
                    done: summary)
            }
            let outcome = try result.get()
            let refusal = try #require(outcome.refusedTimelines.first, "poison \(poison)")
            #expect(outcome.refusedTimelines.count == 1 && refusal.timeline == poisoned[0].timeline)
            guard case .lamportImplausible(seq: 1, lamport: poison, ceiling: _) = refusal.refusal else {
                Issue.record("poison \(poison): \(refusal.refusal)")
                return
            }
            #expect(refusal.description.contains("more than 2^32 above"), "\(refusal.description)")
            #expect(try device.summary[poisoned[0].timeline] == 0, "nothing of the poisoned timeline is stored")
            #expect(try device.summary[plausible[0].timeline] == 3, "a jump of 5,000 is taken")
            // Editing goes on, many times.
            try randomEdits(device.replica, count: 20, rng: &rng)
            #expect(try device.store.heads().map(\.lamport).max()! < held + 6_000)
        }
    }

    /// The second hostile tester of 2026-11-25: a one-shot session whose receiver refused the sender's changes
    /// (§14.2) ended normally, and the sender recorded its own summary as what the peer holds, so its `plait peers`
    /// said "in sync". The receiver's closing report says what it stored: the sender now names what it sent and
    /// the peer did not store, and acknowledges only what the peer's report holds. Here honest history does it:
    /// the sender took an unsigned timeline whose Lamport time climbed in two jumps of under 2^32, and a fresh
    /// receiver, taking both at once, refuses the second jump (PROTOCOL.md §15).
    @Test func aSenderSaysWhatTheReceiverDidNotStore() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x5AD_0009)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(a.replica, count: 3, rng: &rng)
            let first = chain(TimelineID(rng.next()), count: 2, lamport: Lamport.maxJump - 100, rng: &rng)
            let second = chain(TimelineID(rng.next()), count: 3, lamport: 2 * Lamport.maxJump - 200, rng: &rng)
            #expect(try a.replica.integrate(first).refused.isEmpty, "a step of under 2^32 is taken")
            #expect(try a.replica.integrate(second).refused.isEmpty, "and the next one from there")
            let pair = try runSession(a, b)
            let sent = try pair.a.get()
            let received = try pair.b.get()
            #expect(received.refusedTimelines.map(\.timeline) == [second[0].timeline], "\(received.refusedTimelines)")
            #expect(try b.summary[second[0].timeline] == 0 && b.summary[first[0].timeline] == 2)
            #expect(
                sent.untaken == [UntakenChanges(timeline: second[0].timeline, peerHolds: 0, sentUpTo: 3)],
                "\(sent.untaken)")
            #expect(sent.untaken.first?.description.contains("did not store changes") == true)
            let summaryA = try a.summary
            let summaryB = try b.summary
            #expect(sent.acknowledged == summaryB, "the acknowledgement is what the peer's report holds")
            #expect(sent.finalSummary == summaryA && sent.peerAhead.isEmpty)
            #expect(received.untaken.isEmpty && received.acknowledged == summaryA, "B sent what A stored")
            // Once B holds the first jump, the second is within 2^32 of it: the next session takes it all.
            let again = try runSession(a, b)
            #expect(try again.a.get().untaken.isEmpty && again.b.get().refusedTimelines.isEmpty)
            let (endA, endB) = (try a.summary, try b.summary)
            #expect(endA == endB)
        }
    }

    /// The third hostile tester of 2026-11-25: a paired peer that answers every Ping but never moves the sync on
    /// (Hello, then nothing; or no answer to the Want; or no Close after the exchange) kept `plait sync --timeout 20`
    /// running for ever: a Pong counted as progress. A one-shot session now fails once nothing but Ping and Pong
    /// moved for its idle timeout. (The peer here gives up answering after 10 s, so the old code ends too, with
    /// another error, instead of hanging the suite.)
    @Test(arguments: ["nowant", "nodone"])
    func aPeerThatOnlyAnswersPingsDoesNotHoldASyncForEver(stall: String) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x5AD_000A)
            let device = try Device("d", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(device.replica, count: 3, rng: &rng)
            var options = SessionOptions()
            options.pingInterval = .milliseconds(200)
            let started = ContinuousClock.now
            let (result, _) = try rawPeerSession(device, options: options, idleTimeout: .milliseconds(1500)) { peer in
                try peer.send(rawHello())
                if stall == "nodone" { try peer.send(.want(Want(have: Summary(), baselineOffset: nil))) }
                // Until the device closes: a Pong it leaves unread then resets the connection, which ends this too.
                while ContinuousClock.now - started < .seconds(10), let message = (try? peer.receive()) ?? nil {
                    if case let .ping(nonce) = message { try? peer.send(.pong(nonce: nonce)) }
                    if case .close = message { break }
                }
            }
            guard case let .failure(error) = result, case .stalled = error else {
                Issue.record("\(stall): \(result)")
                return
            }
            #expect(error.description.contains("kept the connection open but moved the sync no further"))
            #expect(ContinuousClock.now - started < .seconds(10), "\(stall): it ended before the peer gave up")
        }
    }

    /// The third hostile tester of 2026-11-25: `plait unpair` of a peer while a `plait sync` with it ran did not
    /// stop the sync: it went on taking the peer's changes (and sending it this device's). Now the session asks
    /// before each batch, page and baseline chunk whether the peer is still paired: the batch stored before the
    /// unpair stays, the next is not taken, and the session ends saying why.
    @Test func anUnpairStopsARunningSync() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x5AD_000B)
            let device = try Device("d", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(device.replica, count: 3, rng: &rng)
            let peerID = String(String(repeating: "ABCDEFG-", count: 8).dropLast())  // a Device ID's shape
            try device.store.trust(deviceID: peerID, name: "raw", address: nil, now: 1)
            let first = chain(TimelineID(rng.next()), count: 3, lamport: 10, rng: &rng)
            let second = chain(TimelineID(rng.next()), count: 4, lamport: 10, rng: &rng)
            let all = first + second
            let summary = self.summary(of: all)
            let stored = DispatchSemaphore(value: 0)
            var options = SessionOptions()
            options.onPulled = { _ in stored.signal() }
            let store = device.store
            options.stillTrusted = { (try? store.isTrusted(deviceID: peerID)) ?? true }
            let (result, _) = try rawPeerSession(device, options: options) { peer in
                try peer.send(rawHello(deviceID: peerID, summary: summary, heads: heads(all)))
                _ = try peer.receive { if case .want = $0 { true } else { false } }
                try peer.send(.changes(first))
                #expect(stored.wait(timeout: .now() + 20) == .success, "the first batch was stored")
                #expect(try store.untrust(deviceID: peerID, now: 2))
                // No Done after it: the session stops at this batch, and a frame it leaves unread would reset the
                // connection as it closes (under load the Done arrives after the batch was read).
                try peer.send(.changes(second))
                let end = try peer.receive { if case .close = $0 { true } else { false } }
                #expect(
                    end.contains { if case let .close(reason) = $0 { reason.contains("unpaired") } else { false } },
                    "the peer is told why: \(end)")
            }
            guard case let .failure(error) = result, case .unpaired = error else {
                Issue.record("\(result)")
                return
            }
            #expect(try device.summary[first[0].timeline] == 3, "what came before the unpair stays")
            #expect(try device.summary[second[0].timeline] == 0, "nothing after it is taken")
        }
    }

    /// The third hostile tester of 2026-11-25: a closing report holding more than the sync's device (its own
    /// timeline beyond its head, timelines it lacks) left `plait peers` saying "in sync": the acknowledgement was
    /// the least of both summaries, this device's own. It is now what the peer said, so the peer shows as ahead,
    /// and the sync names what the report holds beyond this device.
    @Test func aClosingReportHoldingMoreIsNotInSync() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x5AD_000C)
            let device = try Device("d", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(device.replica, count: 3, rng: &rng)
            let mine = try device.summary
            let own = try device.store.ownTimeline()
            var claimed = mine
            claimed[own] = mine[own] + 1_000
            let invented = TimelineID(rng.next())
            claimed[invented] = 7
            let (result, _) = try rawPeerSession(device) { peer in
                try peer.send(rawHello(summary: Summary()))
                _ = try peer.receive { if case .want = $0 { true } else { false } }
                try peer.send(.want(Want(have: Summary(), baselineOffset: nil)))
                try peer.send(.done(Summary()))
                _ = try peer.receive { if case .close = $0 { true } else { false } }
                let report = StateReport(stateDigest: [UInt8](repeating: 1, count: 32), baselineDigest: nil, unknownCount: 0)
                try peer.send(.notify(claimed, report: report, copies: []))
                try peer.send(.close(reason: "closing"))
            }
            let outcome = try result.get()
            #expect(outcome.acknowledged == claimed && outcome.acknowledged != outcome.finalSummary)
            #expect(
                outcome.peerAhead.map { "\($0.timeline):\($0.held):\($0.peerHolds)" }
                    == [own, invented].sorted().map { "\($0):\(mine[$0]):\(claimed[$0])" }, "\(outcome.peerAhead)")
            // The own timeline beyond its head is the claim (a problem), never changes made there meanwhile (a note);
            // both were printed (fifth hostile tester of 2026-11-25, F3).
            let claim = try #require(outcome.staleClaim)
            #expect(claim.timeline == own && claim.peerHead == claimed[own])
            var shown = PeerSyncOutcome(address: try PeerAddress(parsing: "127.0.0.1:1"))
            shown.result = outcome
            #expect(shown.problems.contains(claim.description), "\(shown.problems)")
            #expect(shown.notes.count == 1 && shown.notes.allSatisfy { $0.contains("\(invented):1…7") }, "\(shown.notes)")
            #expect(!shown.notes.contains { $0.contains("\(own)") }, "\(shown.notes)")
        }
    }

    @Test func aForkAtAHeldNumberIsFoundByHash() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x5AD_0002)
            let device = try Device("d", in: directory, timeline: TimelineID(rng.next()))
            let timeline = TimelineID(rng.next())
            let held = chain(timeline, count: 3, lamport: 10, rng: &rng)
            _ = try device.replica.integrate(held)
            var other = chain(timeline, count: 2, lamport: 10, rng: &rng)
            other[0] = held[0]
            other[1].previousHash = held[0].hash
            #expect(other[1].hash != held[1].hash)
            let before = try device.store.changes(of: timeline, from: 1, limit: 10)
            // Its Hello shows seq 1 with the same hash as here: only the arriving change at 2 tells them apart.
            let hello = rawHello(
                summary: Summary([timeline: 1]), heads: [timeline: HeadHash(seq: 1, hash: held[0].hash)])
            let (result, _) = try rawPeerSession(device) { peer in
                _ = try play(peer, hello: hello, batches: [other], done: Summary([timeline: 1]))
            }
            let outcome = try result.get()
            #expect(outcome.forkedTimelines.map(\.timeline) == [timeline])
            #expect(try device.store.forks().map(\.timeline) == [timeline])
            #expect(try device.store.changes(of: timeline, from: 1, limit: 10) == before)
        }
    }

    /// Issue 8 case 6: a Hello whose device_id is not the certificate's Device ID closes the connection.
    @Test func aHelloMustNameTheCertifiedDevice() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x5AD_0003)
            let device = try Device("d", in: directory, timeline: TimelineID(rng.next()))
            var options = SessionOptions()
            options.certifiedPeerID = "CERTIFIED-PEER"
            let (error, seen) = try sessionAgainstRawPeer(device, options: options) { peer in
                try peer.send(rawHello(deviceID: "SOMEONE-ELSE"))
            }
            guard case .identityMismatch(claimed: "SOMEONE-ELSE", certified: "CERTIFIED-PEER") = error else {
                Issue.record("expected an identity mismatch, got \(error)")
                return
            }
            guard case let .close(reason)? = seen.last else {
                Issue.record("the peer was not told: \(seen)")
                return
            }
            #expect(reason.contains("SOMEONE-ELSE"))
        }
    }

    /// Issue 8 case 6: a Hello that merely claims this device's own timeline beyond its head used to make it
    /// abandon its timeline each time (3 claims, 3 timelines). Now the claim is reported and never acted on.
    @Test func bareClaimsOnTheOwnTimelineAreNeverActedOn() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x5AD_0004)
            let device = try Device("d", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(device.replica, count: 3, rng: &rng)
            let own = try device.timeline
            let head = try device.summary[own]
            for attempt in 1...3 {
                let hello = rawHello(
                    summary: Summary([own: head + UInt64(attempt)]),
                    heads: [own: HeadHash(seq: head + UInt64(attempt), hash: rng.bytes(32))])
                let (result, _) = try rawPeerSession(device) { peer in
                    _ = try play(peer, hello: hello, batches: [], done: Summary())
                }
                let claim = try #require(try result.get().staleClaim)
                #expect(claim.timeline == own && claim.localHead == head && claim.peerHead == head + UInt64(attempt))
                #expect(claim.description.contains("plait rejoin"))
            }
            #expect(try device.timeline == own, "no timeline was switched on a bare claim")
            #expect(try device.summary.timelines.count == 1, "no new timeline was started")
            #expect(try device.store.ownTimelineSuspicion() == nil)
            try randomEdits(device.replica, count: 1, rng: &rng)
            #expect(try device.summary[own] == head + 1, "authoring goes on on the same timeline")
        }
    }

    /// Issue 8 case 5: two devices at the same summary with different state digests used to be reported as in
    /// sync. Now both sides find the divergence, at the Hello and in the closing state reports; after the
    /// damaged side rebuilds its state, the two are verified equal.
    @Test func aDivergenceIsReportedOnBothSides() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x5AD_0005)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(a.replica, count: 20, rng: &rng)
            try randomEdits(b.replica, count: 20, rng: &rng)
            _ = try runSession(a, b).results()
            // B's materialized state is changed behind the engine's back (a damaged derived row).
            try sqlite(b.path, "UPDATE lists SET title = 'tampered' WHERE id = (SELECT id FROM lists LIMIT 1)")
            let tampered = try Device("b", opening: b.path)
            #expect(try tampered.summary == a.summary)
            #expect(hex(tampered.digest) != hex(a.digest))

            let (ra, rb) = try runSession(a, tampered).results()
            for result in [ra, rb] {
                let divergence = try #require(result.divergence)
                #expect(divergence.description.contains("diverged"))
                #expect(!result.verifiedEqual)
            }
            try tampered.replica.rebuild()
            let (again, _) = try runSession(a, tampered).results()
            #expect(again.divergence == nil && again.verifiedEqual)
        }
    }

    /// Issue 8 case 3: one rotted change row on the sender used to stop everything (0 of 2,001 changes sent,
    /// "forked at change 1001", the sender saying it sent them all). Now the sender stops only that timeline at
    /// the last good change, sets the damaged rows aside, and gets good copies back from a healthy peer.
    @Test func aRottedRowStopsOnlyItsTimelineAndHeals() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x5AD_0006)
            let sender = try Device("s", in: directory, timeline: TimelineID(rng.next()))
            let healthy = try Device("h", in: directory, timeline: TimelineID(rng.next()))
            let fresh = try Device("f", in: directory, timeline: TimelineID(rng.next()))
            let third = try Device("t", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(sender.replica, count: 60, rng: &rng)
            try randomEdits(third.replica, count: 10, rng: &rng)
            _ = try runSession(sender, third).results()
            _ = try runSession(sender, healthy).results()
            let own = try sender.timeline
            // Bit rot in the payload of change 20 of the sender's own timeline.
            let column = Int64(bitPattern: own.rawValue ^ 0x8000_0000_0000_0000)
            try sqlite(sender.path, "UPDATE changes SET payload = payload || X'00' WHERE tl = \(column) AND seq = 20")
            let rotted = try Device("s", opening: sender.path)

            let (toFresh, atFresh) = try runSession(rotted, fresh).results()
            #expect(toFresh.damagedChanges == [ChangeRef(timeline: own, seq: 20)])
            #expect(atFresh.refusedTimelines.isEmpty && atFresh.forkedTimelines.isEmpty)
            #expect(try fresh.summary[own] == 19, "the fresh peer got the timeline up to the last good change")
            #expect(try fresh.summary[try third.timeline] == 10, "and every other timeline")
            #expect(try rotted.summary[own] == 19)
            let quarantined = try rotted.store.quarantined()
            #expect(quarantined.map(\.timeline) == [own] && quarantined.first?.seqs == 20...60)
            #expect(try rotted.store.ownTimelineSuspicion() != nil, "no authoring on a timeline with a hole")

            // A healthy peer gives the good copies back: the quarantine empties and authoring resumes.
            _ = try runSession(rotted, healthy).results()
            #expect(try rotted.summary[own] == 60)
            #expect(try rotted.store.quarantined().isEmpty)
            #expect(try rotted.store.ownTimelineSuspicion() == nil)
            _ = try runSession(rotted, fresh).results()
            #expect(try fresh.summary == healthy.summary)
            #expect(hex(fresh.digest) == hex(healthy.digest) && hex(rotted.digest) == hex(healthy.digest))
            try randomEdits(rotted.replica, count: 1, rng: &rng)
            #expect(try rotted.summary[own] == 61)
        }
    }
}

extension SadPathSessionTests {
    /// The agent's start-up check (and doctor's, and repair's): one pass over the changes finds, per timeline,
    /// the first change whose hash does not continue the chain, a damaged head included; setting them aside
    /// ends each timeline at the last good change and leaves the others alone.
    @Test func damagedChangesAreFoundPerTimelineAndSetAside() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x5AD_0007)
            let device = try Device("d", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(device.replica, count: 30, rng: &rng)
            let other = chain(TimelineID(rng.next()), count: 10, lamport: 5, rng: &rng)
            let intact = chain(TimelineID(rng.next()), count: 4, lamport: 7, rng: &rng)
            _ = try device.replica.integrate(other + intact)
            #expect(try device.replica.damagedChanges().isEmpty)
            let own = try device.timeline
            let column = { (timeline: TimelineID) in Int64(bitPattern: timeline.rawValue ^ 0x8000_0000_0000_0000) }
            try sqlite(
                device.path, "UPDATE changes SET payload = payload || X'01' WHERE tl = \(column(own)) AND seq = 10")
            try sqlite(
                device.path,
                "UPDATE changes SET wall = wall + 1 WHERE tl = \(column(other[0].timeline)) AND seq = 10")
            let found = try device.replica.damagedChanges().sorted { $0.ref < $1.ref }
            let expected = [
                DamagedChange(ref: ChangeRef(timeline: own, seq: 10), following: 21),
                DamagedChange(ref: ChangeRef(timeline: other[0].timeline, seq: 10), following: 1),
            ].sorted { $0.ref < $1.ref }
            #expect(found == expected)
            let reopened = try Device("d", opening: device.path)
            #expect(try reopened.replica.quarantineDamaged().count == 2)
            #expect(try reopened.summary[own] == 9 && reopened.summary[other[0].timeline] == 9)
            #expect(try reopened.summary[intact[0].timeline] == 4)
            #expect(try reopened.replica.damagedChanges().isEmpty)
            #expect(try reopened.store.quarantined().count == 2)
        }
    }
}

extension SadPathSessionTests {
    /// Damage to the `changes_by_timeline` index alone (the rows intact) is healed by rebuilding it, not taken for
    /// damaged changes: the agent's start and `repair` set 400 sound changes aside, and pulling them back failed on
    /// the unique index (bad-luck tester 2026-11-25, H4). The index is made stale here the way bit rot would leave
    /// it: one entry names a Lamport time no row has.
    @Test func aDamagedIndexIsRebuiltAndNoSoundChangeSetAside() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x5AD_0008)
            let device = try Device("d", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(device.replica, count: 30, rng: &rng)
            let own = try device.timeline
            let before = try device.summary
            let column = Int64(bitPattern: own.rawValue ^ 0x8000_0000_0000_0000)
            try makeIndexEntryStale(store: device.path, timelineColumn: column, seq: 12)
            let reopened = try Device("d", opening: device.path)
            #expect(try !reopened.replica.damagedChanges().isEmpty, "the stale index reads as damage")
            #expect(try reopened.replica.quarantineDamaged().isEmpty, "no sound change is set aside")
            #expect(try reopened.summary == before)
            #expect(try reopened.store.quarantined().isEmpty)
            let check = try sqliteShell(device.path, "PRAGMA integrity_check")
            #expect(check.trimmingCharacters(in: .whitespacesAndNewlines) == "ok", "\(check)")
        }
    }
}

/// Runs one SQL statement on a store file with the sqlite3 shell, as a user (or bit rot) would.
func sqlite(_ path: String, _ sql: String) throws {
    let shell = try ChildProcess.run("/usr/bin/sqlite3", [path, sql])
    #expect(shell.succeeded, "sqlite3 \(sql): \(shell.errors)")
}
