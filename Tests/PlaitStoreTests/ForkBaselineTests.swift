import Foundation
import GRDB
import PlaitCore
import PlaitTestSupport
import Testing

@testable import PlaitStore

/// Forks and compaction (DESIGN §11, PROTOCOL.md §22.8), on real stores with real P-256 signatures: a baseline
/// carries the fork records of the device that folded it, and the names of what follows a baseline continue the
/// names its heads had.
///
/// A home is copied; copy W (the winner: its change at the fork point hashes lowest) writes b1…b4, copy L writes
/// a1, a2 and later a3. Device X pulls W and L's a1, a2 (a branch T′), writes, and compacts: its cut-off is T′'s
/// head, so b1, b2, a1 and a2 are folded.
@Suite("Forks across baselines")
struct ForkBaselineTests {
    static let list = ObjectID(high: 0xFB5, low: 1)

    struct Scenario {
        var timeline: TimelineID
        var forkPoint: UInt64
        var loser: Replica
        var winner: Replica
        var x: Replica
        var directory: TemporaryDirectory
    }

    /// The changes `from` holds whose bytes carry `timeline` at the author's numbers in `seqs`, plus every change
    /// of every other timeline.
    static func changes(of from: Replica, timeline: TimelineID, seqs: ClosedRange<UInt64>) throws -> [EncodedChange] {
        try from.store.encodedChangesInReplayOrder().filter {
            $0.change.authored.timeline != timeline || seqs.contains($0.change.authored.seq)
        }
    }

    static func pull(_ to: Replica, _ batch: [EncodedChange]) throws {
        let result = try to.integrate(encoded: batch)
        #expect(result.refused.isEmpty, "nothing is refused: \(result.refused)")
    }

    static func items(_ replica: Replica) -> Set<String> {
        Set(replica.state.items.values.filter { !$0.deleted }.map(\.text))
    }

    /// Sets up the fork and X's compaction. `a3BelowB3` decides whether L's a3 hashes below W's b3 (both stand at
    /// the author's number forkPoint + 2): the attempts are redrawn until it holds.
    static func scenario(in directory: TemporaryDirectory, a3BelowB3: Bool?) throws -> Scenario {
        let signer = try ForkFixtures.signer("home")
        let (original, timeline, forkPoint) = try ForkFixtures.home(in: directory, signer: signer, list: Self.list)
        for attempt in 0..<64 {
            // Each attempt in a directory of its own, removed unless returned (then the test removes it).
            let attemptDirectory = try TemporaryDirectory("forkBaselineAttempt\(attempt)")
            var keep = false
            defer { if !keep { attemptDirectory.remove() } }
            let (loser, winner) = try ForkFixtures.fork(
                of: original, in: attemptDirectory, signer: signer, timeline: timeline, forkPoint: forkPoint,
                loser: { try ForkFixtures.addItems(["a1", "a2", "a3"], list: Self.list, to: $0) },
                winner: { try ForkFixtures.addItems(["b1", "b2", "b3", "b4"], list: Self.list, to: $0) })
            if let a3BelowB3 {
                let a3 = try #require(try loser.store.hash(of: ChangeRef(timeline: timeline, seq: forkPoint + 2)))
                let b3 = try #require(try winner.store.hash(of: ChangeRef(timeline: timeline, seq: forkPoint + 2)))
                guard a3.lexicographicallyPrecedes(b3) == a3BelowB3 else { continue }
            }
            let xSigner = try ForkFixtures.signer("x")
            let x = try Replica(
                store: try Store.create(at: attemptDirectory.file("x.db"), signer: xSigner, synchronousFull: false),
                signer: xSigner)
            try pull(x, try winner.store.encodedChangesInReplayOrder())
            try pull(x, try changes(of: loser, timeline: timeline, seqs: 1...forkPoint + 1))
            #expect(try x.store.forkBranches().count == 1, "X holds L's a1 and a2 as a branch")
            try x.edit { try $0.append(.itemCreate(id: .random(), list: Self.list, text: "x", at: .bottom)) }
            let report = try x.compact()
            #expect(report.folded > 0)
            let baseline = try #require(try x.store.baseline())
            #expect(baseline.summary[timeline] == forkPoint + 1, "b1 and b2 are folded")
            let branch = try #require(try x.store.forkBranches().first)
            #expect(baseline.summary[branch.id] == 2, "a1 and a2 are folded, on the branch")
            keep = true
            return Scenario(
                timeline: timeline, forkPoint: forkPoint, loser: loser, winner: winner, x: x,
                directory: attemptDirectory)
        }
        throw StoreError.inconsistent("no attempt drew the wanted order of a3 and b3")
    }

