import Testing

@testable import PlaitCore

/// Incremental replay (in-order batches, late batches with rollback to a checkpoint or to the fallback) must
/// always equal a replay from scratch.
@Suite("Incremental replay")
struct ReplayTests {
    /// Delivers `history` in random batches: each continues, for a random subset of timelines, a random prefix
    /// (so some timelines lag and their changes arrive late).
    static func randomBatches(_ history: [Change], using rng: inout SplitMix64) -> [[Change]] {
        var byTimeline: [TimelineID: [Change]] = [:]
        for change in history { byTimeline[change.timeline, default: []].append(change) }
        var delivered: [TimelineID: Int] = [:]
        var batches: [[Change]] = []
        while delivered.values.reduce(0, +) < history.count {
            var batch: [Change] = []
            for timeline in byTimeline.keys.sorted() where rng.chance(40) {
                let done = delivered[timeline] ?? 0
                let total = byTimeline[timeline]!.count
                guard done < total else { continue }
                let length = rng.int(1...min(total - done, 12))
                batch += byTimeline[timeline]![done..<(done + length)]
                delivered[timeline] = done + length
            }
            if !batch.isEmpty { batches.append(batch.shuffled(using: &rng)) }
        }
        return batches
    }

    enum Restart: CaseIterable {
        /// Periodic in-memory checkpoints.
        case checkpoints
        /// No in-memory checkpoint: every late change goes through the fallback (empty state).
        case fallbackOnly
        /// No in-memory checkpoint; the fallback restarts from a stored state somewhere before the late change.
        case storedCheckpoint
    }

