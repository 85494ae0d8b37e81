import PlaitCore
import PlaitStore
import PlaitWire

/// Whether a session ends once both sides hold what the other had, or stays open.
public enum SessionMode: Sendable, Equatable {
    /// `plait sync`: Hello, Want both ways, stream, Done both ways, Close.
    case oneShot
    /// The agent: stays open, pulls again on Notify, answers Ping, pushes Notify after local changes.
    case agent
}

/// Who this device says it is in Hello. The TLS layer checks the Device ID against the certificate.
public struct SessionIdentity: Sendable, Equatable {
    public var deviceID: String
    public var name: String

    public init(deviceID: String, name: String) {
        self.deviceID = deviceID
        self.name = name
    }
}

/// How a session behaves; the defaults suit a LAN.
public struct SessionOptions: Sendable {
    public var mode: SessionMode
    /// The largest frame accepted from the peer, announced in Hello.
    public var maxFrameSize = Frame.defaultMaxSize
    /// Changes per `Changes` frame at most. The receiver commits each batch in its own transaction, and a
    /// durable commit waits for the disk (about 50 ms on the test VM): 2,000-change batches spent most of a
    /// catch-up waiting on fsync, while 2 MiB ones (about 19,000 typical changes) keep memory near 2 MiB
    /// of wire bytes and doubled the catch-up rate (README, benchmarks).
    public var maxBatchChanges = 16_000
    /// Bytes of changes per `Changes` frame at most (past the first change); also kept under the peer's
    /// announced maximum frame size.
    public var maxBatchBytes = 2 << 20
    /// Silence from the peer after which a Ping is sent.
    public var pingInterval: Duration = .seconds(15)
    /// Silence from the peer after which the session fails.
    public var idleTimeout: Duration = .seconds(60)
    /// Called on the session's thread after each pulled batch that added changes, with how many it added
    /// (an agent notifies its other peers from here).
    public var onPulled: (@Sendable (Int) -> Void)?

    public init(mode: SessionMode = .oneShot) { self.mode = mode }

    /// `maxFrameSize` within what the wire allows.
    var frameLimit: Int { min(max(maxFrameSize, WireLimits.minimumMaxFrameSize), Frame.largestExpressibleSize) }
}

/// A timeline that two devices hold with different histories under the same sequence numbers. It is not
/// exchanged with that peer, in either direction; nothing of it is merged.
public struct ForkedTimeline: Hashable, Sendable, CustomStringConvertible {
    public var timeline: TimelineID
    /// How far this device holds it.
    public var localHead: UInt64
    /// How far the peer holds it.
    public var peerHead: UInt64
    /// Whether this device compared the hashes (it held the timeline at least as far as the peer), or the
    /// peer did and told it by excluding the timeline from its Want.
    public var detectedLocally: Bool

    public var description: String {
        "timeline \(timeline) has forked: this device holds it up to \(localHead) and the peer up to \(peerHead), "
            + "with different histories; it was not exchanged with this peer"
    }
}

/// The own timeline was left because a peer held it beyond this store's head (a restored or copied home).
public struct TimelineSwitch: Hashable, Sendable {
    public var old: TimelineID
    public var new: TimelineID
}

/// What a session did.
public struct SessionResult: Sendable {
    /// The peer's Device ID and name as its Hello gave them.
    public var peerDeviceID: String
    public var peerName: String
    /// Changes pulled from the peer and integrated.
    public var pulled: Int
    /// Changes sent to the peer.
    public var sent: Int
    /// Pulled changes this device already held.
    public var duplicates: Int
    /// Baselines pulled from the peer and adopted (joined with the local one), and sent to it.
    public var baselinesPulled: Int
    public var baselinesSent: Int
    /// Timelines not exchanged because the two devices hold different histories of them.
    public var forkedTimelines: [ForkedTimeline]
    /// Set when this home turned out to be stale and left its own timeline.
    public var timelineSwitch: TimelineSwitch?
    /// This device's summary when the session ended.
    public var finalSummary: Summary
    /// Bytes written to and read from the transport.
    public var bytesSent: Int
    public var bytesReceived: Int
    /// The most bytes waiting to be written at any time: it stays near one batch, however large the gap.
    public var peakQueuedBytes: Int
    /// The reason in the peer's Close, if it sent one.
    public var peerCloseReason: String?
}

