import Foundation
import Testing

@testable import PlaitCore

/// The `fork_naming` conformance vectors (PROTOCOL.md §19, §22): branch names (`ForkBranch.id`) and the names every
/// change of a forked signed timeline gets — a three-way fork and a fork nested in a losing branch — whatever the
/// order the changes are held in, and with the first changes folded into a baseline.
///
/// The group is generated here (`PLAIT_WRITE_FORK_VECTORS=path` writes it to `path` as JSON, to be put into
/// Tests/Vectors/conformance.json); the tests check the stored group against `ForkBranch` and against what the
/// generator makes now. scripts/check-vectors.py checks it from PROTOCOL.md alone.
@Suite("Conformance vectors: fork naming")
struct ForkNamingConformanceTests {
    static func stored() throws -> [String: Any] {
        try #require(try ConformanceTests.vectors()["fork_naming"] as? [String: Any])
    }

    /// The signed timeline's changes S1…S5 (`signed_timeline`), and the branch changes of the stored group.
    static func changes(_ group: [String: Any]) throws -> [String: Change] {
        let signed = try #require(try ConformanceTests.vectors()["signed_timeline"] as? [String: Any])
        var out: [String: Change] = [:]
        for entry in (signed["changes"] as? [[String: Any]] ?? []) + (group["changes"] as? [[String: Any]] ?? []) {
            out[try #require(entry["name"] as? String)] = try ConformanceTests.change(entry)
        }
        return out
    }

    @Test func branchIDsAreTheFirstEightBytesOfTheirHash() throws {
        let entries = try #require(try Self.stored()["branch_ids"] as? [[String: Any]])
        #expect(entries.count >= 2)
        for entry in entries {
            let parent = TimelineID(try #require(UInt64(entry["parent"] as? String ?? "", radix: 16)))
            let first = try #require([UInt8](hexString: entry["first_hash"] as? String ?? ""))
            let id = ForkBranch.id(parent: parent, firstHash: first)
            #expect(String(id.rawValue, radix: 16).leftPadded(16) == entry["id"] as? String)
            #expect(id.description == entry["text"] as? String)
        }
    }

    @Test func everyChangeGetsItsNameWhateverTheOrderHeld() throws {
        let group = try Self.stored()
        let changes = try Self.changes(group)
        let timeline = TimelineID(try #require(UInt64(group["timeline"] as? String ?? "", radix: 16)))
        let scenarios = try #require(group["scenarios"] as? [[String: Any]])
        #expect(scenarios.count >= 2)
        for scenario in scenarios {
            let label = scenario["name"] as? String ?? "?"
            let heldNames = scenario["held"] as? [String] ?? []
            let held = try heldNames.map { try #require(changes[$0], "\($0)") }
            let byName = changes.filter { heldNames.contains($0.key) }
            for change in held { #expect(change.timeline == timeline, "\(label)") }
            var generator = SplitMix64(seed: 10)
            for order in [held, held.reversed(), held.shuffled(using: &generator)] {
                let nodes = order.map { ForkBranch.Node(seq: $0.seq, hash: $0.hash, previousHash: $0.previousHash) }
                let (names, branches) = ForkBranch.assign(root: timeline, nodes)
                #expect(Self.same(Self.describe(names: names, of: changes), scenario["names"]), "\(label)")
                #expect(Self.same(Self.describe(branches: branches, of: byName), scenario["branches"]), "\(label)")
            }
        }
    }

    @Test func theStoredGroupIsWhatTheGeneratorMakes() throws {
        let generated = try Self.generate()
        if let path = ProcessInfo.processInfo.environment["PLAIT_WRITE_FORK_VECTORS"] {
            try JSONSerialization.data(withJSONObject: generated, options: [.prettyPrinted, .sortedKeys])
                .write(to: URL(fileURLWithPath: path))
        }
        #expect(NSDictionary(dictionary: generated).isEqual(to: try Self.stored()))
    }

    // MARK: - Describing names as the vectors do

    static func hex(_ timeline: TimelineID) -> String { String(timeline.rawValue, radix: 16).leftPadded(16) }

    /// Names in the vectors' form, one per change, sorted by change name.
    static func describe(names: [[UInt8]: ForkBranch.Name], of changes: [String: Change]) -> [[String: Any]] {
        changes.filter { names[$0.value.hash] != nil }.sorted { $0.key < $1.key }.map { name, change in
            let named = names[change.hash]!
            return ["change": name, "timeline": hex(named.timeline), "seq": named.seq]
        }
    }

    static func same(_ a: [[String: Any]], _ b: Any?) -> Bool {
        guard let b = b as? [[String: Any]], a.count == b.count else { return false }
        return zip(a, b).allSatisfy { NSDictionary(dictionary: $0).isEqual(to: $1) }
    }

    /// Branches in the vectors' form: name, parent, and the change the branch begins with (`first`, by name) with
    /// its author's number f, sorted by name.
    static func describe(branches: [ForkBranch.Branch], of held: [String: Change]) -> [[String: Any]] {
        branches.sorted { $0.id < $1.id }.map { branch in
            let first = held.first { _, change in
                change.seq == branch.base + 1
                    && ForkBranch.id(parent: branch.parent, firstHash: change.hash) == branch.id
            }
            return [
                "id": hex(branch.id), "text": branch.id.description, "parent": hex(branch.parent),
                "first": first?.key ?? "?", "f": branch.base + 1,
            ]
        }
    }

    // MARK: - The generator

    /// The branch changes, by name (made once: deterministic).
    static let generatedNames: [String: Change] = (try? makeBranchChanges()) ?? [:]

    /// Branch changes of the signed timeline: P4, Q4 continue S3 (with S4: a three-way fork at 4), P5, P6 and Q5
    /// continue them, and R5 continues P4 beside P5 (a fork nested in P's branch). Their texts carry a number
    /// chosen so that Q4 has the smallest hash at 4 (the signed timeline's own S4 and P4 lose, and R5/P5 fork a
    /// branch that is not T itself).
    static func makeBranchChanges() throws -> [String: Change] {
        let signed = try #require(try ConformanceTests.vectors()["signed_timeline"] as? [String: Any])
        let trunk = try (signed["changes"] as? [[String: Any]] ?? []).map(ConformanceTests.change)
        let s3 = trunk[2]
        let s4 = trunk[3]
        let item = try ObjectID(parsing: "44444444444444448444444444444444")
        func edit(_ label: String, after previous: Change, _ nonce: Int) -> Change {
            let payload = ListsChange.itemEdit(id: item, text: "\(label) #\(nonce)").payload
            return Change(
                timeline: previous.timeline, seq: previous.seq + 1, lamport: previous.seq + 1,
                previousHash: previous.hash, kind: "item.edit", version: 1,
                wallTime: 1_763_884_900_000 + Int64(previous.seq + 1) * 1_000, payload: payload)
        }
        var nonce = 0
        while true {
            let p4 = edit("P4", after: s3, nonce)
            let q4 = edit("Q4", after: s3, nonce)
            if q4.hash.lexicographicallyPrecedes(s4.hash) && q4.hash.lexicographicallyPrecedes(p4.hash) {
                let p5 = edit("P5", after: p4, nonce)
                let r5 = edit("R5", after: p4, nonce)
                return [
                    "P4": p4, "P5": p5, "P6": edit("P6", after: p5, nonce), "Q4": q4,
                    "Q5": edit("Q5", after: q4, nonce),
                    "R5": r5, "R6": edit("R6", after: r5, nonce),
                ]
            }
            nonce += 1
        }
    }

    static func entry(_ name: String, _ change: Change) throws -> [String: Any] {
        guard case .itemEdit(let id, let text) = try ListsChange(kind: change.kind, payload: change.payload) else {
            throw CoreError.malformedObjectID(name)
        }
        return [
            "name": name, "timeline": hex(change.timeline), "seq": change.seq, "lamport": change.lamport,
            "previous_hash": change.previousHash.hexString, "kind": change.kind, "version": change.version,
            "wall_time": change.wallTime, "payload_fields": ["id": id.description, "text": text],
            "payload": change.payload.hexString, "canonical": change.canonicalBytes.hexString,
            "sha256": change.hash.hexString,
        ]
    }

    static func generate() throws -> [String: Any] {
        let signed = try #require(try ConformanceTests.vectors()["signed_timeline"] as? [String: Any])
        let trunkEntries = signed["changes"] as? [[String: Any]] ?? []
        let trunk = Dictionary(uniqueKeysWithValues: try trunkEntries.map {
            ($0["name"] as! String, try ConformanceTests.change($0))
        })
        let branchChanges = generatedNames
        let all = trunk.merging(branchChanges) { a, _ in a }
        let timeline = trunk["S1"]!.timeline
        // Held in an order no rule could lean on: neither by number nor by name.
        let everything = ["R6", "S5", "Q4", "P5", "S1", "R5", "S3", "P6", "S4", "Q5", "S2", "P4"]
        let fromBaseline = everything.filter { !["S1", "S2", "S3"].contains($0) }
        var scenarios: [[String: Any]] = []
        for (label, held) in [
            ("every change held: a three-way fork at 4, and a fork at 5 of the branch P4 starts", everything),
            ("the same with S1-S3 folded into a baseline: the changes at 4 start the walk", fromBaseline),
        ] {
            let changes = held.map { all[$0]! }
            let nodes = changes.map { ForkBranch.Node(seq: $0.seq, hash: $0.hash, previousHash: $0.previousHash) }
            let (names, branches) = ForkBranch.assign(root: timeline, nodes)
            scenarios.append([
                "name": label, "held": held, "names": describe(names: names, of: all),
                "branches": describe(branches: branches, of: all.filter { held.contains($0.key) }),
            ])
        }
        let q4 = branchChanges["Q4"]!
        let s4 = trunk["S4"]!
        let nestedParent = ForkBranch.id(parent: timeline, firstHash: branchChanges["P4"]!.hash)
        let examples: [(TimelineID, [UInt8])] = [
            (TimelineID(0x0123_4567_89ab_cdef), [UInt8](repeating: 0, count: 32)),
            (timeline, s4.hash), (timeline, q4.hash),
            (nestedParent, branchChanges["P5"]!.hash), (nestedParent, branchChanges["R5"]!.hash),
        ]
        return [
            "about": "PROTOCOL.md §22: branch names T′ = first 8 bytes of SHA-256(\"plait-fork\" ‖ parent (8 "
                + "bytes big-endian) ‖ hash of the branch's first change), and the name (timeline, seq) of every held "
                + "change of the signed timeline S1-S5 of `signed_timeline` with branch changes P4-P6, Q4-Q5, R5-R6 "
                + "(item.edit, unsigned here: naming reads no signature). Branches list their first change and f, "
                + "its author's number.",
            "timeline": hex(timeline),
            "branch_ids": examples.map { parent, first in
                let id = ForkBranch.id(parent: parent, firstHash: first)
                return ["parent": hex(parent), "first_hash": first.hexString, "id": hex(id), "text": id.description]
            },
            "changes": try ["P4", "P5", "P6", "Q4", "Q5", "R5", "R6"].map { try entry($0, branchChanges[$0]!) },
            "scenarios": scenarios,
        ]
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String {
        String(repeating: "0", count: max(0, width - count)) + self
    }
}
