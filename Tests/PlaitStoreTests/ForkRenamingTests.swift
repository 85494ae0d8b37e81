import Foundation
import GRDB
import PlaitCore
import PlaitTestSupport
import Testing

@testable import PlaitStore

/// Forks resolved by renaming (DESIGN §11) on real stores with real P-256 signatures: copies of one home author
/// on the same timeline, and however the copies and their changes meet, every device ends with every change of
/// every copy, the same branch keeping the timeline's name, the same names for the others, and the same state.
@Suite("Forks resolved by renaming")
struct ForkRenamingTests {
    /// A home, `copies` copies of its store file made after `shared` edits, and `own` edits on each copy.
    struct Copies {
        var replicas: [Replica]
        var timeline: TimelineID
        /// The hash of every change each copy authored, its shared history included.
        var authored: [Set<[UInt8]>]
        var signer: P256Signer
    }

    static func makeCopies(
        in directory: TemporaryDirectory, copies: Int, shared: Int, own: Int, rng: inout SplitMix64
    ) throws -> Copies {
        let keys = try TestKeyPair(commonName: "home")
        let signer = try P256Signer(keyPEM: keys.keyPEM, certificatePEM: keys.certificatePEM)
        let original = directory.file("home.db")
        do {
            let store = try Store.create(at: original, signer: signer, synchronousFull: false)
            try randomEdits(try Replica(store: store, signer: signer), count: shared, rng: &rng)
        }
        var replicas: [Replica] = []
        for index in 0..<copies {
            // `cp -a` of a home whose writer is idle: the database with its write-ahead log.
            let path = directory.file("copy\(index).db")
            for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: original + suffix) {
                try FileManager.default.copyItem(atPath: original + suffix, toPath: path + suffix)
            }
            // A copy the store cannot tell from the original (a snapshot's clone), so the copies fork.
            try forgetStoreFile(storePath: path)
            replicas.append(try Replica(store: try Store.open(at: path, synchronousFull: false), signer: signer))
        }
        let timeline = try replicas[0].store.ownTimeline()
        var authored: [Set<[UInt8]>] = []
        for replica in replicas {
            #expect(try replica.store.ownTimeline() == timeline)
            try randomEdits(replica, count: own, rng: &rng)
            authored.append(Set(try replica.store.encodedChangesInReplayOrder().map { $0.change.hash }))
        }
        return Copies(replicas: replicas, timeline: timeline, authored: authored, signer: signer)
    }

    /// `to` pulls everything `from` holds, as one batch through the intake.
    static func pull(_ to: Replica, from: Replica) throws -> Replica.IntegrateResult {
        try to.integrate(encoded: try from.store.encodedChangesInReplayOrder())
    }

    /// The assignment is a function of the set of changes: any order of the same nodes gives the same names, the
    /// smallest first hash keeps the timeline, and the others are named after the timeline and their first hash.
    @Test(arguments: [0xF0E1_0001 as UInt64, 0xF0E1_0002])
    func namingDependsOnlyOnTheChanges(seed: UInt64) {
        var rng = SplitMix64(seed: seed)
        let root = TimelineID(rng.next())
        func hash() -> [UInt8] { (0..<32).map { _ in UInt8(truncatingIfNeeded: rng.next()) } }
        // A shared prefix 1…4, then three branches of 3 changes each from 5 on, and a fork of one branch at 7.
        var nodes: [ForkBranch.Node] = []
        var previous = Change.zeroHash
        for seq in 1...4 as ClosedRange<UInt64> {
            let node = ForkBranch.Node(seq: seq, hash: hash(), previousHash: previous)
            nodes.append(node)
            previous = node.hash
        }
        let forkPoint = previous
        var firsts: [[UInt8]] = []
        var sixes: [[UInt8]] = []
        for _ in 0..<3 {
            var chain = forkPoint
            for seq in 5...7 as ClosedRange<UInt64> {
                let node = ForkBranch.Node(seq: seq, hash: hash(), previousHash: chain)
                nodes.append(node)
                if seq == 5 { firsts.append(node.hash) }
                if seq == 6 { sixes.append(node.hash) }
                chain = node.hash
            }
        }
        let nested = ForkBranch.Node(seq: 7, hash: hash(), previousHash: sixes[0])
        nodes.append(nested)
        let reference = ForkBranch.assign(root: root, nodes)
        for round in 0..<20 {
            let shuffled = nodes.shuffled(using: &rng)
            let again = ForkBranch.assign(root: root, shuffled)
            #expect(again.names == reference.names, "seed \(seed), round \(round)")
            #expect(again.branches == reference.branches, "seed \(seed), round \(round)")
        }
        #expect(reference.names.count == nodes.count, "every change is named")
        let sorted = firsts.sorted { $0.lexicographicallyPrecedes($1) }
        #expect(reference.names[sorted[0]] == ForkBranch.Name(timeline: root, seq: 5), "seed \(seed)")
        for loser in sorted.dropFirst() {
            let id = ForkBranch.id(parent: root, firstHash: loser)
            #expect(reference.names[loser] == ForkBranch.Name(timeline: id, seq: 1), "seed \(seed)")
        }
        #expect(reference.branches.count == 3, "two losing branches at 5 and one at 7 (seed \(seed))")
        for node in nodes where node.seq <= 4 {
            #expect(reference.names[node.hash] == ForkBranch.Name(timeline: root, seq: node.seq))
        }
    }

    /// Three copies of one home author on the same timeline; three devices (the copies themselves) meet in
    /// different orders. At the end all three hold every change of every copy, under the same names, with the
    /// same state; the branch whose first change has the smallest hash keeps the timeline's name; each copy whose
    /// branch lost goes on authoring on a timeline of its own, and that arrives everywhere too.
    @Test(arguments: [0xF0E1_0101 as UInt64, 0xF0E1_0102, 0xF0E1_0103])
    func aThreeWayForkIsResolvedAlikeWhicheverPairMeetsFirst(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let copies = try Self.makeCopies(in: directory, copies: 3, shared: 4, own: 6, rng: &rng)
            let paths = copies.replicas.map(\.store.path)
            let all = copies.authored.reduce(Set<[UInt8]>()) { $0.union($1) }
            var outcomes: [String] = []
            for (run, order) in [[(0, 1), (1, 2), (2, 0)], [(2, 1), (0, 2), (1, 0)], [(1, 0), (2, 0), (0, 1)]].enumerated() {
                // The same three copies each time, as they were before they met.
                var replicas: [Replica] = []
                for (index, path) in paths.enumerated() {
                    let target = directory.file("run\(run)-\(index).db")
                    for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: path + suffix) {
                        try FileManager.default.copyItem(atPath: path + suffix, toPath: target + suffix)
                    }
                    try forgetStoreFile(storePath: target)
                    replicas.append(
                        try Replica(store: try Store.open(at: target, synchronousFull: false),
                                    signer: copies.signer))
                }
                // First contacts in this order, then everyone with everyone until nothing moves.
                for (to, from) in order { _ = try Self.pull(replicas[to], from: replicas[from]) }
                for _ in 0..<2 {
                    for to in 0..<3 {
                        for from in 0..<3 where from != to { _ = try Self.pull(replicas[to], from: replicas[from]) }
                    }
                }
                for replica in replicas {
                    let held = Set(try replica.store.encodedChangesInReplayOrder().map { $0.change.hash })
                    #expect(held == all, "every change of every copy is held (seed \(seed), order \(order))")
                    #expect(try replica.store.summary() == replicas[0].store.summary(), "seed \(seed)")
                    #expect(replica.digest == replicas[0].digest, "same state (seed \(seed), order \(order))")
                    #expect(try replica.store.forkBranches() == replicas[0].store.forkBranches())
                    #expect(try replica.store.forkBranches().count == 2, "two branches lost (seed \(seed))")
                }
                outcomes.append(
                    try replicas[0].store.summary().description + " "
                        + replicas[0].store.forkBranches().map { "\($0.id)/\($0.parent)/\($0.base)" }.joined(separator: ",")
                        + " " + replicas[0].digest.hexString)
                // The winner: of the three changes at the fork point, the smallest hash keeps the name.
                let stored = try replicas[0].store.encodedChangesInReplayOrder()
                let atFork = stored.filter {
                    $0.change.authored.timeline == copies.timeline && $0.change.authored.seq == 6
                }
                #expect(atFork.count == 3, "three changes stand at the fork point (seed \(seed))")
                let winner = atFork.min { $0.change.hash.lexicographicallyPrecedes($1.change.hash) }!
                #expect(winner.change.ref == ChangeRef(timeline: copies.timeline, seq: 6) && winner.change.origin == nil)
                for loser in atFork where loser.change.hash != winner.change.hash {
                    #expect(loser.change.ref == ChangeRef(
                        timeline: ForkBranch.id(parent: copies.timeline, firstHash: loser.change.hash), seq: 1))
                    #expect(loser.change.origin == ChangeRef(timeline: copies.timeline, seq: 6))
                }
                // The copies whose branch lost author on new timelines; the winner goes on under the name.
                var next: [TimelineID] = []
                for replica in replicas {
                    try randomEdits(replica, count: 2, rng: &rng)
                    next.append(try replica.store.ownTimeline())
                }
                #expect(next.filter { $0 == copies.timeline }.count == 1, "one copy keeps the name (seed \(seed))")
                #expect(Set(next).count == 3, "the others each began a timeline of their own (seed \(seed))")
                for to in 0..<3 { for from in 0..<3 where from != to { _ = try Self.pull(replicas[to], from: replicas[from]) } }
                for replica in replicas {
                    #expect(try replica.store.summary() == replicas[0].store.summary(), "seed \(seed)")
                    #expect(replica.digest == replicas[0].digest, "seed \(seed)")
                }
            }
            #expect(outcomes.allSatisfy { $0 == outcomes[0] }, "every order gives the same names (seed \(seed))")
        }
    }

    /// A device that is not a copy (it only relays) gets both branches of a copied home from one copy that has
    /// resolved them, and names them the same way without ever seeing the fork happen.
    @Test(arguments: [0xF0E1_0201 as UInt64])
    func aThirdDeviceTakesTheRenamedBranchesFromARelay(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let copies = try Self.makeCopies(in: directory, copies: 2, shared: 3, own: 5, rng: &rng)
            let (a, b) = (copies.replicas[0], copies.replicas[1])
            let fork = try Self.pull(a, from: b)
            #expect(fork.forks == [copies.timeline], "seed \(seed)")
            #expect(fork.refused.isEmpty, "a fork of a signed timeline is not refused (seed \(seed))")
            let keys = try TestKeyPair(commonName: "third")
            let signer = try P256Signer(keyPEM: keys.keyPEM, certificatePEM: keys.certificatePEM)
            let third = try Replica(
                store: try Store.create(at: directory.file("third.db"), signer: signer, synchronousFull: false),
                signer: signer)
            let relayed = try Self.pull(third, from: a)
            #expect(relayed.refused.isEmpty, "seed \(seed)")
            #expect(try third.store.forkBranches() == a.store.forkBranches())
            let mine = try third.store.ownTimeline()
            var expected = try a.store.summary()
            expected[mine] = try third.store.summary()[mine]
            #expect(try third.store.summary() == expected, "seed \(seed)")
            // Its state is a's with its own (empty) begin: the same lists and items.
            #expect(third.state.liveListIDs == a.state.liveListIDs)
            #expect(third.state.items == a.state.items)
            // And b, pulling from the third device, ends where a is.
            _ = try Self.pull(b, from: third)
            _ = try Self.pull(a, from: third)
            #expect(b.digest == a.digest && b.digest == third.digest, "seed \(seed)")
        }
    }
}
