import PlaitCore
import Testing

/// What a `list.delete` covers given the chains held (PROTOCOL.md §22.6), over values: a locator that knows a
/// root T forked at 5 (branch B from T's change 4) and B forked again at its 3 (branch C from B's change 2).
@Suite("list.delete coverage")
struct DeleteCoverageTests {
    static let root = TimelineID(0x7700)
    static let b = TimelineID(0xB0)
    static let c = TimelineID(0xC0)
    static let other = TimelineID(0x99)

    struct Locator: ChainLocator {
        var names: [[UInt8]: ChangeRef]
        func locate(hash: [UInt8], claimed: ChangeRef) -> ChangeRef? { names[hash] }
        func branch(_ timeline: TimelineID) -> ForkBranch.Branch? {
            switch timeline {
            // B's change k is the author's 4 + k; C's change k is the author's 6 + k (B's 2 is the author's 6).
            case DeleteCoverageTests.b: return ForkBranch.Branch(id: b, parent: root, base: 4)
            case DeleteCoverageTests.c: return ForkBranch.Branch(id: c, parent: b, base: 6)
            default: return nil
            }
        }
        func forkPoint(of timeline: TimelineID) -> UInt64? {
            switch timeline {
            case DeleteCoverageTests.root: return 5
            case DeleteCoverageTests.b: return 3
            default: return nil
            }
        }
    }

    static func hash(_ byte: UInt8) -> [UInt8] { [UInt8](repeating: byte, count: 32) }

    static let lookup = ChainLookup(locator: Locator(names: [
        hash(1): ChangeRef(timeline: c, seq: 2),
        hash(2): ChangeRef(timeline: root, seq: 7),
        hash(3): ChangeRef(timeline: other, seq: 4),
    ]))

    @Test func version1CoversOnlyBelowTheForkPoint() {
        let covered = Self.lookup.coverage(
            observed: Summary([Self.root: 9, Self.b: 2, Self.other: 4, Self.c: 1]), heads: nil)
        #expect(covered == Summary([Self.root: 4, Self.b: 2, Self.other: 4, Self.c: 1]))
        #expect(Self.lookup.coverage(observed: Summary([Self.root: 3]), heads: nil) == Summary([Self.root: 3]))
    }

    @Test func version2CoversTheChainWhereverItsHeadIsNamedNow() {
        // The author saw the chain ending at what is here C:2: C:1…2, B up to 2 (where C left), T up to 4.
        let nested = Self.lookup.coverage(
            observed: Summary([Self.root: 8]), heads: [Self.root: Self.hash(1)])
        #expect(nested == Summary([Self.c: 2, Self.b: 2, Self.root: 4]))
        // A head on the winning chain covers the root up to it, and nothing of the branches.
        let winning = Self.lookup.coverage(observed: Summary([Self.root: 7]), heads: [Self.root: Self.hash(2)])
        #expect(winning == Summary([Self.root: 7]))
        // A head not held here covers nothing of its timeline until it arrives; the others still count.
        let missing = Self.lookup.coverage(
            observed: Summary([Self.root: 7, Self.other: 4]), heads: [Self.root: Self.hash(9), Self.other: Self.hash(3)])
        #expect(missing == Summary([Self.other: 4]))
        // An entry of version 2 without its hash (not canonical: decoding refuses it) covers nothing.
        #expect(Self.lookup.coverage(observed: Summary([Self.other: 4]), heads: [:]) == Summary())
    }

    @Test func unboundEveryEntryIsWhereItsAuthorNamedIt() {
        let observed = Summary([Self.root: 9, Self.other: 2])
        #expect(ChainLookup().coverage(observed: observed, heads: nil) == observed)
        #expect(ChainLookup().coverage(observed: observed, heads: [Self.root: Self.hash(1)]) == observed)
    }

    @Test func aVersion2PayloadWithoutAHashDoesNotDecode() throws {
        let id = ObjectID(high: 1, low: 2)
        let v1 = ListsChange.listDelete(id: id, observed: Summary([Self.root: 3]))
        #expect(v1.version == 1)
        #expect(throws: CoreError.self) { try ListsChange(kind: "list.delete", version: 2, payload: v1.payload) }
        let v2 = ListsChange.listDelete(id: id, observed: Summary([Self.root: 3]), heads: [Self.root: Self.hash(5)])
        #expect(v2.version == 2)
        #expect(try ListsChange(kind: "list.delete", version: 2, payload: v2.payload) == v2)
        // A version-1 reader of the same bytes ignores the hashes (field 3 is unknown to it).
        #expect(try ListsChange(kind: "list.delete", version: 1, payload: v2.payload) == v1)
    }
}
