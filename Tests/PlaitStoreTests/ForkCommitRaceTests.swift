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

    @Test func aBatchValidatedBeforeAForkWasRenamedIsCheckedAgain() throws {
        try withTemporaryDirectory { directory in
            let homeSigner = try ForkFixtures.signer("home")
            let (original, timeline, forkPoint) = try ForkFixtures.home(
                in: directory, signer: homeSigner, list: Self.list)
            // Copy A writes two items; copy B one, at the fork point, hashing below A's there: B keeps the name.
            let (a, winner) = try ForkFixtures.fork(
                of: original, in: directory, signer: homeSigner, timeline: timeline, forkPoint: forkPoint,
                loser: { copy in try ForkFixtures.addItems(["a1", "a2"], list: Self.list, to: copy) },
                winner: { copy in try ForkFixtures.addItems(["b"], list: Self.list, to: copy) })

            let xSigner = try ForkFixtures.signer("x")
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
            let ySigner = try ForkFixtures.signer("y")
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
