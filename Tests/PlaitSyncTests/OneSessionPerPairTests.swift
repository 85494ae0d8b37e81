import Foundation
import Logging
import PlaitCore
import PlaitNetnsSupport
import PlaitTLS
import PlaitWire
@testable import PlaitSync
import PlaitTestSupport
import Testing

/// Two agents that know each other's address dial each other when they start: each side then holds two
/// connections with the other, and both must keep the same one (PROTOCOL.md §13.5: the one dialled by the
/// smaller Device ID while both are under 2 s old, else the newer) and then stay on it, not reconnect. Agents run
/// in this process over real TLS on 127.0.0.1, on real store files; edits are made by `plait` processes.
@Suite(.serialized) struct OneSessionPerPairTests {
    let support = AgentEventTests()

    /// How each agent learns where the other listens: `--peer` (a static address, dialled by address), or the
    /// address stored with the paired device (dialled by Device ID).
    enum Addressing: String, CaseIterable, Sendable { case staticPeers, storedAddresses }

    @Test(arguments: Addressing.allCases)
    func twoAgentsDiallingEachOtherAtOnceKeepOneSessionAndStayOnIt(addressing: Addressing) throws {
        try withTemporaryDirectory { directory in
            let (a, b) = try support.pairedHomes(directory, "a", "b")
            let aID = try a.identity.deviceID.description
            let bID = try b.identity.deviceID.description
            let ports = try LoopbackPorts.free(2)
            let addresses = try ports.map { try PeerAddress(parsing: "127.0.0.1:\($0)") }
            if addressing == .storedAddresses {
                _ = try a.trust(bID, address: addresses[1].description, name: "b")
                _ = try b.trust(aID, address: addresses[0].description, name: "a")
            }
            let recorder = LogRecorder()
            let agents = [(a, 0), (b, 1)].map { home, index in
                var settings = Agent.Settings()
                settings.listen = addresses[index]
                if addressing == .staticPeers { settings.staticPeers = [addresses[1 - index]] }
                settings.antiEntropyInterval = .seconds(3600)
                return Agent(home: home, settings: settings, logger: recorder.logger("plait.\(home.deviceName)"))
            }
            defer { for agent in agents { agent.stop() } }
            // Both start together: each listens, then dials the other at once.
            let started = DispatchGroup()
            let errors = LogRecorder()
            for agent in agents {
                DispatchQueue.global().async(group: started) {
                    do { try agent.start() } catch { errors.append("\(error)") }
                }
            }
            started.wait()
            try #require(errors.all.isEmpty, "\(errors.all)")
            let (agentA, agentB) = (agents[0], agents[1])

            // One session on each side, and the same connection: dialled by a on a's side iff not on b's.
            func settled() -> Bool {
                let onA = agentA.primarySessionDialers(with: bID)
                let onB = agentB.primarySessionDialers(with: aID)
                return onA.count == 1 && onB.count == 1 && onA[0] != onB[0]
            }
            let log = { recorder.all.joined(separator: "\n") }
            #expect(support.waitUntil(seconds: 15, settled), "\(addressing): sessions never settled:\n\(log())")

            // The session carries edits both ways.
            for (from, to) in [(a, b), (b, a)] {
                try support.runPlait(["list", "add", "From \(from.deviceName)", "--home", from.path])
                let timeline = try from.store.ownTimeline()
                let head = try from.store.summary()[timeline]
                let reader = try Home.open(at: to.path, config: Config())
                let arrived = support.waitUntil(seconds: 15) { (try? reader.store.summary()[timeline]) == head }
                #expect(arrived, "\(addressing): \(from.deviceName)'s edit did not reach \(to.deviceName):\n\(log())")
            }

            // And they stay on it. A connection lost at the start is redialled after a back-off of 2 s, and a
            // connection over 2 s old loses to a newer one: 5 s with no new session shows that did not happen.
            let connected = agents.map { agent in
                agent.events.events(after: 0).events.filter { $0.kind == .peerConnected }.count
            }
            let dialers = (agentA.primarySessionDialers(with: bID), agentB.primarySessionDialers(with: aID))
            usleep(5_000_000)
            let connectedAfter = agents.map { agent in
                agent.events.events(after: 0).events.filter { $0.kind == .peerConnected }.count
            }
            #expect(connectedAfter == connected, "\(addressing): the agents reconnected:\n\(log())")
            #expect(settled(), "\(addressing): \(agentA.primarySessionDialers(with: bID)) \(agentB.primarySessionDialers(with: aID))")
            #expect(agentA.primarySessionDialers(with: bID) == dialers.0)
            #expect(agentB.primarySessionDialers(with: aID) == dialers.1)
            // Which one is kept depends on the race (both admitted while young: the one the smaller Device ID
            // dialled; a dial that met a session already held: closed at once), and is printed.
            let kept = agentA.primarySessionDialers(with: bID).first == true ? aID : bID
            let sessionsEnded = recorder.all.filter { $0.contains("session with") && $0.contains("ended") }
            print("\(addressing): kept the connection dialled by \(kept == aID ? "a" : "b"); \(sessionsEnded.count) ended at the start; peer.connected events \(connectedAfter)")
        }
    }

