/// Lamport times: bounds and arithmetic that never traps (DESIGN §10).
public enum Lamport {
    /// The largest Lamport time a device accepts or authors. An honest clock advances by one per change
    /// seen; 2^62 leaves every sum and conversion to a signed 64-bit SQLite integer far from overflow.
    public static let max: UInt64 = 1 << 62

    /// The time a new change gets after `value`, saturating at `UInt64.max` (callers compare with `max`).
    @inline(__always) public static func next(after value: UInt64) -> UInt64 {
        value == .max ? .max : value + 1
    }

    /// `value - 1` without going below zero.
    @inline(__always) public static func previous(before value: UInt64) -> UInt64 { value == 0 ? 0 : value - 1 }

    /// How far above the largest Lamport time a receiver holds an unsigned change (or a baseline) may claim to be
    /// (PROTOCOL.md §15). An honest clock is one above the largest time its author had seen, so it stands above what
    /// a receiver holds by at most the number of changes the receiver lacks: 2^32 is more than any home holds. A
    /// signed change cannot jump at all without a witness held at the time before it (§20.6); an unsigned one
    /// (protocol-1 history, or a new unsigned timeline a peer opens) has no witness, and one at 2^62 − 1 stopped
    /// every device's writes for good (hostile tester, 2026-11-25).
    public static let maxJump: UInt64 = 1 << 32

    /// The largest Lamport time a receiver holding changes up to `held` takes from an unsigned change or a baseline
    /// bringing `count` changes.
    public static func ceiling(held: UInt64, count: UInt64) -> UInt64 {
        let (sum, overflow) = held.addingReportingOverflow(maxJump &+ min(count, maxJump))
        return overflow ? .max : sum
    }
}

/// The head a receiver holds of one timeline: where an arriving change must continue it.
public struct HeldHead: Sendable, Equatable {
    public var seq: UInt64
    public var lamport: UInt64
    public var hash: [UInt8]
    /// The timeline was closed by `timeline.end`: nothing may follow.
    public var ended: Bool
    /// The certificate whose key signs the timeline (from its `timeline.begin`); nil for an unsigned timeline
    /// (protocol-1 history), whose changes carry no signatures.
    public var certificate: [UInt8]?
    /// A `timeline.begin` superseded this timeline at this number: a change beyond it is refused.
    public var supersededAt: UInt64?

    public init(
        seq: UInt64, lamport: UInt64, hash: [UInt8], ended: Bool = false, certificate: [UInt8]? = nil,
        supersededAt: UInt64? = nil
    ) {
        self.seq = seq
        self.lamport = lamport
        self.hash = hash
        self.ended = ended
        self.certificate = certificate
        self.supersededAt = supersededAt
    }

    public static let empty = HeldHead(seq: 0, lamport: 0, hash: Change.zeroHash)
}

/// Why one arriving change was refused. Every case is the sender's fault (or a sign of two histories), and
/// it stops that change's timeline from that sender; the other timelines of the batch go on.
public enum Refusal: Error, Equatable, Sendable, CustomStringConvertible {
    /// The change does not continue its timeline: a number is missing before it.
    case gap(expected: UInt64, got: UInt64)
    /// Its previous-hash is not the hash of the change before it that the receiver holds.
    case brokenChain(seq: UInt64)
    /// The receiver already holds a different change under this number (compared by hash): a fork.
    case fork(seq: UInt64, held: [UInt8], arriving: [UInt8])
    /// Its Lamport time is not above the previous change's of its timeline.
    case lamportNotIncreasing(seq: UInt64, lamport: UInt64, previous: UInt64)
    /// Its Lamport time is above `Lamport.max`: no honest clock gets there.
    case lamportOutOfRange(seq: UInt64, lamport: UInt64)
    /// An unsigned change whose Lamport time is more than `Lamport.maxJump` above the largest the receiver holds
    /// (`ceiling` is the most it takes): no honest clock jumps so far, and nothing witnesses it.
    case lamportImplausible(seq: UInt64, lamport: UInt64, ceiling: UInt64)
    /// It is larger than the receiver's size cap.
    case tooLarge(seq: UInt64, size: Int, limit: Int)
    /// Its payload does not decode for a kind and version the receiver understands.
    case badPayload(seq: UInt64, reason: String)
    /// It follows the timeline's `timeline.end`.
    case afterEnd(seq: UInt64)
    /// A `timeline.begin` that is not the first change, does not decode, or whose certificate and nonce do not
    /// give its timeline ID.
    case badBegin(seq: UInt64, reason: String)
    /// It continues a timeline beyond the head at which a `timeline.begin` superseded it.
    case afterSuperseded(seq: UInt64, at: UInt64)
    /// The signature that should cover it does not verify under the timeline's key.
    case badSignature(seq: UInt64)
    /// No verified signature covers it: the sender's batch ended at an unsigned change.
    case unsigned(seq: UInt64)
    /// Its Lamport time jumps (more than the previous change's + 1) and it names no witness.
    case missingWitness(seq: UInt64, lamport: UInt64, previous: UInt64)
    /// The witness it names is not held here with Lamport time exactly one below its own.
    case witnessNotHeld(seq: UInt64, witness: ChangeRef, lamport: UInt64)

    /// The sequence number of the refused change.
    public var seq: UInt64 {
        switch self {
        case let .gap(_, got): return got
        case let .brokenChain(seq), let .fork(seq, _, _), let .lamportNotIncreasing(seq, _, _),
            let .lamportOutOfRange(seq, _), let .lamportImplausible(seq, _, _), let .tooLarge(seq, _, _), let .badPayload(seq, _), let .afterEnd(seq),
            let .badBegin(seq, _), let .afterSuperseded(seq, _), let .badSignature(seq), let .unsigned(seq),
            let .missingWitness(seq, _, _), let .witnessNotHeld(seq, _, _):
            return seq
        }
    }

