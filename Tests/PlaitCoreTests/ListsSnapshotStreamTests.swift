import Testing

@testable import PlaitCore

/// The snapshot, canonical encoding and digest are written in pieces (never the whole encoding at once): the
/// bytes must stay exactly those of the whole-state encoders they replaced, kept here as the reference.
@Suite("Lists snapshot and digest written in pieces")
struct ListsSnapshotStreamTests {
    /// The snapshot as it was built before: every version in a dictionary, then `ListsSnapshot.encoded()`.
    static func referenceSnapshot(of state: ListsState, weight: UInt64) -> [UInt8] {
        var snapshot = ListsSnapshot()
        for (rank, listID) in state.orderedListIDs.enumerated() {
            guard let list = state.lists[listID] else { continue }
            snapshot.lists[listID] = ListVersion(
                title: list.title, color: list.color, deleted: list.deleted, stamp: list.stamp, rank: UInt64(rank),
                weight: weight)
            for completed in [false, true] {
                for (itemRank, itemID) in state.itemIDs(in: listID, completed: completed).enumerated() {
                    guard let item = state.items[itemID] else { continue }
                    snapshot.items[itemID] = ItemVersion(item, rank: UInt64(itemRank), weight: weight)
                }
            }
        }
        for (itemID, item) in state.items where item.deleted {
            snapshot.items[itemID] = ItemVersion(item, rank: 0, weight: weight)
        }
        return snapshot.encoded()
    }

    /// The canonical encoding as it was built before: nested messages, the whole encoding in one array.
    static func referenceCanonicalEncoding(of state: ListsState) -> [UInt8] {
        func encodeItem(_ id: ObjectID, _ item: ItemRecord, _ out: inout ProtoWriter) {
            out.objectID(1, id)
            out.objectID(2, item.list)
            out.string(3, item.text)
            out.bool(4, item.completed)
            out.bool(5, item.deleted)
            out.fixed64(6, item.placedBy.timeline.rawValue)
            out.uint(7, item.placedBy.seq)
        }
        var writer = ProtoWriter()
        writer.uint(1, ListsDomain.snapshotFormat)
        for listID in state.orderedListIDs {
            guard let list = state.lists[listID] else { continue }
            writer.message(2) { out in
                out.objectID(1, listID)
                out.string(2, list.title)
                if let color = list.color { out.string(3, color) }
                out.bool(4, list.deleted)
                for completed in [false, true] {
                    for itemID in state.itemIDs(in: listID, completed: completed) {
                        guard let record = state.items[itemID] else { continue }
                        out.message(completed ? 7 : 6) { item in encodeItem(itemID, record, &item) }
                    }
                }
            }
        }
        for (itemID, item) in state.items.filter({ $0.value.deleted }).sorted(by: { $0.key < $1.key }) {
            writer.message(3) { out in encodeItem(itemID, item, &out) }
        }
        return writer.bytes
    }

    /// A state of `items` items over a few lists, some completed, some deleted, with texts long enough that the
    /// encodings run to several 64 KiB pieces.
    static func largeState(seed: UInt64, items: Int) -> ListsState {
        var random = SplitMix64(seed: seed)
        var author = TimelineAuthor(0x5eed)
        var lamport: UInt64 = 0
        var lists: [ObjectID] = []
        var created: [ObjectID] = []
        for index in 0..<7 {
            let id = ObjectID.random(using: &random)
            lists.append(id)
            lamport += 1
            author.append(.listCreate(id: id, title: "list \(index)", color: index % 2 == 0 ? "red" : nil, at: .bottom),
                lamport: lamport)
        }
        for index in 0..<items {
            let id = ObjectID.random(using: &random)
            created.append(id)
            lamport += 1
            author.append(
                .itemCreate(
                    id: id, list: lists[Int(random.next() % UInt64(lists.count))],
                    text: "item \(index) " + String(repeating: "x", count: Int(random.next() % 60)), at: .bottom),
                lamport: lamport)
            if random.next() % 5 == 0, let target = created.randomElement(using: &random) {
                lamport += 1
                switch random.next() % 3 {
                case 0: author.append(.itemDelete(id: target), lamport: lamport)
                case 1: author.append(.itemComplete(id: target), lamport: lamport)
                default: author.append(.itemEdit(id: target, text: "edited \(index)"), lamport: lamport)
                }
            }
        }
        lamport += 1
        var observed = Summary()
        observed[author.timeline] = UInt64(author.changes.count)
        author.append(.listDelete(id: lists[3], observed: observed), lamport: lamport)
        return replayFromScratch(author.changes).state
    }

