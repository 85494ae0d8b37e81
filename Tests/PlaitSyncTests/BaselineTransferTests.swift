import Foundation
import PlaitCore
import PlaitSession
import PlaitStore
import PlaitSync
import PlaitTestSupport
import PlaitWire
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Baselines travel (DESIGN §2, §5): sent ahead of the changes when the asker lacks changes that exist only
/// inside them or its own baseline does not cover them; in chunks, staged, swapped in one transaction,
/// resumed by offset.
@Suite struct BaselineTransferTests {
    /// A device behind the other's baseline catches up through it.
    @Test func aDeviceBehindTheBaselineCatchesUpThroughIt() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0xBA5E_0001)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(a.replica, count: 300, rng: &rng)
            #expect(try a.replica.compact().folded == 300)
            try randomEdits(a.replica, count: 40, rng: &rng)
            try randomEdits(b.replica, count: 25, rng: &rng)

            let (ra, rb) = try runSession(a, b).results()
            #expect(rb.baselinesPulled == 1 && ra.baselinesSent == 1)
            #expect(ra.baselinesPulled == 0 && rb.baselinesSent == 0, "b has no baseline to send")
            #expect(rb.pulled == 40 && ra.pulled == 25)
            #expect(try a.summary == b.summary)
            #expect(try b.store.baselineSummary() == a.store.baselineSummary())
            #expect(hex(a.digest) == hex(b.digest))
            #expect(hex(try b.reopenedDigest()) == hex(b.digest), "the materialized rows agree with memory")
            #expect(try b.store.changeCount() == 65, "b keeps only the changes the baseline does not hold")
            #expect(try b.store.stagedBaseline(from: "DEVICE-A") == nil, "the staging is gone once swapped in")

            // In sync now: the next session sends no baseline again.
            let (again, againB) = try runSession(a, b).results()
            #expect(again.baselinesSent == 0 && againB.baselinesSent == 0 && again.pulled == 0 && again.sent == 0)
        }
    }

    /// Two devices that compacted apart hold disjoint baselines: both end with the union and one digest.
    @Test func disjointBaselinesJoin() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0xBA5E_0002)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(a.replica, count: 200, rng: &rng)
            try randomEdits(b.replica, count: 150, rng: &rng)
            #expect(try a.replica.compact().folded == 200)
            #expect(try b.replica.compact().folded == 150)
            try randomEdits(a.replica, count: 30, rng: &rng)
            try randomEdits(b.replica, count: 20, rng: &rng)
            let itemsA = a.replica.state.items.count
            let itemsB = b.replica.state.items.count

            let (ra, rb) = try runSession(a, b).results()
            #expect(ra.baselinesSent == 1 && rb.baselinesSent == 1)
            #expect(try a.summary == b.summary)
            #expect(try a.summary.count == 400)
            let baselineA = try #require(try a.store.encodedBaseline())
            let baselineB = try #require(try b.store.encodedBaseline())
            #expect(baselineA == baselineB, "the join is the same on both sides")
            #expect(baselineA.summary.count == 350)
            #expect(hex(a.digest) == hex(b.digest))
            #expect(a.replica.state.items.count == itemsA + itemsB, "every item of either side survives")
            #expect(try hex(a.reopenedDigest()) == hex(a.digest) && hex(b.reopenedDigest()) == hex(b.digest))
        }
    }

    /// A device holding the full history adopts a peer's baseline it does not cover, so two devices at one
    /// summary and one baseline hold one state.
    @Test func aFullHistoryAdoptsAPeersBaseline() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0xBA5E_0003)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(a.replica, count: 150, rng: &rng)
            try randomEdits(b.replica, count: 150, rng: &rng)
            _ = try runSession(a, b).results()
            try randomEdits(a.replica, count: 10, rng: &rng)
            _ = try runSession(a, b).results()
            let report = try a.replica.compact()
            #expect(report.folded > 0)
            #expect(try b.store.changeCount() == 310)

            let (ra, rb) = try runSession(a, b).results()
            #expect(ra.baselinesSent == 1 && rb.baselinesPulled == 1 && ra.pulled == 0 && rb.pulled == 0)
            #expect(try b.store.encodedBaseline() == a.store.encodedBaseline())
            #expect(try b.store.changeCount() == a.store.changeCount())
            #expect(hex(a.digest) == hex(b.digest))
            #expect(hex(try b.reopenedDigest()) == hex(b.digest))
        }
    }

    /// An interrupted baseline transfer leaves the store as it was (the staging apart) and resumes at the
    /// staged offset; the result is the same as an uninterrupted one.
    @Test func anInterruptedBaselineResumesByOffset() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0xBA5E_0004)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            try bulkEdits(a.replica, count: 6_000, rng: &rng)
            #expect(try a.replica.compact().folded == 6_000)
            let size = try #require(try a.store.encodedBaseline()).bytes.count
            var small = SessionOptions()
            small.maxBatchBytes = 16 << 10
            let before = try b.snapshot()

            // Cut a's side after about half the baseline went out.
            let cut = runSessionCut(a, b, optionsA: small, afterBytes: size / 2)
            #expect(cut.b.isFailure, "b saw the connection drop: \(cut.b)")
            let staged = try #require(try b.store.stagedBaseline(from: "DEVICE-A"), "a: \(cut.a)\nb: \(cut.b)")
            #expect(staged.staged > 0 && staged.staged < staged.total, "\(staged.staged) of \(staged.total) staged")
            #expect(try b.snapshot() == before, "nothing but the staging changed")

            var recorder: RecordingTransport?
            let pair = try runSession(a, b, options: small) { socket in
                if recorder == nil {
                    recorder = RecordingTransport(socket)
                    return recorder!
                }
                return socket
            }
            let (ra, rb) = try pair.results()
            #expect(ra.baselinesSent == 1 && rb.baselinesPulled == 1)
            let chunks = try recorder!.messages().compactMap { message -> BaselineChunk? in
                if case let .baselineChunk(chunk) = message { return chunk }
                return nil
            }
            #expect(chunks.first?.offset == staged.staged, "the transfer resumed where it stopped")
            #expect(chunks.reduce(0) { $0 + $1.data.count } == Int(staged.total - staged.staged))
            #expect(try a.summary == b.summary && hex(a.digest) == hex(b.digest))
            #expect(try b.store.stagedBaseline(from: "DEVICE-A") == nil)
        }
    }

    /// A compaction on the sender in the middle of a stream folds rows it had yet to send: it sends the new
    /// baseline and goes on, and the asker ends complete.
    @Test func compactionDuringAStreamSendsTheNewBaseline() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0xBA5E_0005)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            try bulkEdits(a.replica, count: 3_000, rng: &rng)
            var small = SessionOptions()
            small.maxBatchChanges = 100
            var optionsB = small
            // The compaction must come between two batches of the stream: B commits each before reading on.
            optionsB.overlapIntake = false
            let compacted = Flag()
            let replicaA = a.replica
            optionsB.onPulled = { _ in
                if !compacted.isSet {
                    compacted.set()
                    _ = try? replicaA.compact()
                }
            }
            let (ra, rb) = try runSession(a, b, options: small, optionsB: optionsB).results()
            #expect(compacted.isSet)
            #expect(ra.baselinesSent == 1 && rb.baselinesPulled == 1)
            #expect(rb.pulled < 3_000, "part of the history came inside the baseline")
            #expect(try a.summary == b.summary && hex(a.digest) == hex(b.digest))
            #expect(hex(try b.reopenedDigest()) == hex(b.digest))
        }
    }

    /// A baseline that does not decode is refused: nothing is adopted, the staging is dropped.
    @Test func aDamagedBaselineIsRefused() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0xBA5E_0006)
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(b.replica, count: 20, rng: &rng)
            let before = try b.snapshot()
            let garbage = (0..<300).map { _ in UInt8.random(in: 0...255, using: &rng) }
            var summary = Summary()
            summary[TimelineID(rng.next())] = 5
            _ = try b.store.stageBaselineChunk(
                from: "DEVICE-X", summary: summary, digest: nil, total: UInt64(garbage.count), offset: 0, data: garbage)
            #expect(throws: StoreError.self) { try b.replica.adoptStagedBaseline(from: "DEVICE-X") }
            #expect(try b.store.stagedBaseline(from: "DEVICE-X") == nil)
            #expect(try b.snapshot() == before)

            // A chunk that does not continue the staged one is refused too.
            _ = try b.store.stageBaselineChunk(
                from: "DEVICE-X", summary: summary, digest: nil, total: 600, offset: 0, data: Array(garbage[0..<100]))
            #expect(throws: StoreError.self) {
                try b.store.stageBaselineChunk(
                    from: "DEVICE-X", summary: summary, digest: nil, total: 600, offset: 150, data: [1, 2, 3])
            }
        }
    }

    /// A baseline larger than `Store.maxBaselineBytes` is refused at its first chunk, and what was staged from
    /// that peer before stays as it was (a hostile paired peer staged 403 MB in 4 s; nothing bounded it).
    @Test func aBaselineLargerThanTheLimitIsNotStaged() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0xBA5E_0007)
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(b.replica, count: 20, rng: &rng)
            var summary = Summary()
            summary[TimelineID(rng.next())] = 5
            let limit = Store.maxBaselineBytes
            #expect(try b.store.stageBaselineChunk(
                from: "DEVICE-X", summary: summary, digest: nil, total: limit, offset: 0, data: [1, 2, 3]) == 3)
            let staged = try b.store.stagedBaseline(from: "DEVICE-X")
            let before = try b.snapshot()
            for total in [limit + 1, UInt64(Int64.max)] {
                #expect(throws: StoreError.self) {
                    try b.store.stageBaselineChunk(
                        from: "DEVICE-X", summary: summary, digest: nil, total: total, offset: 0, data: [4])
                }
            }
            #expect(try b.store.stagedBaseline(from: "DEVICE-X") == staged)
            #expect(try b.snapshot() == before)
        }
    }
}

