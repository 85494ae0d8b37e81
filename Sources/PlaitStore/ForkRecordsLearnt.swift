import Foundation
import GRDB
import PlaitCore

extension Replica {
    /// What `learnForkRecords` did.
    public struct LearntForkRecords: Sendable, Equatable {
        /// Records this store did not hold with both hashes before, now stored.
        public var learnt = 0
        /// Timelines whose held changes were named again and moved: the state was replayed.
        public var renamed: [TimelineID] = []
        /// This device's own head now stands on a branch that lost: its next edit begins a new timeline.
        public var ownTimelineForkedAway = false
    }

    /// Stores the fork records a peer's Hello carries that this store lacks (PROTOCOL.md §22.9), then names the held
    /// changes of their timelines again by §22.8's rule and, if anything moved, replays the state from the
    /// baseline. Records are permanent and travel like changes, so every device ends holding the same records and
    /// naming every change the same way, also when the fork's changes themselves cannot be exchanged any more (a
    /// baseline folded them). Records already held change nothing and write nothing. One transaction.
    public func learnForkRecords(_ records: [ForkBranch.Record]) throws -> LearntForkRecords {
        let consistent = records.filter(\.isConsistent)
        guard !consistent.isEmpty else { return LearntForkRecords() }
        let held = try store.read { db in Set(try Store.forkRecords(db).map(\.branch)) }
        let fresh = consistent.filter { !held.contains($0.branch) }
        guard !fresh.isEmpty else { return LearntForkRecords() }
        return try transaction { db in
            var result = LearntForkRecords()
            // Another process may have stored some of them meanwhile.
            let heldNow = Set(try Store.forkRecords(db).map(\.branch))
            let missing = fresh.filter { !heldNow.contains($0.branch) }
            guard !missing.isEmpty else { return result }
            result.learnt = missing.count
            let own = try Store.ownTimeline(db)
            let ownHeadBefore = try Self.heldHead(db, own)
            for root in try Store.learnForkRecords(db, missing).sorted() where try Store.renameForks(db, root: root) {
                result.renamed.append(root)
            }
            guard !result.renamed.isEmpty else { return result }
            if let ownHeadBefore, try Self.heldHead(db, own)?.hash != ownHeadBefore.hash {
                // The own head now stands on a branch that lost (DESIGN §11): the next edit begins a new timeline.
                try Meta.set(db, .ownTimelineForkedAway, "1")
                result.ownTimelineForkedAway = true
            }
            try db.execute(sql: "DELETE FROM checkpoints")
            _ = try replayAll(db)
            return result
        }
    }
}