    public var isFork: Bool {
        if case .fork = self { return true }
        return false
    }

    public var description: String {
        switch self {
        case let .gap(expected, got):
            return "it sent change \(got) where \(expected) was due (a gap)"
        case let .brokenChain(seq):
            return "its change \(seq) does not continue the hash chain held here (two histories, or a damaged row "
                + "on the sender)"
        case let .fork(seq, held, arriving):
            return "its change \(seq) differs from the one held here under that number (hash "
                + "\(arriving.hexString.prefix(16)) vs \(held.hexString.prefix(16))): the timeline has forked"
        case let .lamportNotIncreasing(seq, lamport, previous):
            return "its change \(seq) has Lamport time \(lamport), not above the previous change's \(previous)"
        case let .lamportOutOfRange(seq, lamport):
            return "its change \(seq) has Lamport time \(lamport), above the limit of 2^62"
        case let .lamportImplausible(seq, lamport, ceiling):
            return "its change \(seq) is unsigned and has Lamport time \(lamport), more than 2^32 above the largest "
                + "this device holds (it takes at most \(ceiling)): no honest clock jumps so far, and taking it would "
                + "use up the Lamport range of every device it reaches"
        case let .tooLarge(seq, size, limit):
            return "its change \(seq) is \(size) bytes, over the limit of \(limit) (store.max_change_bytes)"
        case let .badPayload(seq, reason):
            return "its change \(seq) has a payload that does not decode (\(reason))"
        case let .afterEnd(seq):
            return "its change \(seq) follows the end of the timeline"
        case let .badBegin(seq, reason):
            return "its change \(seq) is a timeline.begin that is refused: \(reason)"
        case let .afterSuperseded(seq, at):
            return "its change \(seq) continues the timeline beyond change \(at), where a newer timeline superseded "
                + "it (a fork)"
        case let .badSignature(seq):
            return "the signature on its change \(seq) does not verify under the timeline's key (forged, or damaged "
                + "on the way)"
        case let .unsigned(seq):
            return "its changes from \(seq) on are not covered by a signature (a batch must end at a signed change)"
        case let .missingWitness(seq, lamport, previous):
            return "its change \(seq) jumps to Lamport time \(lamport) from \(previous) without naming a witness"
        case let .witnessNotHeld(seq, witness, lamport):
            return "its change \(seq) names witness \(witness), which is not held here with Lamport time "
                + "\(lamport == 0 ? 0 : lamport - 1)"
        }
    }
}

/// A timeline whose changes were refused from one batch on: nothing of it at or after `refusal.seq` was taken
/// (nor, on a signed timeline, the changes before it that no verified signature covers).
public struct RefusedTimeline: Sendable, Equatable, CustomStringConvertible {
    public var timeline: TimelineID
    public var refusal: Refusal

    public init(timeline: TimelineID, refusal: Refusal) {
        self.timeline = timeline
        self.refusal = refusal
    }

    public var description: String { "timeline \(timeline): \(refusal)" }
}

/// The one check of arriving changes (DESIGN §10, §11, §12): continuity, hash chain, forks at held numbers,
/// Lamport bounds and witnesses, size and payload, `timeline.begin`, and signatures, per timeline. Each change
/// arrives decoded once with its received bytes (`EncodedChange`); its hash is computed once, with the injected
/// SHA-256, over those bytes; its payload is decoded once, and the engine applies that decoded form. It decides;
/// the store only stores what it accepts.
///
/// A signed timeline (one that began with `timeline.begin`) is taken only as far as a verified signature covers
/// it: a valid signature on change n authenticates 1…n through the hash chain. Signatures are verified sparsely
/// — the last one of the timeline in the batch, and before it one at least every `maxUnsignedRun` changes —
/// and only verified signatures are handed on to be stored, so a relay cannot plant a bad one for a later
/// receiver to trip on. Unsigned timelines (protocol-1 history) are taken as they are.
public struct Intake<D: Domain>: Sendable {
    /// An accepted change with its hash, its decoded payload, and its signature when one was verified.
    public struct Accepted: Sendable {
        public var decoded: DecodedChange<D.Operation>
        public var hash: [UInt8]
        /// A verified signature, to store with the change; nil when none was verified on this change.
        public var signature: [UInt8]?
        public var change: Change { decoded.change }
    }

    public struct Result: Sendable {
        /// Changes to store, in timeline order (the engine sorts them into replay order).
        public var accepted: [Accepted] = []
        /// Changes already held with the same hash (re-pulled).
        public var duplicates = 0
        /// Timelines refused from some change on, one entry each.
        public var refused: [RefusedTimeline] = []
        /// Per timeline, the head once the accepted changes are stored.
        public var heads: [TimelineID: HeldHead] = [:]
        /// Timelines superseded by an accepted `timeline.begin`, with the head at which they stop: only those the
        /// begin's key may stop (`TimelineBegin.maySupersede`).
        public var superseded: [TimelineBegin.Superseded] = []
        /// Changes that passed every check but are not covered by a verified signature yet (the signed change
        /// comes in a later batch), or whose witness is such a change: the caller holds them back and checks them
        /// again in front of the next batch of the same stream (DESIGN §11, PROTOCOL.md §20).
        public var heldBack: [EncodedChange] = []
        /// Fork branches this batch added changes to (DESIGN §11): changes of a signed timeline that continue a
        /// different change than the one held under a number. Their changes are accepted addressed as the
        /// branch (`Change.origin` keeps where the author wrote them); the store records each branch and names
        /// all of them again (`ForkBranch.assign`), so the name given here is provisional.
        public var branches: [ForkBranch.Branch] = []
    }

