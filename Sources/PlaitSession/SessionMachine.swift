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
    /// This process's instance nonce in Hello (`InstanceNonce.process`, or the agent's for a command run beside
    /// it): two live connections from one Device ID with different nonces reveal a copied home.
    public var instanceNonce: [UInt8]

    public init(deviceID: String, name: String, instanceNonce: [UInt8] = InstanceNonce.process) {
        self.deviceID = deviceID
        self.name = name
        self.instanceNonce = instanceNonce
    }
}

/// The per-process instance nonce of Hello (PROTOCOL.md §13.2): 16 random bytes drawn once per process.
public enum InstanceNonce {
    /// This process's nonce, the same for every connection it makes or accepts.
    public static let process: [UInt8] = {
        var generator = SystemRandomNumberGenerator()
        return (0..<WireLimits.instanceNonceSize).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }()

    /// The first 8 hexadecimal digits of a nonce, as logs and reports show an instance.
    public static func short(_ nonce: [UInt8]) -> String {
        nonce.isEmpty ? "none" : String(nonce.hexString.prefix(8))
    }
}

/// One Device ID seen running from more than one home at once (DESIGN §11 "Copied homes"): connections from
/// different instance nonces, live together.
public struct CopiedHome: Hashable, Sendable, CustomStringConvertible {
    public var deviceID: String
    /// The instance nonces seen, sorted.
    public var instances: [[UInt8]]
    /// The peer whose Notify said so (its Device ID), when this device did not see the instances itself: a relayed
    /// report about this device's own ID, which it cannot check (PROTOCOL.md §13.2 item 6). Nil: seen here.
    public var reportedBy: String?

    public init(deviceID: String, instances: [[UInt8]], reportedBy: String? = nil) {
        self.deviceID = deviceID
        self.instances = Array(Set(instances)).sorted { $0.lexicographicallyPrecedes($1) }
        self.reportedBy = reportedBy
    }

    public var description: String {
        let shown = instances.map(InstanceNonce.short).joined(separator: ", ")
        let homes = "homes (instances \(shown))"
        let count = instances.count == 2 ? "two" : "\(instances.count)"
        guard let reportedBy else {
            return "home copied: device \(deviceID) is running from \(count) \(homes); run `plait rejoin --new-key` on "
                + "one of them"
        }
        return "peer \(reportedBy) reports that device \(deviceID) (this device) is running from \(count) \(homes) at "
            + "once: if so, this home was copied; run `plait rejoin --new-key` on one of the copies"
    }
}

/// How a session behaves; the defaults suit a LAN.
public struct SessionOptions: Sendable {
    public var mode: SessionMode
    /// Commit each pulled batch on the intake pipeline's thread while the next one is read and checked
    /// (DESIGN §12). Off: each batch is committed before the next frame is read (tests that act between two
    /// batches of a stream).
    public var overlapIntake = true
    /// The largest frame accepted from the peer, announced in Hello.
    public var maxFrameSize = Frame.defaultMaxSize
    /// Changes per `Changes` frame at most. The receiver commits each batch in its own transaction, and a
    /// durable commit waits for the disk (about 50 ms on an earlier test VM): 2,000-change batches spent most
    /// of a catch-up waiting on fsync. 1 MiB (about 7,500 typical changes) holds the rate of 2 MiB batches on
    /// the bench machine, and the receiver holds about two batches decoded at once (one checked while one
    /// commits): its peak memory in a catch-up fell by a fifth (README, benchmarks, issue 9's fourth pass).
    public var maxBatchChanges = 8_000
    /// Bytes of changes per `Changes` frame at most (past the first change); also kept under the peer's
    /// announced maximum frame size.
    public var maxBatchBytes = 1 << 20
    /// Silence from the peer after which a Ping is sent.
    public var pingInterval: Duration = .seconds(15)
    /// Silence from the peer after which the session fails.
    public var idleTimeout: Duration = .seconds(60)
    /// How long after the session starts the peer's Hello must have arrived, however many bytes it sends
    /// meanwhile (a Hello takes milliseconds on a LAN; one slow byte at a time would otherwise never be silence).
    public var helloTimeout: Duration = .seconds(10)
    /// Agent mode: how long the connection must be quiet before the state report owed since a local change is
    /// sent, and how long it may be owed at most. A report's digest walks the whole state: sent with every
    /// Notify, it made each edit on a 100,000-item home cost two walks on each side (README, benchmarks).
    public var reportQuiet: Duration = .milliseconds(250)
    public var reportMaxDelay: Duration = .seconds(5)
    /// How long the connection must be quiet before the state of pulled batches whose saving was deferred (a
    /// catch-up's, DESIGN §12) is saved, while the session stays open. Until then every other process that loads
    /// the store replays those changes forward, and the next local edit saves them in its own transaction.
    public var derivedSaveQuiet: Duration = .milliseconds(250)
    /// Called on the session's thread after each pulled batch that added changes, with how many it added
    /// (an agent notifies its other peers from here).
    public var onPulled: (@Sendable (Int) -> Void)?
    /// Called on the session's thread with the summary the peer holds each time a Notify tells it anew (its
    /// Hello's reaches `admitPeer`): what "missing N" counts against (an agent's progress events).
    public var onOffered: (@Sendable (Summary) -> Void)?
    /// The peer's Device ID as its certificate proved it in the TLS handshake: its Hello must name the same.
    public var certifiedPeerID: String?
    /// Called on the session's thread with one sentence for each thing found wrong (a fork, refused changes, a
    /// divergence, a claim on the own timeline, a damaged stored change): the agent logs them as errors.
    public var onFinding: (@Sendable (String) -> Void)?
    /// Called on the session's thread when an adopted baseline kept changes of this device's own timeline aside:
    /// the agent makes again what only they created (`Home.bringBackKeptAside`).
    public var onKeptAside: (@Sendable () -> Void)?
    /// Called on the session's thread once it recorded what it found with the peer (forks, divergence), typed:
    /// the agent publishes events from it (DESIGN §12).
    public var onRecorded: (@Sendable (SessionRecord) -> Void)?
    /// Called on the session's thread with the peer's Hello once it is valid (the agent keeps one connection per
    /// instance of a device): false ends the session with `SessionError.notKept`.
    public var admitPeer: (@Sendable (Hello) -> Bool)?
    /// Put in this device's Hello: it dials with a retired identity to tell the peer the Device ID that replaces it
    /// (`plait rejoin --new-key`, PROTOCOL.md §21).
    public var succession: SuccessionStatement?
    /// Called on the session's thread when the peer's Hello carries a succession statement, before anything else
    /// of the session: it checks the statement against the connection's certificate and records what it proves.
    /// It returns nil when the statement was taken, else why it was refused: the session then ends with a Close
    /// naming that reason, so the sender never counts this device as told.
    public var onSuccession: (@Sendable (SuccessionStatement) -> String?)?
    /// Asked before each batch taken from the peer, each page sent to it and each baseline chunk: false ends the
    /// session with `SessionError.unpaired` (the user unpaired the peer meanwhile, from another process). An agent
    /// stops its sessions itself when its store says so; a `plait sync` asks here.
    public var stillTrusted: (@Sendable () -> Bool)?

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
        guard detectedLocally else {
            // Only the peer could compare: it holds the timeline further, and this device holds no second hash.
            return "the peer reports that timeline \(timeline) has forked: it holds it up to \(peerHead) with another "
                + "history than this device's up to \(localHead) (this device holds less of it and cannot compare); "
                + "it was not exchanged with this peer"
        }
        return "timeline \(timeline) has forked: this device holds it up to \(localHead) and the peer up to "
            + "\(peerHead), with different histories; it was not exchanged with this peer"
    }
}

/// The peer's state digest differs from this device's at the same summary, baseline and domain version with
/// nothing either cannot interpret: one of the two replayed wrongly (a bug, or a damaged materialized state).
public struct Divergence: Hashable, Sendable, CustomStringConvertible {
    public var summary: Summary
    public var localDigest: [UInt8]
    public var peerDigest: [UInt8]