/// A flag set once from any thread.
final class Flag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    var isSet: Bool { lock.withLock { value } }
    func set() { lock.withLock { value = true } }
}

extension Result {
    var isFailure: Bool {
        if case .failure = self { return true }
        return false
    }
}

/// A transport that stops after `limit` bytes written: it shuts the socket down, as a killed sender would.
final class CuttingTransport: FrameTransport, @unchecked Sendable {
    let base: SocketTransport
    private var remaining: Int

    init(_ base: SocketTransport, limit: Int) {
        self.base = base
        remaining = limit
    }

    var fileDescriptor: Int32 { base.fileDescriptor }
    var hasBufferedInput: Bool { false }
    func readSome(into buffer: inout [UInt8]) throws -> ReadResult { try base.readSome(into: &buffer) }

    func writeSome(_ bytes: ArraySlice<UInt8>) throws -> WriteResult {
        guard remaining > 0 else {
            shutdown(base.fileDescriptor, Int32(SHUT_RDWR))
            throw TransportError(operation: "write", code: EPIPE)
        }
        let result = try base.writeSome(bytes.prefix(remaining))
        if case let .wrote(count) = result { remaining -= count }
        return result
    }
}

/// A session whose `a` side is cut after `afterBytes` written.
func runSessionCut(_ a: Device, _ b: Device, optionsA: SessionOptions, afterBytes: Int) -> SessionPair {
    var first = true  // runSession wraps a's socket first
    do {
        return try runSession(a, b, options: optionsA, optionsB: SessionOptions()) { socket in
            defer { first = false }
            return first ? CuttingTransport(socket, limit: afterBytes) : socket
        }
    } catch {
        Issue.record("setting up the session failed: \(error)")
        return SessionPair(a: .failure(.stopped), b: .failure(.stopped))
    }
}
