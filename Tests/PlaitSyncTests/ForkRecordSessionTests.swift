import Foundation
import PlaitCore
import PlaitSession
import PlaitStore
import PlaitTestSupport
import PlaitWire
import Testing

/// Fork records in Hello (PROTOCOL.md §22.9) over a real session on a socket pair, real stores, real P-256 keys.
///
/// A home is copied; copy W writes b1…b4, copy L writes a1…a3 (W's first change hashes lower: W keeps the name T).
/// Device X holds only W's changes, writes, and compacts: its baseline folds the fork point. Device Y holds both
/// copies' changes and so the fork record of L's branch. Device D adopted X's baseline and then syncs with Y.
@Suite struct ForkRecordSessionTests {
    static let list = ObjectID(high: 0xF4E5, low: 1)

    static func signer(_ name: String) throws -> P256Signer {
        let key = try TestKeyPair(.p256, commonName: name)
        return try P256Signer(keyPEM: key.keyPEM, certificatePEM: key.certificatePEM)
    }

    static func replica(_ name: String, in directory: TemporaryDirectory) throws -> Replica {
        let signer = try signer(name)
        return try Replica(
            store: try Store.create(at: directory.file(name + ".db"), signer: signer, synchronousFull: false),
            signer: signer)
    }

    static func add(_ texts: [String], to replica: Replica) throws {
        for text in texts {
            try replica.edit { _ = try $0.append(.itemCreate(id: .random(), list: Self.list, text: text, at: .bottom)) }
        }
    }

    static func items(_ replica: Replica) -> Set<String> {
        Set(replica.state.items.values.filter { !$0.deleted }.map(\.text))
    }

    /// The copies of a copied home: (loser, winner), the winner's first change after the copy hashing lower.
    static func copiedHome(in directory: TemporaryDirectory) throws -> (loser: Replica, winner: Replica, timeline: TimelineID) {
        let signer = try signer("home")
        let original = directory.file("home.db")
        let home = try Replica(store: try Store.create(at: original, signer: signer, synchronousFull: false), signer: signer)
        try home.edit { _ = try $0.append(.listCreate(id: Self.list, title: "Groceries", color: nil, at: .bottom)) }
        let timeline = try home.store.ownTimeline()
        let forkPoint = ChangeRef(timeline: timeline, seq: try home.store.summary()[timeline] + 1)
        for attempt in 0..<64 {
            var copies: [Replica] = []
            for (role, texts) in [("loser", ["a1", "a2", "a3"]), ("winner", ["b1", "b2", "b3", "b4"])] {
                let path = directory.file("\(role)\(attempt).db")
                for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: original + suffix) {
                    try FileManager.default.copyItem(atPath: original + suffix, toPath: path + suffix)
                }
                // A copy the store cannot tell from the original (a snapshot's clone), so the copies fork.
                try forgetStoreFile(storePath: path)
                let copy = try Replica(store: try Store.open(at: path, synchronousFull: false), signer: signer)
                try add(texts, to: copy)
                copies.append(copy)
            }
            let hashes = try copies.map { try #require(try $0.store.hash(of: forkPoint)) }
            if hashes[1].lexicographicallyPrecedes(hashes[0]) { return (copies[0], copies[1], timeline) }
        }
        throw StoreError.inconsistent("the winning copy never hashed lower in 64 attempts")
    }

    /// Before: D took L's a1…a3 for changes its baseline folds (below its entry for T, continuing a folded change)
    /// and dropped them, so L's items reached no device that adopted such a baseline. Y's Hello now carries the
    /// record of L's branch: D learns it at the greeting and takes the branch from Y, named as Y names it.
    @Test func aPeersHelloBringsTheRecordThatLetsABranchThroughAFoldedForkPoint() throws {
        try withTemporaryDirectory { directory in
            let (loser, winner, timeline) = try Self.copiedHome(in: directory)
            let x = try Self.replica("x", in: directory)
            #expect(try x.integrate(encoded: try winner.store.encodedChangesInReplayOrder()).refused.isEmpty)
            try Self.add(["x"], to: x)
            _ = try x.compact()
            let baseline = try #require(try x.store.baseline())
            #expect(baseline.forks.isEmpty && baseline.summary[timeline] > 1, "X folds the fork point, knowing no fork")

            let y = try Self.replica("y", in: directory)
            #expect(try y.integrate(encoded: try winner.store.encodedChangesInReplayOrder()).refused.isEmpty)
            #expect(try y.integrate(encoded: try loser.store.encodedChangesInReplayOrder()).refused.isEmpty)
            let branch = try #require(try y.store.forkBranches().first).id

            let d = try Self.replica("d", in: directory)
            _ = try d.adopt(try Baseline(decoding: baseline.encoded()[...]))
            #expect(!Self.items(d).contains("a1"))

            let results = try runSession(
                (y, SessionIdentity(deviceID: "YYYYYYY", name: "y")), (d, SessionIdentity(deviceID: "DDDDDDD", name: "d")))
            let (_, atD) = try results.results()

            #expect(try d.store.forkBranches().map(\.id) == [branch], "D learnt the record from Y's Hello")
            #expect(try d.store.summary()[branch] == 3, "L's a1…a3 are T′:1…3 at D")
            for seq in UInt64(1)...3 {
                let ref = ChangeRef(timeline: branch, seq: seq)
                #expect(try d.store.hash(of: ref) == y.store.hash(of: ref))
            }
            #expect(Self.items(d).isSuperset(of: ["a1", "a2", "a3", "b1", "b2", "b3", "b4"]))
            #expect(atD.pulled >= 3)
        }
    }
}
