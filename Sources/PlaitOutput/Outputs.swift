// What `--json` prints, one type per command, and what the local API (DESIGN §12) answers with the same
// types. Properties are declared in the alphabetical order of their JSON keys, so objects keep the sorted
// keys they always had; field names and shapes are those scripts already read.

// MARK: Reading the lists

/// `plait lists --json`.
public struct ListsOutput: Codable, Sendable, Equatable {
    public var lists: [ListSummary]
    public init(lists: [ListSummary]) { self.lists = lists }
}

/// One list with its item counts.
public struct ListSummary: Codable, Sendable, Equatable {
    @Nullable public var color: String?
    public var completed: Int
    public var id: String
    public var pending: Int
    public var title: String

    public init(color: String?, completed: Int, id: String, pending: Int, title: String) {
        self.color = color
        self.completed = completed
        self.id = id
        self.pending = pending
        self.title = title
    }
}

/// `plait show --json` (the CLI streams it list by list and item by item; see `ShowList`).
public struct ShowOutput: Codable, Sendable, Equatable {
    public var lists: [ShowList]
    public init(lists: [ShowList]) { self.lists = lists }

    public enum CodingKeys: String, CodingKey { case lists }
}

/// One list with its items in display order.
public struct ShowList: Codable, Sendable, Equatable {
    @Nullable public var color: String?
    public var completed: [ShowItem]
    public var id: String
    public var pending: [ShowItem]
    public var title: String

    public init(color: String?, completed: [ShowItem], id: String, pending: [ShowItem], title: String) {
        self.color = color
        self.completed = completed
        self.id = id
        self.pending = pending
        self.title = title
    }

    public enum CodingKeys: String, CodingKey { case color, completed, id, pending, title }
}

public struct ShowItem: Codable, Sendable, Equatable {
    public var id: String
    public var text: String

    public init(id: String, text: String) {
        self.id = id
        self.text = text
    }

    public enum CodingKeys: String, CodingKey { case id, text }
}

/// `plait log --json`.
public struct LogOutput: Codable, Sendable, Equatable {
    public var changes: [LogEntry]
    public init(changes: [LogEntry]) { self.changes = changes }
}

public struct LogEntry: Codable, Sendable, Equatable {
    /// `timeline:seq`.
    public var change: String
    public var description: String
    public var kind: String
    public var lamport: Int
    /// ISO 8601, from the change's wall time: the author's clock, its word. Nil when outside 1970 – 9999 (a
    /// hostile or broken clock's 2^63 − 1 ms printed as a date in year 5,828,963).
    @Nullable public var time: String?
    public var version: Int

    public init(change: String, description: String, kind: String, lamport: Int, time: String?, version: Int) {
        self.change = change
        self.description = description
        self.kind = kind
        self.lamport = lamport
        self.time = time
        self.version = version
    }
}

// MARK: Editing

/// What a data command did (`plait add --json`, `plait list rm --json`, …): the object's ID and the fields the
/// command set. A field the command does not set is left out; `color` is `null` when a recolor cleared it.
public struct EditOutput: Codable, Sendable, Equatable {
    /// Set by `list recolor` only; `.some(nil)` is "cleared".
    public var color: String??
    public var id: String
    /// The list an added item went to.
    public var list: String?
    public var text: String?
    public var title: String?

    public init(id: String, color: String?? = nil, list: String? = nil, text: String? = nil, title: String? = nil) {
        self.color = color
        self.id = id
        self.list = list
        self.text = text
        self.title = title
    }

