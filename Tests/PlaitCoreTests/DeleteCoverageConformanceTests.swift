import Foundation
import Testing

@testable import PlaitCore

/// The `delete_coverage` conformance vectors (PROTOCOL.md §9, §22.6): how `list.delete` version 2 is written (each
/// observed entry with the hash of its head), which payloads of version 2 do not decode, and what a delete of either
/// version covers when the changes of `fork_naming`'s first scenario are held (a three-way fork of T at 4 and a fork
/// at 5 of the branch P4 starts).
///
/// The group is generated here (`PLAIT_WRITE_COVERAGE_VECTORS=path` writes it to `path` as JSON, to be put into
/// Tests/Vectors/conformance.json); the tests check the stored group against `ChainLookup` and the payload codec, and
/// against what the generator makes now. scripts/check-vectors.py checks it from PROTOCOL.md alone.
@Suite("Conformance vectors: list.delete coverage")
struct DeleteCoverageConformanceTests {
    static func stored() throws -> [String: Any] {
        try #require(try ConformanceTests.vectors()["delete_coverage"] as? [String: Any])
    }

    static let list = "22222222222242228222222222222222"
    /// A timeline nobody forked (and none of whose changes is held here).
    static let plain = TimelineID(0x0123_4567_89ab_cdef)
    static let notHeld = [UInt8](repeating: 0xEE, count: 32)

    /// A locator over values: the names and branches `ForkBranch.assign` gives the held changes.
    struct Locator: ChainLocator {
        var names: [[UInt8]: ForkBranch.Name]
        var branches: [TimelineID: ForkBranch.Branch]

        func locate(hash: [UInt8], claimed: ChangeRef) -> ChangeRef? {
            names[hash].map { ChangeRef(timeline: $0.timeline, seq: $0.seq) }
        }
        func branch(_ timeline: TimelineID) -> ForkBranch.Branch? { branches[timeline] }
        func forkPoint(of timeline: TimelineID) -> UInt64? {
            let base = branches[timeline]?.base ?? 0
            return branches.values.filter { $0.parent == timeline }.map { $0.base - base + 1 }.min()
        }
    }