    public var description: String {
        let held = summary.isEmpty ? "none" : summary.description
        return "the state has diverged: both devices hold the same changes (\(held)) "
            + "and baseline, but this device's state digest is \(localDigest.hexString.prefix(16)) and the peer's "
            + "\(peerDigest.hexString.prefix(16)); run `plait repair` on each (it rebuilds the state from the changes)"
    }
}

/// The peer holds this device's own timeline beyond its head: this home may be a restored or copied one. A
/// bare claim is reported and never acted on (DESIGN §10); changes of it that arrive mark the timeline as one
/// that may continue elsewhere.
public struct StaleClaim: Hashable, Sendable, CustomStringConvertible {
    public var timeline: TimelineID
    public var localHead: UInt64
    public var peerHead: UInt64

    public var description: String {
        "the peer holds this device's own timeline \(timeline) up to change \(peerHead), beyond this device's head "
            + "\(localHead): this home may have been restored from a backup or copied; run `plait rejoin` on it to "
            + "go on with a new timeline"
    }
}

/// A timeline whose changes from the peer were not taken in a session: they name as witness a change the peer
/// renamed onto a fork branch while the session resolved that fork, which a further session brings first.
public struct DeferredTimeline: Hashable, Sendable, CustomStringConvertible {
    public var timeline: TimelineID
    public var witness: ChangeRef

    public var description: String {
        "changes of \(timeline) from the peer name witness \(witness), on timeline \(witness.timeline) whose fork was "
            + "resolved in this sync (its changes there were renamed onto a branch): they were not taken, and a "
            + "further sync takes them"
    }
}

/// A change larger than the largest frame the peer accepts (its Hello's `max_frame_size`): held back for that
/// peer with the rest of its timeline, while everything else syncs (PROTOCOL.md §13.3).
public struct OversizedChange: Hashable, Sendable, CustomStringConvertible {
    public var ref: ChangeRef
    /// The change's canonical bytes, and the largest frame the peer accepts.
    public var size: Int
    public var limit: Int
    /// How far its timeline was sent to the peer.
    public var sentUpTo: UInt64

    public var description: String {
        "change \(ref) (\(size) bytes) is larger than this peer accepts (frames of at most \(limit) bytes): it and "
            + "the rest of timeline \(ref.timeline) are held back for this peer (sent up to change \(sentUpTo)); "
            + "everything else syncs"
    }
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
    /// Timelines whose changes from the peer were refused (its fault), from the refused change on.
    public var refusedTimelines: [RefusedTimeline]
    /// Changes of this store found damaged while sending (their timeline stopped before them, set aside).
    public var damagedChanges: [ChangeRef]
    /// Set when the peer claimed this device's own timeline beyond its head.
    public var staleClaim: StaleClaim?
    /// Set when the two states differ at equal summaries and baselines.
    public var divergence: Divergence?
    /// Whether the two devices compared their states at equal summaries and found them equal.
    public var verifiedEqual: Bool
    /// This device's summary when the session ended.
    public var finalSummary: Summary
    /// Bytes written to and read from the transport.
    public var bytesSent: Int
    public var bytesReceived: Int
    /// The most bytes waiting to be written at any time: it stays near one batch, however large the gap.
    public var peakQueuedBytes: Int
    /// The reason in the peer's Close, if it sent one.
    public var peerCloseReason: String?
    /// Signed timelines found forked in this session and resolved by renaming (DESIGN §11): nothing kept apart.
    public var forksResolved: [TimelineID] = []
    /// Changes held back from the peer because no frame it accepts holds them (with the rest of their timelines).
    public var oversizedChanges: [OversizedChange] = []
    /// What the peer last said it holds: in an agent session its Hello's or last Notify's summary; in a one-shot
    /// session its closing report's (nil when none came: a peer built before closing reports were sent by agents).
    public var peerSummary: Summary?
    /// One-shot: timelines this device sent changes of that the peer's closing report shows it did not store
    /// (it refused them, PROTOCOL.md §14.2, or set them aside).
    public var untaken: [UntakenChanges] = []
    /// Set when an adopted baseline kept changes of this device's own timeline aside (a restored or copied home):
    /// what was said of them.
    public var keptAside: String?
    /// Timelines not taken because their changes name a witness the peer renamed onto a fork branch in this session.
    public var deferred: [DeferredTimeline] = []

    /// What the peers table records as the peer's holdings as the session ended: what it last said it holds, never
    /// this device's own summary in its place (a peer that refused changes this device sent does not hold them, and
    /// one that holds more is ahead, not "in sync"). Entries beyond what is held here limit no compaction (§12).
    /// Without a closing report from a one-shot peer, this device's own final summary, as before such reports.
    public var acknowledged: Summary { peerSummary ?? finalSummary }

    /// One-shot: timelines of which the peer's closing report holds more than this device does at the end, each as
    /// (this device's head, the peer's): changes made there while the sync ran, or not sent in it.
    public var peerAhead: [(timeline: TimelineID, held: UInt64, peerHolds: UInt64)] {
        guard let peerSummary else { return [] }
        return peerSummary.timelines.sorted().compactMap { timeline in
            peerSummary[timeline] > finalSummary[timeline]
                ? (timeline, finalSummary[timeline], peerSummary[timeline]) : nil
        }
    }
}

/// Changes of one timeline this device sent in a one-shot session and the peer did not store.
public struct UntakenChanges: Sendable, Equatable, CustomStringConvertible {
    public var timeline: TimelineID
    /// The peer's head of the timeline in its closing report.
    public var peerHolds: UInt64
    /// The last change of it this device's Done named as sent.
    public var sentUpTo: UInt64

    public init(timeline: TimelineID, peerHolds: UInt64, sentUpTo: UInt64) {
        self.timeline = timeline
        self.peerHolds = peerHolds
        self.sentUpTo = sentUpTo
    }

    public var description: String {
        "the peer did not store changes \(timeline):\(peerHolds + 1)…\(sentUpTo) that this device sent (its closing "
            + "report holds \(timeline) only up to \(peerHolds)): it refused them or set them aside, and its own "
            + "`plait sync` or agent log says why; they stay here and are offered again at the next sync"
    }
}

/// The changes of one `Changes` message, passed through to the store untouched: the machine never looks
/// inside a batch, so the intake can change what a pulled change carries in this one place.
typealias PulledBatch = [EncodedChange]

/// A fork as the store records it on the peer's row.
struct ForkRecordEntry: Sendable, Equatable {
    var timeline: TimelineID
    /// The lower of the two heads: the last number both devices hold.
    var seq: UInt64
    var detail: String
}

/// What the owner of a `SessionMachine` does next, in order. A read or a write that has an answer
/// (`integrate`, `stageChunk`, `adoptBaseline`) is always the last action of a list: the owner performs it
/// and passes its outcome to `answered(_:)` at once, before any other input, and performs what that returns.
enum SessionAction {
    /// Send this message to the peer.
    case send(Message)

    // Reads: each answered with the `SessionAnswer` of the same name.
    /// The summary, heads, baseline and state digest of one instant (`Replica.status()`): `.status`.
    case readStatus
    /// The summary (`Store.summary()`): `.summary`.
    case readSummary
    /// What greeting a peer needs (`Store.stagedBaseline(from:)`, `localView()`, `quarantined()`): `.greeting`.
    case readGreeting(peer: String)
    /// The hashes of these held changes (`Store.hash(of:)`; absent ones left out): `.hashes`.
    case lookUpHashes([ChangeRef])
    /// The own baseline as it travels (`Store.encodedBaseline()`): `.baseline`.
    case readBaseline
    /// The next page of a stream (`Store.streamPageEncoded`): `.page`.
    case readPage(have: Summary, cap: Summary, after: OrderKey?, limit: Int, maxBytes: Int)

    // Writes with an outcome.
    /// Integrate a pulled batch, dropping the timelines in `skip` (`Replica.integrate`): `.integrated`.
    case integrate(PulledBatch, skip: Set<TimelineID>)
    /// The peer's stream ended (Done): commit what is pending and give up the changes still held back for a
    /// signature that never came (`IntakePipeline.endOfStream`): `.streamEnded`.
    /// The summary is the peer's Done: held-back changes beyond it were withdrawn by the sender, not refused.
    case endStream(Summary)
    /// Stage a chunk of a baseline pulled from `peer` (`Store.stageBaselineChunk`): `.staged`, or
    /// `.baselineFailed` with the store's error.
    case stageChunk(peer: String, summary: Summary, digest: [UInt8]?, total: UInt64, offset: UInt64, data: [UInt8])
    /// Adopt the baseline staged from `peer` (`Replica.adoptStagedBaseline`): `.adopted`, or `.baselineFailed`.
    case adoptBaseline(peer: String)

