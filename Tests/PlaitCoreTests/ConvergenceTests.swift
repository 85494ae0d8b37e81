import Foundation
import Testing

@testable import PlaitCore

/// The property the whole design rests on: same set of changes in, same state out, byte for byte — however
/// the changes arrived, in whatever batches, late or not.
@Suite("Convergence")
struct ConvergenceTests {
    static let shards = 8
    /// 512 seeds in the default run; `PLAIT_SEEDS=5000 swift test …` runs more.
    static let seedsPerShard =
        max(1, (ProcessInfo.processInfo.environment["PLAIT_SEEDS"].flatMap(Int.init) ?? 512) / shards)

    /// `PLAIT_SEED=1234 swift test --filter reproduceOneSeed …` replays exactly the seed a failure printed.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["PLAIT_SEED"] != nil))
    func reproduceOneSeed() throws {
        let seed = try #require(ProcessInfo.processInfo.environment["PLAIT_SEED"].flatMap(UInt64.init))
        _ = try Self.runOne(seed: seed)
    }

    @Test("devices exchanging random partial batches converge to the from-scratch replay", arguments: 0..<shards)
    func devicesConverge(shard: Int) throws {
        var rollbacks = 0
        var fallbacks = 0
        var skipped = 0
        var kinds: Set<String> = []
        var races = Races()
        for index in 0..<Self.seedsPerShard {
            let seed = UInt64(shard * 100_000 + index)
            let outcome = try Self.runOne(seed: seed)
            rollbacks += outcome.rollbacks
            fallbacks += outcome.fallbacks
            skipped += outcome.skipped
            kinds.formUnion(outcome.kinds)
            races.add(outcome.races)
        }
        // The harness must actually reach the paths it is meant to test.
        #expect(rollbacks > 0, "no late change ever rolled an engine back (shard \(shard))")
        #expect(fallbacks > 0, "no rollback ever went past every checkpoint (shard \(shard))")
        #expect(skipped > 0, "no uninterpretable change was ever skipped (shard \(shard))")
        #expect(races.deletesWithSurvivors > 0, "no list.delete ever raced a concurrent add (shard \(shard))")
        #expect(races.revivals > 0, "no change ever revived a deleted list (shard \(shard))")
        #expect(races.recovered > 0, "no item ever arrived for an unknown list (shard \(shard))")
        #expect(races.noopsOnDeleted > 0, "no change ever hit a deleted object (shard \(shard))")
        #expect(ListsChange.kinds.isSubset(of: kinds), "kinds never authored: \(ListsChange.kinds.subtracting(kinds))")
    }

    /// How often the racing situations the simulation is meant to produce actually happened.
    struct Races {
        var deletesWithSurvivors = 0
        var revivals = 0
        var recovered = 0
        var noopsOnDeleted = 0

        mutating func add(_ other: Races) {
            deletesWithSurvivors += other.deletesWithSurvivors
            revivals += other.revivals
            recovered += other.recovered
            noopsOnDeleted += other.noopsOnDeleted
        }

        /// Replays `changes` one by one and classifies what each list.delete and create did.
        init(replaying changes: [Change] = []) {
            let domain = ListsDomain()
            var state = ListsState()
            for change in changes.sorted(by: { $0.orderKey < $1.orderKey }) {
                let before = state
                let outcome = domain.apply(change, to: &state)
                guard let decoded = try? ListsChange(kind: change.kind, payload: change.payload) else { continue }
                switch decoded {
                case let .listDelete(id, _, _):
                    if before.lists[id]?.deleted == false && state.lists[id]?.deleted == false {
                        deletesWithSurvivors += 1
                    }
                case let .itemCreate(_, list, _, _), let .itemMove(_, list?, _):
                    if outcome == .applied && before.lists[list]?.deleted == true { revivals += 1 }
                    if outcome == .applied && before.lists[list] == nil { recovered += 1 }
                case let .itemEdit(id, _), let .itemComplete(id), let .itemDelete(id):
                    if before.items[id]?.deleted == true { noopsOnDeleted += 1 }
                default: break
                }
            }
        }
    }

    struct Outcome {
        var races = Races()
        var rollbacks = 0
        var fallbacks = 0
        var skipped = 0
        var kinds: Set<String> = []
    }

    static func runOne(seed: UInt64) throws -> Outcome {
        var simulation = Simulation(seed: seed)
        let steps = simulation.rng.int(40...90)
        for step in 0..<steps {
            try simulation.run(steps: 1)
            if step % 15 == 14 {
                // Midway, a device's incrementally maintained state is the replay of what it holds.
                let device = simulation.devices[simulation.rng.int(0...(simulation.devices.count - 1))]
                let domain = ListsDomain()
                #expect(
                    domain.canonicalEncoding(of: device.state)
                        == domain.canonicalEncoding(of: replayFromScratch(device.ordered).state),
                    "seed \(seed): step \(step): incremental state differs from the replay of what is held")
                let problems = invariantViolations(device.state)
                #expect(problems.isEmpty, "seed \(seed): step \(step): \(problems)")
            }
        }
        try simulation.exchangeEverything()

        let all = simulation.allChanges
        if seed % 16 == 0 {
            // The harness chains hashes as devices do.
            var previous: [TimelineID: [UInt8]] = [:]
            for change in all {
                #expect(change.previousHash == previous[change.timeline] ?? Change.zeroHash, "seed \(seed)")
                previous[change.timeline] = change.hash
            }
        }
        let reference = replayFromScratch(all)
        let summary = simulation.devices[0].summary
        var outcome = Outcome()
        for (index, device) in simulation.devices.enumerated() {
            #expect(device.summary == summary, "seed \(seed): device \(index) does not hold everything")
            #expect(
                device.engine.digest == reference.digest,
                "seed \(seed): device \(index) digest differs from the from-scratch replay")
            outcome.rollbacks += device.rollbacks
            outcome.fallbacks += device.fallbacks
            outcome.skipped += device.skipped
        }
        let problems = invariantViolations(reference.state)
        #expect(problems.isEmpty, "seed \(seed): \(problems)")
        outcome.kinds = Set(simulation.kindsAuthored.keys)
        outcome.races = Races(replaying: all)
        return outcome
    }
}
