import Foundation
@testable import PlaitSync
import Testing

/// The event ring as a value (DESIGN §12 "Endpoints and events"): numbering, gaps when it overflowed or when a
/// position belongs to another epoch, concurrent publishers, and waits woken by a publish (never by sleeping).
@Suite struct EventHubTests {
    private func seqs(_ events: [AgentEvent]) -> [UInt64] { events.map(\.seq) }

    @Test func numbersEventsAndAnswersFromAPosition() {
        let hub = EventHub(capacity: 8, epoch: "e1")
        for index in 1...5 { hub.publish(.changeApplied, ["n": .int(Int64(index))]) }
        #expect(hub.latestSeq == 5)
        let batch = hub.events(after: 2)
        #expect(batch.epoch == "e1")
        #expect(seqs(batch.events) == [3, 4, 5])
        #expect(batch.events.map { $0.data["n"] } == [.int(3), .int(4), .int(5)])
        #expect(hub.events(after: 5).events.isEmpty)
        #expect(seqs(hub.events(after: 0, epoch: "e1").events) == [1, 2, 3, 4, 5])
    }

    /// A client more than a ring behind gets a gap naming exactly what it missed, then everything held.
    @Test func overflowedRingReportsTheGap() throws {
        let hub = EventHub(capacity: 4, epoch: "e1")
        for _ in 1...10 { hub.publish(.syncProgress) }
        let behind = hub.events(after: 2).events
        #expect(seqs(behind) == [6, 7, 8, 9, 10])
        let gap = try #require(behind.first)
        #expect(gap.kind == .gap)
        #expect(gap.data == ["from": 3, "to": 6, "reason": "overflow"])
        // The gap covers 3…6 but 6 is not held either: the first held is 7.
        #expect(seqs(Array(behind.dropFirst())) == [7, 8, 9, 10])
        #expect(behind.dropFirst().allSatisfy { $0.kind == .syncProgress })
        // Exactly at the oldest held: no gap.
        let caughtUp = hub.events(after: 6).events
        #expect(seqs(caughtUp) == [7, 8, 9, 10])
        #expect(caughtUp.allSatisfy { $0.kind != .gap })
    }

    /// A position from another run of the agent (another epoch, or a number beyond the newest) is not taken for
    /// one of this run: a gap from 1 tells the client to reset, and everything held follows.
    @Test func positionFromAnotherEpochStartsWithAGap() throws {
        let hub = EventHub(capacity: 4, epoch: "new")
        for _ in 1...3 { hub.publish(.peerConnected) }
        let foreign = hub.events(after: 2, epoch: "old").events
        #expect(foreign.first?.kind == .gap)
        #expect(foreign.first?.data == ["from": 1, "to": 0, "reason": "epoch"])
        #expect(seqs(Array(foreign.dropFirst())) == [1, 2, 3])
        // No epoch given, but a number this run never reached.
        let beyond = hub.events(after: 40).events
        #expect(beyond.first?.data["reason"] == "epoch")
        #expect(seqs(Array(beyond.dropFirst())) == [1, 2, 3])
        // Overflowed and foreign: the gap covers what is no longer held.
        for _ in 1...3 { hub.publish(.peerConnected) }
        let both = hub.events(after: 1, epoch: "old").events
        #expect(both.first?.data == ["from": 1, "to": 2, "reason": "epoch"])
        #expect(seqs(Array(both.dropFirst())) == [3, 4, 5, 6])
        // Two hubs made without an epoch differ (a restart is noticed).
        #expect(EventHub().epoch != EventHub().epoch)
    }

