import Foundation
import PlaitPairing
import PlaitSession
import PlaitStore
import PlaitSync
import PlaitTLS
import PlaitWire
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A device home in a temporary directory, removed by `remove()`.
final class TemporaryHome {
    let path: String
    let home: Home

    init(_ name: String) throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("plait-pair-\(name)-\(UUID().uuidString)").path
        home = try Home.create(at: path, name: name, config: Config())
    }

    var id: DeviceID { try! home.identity.deviceID }  // created with the home just above

    func trusted() throws -> [String] { try home.store.peers().map(\.deviceID) }

    func remove() { try? FileManager.default.removeItem(atPath: path) }

    /// Two new homes, "alpha" and "beta", as most pairing tests begin; the caller removes them.
    static func alphaAndBeta() throws -> (TemporaryHome, TemporaryHome) {
        (try TemporaryHome("alpha"), try TemporaryHome("beta"))
    }
}

/// A bare identity (no store), as a device in the middle would make for itself.
func temporaryIdentity(_ name: String) throws -> Identity {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("plait-id-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
    defer { try? FileManager.default.removeItem(atPath: path) }
    return try Identity.create(directory: path, commonName: name)
}

/// Two users looking at their screens: each question records the code shown and waits until the other
/// screen shows one too; then, if `compare`, each answers whether the two codes are the same, else each
/// answers `careless` whatever the codes.
final class TwoScreens: @unchecked Sendable {
    private let condition = NSCondition()
    private var shown: [String: PairingPrompt] = [:]
    private let compare: Bool
    private let careless: Bool

    init(compare: Bool = true, careless: Bool = false) {
        self.compare = compare
        self.careless = careless
    }

    func user(_ side: String) -> @Sendable (PairingPrompt) -> Bool {
        { prompt in self.ask(side, prompt) }
    }

    private func ask(_ side: String, _ prompt: PairingPrompt) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        shown[side] = prompt
        condition.broadcast()
        let deadline = Date(timeIntervalSinceNow: 20)
        while shown.count < 2 {
            if !condition.wait(until: deadline) { return false }
        }
        guard compare else { return careless }
        return Set(shown.values.map(\.code)).count == 1
    }

    /// What each screen showed, once both did (waits up to 20 s).
    func prompts() -> [String: PairingPrompt] {
        condition.lock()
        defer { condition.unlock() }
        let deadline = Date(timeIntervalSinceNow: 20)
        while shown.count < 2 {
            if !condition.wait(until: deadline) { break }
        }
        return shown
    }
}

/// Forwards bytes both ways between two TLS connections until either ends; returns the bytes moved.
func relay(_ a: TLSConnection, _ b: TLSConnection) -> Int {
    var buffer = [UInt8](repeating: 0, count: 4096)
    var moved = 0
    defer {
        a.close()
        b.close()
    }
    while true {
        for (from, to) in [(a, b), (b, a)] {
            reading: while true {
                guard let result = try? from.read(into: &buffer) else { return moved }
                switch result {
                case .bytes(let count):
                    guard (try? to.writeAll(Array(buffer[0..<count]), timeout: .seconds(5))) != nil else { return moved }
                    moved += count
                case .wantRead, .wantWrite: break reading
                case .closed: return moved
                }
            }
        }
        var entries = [
            pollfd(fd: a.fileDescriptor, events: Int16(POLLIN), revents: 0),
            pollfd(fd: b.fileDescriptor, events: Int16(POLLIN), revents: 0),
        ]
        guard poll(&entries, 2, 20_000) > 0 else { return moved }
    }
}

let loopbackAnyPort = try! PeerAddress(parsing: "127.0.0.1:0", allowingPortZero: true)