    enum CodingKeys: String, CodingKey { case color, id, list, text, title }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if container.contains(.color) {
            color = .some(try container.decodeNil(forKey: .color) ? nil : try container.decode(String.self, forKey: .color))
        }
        id = try container.decode(String.self, forKey: .id)
        list = try container.decodeIfPresent(String.self, forKey: .list)
        text = try container.decodeIfPresent(String.self, forKey: .text)
        title = try container.decodeIfPresent(String.self, forKey: .title)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        if let color {
            if let color { try container.encode(color, forKey: .color) } else { try container.encodeNil(forKey: .color) }
        }
        try container.encode(id, forKey: .id)
        try container.encodeIfPresent(list, forKey: .list)
        try container.encodeIfPresent(text, forKey: .text)
        try container.encodeIfPresent(title, forKey: .title)
    }
}

/// `plait batch --json`.
public struct BatchOutput: Codable, Sendable, Equatable {
    public var changes: Int
    public var lines: Int

    public init(changes: Int, lines: Int) {
        self.changes = changes
        self.lines = lines
    }
}

// MARK: The device

/// `plait init --json`.
public struct InitOutput: Codable, Sendable, Equatable {
    public var device: String
    public var home: String
    public var name: String
    public var timeline: String

    public init(device: String, home: String, name: String, timeline: String) {
        self.device = device
        self.home = home
        self.name = name
        self.timeline = timeline
    }
}

/// `plait id --json`.
public struct IdOutput: Codable, Sendable, Equatable {
    public var device: String
    public var name: String

    public init(device: String, name: String) {
        self.device = device
        self.name = name
    }
}

/// `plait status --json`.
public struct StatusOutput: Codable, Sendable, Equatable {
    /// The baseline's summary, if history was compacted.
    @Nullable public var baseline: String?
    public var changes: Int
    /// Copied homes seen (this device's or a peer's Device ID running from two homes), one sentence each with what
    /// to do (DESIGN §11).
    public var copied: [String]
    /// The Device ID; null when the certificate cannot be read (then `device_problem` says why).
    @Nullable public var device: String?
    @Nullable public var deviceProblem: String?
    public var digest: String
    public var home: String
    public var items: Int
    public var lists: Int
    public var name: String
    public var summary: String
    public var timeline: String
    /// Changes this build cannot interpret (kept and forwarded).
    public var unknown: Int

    public init(
        baseline: String?, changes: Int, device: String?, deviceProblem: String?, digest: String, home: String,
        items: Int, lists: Int, name: String, summary: String, timeline: String, unknown: Int, copied: [String] = []
    ) {
        self.baseline = baseline
        self.changes = changes
        self.copied = copied
        self.device = device
        self.deviceProblem = deviceProblem
        self.digest = digest
        self.home = home
        self.items = items
        self.lists = lists
        self.name = name
        self.summary = summary
        self.timeline = timeline
        self.unknown = unknown
    }

    enum CodingKeys: String, CodingKey {
        case baseline, changes, copied, device, deviceProblem = "device_problem", digest, home, items, lists, name
        case summary, timeline, unknown
    }
}

/// `plait compact --json`.
public struct CompactOutput: Codable, Sendable, Equatable {
    @Nullable public var baseline: String?
    /// The Lamport time of the cut-off.
    @Nullable public var cutoff: Int?
    public var folded: Int
    /// The change that set the cut-off.
    @Nullable public var limit: String?
    public var remaining: Int

    public init(baseline: String?, cutoff: Int?, folded: Int, limit: String?, remaining: Int) {
        self.baseline = baseline
        self.cutoff = cutoff
        self.folded = folded
        self.limit = limit
        self.remaining = remaining
    }
}

/// `plait backup DIR --json`.
public struct BackupOutput: Codable, Sendable, Equatable {
    /// How many changes the backed-up store holds.
    public var changes: Int
    /// The Device ID; null when the home's certificate cannot be read (then `identity_problem` says why).
    @Nullable public var device: String?
    /// The names written in `path`, the store first.
    public var files: [String]
    @Nullable public var identityProblem: String?
    public var path: String
    public var summary: String

    enum CodingKeys: String, CodingKey {
        case changes, device, files, identityProblem = "identity_problem", path, summary
    }

