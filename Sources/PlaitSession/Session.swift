import Foundation
import PlaitCore
import PlaitStore
import PlaitTLS
import PlaitWire

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One sync session with a peer over a `FrameTransport`, driven by one thread with poll(2).
///
/// Both sides run the same protocol: Hello; Want with what each holds; each streams what the other lacks
/// in replay order, in bounded batches, then Done; one-shot sessions then Close. The driver keeps reading
/// while it writes and produces the next batch only once everything queued was written, so two devices
/// pulling large gaps from each other at the same moment never both block on a full socket, and memory
/// stays near one batch per direction.
///
/// `run()` drives the session on the calling thread until it ends. `notify()` and `stop()` may be called
/// from any thread.
public final class Session: @unchecked Sendable {
    private let transport: any FrameTransport
    private let replica: Replica
    private let options: SessionOptions
    private var machine: SessionMachine
    /// Pulled batches: checked on this thread, committed on the pipeline's (DESIGN §12).
    private let intake: IntakePipeline
    /// What other threads ask of the driver; it polls the inbox's descriptor beside the connection's.
    private enum Request: Sendable, Equatable { case notify, resync, stop, probe, tellCopies([[UInt8]]) }
    private let requests: Inbox<Request>
    /// Set by the driver once a stop was asked for (it stays asked for).
    private var stopRequested = false
    private let lock = NSLock()
    private var started = false

    private var outbox = Outbox()
    private var bytesSent = 0
    private var bytesReceived = 0
    private var inputOpen = true
    /// When bytes last moved either way. A peer busy integrating a long batch still reads, so only a
    /// connection on which nothing moves is silent.
    private var lastProgress = ContinuousClock.now
    /// Until the peer's Hello arrives, when the session gives up on it (`SessionOptions.helloTimeout`).
    private var helloDeadline = ContinuousClock.now
    /// When the machine came to owe the peer a state report (the first local change since it last owed none).
    private var reportOwedSince: ContinuousClock.Instant?
    /// When the last pulled batch that added changes was taken, until the state is saved after it.
    private var pulledSinceSave: ContinuousClock.Instant?
    /// `lastProgress` for other threads (under `lock`).
    private var lastActivity = ContinuousClock.now

    /// When bytes last moved on this session's connection (either way, Pings aside).
    public var lastMoved: ContinuousClock.Instant { lock.withLock { lastActivity } }
    /// When bytes last came from the peer (`lastHeard` for other threads, under `lock`).
    private var lastInput = ContinuousClock.now
    /// When bytes last came from the peer: after `probe()`, a later instant proves the peer alive.
    public var lastHeard: ContinuousClock.Instant { lock.withLock { lastInput } }
    private var pingOutstanding = false
    /// One-shot: when the sync last moved on (a message other than Ping or Pong arrived, or the peer took bytes of
    /// one); a peer that only keeps the connection alive does not hold a sync for ever (`SessionError.stalled`).
    private var lastSyncStep = ContinuousClock.now
    /// Bytes of messages other than Ping and Pong queued and not yet written (about: frames interleave).
    private var unsentSyncBytes = 0
    private var pingNonce: UInt64 = 0

    /// Queued bytes past which the driver stops reading: a peer that sends but never reads cannot make it
    /// buffer replies without bound. A well-behaved peer never gets near it (batches are produced only when
    /// the queue is empty; what else is queued are small replies).
    private var highWater: Int { options.maxBatchBytes + 4 << 20 }

    public init(
        transport: any FrameTransport, replica: Replica, identity: SessionIdentity,
        options: SessionOptions = SessionOptions()
    ) throws {
        do {
            requests = try Inbox()
        } catch {
            throw SessionError.transport(error.description)
        }
        self.transport = transport
        self.replica = replica
        self.options = options
        machine = SessionMachine(identity: identity, options: options)
        let onPulled = options.onPulled
        intake = replica.intakePipeline { result in
            // Once committed, not when checked: the agent relays a pulled change to its other peers from here.
            if result.added > 0 { onPulled?(result.added) }
        }
    }

    /// Sends Notify with this device's summary at once (agent mode; ignored in one-shot mode). Call it after
    /// a local change, or after another session pulled changes.
    public func notify() { requests.post(.notify) }

