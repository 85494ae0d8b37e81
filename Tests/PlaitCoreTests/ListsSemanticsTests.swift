import Testing

@testable import PlaitCore

/// The rules of DESIGN §2 for the lists domain, one scenario each.
@Suite("Lists semantics")
struct ListsSemanticsTests {
    static let a = TimelineID(0xA)
    static let b = TimelineID(0xB)
    static let list = objectID(1)
    static let other = objectID(2)

    /// A list with pending items 0x11, 0x12, 0x13 in that order, authored on timeline A at Lamport 1…4.
    static func groceries() -> TimelineAuthor {
        var author = TimelineAuthor(Self.a)
        author.append(.listCreate(id: Self.list, title: "groceries", color: "green", at: .top), lamport: 1)
        for (index, id) in [objectID(0x11), objectID(0x12), objectID(0x13)].enumerated() {
            author.append(
                .itemCreate(id: id, list: Self.list, text: "item \(index)", at: .bottom), lamport: UInt64(index + 2))
        }
        return author
    }

    @Test func createsPlaceItemsAndLists() {
        var author = Self.groceries()
        author.append(.itemCreate(id: objectID(0x14), list: Self.list, text: "first", at: .top), lamport: 5)
        author.append(
            .itemCreate(id: objectID(0x15), list: Self.list, text: "after", at: .after(objectID(0x11))), lamport: 6)
        author.append(.listCreate(id: Self.other, title: "work", color: nil, at: .top), lamport: 7)
        author.append(.listCreate(id: objectID(3), title: "home", color: nil, at: .after(Self.other)), lamport: 8)
        let state = replayFromScratch(author.changes).state
        #expect(
            sections(state, Self.list).pending
                == [objectID(0x14), objectID(0x11), objectID(0x15), objectID(0x12), objectID(0x13)])
        #expect(state.liveListIDs == [Self.other, objectID(3), Self.list])
        #expect(state.items[objectID(0x15)]!.placedBy == ChangeRef(timeline: Self.a, seq: 6))
        #expect(invariantViolations(state).isEmpty)
    }

    @Test("done goes to the top of completed at replay time: complete A then B gives B, A")
    func completeGoesToTopOfCompleted() {
        var author = Self.groceries()
        author.append(.itemComplete(id: objectID(0x11)), lamport: 5)
        author.append(.itemComplete(id: objectID(0x13)), lamport: 6)
        var state = replayFromScratch(author.changes).state
        #expect(sections(state, Self.list).completed == [objectID(0x13), objectID(0x11)])
        #expect(sections(state, Self.list).pending == [objectID(0x12)])

        // Concurrent completes from two devices: the order is the replay order, the same everywhere.
        var b = TimelineAuthor(Self.b)
        b.append(.itemComplete(id: objectID(0x12)), lamport: 5)  // sorts after A's change at 5 (A < B)
        state = replayFromScratch(author.changes + b.changes).state
        #expect(sections(state, Self.list).completed == [objectID(0x13), objectID(0x12), objectID(0x11)])
    }

    @Test("reopen goes to the bottom of pending")
    func reopenGoesToBottomOfPending() {
        var author = Self.groceries()
        author.append(.itemComplete(id: objectID(0x11)), lamport: 5)
        author.append(.itemReopen(id: objectID(0x11)), lamport: 6)
        let state = replayFromScratch(author.changes).state
        #expect(sections(state, Self.list).pending == [objectID(0x12), objectID(0x13), objectID(0x11)])
        #expect(sections(state, Self.list).completed == [])
        #expect(state.items[objectID(0x11)]!.completed == false)
    }

    @Test("a move after a deleted item falls back to the top")
    func moveAfterDeletedItemFallsBackToTop() {
        var author = Self.groceries()
        author.append(.itemDelete(id: objectID(0x12)), lamport: 5)
        author.append(.itemMove(id: objectID(0x13), list: nil, at: .after(objectID(0x12))), lamport: 6)
        var state = replayFromScratch(author.changes).state
        #expect(sections(state, Self.list).pending == [objectID(0x13), objectID(0x11)])

        // Concurrently: B moves after 0x12 while A deletes it first in replay order.
        var a = Self.groceries()
        var b = TimelineAuthor(Self.b)
        a.append(.itemDelete(id: objectID(0x12)), lamport: 5)
        b.append(.itemMove(id: objectID(0x13), list: nil, at: .after(objectID(0x12))), lamport: 5)
        state = replayFromScratch(a.changes + b.changes).state
        #expect(sections(state, Self.list).pending == [objectID(0x13), objectID(0x11)])

        // An anchor in the other section, or unknown, also means the top; so does a list anchor that is gone.
        var c = Self.groceries()
        c.append(.itemComplete(id: objectID(0x11)), lamport: 5)
        c.append(.itemMove(id: objectID(0x13), list: nil, at: .after(objectID(0x11))), lamport: 6)
        c.append(.itemMove(id: objectID(0x12), list: nil, at: .after(objectID(0x99))), lamport: 7)
        c.append(.listCreate(id: Self.other, title: "work", color: nil, at: .bottom), lamport: 8)
        c.append(.listCreate(id: objectID(3), title: "gone", color: nil, at: .bottom), lamport: 9)
        c.append(.listDelete(id: objectID(3), observed: .empty), lamport: 10)
        c.append(.listMove(id: Self.other, at: .after(objectID(3))), lamport: 11)
        state = replayFromScratch(c.changes).state
        #expect(sections(state, Self.list).pending == [objectID(0x12), objectID(0x13)])
        #expect(state.liveListIDs == [Self.other, Self.list])
        #expect(invariantViolations(state).isEmpty)
    }

    @Test func moveAcrossListsRecordsThePlacingChange() {
        var author = Self.groceries()
        author.append(.listCreate(id: Self.other, title: "work", color: nil, at: .bottom), lamport: 5)
        author.append(.itemComplete(id: objectID(0x12)), lamport: 6)
        let move = author.append(.itemMove(id: objectID(0x12), list: Self.other, at: .top), lamport: 7)
        let state = replayFromScratch(author.changes).state
        #expect(sections(state, Self.other).completed == [objectID(0x12)], "a completed item stays completed")
        #expect(state.items[objectID(0x12)]!.list == Self.other)
        #expect(state.items[objectID(0x12)]!.placedBy == move.ref)
        #expect(sections(state, Self.list).pending == [objectID(0x11), objectID(0x13)])
        #expect(invariantViolations(state).isEmpty)
    }

    @Test("duplicate creates collapse and keep the original placing change")
    func duplicateCreatesCollapse() {
        var a = Self.groceries()
        var b = TimelineAuthor(Self.b)
        // B rejoined and pushes its whole state as creates: same IDs, its own (older) text.
        b.append(.listCreate(id: Self.list, title: "GROCERIES", color: "red", at: .bottom), lamport: 5)
        b.append(.itemCreate(id: objectID(0x11), list: Self.list, text: "stale text", at: .bottom), lamport: 6)
        b.append(.itemCreate(id: objectID(0x12), list: Self.other, text: "elsewhere", at: .top), lamport: 7)
        a.append(.itemDelete(id: objectID(0x13)), lamport: 8)
        b.append(.itemCreate(id: objectID(0x13), list: Self.list, text: "again", at: .top), lamport: 9)
        let with = replayFromScratch(a.changes + b.changes).state
        let without = replayFromScratch(a.changes).state
        #expect(ListsDomain().digest(of: with) == ListsDomain().digest(of: without))
        #expect(with.items[objectID(0x11)]!.text == "item 0")
        #expect(with.items[objectID(0x11)]!.placedBy == ChangeRef(timeline: Self.a, seq: 2))
        #expect(with.items[objectID(0x12)]!.list == Self.list)
        #expect(with.items[objectID(0x13)]!.deleted, "a tombstoned ID is not recreated")
        #expect(with.lists[Self.list]!.title == "groceries")
        #expect(with.lists[Self.other] == nil)
    }

    /// A deletes the list having seen items 0x11…0x13; another device concurrently adds 0x20 at the same
    /// Lamport time, so the timeline IDs decide which replays first. Both orders.
    @Test("an item added concurrently to a deleted list survives with its list", arguments: [false, true])
    func concurrentAddSurvivesListDelete(addSortsFirst: Bool) {
        var a = Self.groceries()
        var adder = TimelineAuthor(addSortsFirst ? TimelineID(0x1) : Self.b)
        a.append(.listDelete(id: Self.list, observed: Summary([Self.a: 4])), lamport: 5)
        adder.append(.itemCreate(id: objectID(0x20), list: Self.list, text: "concurrent", at: .top), lamport: 5)
        let changes = a.changes + adder.changes
        let ordered = changes.sorted { $0.orderKey < $1.orderKey }
        #expect((ordered.last!.timeline == adder.timeline) == !addSortsFirst)
        let state = replayFromScratch(changes).state
        #expect(state.items[objectID(0x20)]!.deleted == false)
        #expect(state.lists[Self.list]!.deleted == false)
        #expect(state.liveListIDs == [Self.list])
        #expect(sections(state, Self.list).pending == [objectID(0x20)])
        for id in [objectID(0x11), objectID(0x12), objectID(0x13)] { #expect(state.items[id]!.deleted) }
        #expect(state.lists[Self.list]!.title == "groceries")
        #expect(state.lists[Self.list]!.color == "green")
        #expect(invariantViolations(state).isEmpty)
    }

    @Test func addSortsBeforeTheDeleteWhenItsLamportIsLower() {
        // The add before the delete in replay order, with a distinct Lamport time.
        var a = Self.groceries()
        var b = TimelineAuthor(Self.b)
        b.append(.itemCreate(id: objectID(0x20), list: Self.list, text: "concurrent", at: .top), lamport: 5)
        a.append(.listDelete(id: Self.list, observed: Summary([Self.a: 4])), lamport: 6)
        let state = replayFromScratch(a.changes + b.changes).state
        #expect(state.items[objectID(0x20)]!.deleted == false)
        #expect(state.lists[Self.list]!.deleted == false)
        #expect(sections(state, Self.list).pending == [objectID(0x20)])
    }

    @Test func anItemMovedIntoTheListConcurrentlySurvivesToo() {
        var a = Self.groceries()
        a.append(.listCreate(id: Self.other, title: "work", color: nil, at: .bottom), lamport: 5)
        a.append(.itemCreate(id: objectID(0x30), list: Self.other, text: "moved", at: .top), lamport: 6)
        var b = TimelineAuthor(Self.b)
        b.append(.itemMove(id: objectID(0x30), list: Self.list, at: .top), lamport: 7)
        // A deletes having seen everything of its own, not B's move.
        a.append(.listDelete(id: Self.list, observed: Summary([Self.a: 6])), lamport: 7)
        let state = replayFromScratch(a.changes + b.changes).state
        #expect(state.lists[Self.list]!.deleted == false)
        #expect(sections(state, Self.list).pending == [objectID(0x30)])
    }

    @Test("item.create into an unknown list creates a list titled Recovered")
    func createIntoUnknownListRecovers() {
        var b = TimelineAuthor(Self.b)
        let ghost = objectID(0x77)
        b.append(.listCreate(id: Self.other, title: "work", color: nil, at: .top), lamport: 1)
        b.append(.itemCreate(id: objectID(0x20), list: ghost, text: "orphan", at: .top), lamport: 2)
        let state = replayFromScratch(b.changes).state
        #expect(state.lists[ghost]?.title == ListsDomain.recoveredTitle)
        #expect(state.lists[ghost]?.deleted == false)
        #expect(state.liveListIDs == [Self.other, ghost], "at the bottom")
        #expect(sections(state, ghost).pending == [objectID(0x20)])
        #expect(invariantViolations(state).isEmpty)
    }

    @Test func deleteWithEverythingObservedDeletesTheList() {
        var a = Self.groceries()
        a.append(.itemComplete(id: objectID(0x12)), lamport: 5)
        a.append(.listDelete(id: Self.list, observed: Summary([Self.a: 5])), lamport: 6)
        let state = replayFromScratch(a.changes).state
        #expect(state.lists[Self.list]!.deleted)
        #expect(state.liveListIDs.isEmpty)
        #expect(state.orderedListIDs == [Self.list], "the tombstone keeps its place")
        #expect(state.items.values.allSatisfy { $0.deleted })
        #expect(invariantViolations(state).isEmpty)
    }

    @Test func renameRecolorMoveEdit() {
        var a = Self.groceries()
        a.append(.listCreate(id: Self.other, title: "work", color: nil, at: .bottom), lamport: 5)
        a.append(.listRename(id: Self.list, title: "food"), lamport: 6)
        a.append(.listRecolor(id: Self.list, color: nil), lamport: 7)
        a.append(.listMove(id: Self.list, at: .bottom), lamport: 8)
        a.append(.itemEdit(id: objectID(0x12), text: "bread"), lamport: 9)
        a.append(.itemMove(id: objectID(0x11), list: nil, at: .bottom), lamport: 10)
        let state = replayFromScratch(a.changes).state
        #expect(state.lists[Self.list]!.title == "food")
        #expect(state.lists[Self.list]!.color == nil)
        #expect(state.liveListIDs == [Self.other, Self.list])
        #expect(state.items[objectID(0x12)]!.text == "bread")
        #expect(sections(state, Self.list).pending == [objectID(0x12), objectID(0x13), objectID(0x11)])
        #expect(state.lists[Self.list]!.stamp.lamport == 8)
    }

    /// Every kind aimed at something missing, deleted or already in the wanted condition.
    @Test("operations on missing or deleted objects are no-ops and change nothing")
    func noopsChangeNothing() {
        var setup = Self.groceries()
        setup.append(.listCreate(id: Self.other, title: "work", color: nil, at: .bottom), lamport: 5)
        setup.append(.listCreate(id: objectID(3), title: "gone", color: nil, at: .bottom), lamport: 6)
        setup.append(.listDelete(id: objectID(3), observed: Summary([Self.a: 6])), lamport: 7)
        setup.append(.itemDelete(id: objectID(0x13)), lamport: 8)
        setup.append(.itemComplete(id: objectID(0x12)), lamport: 9)
        let base = replayFromScratch(setup.changes)
        let missingList = objectID(0x99)
        let deletedList = objectID(3)
        let missingItem = objectID(0x98)
        let deletedItem = objectID(0x13)
        let noops: [ListsChange] = [
            .listCreate(id: Self.list, title: "again", color: "red", at: .top),
            .listCreate(id: deletedList, title: "again", color: "red", at: .top),
            .listRename(id: missingList, title: "x"), .listRename(id: deletedList, title: "x"),
            .listRecolor(id: missingList, color: "red"), .listRecolor(id: deletedList, color: "red"),
            .listMove(id: missingList, at: .top), .listMove(id: deletedList, at: .top),
            .listMove(id: Self.list, at: .after(Self.list)),
            .listDelete(id: missingList, observed: Summary([Self.a: 99])),
            .listDelete(id: deletedList, observed: Summary([Self.a: 99])),
            .itemCreate(id: objectID(0x11), list: Self.other, text: "dup", at: .top),
            .itemCreate(id: deletedItem, list: Self.list, text: "dup", at: .top),
            .itemEdit(id: missingItem, text: "x"), .itemEdit(id: deletedItem, text: "x"),
            .itemComplete(id: missingItem), .itemComplete(id: deletedItem), .itemComplete(id: objectID(0x12)),
            .itemReopen(id: missingItem), .itemReopen(id: deletedItem), .itemReopen(id: objectID(0x11)),
            .itemMove(id: missingItem, list: nil, at: .top), .itemMove(id: deletedItem, list: Self.other, at: .top),
            .itemMove(id: objectID(0x11), list: missingList, at: .top),
            .itemMove(id: objectID(0x11), list: nil, at: .after(objectID(0x11))),
            .itemDelete(id: missingItem), .itemDelete(id: deletedItem),
        ]
        for (index, change) in noops.enumerated() {
            var state = base.state
            _ = state.takeChanges()
            var author = TimelineAuthor(Self.b)
            let wrapped = author.append(change, lamport: 100)
            let outcome = ListsDomain().apply(wrapped, to: &state)
            #expect(outcome == .noop, "\(index): \(change)")
            #expect(ListsDomain().digest(of: state) == base.digest, "\(index): \(change)")
            // A no-op changes no field but the stamp of the object it names (if that object exists): the
            // join of baselines relies on stamps covering every change addressed to an object.
            var unstamped = state
            for (id, record) in base.state.lists { unstamped.lists[id]?.stamp = record.stamp }
            for (id, record) in base.state.items { unstamped.items[id]?.stamp = record.stamp }
            #expect(unstamped.lists == base.state.lists && unstamped.items == base.state.items, "\(index): \(change)")
            let touched = state.takeChanges()
            let stamped = touched.lists.union(Set(touched.items))
            #expect(stamped.count <= 1, "\(index): \(change) marked \(stamped.count) records changed")
        }
        // And the engine counts them.
        var author = TimelineAuthor(Self.b)
        let batch = noops.enumerated().map { author.append($1, lamport: 100 + UInt64($0)) }
        var engine = base
        let stats = try? engine.integrate(
            batch, source: ChangeArraySource(setup.changes + batch), fallback: emptyFallback)
        #expect(stats?.noops == noops.count)
        #expect(stats?.applied == 0)
        #expect(engine.digest == base.digest)
    }

    @Test func aPayloadThatDoesNotDecodeIsANoop() {
        var author = Self.groceries()
        let garbage = author.append(kind: "item.edit", version: 1, payload: [0xff, 0xff], lamport: 5)
        var state = replayFromScratch(Array(author.changes.dropLast())).state
        let before = ListsDomain().digest(of: state)
        #expect(ListsDomain().apply(garbage, to: &state) == .noop)
        #expect(ListsDomain().digest(of: state) == before)
    }
}
