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

        // The list order.
        var seenLists = Set<ObjectID>()
        seenLists.reserveCapacity(lists.count)
        var previous: ObjectID?
        var cursor = listHead
        while let id = cursor {
            guard let record = lists[id] else {
                throw fail(
                    previous.map { "list \(short($0)) names a next list \(short(id)) that does not exist" }
                        ?? "the first list \(short(id)) does not exist")
            }
            guard seenLists.insert(id).inserted else { throw fail("the list order loops back to list \(short(id))") }
            guard record.previous == previous else {
                throw fail("list \(short(id)) names another previous list than the one before it")
            }
            previous = id
            cursor = record.next
        }
        guard listTail == previous else { throw fail("the last list is not the one the list order ends with") }
        guard seenLists.count == lists.count else {
            throw fail("\(lists.count - seenLists.count) of \(lists.count) lists are not in the list order")
        }

        // The sections.
        var seenItems = Set<ObjectID>()
        seenItems.reserveCapacity(items.count)
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
                    guard seenItems.insert(id).inserted else {
                        throw fail("item \(short(id)) is linked twice (a loop, or two sections)")
                    }
                    guard item.list == listID, item.completed == completed, !item.deleted else {
                        throw fail("item \(short(id)) is linked into a section its record does not name")
                    }
                    guard item.previous == previous else {
                        throw fail("item \(short(id)) names another previous item than the one before it")
                    }
                    previous = id
                    cursor = item.next
                }
                guard (completed ? list.completedTail : list.pendingTail) == previous else {
                    throw fail("the \(section) items of list \(short(listID)) do not end where the list says")
                }
            }
        }
        for (id, item) in items where !seenItems.contains(id) {
            guard item.deleted else { throw fail("live item \(short(id)) is in no section") }
            guard item.previous == nil, item.next == nil else {
                throw fail("deleted item \(short(id)) still has links")
            }
        }
    }
}
