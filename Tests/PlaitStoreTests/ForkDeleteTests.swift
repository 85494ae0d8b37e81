import Foundation
import PlaitCore
import PlaitTestSupport
import Testing

@testable import PlaitStore

/// `list.delete` after a fork (DESIGN §11, PROTOCOL.md §22.6), on real stores with real P-256 signatures: a copy
/// of a home deletes a list on the branch that later loses; whichever device sees what first, the delete removes
/// exactly the items its author saw (version 2), or only those below the fork point (version 1), never an item
/// the other copy added.
@Suite("list.delete across a fork")
struct ForkDeleteTests {
    static let list = ObjectID(high: 0x1157, low: 1)

    struct Scenario {
        var winner: Replica
        var loser: Replica
        var third: Replica
        /// Items of the shared history, of the winning copy, and of the losing copy (the deleter).
        var shared: [ObjectID]
        var winners: [ObjectID]
        var losers: [ObjectID]
    }

    /// A home with a list of two items, copied twice; each copy adds an item, the copy whose branch will lose adds
    /// one more and deletes the list (`v2`: observing head hashes, else a version-1 summary). A third device.
    static func scenario(in directory: TemporaryDirectory, v2: Bool, seed: UInt64) throws -> Scenario {
        var rng = SplitMix64(seed: seed)
        let keys = try TestKeyPair(commonName: "home")
        let signer = try P256Signer(keyPEM: keys.keyPEM, certificatePEM: keys.certificatePEM)
        let original = directory.file("home.db")
        let shared = [ObjectID.random(using: &rng), ObjectID.random(using: &rng)]
        do {
            let replica = try Replica(store: try Store.create(at: original, signer: signer, synchronousFull: false),
                                      signer: signer)
            try replica.edit { edit in
                try edit.append(.listCreate(id: list, title: "Groceries", color: nil, at: .bottom))
                for (index, item) in shared.enumerated() {
                    try edit.append(.itemCreate(id: item, list: list, text: "shared \(index)", at: .bottom))
                }
            }
        }
        var copies: [Replica] = []
        for index in 0..<2 {
            let path = directory.file("copy\(index).db")
            for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: original + suffix) {
                try FileManager.default.copyItem(atPath: original + suffix, toPath: path + suffix)
            }
            // A copy the store cannot tell from the original (a snapshot's clone), so the copies fork.
            try forgetStoreFile(storePath: path)
            copies.append(try Replica(store: try Store.open(at: path, synchronousFull: false), signer: signer))
        }
        let timeline = try copies[0].store.ownTimeline()
        let forkPoint = try copies[0].store.summary()[timeline] + 1
        var own: [[ObjectID]] = []
        for (index, copy) in copies.enumerated() {
            let item = ObjectID.random(using: &rng)
            try copy.edit { edit in
                try edit.append(.itemCreate(id: item, list: list, text: "copy \(index)", at: .bottom))
            }
            own.append([item])
        }
        // The branch whose change at the fork point has the smaller hash keeps the name (§22).
        let hashes = try copies.map { try $0.store.hash(of: ChangeRef(timeline: timeline, seq: forkPoint))! }
        let loserIndex = hashes[0].lexicographicallyPrecedes(hashes[1]) ? 1 : 0
        let (winner, loser) = (copies[1 - loserIndex], copies[loserIndex])
        let extra = ObjectID.random(using: &rng)
        try loser.edit { edit in
            try edit.append(.itemCreate(id: extra, list: list, text: "copy \(loserIndex) again", at: .bottom))
        }
        try loser.edit { edit in
            try edit.append(v2 ? try edit.listDelete(list) : .listDelete(id: list, observed: try edit.observedSummary()))
        }
        let thirdKeys = try TestKeyPair(commonName: "third")
        let thirdSigner = try P256Signer(keyPEM: thirdKeys.keyPEM, certificatePEM: thirdKeys.certificatePEM)
        let third = try Replica(
            store: try Store.create(at: directory.file("third.db"), signer: thirdSigner, synchronousFull: false),
            signer: thirdSigner)
        return Scenario(
            winner: winner, loser: loser, third: third, shared: shared, winners: own[1 - loserIndex],
            losers: own[loserIndex] + [extra])
    }

    static func pull(_ to: Replica, from: Replica) throws {
        let result = try to.integrate(encoded: try from.store.encodedChangesInReplayOrder())
        #expect(result.refused.isEmpty, "nothing is refused")
    }

    static func live(_ replica: Replica) -> Set<ObjectID> {
        Set(replica.state.items.compactMap { $0.value.deleted ? nil : $0.key })
    }

    /// Version 2: every device, whichever copy it met first, removes the shared items and the deleter's own and
    /// keeps the other copy's item (and so the list).
    @Test(arguments: [0xDE1E_0001 as UInt64, 0xDE1E_0002, 0xDE1E_0003])
    func aVersion2DeleteOnTheLosingBranchRemovesExactlyWhatItsAuthorSaw(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            let s = try Self.scenario(in: directory, v2: true, seed: seed)
            // The third device sees the deleter first (the delete covers its chain before any fork is known),
            // then the winner (the fork is found, the deleter's branch renamed, everything replayed).
            try Self.pull(s.third, from: s.loser)
            #expect(Self.live(s.third).isEmpty, "before the fork is known, the delete removes all it saw (\(seed))")
            try Self.pull(s.third, from: s.winner)
            try Self.pull(s.winner, from: s.loser)
            try Self.pull(s.loser, from: s.winner)
            for (name, replica) in [("winner", s.winner), ("loser", s.loser), ("third", s.third)] {
                #expect(Self.live(replica) == Set(s.winners), "\(name) keeps only the item the deleter never saw (\(seed))")
                #expect(replica.state.lists[Self.list]?.deleted == false, "\(name): the list survives (\(seed))")
                #expect(try replica.store.forkBranches().count == 1, "\(name) holds the renamed branch (\(seed))")
            }
            #expect(s.winner.digest == s.loser.digest && s.loser.digest == s.third.digest, "seed \(seed)")
        }
    }

    /// Version 1: an entry `T:n` at or past the fork point covers only `T:1…f−1`: the shared items go, the other
    /// copy's item stays — and so do the deleter's own (its author's summary cannot say which branch it saw).
    @Test(arguments: [0xDE1E_0101 as UInt64, 0xDE1E_0102])
    func aVersion1DeleteCoversOnlyWhatPrecedesTheFork(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            let s = try Self.scenario(in: directory, v2: false, seed: seed)
            try Self.pull(s.third, from: s.winner)
            try Self.pull(s.third, from: s.loser)
            try Self.pull(s.winner, from: s.loser)
            try Self.pull(s.loser, from: s.third)
            for (name, replica) in [("winner", s.winner), ("loser", s.loser), ("third", s.third)] {
                #expect(Self.live(replica) == Set(s.winners + s.losers), "\(name) (seed \(seed))")
                #expect(Self.live(replica).isDisjoint(with: s.shared), "\(name): the shared items go (\(seed))")
            }
            #expect(s.winner.digest == s.loser.digest && s.loser.digest == s.third.digest, "seed \(seed)")
        }
    }

    /// A version-2 delete in the same edit as the items it covers (one `plait batch`, a demo step): its own head is
    /// this edit's last change, whose head row the edit writes only at its end. It was found nowhere, so the delete
    /// covered nothing of the own timeline and the list stayed (BatchTests' one-by-one comparison found it).
    @Test func aVersion2DeleteInTheEditThatAddedTheItemsRemovesThem() throws {
        try withTemporaryDirectory { directory in
            let keys = try TestKeyPair(commonName: "home")
            let signer = try P256Signer(keyPEM: keys.keyPEM, certificatePEM: keys.certificatePEM)
            let replica = try Replica(
                store: try Store.create(at: directory.file("home.db"), signer: signer, synchronousFull: false),
                signer: signer)
            let kept = ObjectID(high: 0x1157, low: 2)
            try replica.edit { edit in
                try edit.append(.listCreate(id: kept, title: "Kept", color: nil, at: .bottom))
                try edit.append(.itemCreate(id: ObjectID(high: 0x1157, low: 3), list: kept, text: "k", at: .bottom))
            }
            try replica.edit { edit in
                try edit.append(.listCreate(id: Self.list, title: "Chores", color: nil, at: .bottom))
                try edit.append(.itemCreate(id: ObjectID(high: 0x1157, low: 4), list: Self.list, text: "laundry",
                                            at: .bottom))
                let delete = try edit.listDelete(Self.list)
                #expect(delete.version == 2)
                try edit.append(delete)
                #expect(edit.state.lists[Self.list]?.deleted == true, "applied as it is appended")
            }
            #expect(replica.state.lists[Self.list]?.deleted == true)
            #expect(replica.state.lists[kept]?.deleted == false)
            #expect(Self.live(replica) == [ObjectID(high: 0x1157, low: 3)])
            // A replay from the change rows alone agrees.
            let digest = replica.digest
            _ = try replica.rebuild()
            #expect(replica.digest == digest)
            #expect(replica.state.lists[Self.list]?.deleted == true)
        }
    }
}
