import Testing

@testable import PlaitCore

/// Kinds and versions this build does not understand: kept, forwarded untouched, skipped by replay, counted,
/// and never compacted past.
@Suite("Unknown kinds and newer versions")
struct UninterpretableTests {
    static let a = TimelineID(0xA)
    static let b = TimelineID(0xB)
    static let list = objectID(1)
    static let item = objectID(0x11)

    /// A:1 creates a list, A:2 an item; B:1 is `kind` version `version` at Lamport 3; A:3 edits the item at 4.
    static func history(kind: String, version: UInt32, payload: [UInt8]) -> (all: [Change], unknown: Change) {
        var a = TimelineAuthor(Self.a)
        var b = TimelineAuthor(Self.b)
        a.append(.listCreate(id: Self.list, title: "l", color: nil, at: .top), lamport: 1)
        a.append(.itemCreate(id: Self.item, list: Self.list, text: "milk", at: .top), lamport: 2)
        let unknown = b.append(kind: kind, version: version, payload: payload, lamport: 3)
        a.append(.itemEdit(id: Self.item, text: "oat milk"), lamport: 4)
        return (a.changes + b.changes, unknown)
    }

    static let cases: [(String, UInt32, [UInt8])] = [
        ("list.archive", 1, [0x0a, 0x10] + objectID(1).bytes),  // a kind from the future
        ("item.delete", 2, ListsChange.itemDelete(id: objectID(0x11)).payload),  // a known kind, newer version
        ("item.complete", 7, []),
        ("item.edit", 0, ListsChange.itemEdit(id: objectID(0x11), text: "zero").payload),  // no version 0
        ("", 1, []),
    ]

    @Test("apply returns .uninterpretable and leaves the state alone", arguments: cases)
    func applyRefuses(kind: String, version: UInt32, payload: [UInt8]) {
        let (all, unknown) = Self.history(kind: kind, version: version, payload: payload)
        #expect(!ListsDomain().canInterpret(kind: kind, version: version))
        #expect(!ListsDomain().understands(unknown))
        var state = replayFromScratch(all.filter { $0.lamport < 3 }).state
        let before = ListsDomain().digest(of: state)
        _ = state.takeChanges()
        #expect(ListsDomain().apply(unknown, to: &state) == .uninterpretable)
        #expect(ListsDomain().digest(of: state) == before)
        #expect(state.takeChanges().items.isEmpty)
    }

    @Test("the engine skips it, counts it, and the digest equals replay without it", arguments: cases)
    func engineSkipsAndCounts(kind: String, version: UInt32, payload: [UInt8]) throws {
        let (all, unknown) = Self.history(kind: kind, version: version, payload: payload)
        let without = digestOfReplay(all.filter { $0 != unknown })

        // In order.
        var engine = ReplayEngine(domain: ListsDomain(), state: ListsState(), position: .zero, checkpointInterval: 2)
        let stats = try engine.integrate(all, source: ChangeArraySource(all), fallback: emptyFallback)
        #expect(stats.skipped == 1)
        #expect(stats.applied == 3)
        #expect(engine.digest == without)

        // Late: everything of A first, then B's unknown change, skipped where it stands: it leaves every state as
        // it was, so nothing is rolled back or replayed again.
        var late = ReplayEngine(domain: ListsDomain(), state: ListsState(), position: .zero, checkpointInterval: 2)
        let ofA = all.filter { $0.timeline == Self.a }
        _ = try late.integrate(ofA, source: ChangeArraySource(ofA), fallback: emptyFallback)
        let lateStats = try late.integrate([unknown], source: ChangeArraySource(all), fallback: emptyFallback)
        #expect(!lateStats.rolledBack)
        #expect(lateStats.replayed == 0)
        #expect(lateStats.skipped == 1)
        #expect(late.digest == without)
    }

    @Test("its bytes round-trip through Change(canonical:) unchanged", arguments: cases)
    func bytesRoundTrip(kind: String, version: UInt32, payload: [UInt8]) throws {
        let (_, unknown) = Self.history(kind: kind, version: version, payload: payload)
        let bytes = unknown.canonicalBytes
        let decoded = try Change(canonical: bytes[...])
        #expect(decoded == unknown)
        #expect(decoded.canonicalBytes == bytes)
        #expect(decoded.hash == unknown.hash)
        #expect(decoded.payload == payload)
    }

    @Test("compaction's cut-off is held below the earliest uninterpretable change")
    func cutOffHeldBelowIt() throws {
        var (all, unknown) = Self.history(kind: "list.archive", version: 1, payload: [0x0a, 0x00])
        var a = TimelineAuthor(continuing: all.filter { $0.timeline == Self.a })
        a.append(.itemComplete(id: Self.item), lamport: 5)
        var b = TimelineAuthor(continuing: all.filter { $0.timeline == Self.b })
        let secondUnknown = b.append(kind: "list.archive", version: 1, payload: [], lamport: 6)
        all = a.changes + b.changes

        let heads = [a.head!, b.head!].map { TimelineHead(timeline: $0.timeline, seq: $0.seq, lamport: $0.lamport) }
        let earliest = all.filter { !ListsDomain().understands($0) }.map(\.lamport).min()!
        #expect(earliest == unknown.lamport)
        let cutOff = try #require(
            Compaction.cutOff(heads: heads, limits: [.uninterpretable(lamport: earliest - 1)]))
        #expect(cutOff == .uninterpretable(lamport: 2))
        let folded = all.filter { $0.lamport <= cutOff.lamport }
        #expect(!folded.contains(unknown) && !folded.contains(secondUnknown))
        let baseline = try fold(folded)
        #expect(baseline.summary == Summary([Self.a: 2]))
        // What stays outside the baseline still replays to the full state.
        #expect(try replay(all.filter { $0.lamport > cutOff.lamport }, onto: baseline).digest == digestOfReplay(all))
    }
}