    /// A fork branch held here: its name, the timeline its bytes carry, the offset of its numbers, its head.
    public struct HeldBranch: Sendable, Equatable {
        public var id: TimelineID
        public var base: UInt64
        public var head: HeldHead
        /// A branch known from a fork record only (no change of it held, PROTOCOL.md §22.8): the hash of its first
        /// change. `head` is then at number 0, and its Lamport time is the largest the receiver's baseline folds,
        /// which bounds the folded change the first one continues.
        public var recordedFirstHash: [UInt8]?
        /// The receiver has a baseline, so the first change of a branch known from a record only may continue a
        /// folded change (without one, that first change is taken only where it continues a held change).
        public var mayContinueFolded: Bool

        public init(
            id: TimelineID, base: UInt64, head: HeldHead, recordedFirstHash: [UInt8]? = nil,
            mayContinueFolded: Bool = true
        ) {
            self.id = id
            self.base = base
            self.head = head
            self.recordedFirstHash = recordedFirstHash
            self.mayContinueFolded = mayContinueFolded
        }
    }

    public var domain: D
    public var maxChangeBytes: Int
    /// The SHA-256 the hashes are computed with (OpenSSL's, injected by the store; Core's own in unit tests).
    public var sha256: SHA256.Function
    /// Checks signatures (OpenSSL's ECDSA, injected by the store). Without one, no signed timeline is taken.
    public var verifier: (any ChangeVerifier)?
    /// At most this many changes of a timeline between two verified signatures (DESIGN §11).
    public var maxUnsignedRun = ChangeSignature.maxUnsignedRun

    public init(
        domain: D, maxChangeBytes: Int, sha256: @escaping SHA256.Function = SHA256.current,
        verifier: (any ChangeVerifier)? = nil
    ) {
        self.domain = domain
        self.maxChangeBytes = maxChangeBytes
        self.sha256 = sha256
        self.verifier = verifier
    }

    /// A change that passed the checks of its own timeline, before witnesses and signatures.
    private struct Candidate {
        var encoded: EncodedChange
        var hash: [UInt8]
        var operation: D.Operation?
        var previousLamport: UInt64
        var verified = false
    }

    /// One timeline's part of the batch.
    private struct Run {
        var start: HeldHead
        var certificate: [UInt8]?
        var candidates: [Candidate] = []
        var refusal: Refusal?
        var superseded: TimelineBegin.Superseded?
        /// Candidates before this index are covered by a verified signature (or the timeline is unsigned).
        var covered = 0
        /// Candidates before this index are taken: covered, and every witness they name in the batch is taken.
        var taken = 0
        /// Candidates before this index are covered by a verified signature on a branch of this batch that
        /// continues them (its first change's `prev` is the hash of the last of them): the author's signature
        /// there covers the whole chain back, and the transaction that signed it may have begun here.
        var coveredByBranch = 0
        /// A fork branch: the timeline its bytes carry, and the offset of its numbers (its change n is the
        /// author's `base + n`). Nil for a timeline under its own name.
        var branch: (root: TimelineID, base: UInt64)?
        /// The branch was not held before this batch.
        var newBranch = false
        /// Fork branches of it are held here (held changes or records): a change continuing this run of a signed
        /// timeline may still be held on one of them, or be a record's first change (PROTOCOL.md §22.8).
        var besideBranches = false

        var signed: Bool { certificate != nil }

        /// The head its next change must continue.
        var current: HeldHead {
            // Read in place: `candidates.last` would copy the whole candidate (and release it) on every change.
            guard !candidates.isEmpty else { return start }
            let last = candidates.count - 1
            return HeldHead(
                seq: candidates[last].encoded.change.seq, lamport: candidates[last].encoded.change.lamport,
                hash: candidates[last].hash, ended: candidates[last].encoded.change.kind == Change.timelineEndKind)
        }

        /// What this run holds at `seq` (in its own numbering) as a head: a change of the batch, its start, or,
        /// below its start, what `lookUp` finds stored. Nil beyond its current head.
        func held(at seq: UInt64, lookUp: (UInt64) throws -> HeldHead?) rethrows -> HeldHead? {
            if seq > start.seq {
                guard seq - start.seq <= UInt64(candidates.count) else { return nil }
                let candidate = candidates[Int(seq - start.seq) - 1]
                return HeldHead(seq: seq, lamport: candidate.encoded.change.lamport, hash: candidate.hash)
            }
            return seq == start.seq ? start : try lookUp(seq)
        }
    }

    /// Where fork routing sends an arriving change.
    private enum Route {
        case duplicate
        case branch(TimelineID)
    }