    // Writes without an answer.
    /// Drop what was staged from `peer`. `bestEffort`: a failure to do so is ignored (the session fails anyway).
    case discardStaged(peer: String, bestEffort: Bool)
    /// Record the forks found with `peer`, replacing what an earlier session recorded.
    case recordForks(peer: String, [ForkRecordEntry])
    /// Record on `peer`'s row what this session found (nil clears what an earlier one found).
    case recordFindings(peer: String, diverged: String?, refused: String?, claim: String?)
    /// Set a damaged stored change and the rest of its timeline aside.
    case quarantine(DamagedChange, reason: String)

    // Reports to the session's owner.
    /// The peer's Hello carried a succession statement (`SessionOptions.onSuccession`).
    case succession(SuccessionStatement)
    /// One sentence about something found wrong (`SessionOptions.onFinding`).
    case finding(String)
    /// The peer's Hello is valid: may the session go on (`SessionOptions.admitPeer`)? If not, it ends.
    case admit(Hello)
    /// Record a copied home (`Store.recordCopiedHome`).
    case recordCopiedHome(CopiedHome)
    /// Store the fork records of the peer's Hello this side lacks and name held changes again
    /// (`Replica.learnForkRecords`, PROTOCOL.md §22.9), before the greeting is read.
    case learnForkRecords([ForkBranch.Record])
    /// A pulled batch added this many changes, or (0) an adopted baseline changed the state
    /// (`SessionOptions.onPulled`).
    case pulled(Int)
    /// The peer told the summary it holds in a Notify (`SessionOptions.onOffered`).
    case offered(Summary)
    /// End the session with this error, after the actions before it.
    case fail(SessionError)
}

/// The outcome of the last action a `SessionMachine` returned.
enum SessionAnswer {
    case status(ReplicaStatus)
    case summary(Summary)
    case greeting(staged: StagedBaseline?, view: LocalView, quarantined: [QuarantinedRange])
    case hashes([ChangeRef: [UInt8]])
    case baseline(EncodedBaseline?)
    case page(baselineSummary: Summary, changes: [EncodedChange], damaged: [ChangeRef])
    case integrated(Replica.IntegrateResult)
    /// The timelines refused because their changes held back were never covered by a signature.
    case streamEnded([RefusedTimeline])
    case staged
    case adopted(BaselineAdoption)
    /// Staging or adopting a pulled baseline failed with this error of the store.
    case baselineFailed(StoreError)
}

/// The protocol of one session as a value (DESIGN §12): messages and the store's answers in, actions out.
/// It holds no store and knows nothing of sockets or clocks; `Session` performs its actions against the
/// replica and the connection, so every protocol path is a test over plain values.
struct SessionMachine {
    /// In a Want, this `have` for a timeline means "send nothing of it": the sender found it forked.
    static let excluded = WireLimits.maxSeq

    let identity: SessionIdentity
    let options: SessionOptions

    private(set) var peer: Hello?
    /// The summary the peer last announced (its Hello, then each Notify).
    private var peerAnnounced: Summary?
    /// The summary of the peer's last Notify (one-shot: its closing report, sent once it holds what it pulled).
    private var peerNotified: Summary?
    /// Per timeline, the furthest change a Done of this side named beyond what the peer's Want said it held: what
    /// this device told the peer it sent (PROTOCOL.md §13.3).
    private var promised = Summary()
    /// Agent mode: a state report is owed to the peer since a local change (`owedReport()` sends it).
    private(set) var reportOwed = false
    private var helloSent = false
    /// Instance nonces the next Notify carries (a copied home seen at the peer's Device ID).
    private var copiesToTell: [[UInt8]] = []
    private var forks: [TimelineID: ForkedTimeline] = [:]
    /// Signed timelines found forked with the peer at the greeting, each with the number both sides hold as
    /// changes from (above both baselines): both histories are exchanged from there, and each side's intake puts
    /// the other's on a branch and names the branches (DESIGN §11). The peer need not know: it is asked for, and
    /// sent, the timeline from that number.
    private var resolving: [TimelineID: UInt64] = [:]
    private var refused: [TimelineID: RefusedTimeline] = [:]
    private(set) var damaged: [ChangeRef] = []
    /// Per timeline, the first change held back from this peer in this session because no frame it accepts holds it.
    private var heldBack: [TimelineID: OversizedChange] = [:]
    var oversizedChanges: [OversizedChange] { heldBack.values.sorted { $0.ref < $1.ref } }
    private(set) var staleClaim: StaleClaim?
    /// The claim is said (a finding) once the pull it starts is answered and it still stands: the pull's baseline or
    /// a fork resolved in it may show that authoring goes on with no `plait rejoin` (hostile tester 2026-11-25-i,
    /// I5: the agent logged the advice as an error at the greeting, then the session dropped the claim).
    private var claimUnsaid = false
    /// What the greeting knew of this device's own timeline, to judge a later Notify's claim on it alike: the
    /// timeline, its head then, the end of its changes set aside as damaged, and whether it lost its name in a fork.
    private var ownTimeline: (timeline: TimelineID, head: UInt64, setAside: UInt64, forkedAway: Bool)?
    private(set) var divergence: Divergence?
    private(set) var verifiedEqual = false
    /// One-shot: the state report sent once both directions are done, before Close.
    private var reportSent = false

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
        /// Per timeline, the last change sent in this stream with a signature: a damaged change cuts its timeline
        /// back to it, since the receiver stores a signed timeline only up to a verified signature (DESIGN §11).
        var lastSigned: [TimelineID: UInt64] = [:]
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

    /// A step of the protocol that comes after the answer being waited for.
    private enum Step {
        case want
        case compare(Summary, StateReport)
        case notified(Summary)
        case wanted(Summary, baselineOffset: UInt64?)
        case stateNotify
        /// Agent mode, after a local change: Notify with the summary; the state report follows when quiet.
        case localNotify
        /// The owed state report, if the peer can compare it.
        case owedReport
        case send(Message)
    }
    /// What the machine waits for: the answer to the last action it returned.
    private enum Awaiting {
        case helloStatus
        case greeting(Hello)
        case greetingHashes(Hello, LocalView, [QuarantinedRange])
        case wantSummary
        case compareSummary(Summary, StateReport)
        case compareStatus(Summary, StateReport)
        case notifiedSummary(Summary)
        case wantedSummary(Summary, baselineOffset: UInt64?)
        case wantedBaseline(asked: Summary, baselineOffset: UInt64?, mine: Summary)
        case page
        case streamBaseline
        case integrated
        case forkHeads(Replica.IntegrateResult)
        case streamEnd(Summary)
        case doneSummary(Summary)
        case stateNotify
        case localNotifySummary
        case owedReportSummary
        case staged(last: Bool)
        case adopted
    }
    private var awaiting: Awaiting?
    private var steps: [Step] = []

    init(identity: SessionIdentity, options: SessionOptions) {
        self.identity = identity
        self.options = options
    }

    var forkedTimelines: [ForkedTimeline] { forks.values.sorted { $0.timeline < $1.timeline } }
    /// Forks of signed timelines met in this session, exchanged and named by the intake.
    private(set) var forksResolved: Set<TimelineID> = []
    /// What was said when an adopted baseline kept own changes aside (`SessionResult.keptAside`).
    private(set) var keptAsideFinding: String?
    var refusedTimelines: [RefusedTimeline] { refused.values.sorted { $0.timeline < $1.timeline } }
    /// Timelines not taken from this peer: forked, or refused this session.
    private var skipped: Set<TimelineID> {
        Set(forks.keys).subtracting(resolving.keys).union(refused.keys).union(deferredTimelines.map(\.timeline))
    }
    /// Timelines whose changes name a witness the peer renamed onto a fork branch in this session, with the witness
    /// each named: left for the next session (not refused; the race of bad-luck tester 2026-11-25's H9).
    private(set) var deferredTimelines: [DeferredTimeline] = []
    /// What this device held, and folded in its baseline, when it read the greeting.
    private var heldAtGreeting = Summary()
    private var baselineAtGreeting = Summary()
    /// In a Want, this `have` means "send nothing of it": this side refused it earlier in the session.
    static let refusedMarker = WireLimits.maxSeq - 1

