import Foundation
import GRDB
import PlaitCore
import PlaitStore

// Fixtures shared by the test targets that work on real stores (PlaitStoreTests, PlaitSyncTests).

/// A fixed wall-clock time for authored changes, so nothing depends on the clock.
public let fixedNow: Int64 = 1_700_000_000_000

/// A hand-made unsigned chain of `count` `list.create` changes on `timeline`, the first at Lamport time
/// `lamport + 1`, each a new list titled `title` and its number: what a peer (honest or not) sends on the wire.
public func listCreateChain(
    _ timeline: TimelineID, count: Int, lamport: UInt64, title: String = "t", rng: inout SplitMix64
) -> [Change] {
    var out: [Change] = []
    for seq in 1...UInt64(count) {
        let payload = ListsChange.listCreate(id: ObjectID.random(using: &rng), title: "\(title)\(seq)", color: nil, at: .top)
        out.append(
            Change(
                timeline: timeline, seq: seq, lamport: lamport + seq, previousHash: out.last?.hash ?? Change.zeroHash,
                kind: payload.kind, version: 1, wallTime: fixedNow, payload: payload.payload))
    }
    return out
}

/// A fresh directory under the system temporary directory, removed by `remove()`.
public struct TemporaryDirectory {
    public let path: String

    public init(_ label: String = #function) throws {
        let name = "plait-tests-" + label.filter { $0.isLetter || $0.isNumber } + "-" + UUID().uuidString
        path = FileManager.default.temporaryDirectory.appendingPathComponent(name).path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    public func file(_ name: String) -> String { path + "/" + name }

    public func remove() { try? FileManager.default.removeItem(atPath: path) }
}

/// Runs `body` with a fresh temporary directory that is removed afterwards, whatever happens.
public func withTemporaryDirectory<T>(_ label: String = #function, _ body: (TemporaryDirectory) throws -> T) throws -> T {
    let directory = try TemporaryDirectory(label)
    defer { directory.remove() }
    return try body(directory)
}

/// One device as a test sees it: a store file with its replica.
public final class Device {
    public let name: String
    public let path: String
    public let store: Store
    public let replica: Replica

    /// Creates a new store `NAME.db` in `directory`.
    public init(_ name: String, in directory: TemporaryDirectory, timeline: TimelineID) throws {
        self.name = name
        path = directory.file(name + ".db")
        store = try Store.create(at: path, timeline: timeline, synchronousFull: false)
        replica = try Replica(store: store)
    }

    /// Opens an existing store file.
    public init(_ name: String, opening path: String) throws {
        self.name = name
        self.path = path
        store = try Store.open(at: path, synchronousFull: false)
        replica = try Replica(store: store)
    }

    public var timeline: TimelineID { get throws { try store.ownTimeline() } }
    public var summary: Summary { get throws { try store.summary() } }
    public var digest: [UInt8] { replica.digest }

    /// A second, independent view of the same file (a new `Store` and a cold `Replica`): what another
    /// process would see.
    public func reopened() throws -> Replica {
        try Replica(store: try Store.open(at: path, synchronousFull: false))
    }
}

/// A list or item ID drawn from the test's generator.
public func objectID(_ rng: inout SplitMix64) -> ObjectID { ObjectID.random(using: &rng) }

public func hex(_ bytes: [UInt8]) -> String { bytes.hexString }

/// Appends `count` random but valid local changes (every kind of the lists domain), each its own transaction
/// when `perEdit` is true, else all in one.
public func randomEdits(_ replica: Replica, count: Int, rng: inout SplitMix64, perEdit: Bool = true) throws {
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

/// Removes the identity the store at `storePath` recorded for its file (meta `store_file`, `Store.noticeCopy`), so
/// that a copy of it is not noticed as one at its first write: a copy as a clone that keeps inodes gives (a virtual
/// machine's or a filesystem snapshot's), or a store last written by a plait from before the identity was recorded.
/// Such a copy's edits fork the timeline with the original's, which is what the fork tests need. Nothing may have
/// the store open.
public func forgetStoreFile(storePath: String) throws {
    let queue = try DatabaseQueue(path: storePath)
    try queue.write { db in try db.execute(sql: "DELETE FROM meta WHERE key = 'store_file'") }
    try queue.close()
}