/// The protocol of one session as a state machine: messages in, messages out. It reads and writes the
/// store through the replica, and knows nothing of sockets; `Session` drives it.
struct SessionMachine {
    /// In a Want, this `have` for a timeline means "send nothing of it": the sender found it forked.
    static let excluded = WireLimits.maxSeq

    let replica: Replica
    let identity: SessionIdentity
    let options: SessionOptions

    private(set) var peer: Hello?
    private var helloSent = false
    private var forks: [TimelineID: ForkedTimeline] = [:]
    private(set) var timelineSwitch: TimelineSwitch?

    private enum Pull { case notAsked, asking, answered }
    private var pull = Pull.notAsked
    /// A Notify showed more while a Want was outstanding: want again after its Done.
    private var wantAgain = false

    /// The answer to a Want being streamed: what the asker has and the summary fixed when the Want came.
    private struct Stream {
        var have: Summary
        var cap: Summary
        var cursor: OrderKey?
        /// The baseline whose changes the rows streamed so far rest on; when a compaction grows it mid-stream,
        /// the new one is sent before any further page.
        var baselineSummary: Summary
        /// A baseline being sent ahead of the changes, and the offset of its next chunk.
        var baseline: EncodedBaseline?
        var baselineOffset = 0
    }
    /// What this side knows the peer's baseline holds (its Hello, joined with every baseline sent to it).
    private var peerBaseline = Summary()
    /// The offset to ask the peer to resume a baseline staged from it at (first Want only).
    private var resumeOffset: UInt64?
    private var stream: Stream?
    private var queuedWant: Summary?
    private var answeredOnce = false

    private(set) var closeSent = false
    private(set) var peerCloseReason: String?
    private var peerEnded = false

    private(set) var pulled = 0
    private(set) var sent = 0
    private(set) var duplicates = 0
    /// Baselines adopted from the peer, and sent to it.
    private(set) var baselinesPulled = 0
    private(set) var baselinesSent = 0

    init(replica: Replica, identity: SessionIdentity, options: SessionOptions) {
        self.replica = replica
        self.identity = identity
        self.options = options
    }

    var forkedTimelines: [ForkedTimeline] { forks.values.sorted { $0.timeline < $1.timeline } }

    /// One-shot: both directions are done (the peer answered our Want, we answered its).
    var isSynced: Bool { pull == .answered && answeredOnce && stream == nil && queuedWant == nil }

    /// Nothing more to do: the driver flushes what is queued and ends.
    var isComplete: Bool {
        switch options.mode {
        case .oneShot: return closeSent && (peerCloseReason != nil || peerEnded)
        case .agent: return peerCloseReason != nil || peerEnded
        }
    }

    // MARK: Inputs

    /// The Hello that opens the session.
    mutating func start() throws(SessionError) -> [Message] {
        let hello = try local { () throws -> Hello in
            try replica.refresh()
            let view = try replica.store.localView()
            return Hello(
                domainName: ListsDomain.name, domainVersion: ListsDomain.version, deviceID: identity.deviceID,
                name: identity.name, summary: view.summary,
                headHashes: view.heads.mapValues { HeadHash(seq: $0.seq, hash: $0.hash) },
                baselineSummary: view.baselineSummary, baselineDigest: view.baselineDigest,
                stateDigest: replica.digest, unknownCount: UInt64(try replica.uninterpretableCount()),
                maxFrameSize: options.frameLimit)
        }
        helloSent = true
        return [.hello(hello)]
    }

