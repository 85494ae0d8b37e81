/// Compacted history: a domain snapshot plus the summary of the changes folded into it.
///
/// Baselines form a join-semilattice (`joined(with:)`), and they travel: a device's state is
/// replay(join of every baseline it has seen, changes not covered by that join).
public struct Baseline: Equatable, Sendable {
    public static let format: UInt32 = 1

    public var summary: Summary
    /// The largest Lamport time folded in.
    public var maxLamport: UInt64
    /// Per timeline, the hash of its last folded change, so the chain continues past the baseline.
    public var heads: [TimelineID: [UInt8]]
    /// Per timeline, the Lamport time of its last folded change (compaction's cut-off needs it).
    public var headLamports: [TimelineID: UInt64]
    /// Timelines whose `timeline.end` was folded in.
    public var ended: Set<TimelineID>
    /// The domain's snapshot bytes.
    public var snapshot: [UInt8]
    /// Signed timelines whose `timeline.begin` was folded in: their certificate, so the changes after the
    /// baseline can still be verified (DESIGN §11).
    public var certificates: [TimelineID: [UInt8]]
    /// The nonce of each folded begin whose certificate `certificates` holds (`BaselineTimeline` field 8): with
    /// the certificate it derives the timeline's ID (PROTOCOL.md §20.5), so a receiver that does not hold the begin
    /// can still check that the certificate is that timeline's. Absent only in baselines folded by older builds.
    public var nonces: [TimelineID: [UInt8]]
    /// Timelines a folded `timeline.begin` superseded, with the head at which they stop.
    public var superseded: [TimelineID: UInt64]
    /// The fork records of the device that folded it (and of every baseline joined into it), by branch name:
    /// what a device adopting it needs to name held changes the way the folded ones were named (PROTOCOL.md
    /// §22.8).
    public var forks: [ForkBranch.Record]

    public init(
        summary: Summary, maxLamport: UInt64, heads: [TimelineID: [UInt8]], headLamports: [TimelineID: UInt64],
        ended: Set<TimelineID>, snapshot: [UInt8], certificates: [TimelineID: [UInt8]] = [:],
        nonces: [TimelineID: [UInt8]] = [:], superseded: [TimelineID: UInt64] = [:], forks: [ForkBranch.Record] = []
    ) {
        self.summary = summary
        self.maxLamport = maxLamport
        self.heads = heads
        self.headLamports = headLamports
        self.ended = ended
        self.snapshot = snapshot
        self.certificates = certificates
        self.nonces = nonces
        self.superseded = superseded
        self.forks = Self.canonical(forks)
    }

    /// Fork records as a baseline keeps them: one per branch name (the smallest encoding when two differ, so
    /// the join stays deterministic), sorted by name.
    static func canonical(_ records: [ForkBranch.Record]) -> [ForkBranch.Record] {
        var byBranch: [TimelineID: ForkBranch.Record] = [:]
        for record in records {
            if let held = byBranch[record.branch],
                !Self.recordBytes(record).lexicographicallyPrecedes(Self.recordBytes(held))
            {
                continue
            }
            byBranch[record.branch] = record
        }
        return byBranch.values.sorted { $0.branch < $1.branch }
    }

    static func recordBytes(_ record: ForkBranch.Record) -> [UInt8] { record.encoded }

    /// The join: the union of both data models (per object, the greater version) and the per-timeline
    /// maximum of the summaries; when one covers the other the result holds the larger's data.
    /// Commutative, associative, idempotent.
    public func joined<D: Domain>(with other: Baseline, domain: D) throws(CoreError) -> Baseline {
        if self == other { return self }
        // No "covers" shortcut: the per-object join already returns the covering baseline's objects (stamps
        // never older, weight larger), and taking it whole would break associativity when it is not.
        var heads = self.heads
        var lamports = headLamports
        for timeline in other.summary.timelines {
            let theirs = other.summary[timeline]
            let mine = summary[timeline]
            let theirHash = other.heads[timeline] ?? Change.zeroHash
            if theirs > mine || (theirs == mine && (heads[timeline] ?? []).lexicographicallyPrecedes(theirHash)) {
                heads[timeline] = theirHash
                lamports[timeline] = other.headLamports[timeline] ?? 0
            }
        }
        // A timeline's certificate is fixed by its ID (derived from it with its begin's nonce); the smaller keeps
        // the join deterministic should two ever differ, with its nonce (a side that has one wins a tie: a baseline
        // of an older build has none). A superseded timeline stops at the lower head.
        var certificates = self.certificates
        var nonces = self.nonces
        for (timeline, theirs) in other.certificates {
            let theirNonce = other.nonces[timeline]
            if let mine = certificates[timeline] {
                if mine.lexicographicallyPrecedes(theirs) { continue }
                if mine == theirs {
                    guard let theirNonce else { continue }
                    if let myNonce = nonces[timeline], !theirNonce.lexicographicallyPrecedes(myNonce) { continue }
                }
            }
            certificates[timeline] = theirs
            nonces[timeline] = theirNonce
        }
        return Baseline(
            summary: summary.union(other.summary), maxLamport: max(maxLamport, other.maxLamport), heads: heads,
            headLamports: lamports, ended: ended.union(other.ended),
            snapshot: try domain.join(snapshot, other.snapshot), certificates: certificates, nonces: nonces,
            superseded: superseded.merging(other.superseded, uniquingKeysWith: min), forks: forks + other.forks)
    }