    /// Checks `batch`. `head` gives the receiver's head of a timeline (nil: none held); `heldHash` the hash of
    /// a change the receiver holds (nil when it cannot tell, e.g. folded into a baseline); `witness` whether
    /// the receiver holds a change with exactly the given Lamport time under that reference, or a baseline
    /// that covers the reference and reaches that time; `skip` timelines are dropped silently (refused
    /// earlier in the session, or forked with this sender). `heldLamport`, the largest Lamport time the receiver
    /// holds, bounds what an unsigned change may claim (`Lamport.ceiling`; nil: only `Lamport.max`).
    // Specialized here for the one domain: a caller in another module otherwise runs the generic body, which
    // looks up type metadata on every change.
    @_specialize(exported: true, where D == ListsDomain)
    public func check(
        _ batch: [EncodedChange], skip: Set<TimelineID> = [], head: (TimelineID) throws -> HeldHead?,
        heldHash: (ChangeRef) throws -> [UInt8]?, witness: (ChangeRef, UInt64) throws -> Bool,
        heldChange: (ChangeRef) throws -> HeldHead?, branches: (TimelineID) throws -> [HeldBranch],
        heldLamport: UInt64? = nil
    ) rethrows -> Result {
        let ceiling = heldLamport.map { Lamport.ceiling(held: $0, count: UInt64(batch.count)) } ?? .max
        var result = Result()
        var runs: [TimelineID: Run] = [:]
        var order: [TimelineID] = []
        /// Per timeline, the fork branches of it met in this batch (held ones once looked up, and new ones).
        var branchRuns: [TimelineID: [TimelineID]] = [:]
        var heldBranches: [TimelineID: [HeldBranch]] = [:]
        // Renamed changes (held back from an earlier batch, or read from the store) are routed as their author
        // wrote them: the branch they belong to is found again by their chain.
        // (A batch of changes under their authors' names, already in timeline order, is the usual stream: it is
        // read as it came, without copying every change twice.)
        let authored = !batch.contains { $0.change.origin != nil } ? batch : batch.map { encoded in
            encoded.change.origin == nil
                ? encoded : EncodedChange(change: encoded.change.asAuthored, bytes: encoded.bytes, signature: encoded.signature)
        }
        let inOrder = zip(authored.indices.dropLast(), authored.indices.dropFirst()).allSatisfy {
            authored[$0].change.ref < authored[$1].change.ref
        }
        for original in inOrder ? authored : authored.sorted(by: { $0.change.ref < $1.change.ref }) {
            var encoded = original
            let change = encoded.change
            if skip.contains(change.timeline) { continue }
            var run: Run
            // Moved out of the dictionary, not copied: with a second reference to its candidates, every append
            // below would copy the whole array (quadratic in the batch; minutes for a 100,000-change pull).
            if let known = runs.removeValue(forKey: change.timeline) {
                run = known
            } else {
                let start = try head(change.timeline) ?? .empty
                run = Run(start: start, certificate: start.certificate)
                // Looked up for every timeline, not only signed ones: a timeline new here is signed by the begin
                // this batch brings.
                if heldBranches[change.timeline] == nil { heldBranches[change.timeline] = try branches(change.timeline) }
                run.besideBranches = !heldBranches[change.timeline]!.isEmpty
                order.append(change.timeline)
            }
            guard run.refusal == nil else {
                runs[change.timeline] = run
                continue
            }
            let current = run.current
            let hash = encoded.bytes.withUnsafeBytes { sha256($0) }
            // A signed timeline's change that does not continue the head held here may continue another branch
            // of it (a fork, DESIGN §11): it goes there, under the branch's name, and is checked like any change.
            let continues = change.seq == current.seq + 1 && change.previousHash == current.hash
            if run.signed && (!continues || run.besideBranches) {
                var routed: Route??
                if !continues {
                    let heldHere = try run.held(at: change.seq) { seq in
                        try heldHash(ChangeRef(timeline: change.timeline, seq: seq)).map {
                            HeldHead(seq: seq, lamport: 0, hash: $0)
                        }
                    }
                    if heldHere?.hash != hash {
                        routed = .some(try self.route(
                            encoded, hash: hash, main: run, runs: &runs, branchRuns: &branchRuns,
                            heldBranches: &heldBranches, order: &order, heldHash: heldHash, heldChange: heldChange,
                            branches: branches))
                    }
                } else if let found = try besideHead(
                    change, hash: hash, at: current, main: run, runs: &runs, branchRuns: &branchRuns, order: &order,
                    held: heldBranches[change.timeline] ?? [], heldHash: heldHash)
                {
                    routed = .some(found)
                }
                if let route = routed {
                    runs[change.timeline] = run
                    switch route {
                    case .duplicate?:
                        result.duplicates += 1
                        continue
                    case let .branch(id)?:
                        var branchRun = runs.removeValue(forKey: id)!
                        if branchRun.refusal == nil {
                            encoded = EncodedChange(
                                change: change.renamed(to: id, seq: change.seq - branchRun.branch!.base),
                                bytes: encoded.bytes, signature: encoded.signature)
                            let branchHead = branchRun.current
                            switch try judge(encoded.change, size: encoded.bytes.count, hash: hash, against: branchHead,
                                             run: &branchRun, ceiling: ceiling, heldHash: heldHash) {
                            case .duplicate:
                                result.duplicates += 1
                            case let .refuse(reason):
                                branchRun.refusal = reason
                            case let .accept(operation):
                                branchRun.candidates.append(
                                    Candidate(encoded: encoded, hash: hash, operation: operation,
                                              previousLamport: branchHead.lamport))
                            }
                        }
                        runs[id] = branchRun
                        continue
                    case nil:
                        run = runs.removeValue(forKey: change.timeline)!
                    }
                }
            }
            switch try judge(change, size: encoded.bytes.count, hash: hash, against: current, run: &run,
                             ceiling: ceiling, heldHash: heldHash) {
            case .duplicate:
                result.duplicates += 1
            case let .refuse(reason):
                run.refusal = reason
            case let .accept(operation):
                run.candidates.append(
                    Candidate(encoded: encoded, hash: hash, operation: operation, previousLamport: current.lamport))
            }
            runs[change.timeline] = run
        }
        try settle(&runs, witness: witness)
        result.accepted.reserveCapacity(batch.count)
        for timeline in order {
            let run = runs[timeline]!
            if let refusal = run.refusal {
                // A branch's refusal is its timeline's: the author wrote the change there.
                result.refused.append(RefusedTimeline(timeline: run.branch?.root ?? timeline, refusal: refusal))
            }
            result.heldBack += run.candidates[run.taken...].map { $0.encoded }
            let taken = run.candidates.prefix(run.taken)
            guard let last = taken.last else { continue }
            if let branch = run.branch, run.newBranch {
                result.branches.append(ForkBranch.Branch(id: timeline, parent: branch.root, base: branch.base))
            }
            for candidate in taken {
                result.accepted.append(Accepted(
                    decoded: DecodedChange(change: candidate.encoded.change, operation: candidate.operation),
                    hash: candidate.hash, signature: candidate.verified ? candidate.encoded.signature : nil))
            }
            result.heads[timeline] = HeldHead(
                seq: last.encoded.change.seq, lamport: last.encoded.change.lamport, hash: last.hash,
                ended: last.encoded.change.kind == Change.timelineEndKind, certificate: run.certificate,
                supersededAt: run.start.supersededAt)
            if let superseded = run.superseded, run.candidates.first?.encoded.change.seq == 1 {
                // The superseded timeline's key: from its begin in this batch, else as held (nil: unsigned, or
                // not held, where there is nothing to mark).
                let held = try runs[superseded.timeline].map { $0.certificate } ?? head(superseded.timeline)?.certificate
                if TimelineBegin.maySupersede(held, by: run.certificate) { result.superseded.append(superseded) }
            }
        }
        return result
    }

