import Testing

@testable import PlaitCore

/// `ListsState.checkConsistency`: what a store runs on a state read back from its rows before anything walks
/// its links. It must pass every state replay builds (else every load would rebuild) and refuse every broken
/// link (else display code would follow it).
@Suite struct ListsStateCheckTests {
    static let domain = ListsDomain()

    @Test("every state replay or a snapshot restore builds passes the check")
    func replayedStatesPass() throws {
        for seed in UInt64(0)..<UInt64(Histories.count) {
            let history = Histories.history(seed: seed).sorted { $0.orderKey < $1.orderKey }
            var engine = ReplayEngine(domain: Self.domain, state: ListsState(), position: .zero)
            for (index, change) in history.enumerated() {
                engine.applyNext(change)
                // Every few steps, so intermediate states (items moved, lists deleted and revived) are covered.
                if index % 7 == 0 || index == history.count - 1 {
                    #expect(throws: Never.self, "seed \(seed) after change \(index)") {
                        try engine.state.checkConsistency()
                    }
                }
            }
            let restored = try Self.domain.restore(snapshot: Self.domain.snapshot(of: engine.state, weight: 1)[...])
            #expect(throws: Never.self, "seed \(seed), restored") { try restored.checkConsistency() }
        }
    }

    /// A small consistent state: list L with pending a, b, c and completed d; list M empty; item x deleted.
    static func sample() -> ListsState {
        var author = TimelineAuthor(0xC4EC)
        let l = objectID(1)
        let m = objectID(2)
        author.append(.listCreate(id: l, title: "L", color: nil, at: .top), lamport: 1)
        author.append(.listCreate(id: m, title: "M", color: nil, at: .bottom), lamport: 2)
        for (index, number) in [0xA, 0xB, 0xC, 0xD, 0xE].enumerated() {
            author.append(
                .itemCreate(id: objectID(UInt64(number)), list: l, text: "\(number)", at: .bottom),
                lamport: UInt64(3 + index))
        }
        author.append(.itemComplete(id: objectID(0xD)), lamport: 10)
        author.append(.itemDelete(id: objectID(0xE)), lamport: 11)
        return replayFromScratch(author.changes).state
    }

    /// Rebuilds `state` with one record edited: what a damaged row looks like once loaded.
    static func damaged(_ edit: (inout [ObjectID: ListRecord], inout RecordTable<ItemRecord>, inout ObjectID?) -> Void)
        -> ListsState
    {
        let state = sample()
        var lists = state.lists
        var items = state.items
        var head = state.listHead
        edit(&lists, &items, &head)
        return ListsState(lists: lists, items: items, listHead: head, listTail: state.listTail)
    }

    @Test func theSampleIsConsistent() throws {
        try Self.sample().checkConsistency()
        #expect(invariantViolations(Self.sample()).isEmpty)
    }

    @Test(
        "broken links are refused with what is wrong",
        arguments: [
            "a next item that does not exist", "an item linked to itself", "a previous link that disagrees",
            "an item linked under another list", "a deleted item still linked", "a live item in no section",
            "a list order that loops", "a first list that does not exist", "a list left out of the order",
            "a section that ends early",
        ])
    func brokenLinksAreRefused(damage: String) throws {
        let b = objectID(0xB)
        let l = objectID(1)
        let m = objectID(2)
        let state: ListsState
        let expected: String
        switch damage {
        case "a next item that does not exist":
            state = Self.damaged { _, items, _ in items[b]!.next = objectID(0x99) }
            expected = "names a next item"
        case "an item linked to itself":
            state = Self.damaged { _, items, _ in items[b]!.next = b }
            expected = "linked twice"
        case "a previous link that disagrees":
            state = Self.damaged { _, items, _ in items[objectID(0xC)]!.previous = objectID(0xA) }
            expected = "previous item"
        case "an item linked under another list":
            state = Self.damaged { _, items, _ in items[b]!.list = m }
            expected = "does not name"
        case "a deleted item still linked":
            state = Self.damaged { _, items, _ in items[b]!.deleted = true }
            expected = "does not name"
        case "a live item in no section":
            state = Self.damaged { _, items, _ in items[objectID(0xE)]!.deleted = false }
            expected = "in no section"
        case "a list order that loops":
            state = Self.damaged { lists, _, _ in lists[m]!.next = l }
            expected = "loops"
        case "a first list that does not exist":
            state = Self.damaged { _, _, head in head = objectID(0x77) }
            expected = "does not exist"
        case "a list left out of the order":
            state = Self.damaged { lists, _, _ in
                lists[objectID(3)] = ListRecord(title: "stray", color: nil, deleted: false, stamp: .zero)
            }
            expected = "not in the list order"
        default:
            state = Self.damaged { lists, _, _ in lists[l]!.pendingTail = b }
            expected = "do not end"
        }
        #expect(!invariantViolations(state).isEmpty, "the damage is real: \(damage)")
        let refusal = Result { () throws(CoreError) in try state.checkConsistency() }
        guard case let .failure(error) = refusal else {
            Issue.record("\(damage): accepted")
            return
        }
        #expect(error.description.contains(expected), "\(damage): \(error)")
        #expect(error.description.hasPrefix("the materialized state is inconsistent"), "\(error)")
    }

    /// The readers never loop or hand out a missing record, even on a state nobody checked.
    @Test func readersStopAtBrokenLinks() {
        let l = objectID(1)
        let looped = Self.damaged { _, items, _ in items[objectID(0xC)]!.next = objectID(0xA) }
        #expect(looped.itemIDs(in: l, completed: false).count <= looped.items.count)
        let dangling = Self.damaged { _, items, _ in items[objectID(0xB)]!.next = objectID(0x99) }
        #expect(dangling.itemIDs(in: l, completed: false) == [objectID(0xA), objectID(0xB)])
        #expect(Self.domain.digest(of: dangling).count == 32, "the digest of a damaged state does not trap")
        let listLoop = Self.damaged { lists, _, _ in lists[objectID(2)]!.next = l }
        #expect(listLoop.orderedListIDs.count <= listLoop.lists.count)
    }
}