    /// The protobuf `Baseline` message of `plait.proto`.
    public func encoded() -> [UInt8] {
        var writer = ProtoWriter()
        writer.uint(1, UInt64(Self.format))
        for timeline in summary.timelines {
            writer.message(2) { entry in
                entry.fixed64(1, timeline.rawValue)
                entry.uint(2, summary[timeline])
                entry.data(3, heads[timeline] ?? Change.zeroHash)
                entry.uint(4, headLamports[timeline] ?? 0)
                entry.bool(5, ended.contains(timeline))
                // Protocol 2, written only when present: a baseline without signed timelines keeps its bytes.
                if let certificate = certificates[timeline] { entry.data(6, certificate) }
                if let at = superseded[timeline] { entry.uint(7, at) }
                if certificates[timeline] != nil, let nonce = nonces[timeline] { entry.data(8, nonce) }
            }
        }
        writer.uint(3, maxLamport)
        writer.data(4, snapshot)
        // Fork records (protocol 2), written only when present.
        for record in forks { writer.data(5, Self.recordBytes(record)) }
        return writer.bytes
    }

    public init(decoding bytes: ArraySlice<UInt8>) throws(CoreError) {
        var reader = ProtoReader(bytes)
        var format: UInt64 = 0
        var summary = Summary()
        var heads: [TimelineID: [UInt8]] = [:]
        var lamports: [TimelineID: UInt64] = [:]
        var ended: Set<TimelineID> = []
        var maxLamport: UInt64 = 0
        var snapshot: [UInt8] = []
        var certificates: [TimelineID: [UInt8]] = [:]
        var nonces: [TimelineID: [UInt8]] = [:]
        var superseded: [TimelineID: UInt64] = [:]
        var forks: [ForkBranch.Record] = []
        while let (field, value) = try reader.next() {
            switch field {
            case 1: format = try value.uint()
            case 2:
                var inner = ProtoReader(try value.data())
                var timeline: TimelineID?
                var seq: UInt64 = 0
                var hash = Change.zeroHash
                var lamport: UInt64 = 0
                var isEnded = false
                var certificate: [UInt8]?
                var supersededAt: UInt64?
                var nonce: [UInt8]?
                while let (number, item) = try inner.next() {
                    switch number {
                    case 1: timeline = TimelineID(try item.uint())
                    case 2: seq = try item.uint()
                    case 3: hash = Array(try item.data())
                    case 4: lamport = try item.uint()
                    case 5: isEnded = try item.bool()
                    case 6: certificate = Array(try item.data())
                    case 7: supersededAt = try item.uint()
                    case 8: nonce = Array(try item.data())
                    default: continue
                    }
                }
                guard let timeline, seq > 0, seq <= Change.maxSeq, lamport <= Change.maxSeq,
                    supersededAt ?? 0 <= Change.maxSeq, hash.count == 32
                else { throw .corruptSnapshot("a bad baseline entry") }
                if let nonce {
                    if let problem = Self.keyProblem(timeline, certificate: certificate, nonce: nonce) {
                        throw .corruptSnapshot(problem)
                    }
                    nonces[timeline] = nonce
                }
                summary[timeline] = seq
                heads[timeline] = hash
                lamports[timeline] = lamport
                if isEnded { ended.insert(timeline) }
                if let certificate { certificates[timeline] = certificate }
                if let supersededAt { superseded[timeline] = supersededAt }
            case 3: maxLamport = try value.uint()
            case 4: snapshot = Array(try value.data())
            case 5: forks.append(try ForkBranch.Record(decoding: try value.data()))
            default: continue
            }
        }
        guard format >= 1 else { throw .corruptSnapshot("a baseline without a format version") }
        guard maxLamport <= Change.maxSeq else { throw .corruptSnapshot("a baseline whose Lamport time is over 2^63-1") }
        guard format <= UInt64(Self.format) else {
            throw .unsupportedFormat(found: Int(format), supported: Int(Self.format))
        }
        self.init(
            summary: summary, maxLamport: maxLamport, heads: heads, headLamports: lamports, ended: ended,
            snapshot: snapshot, certificates: certificates, nonces: nonces, superseded: superseded, forks: forks)
    }

    /// Why a baseline entry's certificate and nonce cannot be its timeline's (nil when they can): PROTOCOL.md
    /// §20.9, a begin's nonce travels with its certificate and the two must derive the timeline's ID (§20.5),
    /// else anyone's certificate could be named for anyone's timeline.
    public static func keyProblem(_ timeline: TimelineID, certificate: [UInt8]?, nonce: [UInt8]) -> String? {
        guard let certificate else { return "a baseline entry with a nonce but no certificate" }
        guard nonce.count == 16 else { return "a baseline entry whose nonce is not 16 bytes" }
        guard TimelineBegin.timelineID(certificate: certificate, nonce: nonce) == timeline else {
            return "a baseline entry whose certificate and nonce do not derive its timeline \(timeline)"
        }
        return nil
    }

    /// The anchors of `root` this baseline gives naming (`ForkBranch.name`): the head of `root` and of each of its
    /// branches it folds, with the author's number of that head.
    public func anchors(of root: TimelineID) -> [ForkBranch.Anchor] {
        var anchors: [ForkBranch.Anchor] = []
        if summary[root] > 0, let hash = heads[root] {
            anchors.append(ForkBranch.Anchor(hash: hash, timeline: root, authorSeq: summary[root], base: 0))
        }
        for record in forks where record.root == root && summary[record.branch] > 0 {
            guard let hash = heads[record.branch] else { continue }
            anchors.append(ForkBranch.Anchor(
                hash: hash, timeline: record.branch, authorSeq: record.base + summary[record.branch],
                base: record.base))
        }
        return anchors
    }
}