    public init(
        changes: Int, device: String?, files: [String], identityProblem: String?, path: String, summary: String
    ) {
        self.changes = changes
        self.device = device
        self.files = files
        self.identityProblem = identityProblem
        self.path = path
        self.summary = summary
    }
}

/// `plait restore DIR --json`.
public struct RestoreOutput: Codable, Sendable, Equatable {
    public var changes: Int
    public var device: String
    public var home: String
    /// Whether the next edit begins a new timeline by itself (false: a timeline from before signed ones).
    public var newTimeline: Bool
    /// The names the restore moved aside, into `replacedPath`.
    public var replaced: [String]
    /// Where the files the restore replaced went, in the home; null when the home held none.
    @Nullable public var replacedPath: String?
    public var summary: String

    enum CodingKeys: String, CodingKey {
        case changes, device, home, newTimeline = "new_timeline", replaced, replacedPath = "replaced_path", summary
    }

    public init(
        changes: Int, device: String, home: String, newTimeline: Bool, replaced: [String], replacedPath: String?,
        summary: String
    ) {
        self.changes = changes
        self.device = device
        self.home = home
        self.newTimeline = newTimeline
        self.replaced = replaced
        self.replacedPath = replacedPath
        self.summary = summary
    }
}

// MARK: Peers

/// `plait pair --trust … --json`.
public struct PairOutput: Codable, Sendable, Equatable {
    @Nullable public var address: String?
    /// The device was paired here before: its stored name or address was updated, nothing else.
    public var alreadyPaired: Bool
    public var device: String
    public var name: String

    public init(address: String?, alreadyPaired: Bool = false, device: String, name: String) {
        self.address = address
        self.alreadyPaired = alreadyPaired
        self.device = device
        self.name = name
    }

    enum CodingKeys: String, CodingKey { case address, alreadyPaired = "already_paired", device, name }
}

/// `plait peers --json`.
public struct PeersOutput: Codable, Sendable, Equatable {
    public var peers: [PeerOutput]
    public init(peers: [PeerOutput]) { self.peers = peers }
}

public struct PeerOutput: Codable, Sendable, Equatable {
    @Nullable public var address: String?
    /// What the peer claimed about this device's timeline, if anything.
    @Nullable public var claim: String?
    public var device: String
    @Nullable public var diverged: String?
    public var forked: [String]
    public var inSync: Bool
    @Nullable public var lastSeen: String?
    public var name: String
    @Nullable public var pairedAt: String?
    @Nullable public var refused: String?
    /// When the peer last refused this device after the TLS handshake (it does not hold it as paired), if no
    /// session with it got as far as its Hello since.
    @Nullable public var refusedThisDevice: String?
    public var state: String
    /// The Device ID a statement signed by this device's key named as its successor (`plait rejoin --new-key`).
    @Nullable public var succeededBy: String?
    @Nullable public var summary: String?

    public init(
        address: String?, claim: String?, device: String, diverged: String?, forked: [String], inSync: Bool,
        lastSeen: String?, name: String, pairedAt: String?, refused: String?, state: String, summary: String?,
        succeededBy: String? = nil, refusedThisDevice: String? = nil
    ) {
        self.address = address
        self.claim = claim
        self.device = device
        self.diverged = diverged
        self.forked = forked
        self.inSync = inSync
        self.lastSeen = lastSeen
        self.name = name
        self.pairedAt = pairedAt
        self.refused = refused
        self.refusedThisDevice = refusedThisDevice
        self.state = state
        self.succeededBy = succeededBy
        self.summary = summary
    }

    enum CodingKeys: String, CodingKey {
        case address, claim, device, diverged, forked, inSync = "in_sync", lastSeen = "last_seen", name
        case pairedAt = "paired_at", refused, refusedThisDevice = "refused_this_device", state
        case succeededBy = "succeeded_by", summary
    }
}