    /// Finds where a change of a signed timeline goes when it does not continue the head held under the
    /// timeline's own name: a duplicate of a change held on a branch, the continuation of a branch (met in this
    /// batch or held), or the first change of a new branch when what it continues is held (the fork point).
    /// Nil: it continues nothing held, and the timeline's own checks refuse it (a gap, a broken chain, a fork
    /// that cannot be placed).
    private func route(
        _ encoded: EncodedChange, hash: [UInt8], main: Run, runs: inout [TimelineID: Run],
        branchRuns: inout [TimelineID: [TimelineID]], heldBranches: inout [TimelineID: [HeldBranch]],
        order: inout [TimelineID], heldHash: (ChangeRef) throws -> [UInt8]?,
        heldChange: (ChangeRef) throws -> HeldHead?, branches: (TimelineID) throws -> [HeldBranch]
    ) rethrows -> Route? {
        let change = encoded.change
        let root = change.timeline
        let seq = change.seq
        if heldBranches[root] == nil { heldBranches[root] = try branches(root) }
        // Branches met in this batch: a duplicate of one of their changes, or their continuation.
        for id in branchRuns[root] ?? [] {
            guard let run = runs[id], let base = run.branch?.base, seq > base else { continue }
            let head = run.current
            let headSeq = head.seq + base
            if seq <= headSeq {
                let held = try run.held(at: seq - base) { index in
                    try heldHash(ChangeRef(timeline: id, seq: index)).map { HeldHead(seq: index, lamport: 0, hash: $0) }
                }
                if held?.hash == hash { return .duplicate }
            } else if seq == headSeq + 1 && head.hash == change.previousHash {
                return .branch(id)
            }
        }
        // Branches held here.
        for branch in heldBranches[root]! where runs[branch.id] == nil && seq > branch.base {
            let headSeq = branch.head.seq + branch.base
            if seq <= headSeq {
                let held = seq == headSeq
                    ? branch.head.hash : try heldHash(ChangeRef(timeline: branch.id, seq: seq - branch.base))
                if held == hash { return .duplicate }
            } else if seq == headSeq + 1 && branch.head.hash == change.previousHash {
                var run = Run(start: branch.head, certificate: branch.head.certificate ?? main.certificate)
                run.branch = (root, branch.base)
                runs[branch.id] = run
                branchRuns[root, default: []].append(branch.id)
                order.append(branch.id)
                return .branch(branch.id)
            }
        }
        // A new branch: what it continues must be held, on the timeline or one of its branches, or be a change
        // of this batch.
        guard seq >= 2 else { return nil }
        var parent = try main.held(at: seq - 1) { try heldChange(ChangeRef(timeline: root, seq: $0)) }
        if parent?.hash != change.previousHash { parent = nil }
        for id in branchRuns[root] ?? [] where parent == nil {
            guard let run = runs[id], let base = run.branch?.base, seq - 1 > base else { continue }
            let held = try run.held(at: seq - 1 - base) { try heldChange(ChangeRef(timeline: id, seq: $0)) }
            if held?.hash == change.previousHash { parent = held }
        }
        if parent == nil {
            for branch in heldBranches[root]! where seq - 1 > branch.base && seq - 1 <= branch.head.seq + branch.base {
                if let held = try heldChange(ChangeRef(timeline: branch.id, seq: seq - 1 - branch.base)),
                    held.hash == change.previousHash
                {
                    parent = held
                    break
                }
            }
        }
        guard let parent else {
            return placedByRecord(
                change, hash: hash, main: main, runs: &runs, branchRuns: &branchRuns, order: &order,
                held: heldBranches[root]!)
        }
        let id = ForkBranch.id(parent: root, firstHash: hash)
        guard runs[id] == nil else { return .duplicate }
        var run = Run(
            start: HeldHead(seq: 0, lamport: parent.lamport, hash: change.previousHash, certificate: main.certificate),
            certificate: main.certificate)
        run.branch = (root, seq - 1)
        run.newBranch = true
        runs[id] = run
        branchRuns[root, default: []].append(id)
        order.append(id)
        return .branch(id)
    }

