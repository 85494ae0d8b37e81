import Foundation
import GRDB
import PlaitCore
import Testing

@testable import PlaitStore

/// A fixed wall-clock time for authored changes, so nothing depends on the clock.
let fixedNow: Int64 = 1_700_000_000_000

/// A fresh directory under the system temporary directory, removed by `remove()`.
struct TemporaryDirectory {
    let path: String

    init(_ label: String = #function) throws {
        let name = "plait-store-tests-" + label.filter { $0.isLetter || $0.isNumber } + "-" + UUID().uuidString
        path = FileManager.default.temporaryDirectory.appendingPathComponent(name).path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    func file(_ name: String) -> String { path + "/" + name }

    func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// Runs `body` with a fresh temporary directory that is removed afterwards, whatever happens.
func withTemporaryDirectory<T>(_ label: String = #function, _ body: (TemporaryDirectory) throws -> T) throws -> T {
    let directory = try TemporaryDirectory(label)
    defer { directory.remove() }
    return try body(directory)
}

/// One device as the store sees it: a store file with its replica.
final class Device {
    let name: String
    let path: String
    let store: Store
    let replica: Replica

    /// Creates a new store `NAME.db` in `directory`.
    init(_ name: String, in directory: TemporaryDirectory, timeline: TimelineID) throws {
        self.name = name
        path = directory.file(name + ".db")
        store = try Store.create(at: path, timeline: timeline, synchronousFull: false)
        replica = try Replica(store: store)
    }

    /// Opens an existing store file.
    init(_ name: String, opening path: String) throws {
        self.name = name
        self.path = path
        store = try Store.open(at: path, synchronousFull: false)
        replica = try Replica(store: store)
    }

    var timeline: TimelineID { get throws { try store.ownTimeline() } }
    var summary: Summary { get throws { try store.summary() } }
    var digest: [UInt8] { replica.digest }
    var encoding: [UInt8] { replica.domain.canonicalEncoding(of: replica.state) }

    /// Every change this device holds (not folded into its baseline) that `other` lacks, in sequence order per
    /// timeline: what a peer would send after a Want.
    func changesMissing(from other: Device) throws -> [Change] {
        let theirs = try other.summary
        var out: [Change] = []
        for range in theirs.missing(from: try summary) {
            out += try store.changes(of: range.timeline, from: range.seqs.lowerBound, limit: Int.max)
        }
        return out
    }

    /// Pulls what `other` has and this device lacks, as one batch.
    @discardableResult
    func pull(from other: Device) throws -> Replica.IntegrateResult {
        try replica.integrate(try other.changesMissing(from: self))
    }

    /// A second, independent view of the same file (a new `Store` and a cold `Replica`): what another
    /// process would see.
    func reopened() throws -> Replica {
        try Replica(store: try Store.open(at: path, synchronousFull: false))
    }
}

/// Both devices pull from each other until their summaries agree.
func sync(_ a: Device, _ b: Device) throws {
    try a.pull(from: b)
    try b.pull(from: a)
}

/// A list or item ID drawn from the test's generator.
func objectID(_ rng: inout SplitMix64) -> ObjectID { ObjectID.random(using: &rng) }

/// Appends `count` random but valid local changes (every kind of the lists domain), each its own transaction
/// when `perEdit` is true, else all in one.
func randomEdits(_ replica: Replica, count: Int, rng: inout SplitMix64, perEdit: Bool = true) throws {
    func one(_ edit: Replica.LocalEdit) throws {
        let state = edit.state
        let lists = state.liveListIDs
        let pending = lists.flatMap { state.itemIDs(in: $0, completed: false) }
        let completed = lists.flatMap { state.itemIDs(in: $0, completed: true) }
        let items = pending + completed
        func position<C: Collection<ObjectID>>(among anchors: C) -> Position {
            switch Int.random(in: 0..<3, using: &rng) {
            case 0: return .top
            case 1: return .bottom
            default: return anchors.randomElement(using: &rng).map { .after($0) } ?? .bottom
            }
        }
        let roll = Int.random(in: 0..<100, using: &rng)
        if lists.isEmpty || roll < 10 {
            let id = objectID(&rng)
            try edit.append(
                .listCreate(
                    id: id, title: "list \(id.description.prefix(4))", color: rng.chance(50) ? "blue" : nil,
                    at: position(among: lists)))
        } else if items.isEmpty || roll < 45 {
            let list = lists.randomElement(using: &rng)!
            try edit.append(
                .itemCreate(
                    id: objectID(&rng), list: list, text: "item \(rng.next() % 1000)",
                    at: position(among: state.itemIDs(in: list, completed: false))))
        } else if roll < 55 {
            try edit.append(.itemEdit(id: items.randomElement(using: &rng)!, text: "edited \(rng.next() % 1000)"))
        } else if roll < 67, let item = pending.randomElement(using: &rng) {
            try edit.append(.itemComplete(id: item))
        } else if roll < 72, let item = completed.randomElement(using: &rng) {
            try edit.append(.itemReopen(id: item))
        } else if roll < 82 {
            let item = items.randomElement(using: &rng)!
            let target = rng.chance(50) ? lists.randomElement(using: &rng) : nil
            let scope = target ?? state.items[item]!.list
            try edit.append(
                .itemMove(id: item, list: target, at: position(among: state.itemIDs(in: scope, completed: false))))
        } else if roll < 88 {
            try edit.append(.itemDelete(id: items.randomElement(using: &rng)!))
        } else if roll < 92 {
            try edit.append(.listRename(id: lists.randomElement(using: &rng)!, title: "renamed \(rng.next() % 100)"))
        } else if roll < 95 {
            try edit.append(.listRecolor(id: lists.randomElement(using: &rng)!, color: rng.chance(50) ? "red" : nil))
        } else if roll < 98 {
            try edit.append(.listMove(id: lists.randomElement(using: &rng)!, at: position(among: lists)))
        } else {
            try edit.append(.listDelete(id: lists.randomElement(using: &rng)!, observed: try edit.observedSummary()))
        }
    }
    if perEdit {
        for _ in 0..<count { try replica.edit(now: fixedNow) { try one($0) } }
    } else {
        try replica.edit(now: fixedNow) { edit in for _ in 0..<count { try one(edit) } }
    }
}

/// Every row of every table, in a stable order, blobs in hex: two equal dumps mean equal database content.
func dump(_ store: Store) throws -> [String] {
    try store.read { db in
        var out: [String] = []
        let tables = try String.fetchAll(
            db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        for table in tables {
            var rows: [String] = []
            for row in try Row.fetchAll(db, sql: "SELECT * FROM \(table)") {
                var fields: [String] = []
                for (column, value) in row {
                    let text: String
                    switch value.storage {
                    case .null: text = "NULL"
                    case .int64(let number): text = "\(number)"
                    case .double(let number): text = "\(number)"
                    case .string(let string): text = "'\(string)'"
                    case .blob(let data): text = "x'" + data.map { String(format: "%02x", $0) }.joined() + "'"
                    }
                    fields.append("\(column)=\(text)")
                }
                rows.append(table + ": " + fields.joined(separator: " "))
            }
            out.append("table \(table): \(rows.count) rows")
            out += rows.sorted()
        }
        return out
    }
}

/// The bytes of a file (empty if it does not exist).
func fileBytes(_ path: String) -> [UInt8] {
    FileManager.default.contents(atPath: path).map { [UInt8]($0) } ?? []
}

/// A file's size and SHA-256: compared instead of the bytes, so a failure prints two short lines.
func fingerprint(_ path: String) -> String {
    guard let data = FileManager.default.contents(atPath: path) else { return "(no file)" }
    return "\(data.count) bytes, sha256 \(SHA256.hash([UInt8](data)).hexString)"
}

func fingerprint(_ bytes: [UInt8]) -> String { "\(bytes.count) bytes, sha256 \(SHA256.hash(bytes).hexString)" }

/// The hex form of a digest, for readable failure messages.
func hex(_ bytes: [UInt8]) -> String { bytes.hexString }

/// A change built by hand (foreign timelines, damaged batches), chained to `previous` unless told otherwise.
func handMade(
    timeline: TimelineID, seq: UInt64, lamport: UInt64, after previous: Change?, kind: String, version: UInt32 = 1,
    payload: [UInt8]
) -> Change {
    Change(
        timeline: timeline, seq: seq, lamport: lamport, previousHash: previous?.hash ?? Change.zeroHash, kind: kind,
        version: version, wallTime: fixedNow, payload: payload)
}