/// `plait peers --pending --json`.
public struct PendingPeersOutput: Codable, Sendable, Equatable {
    public var pending: [PendingPeerOutput]
    public init(pending: [PendingPeerOutput]) { self.pending = pending }
}

public struct PendingPeerOutput: Codable, Sendable, Equatable {
    @Nullable public var address: String?
    public var attempts: Int
    public var device: String
    @Nullable public var firstSeen: String?
    @Nullable public var lastSeen: String?
    /// As the device gave it, unverified.
    public var name: String
    /// Always false: a pending device's name is its own claim.
    public var nameVerified: Bool

    public init(
        address: String?, attempts: Int, device: String, firstSeen: String?, lastSeen: String?, name: String,
        nameVerified: Bool = false
    ) {
        self.address = address
        self.attempts = attempts
        self.device = device
        self.firstSeen = firstSeen
        self.lastSeen = lastSeen
        self.name = name
        self.nameVerified = nameVerified
    }

    enum CodingKeys: String, CodingKey {
        case address, attempts, device, firstSeen = "first_seen", lastSeen = "last_seen", name
        case nameVerified = "name_verified"
    }
}

/// `plait sync --json`.
public struct SyncOutput: Codable, Sendable, Equatable {
    public var peers: [SyncPeerOutput]
    /// Paired devices this sync did not try: no known address, and not found on the LAN.
    public var unreached: [SyncUnreachedOutput]
    public init(peers: [SyncPeerOutput], unreached: [SyncUnreachedOutput] = []) {
        self.peers = peers
        self.unreached = unreached
    }
}

/// A paired device `plait sync` had no address for.
public struct SyncUnreachedOutput: Codable, Sendable, Equatable {
    public var device: String
    @Nullable public var name: String?
    public var reason: String
    public init(device: String, name: String?, reason: String) {
        self.device = device
        self.name = name
        self.reason = reason
    }
}

public struct SyncPeerOutput: Codable, Sendable, Equatable {
    public var address: String
    public var baselinesPulled: Int
    public var baselinesSent: Int
    public var bytesReceived: Int
    public var bytesSent: Int
    @Nullable public var device: String?
    public var diverged: Bool
    @Nullable public var error: String?
    public var forked: [String]
    /// `given` (--peer), `stored` (a paired device's address) or `mdns`.
    public var foundBy: String
    @Nullable public var name: String?
    public var ok: Bool
    public var problems: [String]
    public var pulled: Int
    public var sent: Int
    @Nullable public var summary: String?
    /// The session was made with a retired identity and the peer took this device's new Device ID from it.
    public var toldNewID: Bool
    public var verifiedEqual: Bool

    public init(
        address: String, baselinesPulled: Int, baselinesSent: Int, bytesReceived: Int, bytesSent: Int,
        device: String?, diverged: Bool, error: String?, forked: [String], foundBy: String, name: String?, ok: Bool,
        problems: [String], pulled: Int, sent: Int, summary: String?, verifiedEqual: Bool, toldNewID: Bool = false
    ) {
        self.address = address
        self.baselinesPulled = baselinesPulled
        self.baselinesSent = baselinesSent
        self.bytesReceived = bytesReceived
        self.bytesSent = bytesSent
        self.device = device
        self.diverged = diverged
        self.error = error
        self.forked = forked
        self.foundBy = foundBy
        self.name = name
        self.ok = ok
        self.problems = problems
        self.pulled = pulled
        self.sent = sent
        self.summary = summary
        self.toldNewID = toldNewID
        self.verifiedEqual = verifiedEqual
    }

    enum CodingKeys: String, CodingKey {
        case address, baselinesPulled = "baselines_pulled", baselinesSent = "baselines_sent"
        case bytesReceived = "bytes_received", bytesSent = "bytes_sent", device, diverged, error, forked
        case foundBy = "found_by", name, ok, problems, pulled, sent, summary, toldNewID = "told_new_id"
        case verifiedEqual = "verified_equal"
    }
}