    /// Where a change of a signed timeline that continues the head held under the timeline's own name goes when
    /// fork branches of it are held here (PROTOCOL.md §22 "Receiving", §22.8 rule 2): a change whose hash is held
    /// on a branch is a duplicate, and one a held record names as its branch's first change (at the author's number
    /// `base + 1`) starts that branch, whatever its chain continues. Nil: it stays on the timeline's own name.
    /// Without this a device named a record's first change by its chain (on the root) where the device that sent
    /// the record named it on the branch, and each then held, announced and asked for the same changes under
    /// two names: a sync that failed every time, and changes stored twice (hostile tester, 2026-11-25, F2).
    private func besideHead(
        _ change: Change, hash: [UInt8], at current: HeldHead, main: Run, runs: inout [TimelineID: Run],
        branchRuns: inout [TimelineID: [TimelineID]], order: inout [TimelineID], held: [HeldBranch],
        heldHash: (ChangeRef) throws -> [UInt8]?
    ) rethrows -> Route? {
        let root = change.timeline
        let seq = change.seq
        for branch in held where seq > branch.base {
            let own = seq - branch.base
            let heldThere: [UInt8]?
            if let run = runs[branch.id] {
                heldThere = try run.held(at: own) { index in
                    try heldHash(ChangeRef(timeline: branch.id, seq: index)).map { HeldHead(seq: index, lamport: 0, hash: $0) }
                }?.hash
            } else if own < branch.head.seq {
                heldThere = try heldHash(ChangeRef(timeline: branch.id, seq: own))
            } else {
                heldThere = own == branch.head.seq ? branch.head.hash : nil
            }
            if heldThere == hash { return .duplicate }
        }
        guard
            let branch = held.first(where: {
                $0.recordedFirstHash == hash && $0.head.seq == 0 && seq == $0.base + 1 && runs[$0.id] == nil
            })
        else { return nil }
        var run = Run(
            start: HeldHead(seq: 0, lamport: current.lamport, hash: change.previousHash, certificate: main.certificate),
            certificate: main.certificate)
        run.branch = (root, branch.base)
        runs[branch.id] = run
        branchRuns[root, default: []].append(branch.id)
        order.append(branch.id)
        return .branch(branch.id)
    }

    /// The first change of a branch whose fork point the receiver's baseline folds (PROTOCOL.md §22.8): what it
    /// continues is not held, but a fork record held here names its hash, so it starts that branch. Its predecessor's
    /// Lamport time is not known; a change naming a witness is checked against it as any other, and one naming none
    /// claims its predecessor stood one below it, which must be within the baseline (its largest Lamport time).
    private func placedByRecord(
        _ change: Change, hash: [UInt8], main: Run, runs: inout [TimelineID: Run],
        branchRuns: inout [TimelineID: [TimelineID]], order: inout [TimelineID], held: [HeldBranch]
    ) -> Route? {
        guard
            let branch = held.first(where: {
                $0.recordedFirstHash == hash && $0.mayContinueFolded && $0.head.seq == 0 && change.seq == $0.base + 1
                    && runs[$0.id] == nil
            }),
            change.lamport >= 1
        else { return nil }
        let predecessorLamport: UInt64
        if change.witness != nil {
            predecessorLamport = 0
        } else {
            guard change.lamport - 1 <= branch.head.lamport else { return nil }
            predecessorLamport = change.lamport - 1
        }
        var run = Run(
            start: HeldHead(
                seq: 0, lamport: predecessorLamport, hash: change.previousHash, certificate: main.certificate),
            certificate: main.certificate)
        run.branch = (change.timeline, branch.base)
        runs[branch.id] = run
        branchRuns[change.timeline, default: []].append(branch.id)
        order.append(branch.id)
        return .branch(branch.id)
    }

    /// `check` for a receiver that holds no fork branches and cannot look up its held changes (a fork is then
    /// refused, as before forks were resolved).
    public func check(
        _ batch: [EncodedChange], skip: Set<TimelineID> = [], head: (TimelineID) throws -> HeldHead?,
        heldHash: (ChangeRef) throws -> [UInt8]?, witness: (ChangeRef, UInt64) throws -> Bool
    ) rethrows -> Result {
        try check(
            batch, skip: skip, head: head, heldHash: heldHash, witness: witness, heldChange: { _ in nil },
            branches: { _ in [] })
    }

    /// `check` for a receiver that holds no witnesses (tests of the other rules).
    public func check(
        _ batch: [EncodedChange], skip: Set<TimelineID> = [], head: (TimelineID) throws -> HeldHead?,
        heldHash: (ChangeRef) throws -> [UInt8]?
    ) rethrows -> Result {
        try check(
            batch, skip: skip, head: head, heldHash: heldHash, witness: { _, _ in false }, heldChange: { _ in nil },
            branches: { _ in [] })
    }

    /// `check` for changes that are not yet encoded (tests, and callers holding `Change` values): each is
    /// encoded once here, unsigned.
    public func check(
        _ batch: [Change], skip: Set<TimelineID> = [], head: (TimelineID) throws -> HeldHead?,
        heldHash: (ChangeRef) throws -> [UInt8]?
    ) rethrows -> Result {
        try check(
            batch.map { EncodedChange($0) }, skip: skip, head: head, heldHash: heldHash, witness: { _, _ in false },
            heldChange: { _ in nil }, branches: { _ in [] })
    }

    private enum Verdict {
        case duplicate
        case refuse(Refusal)
        case accept(D.Operation?)
    }

