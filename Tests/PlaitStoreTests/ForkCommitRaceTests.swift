import Foundation
import PlaitCore
import PlaitTestSupport
import Testing

@testable import PlaitStore

/// A batch validated before another session's commit renamed a fork (DESIGN §11), on real stores with real P-256
/// signatures. The copied-home chaos test found it: device y, syncing with both copies of a home at once, stored a
/// change on the wrong chain ("stored change T:67 is damaged", then set good changes aside) or failed its commit
/// with "UNIQUE constraint failed: changes.tl, changes.seq", and the three devices did not converge.
///
/// X holds copy A's history of a home up to T:3. A batch with A's T:4 is validated; before it commits, copy B's
/// history arrives and wins the fork at 3: T:3 is now B's change, A's T:3 is renamed to a branch. T's head is still
/// number 3, so the old check (the head numbers the batch was validated against) let A's T:4 in as T:4, continuing
/// B's chain. It must be revalidated and filed on A's branch.
@Suite("A fork renamed between a batch's validation and its commit", .serialized)
struct ForkCommitRaceTests {
    static let list = ObjectID(high: 0xFC, low: 1)

    static func signer(_ name: String) throws -> P256Signer {
        let keys = try TestKeyPair(commonName: name)
        return try P256Signer(keyPEM: keys.keyPEM, certificatePEM: keys.certificatePEM)
    }

    static func copy(_ original: String, to path: String) throws {
        for suffix in ["", "-wal"] where FileManager.default.fileExists(atPath: original + suffix) {
            try FileManager.default.copyItem(atPath: original + suffix, toPath: path + suffix)
        }
    }

    @Test func aBatchValidatedBeforeAForkWasRenamedIsCheckedAgain() throws {
        try withTemporaryDirectory { directory in
            let homeSigner = try Self.signer("home")
            let original = directory.file("home.db")
            do {
                let home = try Replica(
                    store: try Store.create(at: original, signer: homeSigner, synchronousFull: false),
                    signer: homeSigner)
                try home.edit { edit in
                    try edit.append(.listCreate(id: Self.list, title: "Groceries", color: nil, at: .bottom))
                }
            }
            try Self.copy(original, to: directory.file("a.db"))
            let a = try Replica(store: try Store.open(at: directory.file("a.db"), synchronousFull: false),
                                signer: homeSigner)
            let timeline = try a.store.ownTimeline()
            let forkPoint = try a.store.summary()[timeline] + 1
            for text in ["a1", "a2"] {
                try a.edit { edit in
                    try edit.append(.itemCreate(id: .random(), list: Self.list, text: text, at: .bottom))
                }
            }
            let aFirst = try #require(try a.store.hash(of: ChangeRef(timeline: timeline, seq: forkPoint)))
            // Copy B writes one change at the fork point, one whose hash is below A's there: B keeps the name.
            var b: Replica?
            for attempt in 0..<64 where b == nil {
                let path = directory.file("b\(attempt).db")
                try Self.copy(original, to: path)
                let candidate = try Replica(store: try Store.open(at: path, synchronousFull: false), signer: homeSigner)
                try candidate.edit { edit in
                    try edit.append(.itemCreate(id: .random(), list: Self.list, text: "b #\(attempt)", at: .bottom))
                }
                let first = try #require(try candidate.store.hash(of: ChangeRef(timeline: timeline, seq: forkPoint)))
                if first.lexicographicallyPrecedes(aFirst) { b = candidate }
            }
            let winner = try #require(b)

            let xSigner = try Self.signer("x")
            let x = try Replica(
                store: try Store.create(at: directory.file("x.db"), signer: xSigner, synchronousFull: false),
                signer: xSigner)
            let fromA = try a.store.encodedChangesInReplayOrder()
            let last = try #require(fromA.first { $0.change.timeline == timeline && $0.change.seq == forkPoint + 1 })
            let upToFork = fromA.filter { $0.change.timeline != timeline || $0.change.seq <= forkPoint }
            #expect(try x.integrate(encoded: upToFork).refused.isEmpty)

            // A's next change is checked against T's head, 3, on A's chain…
            let validated = try x.validate([last], skip: [])
            #expect(validated.verdict.accepted.count == 1)
            // …then B's history arrives (another session) and wins at 3; T's head is number 3 again, on B's chain.
            #expect(try x.integrate(encoded: try winner.store.encodedChangesInReplayOrder()).refused.isEmpty)
            let branches = try x.store.forkBranches()
            #expect(branches.count == 1)
            #expect(try x.store.hash(of: ChangeRef(timeline: timeline, seq: forkPoint))
                    == winner.store.hash(of: ChangeRef(timeline: timeline, seq: forkPoint)))

            let result = try x.commit(validated)
            #expect(result.refused.isEmpty, "\(result.refused)")
            // A's second change is on A's branch, after A's first; T stops at B's change.
            #expect(try x.store.summary()[timeline] == forkPoint)
            let branch = try #require(branches.first)
            #expect(try x.store.summary()[branch.id] == 2)
            #expect(try x.store.hash(of: ChangeRef(timeline: branch.id, seq: 2)) == last.change.hash)
            // Every stored chain continues: nothing looks damaged to a sender or to doctor.
            let page = try x.store.streamPageEncoded(
                for: Summary(), within: try x.store.summary(), after: nil, limit: 1_000)
            #expect(page.damaged.isEmpty, "\(page.damaged)")
            // Everything as a device that got the same changes in one go has it.
            let ySigner = try Self.signer("y")
            let y = try Replica(
                store: try Store.create(at: directory.file("y.db"), signer: ySigner, synchronousFull: false),
                signer: ySigner)
            #expect(try y.integrate(encoded: fromA).refused.isEmpty)
            #expect(try y.integrate(encoded: try winner.store.encodedChangesInReplayOrder()).refused.isEmpty)
            // (Each holds its own timeline's begin besides.)
            let (yOwn, xOwn) = (try y.store.ownTimeline(), try x.store.ownTimeline())
            let ys = Summary(try y.store.summary().heads.filter { $0.key != yOwn })
            let xs = Summary(try x.store.summary().heads.filter { $0.key != xOwn })
            #expect(ys == xs, "\(ys) vs \(xs)")
            #expect(y.digest == x.digest)
        }
    }
}