// MARK: Checking and healing

/// `plait doctor --json`.
public struct DoctorOutput: Codable, Sendable, Equatable {
    public var checks: [DoctorCheckOutput]
    public var home: String
    /// Whether no check failed (warnings allowed).
    public var ok: Bool

    public init(checks: [DoctorCheckOutput], home: String, ok: Bool) {
        self.checks = checks
        self.home = home
        self.ok = ok
    }
}

public struct DoctorCheckOutput: Codable, Sendable, Equatable {
    @Nullable public var advice: String?
    public var check: String
    public var detail: String
    /// `ok`, `warning` or `failed`.
    public var status: String

    public init(advice: String?, check: String, detail: String, status: String) {
        self.advice = advice
        self.check = check
        self.detail = detail
        self.status = status
    }
}

/// `plait repair --json`.
public struct RepairOutput: Codable, Sendable, Equatable {
    public var checkpoints: Checkpoints
    public var foundOnOpen: [String]
    /// Head records (a timeline's last number, Lamport time and hash) found damaged and rewritten from the
    /// timeline's intact last change.
    public var headRecordsMended: [String]
    public var home: String
    /// What SQLite's integrity check said of the indexes the repair rebuilt first (empty: none was damaged).
    public var indexesRebuilt: [String]
    /// Items and lists that only changes of this device kept aside had made (a restored or copied home), made again
    /// as new changes: `item 'TEXT' (TIMELINE:SEQ)` or `list 'TITLE' (…)`, with the kept-aside create's reference.
    public var keptAsideMadeAgain: [String]
    /// Why such items could not be made again, if some could not.
    @Nullable public var keptAsideProblem: String?
    public var materialized: Materialized
    public var pulls: [Pull]
    public var setAside: [String]
    /// What commands show after the repair and showed before it (changes set aside hide what they made).
    public var shownAfter: Shown
    public var shownBefore: Shown
    /// `timeline:first-last` ranges no reachable device could give back.
    public var stillSetAside: [String]

    public init(
        checkpoints: Checkpoints, foundOnOpen: [String], headRecordsMended: [String] = [], home: String,
        indexesRebuilt: [String] = [], keptAsideMadeAgain: [String] = [], keptAsideProblem: String? = nil,
        materialized: Materialized, pulls: [Pull], setAside: [String], stillSetAside: [String], shownBefore: Shown,
        shownAfter: Shown
    ) {
        self.checkpoints = checkpoints
        self.foundOnOpen = foundOnOpen
        self.headRecordsMended = headRecordsMended
        self.home = home
        self.indexesRebuilt = indexesRebuilt
        self.keptAsideMadeAgain = keptAsideMadeAgain
        self.keptAsideProblem = keptAsideProblem
        self.materialized = materialized
        self.pulls = pulls
        self.setAside = setAside
        self.stillSetAside = stillSetAside
        self.shownBefore = shownBefore
        self.shownAfter = shownAfter
    }

    enum CodingKeys: String, CodingKey {
        case checkpoints, foundOnOpen = "found_on_open", headRecordsMended = "head_records_mended", home
        case indexesRebuilt = "indexes_rebuilt", keptAsideMadeAgain = "kept_aside_made_again"
        case keptAsideProblem = "kept_aside_problem", materialized, pulls
        case setAside = "set_aside"
        case shownAfter = "shown_after", shownBefore = "shown_before", stillSetAside = "still_set_aside"
    }

    /// The state's digest (hex), its live lists and items.
    public struct Shown: Codable, Sendable, Equatable {
        public var digest: String
        public var items: Int
        public var lists: Int

        public init(digest: String, items: Int, lists: Int) {
            self.digest = digest
            self.items = items
            self.lists = lists
        }
    }

    public struct Checkpoints: Codable, Sendable, Equatable {
        public var dropped: Int
        public var written: Int