    mutating func received(_ message: Message) throws(SessionError) -> [Message] {
        if case let .hello(hello) = message { return try greeted(by: hello) }
        guard peer != nil else { throw .protocolViolation("it sent \(message.type) before Hello") }
        switch message {
        case .hello:
            return []  // handled above
        case let .want(want):
            try wanted(want.have, baselineOffset: want.baselineOffset)
            return []
        case let .changes(batch):
            try integrate(batch)
            return []
        case let .done(summary):
            return try done(summary)
        case let .notify(summary):
            return try notified(summary)
        case let .ping(nonce):
            return [.pong(nonce: nonce)]
        case .pong:
            return []
        case let .close(reason):
            peerCloseReason = reason
            if options.mode == .oneShot && !isSynced { throw .peerClosed(reason: reason) }
            // Answer with a Close of our own, so a peer waiting for it need not wait for the connection to drop.
            guard !closeSent else { return [] }
            closeSent = true
            return [.close(reason: options.mode == .oneShot ? "done" : "closing")]
        case let .baselineChunk(chunk):
            try received(chunk)
            return []
        case .pairCommit, .pairNonce, .pairReveal, .pairConfirm:
            throw .protocolViolation("it sent the pairing message \(message.type) on a sync connection")
        }
    }

    /// The stream ended. Normal once the session is done (or after the peer's Close); otherwise an error.
    mutating func peerEndedStream(midFrame: Bool) throws(SessionError) {
        if midFrame { throw .connectionLost(midFrame: true) }
        peerEnded = true
        if peerCloseReason != nil { return }
        if options.mode == .oneShot && isSynced { return }
        throw .connectionLost(midFrame: false)
    }

    /// The next message to send once everything queued was written: a page of the stream being answered,
    /// its Done, or (one-shot) the Close that ends a finished session. Nil when there is nothing to send.
    mutating func nextOutgoing() throws(SessionError) -> Message? {
        if var current = stream {
            let budget = min(options.maxBatchBytes, (peer?.maxFrameSize ?? Frame.defaultMaxSize) - 64)
            if let baseline = current.baseline {
                let end = min(baseline.bytes.count, current.baselineOffset + max(budget - 256, 1024))
                let chunk = BaselineChunk(
                    totalSize: UInt64(baseline.bytes.count), offset: UInt64(current.baselineOffset),
                    data: Array(baseline.bytes[current.baselineOffset..<end]), last: end == baseline.bytes.count,
                    baselineSummary: baseline.summary)
                current.baselineOffset = end
                if chunk.last {
                    current.baseline = nil
                    baselinesSent += 1
                }
                stream = current
                return .baselineChunk(chunk)
            }
            let (baselineSummary, page) = try local {
                try replica.store.streamPage(
                    for: current.have, within: current.cap, after: current.cursor, limit: options.maxBatchChanges,
                    maxBytes: budget)
            }
            if baselineSummary != current.baselineSummary {
                current.baselineSummary = baselineSummary
                stream = current
                // A compaction folded rows this stream had yet to send: they now travel inside the baseline.
                // (A baseline adopted from this very peer meanwhile grew it too, and the peer needs nothing.)
                guard !peerBaseline.covers(baselineSummary) || !current.have.covers(baselineSummary) else {
                    return try nextOutgoing()
                }
                guard let baseline = try local({ try replica.store.encodedBaseline() }) else {
                    throw .store(.inconsistent("the baseline vanished during a sync"))
                }
                try checkBaselineAvoidsForks(baseline.summary)
                current.baselineSummary = baseline.summary
                current.have = current.have.union(baseline.summary)
                current.baseline = baseline
                current.baselineOffset = 0
                peerBaseline = peerBaseline.union(baseline.summary)
                stream = current
                return try nextOutgoing()
            }
            guard let last = page.last else {
                stream = nil
                answeredOnce = true
                if let next = queuedWant {
                    queuedWant = nil
                    try wanted(next, baselineOffset: nil)
                }
                return .done(current.cap)
            }
            current.cursor = last.orderKey
            stream = current
            sent += page.count
            return .changes(page)
        }
        if options.mode == .oneShot && isSynced && !closeSent {
            closeSent = true
            return .close(reason: "done")
        }
        return nil
    }

    /// Whether `nextOutgoing()` has something to give (the driver then polls without waiting).
    var hasMoreToSend: Bool {
        stream != nil || (options.mode == .oneShot && isSynced && !closeSent)
    }

    /// A local change: tell the peer (agent mode).
    mutating func localChanged() throws(SessionError) -> [Message] {
        guard options.mode == .agent, helloSent, !closeSent else { return [] }
        return [.notify(try local { try replica.store.summary() })]
    }

