import Foundation
import PlaitCore
import PlaitSession
import PlaitTestSupport
import PlaitStore
import PlaitSync
import PlaitWire
import Testing

/// Sessions between real stores over a Unix socket pair, each side on its own thread.
@Suite struct SessionTests {
    /// Two devices edit concurrently; one one-shot session later they hold the same changes and state.
    @Test(arguments: [(0x5E55_0001 as UInt64, false), (0x5E55_0002, true)])
    func twoDevicesConverge(seed: UInt64, readAhead: Bool) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(a.replica, count: 120, rng: &rng)
            try randomEdits(b.replica, count: 150, rng: &rng)
            let wrap: (SocketTransport) -> any FrameTransport = {
                readAhead ? ReadAheadTransport($0) : $0 as any FrameTransport
            }
            let (ra, rb) = try runSession(a, b, wrap: wrap).results()

            #expect(try a.summary == b.summary)
            #expect(try a.summary.count == 270)
            #expect(hex(a.digest) == hex(b.digest))
            #expect(hex(try a.reopenedDigest()) == hex(a.digest), "the materialized rows agree with memory")
            #expect(hex(try b.reopenedDigest()) == hex(b.digest))
            #expect(ra.pulled == 150 && ra.sent == 120)
            #expect(rb.pulled == 120 && rb.sent == 150)
            #expect(ra.peerDeviceID == "DEVICE-B" && ra.peerName == "b")
            #expect(rb.peerDeviceID == "DEVICE-A" && rb.peerName == "a")
            #expect(ra.duplicates == 0 && rb.duplicates == 0)
            #expect(ra.forkedTimelines.isEmpty && rb.forkedTimelines.isEmpty)
            #expect(ra.staleClaim == nil && rb.staleClaim == nil)
            #expect(ra.refusedTimelines.isEmpty && rb.refusedTimelines.isEmpty)
            #expect(ra.divergence == nil && rb.divergence == nil)
            #expect(ra.verifiedEqual && rb.verifiedEqual, "both compared their states at the end and found them equal")
            #expect(ra.finalSummary == (try a.summary))
            #expect(ra.peerCloseReason == "done" && rb.peerCloseReason == "done")
            #expect(ra.bytesSent == rb.bytesReceived && rb.bytesSent == ra.bytesReceived)

