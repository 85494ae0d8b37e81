import Testing

@testable import PlaitCore

/// One simulated device: contiguous per-timeline prefixes of changes, and a replay engine fed batch by batch
/// exactly as an agent feeds it (late changes included).
struct SimulatedDevice {
    let timeline: TimelineID
    private(set) var held: [TimelineID: [Change]] = [:]
    /// Everything held, in replay order: the engine's change source.
    private(set) var ordered: [Change] = []
    private(set) var engine: ReplayEngine<ListsDomain>
    private(set) var maxLamport: UInt64 = 0
    private(set) var rollbacks = 0
    private(set) var fallbacks = 0
    private(set) var skipped = 0

    init(timeline: TimelineID, checkpointInterval: Int, checkpointLimit: Int) {
        self.timeline = timeline
        engine = ReplayEngine(
            domain: ListsDomain(), state: ListsState(), position: .zero, checkpointInterval: checkpointInterval,
            checkpointLimit: checkpointLimit)
    }

    var state: ListsState { engine.state }

    var summary: Summary { Summary(held.mapValues { UInt64($0.count) }) }

    func count(of timeline: TimelineID) -> Int { held[timeline]?.count ?? 0 }

    /// Authors a change against everything held: Lamport = 1 + the largest held, seq = next, chained hash.
    @discardableResult
    mutating func author(kind: String, version: UInt32 = 1, payload: [UInt8], wallTime: Int64) throws -> Change {
        let previous = held[timeline]?.last
        let change = Change(
            timeline: timeline, seq: (previous?.seq ?? 0) + 1, lamport: maxLamport + 1,
            previousHash: previous?.hash ?? Change.zeroHash, kind: kind, version: version, wallTime: wallTime,
            payload: payload)
        try receive([change])
        return change
    }

    /// Stores a batch (which must continue this device's prefixes) and integrates it into the engine.
    @discardableResult
    mutating func receive(_ batch: [Change]) throws -> ReplayStats {
        guard !batch.isEmpty else { return ReplayStats() }
        for change in batch.sorted(by: { $0.ref < $1.ref }) {
            precondition(change.seq == UInt64(count(of: change.timeline)) + 1, "the harness sent a gap")
            held[change.timeline, default: []].append(change)
            maxLamport = max(maxLamport, change.lamport)
        }
        ordered = merge(ordered, batch.sorted { $0.orderKey < $1.orderKey })
        var fallbackCalls = 0
        let stats = try engine.integrate(batch, source: ChangeArraySource(ordered)) { before in
            fallbackCalls += 1
            return emptyFallback(before)
        }
        fallbacks += fallbackCalls
        if stats.rolledBack { rollbacks += 1 }
        skipped += stats.skipped
        return stats
    }

    /// What this device sends `other` in a partial exchange: for a random subset of timelines, a random prefix
    /// of what it holds beyond `other`. `other` keeps holding contiguous prefixes.
    func partialBatch(for other: SimulatedDevice, using rng: inout SplitMix64) -> [Change] {
        var batch: [Change] = []
        for timeline in held.keys.sorted() where rng.chance(60) {
            let mine = count(of: timeline)
            let theirs = other.count(of: timeline)
            guard mine > theirs else { continue }
            let length = rng.int(1...(mine - theirs))
            batch += held[timeline]![theirs..<(theirs + length)]
        }
        return batch
    }

    /// Everything this device holds beyond `other`.
    func everything(beyond other: SimulatedDevice) -> [Change] {
        held.keys.sorted().flatMap { timeline in held[timeline]!.dropFirst(other.count(of: timeline)) }
    }

    private func merge(_ lhs: [Change], _ rhs: [Change]) -> [Change] {
        var out: [Change] = []
        out.reserveCapacity(lhs.count + rhs.count)
        var left = 0
        var right = 0
        while left < lhs.count || right < rhs.count {
            if right == rhs.count || (left < lhs.count && lhs[left].orderKey < rhs[right].orderKey) {
                out.append(lhs[left])
                left += 1
            } else {
                out.append(rhs[right])
                right += 1
            }
        }
        return out
    }
}

