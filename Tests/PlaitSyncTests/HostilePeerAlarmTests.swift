import Foundation
import PlaitCore
import PlaitSession
import PlaitStore
import PlaitSync
import PlaitTLS
import PlaitTestSupport
import PlaitWire
import Testing

/// A paired peer speaking the protocol by hand over real TLS, with its own certificate: what a hostile client
/// written from PROTOCOL.md alone can send.
final class RawTLSPeer: MessageReceiving {
    let connection: TLSConnection
    private var decoder: FrameDecoder
    /// The Hello the agent sent.
    private(set) var agentHello: Hello?

    /// Connects as `home` to the agent on `port`, accepting frames of at most `maxFrameSize` bytes from it.
    init(_ home: Home, port: UInt16, agent: DeviceID, maxFrameSize: Int = Frame.defaultMaxSize) throws {
        let context = try TLSContext(identity: home.identity, role: .client(offering: .sync))
        connection = try TLSConnection.connect(
            host: "127.0.0.1", port: port, context: context, trust: { $0 == agent }, timeout: .seconds(10))
        decoder = FrameDecoder(maxFrameSize: maxFrameSize)
    }

    deinit { connection.close() }

    func send(_ message: Message) throws { try connection.writeAll(message.encode(), timeout: .seconds(10)) }

    /// The next message from the agent, or nil once it closed the connection. A frame over this peer's limit
    /// throws.
    func receive() throws -> Message? {
        while true {
            if let frame = try decoder.next() {
                let message = try Message.decode(frame)
                if case let .hello(hello) = message { agentHello = hello }
                return message
            }
            do {
                let prefix = try connection.readExactly(4, timeout: .seconds(20))
                let length = prefix.reduce(0) { $0 << 8 | Int($1) }
                decoder.append(prefix)
                // The decoder refuses an oversized length from the prefix alone, before it is read.
                if try decoder.next() == nil, length > 0 {
                    decoder.append(try connection.readExactly(length, timeout: .seconds(20)))
                }
            } catch let error as TLSError {
                if case .closed = error { return nil }
                throw error
            }
        }
    }


    /// A Hello from `home` as a hand-written client sends it.
    static func hello(
        _ home: Home, deviceID: String? = nil, summary: Summary = Summary(), baselineSummary: Summary = Summary(),
        baselineDigest: [UInt8]? = nil, maxFrameSize: Int = Frame.defaultMaxSize, nonce: [UInt8] = randomNonce(),
        forkRecords: [ForkBranch.Record] = [], oneShot: Bool = false
    ) throws -> Message {
        .hello(
            Hello(
                domainName: ListsDomain.name, domainVersion: ListsDomain.version,
                deviceID: try deviceID ?? home.identity.deviceID.description, name: "rogue", summary: summary,
                headHashes: [:], baselineSummary: baselineSummary, baselineDigest: baselineDigest,
                stateDigest: Change.zeroHash, unknownCount: 0, maxFrameSize: maxFrameSize, instanceNonce: nonce,
                forkRecords: forkRecords, oneShot: oneShot))
    }

    static func randomNonce() -> [UInt8] { (0..<16).map { _ in UInt8.random(in: 0...255) } }
}

