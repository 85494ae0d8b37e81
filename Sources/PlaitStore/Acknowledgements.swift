import Foundation
import GRDB
import PlaitCore

/// Acknowledgements with head hashes (DESIGN §11, PROTOCOL.md §22.7).
///
/// What a paired peer acknowledged is this store's summary as a session with it ended; compaction never folds a
/// change past it (the peer may still need that change as a change). A summary entry `T:n` names numbers, and a
/// fork found later may rename them: `T:1…n` may then be another copy's changes, which the peer never had. So the
/// acknowledgement also keeps the hash of the change at each entry, and is read the way a `list.delete` of
/// version 2 is (§22.6): it covers the chain that ends at that change under the names it has now. An entry without
/// a hash (recorded before head hashes were, or its change folded without one) is read by the version-1 rule: only
/// what precedes the first fork of its timeline.
enum Acknowledgements {
    /// Bytes an entry takes in `peers.last_heads`: the timeline (8 bytes, big-endian), then the hash.
    static let entrySize = 8 + 32

    /// The hash of the change at each entry of `summary`, as held now; entries whose change has no known hash
    /// (folded into the baseline) are left out.
    static func hashes(_ db: Database, of summary: Summary) throws -> [TimelineID: [UInt8]] {
        var hashes: [TimelineID: [UInt8]] = [:]
        for timeline in summary.timelines where summary[timeline] > 0 {
            if let hash = try Store.hash(db, of: ChangeRef(timeline: timeline, seq: summary[timeline])) {
                hashes[timeline] = hash
            }
        }
        return hashes
    }

    static func encode(_ heads: [TimelineID: [UInt8]]) -> Data {
        var data = Data(capacity: heads.count * entrySize)
        for timeline in heads.keys.sorted() {
            withUnsafeBytes(of: timeline.rawValue.bigEndian) { data.append(contentsOf: $0) }
            data.append(contentsOf: heads[timeline]!)
        }
        return data
    }

    /// The heads of a stored column. A damaged value (not whole entries) reads as no hashes at all: the
    /// acknowledgement then covers less, never more, and compaction only keeps more.
    static func decode(_ data: Data?) -> [TimelineID: [UInt8]] {
        guard let data, data.count % entrySize == 0 else { return [:] }
        let bytes = [UInt8](data)
        var heads: [TimelineID: [UInt8]] = [:]
        for start in stride(from: 0, to: bytes.count, by: entrySize) {
            let timeline = bytes[start..<start + 8].reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            heads[TimelineID(timeline)] = Array(bytes[start + 8..<start + entrySize])
        }
        return heads
    }

    /// What an acknowledgement (`summary` with `heads`) covers here now: exactly `summary` while no fork is held;
    /// after one, entries with a hash cover the chain ending at that change, entries without cover only below the
    /// first fork point of their timeline.
    static func coverage(_ db: Database, summary: Summary, heads: [TimelineID: [UInt8]]) throws -> Summary {
        guard try Store.branchCount(db) > 0 else { return summary }
        let lookup = ChainLookup(locator: try StoreChains(db))
        var hashed = Summary()
        var bare = Summary()
        for timeline in summary.timelines {
            if heads[timeline] != nil {
                hashed[timeline] = summary[timeline]
            } else {
                bare[timeline] = summary[timeline]
            }
        }
        var covered = lookup.coverage(observed: hashed, heads: heads.filter { hashed[$0.key] > 0 })
        let below = lookup.coverage(observed: bare, heads: nil)
        for timeline in below.timelines { covered[timeline] = max(covered[timeline], below[timeline]) }
        return covered
    }
}

extension Store {
    /// The limits on compaction of what the paired peers seen within `graceMs` have acknowledged (each: just below
    /// the first change here it lacks, its acknowledgement read with head hashes, PROTOCOL.md §22.7); nil when a
    /// paired peer was never seen: it may need everything, so nothing is folded.
    public func acknowledgementLimits(now: Int64, graceMs: Int64) throws -> [CutOffLimit]? {
        try read { db in
            let peers = try Self.peers(db)
            if peers.contains(where: { $0.lastSeen == nil }) { return nil }
            let held = try Self.summary(db)
            var limits: [CutOffLimit] = []
            for peer in peers {
                guard let seen = peer.lastSeen, now - seen <= graceMs else { continue }
                let covered = try Acknowledgements.coverage(
                    db, summary: peer.lastSummary ?? Summary(), heads: peer.lastHeads)
                let limit = Compaction.acknowledgementLimit(peer: peer.name, acknowledged: covered, held: held) {
                    try? Self.lamport(db, of: $0)
                }
                if let limit { limits.append(limit) }
            }
            return limits
        }
    }
}