    @Test("late batches integrate to the same state as a replay from scratch", arguments: Restart.allCases)
    func lateBatchesEqualFullReplay(restart: Restart) throws {
        var rollbacks = 0
        var fallbacks = 0
        for seed in UInt64(0)..<40 {
            let history = Histories.history(seed: seed)
            var rng = SplitMix64(seed: seed ^ 0xBA7C4)
            let interval = restart == .checkpoints ? rng.int(2...12) : Int.max
            var engine = ReplayEngine(
                domain: ListsDomain(), state: ListsState(), position: .zero, checkpointInterval: interval,
                checkpointLimit: rng.int(1...6))
            var held: [Change] = []
            for batch in Self.randomBatches(history, using: &rng) {
                held += batch
                let source = ChangeArraySource(held)
                let stats = try engine.integrate(batch, source: source) { before in
                    fallbacks += 1
                    guard restart == .storedCheckpoint else { return emptyFallback(before) }
                    // A stored state at a random held change before the late one (or the very start).
                    let earlier = source.changes.filter { $0.orderKey < before }
                    guard let stop = rng.pick(earlier + [nil]) ?? nil else { return emptyFallback(before) }
                    let prefix = earlier.filter { $0.orderKey <= stop.orderKey }
                    return (stop.orderKey, replayFromScratch(prefix).state)
                }
                if stats.rolledBack { rollbacks += 1 }
                #expect(stats.applied + stats.noops + stats.skipped == batch.count, "seed \(seed)")
                #expect(engine.position == source.changes.last!.orderKey, "seed \(seed)")
                #expect(engine.digest == digestOfReplay(held), "seed \(seed): after \(held.count) changes")
                #expect(
                    zip(engine.checkpoints, engine.checkpoints.dropFirst()).allSatisfy { $0.key < $1.key },
                    "seed \(seed): checkpoints out of order")
            }
            #expect(engine.digest == digestOfReplay(history), "seed \(seed)")
        }
        #expect(rollbacks > 0)
        if restart == .checkpoints {
            #expect(rollbacks > fallbacks, "checkpoints should usually spare the fallback")
        } else {
            #expect(fallbacks == rollbacks)
        }
    }

    /// Timeline 1 creating one list at Lamport 1, then an item at each Lamport time 2…`last` (item `100 + t`), all
    /// integrated into an engine with a checkpoint every 5 changes (the fixed interval only: spacing by size has
    /// its own test). Returns the engine and the changes it holds.
    static func oneListHistory(through last: UInt64) throws -> (engine: ReplayEngine<ListsDomain>, held: [Change]) {
        var a = TimelineAuthor(1)
        let list = objectID(1)
        a.append(.listCreate(id: list, title: "l", color: nil, at: .top), lamport: 1)
        for i in 2...last {
            a.append(.itemCreate(id: objectID(100 + i), list: list, text: "\(i)", at: .top), lamport: i)
        }
        var engine = ReplayEngine(
            domain: ListsDomain(), state: ListsState(), position: .zero, checkpointInterval: 5, checkpointLimit: 100)
        engine.checkpointBytesPerChange = 0
        _ = try engine.integrate(a.changes, source: ChangeArraySource(a.changes), fallback: emptyFallback)
        return (engine, a.changes)
    }

    @Test("a late change rolls back to the nearest checkpoint, not to the start")
    func lateChangeUsesNearestCheckpoint() throws {
        var (engine, held) = try Self.oneListHistory(through: 30)
        var b = TimelineAuthor(2)
        #expect(engine.checkpoints.map(\.key.lamport) == [5, 10, 15, 20, 25, 30])

        // B's change at Lamport 22 arrives late: restart at the checkpoint at 20, replay 21…30 again.
        let late = b.append(.itemDelete(id: objectID(110)), lamport: 22)
        held.append(late)
        var fallbackCalls = 0
        let stats = try engine.integrate([late], source: ChangeArraySource(held)) { before in
            fallbackCalls += 1
            return emptyFallback(before)
        }
        #expect(stats.rolledBack)
        #expect(fallbackCalls == 0)
        #expect(stats.applied == 1)
        #expect(stats.replayed == 10)
        #expect(engine.digest == digestOfReplay(held))

        // A change before every checkpoint goes through the fallback.
        let earlier = b.append(.itemEdit(id: objectID(103), text: "x"), lamport: 23)
        _ = earlier
        var c = TimelineAuthor(3)
        let veryLate = c.append(.itemEdit(id: objectID(102), text: "early"), lamport: 3)
        held += [earlier, veryLate]
        let second = try engine.integrate([earlier, veryLate], source: ChangeArraySource(held)) { before in
            fallbackCalls += 1
            #expect(before == veryLate.orderKey)
            return emptyFallback(before)
        }
        #expect(fallbackCalls == 1)
        #expect(second.applied + second.noops == 2)
        #expect(engine.digest == digestOfReplay(held))
    }

    /// A new device's `timeline.begin` sorts before nearly all of an old device's history. It and changes this
    /// build cannot interpret leave every state as it was, so integrating them late must not replay the history
    /// (before, each new device made every peer replay everything it held); any other late change still does.
    @Test("late inert changes are skipped where they stand; a late edit still rolls back")
    func lateInertChangesDoNotRollBack() throws {
        var (engine, held) = try Self.oneListHistory(through: 40)
        let checkpointsBefore = engine.checkpoints.map(\.key)
        let position = engine.position

        var b = TimelineAuthor(2)
        let begin = b.append(kind: TimelineBegin.kind, version: 1, payload: [], lamport: 1)
        let unknown = b.append(kind: "item.pin", version: 1, payload: [0x0A, 0x01, 0x41], lamport: 2)
        let newerVersion = b.append(kind: "item.edit", version: 99, payload: [], lamport: 3)
        // In the same batch, one change in replay order after the head: applied as usual.
        let after = b.append(.itemEdit(id: objectID(105), text: "after"), lamport: 41)
        held += [begin, unknown, newerVersion, after]
        let inert = [begin, unknown, newerVersion]
        #expect(inert.allSatisfy { ListsDomain().isInert($0) })
        #expect(!ListsDomain().isInert(after))
        #expect(engine.rollbackPoint(of: inert) == nil)
        var fallbacks = 0
        let stats = try engine.integrate([after, newerVersion, begin, unknown], source: ChangeArraySource(held)) {
            fallbacks += 1
            return emptyFallback($0)
        }
        #expect(!stats.rolledBack)
        #expect(fallbacks == 0)
        #expect(stats.replayed == 0)
        #expect(stats.applied == 1 && stats.noops == 1 && stats.skipped == 2)
        #expect(engine.position == after.orderKey && engine.position > position)
        #expect(engine.digest == digestOfReplay(held))
        // The checkpoints before the head are still valid, and kept.
        #expect(Array(engine.checkpoints.map(\.key).prefix(checkpointsBefore.count)) == checkpointsBefore)

        // A late change that does touch the state still rolls back (to the checkpoint before it).
        var c = TimelineAuthor(3)
        let lateEdit = c.append(.itemEdit(id: objectID(103), text: "late"), lamport: 12)
        held.append(lateEdit)
        #expect(engine.rollbackPoint(of: [begin, lateEdit]) == lateEdit.orderKey)
        let second = try engine.integrate([lateEdit], source: ChangeArraySource(held), fallback: emptyFallback)
        #expect(second.rolledBack)
        #expect(second.applied == 1)
        #expect(engine.digest == digestOfReplay(held))
    }

    /// The kept digest follows the state: kept across inert changes, dropped by any change, equal to a fresh
    /// computation every time (debug builds also check each use of it against one).
    @Test("the digest is computed once per state and follows every change")
    func digestIsKeptUntilTheStateChanges() throws {
        var a = TimelineAuthor(1)
        let list = objectID(1)
        a.append(.listCreate(id: list, title: "l", color: nil, at: .top), lamport: 2)
        a.append(.itemCreate(id: objectID(2), list: list, text: "x", at: .top), lamport: 3)
        var engine = ReplayEngine(domain: ListsDomain(), state: ListsState(), position: .zero)
        var held = a.changes
        _ = try engine.integrate(a.changes, source: ChangeArraySource(held), fallback: emptyFallback)
        let first = engine.currentDigest()
        #expect(first == digestOfReplay(held))
        #expect(engine.digest == first)

        var b = TimelineAuthor(2)
        let begin = b.append(kind: TimelineBegin.kind, version: 1, payload: [], lamport: 1)
        held.append(begin)
        _ = try engine.integrate([begin], source: ChangeArraySource(held), fallback: emptyFallback)
        #expect(engine.currentDigest() == first)

        let edit = b.append(.itemEdit(id: objectID(2), text: "y"), lamport: 4)
        held.append(edit)
        _ = try engine.integrate([edit], source: ChangeArraySource(held), fallback: emptyFallback)
        #expect(engine.currentDigest() != first)
        #expect(engine.currentDigest() == digestOfReplay(held))

        let late = b.append(.itemComplete(id: objectID(2)), lamport: 5)
        var c = TimelineAuthor(3)
        let earlier = c.append(.itemEdit(id: objectID(2), text: "z"), lamport: 3)
        held += [late, earlier]
        let before = engine.currentDigest()
        _ = try engine.integrate([late, earlier], source: ChangeArraySource(held), fallback: emptyFallback)
        #expect(engine.currentDigest() != before)
        #expect(engine.currentDigest() == digestOfReplay(held))
        engine.modifyState { _ = $0.takeChanges() }
        #expect(engine.currentDigest() == digestOfReplay(held))
    }

    @Test("a late batch leaves one checkpoint where it ends, none in between")
    func lateBatchCheckpointsWhereItEnds() throws {
        var (engine, held) = try Self.oneListHistory(through: 40)
        let ofA = held
        var b = TimelineAuthor(2)
        // A stream from B in replay order, in two batches, both behind A's head.
        let first = (12...17).map { b.append(.itemEdit(id: objectID(110), text: "b\($0)"), lamport: UInt64($0)) }
        let second = (18...24).map { b.append(.itemEdit(id: objectID(111), text: "b\($0)"), lamport: UInt64($0)) }
        held += first
        _ = try engine.integrate(first, source: ChangeArraySource(held), fallback: emptyFallback)
        #expect(engine.checkpoints.map(\.key) == [5, 10].map { ofA[$0 - 1].orderKey } + [first.last!.orderKey])
        held += second
        let stats = try engine.integrate(second, source: ChangeArraySource(held), fallback: emptyFallback)
        // Rolled back exactly to the end of the first batch: replays A's changes from Lamport 18 on only.
        #expect(stats.replayed == 40 - 17)
        #expect(engine.checkpoints.last?.key == second.last!.orderKey)
        #expect(engine.digest == digestOfReplay(held))
    }

    @Test("state(through:) equals the replay of the changes up to the limit")
    func stateThroughLimit() throws {
        for seed in UInt64(40)..<70 {
            let history = Histories.history(seed: seed)
            var rng = SplitMix64(seed: seed)
            for interval in [3, Int.max] {
                var engine = ReplayEngine(
                    domain: ListsDomain(), state: ListsState(), position: .zero, checkpointInterval: interval,
                    checkpointLimit: 4)
                let source = ChangeArraySource(history)
                _ = try engine.integrate(history, source: source, fallback: emptyFallback)
                let ordered = source.changes
                for _ in 0..<8 {
                    // A change's own key, or a key between changes.
                    let pivot = rng.pick(ordered)!.orderKey
                    let between = OrderKey(lamport: pivot.lamport, timeline: pivot.timeline, seq: pivot.seq + 1)
                    let limit = rng.chance(50) ? pivot : between
                    let state = try engine.state(through: limit, source: source, fallback: emptyFallback)
                    let expected = digestOfReplay(ordered.filter { $0.orderKey <= limit })
                    #expect(
                        ListsDomain().digest(of: state) == expected,
                        "seed \(seed), interval \(interval), limit \(limit)")
                }
                let before = try engine.state(through: .zero, source: source, fallback: emptyFallback)
                #expect(ListsDomain().digest(of: before) == ListsDomain().digest(of: ListsState()), "seed \(seed)")
                let after = try engine.state(through: ordered.last!.orderKey, source: source, fallback: emptyFallback)
                #expect(ListsDomain().digest(of: after) == engine.digest, "seed \(seed)")
                // Asking does not move the engine.
                #expect(engine.digest == digestOfReplay(history), "seed \(seed)")
            }
        }
    }

    /// `checkpointLimit`: "In-memory checkpoints kept".
    @Test("the number of in-memory checkpoints never exceeds checkpointLimit", arguments: 1...8)
    func checkpointLimitIsHonoured(limit: Int) {
        var author = TimelineAuthor(9)
        author.append(.listCreate(id: objectID(1), title: "l", color: nil, at: .top), lamport: 1)
        for i in 2...100 { author.append(.listRename(id: objectID(1), title: "\(i)"), lamport: UInt64(i)) }
        var engine = ReplayEngine(
            domain: ListsDomain(), state: ListsState(), position: .zero, checkpointInterval: 3, checkpointLimit: limit)
        var most = 0
        for change in author.changes {
            engine.applyNext(change)
            most = max(most, engine.checkpoints.count)
        }
        #expect(most <= limit, "kept \(most) checkpoints with checkpointLimit \(limit)")
        #expect(engine.checkpoints.last?.key.lamport == 99)
    }

    /// A checkpoint costs a copy of the whole state at the next change, so a large state takes them further apart
    /// than `checkpointInterval`: the gap before each is at least the state's approximate size over
    /// `checkpointBytesPerChange` (a growing catch-up copied its 100,000-item state once per 5,000 changes).
    /// Replay stays exact: a late change rolls back to the nearest checkpoint and ends in the same state.
    @Test(arguments: [0xC4EC_0001 as UInt64])
    func checkpointsAreSpacedByTheStateSize(seed: UInt64) throws {
        var rng = SplitMix64(seed: seed)
        var author = TimelineAuthor(9)
        let list = objectID(1)
        author.append(.listCreate(id: list, title: "l", color: nil, at: .top), lamport: 1)
        for i in 2...3_000 {
            author.append(
                .itemCreate(id: objectID(UInt64(i)), list: list, text: "\(rng.next() % 1000)", at: .bottom),
                lamport: UInt64(2 * i))
        }
        var engine = ReplayEngine(
            domain: ListsDomain(), state: ListsState(), position: .zero, checkpointInterval: 10, checkpointLimit: 1_000)
        engine.checkpointMemoryLimit = .max
        engine.checkpointBytesPerChange = 2_000
        var sizes: [OrderKey: Int] = [:]
        for change in author.changes {
            engine.applyNext(change)
            sizes[change.orderKey] = ListsDomain().approximateSize(of: engine.state)
        }
        let keys = engine.checkpoints.map(\.key)
        #expect(keys.count > 5, "seed \(seed): \(keys.count) checkpoints")
        // Each checkpoint (its key's Lamport is twice its ordinal here) follows the one before by at least the
        // interval and by at least the size-asked gap of the state it holds.
        var previous: UInt64 = 0
        for key in keys {
            let gap = Int(key.lamport - previous) / 2
            #expect(gap >= 10 && gap >= sizes[key]! / 2_000, "seed \(seed): a gap of \(gap) before \(key)")
            previous = key.lamport
        }
        #expect(Int(keys.last!.lamport - keys[keys.count - 2].lamport) / 2 > 10, "the gaps grew with the state")
        // A change from another device arrives late, before the newest checkpoints: the result is the full replay's.
        var other = TimelineAuthor(3)
        let late = other.append(.itemDelete(id: objectID(1_500)), lamport: 2 * 2_900 + 1)
        let held = (author.changes + [late]).sorted { $0.orderKey < $1.orderKey }
        _ = try engine.integrate([late], source: ChangeArraySource(held), fallback: emptyFallback)
        #expect(engine.digest == digestOfReplay(held), "seed \(seed)")
    }

    /// `checkpointLimit`'s contract: "older ones are thinned so they stay spread over the history". A late
    /// change rolls back to the nearest checkpoint before it, so a hole in the middle of the history makes a
    /// moderately late change replay almost everything.
    @Test func checkpointsStayBoundedAndSpreadOverTheHistory() throws {
        var author = TimelineAuthor(9)
        let list = objectID(1)
        author.append(.listCreate(id: list, title: "l", color: nil, at: .top), lamport: 1)
        for i in 2...1_000 {
            author.append(.itemCreate(id: objectID(UInt64(i)), list: list, text: "", at: .bottom), lamport: UInt64(i))
        }
        var engine = ReplayEngine(
            domain: ListsDomain(), state: ListsState(), position: .zero, checkpointInterval: 10, checkpointLimit: 8)
        engine.checkpointBytesPerChange = 0  // the fixed interval only (spacing by size: its own test)
        for change in author.changes { engine.applyNext(change) }
        let lamports = engine.checkpoints.map(\.key.lamport)
        #expect(lamports.count <= 8)
        #expect(lamports.last == 1_000)
        #expect(lamports == lamports.sorted())
        // Spread: no stretch of the history (from the start, or between two checkpoints) longer than 3/4 of it.
        let gaps = zip([0] + lamports, lamports).map { $1 - $0 }
        #expect(gaps.max()! <= 750, "checkpoints at Lamport \(lamports)")
        // What that costs: a change from another device at Lamport 500 arrives late.
        var held = author.changes
        var other = TimelineAuthor(10)
        let late = other.append(.itemEdit(id: objectID(2), text: "late"), lamport: 500)
        held.append(late)
        var probe = engine
        let stats = try probe.integrate([late], source: ChangeArraySource(held), fallback: emptyFallback)
        #expect(stats.replayed <= 750, "a change late by 500 replayed \(stats.replayed) of 1000 (\(lamports))")
        #expect(probe.digest == digestOfReplay(held))

        engine.dropCheckpoints(through: OrderKey(lamport: 995, timeline: TimelineID(9), seq: 995))
        #expect(engine.checkpoints.allSatisfy { $0.key.lamport > 995 })
    }
}
