import Foundation
import PlaitCore
import PlaitStore

/// `plait repair`: heals what this device can heal (DESIGN §10). Each step is one transaction and reports what it
/// did; steps run in order and a later one may rely on an earlier one.
///
/// Today: rebuild every piece of derived state (materialized rows, replay position, checkpoints) from the source
/// (baseline and stored changes). Next (the quarantine of rotted changes): re-pull quarantined changes from
/// peers, as a step after `rebuildDerivedState`, reported in `Report` beside it.
public enum Repair {
    /// What `run` did.
    public struct Report: Sendable {
        /// Damage met while the home was opened (and already healed in memory), reported by the replica.
        public var foundOnOpen: [DerivedStateRepair]
        /// The rebuild of derived state.
        public var derived: Replica.DerivedStateRebuild
    }

    /// Runs every repair step on `home`. `foundOnOpen` is what the replica reported while the home was opened.
    public static func run(home: Home, foundOnOpen: [DerivedStateRepair] = []) throws -> Report {
        let derived: Replica.DerivedStateRebuild
        do {
            derived = try home.replica.rebuildDerivedState()
        } catch {
            throw Home.wrap(error)
        }
        return Report(foundOnOpen: foundOnOpen, derived: derived)
    }
}