    private func judge(
        _ change: Change, size: Int, hash: [UInt8], against head: HeldHead, run: inout Run, ceiling: UInt64,
        heldHash: (ChangeRef) throws -> [UInt8]?
    ) rethrows -> Verdict {
        if change.seq <= head.seq {
            let held = change.seq == head.seq ? head.hash : try heldHash(change.ref)
            if let held, held != hash { return .refuse(.fork(seq: change.seq, held: held, arriving: hash)) }
            return .duplicate
        }
        guard change.seq == head.seq + 1 else { return .refuse(.gap(expected: head.seq + 1, got: change.seq)) }
        guard !head.ended else { return .refuse(.afterEnd(seq: change.seq)) }
        if let at = run.start.supersededAt, change.seq > at {
            return .refuse(.afterSuperseded(seq: change.seq, at: at))
        }
        guard change.previousHash == head.hash else { return .refuse(.brokenChain(seq: change.seq)) }
        guard change.lamport <= Lamport.max else {
            return .refuse(.lamportOutOfRange(seq: change.seq, lamport: change.lamport))
        }
        // An unsigned change has no witness (§20.6) to hold its clock to what exists: a bound stands in (§15).
        guard run.signed || change.kind == TimelineBegin.kind || change.lamport <= ceiling else {
            return .refuse(.lamportImplausible(seq: change.seq, lamport: change.lamport, ceiling: ceiling))
        }
        guard change.lamport > head.lamport else {
            return .refuse(.lamportNotIncreasing(seq: change.seq, lamport: change.lamport, previous: head.lamport))
        }
        guard size <= maxChangeBytes else {
            return .refuse(.tooLarge(seq: change.seq, size: size, limit: maxChangeBytes))
        }
        if change.kind == TimelineBegin.kind {
            guard change.seq == 1 else {
                return .refuse(.badBegin(seq: change.seq, reason: "a timeline.begin must be the first change"))
            }
            let begin: TimelineBegin
            do throws(CoreError) { begin = try TimelineBegin(payload: change.payload) } catch {
                return .refuse(.badBegin(seq: change.seq, reason: error.reason))
            }
            guard begin.timelineID == change.timeline else {
                return .refuse(.badBegin(
                    seq: change.seq,
                    reason: "its certificate and nonce give timeline \(begin.timelineID), not \(change.timeline)"))
            }
            run.certificate = begin.certificate
            run.superseded = begin.supersedes
            return .accept(nil)
        }
        do throws(CoreError) {
            return .accept(try domain.decode(change))
        } catch {
            // The bare reason: the refusal names the peer's change; a decoding error's own wording is about
            // stored bytes ("a stored snapshot… run `plait doctor`"), which would blame this store.
            return .refuse(.badPayload(seq: change.seq, reason: "\(change.kind): \(error.reason)"))
        }
    }

    /// Cuts `run` back so that its candidates from `index` on are not taken, recording `refusal` unless an
    /// earlier one stands.
    private static func cut(_ run: inout Run, at index: Int, _ refusal: Refusal) {
        guard index < run.candidates.count else { return }
        if run.refusal == nil { run.refusal = refusal }
        run.candidates.removeSubrange(index...)
        run.covered = min(run.covered, index)
    }

    /// Signatures and witnesses until nothing more is cut (cutting a timeline back can take away the witness of
    /// another timeline's change), then what is taken now: a prefix of each timeline that a verified signature
    /// covers and whose witnesses in the batch are taken too. The rest is held back, not refused.
    private func settle(_ runs: inout [TimelineID: Run], witness: (ChangeRef, UInt64) throws -> Bool) rethrows {
        // Cutting shortens runs but never removes one: the order is taken once.
        let timelines = runs.keys.sorted()
        var changed = true
        while changed {
            changed = false
            for timeline in timelines {
                if runs[timeline]!.signed {
                    let before = runs[timeline]!.candidates.count
                    cover(&runs[timeline]!)
                    if runs[timeline]!.candidates.count != before { changed = true }
                } else {
                    runs[timeline]!.covered = runs[timeline]!.candidates.count
                }
            }
            // A branch that left this batch's own changes of its root (a record's first change continuing them,
            // PROTOCOL.md §22.8) covers them with its signature: they are its chain.
            for timeline in timelines {
                let run = runs[timeline]!
                guard let branch = run.branch, run.covered > 0, run.start.seq == 0, let root = runs[branch.root],
                    branch.base > root.start.seq, branch.base - root.start.seq <= UInt64(root.candidates.count)
                else { continue }
                let upTo = Int(branch.base - root.start.seq)
                if root.candidates[upTo - 1].hash == run.start.hash && upTo > root.coveredByBranch {
                    runs[branch.root]!.coveredByBranch = upTo
                    changed = true
                }
            }
            if try checkWitnesses(&runs, witness: witness) { changed = true }
        }
        take(&runs)
    }

    /// Verifies signatures along a signed run: one at least every `maxUnsignedRun` changes (and
    /// `ChangeSignature.maxUnsignedBytes`) and the last one, each only once. A failure cuts the run after the
    /// last verified signature; an uncovered tail longer than the signing rule allows is cut as unsigned.
    private func cover(_ run: inout Run) {
        guard let certificate = run.certificate else { return }
        var coveredSeq = run.start.seq
        var coveredIndex = 0
        var bytesSince = 0
        let signedIndexes = run.candidates.indices.filter { run.candidates[$0].encoded.signature != nil }
        var position = 0
        for index in run.candidates.indices {
            bytesSince += run.candidates[index].encoded.bytes.count
            guard position < signedIndexes.count, signedIndexes[position] == index else { continue }
            position += 1
            let seq = run.candidates[index].encoded.change.seq
            let isLast = position == signedIndexes.count
            if !isLast && !run.candidates[index].verified {
                // Skip it if the next signature still keeps the verified ones within the signing rule.
                let next = signedIndexes[position]
                let nextSeq = run.candidates[next].encoded.change.seq
                let bytesToNext = run.candidates[(index + 1)...next].reduce(bytesSince) { $0 + $1.encoded.bytes.count }
                if nextSeq - coveredSeq <= UInt64(maxUnsignedRun) && bytesToNext <= ChangeSignature.maxUnsignedBytes {
                    continue
                }
            }
            if !run.candidates[index].verified {
                guard let verifier, let signature = run.candidates[index].encoded.signature,
                    verifier.verify(
                        signature: signature, changeHash: run.candidates[index].hash, certificate: certificate)
                else {
                    Self.cut(&run, at: coveredIndex, .badSignature(seq: seq))
                    return
                }
                run.candidates[index].verified = true
            }
            coveredSeq = seq
            coveredIndex = index + 1
            bytesSince = 0
        }
        run.covered = max(coveredIndex, min(run.coveredByBranch, run.candidates.count))
        // The author signs at least every `maxUnsignedRun` changes and every `maxUnsignedBytes`: a longer
        // unsigned tail breaks that rule, and holding it back would let a sender pin memory here.
        let tail = run.candidates[run.covered...]
        let tailBytes = tail.reduce(0) { $0 + $1.encoded.bytes.count }
        if tail.count > maxUnsignedRun || tailBytes > ChangeSignature.maxUnsignedBytes + maxChangeBytes {
            Self.cut(&run, at: run.covered, .unsigned(seq: run.candidates[run.covered].encoded.change.seq))
        }
    }

