import Foundation
import PlaitCore
import PlaitTestSupport
import Testing

@testable import PlaitStore

/// Homes copied with their files and used on both copies (DESIGN §11), for the tests of forks on real stores with
/// real P-256 keys.
enum ForkFixtures {
    static func signer(_ name: String) throws -> P256Signer {
        let keys = try TestKeyPair(commonName: name)
        return try P256Signer(keyPEM: keys.keyPEM, certificatePEM: keys.certificatePEM)
    }

    /// Copies a store's files as `cp -a` would while nothing writes, as a copy the store cannot tell from the
    /// original (a snapshot's clone, `forgetStoreFile`), so that the copies' edits fork the timeline.
    static func copy(_ original: String, to path: String) throws {
        for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: original + suffix) {
            try FileManager.default.copyItem(atPath: original + suffix, toPath: path + suffix)
        }
        try forgetStoreFile(storePath: path)
    }

    /// A new signed home, `directory/home.db`, holding one list `list`: its path (what is copied), its timeline,
    /// and the number the copies' first changes get (the fork point).
    static func home(
        in directory: TemporaryDirectory, signer: P256Signer, list: ObjectID
    ) throws -> (path: String, timeline: TimelineID, forkPoint: UInt64) {
        let original = directory.file("home.db")
        let home = try Replica(
            store: try Store.create(at: original, signer: signer, synchronousFull: false), signer: signer)
        try home.edit { edit in
            _ = try edit.append(.listCreate(id: list, title: "Groceries", color: nil, at: .bottom))
        }
        let timeline = try home.store.ownTimeline()
        return (original, timeline, try home.store.summary()[timeline] + 1)
    }

    /// Adds items to `list`, one edit each, as a user adding them one by one.
    static func addItems(_ texts: [String], list: ObjectID, to replica: Replica) throws {
        for text in texts {
            try replica.edit { edit in
                _ = try edit.append(.itemCreate(id: .random(), list: list, text: text, at: .bottom))
            }
        }
    }

    /// Two copies of `original`, each authoring what it is given, such that the winner's change at `forkPoint`
    /// hashes below the loser's (so it keeps the name T when they meet, PROTOCOL.md §22). Hashes cover wall times
    /// and random IDs, so which copy wins is drawn anew: each attempt authors both copies afresh and wins with
    /// probability 1/2 (64 attempts all failing: 2⁻⁶⁴), never depending on one copy's hash being small.
    static func fork(
        of original: String, in directory: TemporaryDirectory, signer: P256Signer, timeline: TimelineID,
        forkPoint: UInt64, loser writeLoser: (Replica) throws -> Void, winner writeWinner: (Replica) throws -> Void
    ) throws -> (loser: Replica, winner: Replica) {
        let at = ChangeRef(timeline: timeline, seq: forkPoint)
        for attempt in 0..<64 {
            var copies: [Replica] = []
            for role in ["loser", "winner"] {
                let path = directory.file("\(role)\(attempt).db")
                try copy(original, to: path)
                let replica = try Replica(store: try Store.open(at: path, synchronousFull: false), signer: signer)
                try role == "loser" ? writeLoser(replica) : writeWinner(replica)
                copies.append(replica)
            }
            let hashes = try copies.map { try #require(try $0.store.hash(of: at)) }
            if hashes[1].lexicographicallyPrecedes(hashes[0]) { return (copies[0], copies[1]) }
        }
        throw StoreError.inconsistent("the winning copy's change did not hash below the other's in 64 attempts")
    }
}