            // Synced devices: a second session moves no change.
            let (again, _) = try runSession(a, b).results()
            #expect(again.pulled == 0 && again.sent == 0)
        }
    }

    /// C gets A's changes through B.
    @Test func changesTravelThroughAPeer() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x5E55_0003)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            let c = try Device("c", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(a.replica, count: 40, rng: &rng)
            try randomEdits(b.replica, count: 30, rng: &rng)
            try randomEdits(c.replica, count: 20, rng: &rng)
            _ = try runSession(a, b).results()
            let (rb, rc) = try runSession(b, c).results()
            #expect(rc.pulled == 70 && rb.pulled == 20)
            #expect(try c.summary[try a.timeline] == 40)
            #expect(try c.summary == b.summary)
            #expect(hex(c.digest) == hex(b.digest))
            _ = try runSession(a, b).results()
            #expect(try a.summary == c.summary)
            #expect(hex(a.digest) == hex(c.digest))
        }
    }

    /// Both devices hold a large gap the other lacks and sync at the same moment: both finish (no deadlock),
    /// and what waits to be written stays near one batch. The default is 20,000 changes each so the debug
    /// build stays well under 30 seconds; `PLAIT_SYNC_BULK_CHANGES=100000` runs the full figure.
    @Test func bothSidesPullLargeGapsAtOnce() throws {
        let count = ProcessInfo.processInfo.environment["PLAIT_SYNC_BULK_CHANGES"].flatMap { Int($0) } ?? 20_000
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x5E55_0004)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            try bulkEdits(a.replica, count: count, rng: &rng)
            try bulkEdits(b.replica, count: count, rng: &rng)
            var options = SessionOptions()
            options.idleTimeout = .seconds(120)  // a stall fails the test instead of hanging it
            let started = ContinuousClock.now
            let (ra, rb) = try runSession(a, b, options: options).results()
            let elapsed = ContinuousClock.now - started
            #expect(ra.pulled == count && rb.pulled == count)
            #expect(ra.sent == count && rb.sent == count)
            #expect(try a.summary == b.summary)
            #expect(hex(a.digest) == hex(b.digest))
            let batchBytes = options.maxBatchBytes + 64 * 1024
            #expect(ra.peakQueuedBytes <= batchBytes && rb.peakQueuedBytes <= batchBytes)
            print("both sides pulled \(count) changes at once in \(elapsed); peak queued \(ra.peakQueuedBytes) bytes")
        }
    }

    /// What a peer sends that is not the protocol ends the session with an error naming it; the peer is told
    /// why; nothing is written.
    @Test(arguments: [
        ("garbage", Array("GET / HTTP/1.1\r\nHost: plait\r\n\r\n".utf8), "over the limit"),
        ("oversized", [0xFF, 0xFF, 0xFF, 0xF0, 1, 0, 0], "frame of 4294967280 bytes, over the limit"),
        ("unknown type", [0, 0, 0, 3, 200, 1, 2], "unknown type 200"),
        ("empty frame", [0, 0, 0, 0, 1], "length zero"),
        ("bad payload", [0, 0, 0, 4, 1, 0xFF, 0xFF, 0xFF], "Hello message that does not decode"),
    ])
    func badBytesEndTheSession(label: String, bytes: [UInt8], expected: String) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x5E55_0005)
            let device = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(device.replica, count: 10, rng: &rng)
            let before = try device.snapshot()
            let (error, seen) = try sessionAgainstRawPeer(device) { peer in try peer.send(bytes: bytes) }
            guard case .wire = error else {
                Issue.record("\(label): expected a wire error, got \(error)")
                return
            }
            #expect(error.description.contains(expected), "\(label): \(error)")
            #expect(seen.first.map { if case .hello = $0 { true } else { false } } == true)
            guard case let .close(reason) = seen.last else {
                Issue.record("\(label): the peer was not told (\(seen.map(\.type)))")
                return
            }
            #expect(reason.contains(expected), "\(label): \(reason)")
            #expect(try device.snapshot() == before, "\(label): the store changed")
        }
    }

    /// Two homes restored from one copy each authored under the same timeline: the fork is found, reported on
    /// both sides, and that timeline is not exchanged; everything else is.
    @Test(arguments: [(2, 4), (3, 3)])
    func aForkedTimelineIsReportedNotMerged(firstAuthors: Int, secondAuthors: Int) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x5E55_0007)
            let original = try Device("x", in: directory, timeline: TimelineID(rng.next()))
            let other = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(original.replica, count: 3, rng: &rng)
            let forked = try original.timeline
            try original.copy(to: directory.file("x1.db"))
            try original.copy(to: directory.file("x2.db"))
            let x1 = try Device("x1", opening: directory.file("x1.db"))
            let x2 = try Device("x2", opening: directory.file("x2.db"))
            try randomEdits(x1.replica, count: firstAuthors, rng: &rng)
            try randomEdits(x2.replica, count: secondAuthors, rng: &rng)
            try randomEdits(other.replica, count: 6, rng: &rng)
            _ = try runSession(x2, other).results()
            let x1Before = try x1.store.changes(of: forked, from: 1, limit: 100)
            let x2Before = try x2.store.changes(of: forked, from: 1, limit: 100)

            let (r1, r2) = try runSession(x1, x2).results()
            for (result, head, peerHead) in [
                (r1, 3 + firstAuthors, 3 + secondAuthors), (r2, 3 + secondAuthors, 3 + firstAuthors),
            ] {
                #expect(result.forkedTimelines.map(\.timeline) == [forked])
                let report = try #require(result.forkedTimelines.first)
                #expect(report.localHead == UInt64(head) && report.peerHead == UInt64(peerHead))
                #expect(report.description.contains("forked"))
            }
            // The side that holds it at least as far compares the hashes; the other learns it from the Want.
            #expect(r2.forkedTimelines[0].detectedLocally)
            #expect(r1.forkedTimelines[0].detectedLocally == (firstAuthors >= secondAuthors))
            // Not merged: each keeps its own history of the forked timeline.
            #expect(try x1.store.changes(of: forked, from: 1, limit: 100) == x1Before)
            #expect(try x2.store.changes(of: forked, from: 1, limit: 100) == x2Before)
            // Everything else travelled: x1 got B's changes through x2.
            #expect(try x1.summary[try other.timeline] == 6)
            // Holding the own timeline behind a peer is reported as a claim, never acted on; the fork marks the
            // own timeline of both copies, so neither authors on it again until `rejoin`.
            #expect((r1.staleClaim != nil) == (firstAuthors < secondAuthors))
            #expect(try x1.timeline == forked && x2.timeline == forked)
            #expect(try x1.store.ownTimelineSuspicion() != nil && x2.store.ownTimelineSuspicion() != nil)
            #expect(try x1.store.forks().map(\.timeline) == [forked])
        }
    }

    /// A home restored from an old copy syncs: the session reports that the peer holds its own timeline
    /// ahead, pulls the lost changes, and marks the timeline (it may continue elsewhere); authoring is refused
    /// until `rejoin`, after which what it authors reaches everyone and nothing is lost.
    @Test func aStaleHomeIsReportedAndWaitsForRejoin() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x5E55_0008)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(a.replica, count: 5, rng: &rng)
            let own = try a.timeline
            try a.copy(to: directory.file("backup.db"))
            try randomEdits(a.replica, count: 4, rng: &rng)
            try randomEdits(b.replica, count: 3, rng: &rng)
            _ = try runSession(a, b).results()

            // The old copy is put back.
            let restored = try Device("a", opening: directory.file("backup.db"))
            #expect(try restored.timeline == own && restored.summary[own] == 5)
            let (result, peerResult) = try runSession(restored, b).results()
            let claim = try #require(result.staleClaim)
            #expect(claim.timeline == own && claim.localHead == 5 && claim.peerHead == 9)
            #expect(peerResult.staleClaim == nil)
            #expect(try restored.timeline == own, "a claim is never acted on by switching")
            #expect(try restored.summary[own] == 9, "the changes made after the copy came back")
            #expect(try restored.store.ownTimelineSuspicion() != nil)
            #expect(result.forkedTimelines.isEmpty)
            #expect(throws: StoreError.self) { try randomEdits(restored.replica, count: 1, rng: &rng) }

            // After `rejoin` it authors on a new timeline; everyone converges, nothing lost.
            let rejoined = try restored.replica.rejoin()
            try randomEdits(restored.replica, count: 3, rng: &rng)
            #expect(try restored.summary[rejoined.new] == UInt64(rejoined.emitted + 3))
            _ = try runSession(restored, b).results()
            _ = try runSession(a, b).results()
            #expect(try a.summary == restored.summary && b.summary == restored.summary)
            #expect(try a.summary[own] == 9, "nothing was appended to the old timeline")
            #expect(hex(a.digest) == hex(restored.digest) && hex(b.digest) == hex(a.digest))
        }
    }

    /// The stream is in replay order across timelines, and every Changes frame is bounded by count and bytes.
    @Test func theStreamIsInReplayOrderAndBounded() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x5E55_0009)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let c = try Device("c", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            // Concurrent histories with overlapping Lamport times, some large changes (2 KB texts).
            for round in 0..<3 {
                try bulkEdits(a.replica, count: 1_500, textSize: round == 1 ? 2_000 : 0, rng: &rng)
                try bulkEdits(c.replica, count: 1_200, textSize: round == 2 ? 2_000 : 0, rng: &rng)
            }
            _ = try runSession(a, c).results()
            var recorded: RecordingTransport?
            var bounds = SessionOptions()
            bounds.maxBatchChanges = 2_000
            bounds.maxBatchBytes = 1 << 20
            let pair = try runSession(a, b, options: bounds) { socket in
                let transport = RecordingTransport(socket)
                if recorded == nil { recorded = transport }  // the first is A's side
                return transport
            }
            let (ra, _) = try pair.results()
            #expect(ra.sent == 8_100)
            let messages = try #require(recorded).messages()
            var streamed: [Change] = []
            var frames = 0
            var byBytes = 0
            for message in messages {
                guard case let .changes(batch) = message else { continue }
                frames += 1
                #expect(batch.count <= 2_000)
                let size = message.payload().count
                #expect(size <= 1 << 20, "a Changes frame of \(size) bytes")
                // Cut by bytes: short of the count, and close to the budget (which over-estimates each change by
                // at most a hundred bytes).
                if batch.count < 2_000 && size > (1 << 20) - 100 * batch.count { byBytes += 1 }
                streamed += batch.map(\.change)
            }
            #expect(streamed.count == 8_100)
            #expect(zip(streamed, streamed.dropFirst()).allSatisfy { $0.orderKey < $1.orderKey }, "replay order")
            #expect(Set(streamed.map(\.timeline)).count == 2)
            #expect(frames >= 5 && byBytes >= 2, "\(frames) frames, \(byBytes) cut by bytes")
            #expect(hex(a.digest) == hex(b.digest))
            // Done names the summary fixed when the Want arrived, after the last batch.
            guard case let .done(summary) = messages.last(where: { if case .done = $0 { true } else { false } }) else {
                Issue.record("no Done")
                return
            }
            #expect(try summary == a.summary)
        }
    }

    /// Catching up k missing changes costs bytes in proportion to k, not to the N changes both hold.
    @Test func catchUpBytesGrowWithTheGapNotTheHistory() throws {
        func bytes(history: Int, gap: Int) throws -> Int {
            try withTemporaryDirectory { directory in
                var rng = SplitMix64(seed: 0x5E55_000A)
                let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
                let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
                try bulkEdits(a.replica, count: history, rng: &rng)
                _ = try runSession(a, b).results()
                try randomEdits(a.replica, count: gap, rng: &rng)
                let (ra, rb) = try runSession(a, b).results()
                #expect(rb.pulled == gap && hex(a.digest) == hex(b.digest))
                return ra.bytesSent + ra.bytesReceived
            }
        }
        let small = try bytes(history: 500, gap: 40)
        let large = try bytes(history: 10_000, gap: 40)
        let double = try bytes(history: 500, gap: 80)
        print("catch-up bytes: N=500 k=40 \(small), N=10000 k=40 \(large), N=500 k=80 \(double)")
        #expect(abs(large - small) <= 256, "N=500: \(small) bytes, N=10000: \(large) bytes")
        #expect(Double(double) > Double(small) * 1.5, "k=40: \(small) bytes, k=80: \(double) bytes")
    }

    /// Agent mode: the session stays open; a local change plus `notify()` reaches the peer at once; Ping is
    /// answered; `stop()` closes both sides cleanly.
    @Test func agentSessionsPushChangesOnNotify() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x5E55_000C)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(a.replica, count: 7, rng: &rng)
            try randomEdits(b.replica, count: 5, rng: &rng)
            let pulledByA = Counter()
            let pulledByB = Counter()
            var optionsA = SessionOptions(mode: .agent)
            optionsA.onPulled = { pulledByA.add($0) }
            var optionsB = SessionOptions(mode: .agent)
            optionsB.onPulled = { pulledByB.add($0) }
            let live = try LiveSessions(a, b, optionsA: optionsA, optionsB: optionsB)
            defer { live.close() }

            #expect(pulledByA.wait(for: 5) && pulledByB.wait(for: 7), "the first exchange")
            try randomEdits(a.replica, count: 2, rng: &rng)
            live.a.notify()
            #expect(pulledByB.wait(for: 9), "A's new changes reached B")
            try randomEdits(b.replica, count: 3, rng: &rng)
            live.b.notify()
            #expect(pulledByA.wait(for: 8), "B's new changes reached A")
            #expect(try a.summary == b.summary)

            let (ra, rb) = try live.stop()
            #expect(rb.peerCloseReason == "stopped")
            #expect(ra.pulled == 8 && rb.pulled == 9)
            #expect(hex(a.digest) == hex(b.digest))
        }
    }

    /// An agent session answers Ping with Pong, and a peer's Close ends it normally.
    @Test func agentAnswersPing() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x5E55_000D)
            let device = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let (left, right) = try socketPair()
            let socket = try SocketTransport(adopting: left)
            let peer = RawPeer(fd: right)
            defer {
                socket.close()
                peer.close()
            }
            let session = try Session(
                transport: socket, replica: device.replica, identity: device.identity,
                options: SessionOptions(mode: .agent))
            let thread = JoinableThread { () throws(SessionError) in try session.run() }
            try peer.send(rawHello())
            try peer.send(.ping(nonce: 42))
            let seen = try peer.receive { if case .pong = $0 { true } else { false } }
            #expect(seen.last == .pong(nonce: 42))
            try peer.send(.close(reason: "bye"))
            let result = try thread.join().get()
            #expect(result.peerCloseReason == "bye")
        }
    }

    /// An agent's session that pulled a catch-up (batches whose state saving was deferred, DESIGN §12) saves
    /// that state once the connection is quiet, while it stays open: other processes then load the rows instead
    /// of replaying the catch-up forward, and the next local edit does not pay for the save.
    @Test(arguments: [0x5E55_0021 as UInt64])
    func aCatchUpsStateIsSavedOnceTheConnectionIsQuiet(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            // B's marker is set by a first, small pull; the catch-up after it is deferred.
            try randomEdits(a.replica, count: 3, rng: &rng)
            _ = try runSession(a, b).results()
            try randomEdits(a.replica, count: 400, rng: &rng, perEdit: false)
            let pulledByB = Counter()
            var optionsB = SessionOptions(mode: .agent)
            optionsB.onPulled = { pulledByB.add($0) }
            // Long enough that the deferral is seen before the save (the test checks both).
            optionsB.derivedSaveQuiet = .seconds(2)
            let live = try LiveSessions(a, b, optionsA: SessionOptions(mode: .agent), optionsB: optionsB)
            defer { live.close() }
            #expect(pulledByB.wait(for: 400), "seed \(seed): the catch-up reached B")
            #expect(b.replica.derivedUnsaved, "seed \(seed): the catch-up's commits deferred saving its state")
            // Saved by B's session while it runs, once nothing moved for the quiet time.
            let deadline = Date().addingTimeInterval(20)
            while b.replica.derivedUnsaved && Date() < deadline { usleep(2_000) }
            #expect(!b.replica.derivedUnsaved, "seed \(seed): the deferred state was saved with the session open")
            #expect(try b.reopenedDigest() == a.digest)
        }
    }

    /// A peer that says nothing for the idle timeout fails the session (no hang), after a Ping.
    @Test func aSilentPeerTimesOut() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x5E55_000E)
            let device = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let (left, right) = try socketPair()
            let socket = try SocketTransport(adopting: left)
            let peer = RawPeer(fd: right)
            defer {
                socket.close()
                peer.close()
            }
            var options = SessionOptions(mode: .agent)
            options.pingInterval = .milliseconds(50)
            options.idleTimeout = .milliseconds(300)
            let session = try Session(
                transport: socket, replica: device.replica, identity: device.identity, options: options)
            let thread = JoinableThread { () throws(SessionError) in try session.run() }
            try peer.send(rawHello())
            let result = thread.join()
            guard case .failure(let error as SessionError) = result, case .timedOut = error else {
                Issue.record("expected a time-out, got \(result)")
                return
            }
            socket.close()
            let seen = try peer.receiveAll()
            #expect(seen.contains { if case .ping = $0 { true } else { false } })
            #expect(seen.last.map { if case .close = $0 { true } else { false } } == true)
        }
    }

    /// A Hello of another protocol version than the connection's (`plait-sync/2`) is refused with a Close naming
    /// both versions (PROTOCOL.md §13.2, §17).
    @Test func anotherProtocolVersionIsRefused() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x5E55_000F)
            let device = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let (error, seen) = try sessionAgainstRawPeer(device) { peer in
                guard case var .hello(hello) = rawHello() else { return }
                hello.protocolVersion = 1
                try peer.send(.hello(hello))
            }
            guard case .incompatible = error else {
                Issue.record("expected incompatible, got \(error)")
                return
            }
            guard case let .close(reason) = seen.last else {
                Issue.record("the peer was not told")
                return
            }
            #expect(reason.contains("it speaks protocol version 1 and this device 2"), "\(reason)")
        }
    }
}