        public init(dropped: Int, written: Int) {
            self.dropped = dropped
            self.written = written
        }
    }

    public struct Materialized: Codable, Sendable, Equatable {
        public var changes: Int
        public var digest: String
        public var fromBaseline: Bool
        public var items: Int
        public var lists: Int
        /// `matched`, `differed` or `damaged`.
        public var previous: String
        @Nullable public var problem: String?

        public init(
            changes: Int, digest: String, fromBaseline: Bool, items: Int, lists: Int, previous: String,
            problem: String?
        ) {
            self.changes = changes
            self.digest = digest
            self.fromBaseline = fromBaseline
            self.items = items
            self.lists = lists
            self.previous = previous
            self.problem = problem
        }

        enum CodingKeys: String, CodingKey {
            case changes, digest, fromBaseline = "from_baseline", items, lists, previous, problem
        }
    }

    public struct Pull: Codable, Sendable, Equatable {
        public var address: String
        @Nullable public var error: String?
        public var ok: Bool
        public var pulled: Int

        public init(address: String, error: String?, ok: Bool, pulled: Int) {
            self.address = address
            self.error = error
            self.ok = ok
            self.pulled = pulled
        }
    }
}

// MARK: Figures

/// Named figures (`plait bench --json`): keys written in sorted order, each a whole number, a decimal or text.
public struct Figures: Codable, Sendable, Equatable {
    public indirect enum Value: Codable, Sendable, Equatable {
        case integer(Int)
        case decimal(Double)
        case text(String)
        /// A figure measured over several runs (`runs`), or a list of them.
        case list([Value])
        /// A figure with parts (a range: `min`, `median`, `max`, `runs`), written with sorted keys.
        case object(Figures)

        public init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let integer = try? container.decode(Int.self) {
                self = .integer(integer)
            } else if let decimal = try? container.decode(Double.self) {
                self = .decimal(decimal)
            } else if let text = try? container.decode(String.self) {
                self = .text(text)
            } else if let list = try? container.decode([Value].self) {
                self = .list(list)
            } else {
                self = .object(try container.decode(Figures.self))
            }
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            switch self {
            case let .integer(value): try container.encode(value)
            case let .decimal(value): try container.encode(value)
            case let .text(value): try container.encode(value)
            case let .list(values): try container.encode(values)
            case let .object(figures): try container.encode(figures)
            }
        }
    }

    public var values: [String: Value]

    public init(_ values: [String: Value] = [:]) { self.values = values }

    public subscript(key: String) -> Value? {
        get { values[key] }
        set { values[key] = newValue }
    }

    struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Key.self)
        values = [:]
        for key in container.allKeys { values[key.stringValue] = try container.decode(Value.self, forKey: key) }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        for key in values.keys.sorted() { try container.encode(values[key]!, forKey: Key(stringValue: key)) }
    }
}

/// Counts by name (`edit_kinds` of `plait demo --json`), written with sorted keys.
public struct Counts: Codable, Sendable, Equatable {
    public var values: [String: Int]

    public init(_ values: [String: Int]) { self.values = values }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Figures.Key.self)
        values = [:]
        for key in container.allKeys { values[key.stringValue] = try container.decode(Int.self, forKey: key) }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Figures.Key.self)
        for key in values.keys.sorted() { try container.encode(values[key]!, forKey: Figures.Key(stringValue: key)) }
    }
}

// MARK: The demo

/// `plait demo --json`.
public struct DemoOutput: Codable, Sendable, Equatable {
    public var agentPIDs: [Int]
    public var daemonPIDs: [Int]
    @Nullable public var convergeSeconds: Double?
    public var converged: Bool
    public var devices: [Device]
    @Nullable public var digest: String?
    @Nullable public var directory: String?
    public var editingSeconds: Double
    public var edits: Int
    public var editsPerDevice: Int
    public var items: Int
    public var kept: Bool
    public var lists: Int
    /// `loopback` or `netns`.
    public var mode: String
    public var namespaces: [String]
    public var seed: UInt64
    public var staticPeers: Bool
    @Nullable public var summary: String?
    @Nullable public var totalSeconds: Double?