    @Test func eventJSONCarriesEveryField() throws {
        let hub = EventHub(epoch: "abc")
        let event = hub.publish(.changeApplied, ["change": "1a:2", "list": .null, "pulled": true, "n": 3])
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(event.json.utf8)) as? [String: Any])
        #expect(object["seq"] as? Int == 1)
        #expect(object["epoch"] as? String == "abc")
        #expect(object["kind"] as? String == "change.applied")
        let time = try #require(object["time"] as? String)
        #expect(ISO8601DateFormatter().date(from: time.replacingOccurrences(of: #"\.\d+"#, with: "",
            options: .regularExpression)) != nil, "time \(time)")
        let data = try #require(object["data"] as? [String: Any])
        #expect(data["change"] as? String == "1a:2")
        #expect(data["list"] is NSNull)
        #expect(data["pulled"] as? Bool == true)
        #expect(data["n"] as? Int == 3)
        let batch = try #require(
            try JSONSerialization.jsonObject(with: Data(hub.events(after: 0).json.utf8)) as? [String: Any])
        #expect(batch["epoch"] as? String == "abc")
        #expect((batch["events"] as? [Any])?.count == 1)
    }

    /// Eight threads publishing at once: the numbers are 1…N without a hole or a repeat, and each publisher's
    /// events keep its own order.
    @Test func concurrentPublishersKeepOrderAndLoseNothing() {
        let threads = 8
        let each = 500
        let hub = EventHub(capacity: threads * each)
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for index in 0..<each {
                hub.publish(.changeApplied, ["thread": .int(Int64(thread)), "i": .int(Int64(index))])
            }
        }
        let events = hub.events(after: 0).events
        #expect(seqs(events) == Array(1...UInt64(threads * each)))
        var next = [Int64](repeating: 0, count: threads)
        var inOrder = true
        for event in events {
            guard case let .int(thread) = event.data["thread"], case let .int(index) = event.data["i"] else {
                inOrder = false
                break
            }
            if next[Int(thread)] != index { inOrder = false }
            next[Int(thread)] = index + 1
        }
        #expect(inOrder)
        #expect(next.allSatisfy { $0 == Int64(each) })
    }

    /// A long-poll with nothing to answer waits, and a publish wakes it: its timeout (ten minutes) is far off,
    /// so only the publish can have ended it. (The bound is the timeout itself, not a speed: with the whole suite
    /// running on two cores the cooperative pool can be busy for minutes, seen once at 121 s.)
    @Test func waitWakesOnPublish() async throws {
        let hub = EventHub(epoch: "e")
        hub.publish(.peerConnected)
        let started = ContinuousClock.now
        let waiting = Task { await hub.wait(after: 1, timeout: .seconds(600)) }
        // The waiter is registered (a condition polled with a deadline, not a sleep standing for it).
        let deadline = ContinuousClock.now + .seconds(10)
        while hub.waitingCount == 0 && ContinuousClock.now < deadline { await Task.yield() }
        #expect(hub.waitingCount == 1)
        Thread.detachNewThread { hub.publish(.peerDisconnected, ["device": "x"]) }
        let batch = await waiting.value
        #expect(batch.events.map(\.kind) == [.peerDisconnected])
        #expect(batch.events.first?.seq == 2)
        #expect(ContinuousClock.now - started < .seconds(600), "ended by the publish, not by its timeout")
        #expect(hub.waitingCount == 0)
    }

    @Test func waitAnswersAtOnceWhenEventsAreHeld() async {
        let hub = EventHub()
        hub.publish(.fork, ["timeline": "ab", "seq": 4])
        let batch = await hub.wait(after: 0, timeout: .seconds(60))
        #expect(batch.events.map(\.kind) == [.fork])
    }

    @Test func waitTimesOutEmpty() async {
        let hub = EventHub(epoch: "quiet")
        let batch = await hub.wait(after: 0, timeout: .milliseconds(20))
        #expect(batch == EventBatch(epoch: "quiet", events: []))
        #expect(hub.waitingCount == 0)
    }

    @Test func cancelledWaitEnds() async {
        let hub = EventHub()
        let waiting = Task { await hub.wait(after: 0, timeout: .seconds(60)) }
        let deadline = ContinuousClock.now + .seconds(10)
        while hub.waitingCount == 0 && ContinuousClock.now < deadline { await Task.yield() }
        waiting.cancel()
        let batch = await waiting.value
        #expect(batch.events.isEmpty)
        #expect(hub.waitingCount == 0)
    }

    /// A stream follows the hub: events in order, a keep-alive when quiet, a gap when it fell a ring behind.
    @Test func subscriptionFollowsTheHub() async throws {
        let hub = EventHub(capacity: 3, epoch: "s")
        hub.publish(.pendingDevice)
        var stream = hub.subscribe(after: 0, keepAlive: .milliseconds(20)).makeAsyncIterator()
        #expect(await stream.next() == .events(hub.events(after: 0).events))
        #expect(await stream.next() == .keepAlive)
        for _ in 1...5 { hub.publish(.syncProgress) }  // 2…6; the ring holds 4…6
        guard case let .events(events) = await stream.next() else {
            Issue.record("expected events")
            return
        }
        #expect(events.first?.data == ["from": 2, "to": 3, "reason": "overflow"])
        #expect(seqs(Array(events.dropFirst())) == [4, 5, 6])
        hub.publish(.homeCopied)
        guard case let .events(more) = await stream.next() else {
            Issue.record("expected events")
            return
        }
        #expect(seqs(more) == [7])
    }

    /// A stream resumed with a position from another epoch resets once, then follows normally.
    @Test func subscriptionFromAnotherEpochResetsOnce() async {
        let hub = EventHub(epoch: "now")
        var stream = hub.subscribe(after: 9, epoch: "then", keepAlive: .milliseconds(20)).makeAsyncIterator()
        guard case let .events(first) = await stream.next() else {
            Issue.record("expected a gap")
            return
        }
        #expect(first.map(\.kind) == [.gap])
        #expect(await stream.next() == .keepAlive)
        hub.publish(.divergence)
        #expect(await stream.next() == .events(hub.events(after: 0).events))
    }
}

extension EventHubTests {
    /// Closing (the agent stopping) ends a waiting long-poll and a stream at once, and later waits too.
    @Test func closeEndsWaitsAndStreams() async {
        let hub = EventHub()
        let waiting = Task { await hub.wait(after: 0, timeout: .seconds(60)) }
        var stream = hub.subscribe(after: 0, keepAlive: .seconds(60)).makeAsyncIterator()
        let deadline = ContinuousClock.now + .seconds(10)
        while hub.waitingCount == 0 && ContinuousClock.now < deadline { await Task.yield() }
        hub.close()
        #expect(await waiting.value.events.isEmpty)
        #expect(await stream.next() == nil)
        let started = ContinuousClock.now
        #expect(await hub.wait(after: 0, timeout: .seconds(60)).events.isEmpty)
        #expect(ContinuousClock.now - started < .seconds(600), "ended by the publish, not by its timeout")
    }
}
