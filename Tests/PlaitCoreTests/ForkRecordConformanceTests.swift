import Foundation
import Testing

@testable import PlaitCore

/// The `fork_records` conformance vectors (PROTOCOL.md §22.8): the fork records of the `fork_naming` fork (a
/// three-way fork at 4 and a fork nested in a losing branch) with their `ForkRecord` bytes, records a reader must
/// refuse, and naming with a baseline's anchors and the records, by devices that hold only part of the changes.
///
/// The group is generated here (`PLAIT_WRITE_FORK_RECORD_VECTORS=path` writes it to `path` as JSON, to be put into
/// Tests/Vectors/conformance.json); the tests check the stored group against `ForkBranch` and `Baseline` and against
/// what the generator makes now. scripts/check-vectors.py checks it from PROTOCOL.md alone.
@Suite("Conformance vectors: fork records")
struct ForkRecordConformanceTests {
    static func stored() throws -> [String: Any] {
        try #require(try ConformanceTests.vectors()["fork_records"] as? [String: Any])
    }

    static func hex(_ timeline: TimelineID) -> String {
        let text = String(timeline.rawValue, radix: 16)
        return String(repeating: "0", count: max(0, 16 - text.count)) + text
    }

    static func timeline(_ value: Any?) throws -> TimelineID {
        TimelineID(try #require(UInt64(value as? String ?? "", radix: 16)))
    }

    static func record(_ entry: [String: Any]) throws -> ForkBranch.Record {
        ForkBranch.Record(
            branch: try timeline(entry["branch"]), root: try timeline(entry["root"]),
            parent: try timeline(entry["parent"]), base: UInt64(try #require(entry["base"] as? Int)),
            firstHash: try #require([UInt8](hexString: entry["first_hash"] as? String ?? "")),
            rivalHash: try #require([UInt8](hexString: entry["rival_hash"] as? String ?? "")))
    }

    static func describe(_ record: ForkBranch.Record, first: String?) -> [String: Any] {
        var entry: [String: Any] = [
            "branch": hex(record.branch), "root": hex(record.root), "parent": hex(record.parent), "base": record.base,
            "first_hash": record.firstHash.hexString, "rival_hash": record.rivalHash.hexString,
            "encoded": Baseline.recordBytes(record).hexString,
        ]
        if let first { entry["first"] = first }
        return entry
    }

    @Test func recordsEncodeAsStoredAndAreConsistent() throws {
        let records = try #require(try Self.stored()["records"] as? [[String: Any]])
        #expect(records.count == 3)
        for entry in records {
            let record = try Self.record(entry)
            #expect(record.isConsistent, "\(entry)")
            #expect(Baseline.recordBytes(record).hexString == entry["encoded"] as? String)
        }
    }

    /// Each refused record is inconsistent, and a baseline carrying it does not decode (it is corrupt).
    @Test func refusedRecordsAreInconsistentAndMakeABaselineUnreadable() throws {
        let refused = try #require(try Self.stored()["refused"] as? [[String: Any]])
        #expect(refused.count >= 4)
        let good = try Self.record(try #require((try Self.stored()["records"] as? [[String: Any]])?.first))
        func baseline(_ forks: [ForkBranch.Record]) -> Baseline {
            Baseline(summary: Summary(), maxLamport: 0, heads: [:], headLamports: [:], ended: [], snapshot: [], forks: forks)
        }
        #expect(try Baseline(decoding: baseline([good]).encoded()[...]).forks == [good], "with a good record it reads")
        for entry in refused {
            let record = try Self.record(entry)
            #expect(!record.isConsistent, "\(entry["why"] ?? "?")")
            #expect(Baseline.recordBytes(record).hexString == entry["encoded"] as? String)
            let baseline = baseline([record])
            #expect(throws: (any Error).self, "\(entry["why"] ?? "?")") {
                _ = try Baseline(decoding: baseline.encoded()[...])
            }
        }
    }

    /// Devices holding part of the changes, with a baseline's anchors and the records, name every change they hold
    /// as the device holding every change does (the `fork_naming` group's first scenario); without the records they
    /// would not.
    @Test func partialHoldersNameAsTheFullHolderDoes() throws {
        let group = try Self.stored()
        let changes = try ForkNamingConformanceTests.changes(
            try #require(try ConformanceTests.vectors()["fork_naming"] as? [String: Any]))
        let root = try Self.timeline(group["timeline"])
        let records = try (group["records"] as? [[String: Any]] ?? []).map(Self.record)
        let full = ForkBranch.name(
            root: root, changes.values.map { ForkBranch.Node(seq: $0.seq, hash: $0.hash, previousHash: $0.previousHash) })
        let scenarios = try #require(group["scenarios"] as? [[String: Any]])
        #expect(scenarios.count >= 2)
        for scenario in scenarios {
            let label = scenario["name"] as? String ?? "?"
            let held = try (scenario["held"] as? [String] ?? []).map { try #require(changes[$0], "\($0)") }
            let anchors = try (scenario["baseline"] as? [[String: Any]] ?? []).map { entry in
                let name = try Self.timeline(entry["timeline"])
                let base = records.first { $0.branch == name }?.base ?? 0
                return ForkBranch.Anchor(
                    hash: try #require([UInt8](hexString: entry["head_hash"] as? String ?? "")), timeline: name,
                    authorSeq: base + UInt64(try #require(entry["seq"] as? Int)), base: base)
            }
            let known = records.filter { (scenario["records"] as? [String] ?? []).contains(Self.hex($0.branch)) }
            let nodes = held.map { ForkBranch.Node(seq: $0.seq, hash: $0.hash, previousHash: $0.previousHash) }
            let naming = ForkBranch.name(root: root, nodes, anchors: anchors, known: known)
            let byName = changes.filter { naming.names[$0.value.hash] != nil }
            #expect(ForkNamingConformanceTests.same(
                ForkNamingConformanceTests.describe(names: naming.names, of: byName), scenario["names"]), "\(label)")
            for change in held {
                #expect(naming.names[change.hash] == full.names[change.hash], "\(label): as the full holder names it")
            }
            let bare = ForkBranch.name(root: root, nodes, anchors: anchors)
            #expect(held.contains { bare.names[$0.hash] != full.names[$0.hash] }, "\(label): the records matter")
        }
    }

    @Test func theStoredGroupIsWhatTheGeneratorMakes() throws {
        let generated = try Self.generate()
        if let path = ProcessInfo.processInfo.environment["PLAIT_WRITE_FORK_RECORD_VECTORS"] {
            try JSONSerialization.data(withJSONObject: generated, options: [.prettyPrinted, .sortedKeys])
                .write(to: URL(fileURLWithPath: path))
        }
        #expect(NSDictionary(dictionary: generated).isEqual(to: try Self.stored()))
    }

    // MARK: - The generator

    static func generate() throws -> [String: Any] {
        let vectors = try ConformanceTests.vectors()
        let naming = try #require(vectors["fork_naming"] as? [String: Any])
        let changes = try ForkNamingConformanceTests.changes(naming)
        let root = try Self.timeline(naming["timeline"])
        let nameOf = Dictionary(uniqueKeysWithValues: changes.map { ($0.value.hash, $0.key) })
        let full = ForkBranch.name(
            root: root, changes.values.map { ForkBranch.Node(seq: $0.seq, hash: $0.hash, previousHash: $0.previousHash) })
        let records = full.records
        let q4 = changes["Q4"]!
        let p4 = changes["P4"]!
        let s3 = changes["S3"]!
        let branchOfP4 = ForkBranch.id(parent: root, firstHash: p4.hash)

        // A device that met only the losing copies after folding S1-S3, and one whose baseline folds Q4 on T and
        // P4 on its branch: both named their changes with the records from a baseline.
        typealias Entry = (name: TimelineID, seq: UInt64, hash: [UInt8])
        let cases: [(label: String, held: [String], baseline: [Entry])] = [
            ("only the losing changes held (no Q4, Q5), after a baseline folding S1-S3, with every record",
             ["R6", "S5", "P5", "R5", "P6", "S4", "P4"], [(root, 3, s3.hash)]),
            ("a baseline folding S1-S3 and Q4 on T and P4 on its branch; the rest held, with every record",
             ["R6", "S5", "P5", "R5", "P6", "S4", "Q5"], [(root, 4, q4.hash), (branchOfP4, 1, p4.hash)]),
        ]
        var scenarios: [[String: Any]] = []
        for scenario in cases {
            var anchors: [ForkBranch.Anchor] = []
            var entries: [[String: Any]] = []
            for entry in scenario.baseline {
                let base = records.first { $0.branch == entry.name }?.base ?? 0
                anchors.append(
                    ForkBranch.Anchor(hash: entry.hash, timeline: entry.name, authorSeq: base + entry.seq, base: base))
                entries.append(["timeline": Self.hex(entry.name), "seq": entry.seq, "head_hash": entry.hash.hexString])
            }
            let nodes: [ForkBranch.Node] = scenario.held.map { name in
                let change = changes[name]!
                return ForkBranch.Node(seq: change.seq, hash: change.hash, previousHash: change.previousHash)
            }
            let named = ForkBranch.name(root: root, nodes, anchors: anchors, known: records)
            let heldChanges = changes.filter { scenario.held.contains($0.key) }
            scenarios.append([
                "name": scenario.label, "held": scenario.held, "baseline": entries,
                "records": records.map { Self.hex($0.branch) },
                "names": ForkNamingConformanceTests.describe(names: named.names, of: heldChanges),
            ])
        }

        let sample = records[0]
        var wrongBranch = sample
        wrongBranch.branch = TimelineID(sample.branch.rawValue ^ 1)
        var rivalEqual = sample
        rivalEqual.rivalHash = sample.firstHash
        var rivalAbove = sample
        (rivalAbove.firstHash, rivalAbove.rivalHash) = (sample.rivalHash, sample.firstHash)
        rivalAbove.branch = ForkBranch.id(parent: sample.parent, firstHash: rivalAbove.firstHash)
        var baseZero = sample
        baseZero.base = 0
        var shortHash = sample
        shortHash.firstHash = Array(sample.firstHash.dropLast())
        shortHash.branch = ForkBranch.id(parent: sample.parent, firstHash: shortHash.firstHash)
        let refused: [[String: Any]] = [
            (wrongBranch, "branch is not ForkBranch.id(parent, first_hash)"),
            (rivalEqual, "rival_hash is not below first_hash (equal)"),
            (rivalAbove, "rival_hash is not below first_hash (above it; branch matches its first_hash)"),
            (baseZero, "base is 0"),
            (shortHash, "first_hash is 31 bytes (branch matches it)"),
        ].map { record, why in
            var entry = Self.describe(record, first: nil)
            entry["why"] = why
            return entry
        }
        return [
            "about": "PROTOCOL.md §22.8: the fork records of the `fork_naming` fork with their ForkRecord bytes "
                + "(plait.proto), records a reader refuses (a baseline holding one is corrupt), and naming with a "
                + "baseline's anchors (its entries: timeline, seq in that name's numbering, head hash) and the records, "
                + "by devices holding part of the changes: every held change gets the name the device holding them all "
                + "gives it (`fork_naming`, first scenario).",
            "timeline": Self.hex(root),
            "records": records.map { Self.describe($0, first: nameOf[$0.firstHash]) },
            "refused": refused,
            "scenarios": scenarios,
        ]
    }
}