    @Test("the snapshot written in pieces is byte for byte the snapshot built whole (random histories)")
    func snapshotMatchesReference() {
        for seed in UInt64(0)..<UInt64(Histories.count) {
            let state = replayFromScratch(Histories.history(seed: seed)).state
            for weight in [UInt64(0), 7] {
                let expected = Self.referenceSnapshot(of: state, weight: weight)
                #expect(ListsDomain().snapshot(of: state, weight: weight) == expected, "seed \(seed), weight \(weight)")
                #expect(ListsSnapshotWriter(state, weight: weight).size == expected.count, "seed \(seed)")
            }
        }
    }

    @Test("the canonical encoding and digest in pieces match the whole encoding (random histories)")
    func canonicalEncodingMatchesReference() {
        for seed in UInt64(0)..<UInt64(Histories.count) {
            let state = replayFromScratch(Histories.history(seed: seed)).state
            let expected = Self.referenceCanonicalEncoding(of: state)
            #expect(ListsDomain().canonicalEncoding(of: state) == expected, "seed \(seed)")
            #expect(ListsDomain().digest(of: state) == SHA256.hash(expected), "seed \(seed)")
        }
    }

    @Test("a state whose encodings run to many pieces (seed printed)", arguments: [UInt64(41), 42])
    func largeStateMatchesReference(seed: UInt64) {
        print("ListsSnapshotStreamTests seed \(seed)")
        let state = Self.largeState(seed: seed, items: 6_000)
        #expect(state.items.values.contains { $0.deleted } && state.items.values.contains { $0.completed })
        let snapshot = Self.referenceSnapshot(of: state, weight: 3)
        #expect(snapshot.count > 4 << 16, "the snapshot must span several pieces to test them")
        var pieces = 0
        var written: [UInt8] = []
        ListsSnapshotWriter(state, weight: 3).write { piece in
            pieces += 1
            written.append(contentsOf: piece)
        }
        #expect(pieces > 4)
        #expect(written == snapshot, "seed \(seed)")
        let encoding = Self.referenceCanonicalEncoding(of: state)
        #expect(ListsDomain().canonicalEncoding(of: state) == encoding, "seed \(seed)")
        #expect(ListsDomain().digest(of: state) == SHA256.hash(encoding), "seed \(seed)")
        // The engine's digest goes through the domain's requirement, not the protocol's default.
        let engine = ReplayEngine(domain: ListsDomain(), state: state, position: .zero)
        #expect(engine.digest == SHA256.hash(encoding))
        // And the snapshot still restores to the same state.
        let restored = try? ListsDomain().restore(snapshot: snapshot[...])
        #expect(restored.map { ListsDomain().digest(of: $0) } == SHA256.hash(encoding))
    }

    @Test("a deleted item still linked in a list (damaged links) keeps its deleted version, as before")
    func deletedItemLinkedKeepsTheLastVersion() throws {
        var state = Self.largeState(seed: 5, items: 40)
        let linked = try #require(state.items.first { !$0.value.deleted && !$0.value.completed })
        state.items[linked.key]!.deleted = true
        #expect(ListsDomain().snapshot(of: state, weight: 1) == Self.referenceSnapshot(of: state, weight: 1))
        #expect(ListsDomain().canonicalEncoding(of: state) == Self.referenceCanonicalEncoding(of: state))
    }

    @Test("SHA-256 fed in pieces (the reference stream) equals the one-shot hash")
    func referenceStreamMatchesOneShot() {
        var random = SplitMix64(seed: 99)
        print("SHA256 stream seed 99")
        for length in [0, 1, 55, 56, 64, 65, 1000, 70_000] {
            let bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            let stream = SHA256.ReferenceStream()
            var offset = 0
            while offset < bytes.count {
                let size = min(Int(random.next() % 300) + 1, bytes.count - offset)
                bytes[offset..<(offset + size)].withUnsafeBytes { stream.update($0) }
                offset += size
            }
            #expect(stream.finalize() == bytes.withUnsafeBytes { SHA256.reference($0) },
                "length \(length)")
        }
    }
}