    /// Anti-entropy (agent mode): asks the peer again for whatever this device lacks, whatever Notify said or
    /// failed to say. Run on a timer and when discovery shows the peer's summary changed.
    mutating func resync() throws(SessionError) -> [Message] {
        guard options.mode == .agent, peer != nil, !closeSent else { return [] }
        if pull == .asking {
            wantAgain = true
            return []
        }
        return [try want()]
    }

    /// The Close this side sends when it stops.
    mutating func stopping(reason: String) -> Message? {
        guard !closeSent else { return nil }
        closeSent = true
        return .close(reason: reason)
    }

    // MARK: Protocol steps

    private mutating func greeted(by hello: Hello) throws(SessionError) -> [Message] {
        guard peer == nil else { throw .protocolViolation("it sent Hello twice") }
        guard hello.protocolVersion == Hello.currentProtocolVersion else {
            throw .incompatible(
                "it speaks protocol version \(hello.protocolVersion) and this device \(Hello.currentProtocolVersion)")
        }
        // Another domain version is fine: changes this build cannot interpret are stored and forwarded.
        guard hello.domainName == ListsDomain.name else {
            throw .incompatible("it holds '\(hello.domainName)' data and this device '\(ListsDomain.name)'")
        }
        guard hello.deviceID != identity.deviceID else { throw .incompatible("it is this very device") }
        peer = hello
        peerBaseline = hello.baselineSummary
        // A baseline staged from this peer in an interrupted session resumes if the peer still holds it.
        if let staged = try local({ try replica.store.stagedBaseline(from: hello.deviceID) }) {
            if let digest = staged.digest, digest == hello.baselineDigest, staged.summary == hello.baselineSummary,
                staged.staged < staged.total
            {
                resumeOffset = staged.staged
            } else {
                try local { try replica.store.discardStagedBaseline(from: hello.deviceID) }
            }
        }
        let view = try local { try replica.store.localView() }
        for (timeline, theirs) in hello.headHashes {
            let mine = view.summary[timeline]
            // The side that holds a timeline at least as far as the other compares; the other learns of a fork
            // from the Want (`excluded`).
            guard mine > 0, theirs.seq <= mine else { continue }
            let hash = try local { () throws -> [UInt8]? in
                theirs.seq == mine
                    ? view.heads[timeline]?.hash
                    : try replica.store.hash(of: ChangeRef(timeline: timeline, seq: theirs.seq))
            }
            if let hash, hash != theirs.hash {
                forks[timeline] = ForkedTimeline(
                    timeline: timeline, localHead: mine, peerHead: theirs.seq, detectedLocally: true)
            }
        }
        // A peer holding the own timeline beyond this head: the home is stale. Leave the timeline now,
        // before anything is authored on it; its changes arrive with the pull.
        let own = view.ownTimeline
        if hello.summary[own] > view.summary[own] {
            if let switched = try local({ try replica.leaveStaleTimeline(own, peerHolds: hello.summary[own]) }) {
                timelineSwitch = TimelineSwitch(old: switched.old, new: switched.new)
            }
        }
        return [try want()]
    }

    /// A Want with this device's summary, forked timelines excluded.
    private mutating func want() throws(SessionError) -> Message {
        var have = try local { try replica.store.summary() }
        for timeline in forks.keys { have[timeline] = Self.excluded }
        pull = .asking
        defer { resumeOffset = nil }
        return .want(Want(have: have, baselineOffset: resumeOffset))
    }

    private mutating func wanted(_ have: Summary, baselineOffset: UInt64?) throws(SessionError) {
        let mine = try local { try replica.store.summary() }
        for (timeline, seq) in have.heads where seq == Self.excluded && forks[timeline] == nil && mine[timeline] > 0 {
            forks[timeline] = ForkedTimeline(
                timeline: timeline, localHead: mine[timeline], peerHead: peer?.summary[timeline] ?? 0,
                detectedLocally: false)
        }
        if stream != nil {
            queuedWant = have  // answered after the current stream; a newer Want replaces an older one
            return
        }
        var asked = have
        for timeline in forks.keys { asked[timeline] = Self.excluded }
        // The baseline goes first when the asker lacks changes that exist here only inside it, or when its own
        // baseline does not cover it (baselines travel, DESIGN §2): the peer's baseline as its Hello gave it,
        // grown by every baseline sent to it since.
        let baseline = try local { try replica.store.encodedBaseline() }
        var pending: EncodedBaseline?
        var offset = 0
        if let baseline, !peerBaseline.covers(baseline.summary) || !asked.covers(baseline.summary) {
            try checkBaselineAvoidsForks(baseline.summary)
            pending = baseline
            if let baselineOffset, baselineOffset < UInt64(baseline.bytes.count) { offset = Int(baselineOffset) }
            asked = asked.union(baseline.summary)
            peerBaseline = peerBaseline.union(baseline.summary)
        }
        stream = Stream(
            have: asked, cap: mine, cursor: nil, baselineSummary: baseline?.summary ?? Summary(), baseline: pending,
            baselineOffset: offset)
    }

