/// Checking a state read back from storage (the materialized rows) before anything walks its links.
///
/// Replay only ever builds consistent states, but rows on disk can rot or be edited: a `next` that names no
/// item, a cycle, an item linked into two sections. Code that walks links (display, the digest, the next edit)
/// assumes consistency, so a loaded state is checked once, here, and rebuilt from the changes if it fails.
extension ListsState {
    /// Throws `CoreError.inconsistentState` naming the first problem found; O(lists + items).
    ///
    /// Checks exactly what replay guarantees: every list is in the list order once (tombstones included), in
    /// both directions, between `listHead` and `listTail`; every live item is in exactly one section, the one
    /// its record names (its list, pending or completed), in both directions; tombstones are in no section.
    public func checkConsistency() throws(CoreError) {
        func fail(_ problem: String) -> CoreError { .inconsistentState(problem) }
        func short(_ id: ObjectID) -> String { String(id.description.prefix(8)) }
        // No visited sets (this runs on every load, over every row): a walk whose `previous` links all agree
        // cannot revisit a record — a loop back would need a second, different `previous` — so agreeing links,
        // a step bound and a count of visits prove "each exactly once".

        // The list order.
        var visitedLists = 0
        var previous: ObjectID?
        var cursor = listHead
        while let id = cursor {
            guard let record = lists[id] else {
                throw fail(
                    previous.map { "list \(short($0)) names a next list \(short(id)) that does not exist" }
                        ?? "the first list \(short(id)) does not exist")
            }
            guard record.previous == previous, visitedLists < lists.count else {
                throw fail("the list order loops back to list \(short(id))")
            }
            visitedLists += 1
            previous = id
            cursor = record.next
        }
        guard listTail == previous else { throw fail("the last list is not the one the list order ends with") }
        guard visitedLists == lists.count else {
            throw fail("\(lists.count - visitedLists) of \(lists.count) lists are not in the list order")
        }

        // The sections.
        var visitedItems = 0
        for (listID, list) in lists {
            for completed in [false, true] {
                let section = completed ? "completed" : "pending"
                var previous: ObjectID?
                var cursor = completed ? list.completedHead : list.pendingHead
                while let id = cursor {
                    guard let item = items[id] else {
                        throw fail(
                            previous.map { "item \(short($0)) names a next item \(short(id)) that does not exist" }
                                ?? "list \(short(listID)) begins its \(section) items with \(short(id)), which does "
                                + "not exist")
                    }
                    guard item.list == listID, item.completed == completed, !item.deleted else {
                        throw fail("item \(short(id)) is linked into a section its record does not name")
                    }
                    guard item.previous == previous, visitedItems < items.count else {
                        throw fail("item \(short(id)) is linked twice or names another previous item than the one "
                            + "before it")
                    }
                    visitedItems += 1
                    previous = id
                    cursor = item.next
                }
                guard (completed ? list.completedTail : list.pendingTail) == previous else {
                    throw fail("the \(section) items of list \(short(listID)) do not end where the list says")
                }
            }
        }
        var live = 0
        for (id, item) in items {
            if !item.deleted {
                live += 1
            } else if item.previous != nil || item.next != nil {
                throw fail("deleted item \(short(id)) still has links")
            }
        }
        guard visitedItems == live else { throw fail("\(live - visitedItems) live items are in no section") }
    }
}
