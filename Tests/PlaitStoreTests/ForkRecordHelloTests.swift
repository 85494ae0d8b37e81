import Foundation
import GRDB
import PlaitCore
import PlaitTestSupport
import Testing

@testable import PlaitStore

/// Fork records learnt outside a baseline (PROTOCOL.md §22.9: Hello carries them), and the first change of a branch
/// whose fork point a baseline folds (§22.8), on real stores with real P-256 signatures.
///
/// A home is copied; copy W (the winner: its change at the fork point hashes lowest) writes b1…b4, copy L writes
/// a1…a3. Device X holds only W's changes, writes, and compacts: it folds the fork point and W's changes after it. Device Y holds both copies' changes: it knows the
/// fork. Device D adopts X's baseline, which folds the fork point and W's b1…b4 but none of L's changes.
@Suite("Fork records outside baselines")
struct ForkRecordHelloTests {
    static let list = ObjectID(high: 0xF4E, low: 1)

    struct Scenario {
        var timeline: TimelineID
        var forkPoint: UInt64
        var loser: Replica
        var winner: Replica
        var y: Replica
        var d: Replica
        var signer: P256Signer
        var baseline: Baseline
    }

    static func device(_ name: String, in directory: TemporaryDirectory) throws -> Replica {
        let signer = try ForkFixtures.signer(name)
        return try Replica(
            store: try Store.create(at: directory.file("\(name).db"), signer: signer, synchronousFull: false),
            signer: signer)
    }

    static func items(_ replica: Replica) -> Set<String> {
        Set(replica.state.items.values.filter { !$0.deleted }.map(\.text))
    }

    static func scenario(in directory: TemporaryDirectory) throws -> Scenario {
        let signer = try ForkFixtures.signer("home")
        let (original, timeline, forkPoint) = try ForkFixtures.home(in: directory, signer: signer, list: Self.list)
        let (loser, winner) = try ForkFixtures.fork(
            of: original, in: directory, signer: signer, timeline: timeline, forkPoint: forkPoint,
            loser: { try ForkFixtures.addItems(["a1", "a2", "a3"], list: Self.list, to: $0) },
            winner: { try ForkFixtures.addItems(["b1", "b2", "b3", "b4"], list: Self.list, to: $0) })
        let x = try device("x", in: directory)
        #expect(try x.integrate(encoded: try winner.store.encodedChangesInReplayOrder()).refused.isEmpty)
        try x.edit { try $0.append(.itemCreate(id: .random(), list: Self.list, text: "x", at: .bottom)) }
        _ = try x.compact()
        let baseline = try #require(try x.store.baseline())
        #expect(baseline.summary[timeline] > forkPoint, "X folds the fork point and W's changes after it")
        #expect(baseline.forks.isEmpty, "X never met the fork")

        let y = try device("y", in: directory)
        #expect(try y.integrate(encoded: try winner.store.encodedChangesInReplayOrder()).refused.isEmpty)
        #expect(try y.integrate(encoded: try loser.store.encodedChangesInReplayOrder()).refused.isEmpty)
        #expect(try y.store.forkBranches().count == 1, "Y holds L's a1…a3 as a branch")

        let d = try device("d", in: directory)
        _ = try d.adopt(try Baseline(decoding: baseline.encoded()[...]))
        return Scenario(
            timeline: timeline, forkPoint: forkPoint, loser: loser, winner: winner, y: y, d: d, signer: signer,
            baseline: baseline)
    }

    /// L's changes of the forked timeline (its a1…a3, the shared history before them included).
    static func loserBranch(_ s: Scenario) throws -> [EncodedChange] {
        try s.loser.store.encodedChangesInReplayOrder().filter { $0.change.timeline == s.timeline }
    }