    /// A baseline holding a timeline that has forked with this peer would merge the fork: refuse to send it.
    private func checkBaselineAvoidsForks(_ summary: Summary) throws(SessionError) {
        if let fork = forks.values.first(where: { summary[$0.timeline] > 0 }) {
            throw .forkInsideBaseline(timeline: fork.timeline)
        }
    }

    private mutating func received(_ chunk: BaselineChunk) throws(SessionError) {
        guard pull == .asking, let peer else { throw .protocolViolation("it sent a baseline nobody asked for") }
        // The digest Hello announced identifies the bytes only if this is the baseline Hello described.
        let digest = chunk.baselineSummary == peer.baselineSummary ? peer.baselineDigest : nil
        do {
            _ = try replica.store.stageBaselineChunk(
                from: peer.deviceID, summary: chunk.baselineSummary, digest: digest, total: chunk.totalSize,
                offset: chunk.offset, data: chunk.data)
            guard chunk.last else { return }
            let adoption = try replica.adoptStagedBaseline(from: peer.deviceID)
            baselinesPulled += 1
            if let switched = adoption.switchedTimeline {
                timelineSwitch = TimelineSwitch(old: timelineSwitch?.old ?? switched.old, new: switched.new)
            }
            if adoption.changed { options.onPulled?(0) }
        } catch let error as StoreError {
            try? replica.store.discardStagedBaseline(from: peer.deviceID)
            if case .rejected = error { throw .baselineRefused(error) }
            throw .store(error)
        } catch {
            throw .store(.sqlite("\(error)"))
        }
    }

    private mutating func integrate(_ batch: [Change]) throws(SessionError) {
        guard pull == .asking else { throw .protocolViolation("it sent changes nobody asked for") }
        if let change = batch.first(where: { forks[$0.timeline] != nil }) {
            throw .protocolViolation("it sent change \(change.ref) of a timeline that has forked")
        }
        let result: Replica.IntegrateResult
        do {
            result = try replica.integrate(batch)
        } catch let error as StoreError {
            if case .rejected = error { throw .batchRefused(error) }
            throw .store(error)
        } catch let error as CoreError {
            throw .batchRefused(.rejected(error))
        } catch {
            throw .store(.sqlite("\(error)"))
        }
        let added = batch.count - result.duplicates
        pulled += added
        duplicates += result.duplicates
        if let switched = result.switchedTimeline {
            timelineSwitch = TimelineSwitch(old: timelineSwitch?.old ?? switched.old, new: switched.new)
        }
        if added > 0 { options.onPulled?(added) }
    }

    private mutating func done(_ summary: Summary) throws(SessionError) -> [Message] {
        guard pull == .asking else { throw .protocolViolation("it sent Done without a Want") }
        let mine = try local { try replica.store.summary() }
        var expected = summary
        for timeline in forks.keys { expected[timeline] = 0 }
        let missing = mine.missing(from: expected)
        guard missing.isEmpty else { throw .incompleteStream(missing: missing) }
        pull = .answered
        if wantAgain {
            wantAgain = false
            return [try want()]
        }
        return []
    }

    private mutating func notified(_ summary: Summary) throws(SessionError) -> [Message] {
        guard options.mode == .agent else { return [] }
        let mine = try local { try replica.store.summary() }
        var theirs = summary
        for timeline in forks.keys { theirs[timeline] = 0 }
        guard !mine.covers(theirs) else { return [] }
        if pull == .asking {
            wantAgain = true
            return []
        }
        return [try want()]
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
}