    /// A second connection from a device whose session here moved bytes in the last 5 s runs beside it as a second
    /// process of that home (a plait that does not mark one-shot sessions), not told of local changes; when the
    /// first one ends it takes its place and is told of them (PROTOCOL.md §13.5). Two hand-driven peers of one home
    /// (one instance nonce) against the real agent over TLS.
    @Test func aSecondProcessBesideABusySessionTakesItsPlaceWhenItEnds() throws {
        try withTemporaryDirectory { directory in
            let (server, rogue) = try support.pairedHomes(directory, "server", "rogue")
            let agent = try support.startAgent(server, recorder: LogRecorder())
            defer { agent.stop() }
            let port = try #require(agent.boundPort)
            let serverID = try server.identity.deviceID
            let rogueID = try rogue.identity.deviceID.description
            let nonce = RawTLSPeer.randomNonce()
            /// Greets the agent and ends both directions of the first exchange (the peer holds nothing and wants
            /// nothing), as an agent session of the rogue's home would.
            func greeted() throws -> RawTLSPeer {
                let peer = try RawTLSPeer(rogue, port: port, agent: serverID)
                try peer.send(try RawTLSPeer.hello(rogue, nonce: nonce))
                _ = try peer.receive { if case .want = $0 { true } else { false } }
                let held = try #require(peer.agentHello?.summary)
                try peer.send(.done(Summary()))
                try peer.send(.want(Want(have: held, baselineOffset: nil)))
                _ = try peer.receive { if case .done = $0 { true } else { false } }
                return peer
            }
            /// The messages `peer` receives up to the Pong of a Ping sent now: what the agent sent it before.
            var pings: UInt64 = 0
            func drained(_ peer: RawTLSPeer) throws -> [Message] {
                pings += 1
                let nonce = pings
                try peer.send(.ping(nonce: nonce))
                return try peer.receive { if case let .pong(answer) = $0, answer == nonce { true } else { false } }
            }
            func notified(_ messages: [Message]) -> Bool {
                messages.contains { if case let .notify(summary, _, _) = $0 { !summary.timelines.isEmpty } else { false } }
            }
            let own = try server.store.ownTimeline()
            func edit(_ title: String) throws -> UInt64 {
                try support.runPlait(["list", "add", title, "--home", server.path])
                return try server.store.summary()[own]
            }
            let wait = support

            let first = try greeted()
            let second = try greeted()  // the first moved bytes just now: this one runs beside it
            #expect(wait.waitUntil(seconds: 10) {
                agent.primarySessionDialers(with: rogueID).count == 1 && agent.extraSessionCount(with: rogueID) == 1
            }, "primary \(agent.primarySessionDialers(with: rogueID)), extra \(agent.extraSessionCount(with: rogueID))")

            // A local edit is told to the first, not to the second process.
            let head = try edit("One")
            let toFirst = try first.receive {
                if case let .notify(summary, _, _) = $0 { summary[own] == head } else { false }
            }
            #expect(notified(toFirst))
            #expect(!notified(try drained(second)), "the second process was told of a local change")

            // The first ends: the second takes its place, and is told of the next edit.
            try first.send(.close(reason: "done"))
            _ = try first.receiveAll()
            #expect(wait.waitUntil(seconds: 10) {
                agent.primarySessionDialers(with: rogueID).count == 1 && agent.extraSessionCount(with: rogueID) == 0
            }, "primary \(agent.primarySessionDialers(with: rogueID)), extra \(agent.extraSessionCount(with: rogueID))")
            let next = try edit("Two")
            let toSecond = try second.receive {
                if case let .notify(summary, _, _) = $0 { summary[own] == next } else { false }
            }
            #expect(notified(toSecond), "the second process was not told of the edit after the first ended")
            try second.send(.close(reason: "done"))
            _ = try second.receiveAll()
        }
    }
}

