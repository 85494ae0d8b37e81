import Testing

@testable import PlaitCore

/// What a store relies on: change tracking names every record that changed, and a state rebuilt from its
/// records is the same state.
@Suite("ListsState bookkeeping")
struct ListsStateTests {
    @Test("takeChanges() names every record that differs")
    func trackingCoversEveryDifference() {
        for seed in UInt64(0)..<40 {
            let history = Histories.history(seed: seed).sorted { $0.orderKey < $1.orderKey }
            var rng = SplitMix64(seed: seed)
            var engine = ReplayEngine(domain: ListsDomain(), state: ListsState(), position: .zero)
            var start = 0
            while start < history.count {
                let end = min(history.count, start + rng.int(1...8))
                let before = engine.state
                _ = engine.modifyState { $0.takeChanges() }
                for change in history[start..<end] { engine.applyNext(change) }
                let tracked = engine.modifyState { $0.takeChanges() }
                let differences = ListsState.differences(from: before, to: engine.state)
                #expect(differences.lists.isSubset(of: tracked.lists), "seed \(seed): untracked list changes")
                #expect(differences.items.isSubset(of: Set(tracked.items)), "seed \(seed): untracked item changes")
                #expect(ListsState.differences(from: engine.state, to: engine.state) == ([], []), "seed \(seed)")
                start = end
            }
        }
    }

    @Test func differencesNameAddedChangedAndRemovedRecords() {
        var author = ListsSemanticsTests.groceries()
        let old = replayFromScratch(author.changes).state
        author.append(.itemEdit(id: objectID(0x12), text: "bread"), lamport: 5)
        author.append(
            .itemCreate(id: objectID(0x14), list: ListsSemanticsTests.list, text: "new", at: .bottom), lamport: 6)
        let new = replayFromScratch(author.changes).state
        let forward = ListsState.differences(from: old, to: new)
        // 0x12's text, 0x13's next link, 0x14 itself; the list's pending tail.
        #expect(forward.items == [objectID(0x12), objectID(0x13), objectID(0x14)])
        #expect(forward.lists == [ListsSemanticsTests.list])
        let backward = ListsState.differences(from: new, to: old)
        #expect(backward.items == forward.items, "a record only in the old state is named too")
    }

    @Test("a state rebuilt from its records (the materialized tables) is the same state")
    func rebuiltFromRecords() throws {
        for seed in UInt64(0)..<20 {
            let state = replayFromScratch(Histories.history(seed: seed)).state
            let rebuilt = ListsState(
                lists: state.lists, items: state.items, listHead: state.listHead, listTail: state.listTail)
            #expect(ListsDomain().digest(of: rebuilt) == ListsDomain().digest(of: state), "seed \(seed)")
            var restored = try ListsDomain().restore(snapshot: ListsDomain().snapshot(of: state, weight: 1)[...])
            let marked = restored.takeChanges()
            #expect(marked.lists == Set(state.lists.keys), "seed \(seed): a restore must mark every list changed")
            #expect(Set(marked.items) == Set(state.items.keys), "seed \(seed): a restore must mark every item changed")
            #expect(marked.items.count == state.items.count, "seed \(seed): an item marked twice")
        }
    }
}
