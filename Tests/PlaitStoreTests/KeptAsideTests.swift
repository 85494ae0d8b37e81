import Foundation
import GRDB
import PlaitCore
import PlaitTestSupport
import Testing

@testable import PlaitStore

/// Kept-aside changes made again (bad-luck tester 2026-11-25, H3): a copy of a home wrote changes under numbers that
/// a peer's baseline (compacted on the other copy, which never saw this one) folds beyond them. They are kept aside,
/// and what only they created is authored again; edits of what the baseline holds are not (they cannot be checked).
@Suite struct KeptAsideTests {
    static let list = ObjectID(high: 0xCA5E, low: 1)

    @Test func whatOnlyKeptAsideChangesCreatedIsMadeAgainWithTheirEdits() throws {
        try withTemporaryDirectory { directory in
            let signer = try ForkFixtures.signer("home")
            let (original, timeline, _) = try ForkFixtures.home(in: directory, signer: signer, list: Self.list)
            let shared = ObjectID(high: 0x5A, low: 1)
            let held = ObjectID(high: 0x5A, low: 2)
            do {
                let home = try Replica(store: try Store.open(at: original, synchronousFull: false), signer: signer)
                try home.edit { _ = try $0.append(.itemCreate(id: shared, list: Self.list, text: "s0", at: .bottom)) }
                try home.edit { _ = try $0.append(.listCreate(id: held, title: "K", color: nil, at: .bottom)) }
            }
            let a1 = ObjectID(high: 0xA1, low: 1)
            let lists = ObjectID(high: 0x11, low: 2)
            let m1 = ObjectID(high: 0x11, low: 3)
            let a2 = ObjectID(high: 0xA2, low: 1)
            let a3 = ObjectID(high: 0xA3, low: 1)
            let forkPoint = try Store.open(at: original, synchronousFull: false).summary()[timeline] + 1
            let (copy, other) = try ForkFixtures.fork(
                of: original, in: directory, signer: signer, timeline: timeline, forkPoint: forkPoint,
                loser: { copy in
                    for change: ListsChange in [
                        .itemCreate(id: a1, list: Self.list, text: "a1", at: .bottom), .itemEdit(id: a1, text: "a1!"),
                        .itemComplete(id: a1), .itemComplete(id: shared),
                        .listCreate(id: lists, title: "M", color: nil, at: .bottom),
                        .itemCreate(id: m1, list: lists, text: "m1", at: .bottom),
                        // Deleted again before the sync: made again, and deleted again.
                        .itemCreate(id: a3, list: lists, text: "a3", at: .bottom), .itemDelete(id: a3),
                        // Added to a held list, which the user then deleted: a delete of a held list is not made
                        // again, so neither is the item it took with it (hostile tester 2026-11-25-i, I6).
                        .itemCreate(id: a2, list: held, text: "a2", at: .bottom),
                    ] {
                        try copy.edit { _ = try $0.append(change) }
                    }
                    try copy.edit { _ = try $0.append(try $0.listDelete(held)) }
                },
                winner: { try ForkFixtures.addItems((1...12).map { "b\($0)" }, list: Self.list, to: $0) })
            _ = try other.compact()
            let baseline = try #require(try other.store.baseline())
            #expect(baseline.summary[timeline] > (try copy.store.summary()[timeline]))

            let adoption = try copy.adopt(try Baseline(decoding: baseline.encoded()[...]))
            #expect(adoption.keptAside != nil)
            #expect(adoption.authoringGoesOn, "a signed timeline: the next edit begins a new one by itself")
            #expect(copy.state.items[a1] == nil && copy.state.lists[lists] == nil, "the adoption dropped them")
            let unshown = try copy.store.keptAsideUnshown()
            #expect(unshown.map(\.text) == ["a1", "M", "m1", "a3"])
            let keptBefore = try keptRows(copy)

            let brought = try copy.bringBackKeptAside()
            #expect(brought.objects.map(\.text) == ["a1", "M", "m1", "a3"])
            #expect(brought.objects.map(\.kind) == [.item, .list, .item, .item])
            #expect(brought.shown.map(\.text) == ["a1", "M", "m1"], "a3 was deleted again")
            // a1's create, edit and complete; M; m1; a3 and its delete. Not the complete of s0, the delete of the
            // held list, or a2.
            #expect(brought.changes == 7)
            #expect(brought.timeline != timeline, "made on a new timeline")
            let state = copy.state
            #expect(state.items[a1]?.text == "a1!" && state.items[a1]?.completed == true)
            #expect(state.lists[lists]?.title == "M" && state.items[m1]?.list == lists)
            #expect(state.items[shared]?.completed == false, "an edit of an item the baseline holds stays aside")
            #expect(state.lists[held]?.deleted == false, "so does the delete of a held list")
            #expect(state.items[a2] == nil, "and the item it took with it")
            #expect(state.items[a3]?.deleted == true)
            #expect(try keptRows(copy) == keptBefore, "the kept-aside rows stay, byte for byte")
            #expect(try copy.store.keptAsideUnshown().isEmpty)
            #expect(try copy.bringBackKeptAside().isEmpty, "nothing is made twice")

            // The other copy takes them, and the two agree.
            try ForkBaselineTests.pull(other, try copy.store.encodedChangesInReplayOrder())
            try ForkBaselineTests.pull(copy, try other.store.encodedChangesInReplayOrder())
            #expect(copy.digest == other.digest)
            #expect(other.state.items[a1]?.text == "a1!")
        }
    }

    private func keptRows(_ replica: Replica) throws -> [Row] {
        try replica.store.read { db in try Row.fetchAll(db, sql: "SELECT * FROM kept_aside ORDER BY tl, seq") }
    }
}