    /// Asks the peer again for everything this device lacks (agent mode): anti-entropy, whatever Notify said.
    public func resync() { requests.post(.resync) }

    /// Ends the session: Close("stopped") is sent after what is queued. An agent session then returns its
    /// result; a one-shot session that had not finished throws `SessionError.stopped`.
    public func stop() { requests.post(.stop) }

    /// Sends a Ping now (unless one is outstanding): a live peer answers at once, which `lastHeard` then shows.
    public func probe() { requests.post(.probe) }

    /// Tells the peer (agent mode) in a Notify that its home was copied: `instances` are the instance nonces of
    /// its Device ID this device saw connected at once (PROTOCOL.md §13.2).
    public func tellCopies(_ instances: [[UInt8]]) { requests.post(.tellCopies(instances)) }

    /// Drives the session until it ends. Call once, on the thread that owns the transport.
    public func run() throws(SessionError) -> SessionResult {
        let first = lock.withLock { () -> Bool in
            defer { started = true }
            return !started
        }
        precondition(first, "a Session runs once")
        do {
            try drive()
        } catch {
            if let claim = machine.takeUnsaidClaim() { options.onFinding?(claim) }
            // What `peers` and `doctor` say of this peer until a session with it ends well (the agent's and
            // `plait sync`'s `peerSeen` clears it).
            if error.isSyncFailure, let peer = machine.peer?.deviceID {
                try? replica.store.peerSessionFailed(deviceID: peer, reason: "\(error)", now: Replica.now())
            }
            if error.tellsPeer { flushBestEffort(closing: error.closeReason) }
            // Batches taken before the failure are committed; save their state now rather than leave it to the
            // next load to replay (a failure here changes nothing: the next write saves it).
            _ = try? intake.finish()
            try? replica.saveDerivedState()
            throw error
        }
        if let claim = machine.takeUnsaidClaim() { options.onFinding?(claim) }
        try drainIntake()
        do {
            try replica.saveDerivedState()
        } catch {
            throw .store(error as? StoreError ?? .sqlite("\(error)"))
        }
        let summary: Summary
        do {
            summary = try replica.store.summary()
        } catch let error as StoreError {
            throw .store(error)
        } catch {
            throw .store(.sqlite("\(error)"))
        }
        return SessionResult(
            peerDeviceID: machine.peer?.deviceID ?? "", peerName: machine.peer?.name ?? "", pulled: machine.pulled,
            sent: machine.sent, duplicates: machine.duplicates, baselinesPulled: machine.baselinesPulled,
            baselinesSent: machine.baselinesSent, forkedTimelines: machine.forkedTimelines,
            refusedTimelines: machine.refusedTimelines, damagedChanges: machine.damaged, staleClaim: machine.staleClaim,
            divergence: machine.divergence, verifiedEqual: machine.verifiedEqual, finalSummary: summary, bytesSent: bytesSent,
            bytesReceived: bytesReceived, peakQueuedBytes: outbox.peak, peerCloseReason: machine.peerCloseReason,
            forksResolved: machine.forksResolved.sorted(), oversizedChanges: machine.oversizedChanges,
            peerSummary: machine.peerHolds, untaken: machine.untaken, keptAside: machine.keptAsideFinding,
            deferred: machine.deferredTimelines)
    }

    // MARK: The loop