    /// The held changes by name (S1…S5 and the branch changes of `fork_naming`) and the locator they make.
    static func held() throws -> (changes: [String: Change], locator: Locator, timeline: TimelineID) {
        let group = try ForkNamingConformanceTests.stored()
        let changes = try ForkNamingConformanceTests.changes(group)
        let timeline = TimelineID(try #require(UInt64(group["timeline"] as? String ?? "", radix: 16)))
        let scenario = try #require((group["scenarios"] as? [[String: Any]])?.first)
        let names = try #require(scenario["held"] as? [String])
        let nodes = try names.map { name in
            let change = try #require(changes[name])
            return ForkBranch.Node(seq: change.seq, hash: change.hash, previousHash: change.previousHash)
        }
        let (assigned, branches) = ForkBranch.assign(root: timeline, nodes)
        let locator = Locator(names: assigned, branches: Dictionary(uniqueKeysWithValues: branches.map { ($0.id, $0) }))
        return (changes.filter { names.contains($0.key) }, locator, timeline)
    }

    static func hex(_ timeline: TimelineID) -> String { ForkNamingConformanceTests.hex(timeline) }

    /// One case: a delete's observed entries (`head` names a held change, or is a hash held nowhere).
    struct Case {
        var name: String
        var version: UInt32
        var observed: [(TimelineID, UInt64, String?)]
    }

    static func cases(_ t: TimelineID) -> [Case] {
        [
            Case(name: "v2, its author held S5: the branch S4 starts, and T up to where it left", version: 2,
                 observed: [(t, 5, "S5")]),
            Case(name: "v2, its author held Q5: the winner keeps T, so T up to 5 and no branch", version: 2,
                 observed: [(t, 5, "Q5")]),
            Case(name: "v2, its author held R6: the branch P4 starts (R5 kept its name at 5), and T up to 3",
                 version: 2, observed: [(t, 6, "R6")]),
            Case(name: "v2, its author held P6: the branch P5 starts (nested), P4's branch up to 1, and T up to 3",
                 version: 2, observed: [(t, 6, "P6")]),
            Case(name: "v2, its author held S2: below the fork, T up to 2", version: 2, observed: [(t, 2, "S2")]),
            Case(name: "v2, a head held nowhere covers nothing of its timeline (not held yet); the other entry counts",
                 version: 2, observed: [(t, 5, "Q5"), (plain, 3, nil)]),
            Case(name: "v1, T up to 5: only below the fork point 4", version: 1, observed: [(t, 5, nil)]),
            Case(name: "v1, T up to 3 and an unforked timeline: exactly what it observed", version: 1,
                 observed: [(t, 3, nil), (plain, 3, nil)]),
        ]
    }

    static func delete(_ c: Case, _ changes: [String: Change]) throws -> ListsChange {
        let id = try ObjectID(parsing: list)
        var summary = Summary()
        var heads: [TimelineID: [UInt8]] = [:]
        for (timeline, seq, head) in c.observed {
            summary[timeline] = seq
            if c.version == 2 { heads[timeline] = try head.map { try #require(changes[$0]).hash } ?? notHeld }
        }
        return .listDelete(id: id, observed: summary, heads: c.version == 2 ? heads : nil)
    }

    static func describe(_ summary: Summary) -> [[String: Any]] {
        summary.timelines.sorted { $0.rawValue < $1.rawValue }.map { ["timeline": hex($0), "seq": summary[$0]] }
    }

    static func generate() throws -> [String: Any] {
        let (changes, locator, timeline) = try held()
        let lookup = ChainLookup(locator: locator)
        var out: [[String: Any]] = []
        for c in cases(timeline) {
            let change = try delete(c, changes)
            guard case .listDelete(_, let observed, let heads) = change else { continue }
            out.append([
                "name": c.name, "version": c.version,
                "observed": c.observed.map { timeline, seq, head -> [String: Any] in
                    var entry: [String: Any] = ["timeline": hex(timeline), "seq": seq]
                    if c.version == 2 {
                        entry["head_hash"] = (heads?[timeline] ?? []).hexString
                        entry["head"] = head ?? "(held nowhere)"
                    }
                    return entry
                },
                "payload": change.payload.hexString,
                "covers": describe(lookup.coverage(observed: observed, heads: heads)),
            ])
        }
        let id = try ObjectID(parsing: list)
        let good = ListsChange.listDelete(
            id: id, observed: Summary([timeline: 5]), heads: [timeline: try #require(changes["S5"]).hash]).payload
        // The same entry without its hash, with a hash of 31 bytes, and twice for one timeline.
        let entry = { (hash: [UInt8]?) -> [UInt8] in
            var bytes: [UInt8] = [0x09] + withUnsafeBytes(of: timeline.rawValue.littleEndian, Array.init) + [0x10, 0x05]
            if let hash { bytes += [0x1a, UInt8(hash.count)] + hash }
            return [0x12, UInt8(bytes.count)] + bytes
        }
        let head = ListsChange.listDelete(id: id, observed: Summary()).payload
        let s5 = try #require(changes["S5"]).hash
        let refused: [(String, [UInt8])] = [
            ("an observed entry without head_hash", head + entry(nil)),
            ("a head_hash of 31 bytes", head + entry(Array(s5.prefix(31)))),
            ("two entries for one timeline", head + entry(s5) + entry(s5)),
        ]
        return [
            "about": "PROTOCOL.md §9 and §22.6: list.delete version 2 (each observed entry with head_hash, field 3), "
                + "payloads of version 2 that do not decode, and what a delete of list \(list) covers (as a summary: "
                + "timeline and the number it covers up to) when the changes of fork_naming's first scenario are held. "
                + "head names the held change whose hash the entry carries.",
            "list": list,
            "held": try #require(
                ((try ForkNamingConformanceTests.stored()["scenarios"] as? [[String: Any]])?.first)?["held"]),
            "cases": out,
            "version_2_payload": good.hexString,
            "version_2_refused": refused.map { ["why": $0.0, "hex": $0.1.hexString] },
        ]
    }

    @Test func eachCaseCoversWhatItsVectorSays() throws {
        let (changes, locator, timeline) = try Self.held()
        let lookup = ChainLookup(locator: locator)
        let stored = try #require(try Self.stored()["cases"] as? [[String: Any]])
        let cases = Self.cases(timeline)
        #expect(stored.count == cases.count)
        for (c, entry) in zip(cases, stored) {
            let change = try Self.delete(c, changes)
            #expect(change.payload.hexString == entry["payload"] as? String, "\(c.name)")
            // Decoded from the stored bytes at its version, then resolved against the held chains.
            let text = entry["payload"] as? String ?? ""
            let bytes = try #require([UInt8](hexString: text))
            let decoded = try ListsChange(kind: "list.delete", version: c.version, payload: bytes)
            guard case .listDelete(_, let observed, let heads) = decoded else {
                Issue.record("\(c.name): not a list.delete")
                continue
            }
            let covered = Self.describe(lookup.coverage(observed: observed, heads: heads))
            #expect(ForkNamingConformanceTests.same(covered, entry["covers"]), "\(c.name)")
        }
    }

    @Test func refusedVersion2PayloadsDoNotDecode() throws {
        let group = try Self.stored()
        let text = group["version_2_payload"] as? String ?? ""
        let good = try #require([UInt8](hexString: text))
        #expect(try ListsChange(kind: "list.delete", version: 2, payload: good)?.version == 2)
        let refused = try #require(group["version_2_refused"] as? [[String: Any]])
        #expect(refused.count == 3)
        for entry in refused {
            let text = entry["hex"] as? String ?? ""
            let bytes = try #require([UInt8](hexString: text))
            #expect(throws: CoreError.self, "\(entry["why"] ?? "?")") {
                try ListsChange(kind: "list.delete", version: 2, payload: bytes)
            }
        }
    }

    @Test func theStoredGroupIsWhatTheGeneratorMakes() throws {
        let generated = try Self.generate()
        if let path = ProcessInfo.processInfo.environment["PLAIT_WRITE_COVERAGE_VECTORS"] {
            try JSONSerialization.data(withJSONObject: generated, options: [.prettyPrinted, .sortedKeys])
                .write(to: URL(fileURLWithPath: path))
        }
        #expect(NSDictionary(dictionary: generated).isEqual(to: try Self.stored()))
    }
}
