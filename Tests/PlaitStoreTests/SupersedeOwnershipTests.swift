import Foundation
import GRDB
import PlaitCore
import PlaitTestSupport
import Testing

@testable import PlaitStore

/// PROTOCOL.md §20.5: a `timeline.begin` may supersede only a timeline of its own key, or an unsigned one. A
/// hostile paired peer tried the other: a validly signed begin of its own naming another device's timeline as
/// superseded, which made every device that took it (and every device those relayed it to) refuse that
/// device's later changes for good.
@Suite("Who may supersede a timeline")
struct SupersedeOwnershipTests {
    /// The changes of `store` up to and including its `count`-th signed change: a prefix a receiver takes whole.
    static func signedPrefix(_ changes: [EncodedChange], signedChanges count: Int) -> [EncodedChange] {
        var signed = 0
        var prefix: [EncodedChange] = []
        for change in changes {
            prefix.append(change)
            if change.signature != nil {
                signed += 1
                if signed == count { break }
            }
        }
        return prefix
    }

    @Test(arguments: [0x5375_0001 as UInt64])
    func aBeginOfAnotherKeySupersedesNothing(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let aSigner = try ForkFixtures.signer("a")
            let aStore = try Store.create(at: directory.file("a.db"), signer: aSigner, synchronousFull: false)
            let a = try Replica(store: aStore, signer: aSigner)
            try randomEdits(a, count: 8, rng: &rng)
            let aTimeline = try aStore.ownTimeline()
            let aChanges = try aStore.encodedChanges(of: aTimeline, from: 1, limit: .max)
            #expect(aChanges.count >= 9)

            // b has a's timeline up to its fourth signed change, then the hostile begin arrives.
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            let prefix = Self.signedPrefix(aChanges, signedChanges: 4)
            #expect(try b.replica.integrate(encoded: prefix).refused.isEmpty)
            let stopAt = prefix.last!.change

            let mSigner = try ForkFixtures.signer("m")
            let hostile = TimelineBegin(
                certificate: mSigner.certificate, nonce: (0..<16).map { _ in UInt8(rng.next() & 0xff) },
                supersedes: .init(timeline: aTimeline, seq: stopAt.seq, hash: stopAt.hash))
            let begin = Change(
                timeline: hostile.timelineID, seq: 1, lamport: stopAt.lamport + 1, previousHash: Change.zeroHash,
                kind: TimelineBegin.kind, version: 1, wallTime: 0, payload: hostile.payload, witness: stopAt.ref)
            let taken = try b.replica.integrate(
                encoded: [EncodedChange(begin, signature: try mSigner.sign(changeHash: begin.hash))])
            // The begin itself is a valid change of the peer's own timeline: it is taken, its claim is not.
            #expect(taken.refused.isEmpty, "seed \(seed): \(taken.refused)")
            #expect(try b.summary[hostile.timelineID] == 1)
            #expect(try b.store.timelineAuthorities().first { $0.timeline == aTimeline }?.supersededSeq == nil)

            // a goes on: b takes the rest of its timeline (refused before: "continues beyond change N").
            let rest = Array(aChanges.dropFirst(prefix.count))
            let later = try b.replica.integrate(encoded: rest)
            #expect(later.refused.isEmpty, "seed \(seed): \(later.refused)")
            #expect(try b.summary[aTimeline] == aChanges.last!.change.seq)

            // a's own rejoin (the same key) does stop it, at its end: the hostile claim (lower) would have won.
            try a.rejoin(now: fixedNow)
            let afterRejoin = try aStore.encodedChangesInReplayOrder().filter {
                $0.change.timeline != aTimeline || $0.change.seq > aChanges.last!.change.seq
            }
            #expect(try b.replica.integrate(encoded: afterRejoin).refused.isEmpty)
            let end = try aStore.summary()[aTimeline]
            #expect(end > stopAt.seq)
            #expect(try b.store.timelineAuthorities().first { $0.timeline == aTimeline }?.supersededSeq == end)

            // Compaction folds both begins (m, an author nobody here paired, quiet past the grace, holds nothing
            // back) and keeps only the claim the owner made.
            let report = try b.replica.compact(
                authors: .init(known: [SHA256.hash(aSigner.certificate)], graceMs: 0, now: Int64.max / 2))
            #expect(report.folded > 0)
            let baseline = try #require(try b.store.baseline())
            #expect(baseline.summary[hostile.timelineID] == 1, "the hostile begin is folded")
            #expect(baseline.superseded[aTimeline] == end, "seed \(seed): \(baseline.superseded)")
        }
    }

    /// The baseline builder judges claims when it finishes, whatever order the begins were folded in: a begin of
    /// another key folded before the timeline it names still supersedes nothing; an unsigned timeline may be
    /// superseded by any key (protocol-1 history, §20.10).
    @Test func theBaselineKeepsOnlyTheOwnersClaims() throws {
        let a = SignedAuthorForBaseline(certificate: Array("certificate of a".utf8), nonce: 1)
        let m = SignedAuthorForBaseline(certificate: Array("certificate of m".utf8), nonce: 2)
        let unsigned = TimelineID(0x0123_4567_89ab_cdef)
        let unsignedChange = Change(
            timeline: unsigned, seq: 1, lamport: 1, previousHash: Change.zeroHash, kind: Change.timelineEndKind,
            version: 1, wallTime: 0, payload: [])
        // m claims a's timeline at 1 and the unsigned one at 1, at Lamport 1 like a's own begin: whichever timeline
        // ID sorts first is folded first.
        let mBegin = m.begin(lamport: 1, supersedes: [
            .init(timeline: a.timeline, seq: 1, hash: a.beginChange.hash),
        ])
        let mSecond = m.other(nonce: 3, lamport: 2, supersedes: .init(
            timeline: unsigned, seq: 1, hash: unsignedChange.hash))
        let changes = [a.beginChange, unsignedChange, mBegin, mSecond.change].sorted {
            ($0.lamport, $0.timeline) < ($1.lamport, $1.timeline)
        }
        var folder = try BaselineFolder(domain: ListsDomain(), previous: nil)
        for change in changes { try folder.add(change) }
        let baseline = folder.finish()
        #expect(baseline.superseded[a.timeline] == nil, "\(baseline.superseded)")
        #expect(baseline.superseded[unsigned] == 1)
    }
}