/// Interactive pairing over real TLS on 127.0.0.1: the responder listens, the initiator connects.
@Suite struct PairingTests {
    @Test func bothConfirmAndEachTrustsTheOther() throws {
        let (alpha, beta) = try TemporaryHome.alphaAndBeta()
        defer { [alpha, beta].forEach { $0.remove() } }
        let screens = TwoScreens()
        let listener = try PairingListener(home: alpha.home, address: loopbackAnyPort)
        defer { listener.close() }
        #expect(listener.address.port != 0)
        let responder = JoinableThread { try listener.pairOnce(timeout: .seconds(20), confirm: screens.user("alpha")) }
        let initiated = Result { try beta.home.pair(connectingTo: listener.address, timeout: .seconds(20), confirm: screens.user("beta")) }
        let responded = responder.join()

        let betaSide = try initiated.get()
        let alphaSide = try responded.get()
        let shown = screens.prompts()
        #expect(shown["alpha"]?.code == shown["beta"]?.code, "both screens show the same code")
        #expect(shown["alpha"]?.peer == beta.id && shown["beta"]?.peer == alpha.id)
        #expect(shown["alpha"]?.peerName == "beta" && shown["beta"]?.peerName == "alpha")
        #expect(alphaSide.deviceID == beta.id && alphaSide.name == "beta" && alphaSide.address == nil)
        #expect(betaSide.deviceID == alpha.id && betaSide.name == "alpha" && betaSide.address == listener.address)
        #expect(alphaSide.code == betaSide.code && alphaSide.code == shown["alpha"]?.code)
        #expect(try alpha.trusted() == [beta.id.description])
        #expect(try beta.trusted() == [alpha.id.description])
        #expect(try beta.home.store.peers().first?.address == listener.address.description)
    }

