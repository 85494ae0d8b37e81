import Foundation
import PlaitCore
import PlaitTestSupport
import Testing

@testable import PlaitStore

/// Two replicas on one file, like the CLI and the agent: each write sees the other's, nothing is lost.
@Suite struct ConcurrentReplicaTests {
    @Test(arguments: [0x2B0C_0001 as UInt64])
    func twoReplicasOnOneFileSeeEachOther(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let device = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let agent = device.replica
            let cli = try device.reopened()
            let own = try device.timeline

            let list = ObjectID.random(using: &rng)
            _ = try agent.edit(now: fixedNow) { edit in
                try edit.append(.listCreate(id: list, title: "Groceries", color: nil, at: .top))
            }
            #expect(
                cli.state.lists[list] == nil, "a replica sees another's write only after refresh() or its next write")
            try cli.refresh()
            #expect(cli.state.lists[list]?.title == "Groceries")
            #expect(hex(cli.digest) == hex(agent.digest))

            // The CLI writes without refreshing first: its transaction notices the generation and reloads.
            let milk = ObjectID.random(using: &rng)
            let change = try cli.edit(now: fixedNow) { edit in
                #expect(edit.state.lists[list] != nil)
                return try edit.append(.itemCreate(id: milk, list: list, text: "milk", at: .bottom))
            }
            #expect(change.seq == 2)
            _ = try agent.edit(now: fixedNow) { edit in
                #expect(edit.state.items[milk]?.text == "milk", "the agent's edit sees the CLI's item")
                try edit.append(.itemComplete(id: milk))
            }

            // Interleaved random writes through both: every one lands, in one chain.
            for step in 0..<20 {
                try randomEdits(step % 3 == 0 ? agent : cli, count: 1, rng: &rng)
            }
            #expect(try device.summary == Summary([own: 23]))
            let chain = try device.store.changes(of: own, from: 1, limit: 100)
            #expect(chain.map(\.seq) == Array(1...23))
            for (previous, next) in zip(chain, chain.dropFirst()) {
                #expect(next.previousHash == previous.hash)
                #expect(next.lamport > previous.lamport)
            }
            try agent.refresh()
            try cli.refresh()
            #expect(hex(agent.digest) == hex(cli.digest))
            let reference = try device.reopened()
            try reference.rebuild()
            #expect(hex(reference.digest) == hex(agent.digest))
            try agent.refresh()
            #expect(hex(agent.digest) == hex(reference.digest))
        }
    }
}

/// Two replicas writing the same file at the same time from two threads (the agent integrating while the
/// CLI edits): every write lands once, the timeline's chain stays intact, and both end at a full replay's state.
@Suite struct SimultaneousWriterTests {
    @Test(arguments: [0x2B0C_0002 as UInt64])
    func simultaneousWritersLoseNothing(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let device = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let peer = try Device("peer", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(peer.replica, count: 40, rng: &rng)
            let pulled = try peer.changesMissing(from: device)
            let list = ObjectID.random(using: &rng)
            _ = try device.replica.edit(now: fixedNow) { edit in
                try edit.append(.listCreate(id: list, title: "shared", color: nil, at: .top))
            }
            let replicas = [device.replica, try device.reopened()]
            let texts = (0..<2).map { writer in (0..<25).map { "writer \(writer) item \($0)" } }
            let ids = (0..<2).map { _ in (0..<25).map { _ in ObjectID.random(using: &rng) } }
            let errors = ErrorBox()
            DispatchQueue.concurrentPerform(iterations: 2) { writer in
                do {
                    for index in 0..<25 {
                        _ = try replicas[writer].edit(now: fixedNow) { edit in
                            try edit.append(
                                .itemCreate(id: ids[writer][index], list: list, text: texts[writer][index], at: .bottom)
                            )
                        }
                        // The first writer also integrates the peer's changes, a few at a time, like the agent.
                        if writer == 0, index % 5 == 0 {
                            _ = try replicas[0].integrate(Array(pulled[(index / 5 * 8)..<(index / 5 * 8 + 8)]))
                        }
                    }
                } catch {
                    errors.append("writer \(writer): \(error)")
                }
            }
            #expect(errors.all.isEmpty, "\(errors.all)")
            let own = try device.timeline
            #expect(try device.summary == Summary([own: 51, try peer.timeline: 40]))
            let chain = try device.store.changes(of: own, from: 1, limit: 100)
            #expect(chain.map(\.seq) == Array(1...51))
            for (previous, next) in zip(chain, chain.dropFirst()) {
                #expect(next.previousHash == previous.hash, "chain broken at \(next.seq)")
                #expect(next.lamport > previous.lamport)
            }
            for replica in replicas { try replica.refresh() }
            let state = replicas[0].state
            // Each writer's items appear in its own order.
            for writer in 0..<2 {
                let mine = state.itemIDs(in: list, completed: false).filter { ids[writer].contains($0) }
                #expect(mine == ids[writer] || state.lists[list]?.deleted == true)
            }
            let reference = try device.reopened()
            try reference.rebuild()
            for replica in replicas { try replica.refresh() }
            #expect(hex(replicas[0].digest) == hex(reference.digest))
            #expect(hex(replicas[1].digest) == hex(reference.digest))
            try peer.pull(from: device)
            #expect(hex(peer.digest) == hex(reference.digest))
        }
    }
}

/// Collects errors from several threads.
final class ErrorBox: @unchecked Sendable {
    private let lock = NSLock()
    private var errors: [String] = []
    func append(_ error: String) { lock.withLock { errors.append(error) } }
    var all: [String] { lock.withLock { errors } }
}
