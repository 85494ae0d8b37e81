/// Forks resolved by renaming (DESIGN §11, PROTOCOL.md §22): when two changes signed by a timeline's key stand
/// at one number, the branch whose hash sequence from the fork point is smallest keeps the timeline's name, and
/// every other branch is addressed as a timeline of its own, T′, with its bytes, signatures and Lamport times
/// unchanged. Every device names the branches the same way from the same changes, whichever it saw first.
public enum ForkBranch {
    /// The name of the branch that leaves `parent` at the change with hash `firstHash` (the branch's first
    /// change): the first 8 bytes of SHA-256("plait-fork" ‖ parent as 8 bytes big-endian ‖ firstHash), read as a
    /// big-endian unsigned integer.
    public static func id(parent: TimelineID, firstHash: [UInt8]) -> TimelineID {
        var hasher = SHA256()
        hasher.update(Array("plait-fork".utf8))
        hasher.update((0..<8).map { UInt8(truncatingIfNeeded: parent.rawValue >> (56 - 8 * UInt64($0))) })
        hasher.update(firstHash)
        let digest = hasher.finalize()
        return TimelineID(digest.prefix(8).reduce(0) { $0 << 8 | UInt64($1) })
    }

    /// One change of a forked timeline as naming sees it: where its author wrote it, its hash and its
    /// predecessor's.
    public struct Node: Sendable, Equatable {
        /// The number its author gave it (in its bytes).
        public var seq: UInt64
        public var hash: [UInt8]
        public var previousHash: [UInt8]

        public init(seq: UInt64, hash: [UInt8], previousHash: [UInt8]) {
            self.seq = seq
            self.hash = hash
            self.previousHash = previousHash
        }
    }

    /// Where naming puts a change: on `timeline` at `seq`.
    public struct Name: Sendable, Hashable {
        public var timeline: TimelineID
        public var seq: UInt64

        public init(timeline: TimelineID, seq: UInt64) {
            self.timeline = timeline
            self.seq = seq
        }
    }

    /// A branch: its name, what it left, and the number before its first change in its author's numbering
    /// (its change at the author's `seq` is its `seq − base`).
    public struct Branch: Sendable, Hashable {
        public var id: TimelineID
        public var parent: TimelineID
        public var base: UInt64

        public init(id: TimelineID, parent: TimelineID, base: UInt64) {
            self.id = id
            self.parent = parent
            self.base = base
        }
    }

    /// A fork record (DESIGN §11): the branch `branch` of `root` left `parent` after the author's number `base`;
    /// its first change has hash `firstHash`, and `rivalHash` is the smallest hash among the changes that stood
    /// at that number when it was named (the one that kept the name, or a smaller one that lost too). Records are
    /// permanent and travel in baselines (PROTOCOL.md §22.8): with one, a device that holds the branch's first
    /// change names it the branch even when the change that won is not held (folded, or never seen).
    public struct Record: Sendable, Hashable {
        public var branch: TimelineID
        public var root: TimelineID
        public var parent: TimelineID
        public var base: UInt64
        public var firstHash: [UInt8]
        public var rivalHash: [UInt8]

        public init(
            branch: TimelineID, root: TimelineID, parent: TimelineID, base: UInt64, firstHash: [UInt8],
            rivalHash: [UInt8]
        ) {
            self.branch = branch
            self.root = root
            self.parent = parent
            self.base = base
            self.firstHash = firstHash
            self.rivalHash = rivalHash
        }

        /// The branch as naming reports it.
        public var asBranch: Branch { Branch(id: branch, parent: parent, base: base) }

        /// The canonical encoding of `ForkRecord` (plait.proto): fields in number order, every field written. A
        /// baseline's field 5 and Hello's field 13 carry exactly these bytes.
        public var encoded: [UInt8] {
            var writer = ProtoWriter()
            writer.fixed64(1, branch.rawValue)
            writer.fixed64(2, root.rawValue)
            writer.fixed64(3, parent.rawValue)
            writer.uint(4, base)
            writer.data(5, firstHash)
            writer.data(6, rivalHash)
            return writer.bytes
        }

        /// Decodes a `ForkRecord` and refuses one that is not consistent (PROTOCOL.md §22.8): a record whose name,
        /// base or hashes do not agree is corrupt wherever it comes from.
        public init(decoding bytes: ArraySlice<UInt8>) throws(CoreError) {
            var reader = ProtoReader(bytes)
            var branch: UInt64?
            var root: UInt64?
            var parent: UInt64?
            var base: UInt64 = 0
            var firstHash: [UInt8] = []
            var rivalHash: [UInt8] = []
            while let (number, item) = try reader.next() {
                switch number {
                case 1: branch = try item.uint()
                case 2: root = try item.uint()
                case 3: parent = try item.uint()
                case 4: base = try item.uint()
                case 5: firstHash = Array(try item.data())
                case 6: rivalHash = Array(try item.data())
                default: continue
                }
            }
            guard let branch, let root, let parent else { throw .corruptSnapshot("a fork record without its names") }
            // A number the store keeps as a signed 64-bit integer (2^63 and above trapped there: a paired peer's
            // record stopped the agent).
            guard base <= Change.maxSeq else { throw .corruptSnapshot("a fork record whose base is over 2^63-1") }
            self.init(
                branch: TimelineID(branch), root: TimelineID(root), parent: TimelineID(parent), base: base,
                firstHash: firstHash, rivalHash: rivalHash)
            guard isConsistent else { throw .corruptSnapshot("a fork record whose name, base or hashes do not agree") }
        }