/// Runs a one-shot session of `device` against a hand-driven peer; `script` plays the peer. Returns the
/// session's error and everything the session sent.
func sessionAgainstRawPeer(
    _ device: Device, options extra: SessionOptions? = nil, script: (RawPeer) throws -> Void
) throws -> (SessionError, [Message]) {
    let (result, seen) = try rawPeerSession(device, options: extra, script: script)
    switch result {
    case .success(let value):
        Issue.record("the session succeeded: \(value)")
        return (.stopped, seen)
    case .failure(let error):
        return (error, seen)
    }
}

/// Runs a one-shot session of `device` against a peer scripted message by message; the session's result, and
/// every message the device sent.
func rawPeerSession(
    _ device: Device, options extra: SessionOptions? = nil, idleTimeout: Duration = .seconds(20),
    script: (RawPeer) throws -> Void
) throws -> (Result<SessionResult, SessionError>, [Message]) {
    let (left, right) = try socketPair()
    let socket = try SocketTransport(adopting: left)
    let peer = RawPeer(fd: right)
    defer {
        socket.close()
        peer.close()
    }
    var options = extra ?? SessionOptions()
    options.idleTimeout = idleTimeout
    let session = try Session(transport: socket, replica: device.replica, identity: device.identity, options: options)
    let thread = JoinableThread { () throws(SessionError) in try session.run() }
    var scriptError: (any Error)?
    do {
        try script(peer)
    } catch {
        scriptError = error
    }
    let result = thread.join()
    socket.close()  // the peer reads to the end of the stream
    let seen = try peer.receiveAll()
    if let scriptError { throw scriptError }
    return (result.mapError { $0 as! SessionError }, seen)
}