/// Findings of a hostile paired peer (2026-11-24), each seen failing before its fix: the real agent, real TLS on
/// loopback, a peer speaking the protocol by hand. What this device says about itself must be true.
@Suite(.serialized) struct HostilePeerAlarmTests {
    /// A server agent and a paired rogue home; `body` gets them, the agent's port and its log.
    func withAgent(
        seed: UInt64,
        _ body: (_ server: Home, _ rogue: Home, _ port: UInt16, _ log: LogRecorder, _ directory: TemporaryDirectory)
            throws -> Void
    ) throws {
        let support = AgentEventTests()
        try withTemporaryDirectory { directory in
            let (server, rogue) = try support.pairedHomes(directory, "server", "rogue")
            var rng = SplitMix64(seed: seed)
            try randomEdits(server.replica, count: 5, rng: &rng)
            let log = LogRecorder()
            let agent = try support.startAgent(server, recorder: log)
            defer { agent.stop() }
            try body(server, rogue, try #require(agent.boundPort), log, directory)
        }
    }

    /// A paired peer's Hello naming this device's own Device ID made it report its own home as copied ("home
    /// copied: device <this> is running from two homes"), recorded and shown by status and doctor. The Hello's
    /// ID is checked against the peer's certificate first: a mismatch is the peer's protocol violation.
    @Test func aHelloNamingThisDevicesIDIsThePeersViolationNotACopiedHome() throws {
        try withAgent(seed: 0xA1A2_0001) { server, rogue, port, log, _ in
            let serverID = try server.identity.deviceID
            let peer = try RawTLSPeer(rogue, port: port, agent: serverID)
            try peer.send(try RawTLSPeer.hello(rogue, deviceID: serverID.description))
            let seen = try peer.receive { if case .close = $0 { true } else { false } }
            guard case let .close(reason)? = seen.last else {
                Issue.record("no Close: \(seen.map(\.type))")
                return
            }
            let rogueID = try rogue.identity.deviceID.description
            #expect(reason.contains("the peer broke the sync protocol"), "\(reason)")
            #expect(reason.contains("its certificate is device \(rogueID)"), "\(reason)")
            #expect(!reason.contains("home copied"), "\(reason)")
            #expect(log.line(containing: ["session with ", "(\(rogueID)) ended", "broke the sync protocol"]) != nil)
            #expect(try server.store.copiedHomes(now: Replica.now()).isEmpty, "a copied home was recorded")
            #expect(try server.copiedHomeReports().isEmpty)
            #expect(!log.all.contains { $0.contains("home copied") }, "\(log.all.joined(separator: "\n"))")
        }
    }

    /// A Want marking this device's own timeline "excluded" (forked) from a peer that holds nothing of it made this
    /// device record a fork with that peer, and on its signed own timeline give the timeline up (its next edit
    /// began a new one). A bare marker is no evidence: nothing is recorded, nothing changes.
    @Test func anExcludedMarkerFromAPeerHoldingNothingOfTheTimelineIsNoFork() throws {
        try withAgent(seed: 0xA1A2_0002) { server, rogue, port, log, _ in
            let own = try server.store.ownTimeline()
            let peer = try RawTLSPeer(rogue, port: port, agent: try server.identity.deviceID)
            try peer.send(try RawTLSPeer.hello(rogue))
            _ = try peer.receive { if case .want = $0 { true } else { false } }
            try peer.send(.want(Want(have: Summary([own: SessionMachineMarkers.excluded]), baselineOffset: nil)))
            let answer = try peer.receive { if case .done = $0 { true } else { false } }
            guard case let .done(done)? = answer.last else {
                Issue.record("no Done: \(answer.map(\.type))")
                return
            }
            #expect(done[own] > 0, "the answer names what the agent holds")
            try peer.send(.close(reason: "done"))
            _ = try peer.receive { if case .close = $0 { true } else { false } }
            let forks = try server.store.forks()
            #expect(forks.isEmpty, "a fork was recorded: \(forks)")
            let lines = log.all
            #expect(!lines.contains { $0.contains("forked") }, "\(lines.joined(separator: "\n"))")
            // The own timeline goes on: the next edit is on it, not on a new one.
            var rng = SplitMix64(seed: 7)
            try randomEdits(server.replica, count: 1, rng: &rng)
            #expect(try server.store.ownTimeline() == own)
        }
    }

    /// A Notify's `copied_instances` listing nonces that are not this device's (or only its own, twice) made it
    /// report its home as copied, as a fact. Only a list holding this session's own nonce and another is about
    /// this home, and it is reported as the peer's report, naming the peer.
    @Test func copiedInstancesFromAPeerAreItsReportAndNeverOnlyThisInstance() throws {
        try withAgent(seed: 0xA1A2_0003) { server, rogue, port, log, _ in
            let peer = try RawTLSPeer(rogue, port: port, agent: try server.identity.deviceID)
            try peer.send(try RawTLSPeer.hello(rogue))
            _ = try peer.receive { if case .want = $0 { true } else { false } }
            let mine = try #require(peer.agentHello?.instanceNonce)
            #expect(mine.count == 16)
            var ping: UInt64 = 0
            func notify(_ copies: [[UInt8]]) throws {
                try peer.send(.notify(Summary(), report: nil, copies: copies))
                // Messages are handled in order: the Pong comes after the Notify was.
                ping += 1
                try peer.send(.ping(nonce: ping))
                let seen = try peer.receive { if case let .pong(nonce) = $0, nonce == ping { true } else { false } }
                guard case .pong? = seen.last else { throw TLSError.closed(reason: "no Pong: \(seen.map(\.type))") }
            }
            try notify([RawTLSPeer.randomNonce(), RawTLSPeer.randomNonce()])
            try notify([mine, mine])
            #expect(try server.store.copiedHomes(now: Replica.now()).isEmpty, "a copied home was recorded")
            #expect(!log.all.contains { $0.contains("home copied") || $0.contains("homes (instances") })

            let other = RawTLSPeer.randomNonce()
            try notify([other, mine])
            let rogueID = try rogue.identity.deviceID.description
            #expect(try server.store.copiedHomes(now: Replica.now()).count == 1)
            let reports = try server.copiedHomeReports()
            #expect(reports.count == 1)
            #expect(reports.first?.hasPrefix("peer \(rogueID) reports that device") == true, "\(reports)")
            #expect(!reports.contains { $0.contains("home copied:") }, "\(reports)")
            try peer.send(.close(reason: "done"))
        }
    }

    /// A `plait sync` of a home without an agent speaks with a nonce of its own; when that home's agent starts and
    /// dials while the sync still runs, the peer sees one device from two instances. It probed the sync's session
    /// as the other copy (a Ping, answered), and reported the home as copied (fourth hostile tester of 2026-11-25,
    /// read in the code). Only an agent session is probed now.
    @Test func aSyncStillRunningWhenItsHomesAgentDialsIsNoCopy() throws {
        try withAgent(seed: 0xA1A2_0007) { server, rogue, port, log, _ in
            let seen = try syncThenAgentSession(server, rogue, port)
            let probed = seen.filter { if case .ping = $0 { true } else { false } }
            #expect(probed.isEmpty, "the sync was probed: \(seen.map(\.type))")
            #expect(try server.store.copiedHomes(now: Replica.now()).isEmpty)
            #expect(!log.all.contains { $0.contains("home copied") }, "\(log.all.joined(separator: "\n"))")
        }
    }

    /// `rogue` opens a one-shot session with the agent on `port`, then an agent session with another nonce; returns
    /// what the one-shot session received from the agent between the second session's admission and a Pong.
    func syncThenAgentSession(_ server: Home, _ rogue: Home, _ port: UInt16) throws -> [Message] {
        let serverID = try server.identity.deviceID
        let syncing = try RawTLSPeer(rogue, port: port, agent: serverID)
        try syncing.send(try RawTLSPeer.hello(rogue, oneShot: true))
        _ = try syncing.receive { if case .want = $0 { true } else { false } }
        let agent = try RawTLSPeer(rogue, port: port, agent: serverID)
        try agent.send(try RawTLSPeer.hello(rogue))
        // Its Want comes after its Hello was admitted, and so after any probe of the sync's session began.
        _ = try agent.receive { if case .want = $0 { true } else { false } }
        try syncing.send(.ping(nonce: 77))
        let seen = try syncing.receive { if case .pong(77) = $0 { true } else { false } }
        try syncing.send(.close(reason: "done"))
        try agent.send(.close(reason: "done"))
        return seen
    }

    /// A peer's baseline that does not decode was refused as "a stored snapshot does not decode …; run `plait
    /// doctor`", blaming this store; so was a fork record in its Hello. The bytes are the peer's, and said so.
    @Test func faultsInAPeersBaselineOrForkRecordsNameThePeersData() throws {
        try withAgent(seed: 0xA1A2_0004) { server, rogue, port, log, _ in
            let serverID = try server.identity.deviceID
            let before = try server.store.summary()
            let folded = Summary([TimelineID(0x1234_5678_9ABC): 3])
            let garbage: [UInt8] = [0x08]  // field 1, a varint cut short
            let peer = try RawTLSPeer(rogue, port: port, agent: serverID)
            try peer.send(
                try RawTLSPeer.hello(
                    rogue, summary: folded, baselineSummary: folded, baselineDigest: SHA256.hash(garbage)))
            _ = try peer.receive { if case .want = $0 { true } else { false } }
            try peer.send(
                .baselineChunk(
                    BaselineChunk(
                        totalSize: UInt64(garbage.count), offset: 0, data: garbage, last: true,
                        baselineSummary: folded)))
            let seen = try peer.receive { if case .close = $0 { true } else { false } }
            guard case let .close(reason)? = seen.last else {
                Issue.record("no Close: \(seen.map(\.type))")
                return
            }
            #expect(reason.contains("the peer's baseline is faulty (truncated varint)"), "\(reason)")
            #expect(!reason.contains("stored snapshot"), "\(reason)")
            #expect(log.line(containing: ["session with", "the peer's baseline is faulty"]) != nil)
            #expect(try server.store.stagedBaseline(from: rogue.identity.deviceID.description) == nil)
            #expect(try server.store.summary() == before, "nothing of it was stored")

            // A fork record whose name does not agree with its parent and first hash, in Hello.
            let record = ForkBranch.Record(
                branch: TimelineID(1), root: TimelineID(2), parent: TimelineID(2), base: 1,
                firstHash: [UInt8](repeating: 2, count: 32), rivalHash: [UInt8](repeating: 1, count: 32))
            let second = try RawTLSPeer(rogue, port: port, agent: serverID)
            try second.send(try RawTLSPeer.hello(rogue, forkRecords: [record]))
            let closed = try second.receive { if case .close = $0 { true } else { false } }
            guard case let .close(refusal)? = closed.last else {
                Issue.record("no Close: \(closed.map(\.type))")
                return
            }
            #expect(refusal.contains("fork record 1 is refused: a fork record whose name"), "\(refusal)")
            #expect(!refusal.contains("stored snapshot") && !refusal.contains("plait doctor"), "\(refusal)")
            #expect(!log.all.contains { $0.contains("stored snapshot") }, "\(log.all.joined(separator: "\n"))")
            #expect(try server.store.summary() == before)
        }
    }

    /// A change larger than the peer's announced maximum frame ended the session ("a frame of N bytes would
    /// exceed …"), so a peer announcing 64 KiB synced nothing once one such change existed. The change and the
    /// rest of its timeline are now held back for that peer, everything else syncs, and it is said once.
    @Test func aChangeLargerThanThePeersFramesIsHeldBackAndEverythingElseSyncs() throws {
        try withAgent(seed: 0xA1A2_0005) { server, rogue, port, log, directory in
            let limit = WireLimits.minimumMaxFrameSize
            let own = try server.store.ownTimeline()
            // A list item of 100 KB, then two small edits after it on the same timeline.
            let list = try #require(server.replica.state.liveListIDs.first)
            var rng = SplitMix64(seed: 0xB16)
            try server.replica.edit { edit in
                _ = try edit.append(
                    .itemCreate(
                        id: objectID(&rng), list: list, text: String(repeating: "x", count: 100_000), at: .bottom))
            }
            let large = try server.store.summary()[own]
            try randomEdits(server.replica, count: 2, rng: &rng)
            // Another device's timeline, written after the large change (later in replay order).
            let friend = try Home.create(at: directory.file("friend"), name: "friend", config: Config())
            _ = try server.trust(friend.identity.deviceID.description, address: nil, name: "friend")
            _ = try friend.trust(server.identity.deviceID.description, address: nil, name: "server")
            let address = try PeerAddress(parsing: "127.0.0.1:\(port)")
            #expect(friend.syncOnce(with: address, timeout: .seconds(10)).succeeded)
            try randomEdits(friend.replica, count: 4, rng: &rng)
            #expect(friend.syncOnce(with: address, timeout: .seconds(10)).succeeded)
            let held = try server.store.summary()
            let theirs = try friend.store.ownTimeline()

            for round in 1...2 {
                let peer = try RawTLSPeer(rogue, port: port, agent: try server.identity.deviceID, maxFrameSize: limit)
                try peer.send(try RawTLSPeer.hello(rogue, maxFrameSize: limit))
                _ = try peer.receive { if case .want = $0 { true } else { false } }
                try peer.send(.want(Want(have: Summary(), baselineOffset: nil)))
                // Every frame within the limit (the reader refuses a larger one), and the stream ends with Done.
                let stream = try peer.receive { if case .done = $0 { true } else { false } }
                guard case let .done(done)? = stream.last else {
                    Issue.record("round \(round): no Done: \(stream.map(\.type)) \(stream.last.map { "\($0)" } ?? "")")
                    return
                }
                let sent = stream.flatMap { message -> [Change] in
                    if case let .changes(batch) = message { batch.map(\.change) } else { [] }
                }
                #expect(done[own] == large - 1, "round \(round): sent up to the change before the large one")
                #expect(done[theirs] == held[theirs], "round \(round): the other timeline went whole")
                #expect(!sent.contains { $0.timeline == own && $0.seq >= large })
                #expect(sent.filter { $0.timeline == theirs }.count == Int(held[theirs]))
                try peer.send(.close(reason: "done"))
                _ = try peer.receive { if case .close = $0 { true } else { false } }
            }
            let said = "change \(own):\(large) ("
            #expect(log.line(containing: [said, "is larger than this peer accepts (frames of at most \(limit) bytes)"])
                != nil, "\(log.all.joined(separator: "\n"))")
            // Once per session: two sessions, two lines.
            #expect(log.all.filter { $0.contains(said) }.count == 2, "\(log.all.joined(separator: "\n"))")
            #expect(!log.all.contains { $0.contains("would exceed") }, "\(log.all.joined(separator: "\n"))")
        }
    }
}

/// The Want markers of PROTOCOL.md §13.3, as a hand-written client writes them.
enum SessionMachineMarkers {
    static let excluded = WireLimits.maxSeq
}