    /// Before: D, holding only X's baseline, took L's a1…a3 for changes its baseline folds (their numbers are below
    /// its entry for T, and what a1 continues is folded) — so L's items never reached it from anyone (the limit
    /// PROTOCOL.md §22.8 named).
    @Test func aBranchWhoseForkPointABaselineFoldsIsTakenOnceItsRecordIsKnown() throws {
        try withTemporaryDirectory { directory in
            let s = try Self.scenario(in: directory)
            let before = try s.d.store.summary()
            let withoutRecord = try s.d.integrate(encoded: try Self.loserBranch(s))
            #expect(withoutRecord.added == 0, "without a record nothing of the branch is taken")
            #expect(try s.d.store.summary() == before)
            #expect(!Self.items(s.d).contains("a1"))

            // The records Y holds, as its Hello carries them.
            let records = try s.y.store.localView().forkRecords
            #expect(records.count == 1)
            let learnt = try s.d.learnForkRecords(records)
            #expect(learnt.learnt == 1)
            #expect(try s.d.learnForkRecords(records) == .init(), "records already held change nothing")

            let result = try s.d.integrate(encoded: try Self.loserBranch(s))
            #expect(result.refused.isEmpty, "\(result.refused)")
            #expect(result.added == 3)
            #expect(Self.items(s.d).subtracting(["x"]) == Self.items(s.y), "D has both copies' items, as Y has")
            // Named as Y names them.
            let branch = try #require(records.first).branch
            #expect(try s.d.store.summary()[branch] == 3)
            for seq in 1...UInt64(3) {
                let ref = ChangeRef(timeline: branch, seq: seq)
                #expect(try s.d.store.hash(of: ref) == s.y.store.hash(of: ref), "T′:\(seq)")
            }
            #expect(try s.d.store.summary()[s.timeline] == s.y.store.summary()[s.timeline])
            #expect(try s.d.store.integrityCheck() == ["ok"])
            let check = try Store.verifyDerivedState(at: directory.file("d.db"))
            #expect(check.materializedMatchesReplay, "the stored state is the replay of what is held")
        }
    }

    /// A record naming a first hash that the arriving change does not have places nothing: nothing is stored.
    @Test func aRecordForAnotherChangePlacesNothing() throws {
        try withTemporaryDirectory { directory in
            let s = try Self.scenario(in: directory)
            var record = try #require(try s.y.store.localView().forkRecords.first)
            var other = record.firstHash
            other[31] ^= 0x01
            guard record.rivalHash.lexicographicallyPrecedes(other) else { return }
            record.firstHash = other
            record.branch = ForkBranch.id(parent: record.parent, firstHash: other)
            _ = try s.d.learnForkRecords([record])
            let before = try s.d.store.summary()
            let result = try s.d.integrate(encoded: try Self.loserBranch(s))
            #expect(result.added == 0)
            #expect(try s.d.store.summary() == before)
            #expect(!Self.items(s.d).contains("a1"))
        }
    }