    /// What the peer last said it holds (`SessionResult.peerSummary`).
    var peerHolds: Summary? { options.mode == .oneShot ? peerNotified : peerAnnounced }

    /// One-shot: timelines of which the peer's closing report holds less than this side's Dones named as sent, its
    /// forks aside (both sides report those). Nothing until that report came: then it says what the peer stored.
    var untaken: [UntakenChanges] {
        guard options.mode == .oneShot, let notified = peerNotified else { return [] }
        return promised.timelines.sorted().compactMap { timeline in
            guard notified[timeline] < promised[timeline], forks[timeline] == nil, !forksResolved.contains(timeline)
            else { return nil }
            return UntakenChanges(timeline: timeline, peerHolds: notified[timeline], sentUpTo: promised[timeline])
        }
    }

    /// One-shot: both directions are done (the peer answered our Want, we answered its).
    var isSynced: Bool { pull == .answered && answeredOnce && stream == nil && queuedWant == nil }

    /// Nothing more to do: the driver flushes what is queued and ends.
    var isComplete: Bool {
        switch options.mode {
        case .oneShot: return closeSent && (peerCloseReason != nil || peerEnded)
        case .agent: return peerCloseReason != nil || peerEnded
        }
    }

    /// Whether the machine waits for the answer to its last action.
    var isWaiting: Bool { awaiting != nil }

    // MARK: Inputs

    /// The Hello that opens the session (once the status is read).
    mutating func start() -> [SessionAction] {
        expectIdle()
        awaiting = .helloStatus
        return [.readStatus]
    }

    mutating func received(_ message: Message) throws(SessionError) -> [SessionAction] {
        expectIdle()
        if case let .hello(hello) = message { return try greeted(by: hello) }
        guard peer != nil else { throw .protocolViolation("it sent \(message.type) before Hello") }
        switch message {
        case .hello:
            return []  // handled above
        case let .want(want):
            return try run([.wanted(want.have, baselineOffset: want.baselineOffset)])
        case let .changes(batch):
            guard pull == .asking else { throw .protocolViolation("it sent changes nobody asked for") }
            // Changes of a forked or refused timeline are dropped; refusals stop one timeline, not the session.
            awaiting = .integrated
            return [.integrate(batch, skip: skipped)]
        case let .done(summary):
            guard pull == .asking else { throw .protocolViolation("it sent Done without a Want") }
            awaiting = .streamEnd(summary)
            return [.endStream(summary)]
        case let .notify(summary, report, copies):
            var told: [SessionAction] = []
            // The peer says it sees this device's ID connected from several instances at once. Only its word: this
            // device cannot see the other copy's connection. An honest peer lists the instance of this very session
            // (it tells every copy it saw); a list without it, or with no instance but it, says nothing about this
            // home. What remains is reported as the peer's report, never as a fact (PROTOCOL.md §13.2 item 6).
            let mine = identity.instanceNonce
            if let peer, !mine.isEmpty, copies.contains(mine), copies.contains(where: { $0 != mine }) {
                let copied = CopiedHome(
                    deviceID: identity.deviceID, instances: copies, reportedBy: peer.deviceID)
                told = [.finding(copied.description), .recordCopiedHome(copied)]
            }
            if options.mode == .agent { told.append(.offered(summary)) }
            peerAnnounced = summary
            peerNotified = summary
            if let report { return try told + run([.compare(summary, report), .notified(summary)]) }
            return try told + run([.notified(summary)])
        case let .ping(nonce):
            return [.send(.pong(nonce: nonce))]
        case .pong:
            return []
        case let .close(reason):
            peerCloseReason = reason
            // After this side's own Close the peer's is its answer, even if it wanted more meanwhile (what this
            // side's last state report showed it, such as a branch named again here): that is for the next sync.
            if options.mode == .oneShot && !isSynced && !closeSent { throw .peerClosed(reason: reason) }
            // Answer with a Close of our own, so a peer waiting for it need not wait for the connection to drop.
            guard !closeSent else { return [] }
            closeSent = true
            let close = Message.close(reason: options.mode == .oneShot ? "done" : "closing")
            // The peer reads up to our Close: the state report must come before it. An agent answering a one-shot
            // sync sends its report too: it tells the sync what this side stored (a refused change is not in its
            // summary) and lets it compare states (PROTOCOL.md §13.5).
            if !reportSent && (options.mode == .oneShot || peer?.oneShot == true) {
                reportSent = true
                return try run([.stateNotify, .send(close)])
            }
            return [.send(close)]
        case let .baselineChunk(chunk):
            guard pull == .asking, let peer else { throw .protocolViolation("it sent a baseline nobody asked for") }
            // The digest Hello announced identifies the bytes only if this is the baseline Hello described.
            let digest = chunk.baselineSummary == peer.baselineSummary ? peer.baselineDigest : nil
            awaiting = .staged(last: chunk.last)
            return [
                .stageChunk(
                    peer: peer.deviceID, summary: chunk.baselineSummary, digest: digest, total: chunk.totalSize,
                    offset: chunk.offset, data: chunk.data)
            ]
        case .pairCommit, .pairNonce, .pairReveal, .pairConfirm:
            throw .protocolViolation("it sent the pairing message \(message.type) on a sync connection")
        }
    }