/// Several devices authoring every kind of change at random, often on the same objects, and exchanging random
/// partial batches. Deterministic from its seed.
struct Simulation {
    let seed: UInt64
    var rng: SplitMix64
    var devices: [SimulatedDevice]
    /// Every list and item ID ever authored anywhere, in creation order: lets a device name objects it has not
    /// heard of yet.
    private var listPool: [ObjectID] = []
    private var itemPool: [ObjectID] = []
    private var clock: Int64 = 0
    private(set) var kindsAuthored: [String: Int] = [:]

    static let colors: [String?] = [nil, "red", "green", "blue", ""]

    init(seed: UInt64, deviceCount: ClosedRange<Int> = 4...6, checkpointInterval: ClosedRange<Int> = 5...20) {
        self.seed = seed
        rng = SplitMix64(seed: seed)
        var devices: [SimulatedDevice] = []
        for _ in 0..<rng.int(deviceCount) {
            devices.append(
                SimulatedDevice(
                    timeline: TimelineID(rng.next()), checkpointInterval: rng.int(checkpointInterval),
                    checkpointLimit: rng.int(2...8)))
        }
        self.devices = devices
    }

    /// Random authoring and partial exchanges.
    mutating func run(steps: Int, authorPercent: Int = 55) throws {
        for _ in 0..<steps {
            if rng.chance(authorPercent) {
                try authorRandomChange(on: rng.int(0...(devices.count - 1)))
            } else {
                try exchangePartially()
            }
        }
    }

    mutating func exchangePartially() throws {
        let from = rng.int(0...(devices.count - 1))
        var to = rng.int(0...(devices.count - 2))
        if to >= from { to += 1 }
        let batch = devices[from].partialBatch(for: devices[to], using: &rng)
        try devices[to].receive(batch)
    }

    /// Everyone ends holding everything: device 0 gathers, then hands out in two random partial steps.
    mutating func exchangeEverything() throws {
        for index in devices.indices.dropFirst() {
            try devices[0].receive(devices[index].everything(beyond: devices[0]))
        }
        for index in devices.indices.dropFirst() {
            let first = devices[0].partialBatch(for: devices[index], using: &rng)
            try devices[index].receive(first)
            try devices[index].receive(devices[0].everything(beyond: devices[index]))
        }
    }

    /// The union of every device's changes.
    var allChanges: [Change] {
        var byTimeline: [TimelineID: [Change]] = [:]
        for device in devices {
            for (timeline, changes) in device.held where changes.count > byTimeline[timeline]?.count ?? 0 {
                byTimeline[timeline] = changes
            }
        }
        return byTimeline.keys.sorted().flatMap { byTimeline[$0]! }
    }

    mutating func authorRandomChange(on index: Int) throws {
        clock += 1
        let (kind, version, payload) = randomChange(for: devices[index])
        kindsAuthored[kind, default: 0] += 1
        try devices[index].author(kind: kind, version: version, payload: payload, wallTime: clock)
    }

    private mutating func newList() -> ObjectID {
        let id = ObjectID.random(using: &rng)
        listPool.append(id)
        return id
    }

    private mutating func newItem() -> ObjectID {
        let id = ObjectID.random(using: &rng)
        itemPool.append(id)
        return id
    }