    /// X has folded part of both branches. L's a3 arrives: it continues the branch's folded head. Naming the
    /// held changes again started from the smallest number held, where b3 and a3 stood side by side as if they
    /// were a fork of their own, so whichever hashed lower took the name T: with a3 lower, a3 became T:f+2 and
    /// W's b3 a new branch, names no device holding everything would give.
    @Test(arguments: [true, false])
    func whatFollowsAFoldedBranchHeadStaysOnThatBranch(a3BelowB3: Bool) throws {
        try withTemporaryDirectory { directory in
            let s = try Self.scenario(in: directory, a3BelowB3: a3BelowB3)
            defer { s.directory.remove() }
            let branch = try #require(try s.x.store.forkBranches().first).id
            try Self.pull(s.x, try Self.changes(of: s.loser, timeline: s.timeline, seqs: 1...s.forkPoint + 2))
            let b3 = try s.winner.store.hash(of: ChangeRef(timeline: s.timeline, seq: s.forkPoint + 2))
            let a3 = try s.loser.store.hash(of: ChangeRef(timeline: s.timeline, seq: s.forkPoint + 2))
            #expect(try s.x.store.hash(of: ChangeRef(timeline: s.timeline, seq: s.forkPoint + 2)) == b3,
                    "W's b3 keeps T:\(s.forkPoint + 2)")
            #expect(try s.x.store.hash(of: ChangeRef(timeline: branch, seq: 3)) == a3, "L's a3 is T′:3")
            #expect(try s.x.store.forkBranches().map(\.id) == [branch], "no new branch")

            // A device that holds both copies' changes unfolded names them alike and has the same items (X's own
            // timeline aside: its begin is folded at X, so only X's baseline brings it).
            let ySigner = try ForkFixtures.signer("y")
            let y = try Replica(
                store: try Store.create(at: directory.file("y.db"), signer: ySigner, synchronousFull: false),
                signer: ySigner)
            try Self.pull(y, try s.winner.store.encodedChangesInReplayOrder())
            try Self.pull(y, try s.loser.store.encodedChangesInReplayOrder())
            for name in [s.timeline, branch] {
                #expect(try y.store.summary()[name] == s.x.store.summary()[name])
                #expect(try y.store.hash(of: ChangeRef(timeline: name, seq: try y.store.summary()[name]))
                        == s.x.store.hash(of: ChangeRef(timeline: name, seq: try s.x.store.summary()[name])))
            }
            #expect(Self.items(y).union(["x"]) == Self.items(s.x))
        }
    }

    /// L never met W. It wrote a3 after X took a1 and a2, so a3 is only on L. X's baseline folds T up to b2,
    /// beyond L's a1 and a2 at the same numbers; adopting it dropped L's T:1…f+2 as folded, a3 with them: lost.
    /// With the baseline's fork record, L knows its a1 starts a branch that lost, names its own changes T′:1…3
    /// first, and only T′:1…2 are folded.
    @Test func theLosingCopyAdoptingABaselineKeepsWhatItAloneHolds() throws {
        try withTemporaryDirectory { directory in
            let s = try Self.scenario(in: directory, a3BelowB3: nil)
            defer { s.directory.remove() }
            let branch = try #require(try s.x.store.forkBranches().first).id
            let baseline = try #require(try s.x.store.baseline())
            #expect(Self.items(s.loser).contains("a3"))
            let adoption = try s.loser.adopt(try Baseline(decoding: baseline.encoded()[...]))
            #expect(adoption.changed)
            #expect(Self.items(s.loser).isSuperset(of: ["a1", "a2", "a3", "b1", "b2"]),
                    "a3, which only L holds, is still there: \(Self.items(s.loser).sorted())")
            #expect(try s.loser.store.summary()[branch] == 3, "L names its changes T′:1…3")
            #expect(try s.loser.store.forkBranches().map(\.id) == [branch])

            // X then takes a3 from L, L takes the rest from X, and the two agree.
            try Self.pull(s.x, try s.loser.store.encodedChangesInReplayOrder())
            try Self.pull(s.loser, try s.x.store.encodedChangesInReplayOrder())
            #expect(try s.loser.store.summary() == s.x.store.summary())
            #expect(s.loser.digest == s.x.digest)
            #expect(Self.items(s.x).isSuperset(of: ["a1", "a2", "a3", "b1", "b2", "b3", "b4", "x"]))
        }
    }

    /// W compacted before it ever met L: its baseline folds T beyond everything L holds and carries no fork record
    /// (W never saw the fork). Adopting it dropped L's own a1…a3, which no other device holds, as folded: the
    /// baseline names T's last folded change by its hash only, so nothing showed they were not among the changes it
    /// folds. They are kept aside with their bytes and signatures instead, and the store's history report says so.
    @Test func theLosingCopyAdoptingABaselineThatNeverSawTheForkKeepsItsOwnChanges() throws {
        try withTemporaryDirectory { directory in
            let s = try Self.scenario(in: directory, a3BelowB3: nil)
            defer { s.directory.remove() }
            _ = try s.winner.compact()
            let baseline = try #require(try s.winner.store.baseline())
            let lHead = try s.loser.store.summary()[s.timeline]
            #expect(baseline.summary[s.timeline] > lHead && baseline.forks.isEmpty,
                    "W's baseline folds T beyond L's head, with no fork record")
            let columns = "tl, seq, lamport, kind, version, wall, prev, payload, signature"
            let held = try s.loser.store.read { db in
                try Row.fetchAll(db, sql: "SELECT \(columns) FROM changes WHERE tl = ? ORDER BY seq",
                                 arguments: [timelineColumn(s.timeline.rawValue)])
            }
            #expect(held.count == Int(lHead), "L holds its whole timeline, a1…a3 at \(s.forkPoint)…\(s.forkPoint + 2)")

            let adoption = try s.loser.adopt(try Baseline(decoding: baseline.encoded()[...]))
            #expect(adoption.changed)
            #expect(adoption.keptAside == 1...lHead)
            let kept = try s.loser.store.read { db in
                try Row.fetchAll(db, sql: "SELECT \(columns) FROM kept_aside WHERE tl = ? ORDER BY seq",
                                 arguments: [timelineColumn(s.timeline.rawValue)])
            }
            #expect(kept == held, "every change L held of its own timeline is kept, byte for byte, signatures too")
            let report = try Store.historyReport(readOnlyAt: s.loser.store.path)
            #expect(report.keptAside.map(\.timeline) == [s.timeline])
            #expect(report.keptAside.first?.seqs == 1...lHead)
            // W's changes are what L now holds of T.
            #expect(Self.items(s.loser).isSuperset(of: ["b1", "b2", "b3", "b4"]))
        }
    }

    /// A fresh device adopts X's baseline, then takes the rest from X and L's a3 from L: the branch's records came
    /// with the baseline, so a3 goes onto T′ after its folded head, and the device agrees with X.
    @Test func aFreshDeviceTakesTheBranchAfterAdoptingTheBaseline() throws {
        try withTemporaryDirectory { directory in
            let s = try Self.scenario(in: directory, a3BelowB3: nil)
            defer { s.directory.remove() }
            let branch = try #require(try s.x.store.forkBranches().first)
            let dSigner = try ForkFixtures.signer("d")
            let d = try Replica(
                store: try Store.create(at: directory.file("d.db"), signer: dSigner, synchronousFull: false),
                signer: dSigner)
            _ = try d.adopt(try Baseline(decoding: try #require(try s.x.store.baseline()).encoded()[...]))
            #expect(try d.store.forkBranches() == [branch], "the fork record came with the baseline")
            try Self.pull(d, try s.x.store.encodedChangesInReplayOrder())
            try Self.pull(d, [try #require(try s.loser.store.encodedChangesInReplayOrder().last)])
            try Self.pull(s.x, try s.loser.store.encodedChangesInReplayOrder())
            // D's own timeline (its begin) aside, D holds what X holds, under the same names.
            let xSummary = try s.x.store.summary()
            let dSummary = try d.store.summary()
            let dOwn = try d.store.ownTimeline()
            #expect(Set(dSummary.timelines).subtracting([dOwn]) == Set(xSummary.timelines))
            for name in xSummary.timelines { #expect(dSummary[name] == xSummary[name], "\(name)") }
            #expect(try d.store.summary()[branch.id] == 3, "a3 is T′:3")
            #expect(d.digest == s.x.digest)
        }
    }

    /// A baseline carries the certificate of each signed timeline whose begin it folds, so that the changes after
    /// it are still verified (DESIGN §11). Adopting one did not record them: the timeline was unsigned to the
    /// device that adopted it, and a change on it signed by any other key was taken from any paired peer.
    @Test func aTimelineFoldedIntoAnAdoptedBaselineStaysSigned() throws {
        try withTemporaryDirectory { directory in
            let signer = try ForkFixtures.signer("author")
            let author = try Replica(
                store: try Store.create(at: directory.file("author.db"), signer: signer, synchronousFull: false),
                signer: signer)
            try author.edit { try $0.append(.listCreate(id: Self.list, title: "Groceries", color: nil, at: .bottom)) }
            try ForkFixtures.addItems(["milk", "eggs"], list: Self.list, to: author)
            let timeline = try author.store.ownTimeline()
            _ = try author.compact()
            let baseline = try #require(try author.store.baseline())
            let head = try author.store.summary()[timeline]
            #expect(baseline.summary[timeline] == head && baseline.certificates[timeline] != nil,
                    "the author's whole timeline, its begin included, is folded")

            let dSigner = try ForkFixtures.signer("d")
            let d = try Replica(
                store: try Store.create(at: directory.file("d.db"), signer: dSigner, synchronousFull: false),
                signer: dSigner)
            _ = try d.adopt(try Baseline(decoding: baseline.encoded()[...]))
            let before = try d.store.summary()

            // A paired peer sends a change continuing the author's head, signed with another key.
            let payload = ListsChange.listCreate(id: ObjectID(high: 0xFB5, low: 9), title: "forged", color: nil, at: .top)
            let forged = Change(
                timeline: timeline, seq: head + 1, lamport: baseline.maxLamport + 1,
                previousHash: try #require(baseline.heads[timeline]), kind: payload.kind, version: 1, wallTime: 0,
                payload: payload.payload)
            let hostile = try ForkFixtures.signer("hostile")
            let result = try d.integrate(encoded: [EncodedChange(forged, signature: try hostile.sign(changeHash: forged.hash))])
            #expect(result.refused.map(\.timeline) == [timeline], "the forged change is refused")
            #expect(try d.store.summary() == before, "nothing of it is stored")
            #expect(!d.state.lists.values.contains { $0.title == "forged" })

            // The author's own next change is taken.
            try ForkFixtures.addItems(["bread"], list: Self.list, to: author)
            let next = try #require(try author.store.encodedChangesInReplayOrder().last)
            #expect(try d.integrate(encoded: [next]).refused.isEmpty)
            #expect(try d.store.summary()[timeline] == head + 1)
        }
    }
}