    private func drive() throws(SessionError) {
        var decoder = FrameDecoder(maxFrameSize: options.frameLimit)
        var readBuffer = [UInt8](repeating: 0, count: 64 << 10)
        try perform(machine.start())
        lastProgress = .now
        lastSyncStep = lastProgress
        helloDeadline = lastProgress + options.helloTimeout
        var woken = true
        while true {
            if machine.peer == nil, ContinuousClock.now >= helloDeadline { throw .noHello(within: options.helloTimeout) }
            // Taken only when the inbox's descriptor said so (or before the first poll): no syscall per turn.
            let asked = woken ? requests.take() : []
            woken = false
            if asked.contains(.stop) { stopRequested = true }
            let notify = asked.contains(.notify)
            let resync = asked.contains(.resync)
            if stopRequested {
                if let close = machine.stopping(reason: "stopped") { try enqueue(close) }
                flushBestEffort(closing: nil)
                if options.mode == .agent || machine.isComplete { return }
                throw .stopped
            }
            if notify {
                let owed = machine.reportOwed
                try perform(machine.localChanged())
                if !owed && machine.reportOwed { reportOwedSince = .now }
            }
            if let due = reportDeadline(), due <= .now { try perform(machine.owedReport()) }
            if let due = derivedSaveDeadline(), due <= .now { try saveDeferredState() }
            if resync { try perform(machine.resync()) }
            for case let .tellCopies(instances) in asked { try perform(machine.tellCopies(instances)) }
            if asked.contains(.probe) && !pingOutstanding && machine.peer != nil {
                pingOutstanding = true
                pingNonce &+= 1
                try enqueue(.ping(nonce: pingNonce))
            }
            // The next batch only once everything queued is written: memory stays near one batch.
            while outbox.isEmpty {
                let actions = try machine.nextOutgoing()
                if actions.isEmpty { break }
                try perform(actions)
            }
            if machine.isComplete && outbox.isEmpty { return }

            let (sentBefore, receivedBefore) = (bytesSent, bytesReceived)
            do {
                try writeAvailable()
            } catch {
                // The peer closed and went away while its Close was being answered: nothing is lost.
                if machine.peerCloseReason != nil && (machine.isComplete || machine.isSynced) { return }
                // The peer is gone (killed mid-transfer): still take the whole batches it sent before, so the
                // next sync resumes from further on. Whatever that reading runs into, the write error stands.
                while inputOpen && !machine.isComplete {
                    let before = bytesReceived
                    guard (try? readAvailable(&decoder, buffer: &readBuffer)) != nil, bytesReceived > before else { break }
                }
                throw error
            }
            if machine.isComplete && outbox.isEmpty { return }

            let wantRead = inputOpen && !machine.isComplete && outbox.pending < highWater
            let wantWrite = !outbox.isEmpty
            let buffered = wantRead && transport.hasBufferedInput
            // Everything was written and more is ready: only look for input, do not wait for it.
            let immediate = buffered || (outbox.isEmpty && machine.hasMoreToSend)
            var fds = [
                pollfd(
                    fd: transport.fileDescriptor,
                    events: transport.pollEvents(wantRead: wantRead, wantWrite: wantWrite), revents: 0),
                pollfd(fd: requests.readDescriptor, events: Int16(POLLIN), revents: 0),
            ]
            let count = poll(&fds, 2, immediate ? 0 : millisecondsToDeadline())
            if count < 0 {
                if errno == EINTR { continue }
                throw .transport("poll: \(String(cString: strerror(errno)))")
            }
            if fds[1].revents != 0 { woken = true }
            let events = fds[0].revents
            if events & Int16(POLLNVAL) != 0 {
                throw .transport("the connection's descriptor was closed under the session")
            }
            // Any event may be what a TLS read was waiting for (it can need the socket writable): just try.
            if wantRead && (events != 0 || buffered) {
                try readAvailable(&decoder, buffer: &readBuffer)
            }
            // Progress: anything from the peer, or the peer taking our bytes (but not only the Ping's own).
            if bytesReceived != receivedBefore || (bytesSent != sentBefore && !pingOutstanding) {
                lastProgress = .now
                let heard = bytesReceived != receivedBefore
                lock.withLock {
                    lastActivity = lastProgress
                    if heard { lastInput = lastProgress }
                }
                pingOutstanding = false
            } else if !immediate {
                try checkSilence()
            }
            if let due = stallDeadline, ContinuousClock.now >= due { throw .stalled(after: options.idleTimeout) }
        }
    }

    /// One-shot: when the session fails unless the sync moves on (`lastSyncStep`); nil in agent mode, where an idle
    /// session is the normal state.
    private var stallDeadline: ContinuousClock.Instant? {
        options.mode == .oneShot ? lastSyncStep + options.idleTimeout : nil
    }

    /// Sends a Ping after `pingInterval` without progress, fails after `idleTimeout`. Called only after a
    /// turn in which no byte moved, so time spent integrating a long batch never counts as silence.
    private func checkSilence() throws(SessionError) {
        let silent = ContinuousClock.now - lastProgress
        if silent >= options.idleTimeout { throw .timedOut(after: options.idleTimeout) }
        if silent >= options.pingInterval && !pingOutstanding && machine.peer != nil {
            pingOutstanding = true
            pingNonce &+= 1
            try enqueue(.ping(nonce: pingNonce))
        }
    }