/// A signed author's begins for the baseline builder (it checks no signatures).
struct SignedAuthorForBaseline {
    let certificate: [UInt8]
    let beginPayload: TimelineBegin

    init(certificate: [UInt8], nonce: UInt8) {
        self.certificate = certificate
        beginPayload = TimelineBegin(certificate: certificate, nonce: [UInt8](repeating: nonce, count: 16))
    }

    var timeline: TimelineID { beginPayload.timelineID }

    var beginChange: Change { begin(lamport: 1, supersedes: []) }

    func begin(lamport: UInt64, supersedes: [TimelineBegin.Superseded]) -> Change {
        var payload = beginPayload
        payload.supersedes = supersedes.first
        return Change(
            timeline: payload.timelineID, seq: 1, lamport: lamport, previousHash: Change.zeroHash,
            kind: TimelineBegin.kind, version: 1, wallTime: 0, payload: payload.payload)
    }

    /// Another timeline of the same key.
    func other(nonce: UInt8, lamport: UInt64, supersedes: TimelineBegin.Superseded) -> (timeline: TimelineID, change: Change) {
        let payload = TimelineBegin(
            certificate: certificate, nonce: [UInt8](repeating: nonce, count: 16), supersedes: supersedes)
        return (
            payload.timelineID,
            Change(
                timeline: payload.timelineID, seq: 1, lamport: lamport, previousHash: Change.zeroHash,
                kind: TimelineBegin.kind, version: 1, wallTime: 0, payload: payload.payload)
        )
    }
}
