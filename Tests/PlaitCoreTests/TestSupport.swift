import Testing

@testable import PlaitCore

extension SplitMix64 {
    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &self) }

    mutating func pick<T>(_ values: [T]) -> T? { values.randomElement(using: &self) }
}

/// A fixed object ID for hand-written scenarios.
func objectID(_ number: UInt64) -> ObjectID {
    ObjectID(high: 0x1111_0000_0000_4000, low: 0x8000_0000_0000_0000 | number)
}

/// Appends changes to one timeline the way a device does: next seq, chained hash.
struct TimelineAuthor {
    let timeline: TimelineID
    private(set) var changes: [Change] = []

    init(_ timeline: TimelineID) { self.timeline = timeline }

    init(_ raw: UInt64) { self.init(TimelineID(raw)) }

    /// Continues an existing timeline.
    init(continuing changes: [Change]) {
        timeline = changes[0].timeline
        self.changes = changes
    }

    var head: Change? { changes.last }

    @discardableResult
    mutating func append(_ change: ListsChange, lamport: UInt64, wallTime: Int64 = 0) -> Change {
        append(kind: change.kind, version: 1, payload: change.payload, lamport: lamport, wallTime: wallTime)
    }

    @discardableResult
    mutating func append(
        kind: String, version: UInt32, payload: [UInt8], lamport: UInt64, wallTime: Int64 = 0
    ) -> Change {
        let change = Change(
            timeline: timeline, seq: UInt64(changes.count + 1), lamport: lamport,
            previousHash: changes.last?.hash ?? Change.zeroHash, kind: kind, version: version, wallTime: wallTime,
            payload: payload)
        changes.append(change)
        return change
    }
}

/// Replays `changes` from the empty state (or `state`) in replay order: the reference every clever path is
/// compared with.
func replayFromScratch(_ changes: [Change], from state: ListsState = ListsState()) -> ReplayEngine<ListsDomain> {
    var engine = ReplayEngine(domain: ListsDomain(), state: state, position: .zero, checkpointInterval: Int.max)
    for change in changes.sorted(by: { $0.orderKey < $1.orderKey }) { engine.applyNext(change) }
    return engine
}

func digestOfReplay(_ changes: [Change]) -> [UInt8] { replayFromScratch(changes).digest }

/// The restart point when nothing is stored: the empty state before every change.
func emptyFallback(_ before: OrderKey) -> (key: OrderKey, state: ListsState) { (.zero, ListsState()) }

/// Folds `changes` (any set of per-timeline prefixes) in replay order into a baseline on top of `previous`.
func fold(_ changes: [Change], onto previous: Baseline? = nil) throws -> Baseline {
    var folder = try BaselineFolder(domain: ListsDomain(), previous: previous)
    for change in changes.sorted(by: { $0.orderKey < $1.orderKey }) { try folder.add(change) }
    return folder.finish()
}

/// Restores a baseline and replays `rest` on top of it, as a device holding that baseline does.
func replay(_ rest: [Change], onto baseline: Baseline) throws -> ReplayEngine<ListsDomain> {
    let state = try ListsDomain().restore(snapshot: baseline.snapshot[...])
    return replayFromScratch(rest, from: state)
}

/// Structural invariants of a lists state; empty when it is consistent.
func invariantViolations(_ state: ListsState) -> [String] {
    var problems: [String] = []
    // The list order: one chain through every list, tombstones included.
    var walked: [ObjectID] = []
    var previous: ObjectID?
    var cursor = state.listHead
    while let id = cursor, walked.count <= state.lists.count {
        guard let record = state.lists[id] else {
            problems.append("list order names unknown list \(id)")
            break
        }
        if record.previous != previous { problems.append("list \(id): previous link is wrong") }
        walked.append(id)
        previous = id
        cursor = record.next
    }
    if state.listTail != previous { problems.append("list tail is wrong") }
    if walked.count != state.lists.count || Set(walked) != Set(state.lists.keys) {
        problems.append("list order holds \(walked.count) of \(state.lists.count) lists (or a cycle)")
    }
    // Sections.
    var placements: [ObjectID: Int] = [:]
    for (listID, list) in state.lists {
        for completed in [false, true] {
            var last: ObjectID?
            var seen = 0
            var cursor = completed ? list.completedHead : list.pendingHead
            while let id = cursor, seen <= state.items.count {
                seen += 1
                guard let item = state.items[id] else {
                    problems.append("list \(listID) links unknown item \(id)")
                    break
                }
                if item.deleted { problems.append("deleted item \(id) is linked in list \(listID)") }
                if item.list != listID { problems.append("item \(id) is linked in \(listID) but names \(item.list)") }
                if item.completed != completed { problems.append("item \(id) is in the wrong section") }
                if item.previous != last { problems.append("item \(id): previous link is wrong") }
                placements[id, default: 0] += 1
                last = id
                cursor = item.next
            }
            if (completed ? list.completedTail : list.pendingTail) != last {
                problems.append("list \(listID): \(completed ? "completed" : "pending") tail is wrong")
            }
        }
        if list.deleted && (list.pendingHead != nil || list.completedHead != nil) {
            problems.append("deleted list \(listID) still holds items")
        }
    }
    for (id, item) in state.items {
        if item.deleted {
            if item.previous != nil || item.next != nil || placements[id] != nil {
                problems.append("deleted item \(id) is still linked")
            }
        } else {
            if placements[id] != 1 { problems.append("live item \(id) is in \(placements[id] ?? 0) sections") }
            if state.lists[item.list]?.deleted != false { problems.append("live item \(id) is in a dead list") }
        }
    }
    return problems
}

/// Pending and completed item IDs of a list, for readable expectations.
func sections(_ state: ListsState, _ list: ObjectID) -> (pending: [ObjectID], completed: [ObjectID]) {
    (state.itemIDs(in: list, completed: false), state.itemIDs(in: list, completed: true))
}

extension Array where Element == UInt8 {
    init(hex: String) {
        var bytes: [UInt8] = []
        var iterator = hex.utf8.makeIterator()
        while let high = iterator.next(), let low = iterator.next() {
            bytes.append(hexValue(high)! << 4 | hexValue(low)!)
        }
        self = bytes
    }
}

/// Random histories (what a simulated group of 3–5 devices authored), shared by the replay and baseline tests
/// so each is generated once per run. `histories[i]` is the history of seed `i`.
enum Histories {
    static let count = 80

    static let all: [[Change]] = (0..<UInt64(count)).map { seed in
        var simulation = Simulation(seed: seed, deviceCount: 3...5)
        try! simulation.run(steps: 70, authorPercent: 70)
        return simulation.allChanges
    }

    static func history(seed: UInt64) -> [Change] { all[Int(seed % UInt64(count))] }
}