    /// When the state report the machine owes goes: once nothing moved for `reportQuiet`, at most `reportMaxDelay`
    /// after it came to be owed. Nil when none is owed, or while anything is queued: the report waits for the
    /// outbox, and a deadline already past while a full socket holds the outbox would make every poll return at once.
    private func reportDeadline() -> ContinuousClock.Instant? {
        guard machine.reportOwed, outbox.isEmpty, let since = reportOwedSince else { return nil }
        return min(max(lastProgress, since) + options.reportQuiet, since + options.reportMaxDelay)
    }

    /// When the state of pulled batches is saved while the session stays open: once nothing moved for
    /// `derivedSaveQuiet` after the last batch was taken. Nil when no batch was taken since the last save, or
    /// while anything is queued (as for the report).
    private func derivedSaveDeadline() -> ContinuousClock.Instant? {
        guard let since = pulledSinceSave, outbox.isEmpty else { return nil }
        return max(lastProgress, since) + options.derivedSaveQuiet
    }

    /// Waits for the batches still committing, then saves the state their commits deferred (nothing when they
    /// saved it themselves). A failed save fails nothing: the rows stay at their marker, the next load replays
    /// forward from it, and the next write (or the session's end) tries again.
    private func saveDeferredState() throws(SessionError) {
        pulledSinceSave = nil
        try drainIntake()
        try? replica.saveDerivedState()
    }

    private func millisecondsToDeadline() -> Int32 {
        var deadline = lastProgress + (pingOutstanding ? options.idleTimeout : options.pingInterval)
        if let due = reportDeadline() { deadline = min(deadline, due) }
        if let due = derivedSaveDeadline() { deadline = min(deadline, due) }
        if machine.peer == nil { deadline = min(deadline, helloDeadline) }
        if let due = stallDeadline { deadline = min(deadline, due) }
        let wait = deadline - ContinuousClock.now
        let milliseconds = wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000 + 1
        return Int32(clamping: max(0, milliseconds))
    }

    private func readAvailable(_ decoder: inout FrameDecoder, buffer: inout [UInt8]) throws(SessionError) {
        // A bounded amount per turn, so the writes of this side keep going while a big stream comes in.
        var budget = 1 << 20
        while budget > 0 {
            let result: ReadResult
            do {
                result = try transport.readSome(into: &buffer)
            } catch let error as TLSError {
                throw .tls(error)
            } catch {
                throw .transport("\(error)")
            }
            switch result {
            case let .bytes(count):
                bytesReceived += count
                budget -= count
                decoder.append(buffer[0..<count])
                while true {
                    let message: Message
                    do {
                        guard let frame = try decoder.next() else { break }
                        message = try Message.decode(frame)
                    } catch {
                        throw .wire(error)
                    }
                    try perform(machine.received(message))
                    // Taken after the work it made here: a long batch or baseline adopted is not the peer's delay.
                    if !message.isKeepAlive { lastSyncStep = .now }
                    if machine.isComplete { return }
                }
            case .wouldBlock:
                return
            case .closed:
                inputOpen = false
                try machine.peerEndedStream(midFrame: !decoder.isAtFrameBoundary)
                return
            }
        }
    }

    // MARK: The machine's actions

    /// Performs what the machine asked for, in order, against the replica and the connection, and passes the
    /// outcome of each read or write that has one back to it.
    private func perform(_ actions: [SessionAction]) throws(SessionError) {
        for action in actions {
            if let answer = try performOne(action) { try perform(machine.answered(answer)) }
        }
    }