    /// Checks the witness of every candidate of a signed timeline, in replay order (a witness sorts earlier):
    /// held here, or a candidate of the batch (taken now or held back with it); returns whether it cut anything.
    private func checkWitnesses(
        _ runs: inout [TimelineID: Run], witness: (ChangeRef, UInt64) throws -> Bool
    ) rethrows -> Bool {
        var needing: [(key: OrderKey, timeline: TimelineID, index: Int)] = []
        for (timeline, run) in runs where run.signed {
            for (index, candidate) in run.candidates.enumerated() {
                let change = candidate.encoded.change
                if change.witness != nil || change.lamport > candidate.previousLamport + 1 {
                    needing.append((change.orderKey, timeline, index))
                }
            }
        }
        guard !needing.isEmpty else { return false }
        // Keyed where the authors wrote them, as witnesses name them (two branches of a fork may both hold one).
        var inBatch: [ChangeRef: [UInt64]] = [:]
        for (_, run) in runs {
            for candidate in run.candidates {
                inBatch[candidate.encoded.change.authored, default: []].append(candidate.encoded.change.lamport)
            }
        }
        needing.sort { $0.key < $1.key }
        var cutAny = false
        for entry in needing {
            guard let run = runs[entry.timeline], entry.index < run.candidates.count else { continue }
            let candidate = run.candidates[entry.index]
            let change = candidate.encoded.change
            let refusal: Refusal?
            if let named = change.witness {
                let wanted = change.lamport - 1
                let held: Bool
                if let lamports = inBatch[named], lamports.contains(wanted) {
                    held = true
                } else {
                    held = try witness(named, wanted)
                }
                refusal = held ? nil : .witnessNotHeld(seq: change.seq, witness: named, lamport: change.lamport)
            } else {
                refusal = .missingWitness(seq: change.seq, lamport: change.lamport, previous: candidate.previousLamport)
            }
            guard let refusal else { continue }
            for dropped in run.candidates[entry.index...] {
                inBatch[dropped.encoded.change.authored]?.removeAll { $0 == dropped.encoded.change.lamport }
            }
            Self.cut(&runs[entry.timeline]!, at: entry.index, refusal)
            cutAny = true
        }
        return cutAny
    }

    /// How much of `run` can be taken when its change at `index` cannot: up to the last signed change before
    /// it, verifying that signature now if it was skipped (one verification; if it fails, back to the last
    /// verified one — a bad signature that is not needed refuses nothing).
    private func fallBack(_ run: inout Run, before index: Int) -> Int {
        guard let certificate = run.certificate else { return index }
        var candidate = index
        while candidate > 0 && run.candidates[candidate - 1].encoded.signature == nil { candidate -= 1 }
        if candidate > 0 && !run.candidates[candidate - 1].verified, let verifier,
            let signature = run.candidates[candidate - 1].encoded.signature,
            verifier.verify(
                signature: signature, changeHash: run.candidates[candidate - 1].hash, certificate: certificate)
        {
            run.candidates[candidate - 1].verified = true
        }
        while candidate > 0 && !run.candidates[candidate - 1].verified { candidate -= 1 }
        return candidate
    }

    /// Settles what is taken now. Each timeline is taken up to its last verified signature; a change whose
    /// witness is in the batch but not taken is not taken either, and its timeline falls back to the last
    /// verified signature before it — so every head left in the store is a signed change. Counts only go down,
    /// so this ends.
    private func take(_ runs: inout [TimelineID: Run]) {
        var position: [ChangeRef: (timeline: TimelineID, index: Int)] = [:]
        var naming: [(key: OrderKey, timeline: TimelineID, index: Int, witness: ChangeRef)] = []
        for (timeline, run) in runs {
            runs[timeline]!.taken = run.covered
            for (index, candidate) in run.candidates.enumerated() {
                position[candidate.encoded.change.authored] = (timeline, index)
                if let witness = candidate.encoded.change.witness {
                    naming.append((candidate.encoded.change.orderKey, timeline, index, witness))
                }
            }
        }
        guard !naming.isEmpty else { return }
        naming.sort { $0.key < $1.key }
        var changed = true
        while changed {
            changed = false
            for entry in naming where entry.index < runs[entry.timeline]!.taken {
                guard let named = position[entry.witness], named.index >= runs[named.timeline]!.taken else { continue }
                runs[entry.timeline]!.taken = fallBack(&runs[entry.timeline]!, before: entry.index)
                changed = true
            }
        }
    }
}