    /// The outcome of the last action returned (a read, or a write with an outcome).
    mutating func answered(_ answer: SessionAnswer) throws(SessionError) -> [SessionAction] {
        guard let waitingFor = awaiting else { preconditionFailure("an answer came with no action waiting for one") }
        awaiting = nil
        var actions: [SessionAction] = []
        switch (waitingFor, answer) {
        case let (.helloStatus, .status(status)):
            actions = [.send(helloMessage(status))]
        case let (.greeting(hello), .greeting(staged, view, quarantined)):
            actions = greetingRead(hello, staged: staged, view: view, quarantined: quarantined)
        case let (.greetingHashes(hello, view, quarantined), .hashes(hashes)):
            actions = greeted(hello, view: view, quarantined: quarantined, hashes: hashes)
        case let (.wantSummary, .summary(summary)):
            actions = [.send(want(summary))]
        case let (.compareSummary(summary, report), .summary(mine)):
            // Most reports come while the two are not at the same summary: that costs a summary read, not a digest.
            guard mine == summary else { break }
            awaiting = .compareStatus(summary, report)
            return [.readStatus]
        case let (.compareStatus(summary, report), .status(mine)):
            actions = compared(summary: summary, report: report, mine: mine)
        case let (.notifiedSummary(summary), .summary(mine)):
            // A Notify's claim on this device's own timeline is the Hello's (fourth hostile tester of 2026-11-25:
            // it was taken as what the peer holds, and `peers` said "ahead" with no warning). Said once a session.
            if staleClaim == nil, let claim = claimsOwnTimeline(summary, mine: mine) {
                staleClaim = claim
                claimUnsaid = true
                actions = recordFindings()
            }
            var theirs = summary
            for timeline in skipped { theirs[timeline] = 0 }
            guard options.mode == .agent, !mine.covers(theirs) else {
                // No pull follows (a one-shot session's closing report): the claim is said now.
                actions += claimToSay()
                break
            }
            if pull == .asking {
                wantAgain = true
                break
            }
            steps.insert(.want, at: 0)
        case let (.wantedSummary(have, baselineOffset), .summary(mine)):
            actions = wanted(have, baselineOffset: baselineOffset, mine: mine)
        case let (.wantedBaseline(asked, baselineOffset, mine), .baseline(baseline)):
            try startStream(asked: asked, baselineOffset: baselineOffset, mine: mine, baseline: baseline)
        case let (.page, .page(baselineSummary, changes, damagedRefs)):
            return try paged(baselineSummary: baselineSummary, page: changes, damaged: damagedRefs)
        case let (.streamBaseline, .baseline(baseline)):
            guard var current = stream, let baseline else {
                throw .store(.inconsistent("the baseline vanished during a sync"))
            }
            if let damage = baseline.damage {
                // Never sent (see `startStream`); a peer that holds what it folds goes on without it.
                guard current.have.covers(baseline.summary) else { throw .store(.damagedBaseline(damage)) }
                current.baselineSummary = baseline.summary
                stream = current
                return try nextOutgoing()
            }
            try checkBaselineAvoidsForks(baseline.summary)
            current.baselineSummary = baseline.summary
            current.have = current.have.union(baseline.summary)
            current.baseline = baseline
            current.baselineOffset = 0
            peerBaseline = peerBaseline.union(baseline.summary)
            stream = current
            return try nextOutgoing()
        case let (.integrated, .integrated(result)):
            // A fork's local head is read after the batch went in.
            if result.refused.contains(where: { $0.refusal.isFork }) {
                awaiting = .forkHeads(result)
                return [.readSummary]
            }
            actions = integrated(result, heads: nil)
        case let (.forkHeads(result), .summary(heads)):
            actions = integrated(result, heads: heads)
        case let (.streamEnd(summary), .streamEnded(refused)):
            awaiting = .doneSummary(summary)
            return integrated(Replica.IntegrateResult(refused: refused), heads: nil) + [.readSummary]
        case let (.doneSummary(summary), .summary(mine)):
            var expected = summary
            for timeline in skipped { expected[timeline] = 0 }
            // A fork resolved in this session renamed what the peer announced of that timeline: its changes past the
            // fork went to a branch of their own (here and, as it meets this side's, there), and the branch is taken
            // by the next session (bad-luck tester 2026-11-25, H9: a restored home's first sync said the peer "ended
            // its stream without changes it announced").
            for timeline in forksResolved { expected[timeline] = min(expected[timeline], mine[timeline]) }
            let missing = mine.missing(from: expected)
            guard missing.isEmpty else { throw .incompleteStream(missing: missing) }
            pull = .answered
            if wantAgain {
                wantAgain = false
                steps.insert(.want, at: 0)
            } else {
                actions += claimToSay()
            }
        case let (.stateNotify, .status(status)):
            actions = [.send(stateNotify(status))]
        case let (.localNotifySummary, .summary(mine)):
            // The summary at once (the peer pulls what it lacks); the report, whose digest walks the whole state,
            // once the connection is quiet (PROTOCOL.md §13.5).
            actions = [.send(.notify(mine, report: nil, copies: copiesToTell))]
            copiesToTell = []
            reportOwed = true
        case let (.owedReportSummary, .summary(mine)):
            // A report is compared only at equal summaries (§14.4): unless the peer last announced this very
            // summary it could not use one. It then owes its own, once it has pulled, and this side compares that.
            guard mine == peerAnnounced else { break }
            awaiting = .stateNotify
            return [.readStatus]
        case let (.staged(last), .staged):
            guard last, let peer else { break }
            awaiting = .adopted
            return [.adoptBaseline(peer: peer.deviceID)]
        case let (.adopted, .adopted(adoption)):
            baselinesPulled += 1
            actions = adoption.changed ? [.pulled(0)] : []
            if let kept = adoption.keptAside, let timeline = adoption.ownTimelineContinued {
                let finding = "the peer's baseline folds this device's timeline \(timeline) beyond its own changes "
                    + "\(kept.lowerBound)…\(kept.upperBound), and cannot show they are among the changes it folds (a "
                    + "copied or restored home): they are kept aside, not deleted (`plait doctor`)"
                    + (adoption.authoringGoesOn ? "; this device's next edit begins a new timeline" : "")
                keptAsideFinding = finding
                actions.append(.finding(finding))
            }
            if adoption.authoringGoesOn, ownTimeline != nil {
                // The next edit begins a new timeline by itself: a claim that the own timeline goes on elsewhere
                // needs no `plait rejoin` (bad-luck tester 2026-11-25, H11: the sync said to run it, and failed).
                ownTimeline?.forkedAway = true
                if staleClaim != nil {
                    staleClaim = nil
                    actions += recordFindings()
                }
            }
        case let (.staged, .baselineFailed(error)), let (.adopted, .baselineFailed(error)):
            steps = []
            let discard = SessionAction.discardStaged(peer: peer?.deviceID ?? "", bestEffort: true)
            if case let .rejected(.fork(timeline, _)) = error, let peer {
                // The baseline folds another history of a timeline than the one held here, at its entry: a fork
                // inside that baseline, which renaming cannot resolve (it holds no change bytes to rename). Recorded
                // with this peer as a fork, so `doctor` reports it and `rejoin`, on the device whose timeline it is,
                // sets that history aside (bad-luck tester 2026-11-25-j, J1: a restored home whose lost changes the
                // peer had folded in part; the fork was being resolved by renaming, nothing was recorded, the error
                // gave no advice, and no command helped).
                forks[timeline] = ForkedTimeline(
                    timeline: timeline, localHead: heldAtGreeting[timeline], peerHead: peer.summary[timeline],
                    detectedLocally: true)
                return [discard] + recordForks() + [.fail(.forkInsideBaseline(timeline: timeline))]
            }
            let failure: SessionError = if case .rejected = error { .baselineRefused(error) } else { .store(error) }
            return [discard, .fail(failure)]
        default:
            preconditionFailure("the answer \(answer) does not fit what the session waits for (\(waitingFor))")
        }
        return actions + (try run([]))
    }

    /// The stream ended. Normal once the session is done (or after the peer's Close); otherwise an error.
    mutating func peerEndedStream(midFrame: Bool) throws(SessionError) {
        if midFrame { throw .connectionLost(midFrame: true) }
        peerEnded = true
        if peerCloseReason != nil { return }
        if options.mode == .oneShot && isSynced { return }
        if peer == nil { throw .closedBeforeHello }
        throw .connectionLost(midFrame: false)
    }

