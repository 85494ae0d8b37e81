import Foundation
import PlaitCore
import PlaitTestSupport
import Testing

@testable import PlaitStore

/// Acknowledgements with head hashes (DESIGN §11, PROTOCOL.md §22.7), on real stores with real P-256 signatures.
///
/// Device X syncs with a paired peer P while X holds copy A's history of a home; P acknowledges X's summary,
/// `T:5` among it. Later X meets copy B, whose changes at 4 and 5 win the fork: T:4 and T:5 are now B's, and A's
/// are renamed to a branch. P never had B's changes, so compaction on X must keep them as changes. Read as a bare
/// summary, P's `T:5` said P held them, and because A had written its changes after pulling a device with high
/// Lamport times, nothing else held the cut-off below them: X folded B's changes into its baseline.
@Suite("Acknowledgements across a fork")
struct AcknowledgementTests {
    static let list = ObjectID(high: 0xAC4, low: 1)
    static let peer = String(repeating: "P", count: 63)

    static func pull(_ to: Replica, from: Replica) throws {
        let result = try to.integrate(encoded: try from.store.encodedChangesInReplayOrder())
        #expect(result.refused.isEmpty, "nothing is refused")
    }

    @Test func aForkFoundAfterAnAcknowledgementDoesNotFoldWhatThePeerLacks() throws {
        try withTemporaryDirectory { directory in
            let homeSigner = try ForkFixtures.signer("home")
            let (original, timeline, forkPoint) = try ForkFixtures.home(
                in: directory, signer: homeSigner, list: Self.list)
            // Z: another device whose history has Lamport times far beyond the home's.
            let zSigner = try ForkFixtures.signer("z")
            let z = try Replica(
                store: try Store.create(at: directory.file("z.db"), signer: zSigner, synchronousFull: false),
                signer: zSigner)
            try z.edit { edit in
                let other = ObjectID(high: 0xAC4, low: 2)
                try edit.append(.listCreate(id: other, title: "Z", color: nil, at: .bottom))
                for index in 0..<100 {
                    try edit.append(.itemCreate(id: ObjectID(high: 0xAC5, low: UInt64(index)), list: other,
                                                text: "z\(index)", at: .bottom))
                }
            }
            // Copy A pulls Z, then writes two items: its changes carry Lamport times above 100. Copy B writes two
            // items without Z, and its change at the fork point hashes below A's.
            let (a, winner) = try ForkFixtures.fork(
                of: original, in: directory, signer: homeSigner, timeline: timeline, forkPoint: forkPoint,
                loser: { copy in
                    try Self.pull(copy, from: z)
                    try ForkFixtures.addItems(["a1", "a2"], list: Self.list, to: copy)
                },
                winner: { copy in try ForkFixtures.addItems(["b1", "b2"], list: Self.list, to: copy) })
            let bLamports = try (forkPoint...forkPoint + 1).map {
                try #require(try winner.store.lamport(of: ChangeRef(timeline: timeline, seq: $0)))
            }
            #expect(bLamports.allSatisfy { $0 < 100 }, "B's changes have the home's small Lamport times")

            // X holds A's history; P, paired, acknowledges it as a session ends.
            let xSigner = try ForkFixtures.signer("x")
            let x = try Replica(
                store: try Store.create(at: directory.file("x.db"), signer: xSigner, synchronousFull: false),
                signer: xSigner)
            try Self.pull(x, from: a)
            try x.store.trust(deviceID: Self.peer, name: "P", address: nil, now: Replica.now())
            try x.store.peerSeen(deviceID: Self.peer, address: nil, summary: try x.store.summary(), now: Replica.now())
            let acknowledged = try #require(try x.store.peers().first?.lastSummary)
            #expect(acknowledged[timeline] == forkPoint + 1)

            // X meets B: B's changes keep the name T, A's move to a branch.
            try Self.pull(x, from: winner)
            #expect(try x.store.forkBranches().count == 1)
            #expect(try x.store.hash(of: ChangeRef(timeline: timeline, seq: forkPoint))
                    == winner.store.hash(of: ChangeRef(timeline: timeline, seq: forkPoint)))

            // X writes too, so its own timeline does not hold the cut-off down: B's head (Lamport 4) does.
            try x.edit { edit in
                try edit.append(.itemCreate(id: .random(), list: Self.list, text: "x", at: .bottom))
            }
            let limits = try #require(try x.store.acknowledgementLimits(now: Replica.now(), graceMs: 60_000))
            let cut = limits.map(\.lamport).min() ?? .max
            #expect(cut < bLamports[0], "P never had B's first change: the cut-off stays below it (\(limits))")
            let digest = x.digest
            _ = try x.compact(limits: limits)
            for seq in forkPoint...forkPoint + 1 {
                #expect(try x.store.lamport(of: ChangeRef(timeline: timeline, seq: seq)) != nil,
                        "T:\(seq) (B's) is still held as a change for P to pull")
            }
            #expect(x.digest == digest)
        }
    }

    /// Without any fork an acknowledgement covers exactly its summary, and a peer that acknowledged everything
    /// puts no limit; stored heads survive a round trip, and a damaged column reads as no hashes (covers less).
    @Test func withoutAForkAnAcknowledgementIsItsSummary() throws {
        try withTemporaryDirectory { directory in
            let signer = try ForkFixtures.signer("home")
            let x = try Replica(
                store: try Store.create(at: directory.file("x.db"), signer: signer, synchronousFull: false),
                signer: signer)
            try x.edit { edit in
                try edit.append(.listCreate(id: Self.list, title: "Groceries", color: nil, at: .bottom))
            }
            try x.store.trust(deviceID: Self.peer, name: "P", address: nil, now: Replica.now())
            try x.store.peerSeen(deviceID: Self.peer, address: nil, summary: try x.store.summary(), now: Replica.now())
            let row = try #require(try x.store.peers().first)
            let own = try x.store.ownTimeline()
            #expect(row.lastHeads[own] == (try x.store.hash(of: ChangeRef(timeline: own, seq: row.lastSummary![own]))))
            #expect(try x.store.acknowledgementLimits(now: Replica.now(), graceMs: 60_000) == [])
            try x.edit { edit in
                try edit.append(.itemCreate(id: .random(), list: Self.list, text: "after", at: .bottom))
            }
            let limits = try #require(try x.store.acknowledgementLimits(now: Replica.now(), graceMs: 60_000))
            #expect(limits.count == 1, "the change P lacks holds the cut-off")
            #expect(Acknowledgements.decode(Data([1, 2, 3])).isEmpty)
            let heads = [
                TimelineID(7): [UInt8](repeating: 9, count: 32), TimelineID(1): [UInt8](repeating: 1, count: 32),
            ]
            #expect(Acknowledgements.decode(Acknowledgements.encode(heads)) == heads)
        }
    }
}
