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

    /// Names every change of `root` held here (`nodes`: the changes whose bytes carry `root`, on any branch).
    /// The held changes with the smallest number start the walk (they follow the baseline, or are the begin).
    /// At every number where several held changes continue the same change, the one with the smallest hash
    /// keeps the name it continues and each other starts a branch named after it — which, compared as hash
    /// sequences from the fork point, is the lexicographically smallest branch keeping the name. Changes that
    /// continue nothing held (they cannot be reached from the start) are not named.
    public static func assign(root: TimelineID, _ nodes: [Node]) -> (names: [[UInt8]: Name], branches: [Branch]) {
        guard let first = nodes.map(\.seq).min() else { return ([:], []) }
        var children: [[UInt8]: [Node]] = [:]
        for node in nodes { children[node.previousHash, default: []].append(node) }
        var names: [[UInt8]: Name] = [:]
        var branches: [Branch] = []
        // Each entry: a change to name on `timeline`, where `base` is that timeline's offset. Iterative: a chain
        // is as long as the timeline.
        var stack: [(node: Node, timeline: TimelineID, base: UInt64)] = []
        let starts = nodes.filter { $0.seq == first }.sorted { $0.hash.lexicographicallyPrecedes($1.hash) }
        for (index, start) in starts.enumerated().reversed() {
            if index == 0 {
                stack.append((start, root, 0))
            } else {
                let id = id(parent: root, firstHash: start.hash)
                branches.append(Branch(id: id, parent: root, base: start.seq - 1))
                stack.append((start, id, start.seq - 1))
            }
        }
        while let (node, timeline, base) = stack.popLast() {
            guard names[node.hash] == nil else { continue }
            names[node.hash] = Name(timeline: timeline, seq: node.seq - base)
            let next = (children[node.hash] ?? []).filter { $0.seq == node.seq + 1 }
                .sorted { $0.hash.lexicographicallyPrecedes($1.hash) }
            for (index, child) in next.enumerated().reversed() {
                if index == 0 {
                    stack.append((child, timeline, base))
                } else {
                    let id = id(parent: timeline, firstHash: child.hash)
                    branches.append(Branch(id: id, parent: timeline, base: node.seq))
                    stack.append((child, id, node.seq))
                }
            }
        }
        return (names, branches.sorted { $0.id < $1.id })
    }
}