    /// A device in the middle terminates TLS on both sides with identities of its own (named like the
    /// real devices) and forwards the pairing messages byte for byte. The commitment binds the
    /// certificates the responder's handshake saw, so the initiator finds that the revealed nonce does not
    /// match and aborts before showing any code; the responder's attempt then ends too; nothing is stored.
    @Test func aRelayForwardingThePairingMessagesIsCaughtByTheCommitment() throws {
        let (alpha, beta) = try TemporaryHome.alphaAndBeta()
        defer { [alpha, beta].forEach { $0.remove() } }
        let facingBeta = try temporaryIdentity("alpha")
        let facingAlpha = try temporaryIdentity("beta")
        let listener = try PairingListener(home: alpha.home, address: loopbackAnyPort)
        defer { listener.close() }
        let middle = try TLSListener(
            host: "127.0.0.1", port: 0, context: TLSContext(identity: facingBeta, role: .server(acceptsPairing: true)))
        defer { middle.close() }
        let relaying = JoinableThread { () throws -> Int in
            let fromBeta = try middle.accept(trust: { _ in false }, timeout: .seconds(20))
            let toAlpha = try TLSConnection.connect(
                host: "127.0.0.1", port: listener.address.port,
                context: TLSContext(identity: facingAlpha, role: .client(offering: .pairing)), trust: { _ in false },
                timeout: .seconds(20))
            return relay(fromBeta, toAlpha)
        }
        let release = DispatchSemaphore(value: 0)
        let alphaAsked = Counter()
        let responder = JoinableThread {
            try listener.pairOnce(timeout: .seconds(20), confirm: { _ in
                alphaAsked.add(1)
                release.wait()  // alpha's user has not answered yet when the attempt ends
                return true
            })
        }
        let betaAsked = Counter()
        let middleAddress = try PeerAddress(parsing: "127.0.0.1:\(middle.port)")
        #expect(throws: PairingError.commitmentMismatch) {
            try beta.home.pair(connectingTo: middleAddress, timeout: .seconds(20), confirm: { _ in
                betaAsked.add(1)
                return true
            })
        }
        #expect(throws: PairingError.connectionLost) { try responder.join().get() }
        release.signal()
        #expect(try relaying.join().get() > 0, "the messages went through the middle")
        #expect(betaAsked.value == 0, "the initiator showed no code")
        #expect(try alpha.trusted().isEmpty && beta.trusted().isEmpty, "nothing stored on either side")
    }

    /// A device in the middle that runs the protocol itself on both legs (its own nonces, its own two
    /// identities named like the real devices) gets both screens to show a code, but cannot make the two
    /// codes equal: each binds the certificates of its own handshake and nonces committed before the
    /// other leg's were known. Users who compare refuse, and nothing is stored; even careless users who
    /// say yes only trust the devices in the middle, never each other's ID.
    @Test(arguments: [true, false])
    func aRelayRunningTheProtocolOnBothLegsGetsTwoDifferentCodes(usersCompare: Bool) throws {
        let (alpha, beta) = try TemporaryHome.alphaAndBeta()
        defer { [alpha, beta].forEach { $0.remove() } }
        let facingBeta = try temporaryIdentity("alpha")
        let facingAlpha = try temporaryIdentity("beta")
        let listener = try PairingListener(home: alpha.home, address: loopbackAnyPort)
        defer { listener.close() }
        let middle = try TLSListener(
            host: "127.0.0.1", port: 0, context: TLSContext(identity: facingBeta, role: .server(acceptsPairing: true)))
        defer { middle.close() }
        // Each leg on its own thread; the attacker answers yes on both.
        let betaLeg = JoinableThread { () throws -> PairingPrompt in
            let fromBeta = try middle.accept(trust: { _ in false }, timeout: .seconds(20))
            return try Pairing(connection: fromBeta, identity: facingBeta).run(timeout: .seconds(20), confirm: { _ in true })
        }
        let alphaLeg = JoinableThread { () throws -> PairingPrompt in
            let toAlpha = try TLSConnection.connect(
                host: "127.0.0.1", port: listener.address.port,
                context: TLSContext(identity: facingAlpha, role: .client(offering: .pairing)), trust: { _ in false },
                timeout: .seconds(20))
            return try Pairing(connection: toAlpha, identity: facingAlpha).run(timeout: .seconds(20), confirm: { _ in true })
        }

        let screens = TwoScreens(compare: usersCompare, careless: true)
        let responder = JoinableThread { try listener.pairOnce(timeout: .seconds(20), confirm: screens.user("alpha")) }
        let middleAddress = try PeerAddress(parsing: "127.0.0.1:\(middle.port)")
        let initiated = Result { try beta.home.pair(connectingTo: middleAddress, timeout: .seconds(20), confirm: screens.user("beta")) }
        let responded = responder.join()
        let legs = (alphaLeg.join(), betaLeg.join())

        let shown = screens.prompts()
        let alphaCode = try #require(shown["alpha"]?.code)
        let betaCode = try #require(shown["beta"]?.code)
        #expect(alphaCode != betaCode, "the codes differ (equal by chance once in 10^6)")
        // Each screen names the device in the middle: its ID, whatever name it claims.
        #expect(shown["alpha"]?.peer == facingAlpha.deviceID && shown["alpha"]?.peerName == "beta")
        #expect(shown["beta"]?.peer == facingBeta.deviceID && shown["beta"]?.peerName == "alpha")

        if usersCompare {
            #expect(throws: PairingError.refusedHere) { try initiated.get() }
            #expect(throws: PairingError.refusedHere) { try responded.get() }
            #expect(throws: PairingError.refusedByPeer) { try legs.0.get() }
            #expect(throws: PairingError.refusedByPeer) { try legs.1.get() }
            #expect(try alpha.trusted().isEmpty && beta.trusted().isEmpty, "nothing stored on either side")
        } else {
            // Careless users: each side stored the certificate its own handshake proved, never the other's.
            #expect(try alpha.trusted() == [facingAlpha.deviceID.description])
            #expect(try beta.trusted() == [facingBeta.deviceID.description])
        }
    }

    @Test func aRefusalOnOneSideStoresNothingOnEither() throws {
        let (alpha, beta) = try TemporaryHome.alphaAndBeta()
        defer { [alpha, beta].forEach { $0.remove() } }
        let listener = try PairingListener(home: alpha.home, address: loopbackAnyPort)
        defer { listener.close() }
        let responder = JoinableThread { try listener.pairOnce(timeout: .seconds(20), confirm: { _ in true }) }
        let initiated = Result { try beta.home.pair(connectingTo: listener.address, timeout: .seconds(20), confirm: { _ in false }) }
        let responded = responder.join()
        #expect(throws: PairingError.refusedHere) { try initiated.get() }
        #expect(throws: PairingError.refusedByPeer) { try responded.get() }
        #expect(try alpha.trusted().isEmpty && beta.trusted().isEmpty)
    }

    /// The pairing listener speaks pairing only: a sync client is refused at the handshake with no byte
    /// of data, paired or not, and the listener goes on waiting for the device that pairs.
    @Test func syncIsRefusedWhilePairingIsAcceptedAndAPairingConnectionCannotCarryASession() throws {
        let alpha = try TemporaryHome("alpha")
        let beta = try TemporaryHome("beta")
        let stranger = try TemporaryHome("stranger")
        let friend = try TemporaryHome("friend")
        defer {
            for home in [alpha, beta, stranger, friend] { home.remove() }
        }
        _ = try alpha.home.trust(friend.id.description, address: nil, name: "friend")
        let listener = try PairingListener(home: alpha.home, address: loopbackAnyPort)
        defer { listener.close() }
        let refusals = Counter()
        let responder = JoinableThread {
            try listener.pairOnce(timeout: .seconds(20), onRefused: { _ in refusals.add(1) }, confirm: { _ in true })
        }
        for device in [stranger, friend] {
            let context = try TLSContext(identity: device.home.identity, role: .client(offering: .sync))
            var received: [UInt8] = []
            do {
                let connection = try TLSConnection.connect(
                    host: "127.0.0.1", port: listener.address.port, context: context, trust: { _ in true },
                    timeout: .seconds(10))
                defer { connection.close() }
                received = try connection.readExactly(1, timeout: .seconds(10))
                Issue.record("\(device.home.deviceName) got a sync connection and \(received.count) bytes")
            } catch {
                #expect(received.isEmpty)
            }
        }
        #expect(refusals.wait(for: 2), "both sync attempts were refused by the listener")
        let paired = try beta.home.pair(connectingTo: listener.address, timeout: .seconds(20), confirm: { _ in true })
        #expect(paired.deviceID == alpha.id)
        #expect(try responder.join().get().deviceID == beta.id)
        #expect(Set(try alpha.trusted()) == [friend.id.description, beta.id.description], "the stranger is not trusted")

        // A pairing connection is refused by the sync layer: no session can run over it.
        let server = try TLSListener(
            host: "127.0.0.1", port: 0,
            context: TLSContext(identity: alpha.home.identity, role: .server(acceptsPairing: true)))
        defer { server.close() }
        let accepting = JoinableThread { try server.accept(trust: { _ in false }, timeout: .seconds(10)) }
        let client = try TLSConnection.connect(
            host: "127.0.0.1", port: server.port,
            context: TLSContext(identity: stranger.home.identity, role: .client(offering: .pairing)),
            trust: { _ in false }, timeout: .seconds(10))
        defer { client.close() }
        let accepted = try accepting.join().get()
        defer { accepted.close() }
        #expect(accepted.applicationProtocol == .pairing)
        for connection in [accepted, client] {
            #expect(throws: SessionError.self) { _ = try TLSFrameTransport(connection) }
        }
    }

    @Test func pairingWithItselfIsRefused() throws {
        let alpha = try TemporaryHome("alpha")
        defer { alpha.remove() }
        let listener = try PairingListener(home: alpha.home, address: loopbackAnyPort)
        defer { listener.close() }
        let responder = JoinableThread { try listener.pairOnce(timeout: .seconds(10), confirm: { _ in true }) }
        #expect(throws: PairingError.ownDevice) {
            try alpha.home.pair(connectingTo: listener.address, timeout: .seconds(10), confirm: { _ in true })
        }
        #expect(throws: PairingError.ownDevice) { try responder.join().get() }
        #expect(try alpha.trusted().isEmpty)
    }

    @Test func nobodyComingTimesOut() throws {
        let alpha = try TemporaryHome("alpha")
        defer { alpha.remove() }
        let listener = try PairingListener(home: alpha.home, address: loopbackAnyPort)
        defer { listener.close() }
        #expect(throws: PairingError.timedOut(after: .milliseconds(300))) {
            try listener.pairOnce(timeout: .milliseconds(300), confirm: { _ in true })
        }
    }

    /// The other user never answers: this side gives up at its deadline, the other sees the connection
    /// end, and neither stores anything, even though this side's user said yes.
    @Test func anUnansweredQuestionTimesOutAndStoresNothing() throws {
        let (alpha, beta) = try TemporaryHome.alphaAndBeta()
        defer { [alpha, beta].forEach { $0.remove() } }
        let release = DispatchSemaphore(value: 0)
        let listener = try PairingListener(home: alpha.home, address: loopbackAnyPort)
        defer { listener.close() }
        let responder = JoinableThread {
            try listener.pairOnce(timeout: .seconds(20), confirm: { _ in
                release.wait()
                return true
            })
        }
        let initiated = Result { try beta.home.pair(connectingTo: listener.address, timeout: .seconds(1), confirm: { _ in true }) }
        let responded = responder.join()
        release.signal()
        #expect(throws: PairingError.timedOut(after: .seconds(1))) { try initiated.get() }
        #expect(throws: PairingError.connectionLost) { try responded.get() }
        #expect(try alpha.trusted().isEmpty && beta.trusted().isEmpty)
    }

    /// Before trust, a frame over the small pairing limit closes the connection before its payload is read. It
    /// never was the attempt: the listener goes on waiting, and an honest device pairs after it.
    @Test func anOversizedFrameClosesTheConnection() throws {
        let refusals = try pairsAfterAStranger { intruder, refusals in
            try intruder.writeAll([0x00, 0x10, 0x00, 0x00, MessageType.pairNonce.rawValue], timeout: .seconds(5))
            #expect(refusals.wait(for: 1))
        }
        let tooLarge = WireError.frameTooLarge(size: 1 << 20, limit: Pairing.maxFrameSize)
        #expect(refusals.first?.contains("\(tooLarge)") == true, "\(refusals)")
    }

    /// A stranger that completes the TLS handshake with the pairing protocol and then says nothing does not take
    /// the run's only attempt: it took it until the listener's timeout, and an honest device could not pair
    /// (fourth hostile tester of 2026-11-25, F3). Its connection is closed at the handshake deadline.
    @Test func aSilentPairingConnectionDoesNotTakeTheAttempt() throws {
        let refusals = try pairsAfterAStranger { silent, _ in
            // The listener's commitment: the stranger's connection is past TLS and held by the listener.
            let commitment = try silent.readExactly(Frame.lengthPrefixSize + 1, timeout: .seconds(10))
            #expect(commitment.last == MessageType.pairCommit.rawValue)
        }
        #expect(refusals.isEmpty, "closed with the run, not refused: \(refusals)")
    }

    /// Two devices past TLS, each holding the listener's commitment: the first whose nonce arrives is the attempt
    /// (its code is shown); the other's connection is closed at once, and a device connecting later is refused at
    /// once. Both waited, without a word, until the attempt ended (fifth hostile tester of 2026-11-25, F1).
    @Test func theFirstToAnswerIsTheAttemptAndTheRestAreToldAtOnce() throws {
        let alpha = try TemporaryHome("alpha")
        defer { alpha.remove() }
        let listener = try PairingListener(home: alpha.home, address: loopbackAnyPort)
        defer { listener.close() }
        let asked = DispatchSemaphore(value: 0)
        let release = DispatchSemaphore(value: 0)
        let responder = JoinableThread {
            try listener.pairOnce(timeout: .seconds(30), confirm: { _ in
                asked.signal()
                release.wait()
                return false
            })
        }
        let (first, second) = try (pairingConnection(listener, "first"), pairingConnection(listener, "second"))
        defer {
            // This user's no ends the attempt (before the first connection closes under it).
            release.signal()
            #expect(throws: PairingError.refusedHere) { try responder.join().get() }
            first.close()
            second.close()
        }
        for connection in [first, second] {
            let commitment = try connection.readExactly(Frame.lengthPrefixSize + 1, timeout: .seconds(10))
            #expect(commitment.last == MessageType.pairCommit.rawValue)
        }
        try first.writeAll(Message.pairNonce(nonce: [UInt8](repeating: 3, count: 32)).encode(), timeout: .seconds(5))
        #expect(asked.wait(timeout: .now() + 10) == .success, "the first to answer is asked about")
        // The other one is closed now: its read ends before its 10 s, with the connection closed.
        do {
            _ = try second.readExactly(64, timeout: .seconds(10))
            Issue.record("the second connection got a message")
        } catch {
            if case TLSError.timeout = error { Issue.record("the second connection was left open: \(error)") }
        }
        // And the listener no longer listens.
        do {
            _ = try pairingConnection(listener, "third")
            Issue.record("a third device got a pairing connection during the attempt")
        } catch {
            guard case TLSError.refused = error else {
                Issue.record("not refused at once: \(error)")
                return
            }
        }
    }

    /// A TLS connection with the pairing protocol to `listener`, from a new identity named `name`.
    func pairingConnection(_ listener: PairingListener, _ name: String) throws -> TLSConnection {
        try TLSConnection.connect(
            host: "127.0.0.1", port: listener.address.port,
            context: TLSContext(identity: try temporaryIdentity(name), role: .client(offering: .pairing)),
            trust: { _ in false }, timeout: .seconds(10))
    }

    /// Alpha listens for pairing (30 s); a stranger connects to it with the pairing protocol and does `strangerDoes`
    /// (given its connection and what the listener refused so far); then beta pairs, within 5 s, and only beta is
    /// trusted. Returns what the listener refused.
    func pairsAfterAStranger(_ strangerDoes: (TLSConnection, Said) throws -> Void) throws -> [String] {
        let (alpha, beta) = try TemporaryHome.alphaAndBeta()
        defer { [alpha, beta].forEach { $0.remove() } }
        let listener = try PairingListener(home: alpha.home, address: loopbackAnyPort)
        defer { listener.close() }
        let refusals = Said()
        let responder = JoinableThread {
            try listener.pairOnce(timeout: .seconds(30), onRefused: { refusals.add($0) }, confirm: { _ in true })
        }
        let stranger = try pairingConnection(listener, "stranger")
        defer { stranger.close() }
        try strangerDoes(stranger, refusals)
        let paired = try beta.home.pair(connectingTo: listener.address, timeout: .seconds(5), confirm: { _ in true })
        #expect(paired.deviceID == alpha.id)
        #expect(try responder.join().get().deviceID == beta.id)
        #expect(try alpha.trusted() == [beta.id.description], "the stranger is not trusted")
        return refusals.lines
    }

    /// A responder that reveals a nonce without committing to it first (so it could pick it after seeing
    /// the initiator's) is refused before any code is shown.
    @Test func aResponderThatSkipsTheCommitmentIsRefused() throws {
        let beta = try TemporaryHome("beta")
        defer { beta.remove() }
        let cheat = try temporaryIdentity("cheat")
        let server = try TLSListener(
            host: "127.0.0.1", port: 0, context: TLSContext(identity: cheat, role: .server(acceptsPairing: true)))
        defer { server.close() }
        let cheating = JoinableThread { () throws -> Void in
            let connection = try server.accept(trust: { _ in false }, timeout: .seconds(10))
            defer { connection.close() }
            try connection.writeAll(Message.pairReveal(nonce: [UInt8](repeating: 5, count: 32)).encode(), timeout: .seconds(5))
            _ = try? connection.readExactly(1, timeout: .seconds(5))
        }
        let asked = Counter()
        let address = try PeerAddress(parsing: "127.0.0.1:\(server.port)")
        #expect {
            try beta.home.pair(connectingTo: address, timeout: .seconds(10), confirm: { _ in
                asked.add(1)
                return true
            })
        } throws: { error in
            guard case .protocolViolation(let why) = error as? PairingError else { return false }
            return why.contains("PairReveal")
        }
        _ = cheating.join()
        #expect(asked.value == 0, "no code was shown")
        #expect(try beta.trusted().isEmpty)
    }

    @Test func headlessPairingOfAPendingDeviceTakesItsAddressAndMarksItsNameUnverified() throws {
        let alpha = try TemporaryHome("alpha")
        let other = try temporaryIdentity("laptop")
        let anonymous = try temporaryIdentity("anonymous")
        defer { alpha.remove() }
        try alpha.home.store.recordPending(
            deviceID: other.deviceID.description, claimedName: "laptop", address: "192.0.2.7:7400", now: 1)
        try alpha.home.store.recordPending(
            deviceID: anonymous.deviceID.description, claimedName: "(unknown)", address: nil, now: 2)
        let paired = try alpha.home.trust(other.deviceID.description, address: nil, name: nil)
        #expect(paired.name == "laptop (unverified)")
        #expect(paired.address?.description == "192.0.2.7:7400")
        let named = try alpha.home.trust(anonymous.deviceID.description, address: "[::1]:7401", name: nil)
        #expect(named.name == "device \(anonymous.deviceID.shortForm)" && named.address?.description == "[::1]:7401")
        #expect(try alpha.home.store.pendingPeers().isEmpty, "trusting takes a device off the pending list")
        // Trusting again without a name keeps the name it has.
        #expect(try alpha.home.trust(other.deviceID.description, address: nil, name: nil).name == "laptop (unverified)")
        #expect(try alpha.home.trust(other.deviceID.description, address: nil, name: "work laptop").name == "work laptop")
    }
}

/// Sentences told from other threads, and a wait for a count of them without sleeping (`Counter`'s).
final class Said: @unchecked Sendable {
    private let lock = NSLock()
    private var told: [String] = []
    private let count = Counter()

    func add(_ line: String) {
        lock.withLock { told.append(line) }
        count.add(1)
    }

    /// Waits until `count` sentences were told; false after `seconds` without them.
    func wait(for target: Int, seconds: Double = 30) -> Bool { count.wait(for: target, seconds: seconds) }

    var lines: [String] { lock.withLock { told } }
}
