import Foundation
import PlaitCore
import PlaitStore
import PlaitTLS

/// `plait repair`: heals what this device can heal (DESIGN §10). Each step is one transaction and reports what it
/// did; steps run in order and a later one may rely on an earlier one:
///
/// 1. set aside (quarantine) every stored change whose hash does not continue its timeline's chain, with the rest
///    of its timeline;
/// 2. rebuild every piece of derived state (materialized rows, replay position, checkpoints) from the source
///    (baseline and stored changes);
/// 3. if anything is set aside, sync with every paired device that has a known address, which pulls good copies
///    of the set-aside changes from whoever holds them; what no reachable device holds stays set aside and is
///    reported as unrecoverable for now.
public enum Repair {
    /// What `run` did.
    public struct Report: Sendable {
        /// Damage met while the home was opened (and already healed in memory), reported by the replica.
        public var foundOnOpen: [DerivedStateRepair]
        /// What SQLite's integrity check said of the indexes rebuilt first (empty: none was damaged).
        public var indexesRebuilt: [String]
        /// Head records found damaged (not describing their timeline's intact last change) and rewritten from it.
        public var headRecordsMended: [HeadRecordFault]
        /// Stored changes found damaged now and set aside.
        public var setAside: [DamagedChange]
        /// The rebuild of derived state.
        public var derived: Replica.DerivedStateRebuild
        /// The syncs run to pull good copies of set-aside changes.
        public var pulls: [PeerSyncOutcome]
        /// What is still set aside afterwards: no reachable device held it.
        public var stillSetAside: [QuarantinedRange]
        /// Items and lists only kept-aside changes of this device had made, made again (`Home.bringBackKeptAside`).
        public var keptAside: Home.KeptAsideOutcome
        /// What commands showed before the repair: its digest, lists and items. Setting changes aside replays
        /// without them, so the rebuild's own comparison (stored rows against the replay) cannot tell whether
        /// what shows changed; this can.
        public var before: Shown
        /// What commands show after the last step (the pulls may bring set-aside changes back).
        public var after: Shown
    }

    /// What commands show: the state's digest, its live lists and items.
    public struct Shown: Sendable, Equatable {
        public var digest: [UInt8]
        public var lists: Int
        public var items: Int

        init(_ replica: Replica) {
            let state = replica.state
            digest = replica.digest
            lists = state.liveListIDs.count
            items = state.liveItemCount
        }
    }

    /// Runs every repair step on `home`. `foundOnOpen` is what the replica reported while the home was opened.
    public static func run(
        home: Home, foundOnOpen: [DerivedStateRepair] = [], pullTimeout: Duration = .seconds(10)
    ) throws -> Report {
        let derived: Replica.DerivedStateRebuild
        let setAside: [DamagedChange]
        let before: Shown
        let indexesRebuilt: [String]
        let headRecordsMended: [HeadRecordFault]
        do {
            before = Shown(home.replica)
            // Indexes first: the chain check reads the changes through one.
            indexesRebuilt = try home.store.rebuildDamagedIndexes()
            // Head records next: the chain check compares each timeline's last change with its record.
            headRecordsMended = try home.replica.mendHeadRecords()
            setAside = try home.replica.quarantineDamaged()
            derived = try home.replica.rebuildDerivedState()
        } catch {
            throw Home.wrap(error)
        }
        var pulls: [PeerSyncOutcome] = []
        if try !home.store.quarantined().isEmpty {
            for peer in try home.store.peers() {
                guard let text = peer.address, let address = try? PeerAddress(parsing: text) else { continue }
                pulls.append(home.syncOnce(with: address, timeout: pullTimeout))
                if try home.store.quarantined().isEmpty { break }
            }
        }
        // Last: what was pulled back above is held, and not made again.
        let keptAside = home.bringBackKeptAside()
        return Report(
            foundOnOpen: foundOnOpen, indexesRebuilt: indexesRebuilt, headRecordsMended: headRecordsMended,
            setAside: setAside, derived: derived, pulls: pulls, stillSetAside: try home.store.quarantined(),
            keptAside: keptAside, before: before, after: Shown(home.replica))
    }
}
