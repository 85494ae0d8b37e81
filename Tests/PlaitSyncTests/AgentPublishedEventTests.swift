import Foundation
import Logging
import PlaitCore
import PlaitSession
@testable import PlaitSync
import PlaitTestSupport
import Testing

/// The agent publishes what happens to its event hub (DESIGN §12 "Endpoints and events"): edits by other
/// processes, changes pulled from a peer, peers coming and going, sync progress, forks and divergence. Agents
/// run in this process over real TLS on 127.0.0.1, on real store files; `plait` commands run as processes.
@Suite(.serialized) struct AgentPublishedEventTests {
    let support = AgentEventTests()

    /// `plait add` in another process: the agent sharing the home publishes one "change.applied" per change,
    /// local, naming the change, its kind and its list and item, and nothing for what was stored before it
    /// started.
    @Test func editByAnotherProcessIsPublished() throws {
        try withTemporaryDirectory { directory in
            let home = try Home.create(at: directory.file("a"), name: "a", config: Config())
            var rng = SplitMix64(seed: 0xE7E7_0101)
            try randomEdits(home.replica, count: 5, rng: &rng)
            let recorder = LogRecorder()
            let agent = try support.startAgent(home, recorder: recorder)
            defer { agent.stop() }
            #expect(agent.events.latestSeq == 0, "stored changes were published as new")

            try support.runPlait(["list", "add", "Groceries", "--home", home.path])
            try support.runPlait(["add", "Groceries", "butter", "--home", home.path])
            let own = try home.store.ownTimeline()
            let head = try home.store.summary()[own]
            let arrived = support.waitUntil(seconds: 10) {
                agent.events.events(after: 0).events.filter { $0.kind == .changeApplied }.count >= 2
            }
            let applied = agent.events.events(after: 0).events.filter { $0.kind == .changeApplied }
            #expect(arrived, "events: \(applied.map(\.json))")
            #expect(applied.map { $0.data["change"] } == [.string("\(own):\(head - 1)"), .string("\(own):\(head)")])
            #expect(applied.map { $0.data["kind"] } == ["list.create", "item.create"])
            #expect(applied.allSatisfy { $0.data["origin"] == "local" && $0.data["from"] == nil })
            // Read through a store of the test's own: refreshing the agent's replica would hide what it lacks.
            let state = try Home.open(at: home.path, config: Config()).replica.state
            let list = try #require(state.lists.first { $0.value.title == "Groceries" }?.key)
            let item = try #require(state.items.first { $0.value.text == "butter" }?.key)
            #expect(applied[0].data["list"] == .string(list.description))
            #expect(applied[1].data["list"] == .string(list.description))
            #expect(applied[1].data["item"] == .string(item.description))
            // An item's own change without its list names the list from the state.
            try support.runPlait(["done", item.description, "--home", home.path])
            #expect(support.waitUntil(seconds: 10) { agent.events.latestSeq >= 3 })
            let done = agent.events.events(after: 2).events
            #expect(done.map { $0.data["kind"] } == ["item.complete"])
            #expect(done.first?.data["list"] == .string(list.description))
        }
    }

    /// Two paired agents: each publishes the other's connection; an edit on A reaches B, whose agent publishes
    /// it as pulled (from A when the session that pulled it was first to look), with B's sync progress.
    @Test func pulledChangeIsPublishedAsPulled() throws {
        try withTemporaryDirectory { directory in
            let (a, b) = try support.pairedHomes(directory, "a", "b")
            let recorder = LogRecorder()
            let agentB = try support.startAgent(b, recorder: recorder)
            defer { agentB.stop() }
            let agentA = try support.startAgent(a, recorder: recorder, peers: [agentB])
            defer { agentA.stop() }
            try support.awaitConnected(recorder, a, b)
            let aID = try a.identity.deviceID.description
            let bID = try b.identity.deviceID.description
            let connected = support.waitUntil(seconds: 10) {
                agentB.events.events(after: 0).events.contains { $0.kind == .peerConnected }
                    && agentA.events.events(after: 0).events.contains { $0.kind == .peerConnected }
            }
            #expect(connected)
            let toB = agentB.events.events(after: 0).events.first { $0.kind == .peerConnected }
            #expect(toB?.data == ["device": .string(aID), "name": "a"])
            let toA = agentA.events.events(after: 0).events.first { $0.kind == .peerConnected }
            #expect(toA?.data == ["device": .string(bID), "name": "b"])

            let since = agentB.events.latestSeq
            try support.runPlait(["list", "add", "Chores", "--home", a.path])
            let aTimeline = try a.store.ownTimeline()
            let change = "\(aTimeline):\(try a.store.summary()[aTimeline])"
            let pulled = support.waitUntil(seconds: 10) {
                agentB.events.events(after: since).events.contains { $0.data["change"] == .string(change) }
            }
            let seen = agentB.events.events(after: since).events
            #expect(pulled, "B published: \(seen.map(\.json))")
            let event = seen.first { $0.data["change"] == .string(change) }
            #expect(event?.kind == .changeApplied)
            #expect(event?.data["origin"] == "pulled")
            #expect(event?.data["kind"] == "list.create")
            if let from = event?.data["from"] { #expect(from == .string(aID)) }
            #expect(seen.filter { $0.data["change"] == .string(change) }.count == 1, "published twice")
            #expect(support.waitUntil(seconds: 10) {
                agentB.events.events(after: since).events.contains {
                    $0.kind == .syncProgress && $0.data["device"] == .string(aID)
                }
            })

            agentA.stop()
            #expect(support.waitUntil(seconds: 10) {
                agentB.events.events(after: since).events.contains {
                    $0.kind == .peerDisconnected && $0.data["device"] == .string(aID)
                }
            })
        }
    }

    /// A session's records become events once each: a fork per new timeline, a divergence when it changes.
    @Test func forksAndDivergencePublishedOnce() throws {
        try withTemporaryDirectory { directory in
            let home = try Home.create(at: directory.file("a"), name: "a", config: Config())
            let agent = Agent(home: home, settings: Agent.Settings(), logger: LogRecorder().logger())
            let fork = SessionRecord.Fork(timeline: TimelineID(0xAB), seq: 4)
            agent.publishRecord(.forks(peer: "p", [fork]))
            agent.publishRecord(.forks(peer: "p", [fork]))
            agent.publishRecord(.findings(peer: "p", diverged: nil))
            agent.publishRecord(.findings(peer: "p", diverged: "the state has diverged"))
            agent.publishRecord(.findings(peer: "p", diverged: "the state has diverged"))
            let events = agent.events.events(after: 0).events
            #expect(events.map(\.kind) == [.fork, .divergence])
            #expect(events.first?.data == ["device": "p", "timeline": .string(TimelineID(0xAB).description), "seq": 4])
            #expect(events.last?.data == ["device": "p", "detail": "the state has diverged"])
        }
    }
}