    /// A hostile author (it holds T's key) writes a branch's first change after the fork point with a Lamport time
    /// far above anything folded and no witness, and a record naming it. A device holding the fork point refuses the
    /// jump (no witness); D cannot see the predecessor's Lamport time, but the claim "one below mine" must lie within
    /// its baseline: the change is not placed. The same change one step above the baseline is placed.
    @Test func aRecordPlacedFirstChangeCannotJumpTheClockPastTheBaseline() throws {
        try withTemporaryDirectory { directory in
            let s = try Self.scenario(in: directory)
            let shared = try #require(try s.winner.store.hash(of: ChangeRef(timeline: s.timeline, seq: s.forkPoint - 1)))
            let rival = try #require(try s.winner.store.hash(of: ChangeRef(timeline: s.timeline, seq: s.forkPoint)))
            func branchStart(lamport: UInt64) throws -> (EncodedChange, ForkBranch.Record) {
                for wallTime in Int64(0)..<64 {
                    let payload = ListsChange.itemCreate(id: .random(), list: Self.list, text: "jump", at: .bottom)
                    let change = Change(
                        timeline: s.timeline, seq: s.forkPoint, lamport: lamport, previousHash: shared,
                        kind: payload.kind, version: 1, wallTime: wallTime, payload: payload.payload)
                    guard rival.lexicographicallyPrecedes(change.hash) else { continue }
                    let record = ForkBranch.Record(
                        branch: ForkBranch.id(parent: s.timeline, firstHash: change.hash), root: s.timeline,
                        parent: s.timeline, base: s.forkPoint - 1, firstHash: change.hash, rivalHash: rival)
                    return (EncodedChange(change, signature: try s.signer.sign(changeHash: change.hash)), record)
                }
                throw StoreError.inconsistent("no draw hashed above the rival")
            }
            let (jump, jumpRecord) = try branchStart(lamport: s.baseline.maxLamport + 50)
            let before = try s.d.store.summary()
            _ = try s.d.learnForkRecords([jumpRecord])
            #expect(try s.d.integrate(encoded: [jump]).added == 0, "a jump past the baseline without a witness")
            #expect(try s.d.store.summary()[jumpRecord.branch] == 0)
            #expect(try s.d.store.summary()[s.timeline] == before[s.timeline])
            // Y holds the fork point: it refuses the same change outright (a jump without a witness).
            #expect(try s.y.integrate(encoded: [jump]).refused.map(\.timeline) == [s.timeline])

            let (step, stepRecord) = try branchStart(lamport: s.baseline.maxLamport + 1)
            _ = try s.d.learnForkRecords([stepRecord])
            #expect(try s.d.integrate(encoded: [step]).added == 1, "within the baseline's range it is placed")
            #expect(try s.d.store.summary()[stepRecord.branch] == 1)
        }
    }

    /// A device holding only L's changes names them T (it holds nothing else at those numbers). Y's record tells it
    /// they started a branch that lost: it names them as Y does and replays, before any change of W arrives.
    @Test func aRecordFromAPeerRenamesTheLosingCopysChangesWhereverTheyAreHeld() throws {
        try withTemporaryDirectory { directory in
            let s = try Self.scenario(in: directory)
            let c = try Self.device("c", in: directory)
            #expect(try c.integrate(encoded: try s.loser.store.encodedChangesInReplayOrder()).refused.isEmpty)
            // The fixture's fork point is the number both copies wrote first: L's a1 stands there.
            let a1 = try #require(try s.loser.store.hash(of: ChangeRef(timeline: s.timeline, seq: s.forkPoint)))
            #expect(try c.store.hash(of: ChangeRef(timeline: s.timeline, seq: s.forkPoint)) == a1)
            let digestBefore = c.digest

            let records = try s.y.store.localView().forkRecords
            let learnt = try c.learnForkRecords(records)
            #expect(learnt.renamed == [s.timeline])
            let branch = try #require(records.first).branch
            #expect(try c.store.hash(of: ChangeRef(timeline: branch, seq: 1)) == a1, "L's a1 is T′:1, as at Y")
            #expect(try c.store.summary()[s.timeline] == s.forkPoint - 1, "T stops before the fork point")
            #expect(try c.store.hash(of: ChangeRef(timeline: branch, seq: 3)) == s.y.store.hash(of: ChangeRef(timeline: branch, seq: 3)))
            #expect(Self.items(c) == Self.items(s.loser), "nothing is dropped")
            let check = try Store.verifyDerivedState(at: directory.file("c.db"))
            #expect(check.materializedMatchesReplay, "the stored state is the replay under the new names")
            _ = digestBefore
            // Then W's changes arrive and C agrees with Y.
            #expect(try c.integrate(encoded: try s.winner.store.encodedChangesInReplayOrder()).refused.isEmpty)
            for name in [s.timeline, branch] {
                #expect(try c.store.summary()[name] == s.y.store.summary()[name])
            }
        }
    }
}