    private func performOne(_ action: SessionAction) throws(SessionError) -> SessionAnswer? {
        let store = replica.store
        switch action {
        case .integrate, .readPage, .stageChunk, .adoptBaseline:
            // Nothing more is taken from, or sent to, a peer unpaired meanwhile (the third hostile tester of
            // 2026-11-25: a `plait sync` went on both ways after `plait unpair` of its peer).
            if let stillTrusted = options.stillTrusted, !stillTrusted() { throw .unpaired }
        default:
            break
        }
        switch action {
        case .send, .integrate, .readPage, .finding, .pulled, .offered, .admit, .succession:
            break
        default:
            // Every other read or write sees the store with the pulled batches committed.
            try drainIntake()
        }
        switch action {
        case let .send(message):
            try enqueue(message)
        case .readStatus:
            // The pulled batches' state is saved first (what the session's end does anyway): the changes whose
            // applying was left to it are then applied in that one write, not again in a read on a connection
            // of their own (2 MiB more of SQLite's page cache at the peak of a catch-up's memory).
            try saveDeferredState()
            return .status(try local { try replica.status() })
        case .readSummary:
            return .summary(try local { try store.summary() })
        case let .endStream(done):
            return .streamEnded(intake.endOfStream(within: done))
        case let .readGreeting(peer):
            return try local {
                .greeting(staged: try store.stagedBaseline(from: peer), view: try store.localView(),
                    quarantined: try store.quarantined())
            }
        case let .lookUpHashes(refs):
            return .hashes(
                try local {
                    var hashes: [ChangeRef: [UInt8]] = [:]
                    for ref in refs { hashes[ref] = try store.hash(of: ref) }
                    return hashes
                })
        case .readBaseline:
            return .baseline(try local { try store.encodedBaseline() })
        case let .readPage(have, cap, cursor, limit, maxBytes):
            let page = try local {
                try store.streamPageEncoded(for: have, within: cap, after: cursor, limit: limit, maxBytes: maxBytes)
            }
            return .page(baselineSummary: page.baselineSummary, changes: page.changes, damaged: page.damaged)
        case let .integrate(batch, skip):
            // Checked now, committed on the pipeline's thread while the next batch is read and checked.
            let checked = try local { try intake.submit(batch, skip: skip) }
            if checked.added > 0 { pulledSinceSave = .now }
            if !options.overlapIntake { try drainIntake() }
            return .integrated(checked)
        case let .stageChunk(peer, summary, digest, total, offset, data):
            return try baselineStep {
                _ = try store.stageBaselineChunk(
                    from: peer, summary: summary, digest: digest, total: total, offset: offset, data: data)
                return .staged
            }
        case let .adoptBaseline(peer):
            let answer = try baselineStep { .adopted(try replica.adoptStagedBaseline(from: peer)) }
            if case let .adopted(adoption) = answer, adoption.keptAside != nil { options.onKeptAside?() }
            return answer
        case let .discardStaged(peer, bestEffort):
            if bestEffort {
                try? store.discardStagedBaseline(from: peer)
            } else {
                try local { try store.discardStagedBaseline(from: peer) }
            }
        case let .recordForks(peer, forks):
            let records = forks.map { (timeline: $0.timeline, seq: $0.seq, detail: $0.detail) }
            try local { try store.recordForks(peer: peer, records, now: Replica.now()) }
            options.onRecorded?(.forks(peer: peer, forks.map { .init(timeline: $0.timeline, seq: $0.seq) }))
        case let .recordFindings(peer, diverged, refused, claim):
            try local { try store.recordPeerFindings(peer: peer, diverged: diverged, refused: refused, claim: claim) }
            options.onRecorded?(.findings(peer: peer, diverged: diverged))
        case let .quarantine(damage, reason):
            try local { try replica.quarantine(damage, reason: reason) }
        case let .finding(sentence):
            options.onFinding?(sentence)
        case let .admit(hello):
            // The agent keeps one connection per instance of a device (DESIGN §11): this one, or another one.
            if let admit = options.admitPeer, !admit(hello) { throw .notKept }
        case let .recordCopiedHome(copied):
            try local {
                try store.recordCopiedHome(
                    deviceID: copied.deviceID, instances: copied.instances, reportedBy: copied.reportedBy,
                    now: Replica.now())
            }
        case let .learnForkRecords(records):
            let learnt = try local { try replica.learnForkRecords(records) }
            if !learnt.renamed.isEmpty {
                let names = learnt.renamed.map(\.description).joined(separator: ", ")
                options.onFinding?(
                    "this peer told of \(learnt.learnt) fork record(s) this device lacked: the changes of \(names) were "
                        + "named again as every device names them (nothing was dropped)"
                        + (learnt.ownTimelineForkedAway
                            ? "; this device's own history lost the name, so its next edit begins a new timeline" : ""))
            }
        case let .succession(statement):
            // Without a handler (a session nobody set up for it) the statement is refused, never silently taken.
            let refusal = options.onSuccession.map { $0(statement) }
                ?? "this device does not take succession statements"
            if let refusal { throw .successionRefused(refusal) }
        case .pulled:
            // Reported by the pipeline once the batch is committed (see `intake`), not when it is checked.
            break
        case let .offered(summary):
            options.onOffered?(summary)
        case let .fail(error):
            throw error
        }
        return nil
    }

