import Foundation
import PlaitCore

/// Pulled batches through the intake and into the store, overlapped (DESIGN §12): batch n+1 is decoded and
/// checked on the caller's thread against the heads batch n will leave, while batch n commits on the
/// pipeline's own thread (one commit in flight at most). If a commit fails, the batch checked behind it is
/// discarded, uncommitted, and the failure is thrown by that `submit`, the later ones and `finish`; the store
/// then holds exactly the batches committed before it, as without the overlap.
///
/// One pipeline serves one stream of batches (a session's pull); `finish` before reading the summary.
public final class IntakePipeline: @unchecked Sendable {
    private let replica: Replica
    private let queue = DispatchQueue(label: "plait.intake.commit")
    /// Guards everything below; signalled when a commit ends.
    private let state = NSCondition()
    /// Heads as the batches validated so far leave them (not all committed yet).
    private var projected: [TimelineID: HeldHead] = [:]
    /// Changes validated and not yet committed, for the fork check of a change sent again and for witnesses.
    private var pending: [ChangeRef: Replica.PendingChange] = [:]
    /// Changes of signed timelines waiting for the signature that covers them (DESIGN §11): checked again in
    /// front of the next batch. Only the caller's thread touches it.
    private var heldBack: [EncodedChange] = []
    /// At most this many bytes held back per stream; beyond it the timelines held back are refused (an honest
    /// sender's runs are bounded by the signing rule, 1,000 changes or 1 MiB each).
    static let maxHeldBackBytes = 64 << 20
    private var inFlight = 0
    /// The replica's count of uninterpretable changes was taken (caller's thread only).
    private var counted = false
    /// The commit in flight adds to a fork branch (see `submit`).
    private var renaming = false
    private var failure: (any Error)?
    private var committed: [Replica.IntegrateResult] = []
    /// Commits queued at most (one running, none waiting).
    static let maxInFlight = 1

    /// Called on the commit thread with each batch's result once it is committed (the agent relays from here).
    private let onCommitted: (@Sendable (Replica.IntegrateResult) -> Void)?

    init(replica: Replica, onCommitted: (@Sendable (Replica.IntegrateResult) -> Void)? = nil) {
        self.replica = replica
        self.onCommitted = onCommitted
    }

    /// Checks `batch` and queues its commit. Returns what the intake decided (changes taken, duplicates,
    /// refusals); throws the failure of an earlier commit, after which nothing more is committed.
    public func submit(_ batch: [EncodedChange], skip: Set<TimelineID> = []) throws -> Replica.IntegrateResult {
        if !counted {
            // Counted once before the first commit, the changes this build cannot interpret are then counted
            // by each commit: the status read after a catch-up does not scan every change it brought.
            counted = true
            _ = try? replica.uninterpretableCount()
        }
        let (heads, waiting) = try state.withLock {
            () throws -> ([TimelineID: HeldHead], [ChangeRef: Replica.PendingChange]) in
            if renaming {
                // The batch before added to a fork: its commit names branches again, so heads projected from it
                // may not be what it leaves. Checked against the store once it is committed.
                while inFlight > 0 { state.wait() }
                projected = [:]
                pending = [:]
                renaming = false
            }
            if let failure { throw failure }
            return (projected, pending)
        }
        let validated = try replica.validate(heldBack + batch, skip: skip, projected: heads, pending: waiting)
        heldBack = validated.heldBack
        var preliminary = validated.preliminary
        if heldBack.reduce(0, { $0 + $1.bytes.count }) > Self.maxHeldBackBytes {
            preliminary.refused += endOfStream()
        }
        guard !validated.verdict.accepted.isEmpty else { return preliminary }
        // Closures, not key paths, wherever each change is mapped: `map(\.change.ref)` went through the runtime's
        // key path projection, copying every accepted change (about 4 % of a catch-up's CPU, perf).
        let refs = validated.verdict.accepted.map { $0.change.ref }
        afterValidation?(validated.preliminary)
        try state.withLock {
            // One batch commits while the next is checked, no more: batches waiting to commit would pile up in
            // memory when the disk is slower than the wire.
            while inFlight >= Self.maxInFlight { state.wait() }
            // The batch before failed while this one was checked against the heads it would have left.
            if let failure { throw failure }
            for (timeline, head) in validated.verdict.heads { projected[timeline] = head }
            for accepted in validated.verdict.accepted {
                pending[accepted.change.ref] = .init(hash: accepted.hash, lamport: accepted.change.lamport)
            }
            inFlight += 1
            renaming = !validated.verdict.branches.isEmpty
                || validated.verdict.accepted.contains { $0.change.origin != nil }
        }
        queue.async { [self] in
            // (Queued only when nothing failed before it: `submit` checks under the lock it waits on.)
            var outcome: Replica.IntegrateResult?
            var error: (any Error)?
            do {
                beforeCommit?()
                outcome = try replica.commit(validated, applyingLater: true)
            } catch let thrown {
                error = thrown
            }
            if let outcome { onCommitted?(outcome) }
            state.withLock {
                if let error, failure == nil { failure = error }
                if let outcome { committed.append(outcome) }
                for ref in refs { pending[ref] = nil }
                if failure != nil { projected = [:] }
                inFlight -= 1
                state.broadcast()
            }
        }
        return preliminary
    }

    /// Ends the stream: changes still held back were never covered by a signature (the sender's stream ended
    /// at an unsigned change), so their timelines are refused from the first of them; nothing of them is kept.
    /// Those beyond `done` (the sender's Done) are dropped without a refusal: the sender withdrew them (it cut a
    /// timeline back to its last signature before a damaged stored change, DESIGN §10).
    public func endOfStream(within done: Summary? = nil) -> [RefusedTimeline] {
        var first: [TimelineID: UInt64] = [:]
        for held in heldBack where done.map({ held.change.seq <= $0[held.change.timeline] }) ?? true {
            first[held.change.timeline] = min(first[held.change.timeline] ?? .max, held.change.seq)
        }
        heldBack = []
        return first.sorted { $0.key < $1.key }.map {
            RefusedTimeline(timeline: $0.key, refusal: .unsigned(seq: $0.value))
        }
    }

    /// Waits for every queued commit; returns their results, or throws the first failure.
    @discardableResult
    public func finish() throws -> [Replica.IntegrateResult] {
        try state.withLock {
            while inFlight > 0 { state.wait() }
            if let failure { throw failure }
            defer { committed = [] }
            return committed
        }
    }

    /// Tests: runs before each commit on the commit thread (to hold it while the next batch is validated).
    var beforeCommit: (@Sendable () -> Void)?
    /// Tests: runs on the caller's thread once a batch is checked, before it waits for the commit before it.
    var afterValidation: (@Sendable (Replica.IntegrateResult) -> Void)?
}

extension Replica {
    /// A pipeline for one stream of pulled batches; `onCommitted` hears of each batch once it is committed.
    public func intakePipeline(onCommitted: (@Sendable (IntegrateResult) -> Void)? = nil) -> IntakePipeline {
        IntakePipeline(replica: self, onCommitted: onCommitted)
    }
}