    public init(
        agentPIDs: [Int], daemonPIDs: [Int], convergeSeconds: Double?, converged: Bool, devices: [Device],
        digest: String?, directory: String?, editingSeconds: Double, edits: Int, editsPerDevice: Int, items: Int,
        kept: Bool, lists: Int, mode: String, namespaces: [String], seed: UInt64, staticPeers: Bool,
        summary: String?, totalSeconds: Double?
    ) {
        self.agentPIDs = agentPIDs
        self.daemonPIDs = daemonPIDs
        self.convergeSeconds = convergeSeconds
        self.converged = converged
        self.devices = devices
        self.digest = digest
        self.directory = directory
        self.editingSeconds = editingSeconds
        self.edits = edits
        self.editsPerDevice = editsPerDevice
        self.items = items
        self.kept = kept
        self.lists = lists
        self.mode = mode
        self.namespaces = namespaces
        self.seed = seed
        self.staticPeers = staticPeers
        self.summary = summary
        self.totalSeconds = totalSeconds
    }

    // Sorted by key: "converge_seconds" < "converged" ('_' sorts before 'd').
    enum CodingKeys: String, CodingKey {
        case agentPIDs = "agent_pids", convergeSeconds = "converge_seconds", converged
        case daemonPIDs = "daemon_pids", devices, digest, directory, editingSeconds = "editing_seconds", edits
        case editsPerDevice = "edits_per_device", items, kept, lists, mode, namespaces, seed
        case staticPeers = "static_peers", summary, totalSeconds = "total_seconds"
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(agentPIDs, forKey: .agentPIDs)
        try container.encode(_convergeSeconds, forKey: .convergeSeconds)
        try container.encode(converged, forKey: .converged)
        try container.encode(daemonPIDs, forKey: .daemonPIDs)
        try container.encode(devices, forKey: .devices)
        try container.encode(_digest, forKey: .digest)
        try container.encode(_directory, forKey: .directory)
        try container.encode(editingSeconds, forKey: .editingSeconds)
        try container.encode(edits, forKey: .edits)
        try container.encode(editsPerDevice, forKey: .editsPerDevice)
        try container.encode(items, forKey: .items)
        try container.encode(kept, forKey: .kept)
        try container.encode(lists, forKey: .lists)
        try container.encode(mode, forKey: .mode)
        try container.encode(namespaces, forKey: .namespaces)
        try container.encode(seed, forKey: .seed)
        try container.encode(staticPeers, forKey: .staticPeers)
        try container.encode(_summary, forKey: .summary)
        try container.encode(_totalSeconds, forKey: .totalSeconds)
    }

    public struct Device: Codable, Sendable, Equatable {
        public var address: String
        @Nullable public var agentExit: Int?
        public var changes: Int
        @Nullable public var device: String?
        public var digest: String
        public var editKinds: Counts
        public var edits: Int
        public var home: String
        public var name: String
        @Nullable public var pid: Int?
        public var summary: String

        public init(
            address: String, agentExit: Int?, changes: Int, device: String?, digest: String, editKinds: Counts,
            edits: Int, home: String, name: String, pid: Int?, summary: String
        ) {
            self.address = address
            self.agentExit = agentExit
            self.changes = changes
            self.device = device
            self.digest = digest
            self.editKinds = editKinds
            self.edits = edits
            self.home = home
            self.name = name
            self.pid = pid
            self.summary = summary
        }

        enum CodingKeys: String, CodingKey {
            case address, agentExit = "agent_exit", changes, device, digest, editKinds = "edit_kinds", edits, home
            case name, pid, summary
        }
    }
}