    /// Staging or adopting a pulled baseline: the store's refusal goes to the machine, which drops the staging.
    private func baselineStep(_ body: () throws -> SessionAnswer) throws(SessionError) -> SessionAnswer {
        do {
            return try body()
        } catch let error as StoreError {
            return .baselineFailed(error)
        } catch {
            throw .store(.sqlite("\(error)"))
        }
    }

    /// Waits for the pulled batches still committing; a failed commit fails the session.
    private func drainIntake() throws(SessionError) {
        try local { _ = try intake.finish() }
    }

    /// Runs a store call, turning its errors into `SessionError.store`.
    private func local<T>(_ body: () throws -> T) throws(SessionError) -> T {
        do {
            return try body()
        } catch let error as StoreError {
            throw .store(error)
        } catch let error as CoreError {
            throw .store(.rejected(error))
        } catch {
            throw .store(.sqlite("\(error)"))
        }
    }

    private func enqueue(_ message: Message) throws(SessionError) {
        let frame = message.encode()
        let limit = machine.peer?.maxFrameSize ?? Frame.defaultMaxSize
        let length = frame.count - Frame.lengthPrefixSize
        guard length <= limit else { throw .frameTooLargeForPeer(size: length, limit: limit) }
        outbox.append(frame)
        if !message.isKeepAlive { unsentSyncBytes += frame.count }
    }

    private func writeAvailable() throws(SessionError) {
        while !outbox.isEmpty {
            let result: WriteResult
            do {
                result = try transport.writeSome(outbox.unsent)
            } catch let error as TLSError {
                throw .tls(error)
            } catch {
                throw .transport("\(error)")
            }
            guard case let .wrote(count) = result, count > 0 else { return }
            outbox.consumed(count)
            bytesSent += count
            if unsentSyncBytes > 0 {
                unsentSyncBytes = max(0, unsentSyncBytes - count)
                lastSyncStep = .now
            }
        }
    }

    /// Writes what is queued, then `closing` as a Close, for at most two seconds: the peer learns why the
    /// session ends if it still reads; if it does not, the session ends anyway.
    private func flushBestEffort(closing reason: String?) {
        if let reason, let close = machine.stopping(reason: reason) {
            outbox.append(close.encode())
        }
        let deadline = ContinuousClock.now + .seconds(2)
        while !outbox.isEmpty {
            do {
                try writeAvailable()
            } catch {
                return
            }
            if outbox.isEmpty { return }
            let left = deadline - ContinuousClock.now
            guard left > .zero else { return }
            var fds = [
                pollfd(
                    fd: transport.fileDescriptor, events: transport.pollEvents(wantRead: false, wantWrite: true),
                    revents: 0)
            ]
            let milliseconds = left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1
            if poll(&fds, 1, Int32(clamping: milliseconds)) < 0 && errno != EINTR { return }
        }
    }
}

/// The bytes waiting to be written, consumed from the front.
private struct Outbox {
    private var bytes: [UInt8] = []
    private var offset = 0
    private(set) var peak = 0
    private static let retainedCapacity = 2 << 20

    var pending: Int { bytes.count - offset }
    var isEmpty: Bool { pending == 0 }
    var unsent: ArraySlice<UInt8> { bytes[offset...] }

    mutating func append(_ frame: [UInt8]) {
        if offset > 0 && offset >= bytes.count / 2 {
            bytes.removeSubrange(0..<offset)
            offset = 0
        }
        bytes.append(contentsOf: frame)
        peak = max(peak, pending)
    }

    mutating func consumed(_ count: Int) {
        offset += count
        if offset == bytes.count {
            bytes.removeAll(keepingCapacity: bytes.capacity <= Self.retainedCapacity)
            offset = 0
        }
    }
}

