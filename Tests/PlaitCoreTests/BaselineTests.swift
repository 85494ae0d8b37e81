import Testing

@testable import PlaitCore

@Suite("Compaction and baselines")
struct BaselineTests {
    static let domain = ListsDomain()

    /// Per timeline, a random prefix of `history`: what some device might hold or have folded.
    static func randomPrefixes(_ history: [Change], using rng: inout SplitMix64) -> [Change] {
        var byTimeline: [TimelineID: [Change]] = [:]
        for change in history { byTimeline[change.timeline, default: []].append(change) }
        return byTimeline.keys.sorted().flatMap { timeline in
            let changes = byTimeline[timeline]!
            return changes.prefix(rng.chance(25) ? changes.count : rng.int(0...changes.count))
        }
    }

    // MARK: A device's own compaction

    @Test("restore(baseline) + replay(rest) == replay(all), for random histories and cut-offs")
    func compactionNeverChangesTheDigest() throws {
        for seed in UInt64(0)..<80 {
            let history = Histories.history(seed: seed)
            let full = digestOfReplay(history)
            var rng = SplitMix64(seed: seed)
            let maxLamport = history.map(\.lamport).max()!
            let first = UInt64.random(in: 0...maxLamport, using: &rng)
            let second = UInt64.random(in: first...maxLamport, using: &rng)

            let baseline = try fold(history.filter { $0.lamport <= first })
            #expect(baseline.summary.count == UInt64(history.filter { $0.lamport <= first }.count), "seed \(seed)")
            #expect(
                try replay(history.filter { $0.lamport > first }, onto: baseline).digest == full,
                "seed \(seed): cut-off \(first)")

            // Through the wire format.
            let decoded = try Baseline(decoding: baseline.encoded()[...])
            #expect(decoded == baseline, "seed \(seed)")

            // A second compaction on top of the first.
            let later = try fold(history.filter { $0.lamport > first && $0.lamport <= second }, onto: decoded)
            #expect(
                later.summary == Summary(
                    Dictionary(grouping: history.filter { $0.lamport <= second }, by: \.timeline)
                        .mapValues { UInt64($0.count) }),
                "seed \(seed)")
            #expect(
                try replay(history.filter { $0.lamport > second }, onto: later).digest == full,
                "seed \(seed): cut-offs \(first), \(second)")
            // Folding in one go or in two gives the same state.
            #expect(
                try replay([], onto: later).digest
                    == replay([], onto: fold(history.filter { $0.lamport <= second })).digest,
                "seed \(seed)")

            // A device holding only the baseline gets the rest in late, out-of-order batches.
            var engine = ReplayEngine(
                domain: Self.domain, state: try Self.domain.restore(snapshot: later.snapshot[...]), position: .zero,
                checkpointInterval: rng.int(2...10), checkpointLimit: 3)
            let rest = history.filter { $0.lamport > second }
            var held: [Change] = []
            for batch in ReplayTests.randomBatches(rest, using: &rng) {
                held += batch
                _ = try engine.integrate(batch, source: ChangeArraySource(held)) { _ in
                    (.zero, try Self.domain.restore(snapshot: later.snapshot[...]))
                }
            }
            #expect(engine.digest == full, "seed \(seed): incremental replay on a baseline")
        }
    }

    @Test("a snapshot restores to the same state")
    func snapshotRestoreRoundTrip() throws {
        for seed in UInt64(0)..<40 {
            let engine = replayFromScratch(Histories.history(seed: seed))
            let restored = try Self.domain.restore(snapshot: Self.domain.snapshot(of: engine.state, weight: 7)[...])
            #expect(Self.domain.digest(of: restored) == engine.digest, "seed \(seed)")
            #expect(restored.lists == engine.state.lists, "seed \(seed)")
            #expect(restored.items == engine.state.items, "seed \(seed)")
            #expect(invariantViolations(restored).isEmpty, "seed \(seed)")
        }
    }

    // Hand-made histories around list.delete's observed-remove after compaction.
    static let a = TimelineID(0xA)
    static let b = TimelineID(0xB)
    static let list = objectID(1)
    static let x = objectID(0x10)
    static let y = objectID(0x11)

    /// Folds the changes at or below `cutOff`, replays the rest, and checks against the full replay.
    static func compactAndCompare(_ history: [Change], cutOff: UInt64) throws -> ListsState {
        let baseline = try fold(history.filter { $0.lamport <= cutOff })
        let compacted = try replay(history.filter { $0.lamport > cutOff }, onto: baseline)
        let full = replayFromScratch(history)
        #expect(compacted.digest == full.digest)
        return compacted.state
    }

    @Test("(a) a later list.delete whose observed covers items placed by compacted changes removes them")
    func deleteObservingCompactedPlacements() throws {
        var a = TimelineAuthor(Self.a)
        var b = TimelineAuthor(Self.b)
        a.append(.listCreate(id: Self.list, title: "groceries", color: "red", at: .top), lamport: 1)
        a.append(.itemCreate(id: Self.x, list: Self.list, text: "milk", at: .top), lamport: 2)
        b.append(.itemCreate(id: Self.y, list: Self.list, text: "eggs", at: .bottom), lamport: 3)
        a.append(.listDelete(id: Self.list, observed: Summary([Self.a: 2, Self.b: 1])), lamport: 4)
        let state = try Self.compactAndCompare(a.changes + b.changes, cutOff: 3)
        #expect(state.items[Self.x]!.deleted)
        #expect(state.items[Self.y]!.deleted)
        #expect(state.lists[Self.list]!.deleted)
        #expect(invariantViolations(state).isEmpty)
    }

    @Test("(b) a list.delete that did not observe a compacted add leaves that item and its list")
    func deleteNotObservingCompactedAdd() throws {
        var a = TimelineAuthor(Self.a)
        var b = TimelineAuthor(Self.b)
        a.append(.listCreate(id: Self.list, title: "groceries", color: "red", at: .top), lamport: 1)
        a.append(.itemCreate(id: Self.x, list: Self.list, text: "milk", at: .top), lamport: 2)
        // B adds concurrently (it saw A:1 only); A deletes having seen A:1…2, not B:1.
        b.append(.itemCreate(id: Self.y, list: Self.list, text: "eggs", at: .bottom), lamport: 2)
        a.append(.listDelete(id: Self.list, observed: Summary([Self.a: 2])), lamport: 3)
        let state = try Self.compactAndCompare(a.changes + b.changes, cutOff: 2)
        #expect(state.items[Self.x]!.deleted)
        #expect(!state.items[Self.y]!.deleted, "the concurrent add survives")
        #expect(state.lists[Self.list]!.deleted == false, "and so does its list")
        #expect(sections(state, Self.list).pending == [Self.y])
        #expect(invariantViolations(state).isEmpty)
    }

    @Test("(c) an item created into a list deleted by a compacted change revives it")
    func createIntoListDeletedByCompactedChange() throws {
        var a = TimelineAuthor(Self.a)
        var b = TimelineAuthor(Self.b)
        a.append(.listCreate(id: Self.list, title: "groceries", color: "red", at: .top), lamport: 1)
        a.append(.listCreate(id: objectID(2), title: "work", color: nil, at: .bottom), lamport: 2)
        a.append(.listDelete(id: Self.list, observed: Summary([Self.a: 2])), lamport: 3)
        b.append(.itemCreate(id: Self.y, list: Self.list, text: "eggs", at: .top), lamport: 4)
        let state = try Self.compactAndCompare(a.changes + b.changes, cutOff: 3)
        let revived = state.lists[Self.list]!
        #expect(!revived.deleted)
        #expect(revived.title == "groceries" && revived.color == "red", "revived with its last title and color")
        #expect(state.liveListIDs == [Self.list, objectID(2)], "back where it was")
        #expect(sections(state, Self.list).pending == [Self.y])
    }

    // MARK: The join

    /// Every list and item ID a baseline's state holds.
    static func objectIDs(_ baseline: Baseline) throws -> (lists: Set<ObjectID>, items: Set<ObjectID>) {
        let state = try domain.restore(snapshot: baseline.snapshot[...])
        return (Set(state.lists.keys), Set(state.items.keys))
    }

    @Test("two baselines of disjoint timelines join without losing any object")
    func disjointBaselinesJoinWithoutLoss() throws {
        for seed in UInt64(0)..<40 {
            let history = Histories.history(seed: seed)
            let timelines = Set(history.map(\.timeline)).sorted()
            var rng = SplitMix64(seed: seed)
            let left = Set(timelines.filter { _ in rng.chance(50) })
            let lhs = try fold(history.filter { left.contains($0.timeline) })
            let rhs = try fold(history.filter { !left.contains($0.timeline) })
            let joined = try lhs.joined(with: rhs, domain: Self.domain)
            #expect(joined.summary == lhs.summary.union(rhs.summary), "seed \(seed)")
            #expect(joined.maxLamport == max(lhs.maxLamport, rhs.maxLamport), "seed \(seed)")
            let state = try Self.domain.restore(snapshot: joined.snapshot[...])
            let (lists, items) = (Set(state.lists.keys), Set(state.items.keys))
            let (lhsLists, lhsItems) = try Self.objectIDs(lhs)
            let (rhsLists, rhsItems) = try Self.objectIDs(rhs)
            #expect(lists.isSuperset(of: lhsLists.union(rhsLists)), "seed \(seed): a list was lost")
            #expect(items.isSuperset(of: lhsItems.union(rhsItems)), "seed \(seed): an item was lost")
            #expect(invariantViolations(state).isEmpty, "seed \(seed)")
            // Baselines travel: either side replaying the changes the join does not cover ends in one state.
            let rest = history.filter { !joined.summary.contains($0.ref) }
            #expect(rest.isEmpty, "seed \(seed)")
        }
    }

    enum Folding: CaseIterable {
        /// Any per-timeline prefixes (what joins of joins can reach).
        case arbitraryPrefixes
        /// What one device's compaction folds: of a random held prefix set, the changes at or below the
        /// cut-off of its heads.
        case cutOffRule
    }

    /// Three baselines of one random history, as three devices might have folded them.
    static func threeBaselines(seed: UInt64, folding: Folding) throws -> [Baseline] {
        let history = Histories.history(seed: seed)
        var rng = SplitMix64(seed: seed ^ 0x101)
        return try (0..<3).map { _ in
            let held = Self.randomPrefixes(history, using: &rng)
            switch folding {
            case .arbitraryPrefixes:
                return try fold(held)
            case .cutOffRule:
                var heads: [TimelineID: Change] = [:]
                for change in held { heads[change.timeline] = change }
                let cutOff = Compaction.cutOff(
                    heads: heads.values.map { TimelineHead(timeline: $0.timeline, seq: $0.seq, lamport: $0.lamport) })
                return try fold(held.filter { $0.lamport <= cutOff?.lamport ?? 0 })
            }
        }
    }

    @Test("the join is commutative, associative and idempotent (byte for byte)", arguments: Folding.allCases)
    func joinIsASemilattice(folding: Folding) throws {
        var failures: [String] = []
        for seed in UInt64(0)..<80 {
            let baselines = try Self.threeBaselines(seed: seed, folding: folding)
            func join(_ lhs: Baseline, _ rhs: Baseline) throws -> Baseline {
                try lhs.joined(with: rhs, domain: Self.domain)
            }
            var broken: [String] = []
            for (i, x) in baselines.enumerated() {
                if try join(x, x).encoded() != x.encoded() { broken.append("not idempotent (\(i))") }
                for (j, y) in baselines.enumerated() where i < j {
                    if try join(x, y).encoded() != join(y, x).encoded() {
                        broken.append("not commutative (\(i), \(j))")
                    }
                    if try join(join(x, y), y).encoded() != join(x, y).encoded() {
                        broken.append("not absorbing (\(i), \(j))")
                    }
                }
            }
            let (a, b, c) = (baselines[0], baselines[1], baselines[2])
            let results = try [(a, b, c), (a, c, b), (b, a, c), (b, c, a), (c, a, b), (c, b, a)].flatMap { x, y, z in
                [try join(join(x, y), z).encoded(), try join(x, join(y, z)).encoded()]
            }
            if Set(results).count != 1 {
                // Say whether only the bytes differ (object versions' weights) or the restored states too.
                let states = try Set(results.map { bytes in
                    let snapshot = try Baseline(decoding: bytes[...]).snapshot
                    return Self.domain.digest(of: try Self.domain.restore(snapshot: snapshot[...]))
                })
                broken.append(
                    "not associative: \(Set(results).count) different encodings, \(states.count) different states")
            }
            if !broken.isEmpty { failures.append("seed \(seed): \(broken.joined(separator: ", "))") }
        }
        #expect(failures.isEmpty, "\(failures.count) of 80 seeds: \(failures.joined(separator: "; "))")
    }

    /// The domain's snapshot join alone is a per-object maximum over a total order: a semilattice.
    @Test("the snapshot join of the lists domain is commutative, associative and idempotent")
    func snapshotJoinIsASemilattice() throws {
        for seed in UInt64(0)..<40 {
            let snapshots = try Self.threeBaselines(seed: seed, folding: .arbitraryPrefixes).map(\.snapshot)
            let join = Self.domain.join
            for x in snapshots {
                #expect(try join(x, x) == x, "seed \(seed)")
                for y in snapshots { #expect(try join(x, y) == join(y, x), "seed \(seed)") }
            }
            let (a, b, c) = (snapshots[0], snapshots[1], snapshots[2])
            let reference = try join(join(a, b), c)
            #expect(try join(a, join(b, c)) == reference, "seed \(seed)")
            #expect(try join(join(a, c), b) == reference, "seed \(seed)")
            #expect(try join(b, join(c, a)) == reference, "seed \(seed)")
        }
    }

    /// The smallest history that breaks associativity (found by `joinIsASemilattice`).
    ///
    /// A:3 (an item.delete) and B:1 (an item.edit of the same item) are concurrent; A:3 sorts first. Baseline
    /// `big` folds both: the edit is a no-op there, so the item's stamp stays at A:3. Baseline `small` folds
    /// B:1 without A:3: the edit applies and stamps the item with B:1's key, which is *later*. `big` covers
    /// `small`, so `big ⊔ small = big`, yet the per-object maximum of the snapshot join prefers `small`'s
    /// version of the item as soon as a third, incomparable baseline forces the merge path.
    @Test("join stays associative when one baseline covers another and a third is incomparable")
    func joinAssociativityWithCoveringBaseline() throws {
        var a = TimelineAuthor(TimelineID(0xA))
        var b = TimelineAuthor(TimelineID(0xB))
        var c = TimelineAuthor(TimelineID(0xC))
        let list = objectID(1)
        let item = objectID(2)
        a.append(.listCreate(id: list, title: "l", color: nil, at: .top), lamport: 1)
        a.append(.itemCreate(id: item, list: list, text: "milk", at: .top), lamport: 2)
        a.append(.itemDelete(id: item), lamport: 3)
        b.append(.itemEdit(id: item, text: "oat milk"), lamport: 3)
        c.append(.listCreate(id: objectID(3), title: "other", color: nil, at: .top), lamport: 1)

        let big = try fold(a.changes + b.changes)
        let small = try fold(Array(a.changes.prefix(2)) + b.changes)
        let other = try fold(c.changes)
        #expect(big.summary.covers(small.summary))
        #expect(try big.joined(with: small, domain: Self.domain) == big)

        let left = try big.joined(with: small, domain: Self.domain).joined(with: other, domain: Self.domain)
        let right = try big.joined(with: small.joined(with: other, domain: Self.domain), domain: Self.domain)
        let leftItem = try Self.domain.restore(snapshot: left.snapshot[...]).items[item]!
        let rightItem = try Self.domain.restore(snapshot: right.snapshot[...]).items[item]!
        #expect(leftItem.deleted, "(big ⊔ small) ⊔ other: the delete folded into big holds")
        #expect(rightItem.deleted, "big ⊔ (small ⊔ other): small's stale edit must not resurrect the item")
        #expect(left.encoded() == right.encoded())
    }

    /// The smallest realistic case (every baseline is exactly what its device's own cut-off folds):
    /// `small` folds A:1…2, `big` A:1…2 + B:1, `other` B:1…2 (its device never heard of A).
    /// `big ⊔ small = big` (covers), so `(big ⊔ small) ⊔ other` is the merge of `big` and `other`: lists ranked
    /// [work (0), groceries (1)]. But `small ⊔ other` covers `big`, so `big ⊔ (small ⊔ other)` is
    /// `small ⊔ other` itself, where both lists have rank 0 and the ID breaks the tie: [groceries, office].
    /// Two devices that received the same three baselines in different orders show different list orders
    /// (and carry different weights for the same item version).
        @Test("join stays associative when the covering shortcut and the merge meet (cut-off-rule baselines)")
    func joinAssociativityOfWeights() throws {
        var a = TimelineAuthor(TimelineID(0xA))
        var b = TimelineAuthor(TimelineID(0xB))
        a.append(.listCreate(id: objectID(1), title: "groceries", color: nil, at: .top), lamport: 1)
        a.append(.itemCreate(id: objectID(2), list: objectID(1), text: "milk", at: .top), lamport: 2)
        b.append(.listCreate(id: objectID(3), title: "work", color: nil, at: .top), lamport: 2)
        b.append(.listRename(id: objectID(3), title: "office"), lamport: 3)
        // Each is exactly what Compaction.cutOff allows its device to fold.
        func folded(_ held: [Change]) throws -> Baseline {
            var heads: [TimelineID: Change] = [:]
            for change in held { heads[change.timeline] = change }
            let cutOff = try #require(
                Compaction.cutOff(
                    heads: heads.values.map { TimelineHead(timeline: $0.timeline, seq: $0.seq, lamport: $0.lamport) }))
            #expect(held.allSatisfy { $0.lamport <= cutOff.lamport })
            return try fold(held)
        }
        let small = try folded(a.changes)
        let big = try folded(a.changes + [b.changes[0]])
        let other = try folded(b.changes)
        func join(_ lhs: Baseline, _ rhs: Baseline) throws -> Baseline {
            try lhs.joined(with: rhs, domain: Self.domain)
        }

        let left = try join(join(big, small), other)
        let right = try join(big, join(small, other))
        let digest = { (baseline: Baseline) throws -> [UInt8] in
            Self.domain.digest(of: try Self.domain.restore(snapshot: baseline.snapshot[...]))
        }
        let leftState = try Self.domain.restore(snapshot: left.snapshot[...])
        let rightState = try Self.domain.restore(snapshot: right.snapshot[...])
        #expect(left.summary == right.summary)
        #expect(leftState.liveListIDs == rightState.liveListIDs, "the list order depends on the order of joins")
        #expect(try digest(left) == digest(right))
        #expect(left.encoded() == right.encoded())
    }

    @Test("a baseline that covers another wins the join")
    func coveringBaselineWins() throws {
        for seed in UInt64(0)..<40 {
            let history = Histories.history(seed: seed)
            var rng = SplitMix64(seed: seed)
            let maxLamport = history.map(\.lamport).max()!
            let low = UInt64.random(in: 0...maxLamport, using: &rng)
            let high = UInt64.random(in: low...maxLamport, using: &rng)
            let small = try fold(history.filter { $0.lamport <= low })
            let large = try fold(history.filter { $0.lamport <= high })
            #expect(large.summary.covers(small.summary))
            #expect(try large.joined(with: small, domain: Self.domain) == large, "seed \(seed)")
            #expect(try small.joined(with: large, domain: Self.domain) == large, "seed \(seed)")
        }
    }

    @Test func baselineEncodeDecodeRoundTrip() throws {
        for seed in UInt64(0)..<30 {
            let history = Histories.history(seed: seed)
            var rng = SplitMix64(seed: seed)
            var baseline = try fold(Self.randomPrefixes(history, using: &rng))
            if let timeline = baseline.summary.timelines.first, rng.chance(50) { baseline.ended.insert(timeline) }
            let decoded = try Baseline(decoding: baseline.encoded()[...])
            #expect(decoded == baseline, "seed \(seed)")
            #expect(decoded.encoded() == baseline.encoded(), "seed \(seed)")
        }
        let empty = try fold([])
        #expect(try Baseline(decoding: empty.encoded()[...]) == empty)
        #expect(empty.summary.isEmpty)
    }

    /// PROTOCOL.md §20.9: a folded begin's nonce travels with its certificate, through the encoding and the join (a
    /// baseline of an older build, without the nonce, gives way to one with it, whichever side it is on).
    @Test func aBeginsNonceTravelsWithItsCertificate() throws {
        let certificate = Array("not DER: the derivation hashes the bytes as they are".utf8)
        let nonce = [UInt8](0..<16)
        let timeline = TimelineBegin.timelineID(certificate: certificate, nonce: nonce)
        func baseline(_ nonce: [UInt8]?) -> Baseline {
            var summary = Summary()
            summary[timeline] = 3
            return Baseline(
                summary: summary, maxLamport: 3, heads: [timeline: [UInt8](repeating: 7, count: 32)],
                headLamports: [timeline: 3], ended: [], snapshot: ListsDomain().snapshot(of: ListsState(), weight: 3),
                certificates: [timeline: certificate], nonces: nonce.map { [timeline: $0] } ?? [:])
        }
        let withNonce = baseline(nonce)
        let older = baseline(nil)
        let decoded = try Baseline(decoding: withNonce.encoded()[...])
        #expect(decoded == withNonce)
        #expect(try Baseline(decoding: older.encoded()[...]) == older)
        for joined in [try withNonce.joined(with: older, domain: Self.domain), try older.joined(with: withNonce, domain: Self.domain)] {
            #expect(joined.nonces[timeline] == nonce)
            #expect(joined.encoded() == withNonce.encoded())
        }
        // Another nonce, or another certificate with this nonce, derives another timeline: not decoded.
        for (otherCertificate, otherNonce) in [(certificate, [UInt8](1...16)), (certificate + [0], nonce)] {
            var forged = withNonce
            forged.certificates[timeline] = otherCertificate
            forged.nonces[timeline] = otherNonce
            #expect(throws: CoreError.self) { try Baseline(decoding: forged.encoded()[...]) }
        }
    }

    @Test func newerFormatsAreRefused() throws {
        var baseline = ProtoWriter()
        baseline.uint(1, UInt64(Baseline.format) + 1)
        baseline.uint(3, 9)
        #expect(throws: CoreError.unsupportedFormat(found: Int(Baseline.format) + 1, supported: Int(Baseline.format))) {
            try Baseline(decoding: baseline.bytes[...])
        }
        var snapshot = ProtoWriter()
        snapshot.uint(1, 2)
        #expect(throws: CoreError.unsupportedFormat(found: 2, supported: 1)) {
            try Self.domain.restore(snapshot: snapshot.bytes[...])
        }
        let current = try fold(CompactionTests.workedExample().a)
        #expect(throws: CoreError.unsupportedFormat(found: 2, supported: 1)) {
            try Self.domain.join(current.snapshot, snapshot.bytes)
        }
        // A baseline of this format whose snapshot is newer decodes, but does not restore.
        var wrapped = current
        wrapped.snapshot = snapshot.bytes
        let decoded = try Baseline(decoding: wrapped.encoded()[...])
        #expect(throws: CoreError.unsupportedFormat(found: 2, supported: 1)) {
            try BaselineFolder(domain: Self.domain, previous: decoded)
        }
        // No format at all, or garbage, is corrupt rather than newer.
        #expect(throws: CoreError.self) { try Baseline(decoding: [0x18, 0x01][...]) }
        #expect(throws: CoreError.self) { try Baseline(decoding: [0xff][...]) }
        #expect(throws: CoreError.self) { try Self.domain.restore(snapshot: [0x12, 0x05, 0x01][...]) }
    }

    /// Fork records travel in baselines (PROTOCOL.md §22.8): they survive encoding and the join, one per branch,
    /// and a record whose name does not follow from its parent and first hash, or whose rival is not below its
    /// first hash, makes the baseline unreadable.
    @Test func forkRecordsRoundTripJoinAndAreChecked() throws {
        let root = TimelineID(0x1234)
        let first = [UInt8](repeating: 0xB0, count: 32)
        let rival = [UInt8](repeating: 0x0A, count: 32)
        let record = ForkBranch.Record(
            branch: ForkBranch.id(parent: root, firstHash: first), root: root, parent: root, base: 3,
            firstHash: first, rivalHash: rival)
        #expect(record.isConsistent)
        let empty = Self.domain.snapshot(of: Self.domain.emptyState(), weight: 0)
        let plain = Baseline(
            summary: Summary([root: 2]), maxLamport: 2, heads: [root: rival], headLamports: [root: 2], ended: [],
            snapshot: empty)
        var forked = plain
        forked.forks = [record]
        #expect(try Baseline(decoding: forked.encoded()[...]) == forked)
        #expect(try Baseline(decoding: plain.encoded()[...]).forks.isEmpty, "no records: field 5 absent")
        #expect(forked.encoded().count > plain.encoded().count)
        let joined = try plain.joined(with: forked, domain: Self.domain)
        #expect(joined.forks == [record])
        #expect(try forked.joined(with: forked, domain: Self.domain).forks == [record], "one per branch")

        for bad in [
            ForkBranch.Record(branch: TimelineID(7), root: root, parent: root, base: 3, firstHash: first, rivalHash: rival),
            ForkBranch.Record(
                branch: record.branch, root: root, parent: root, base: 3, firstHash: first, rivalHash: first),
            ForkBranch.Record(
                branch: record.branch, root: root, parent: root, base: 0, firstHash: first, rivalHash: rival),
        ] {
            #expect(!bad.isConsistent)
            var corrupt = plain
            corrupt.forks = [bad]
            #expect(throws: CoreError.self) { try Baseline(decoding: corrupt.encoded()[...]) }
        }
    }
}
