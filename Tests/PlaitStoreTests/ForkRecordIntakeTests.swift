import Foundation
import GRDB
import PlaitCore
import PlaitTestSupport
import Testing

@testable import PlaitStore

/// A fork record names a held change as its branch's first change (PROTOCOL.md §22.8 rule 2) also where the change
/// arrives continuing the head held under its timeline's own name, and a change held on a branch is a duplicate
/// under its author's name (§22 "Receiving"). On real stores with real P-256 signatures.
///
/// The hostile tester of 2026-11-25 (F2) sent device A a consistent record naming device C's change C:3 as a losing
/// branch's first change, with a rival nobody holds. A renamed C:3… to the branch, as a record says; a fresh device
/// D, given the same record (A's Hello carries it) and A's changes, filed them by their chain on C's own name. D's
/// `plait sync` with A then failed every time ("the peer ended its stream without changes it announced"), and A
/// stored C:3… a second time when D sent them back under C's name. The same happened to honest devices: a losing
/// copy that learnt the fork's record, and a fresh device syncing from it.
@Suite("Fork records at the intake")
struct ForkRecordIntakeTests {
    static func device(_ name: String, in directory: TemporaryDirectory) throws -> Replica {
        let signer = try ForkFixtures.signer(name)
        return try Replica(
            store: try Store.create(at: directory.file("\(name).db"), signer: signer, synchronousFull: false),
            signer: signer)
    }

    static func records(_ replica: Replica) throws -> [ForkBranch.Record] {
        try replica.store.read { db in try Store.forkRecords(db) }
    }

    /// Both summaries without the two devices' own timelines (each signed device begins its own).
    static func shared(_ x: Replica, _ y: Replica) throws -> (Summary, Summary) {
        var (left, right) = (try x.store.summary(), try y.store.summary())
        for own in [try x.store.ownTimeline(), try y.store.ownTimeline()] {
            left[own] = 0
            right[own] = 0
        }
        return (left, right)
    }

    static func items(_ replica: Replica) -> [String] {
        replica.state.items.values.filter { !$0.deleted }.map(\.text).sorted()
    }

    /// Sends everything `from` holds to `to` as a session would (by their names, in replay order) and returns how
    /// many change rows `to` stored.
    static func send(_ from: Replica, to: Replica) throws -> Int {
        let before = try to.store.changeCount()
        let result = try to.integrate(encoded: try from.store.encodedChangesInReplayOrder())
        #expect(result.refused.isEmpty, "\(result.refused)")
        return try to.store.changeCount() - before
    }

    @Test(arguments: [0xF2F2_0001 as UInt64])
    func aForgedRecordNamesTheSameChangesOnEveryDeviceAndNothingIsStoredTwice(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let c = try Self.device("c", in: directory)
            try randomEdits(c, count: 6, rng: &rng)
            let timeline = try c.store.ownTimeline()
            let held = try c.store.changeCount()  // its begin and the edits
            let a = try Self.device("a", in: directory)
            #expect(try Self.send(c, to: a) == held, "seed \(seed)")

            // The forged record: C:3 lost to a rival hash nobody holds.
            let third = try #require(try c.store.encodedChanges(of: timeline, from: 3, limit: 1).first)
            let firstHash = SHA256.hash(third.bytes)
            let forged = ForkBranch.Record(
                branch: ForkBranch.id(parent: timeline, firstHash: firstHash), root: timeline, parent: timeline, base: 2,
                firstHash: firstHash, rivalHash: [UInt8](repeating: 0, count: 31) + [1])
            #expect(forged.isConsistent)
            #expect(try a.learnForkRecords([forged]).renamed == [timeline], "seed \(seed)")
            #expect(try a.store.summary()[forged.branch] == UInt64(held - 2), "seed \(seed): A names C:3… on the branch")

            // D learns the record (A's Hello) and takes A's changes: it names them as A does.
            let d = try Self.device("d", in: directory)
            #expect(try d.learnForkRecords([forged]).learnt == 1)
            #expect(try Self.send(a, to: d) == held + 1, "seed \(seed): C's changes and A's own begin")
            let (dSummary, aSummary) = try Self.shared(d, a)
            #expect(dSummary == aSummary, "seed \(seed): \(dSummary) vs \(aSummary)")
            #expect(d.digest == a.digest, "seed \(seed)")

            // C's changes under C's own name are duplicates on both: nothing is stored twice.
            #expect(try Self.send(c, to: a) == 0, "seed \(seed)")
            #expect(try Self.send(c, to: d) == 0, "seed \(seed)")
            #expect(try Self.send(d, to: a) == 1, "seed \(seed): D's own begin only")
            #expect(try a.store.changeCount() == held + 2 && d.store.changeCount() == held + 2, "seed \(seed)")
            #expect(Self.items(a) == Self.items(c) && Self.items(d) == Self.items(c), "seed \(seed)")
        }
    }

    /// The honest case: L, the losing copy of a copied home, learns the fork's record from Y (which holds both
    /// copies) and moves its own changes to the branch; a fresh device D syncing from L alone names them as L and Y do.
    @Test func aFreshDeviceSyncingFromTheLosingCopyNamesItsChangesAsTheCopyDoes() throws {
        try withTemporaryDirectory { directory in
            let s = try ForkRecordHelloTests.scenario(in: directory)
            let records = try Self.records(s.y)
            try #require(records.count == 1)
            let learnt = try s.loser.learnForkRecords(records)
            #expect(learnt.renamed == [s.timeline] && learnt.ownTimelineForkedAway)
            let branch = try #require(records.first?.branch)
            #expect(try s.loser.store.summary()[branch] == 3, "L's a1…a3 are on the branch")

            let d = try Self.device("d2", in: directory)
            #expect(try d.learnForkRecords(records).learnt == 1)
            let stored = try Self.send(s.loser, to: d)
            #expect(stored == (try s.loser.store.changeCount()))
            let (dSummary, lSummary) = try Self.shared(d, s.loser)
            #expect(dSummary == lSummary, "\(dSummary) vs \(lSummary)")
            #expect(Self.items(d) == Self.items(s.loser))
            // Back again, and to Y: nothing is stored twice (D's own begin is the one new change).
            #expect(try Self.send(d, to: s.loser) == 1)
            #expect(try Self.send(d, to: s.y) == 1)
        }
    }
}