    /// A random change as `device` would author it, targeting mostly objects it knows (live or deleted).
    private mutating func randomChange(for device: SimulatedDevice) -> (String, UInt32, [UInt8]) {
        let state = device.state
        // Dictionary order differs between processes: sort before drawing.
        let lists = state.lists.keys.sorted()
        let liveLists = lists.filter { state.lists[$0]!.deleted == false }
        let items = state.items.keys.sorted()
        let liveItems = items.filter { state.items[$0]!.deleted == false }
        let listPool = self.listPool
        let itemPool = self.itemPool

        func pickList(_ rng: inout SplitMix64) -> ObjectID? {
            let roll = rng.int(0...99)
            if roll < 65, let id = rng.pick(liveLists) { return id }
            if roll < 85, let id = rng.pick(lists) { return id }
            return rng.pick(listPool)
        }
        func pickItem(_ rng: inout SplitMix64) -> ObjectID? {
            let roll = rng.int(0...99)
            if roll < 70, let id = rng.pick(liveItems) { return id }
            if roll < 88, let id = rng.pick(items) { return id }
            return rng.pick(itemPool)
        }
        func listPosition(_ rng: inout SplitMix64) -> Position {
            switch rng.int(0...3) {
            case 0: return .top
            case 1: return .bottom
            default: return pickList(&rng).map { .after($0) } ?? .top
            }
        }
        func itemPosition(_ rng: inout SplitMix64, near item: ObjectID?) -> Position {
            switch rng.int(0...3) {
            case 0: return .top
            case 1: return .bottom
            default:
                // Mostly a neighbour in the same list, sometimes any item (deleted, elsewhere, unknown).
                if rng.chance(60), let item, let list = state.items[item]?.list {
                    let neighbours = state.itemIDs(in: list, completed: false)
                        + state.itemIDs(in: list, completed: true)
                    if let anchor = rng.pick(neighbours) { return .after(anchor) }
                }
                return pickItem(&rng).map { .after($0) } ?? .bottom
            }
        }
        let text = "t\(clock)-\(rng.int(0...9))"

        if rng.chance(2) {
            // A kind or version this build does not understand.
            if rng.chance(50) { return ("item.pin", 1, [0x0a, 0x02, 0xca, 0xfe]) }
            let id = pickItem(&rng) ?? newItem()
            return ("item.edit", 2, ListsChange.itemEdit(id: id, text: text).payload)
        }

        let change: ListsChange
        let roll = lists.isEmpty && listPool.isEmpty ? 0 : rng.int(0...99)
        switch roll {
        case 0..<8:
            let color = rng.pick(Self.colors)!
            let at = listPosition(&rng)
            change = .listCreate(id: newList(), title: text, color: color, at: at)
        case 8..<12:
            change = .listRename(id: pickList(&rng)!, title: text)
        case 12..<16:
            change = .listRecolor(id: pickList(&rng)!, color: rng.pick(Self.colors)!)
        case 16..<21:
            let id = pickList(&rng)!
            change = .listMove(id: id, at: rng.chance(5) ? .after(id) : listPosition(&rng))
        case 21..<27:
            change = .listDelete(id: pickList(&rng)!, observed: device.summary)
        case 27..<50:
            if rng.chance(3), let existing = rng.pick(items) {
                // A duplicate create, as a device that rejoined pushes its whole state.
                change = .itemCreate(id: existing, list: pickList(&rng)!, text: text, at: .bottom)
            } else {
                var list = pickList(&rng)!
                if rng.chance(4) { list = newList() }  // an unknown list: "Recovered"
                let id = newItem()
                let at = itemPosition(&rng, near: rng.pick(state.itemIDs(in: list, completed: false)))
                change = .itemCreate(id: id, list: list, text: text, at: at)
            }
        default:
            guard let item = pickItem(&rng) else {
                change = .itemCreate(id: newItem(), list: pickList(&rng)!, text: text, at: .top)
                break
            }
            switch roll {
            case 50..<60: change = .itemEdit(id: item, text: text)
            case 60..<71: change = .itemComplete(id: item)
            case 71..<79: change = .itemReopen(id: item)
            case 79..<91:
                let list: ObjectID? = rng.chance(50) ? nil : pickList(&rng)
                let at: Position = rng.chance(4) ? .after(item) : itemPosition(&rng, near: item)
                change = .itemMove(id: item, list: list, at: at)
            default: change = .itemDelete(id: item)
            }
        }
        return (change.kind, 1, change.payload)
    }
}