        /// A record is consistent when its name is the one its parent and first hash give, its hashes are
        /// SHA-256 sized, the rival is below the first hash (it lost to it) and base is at least 1.
        public var isConsistent: Bool {
            firstHash.count == 32 && rivalHash.count == 32 && base >= 1
                && rivalHash.lexicographicallyPrecedes(firstHash)
                && ForkBranch.id(parent: parent, firstHash: firstHash) == branch
        }
    }

    /// A change folded into a baseline, as the names of what follows it need it: its hash (the baseline's head
    /// hash of `timeline`), the name it has (`timeline`, the root or a branch), its author's number, and the
    /// base of that name (0 on the root).
    public struct Anchor: Sendable, Hashable {
        public var hash: [UInt8]
        public var timeline: TimelineID
        public var authorSeq: UInt64
        public var base: UInt64

        public init(hash: [UInt8], timeline: TimelineID, authorSeq: UInt64, base: UInt64) {
            self.hash = hash
            self.timeline = timeline
            self.authorSeq = authorSeq
            self.base = base
        }
    }

    /// What naming gives: every named change's name, every branch, and each branch's record.
    public struct Naming: Sendable {
        public var names: [[UInt8]: Name] = [:]
        public var branches: [Branch] = []
        public var records: [Record] = []
    }

    /// Names every change of `root` held here (`nodes`: the changes whose bytes carry `root`, on any branch).
    /// The held changes with the smallest number start the walk (they follow the baseline, or are the begin).
    /// At every number where several held changes continue the same change, the one with the smallest hash
    /// keeps the name it continues and each other starts a branch named after it — which, compared as hash
    /// sequences from the fork point, is the lexicographically smallest branch keeping the name. Changes that
    /// continue nothing held (they cannot be reached from the start) are not named.
    public static func assign(root: TimelineID, _ nodes: [Node]) -> (names: [[UInt8]: Name], branches: [Branch]) {
        let naming = name(root: root, nodes)
        return (naming.names, naming.branches)
    }

    /// `assign` with what a baseline and earlier fork records tell (PROTOCOL.md §22.8). Held changes that
    /// continue an anchor (a baseline's head) go on under the anchor's name; only the rest start from the
    /// smallest number held. Where held changes continue one change, the rival hashes of those among them that
    /// a record names take part in the comparison as if held: a change a record says lost never keeps the name,
    /// and a change that is smallest among those held but not smaller than such a rival loses too.
    public static func name(
        root: TimelineID, _ nodes: [Node], anchors: [Anchor] = [], known: [Record] = []
    ) -> Naming {
        var naming = Naming()
        guard !nodes.isEmpty else { return naming }
        var children: [[UInt8]: [Node]] = [:]
        for node in nodes { children[node.previousHash, default: []].append(node) }
        var records: [[UInt8]: Record] = [:]
        for record in known where record.root == root && record.isConsistent { records[record.firstHash] = record }
        // A record names the first change of its branch, which its author numbered base + 1: a record whose base does
        // not fit the change it names is no record of it (a hostile peer's base at or above the change's number made
        // its names negative, and stopped the agent).
        func recordOf(_ node: Node) -> Record? {
            records[node.hash].flatMap { $0.base < node.seq && $0.base + 1 == node.seq ? $0 : nil }
        }
        var stack: [(node: Node, timeline: TimelineID, base: UInt64)] = []

        // Places held changes that continue one change, on `timeline` (offset `base`): the keeper goes on, every
        // other starts a branch (its record's, or one named after it).
        func place(_ group: [Node], timeline: TimelineID, base: UInt64) {
            let sorted = group.sorted { $0.hash.lexicographicallyPrecedes($1.hash) }
            var keeper = sorted.first(where: { recordOf($0) == nil })?.hash
            for node in sorted {
                if let rival = recordOf(node)?.rivalHash,
                    keeper == nil || rival.lexicographicallyPrecedes(keeper!)
                {
                    keeper = rival
                }
            }
            for node in sorted.reversed() {
                if node.hash == keeper {
                    stack.append((node, timeline, base))
                    continue
                }
                let record = recordOf(node) ?? Record(
                    branch: id(parent: timeline, firstHash: node.hash), root: root, parent: timeline,
                    base: node.seq - 1, firstHash: node.hash, rivalHash: keeper ?? [])
                naming.branches.append(record.asBranch)
                naming.records.append(record)
                stack.append((node, record.branch, record.base))
            }
        }

        var held = Set<[UInt8]>()
        for node in nodes { held.insert(node.hash) }
        let anchorHashes = Set(anchors.map(\.hash))
        // Iterative: a chain is as long as the timeline.
        for anchor in anchors.sorted(by: { $0.hash.lexicographicallyPrecedes($1.hash) }).reversed() {
            let group = (children[anchor.hash] ?? []).filter { $0.seq == anchor.authorSeq + 1 }
            if !group.isEmpty { place(group, timeline: anchor.timeline, base: anchor.base) }
        }
        let unanchored = nodes.filter { !held.contains($0.previousHash) && !anchorHashes.contains($0.previousHash) }
        if let first = unanchored.map(\.seq).min() {
            place(unanchored.filter { $0.seq == first }, timeline: root, base: 0)
        }
        while let (node, timeline, base) = stack.popLast() {
            guard naming.names[node.hash] == nil else { continue }
            naming.names[node.hash] = Name(timeline: timeline, seq: node.seq - base)
            let next = (children[node.hash] ?? []).filter { $0.seq == node.seq + 1 }
            if !next.isEmpty { place(next, timeline: timeline, base: base) }
        }
        naming.branches.sort { $0.id < $1.id }
        naming.records.sort { $0.branch < $1.branch }
        return naming
    }
}