    /// What to send once everything queued was written: a page of the stream being answered, its Done, or
    /// (one-shot) the state report and the Close that end a finished session. Empty when there is nothing.
    mutating func nextOutgoing() throws(SessionError) -> [SessionAction] {
        expectIdle()
        if var current = stream {
            let budget = pageBudget
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
                return [.send(.baselineChunk(chunk))]
            }
            awaiting = .page
            return [
                .readPage(
                    have: current.have, cap: current.cap, after: current.cursor, limit: options.maxBatchChanges,
                    maxBytes: budget)
            ]
        }
        if options.mode == .oneShot && isSynced && !reportSent {
            // Both directions are done: tell the peer this state, so each side can check the two agree.
            reportSent = true
            return try run([.stateNotify])
        }
        if options.mode == .oneShot && isSynced && !closeSent {
            closeSent = true
            return [.send(.close(reason: "done"))]
        }
        return []
    }

    /// Whether `nextOutgoing()` has something to give (the driver then polls without waiting).
    var hasMoreToSend: Bool {
        stream != nil || (options.mode == .oneShot && isSynced && (!closeSent || !reportSent))
    }

    /// A local change: tell the peer (agent mode).
    mutating func localChanged() throws(SessionError) -> [SessionAction] {
        expectIdle()
        guard options.mode == .agent, helloSent, !closeSent else { return [] }
        return try run([.localNotify])
    }

    /// Agent mode, once the connection is quiet: the state report owed since a local change, in a Notify, if the
    /// peer announced the summary this device holds (otherwise nothing: the peer owes one).
    mutating func owedReport() throws(SessionError) -> [SessionAction] {
        expectIdle()
        guard reportOwed else { return [] }
        reportOwed = false
        guard options.mode == .agent, helloSent, !closeSent else { return [] }
        return try run([.owedReport])
    }

    /// Tells the peer (agent mode) in a Notify that this device sees its Device ID connected from `instances`.
    mutating func tellCopies(_ instances: [[UInt8]]) throws(SessionError) -> [SessionAction] {
        expectIdle()
        guard options.mode == .agent, helloSent, !closeSent else { return [] }
        copiesToTell = instances
        return try run([.stateNotify])
    }

    /// Anti-entropy (agent mode): asks the peer again for whatever this device lacks, whatever Notify said or
    /// failed to say. Run on a timer and when discovery shows the peer's summary changed.
    mutating func resync() throws(SessionError) -> [SessionAction] {
        expectIdle()
        guard options.mode == .agent, peer != nil, !closeSent else { return [] }
        if pull == .asking {
            wantAgain = true
            return []
        }
        return try run([.want])
    }

    /// The Close this side sends when it stops.
    mutating func stopping(reason: String) -> Message? {
        guard !closeSent else { return nil }
        closeSent = true
        return .close(reason: reason)
    }

    // MARK: Steps

    private func expectIdle() {
        precondition(awaiting == nil, "the session machine got an input while it waited for an answer")
    }

    /// Runs `more` and then the queued steps until one waits for an answer.
    private mutating func run(_ more: [Step]) throws(SessionError) -> [SessionAction] {
        steps.append(contentsOf: more)
        var actions: [SessionAction] = []
        while awaiting == nil, !steps.isEmpty {
            switch steps.removeFirst() {
            case .want:
                awaiting = .wantSummary
                actions.append(.readSummary)
            case let .compare(summary, report):
                // The divergence alarm (DESIGN §10): at equal summaries, equal baselines, the same domain version
                // and nothing either side cannot interpret, the state digests must be equal.
                guard let peer, forks.isEmpty, refused.isEmpty, damaged.isEmpty, report.unknownCount == 0,
                    peer.domainVersion == ListsDomain.version
                else { continue }
                awaiting = .compareSummary(summary, report)
                actions.append(.readSummary)
            case let .notified(summary):
                // A one-shot session reads its summary only for a Notify that may claim this device's own timeline
                // (beyond its head at the greeting): its closing report is what it records as the peer's.
                let mayClaim = ownTimeline.map { summary[$0.timeline] > max($0.head, $0.setAside) } ?? false
                guard options.mode == .agent || mayClaim else { continue }
                awaiting = .notifiedSummary(summary)
                actions.append(.readSummary)
            case let .wanted(have, baselineOffset):
                awaiting = .wantedSummary(have, baselineOffset: baselineOffset)
                actions.append(.readSummary)
            case .stateNotify:
                awaiting = .stateNotify
                actions.append(.readStatus)
            case .localNotify:
                awaiting = .localNotifySummary
                actions.append(.readSummary)
            case .owedReport:
                awaiting = .owedReportSummary
                actions.append(.readSummary)
            case let .send(message):
                actions.append(.send(message))
            }
        }
        return actions
    }

    private var pageBudget: Int { min(options.maxBatchBytes, (peer?.maxFrameSize ?? Frame.defaultMaxSize) - 64) }

    private mutating func helloMessage(_ status: ReplicaStatus) -> Message {
        helloSent = true
        // The summary and the digest of one instant: another process may write between two reads, and a peer
        // comparing them would see a divergence that is not there.
        let view = status.view
        return .hello(
            Hello(
                domainName: ListsDomain.name, domainVersion: ListsDomain.version, deviceID: identity.deviceID,
                name: identity.name, summary: view.summary,
                headHashes: view.heads.mapValues { HeadHash(seq: $0.seq, hash: $0.hash) },
                baselineSummary: view.baselineSummary, baselineDigest: view.baselineDigest,
                stateDigest: status.stateDigest, unknownCount: UInt64(status.uninterpretable),
                maxFrameSize: options.frameLimit, instanceNonce: identity.instanceNonce,
                succession: options.succession,
                forkRecords: Array(view.forkRecords.prefix(WireLimits.maxForkRecords)),
                oneShot: options.mode == .oneShot))
    }

    /// Notify with this device's summary and a state report read in the same instant.
    private mutating func stateNotify(_ status: ReplicaStatus) -> Message {
        defer { copiesToTell = [] }
        return .notify(
            status.summary,
            report: StateReport(
                stateDigest: status.stateDigest, baselineDigest: status.baselineDigest,
                unknownCount: UInt64(status.uninterpretable)),
            copies: copiesToTell)
    }

    private mutating func compared(summary: Summary, report: StateReport, mine: ReplicaStatus) -> [SessionAction] {
        guard mine.summary == summary, mine.baselineDigest == report.baselineDigest, mine.uninterpretable == 0 else {
            return []
        }
        let before = divergence
        var actions: [SessionAction] = []
        if mine.stateDigest == report.stateDigest {
            divergence = nil
            verifiedEqual = true
        } else {
            divergence = Divergence(summary: summary, localDigest: mine.stateDigest, peerDigest: report.stateDigest)
            verifiedEqual = false
            if divergence != before, let divergence { actions.append(.finding(divergence.description)) }
        }
        if divergence != before { actions += recordFindings() }
        return actions
    }

    /// Records on the peer's row what this session found (and clears what an earlier one found and this did not).
    /// The claim `theirs` makes on this device's own timeline beyond its head `mine` (nil: none), by what the
    /// greeting knew of that timeline.
    private func claimsOwnTimeline(_ theirs: Summary, mine: Summary) -> StaleClaim? {
        guard let (own, _, setAside, forkedAway) = ownTimeline, !forkedAway, theirs[own] > max(mine[own], setAside)
        else { return nil }
        return StaleClaim(timeline: own, localHead: mine[own], peerHead: theirs[own])
    }

    /// The stale claim as a finding, once, if it still stands (`claimUnsaid`).
    private mutating func claimToSay() -> [SessionAction] {
        takeUnsaidClaim().map { [.finding($0)] } ?? []
    }

    /// The stale claim, if it still stands and was not said: a session that ends before the pull it started was
    /// answered (a failure, a stop) says it then.
    mutating func takeUnsaidClaim() -> String? {
        guard claimUnsaid, let staleClaim else { return nil }
        claimUnsaid = false
        return staleClaim.description
    }

    private func recordFindings() -> [SessionAction] {
        guard let peer else { return [] }
        let refusals = refusedTimelines.map(\.description).joined(separator: "; ")
        return [
            .recordFindings(
                peer: peer.deviceID, diverged: divergence?.description, refused: refusals.isEmpty ? nil : refusals,
                claim: staleClaim?.description)
        ]
    }

    /// Stores the forks found with this peer (replacing what an earlier session recorded).
    private func recordForks() -> [SessionAction] {
        guard let peer else { return [] }
        let records = forkedTimelines.map { fork in
            ForkRecordEntry(timeline: fork.timeline, seq: min(fork.localHead, fork.peerHead), detail: fork.description)
        }
        return [.recordForks(peer: peer.deviceID, records)]
    }

    private mutating func greeted(by hello: Hello) throws(SessionError) -> [SessionAction] {
        guard peer == nil else { throw .protocolViolation("it sent Hello twice") }
        guard hello.protocolVersion == Hello.currentProtocolVersion else {
            throw .incompatible(
                "it speaks protocol version \(hello.protocolVersion) and this device \(Hello.currentProtocolVersion)")
        }
        // Another domain version is fine: changes this build cannot interpret are stored and forwarded.
        guard hello.domainName == ListsDomain.name else {
            throw .incompatible("it holds '\(hello.domainName)' data and this device '\(ListsDomain.name)'")
        }
        // The certificate first (PROTOCOL.md §13.2): a Hello is the peer's word, its certificate the TLS handshake's
        // proof. A paired peer whose Hello names this device's own ID broke the protocol; it proves no copied home.
        if let certified = options.certifiedPeerID, hello.deviceID != certified {
            throw .identityMismatch(claimed: hello.deviceID, certified: certified)
        }
        if hello.deviceID == identity.deviceID {
            // This Device ID, proved by its certificate, from another process that is not this home's: the two
            // copies of a copied home met (they hold one key).
            let (mine, theirs) = (identity.instanceNonce, hello.instanceNonce)
            if !mine.isEmpty, !theirs.isEmpty, mine != theirs {
                throw .copiedHome(CopiedHome(deviceID: hello.deviceID, instances: [mine, theirs]))
            }
            throw .incompatible("it is this very device")
        }
        peer = hello
        peerAnnounced = hello.summary
        peerBaseline = hello.baselineSummary
        awaiting = .greeting(hello)
        let told: [SessionAction] = hello.succession.map { [.succession($0)] } ?? []
        // Fork records first (PROTOCOL.md §22.9): the greeting compares heads under the names they give.
        let records: [SessionAction] = hello.forkRecords.isEmpty ? [] : [.learnForkRecords(hello.forkRecords)]
        return told + [.admit(hello)] + records + [.readGreeting(peer: hello.deviceID)]
    }

    private mutating func greetingRead(
        _ hello: Hello, staged: StagedBaseline?, view: LocalView, quarantined: [QuarantinedRange]
    ) -> [SessionAction] {
        var actions: [SessionAction] = []
        // A baseline staged from this peer in an interrupted session resumes if the peer still holds it.
        if let staged {
            if let digest = staged.digest, digest == hello.baselineDigest, staged.summary == hello.baselineSummary,
                staged.staged < staged.total
            {
                resumeOffset = staged.staged
            } else {
                actions.append(.discardStaged(peer: hello.deviceID, bestEffort: false))
            }
        }
        // The side that holds a timeline at least as far as the other compares; the other learns of a fork from
        // the Want (`excluded`). Below the own head, the hash is looked up.
        let lookUps = hello.headHashes.compactMap { timeline, theirs -> ChangeRef? in
            let mine = view.summary[timeline]
            guard mine > 0, theirs.seq < mine else { return nil }
            return ChangeRef(timeline: timeline, seq: theirs.seq)
        }.sorted()
        if lookUps.isEmpty { return actions + greeted(hello, view: view, quarantined: quarantined, hashes: [:]) }
        awaiting = .greetingHashes(hello, view, quarantined)
        return actions + [.lookUpHashes(lookUps)]
    }

    private mutating func greeted(
        _ hello: Hello, view: LocalView, quarantined: [QuarantinedRange], hashes: [ChangeRef: [UInt8]]
    ) -> [SessionAction] {
        for (timeline, theirs) in hello.headHashes {
            let mine = view.summary[timeline]
            guard mine > 0, theirs.seq <= mine else { continue }
            let below = ChangeRef(timeline: timeline, seq: theirs.seq)
            let hash = theirs.seq == mine ? view.heads[timeline]?.hash : hashes[below]
            if let hash, hash != theirs.hash {
                let base = max(view.baselineSummary[timeline], hello.baselineSummary[timeline])
                if view.signedTimelines.contains(timeline) && base < theirs.seq {
                    resolving[timeline] = base
                } else {
                    forks[timeline] = ForkedTimeline(
                        timeline: timeline, localHead: mine, peerHead: theirs.seq, detectedLocally: true)
                }
            }
        }
        var actions: [SessionAction] = []
        // A peer holding the own timeline beyond this head: the home may be stale. A bare claim is reported,
        // never acted on (DESIGN §10); if its changes arrive and continue the chain, they mark the timeline.
        let own = view.ownTimeline
        // Changes of it set aside as damaged are the ones a peer is expected to hold: that is healing, not a claim.
        let setAside = quarantined.first { $0.timeline == own }?.seqs.upperBound ?? 0
        // A copy whose own history lost the name in a fork expects the winner's history to go on under it.
        ownTimeline = (own, view.summary[own], setAside, view.ownTimelineForkedAway)
        heldAtGreeting = view.summary
        baselineAtGreeting = view.baselineSummary
        if let claim = claimsOwnTimeline(hello.summary, mine: view.summary) {
            // Recorded now, said once the pull it starts is answered (`claimUnsaid`).
            staleClaim = claim
            claimUnsaid = true
        }
        actions += recordForks()
        actions += recordFindings()
        for fork in forkedTimelines { actions.append(.finding(fork.description)) }
        forksResolved.formUnion(resolving.keys)
        for (timeline, base) in resolving.sorted(by: { $0.key < $1.key }) {
            actions.append(
                .finding(
                    "timeline \(timeline) has forked with this peer (different changes under one number): both "
                        + "histories are exchanged from change \(base + 1) on, and the branch with the smallest "
                        + "hash keeps the name; the other is kept whole under a name of its own"))
        }
        steps.insert(.want, at: 0)
        if forks.isEmpty && resolving.isEmpty {
            steps.insert(
                .compare(
                    hello.summary,
                    StateReport(
                        stateDigest: hello.stateDigest, baselineDigest: hello.baselineDigest,
                        unknownCount: hello.unknownCount)),
                at: 1)
        }
        return actions
    }

    /// A Want with this device's summary, forked timelines excluded.
    private mutating func want(_ summary: Summary) -> Message {
        deferredTimelines = []
        var have = summary
        for timeline in refused.keys { have[timeline] = Self.refusedMarker }
        for timeline in forks.keys { have[timeline] = Self.excluded }
        for (timeline, base) in resolving { have[timeline] = min(have[timeline], base) }
        pull = .asking
        defer { resumeOffset = nil }
        return .want(Want(have: have, baselineOffset: resumeOffset))
    }

    private mutating func wanted(_ have: Summary, baselineOffset: UInt64?, mine: Summary) -> [SessionAction] {
        var actions: [SessionAction] = []
        var learned = false
        for (timeline, seq) in have.heads where seq == Self.excluded && forks[timeline] == nil && mine[timeline] > 0 {
            // The marker is the peer's word. It is a fork only where the peer holds the timeline beyond this device
            // (its Hello, or a Notify since): then it, and only it, could compare two hashes at one number (its own
            // and this device's head hash). A peer holding the timeline no further was compared here at the
            // greeting, and one holding none of it has nothing to compare: the marker then only asks for nothing
            // of the timeline (PROTOCOL.md §13.3), and no fork is recorded.
            let peerHead = max(peer?.summary[timeline] ?? 0, peerAnnounced?[timeline] ?? 0)
            guard peerHead > mine[timeline] else { continue }
            forks[timeline] = ForkedTimeline(
                timeline: timeline, localHead: mine[timeline], peerHead: peerHead, detectedLocally: false)
            learned = true
        }
        if learned {
            actions += recordForks()
            for fork in forkedTimelines where !fork.detectedLocally { actions.append(.finding(fork.description)) }
        }
        // A peer that holds a timeline at least as far as this device and asks for it from an earlier change is
        // resolving a fork of it (it compared this side's head hash with its own change at that number, §22): its
        // changes past the fork go to a branch as it takes this side's, so what its Hello announced of the timeline
        // is not what it ends up sending (bad-luck tester 2026-11-25, H9: "the peer ended its stream without changes
        // it announced", after a restored home's edit).
        // It asks from where such a peer asks (the greater of the two baselines' ends, §22), which is the peer's
        // word like all of it: what it withholds so goes unnoticed no more than changes it never announced.
        let resolvedThere = mine.timelines.filter { timeline in
            have[timeline] < mine[timeline] && forks[timeline] == nil && resolving[timeline] == nil
                && have[timeline] == max(baselineAtGreeting[timeline], peer?.baselineSummary[timeline] ?? 0)
                && max(peer?.summary[timeline] ?? 0, peerAnnounced?[timeline] ?? 0) >= mine[timeline]
        }
        actions += resolvedForks(resolvedThere)
        if stream != nil {
            queuedWant = have  // answered after the current stream; a newer Want replaces an older one
            return actions
        }
        var asked = have
        for timeline in forks.keys { asked[timeline] = Self.excluded }
        // A fork being resolved: the peer gets this side's history from where both hold changes.
        for (timeline, base) in resolving where asked[timeline] < Self.refusedMarker {
            asked[timeline] = min(asked[timeline], base)
        }
        awaiting = .wantedBaseline(asked: asked, baselineOffset: baselineOffset, mine: mine)
        return actions + [.readBaseline]
    }

    /// The baseline goes first when the asker lacks changes that exist here only inside it, or when its own
    /// baseline does not cover it (baselines travel, DESIGN §2): the peer's baseline as its Hello gave it, grown
    /// by every baseline sent to it since.
    private mutating func startStream(
        asked: Summary, baselineOffset: UInt64?, mine: Summary, baseline: EncodedBaseline?
    ) throws(SessionError) {
        var asked = asked
        var pending: EncodedBaseline?
        var offset = 0
        // A damaged baseline (bit rot in its bytes) is never sent: the peer would adopt the damage as source. A peer
        // that holds every change it folds loses nothing by not getting it; one that lacks some cannot be served.
        if let damage = baseline?.damage, let summary = baseline?.summary, !asked.covers(summary) {
            throw .store(.damagedBaseline(damage))
        }
        if let baseline, baseline.damage == nil, !peerBaseline.covers(baseline.summary) || !asked.covers(baseline.summary) {
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

    private mutating func paged(
        baselineSummary: Summary, page: [EncodedChange], damaged damagedRefs: [ChangeRef]
    ) throws(SessionError) -> [SessionAction] {
        guard var current = stream else { preconditionFailure("a page came with no stream") }
        var page = page
        var actions: [SessionAction] = []
        if !damagedRefs.isEmpty {
            // A stored change that does not hash to what its chain says: send its timeline up to the change before
            // it, set it and the rest aside, and go on with every other timeline (DESIGN §10).
            for encoded in page where encoded.signature != nil {
                let change = encoded.change
                if let ref = damagedRefs.first(where: { $0.timeline == change.timeline }), change.seq >= ref.seq {
                    continue
                }
                current.lastSigned[change.timeline] = change.seq
            }
            for ref in damagedRefs {
                // On a timeline this stream sent signatures of, the changes after the last of them are not covered:
                // the cap stops there, and the receiver drops the ones it holds back beyond it (not the peer's
                // fault). Otherwise (unsigned history, or no signature sent yet) up to the change before it.
                let stop = current.lastSigned[ref.timeline] ?? (ref.seq == 0 ? 0 : ref.seq - 1)
                current.cap[ref.timeline] = min(current.cap[ref.timeline], stop)
                damaged.append(ref)
                actions.append(
                    .finding(
                        "stored change \(ref) is damaged (its hash does not continue its chain): sent its timeline up "
                            + "to its last signature before it and set the rest aside, to be pulled again "
                            + "from a peer"))
                actions.append(
                    .quarantine(
                        DamagedChange(ref: ref, following: 0),
                        reason: "its hash does not continue the chain of its timeline (found while sending)"))
            }
            page.removeAll { encoded in
                damagedRefs.contains { $0.timeline == encoded.change.timeline && encoded.change.seq >= $0.seq }
                    || encoded.change.seq > current.cap[encoded.change.timeline]
            }
            stream = current
        }
        if baselineSummary != current.baselineSummary {
            current.baselineSummary = baselineSummary
            stream = current
            // A compaction folded rows this stream had yet to send: they now travel inside the baseline.
            // (A baseline adopted from this very peer meanwhile grew it too, and the peer needs nothing.)
            guard !peerBaseline.covers(baselineSummary) || !current.have.covers(baselineSummary) else {
                return actions + (try nextOutgoing())
            }
            awaiting = .streamBaseline
            return actions + [.readBaseline]
        }
        let read = page.last
        page = holdBackOversized(page, in: &current, actions: &actions)
        if page.isEmpty, let read {
            // Everything read was held back: read on past it (an empty page is the end of the stream).
            current.cursor = read.change.orderKey
            stream = current
            return actions + (try nextOutgoing())
        }
        guard let last = page.last else {
            stream = nil
            answeredOnce = true
            for timeline in current.cap.timelines where current.cap[timeline] > current.have[timeline] {
                promised[timeline] = max(promised[timeline], current.cap[timeline])
            }
            if let next = queuedWant {
                queuedWant = nil
                return actions + (try run([.wanted(next, baselineOffset: nil), .send(.done(current.cap))]))
            }
            return actions + [.send(.done(current.cap))]
        }
        current.cursor = last.change.orderKey
        for encoded in page where encoded.signature != nil {
            current.lastSigned[encoded.change.timeline] = encoded.change.seq
        }
        stream = current
        sent += page.count
        // Each change with its stored signature (DESIGN §11): the receiver holds a run back until one covers it.
        return actions + [.send(.changes(page))]
    }

    /// Holds back, for this peer, each change of `page` that no frame the peer accepts can hold (its Hello's
    /// `max_frame_size` may be as small as 64 KiB, and a change up to `store.max_change_bytes`), with the rest of its
    /// timeline: the stream's cap of that timeline stops at the last signature sent before it, or the change before
    /// it (as for a damaged change), so the peer holds a signed head and its Done check asks for nothing held back.
    /// Every other timeline goes on (PROTOCOL.md §13.3). Said once per timeline and session.
    private mutating func holdBackOversized(
        _ page: [EncodedChange], in current: inout Stream, actions: inout [SessionAction]
    ) -> [EncodedChange] {
        let limit = peer?.maxFrameSize ?? Frame.defaultMaxSize
        var cut: [TimelineID: EncodedChange] = [:]
        for encoded in page where cut[encoded.change.timeline] == nil && encoded.bytes.count > limit - 1024 {
            let size = Message.changes([encoded]).encode().count - Frame.lengthPrefixSize
            if size > limit { cut[encoded.change.timeline] = encoded }
        }
        guard !cut.isEmpty else { return page }
        // The signatures this page carries before the change held back count as sent.
        var lastSigned = current.lastSigned
        for encoded in page where encoded.signature != nil {
            guard let held = cut[encoded.change.timeline], encoded.change.seq < held.change.seq else { continue }
            lastSigned[encoded.change.timeline] = encoded.change.seq
        }
        for (timeline, held) in cut.sorted(by: { $0.key < $1.key }) {
            let stop = min(current.cap[timeline], lastSigned[timeline] ?? held.change.seq - 1)
            current.cap[timeline] = stop
            let ref = ChangeRef(timeline: timeline, seq: held.change.seq)
            guard heldBack[timeline] == nil else { continue }
            let oversized = OversizedChange(ref: ref, size: held.bytes.count, limit: limit, sentUpTo: stop)
            heldBack[timeline] = oversized
            actions.append(.finding(oversized.description))
        }
        return page.filter { $0.change.seq <= current.cap[$0.change.timeline] }
    }

    /// Notes forks resolved by renaming in this session (by this side's intake, or by the peer's). A claim on the
    /// own timeline beyond this head is then over: the peer's changes there were another copy's, and are on a branch
    /// now (or this copy's are, and its next edit begins a new timeline). Nothing waits for `plait rejoin` (bad-luck
    /// tester 2026-11-25, H11, after a restore with an edit before the first sync).
    private mutating func resolvedForks(_ timelines: some Sequence<TimelineID>) -> [SessionAction] {
        forksResolved.formUnion(timelines)
        guard let own = ownTimeline?.timeline, forksResolved.contains(own), staleClaim != nil else { return [] }
        staleClaim = nil
        return recordFindings()
    }

    private mutating func integrated(_ result: Replica.IntegrateResult, heads: Summary?) -> [SessionAction] {
        var actions: [SessionAction] = []
        pulled += result.added
        duplicates += result.duplicates
        actions += resolvedForks(result.forks)
        var newForks = false
        for refusal in result.refused {
            if case let .fork(seq, _, _) = refusal.refusal {
                let fork = ForkedTimeline(
                    timeline: refusal.timeline, localHead: heads?[refusal.timeline] ?? 0,
                    peerHead: max(seq, peer?.summary[refusal.timeline] ?? 0), detectedLocally: true)
                forks[refusal.timeline] = fork
                actions.append(.finding(fork.description + " (\(refusal.refusal))"))
                newForks = true
            } else if case let .witnessNotHeld(_, witness, _) = refusal.refusal,
                forksResolved.contains(witness.timeline), witness.seq > heldAtGreeting[witness.timeline]
            {
                // The witness is a change beyond what this device held of a timeline whose fork this session
                // resolved: the peer renamed it onto a branch, which comes later. Not refused as the peer's fault,
                // but not taken either, and said (`SessionResult.deferred`): the next Want asks for it again.
                let deferral = DeferredTimeline(timeline: refusal.timeline, witness: witness)
                deferredTimelines.removeAll { $0.timeline == refusal.timeline }
                deferredTimelines.append(deferral)
                actions.append(.finding(deferral.description))
            } else {
                refused[refusal.timeline] = refusal
                actions.append(
                    .finding("changes of \(refusal.timeline) from the peer were refused: \(refusal.refusal)"))
            }
        }
        if newForks { actions += recordForks() }
        if result.refused.contains(where: { !$0.refusal.isFork }) { actions += recordFindings() }
        if result.added > 0 { actions.append(.pulled(result.added)) }
        return actions
    }
}
