import Foundation
import PlaitTLS
import PlaitWire

#if canImport(Glibc)
import Glibc
#endif

/// What a user is asked to confirm: that the other screen shows the same code.
public struct PairingPrompt: Sendable, Equatable {
    /// The code this device computed; the other device shows the same one only if nobody is in between.
    public var code: PairingCode
    /// The other device's ID, from its certificate in the TLS handshake.
    public var peer: DeviceID
    /// The common name in the other device's certificate: the name it gave itself (empty if none).
    public var peerName: String
}

/// One pairing attempt over one TLS connection that negotiated `plait-pair/1`: drives a
/// `PairingMachine` with blocking reads and writes (poll(2), a deadline) on the calling thread, and asks
/// the user through a closure on a thread of its own, so the peer's refusal, a disconnect or the
/// deadline end the attempt even while the question is still open.
///
/// Frames over `maxFrameSize` close the connection: a device that is not trusted yet gets no more
/// memory than that. `run()` returns only once both users said yes; it stores nothing itself (see
/// `Home.pair(connectingTo:…)` and `PairingListener`, which store on success).
public final class Pairing: @unchecked Sendable {
    /// The largest frame accepted on a pairing connection (the messages are under 40 bytes).
    public static let maxFrameSize = 4096
    /// How long the end of an attempt waits for the peer's close_notify, so the last message (Confirm)
    /// is not lost to a reset.
    public static let closingTimeout: Duration = .seconds(2)

    public let connection: TLSConnection
    /// The other device: its ID and the name in its certificate.
    public let peer: DeviceID
    public let peerName: String

    private var machine: PairingMachine
    private var outcome: Result<PairingPrompt, PairingError>?
    private var confirm: (@Sendable (PairingPrompt) -> Bool)?
    /// The user's answer, handed from the asking thread to the driver, which polls its descriptor. The
    /// asking thread keeps it alive while it runs, so a late answer never writes into a reused descriptor.
    private var answers: Inbox<Bool>?
    private var started = false
    /// Whether `begin()` ran the machine's start (sent the responder's commitment) before `run`.
    private var begun = false
    /// The bytes read so far, across `awaitFirstMessage()` and `run`.
    private var decoder = FrameDecoder(maxFrameSize: Pairing.maxFrameSize)
    /// The peer's first message, read by `awaitFirstMessage()` before the attempt ran.
    private var firstMessage: Message?

    /// Prepares an attempt on an established connection (the TLS server is the responder). Throws
    /// `notPairing` unless the connection negotiated `plait-pair/1`, and `ownDevice` if the peer presented
    /// this device's own certificate. `nonce` is for tests; by default a fresh one from the CSPRNG.
    public init(connection: TLSConnection, identity: Identity, nonce: [UInt8]? = nil) throws(PairingError) {
        guard connection.applicationProtocol == .pairing, let peerCertificate = connection.peerCertificateDER,
            let peer = connection.peerDeviceID
        else {
            throw .notPairing(negotiated: connection.negotiatedALPN)
        }
        guard peer != identity.deviceID else { throw .ownDevice }
        self.connection = connection
        self.peer = peer
        peerName = Self.displayable(connection.peerCommonName ?? "")
        machine = PairingMachine(
            role: connection.isServer ? .responder : .initiator, ownCertificate: identity.certificateDER,
            peerCertificate: peerCertificate, nonce: nonce ?? PairingMachine.randomNonce())
    }

    /// Runs the attempt within `timeout` and closes the connection. `confirm` is called once, on a
    /// thread of its own, when the code is known; it returns whether the user said yes. If the attempt
    /// ends while it is still running (the peer refused, the connection broke, time ran out), `run`
    /// returns without waiting for it and its answer is ignored.
    ///
    /// Returns what was confirmed once both users said yes; throws otherwise.
    public func run(
        timeout: Duration, confirm: @escaping @Sendable (PairingPrompt) -> Bool
    ) throws(PairingError) -> PairingPrompt {
        try run(until: ContinuousClock.now + timeout, timeout: timeout, confirm: confirm)
    }

    /// `run(timeout:confirm:)` with a deadline set earlier (a listener's wait counts against it);
    /// `timeout` is what a timeout error reports. `onPeerStarted` is called on this thread when the peer's first
    /// message arrived: the peer runs its side of the attempt (a listener holding a connection sends nothing
    /// until it does).
    public func run(
        until deadline: ContinuousClock.Instant, timeout: Duration, onPeerStarted: (() -> Void)? = nil,
        confirm: @escaping @Sendable (PairingPrompt) -> Bool
    ) throws(PairingError) -> PairingPrompt {
        precondition(!started, "a Pairing runs once: one attempt per connection")
        started = true
        self.confirm = confirm
        do {
            answers = try Inbox()
        } catch {
            connection.close()
            throw .tls(error)
        }
        drive(deadline: deadline, timeout: timeout, onPeerStarted: onPeerStarted)
        let result = outcome!
        switch result {
        case .success, .failure(.refusedHere), .failure(.refusedByPeer):
            connection.closeGracefully(timeout: Self.closingTimeout)
        case .failure:
            connection.close()
        }
        return try result.get()
    }

    // MARK: Before the attempt

    /// What `awaitFirstMessage()` found.
    public enum FirstMessage: Sendable, Equatable {
        /// Not yet: poll the connection for these events (POLLIN or POLLOUT), then ask again.
        case pending(events: Int16)
        /// The peer's first message is here and is the one expected: `run` takes it from there.
        case arrived
        /// The connection ended, or the peer sent something other than the message expected first.
        case failed(PairingError)
    }

    /// Starts the attempt without waiting for anything: the responder sends its commitment (the initiator
    /// sends nothing first). For a listener that keeps several pairing connections open until one of them
    /// answers (`awaitFirstMessage()`), so that one which never does holds up nobody (fourth hostile tester of
    /// 2026-11-25: a stranger that completed TLS and then said nothing took a `pair --listen` run's only
    /// attempt until its timeout). Throws if the commitment could not be sent within `timeout`.
    public func begin(timeout: Duration) throws(PairingError) {
        precondition(!started && !begun, "a Pairing begins once, before it runs")
        begun = true
        perform(machine.start(), deadline: .now + timeout)
        if case .failure(let error) = outcome {
            connection.close()
            throw error
        }
    }

    /// After `begin`: reads what the peer sent, without blocking, until its first message is complete. The
    /// message must be the one the attempt expects next (the initiator's nonce); nothing else is acted upon.
    /// The connection stays open whatever the answer; a caller that gives up on it closes it.
    public func awaitFirstMessage() -> FirstMessage {
        precondition(begun && !started, "awaitFirstMessage runs between begin and run")
        if firstMessage != nil { return .arrived }
        var buffer = [UInt8](repeating: 0, count: 512)
        while true {
            do {
                if let frame = try decoder.next() {
                    let message = try Message.decode(frame)
                    var trial = machine  // a value: what the message would do, without doing it
                    for action in trial.received(message) {
                        if case .abort(let error) = action { return .failed(error) }
                    }
                    firstMessage = message
                    return .arrived
                }
            } catch {
                return .failed(.wire(error))
            }
            let result: TLSConnection.IOResult
            do {
                result = try connection.read(into: &buffer)
            } catch {
                return .failed(.connectionLost)
            }
            switch result {
            case .bytes(let count): decoder.append(buffer[0..<count])
            case .wantRead: return .pending(events: Int16(POLLIN))
            case .wantWrite: return .pending(events: Int16(POLLOUT))
            case .closed: return .failed(.connectionLost)
            }
        }
    }

    // MARK: The loop

    private func drive(deadline: ContinuousClock.Instant, timeout: Duration, onPeerStarted: (() -> Void)?) {
        var onPeerStarted = onPeerStarted
        var buffer = [UInt8](repeating: 0, count: 4096)
        var readNeedsWritable = false
        if !begun { perform(machine.start(), deadline: deadline) }
        if let message = firstMessage, outcome == nil {
            firstMessage = nil
            onPeerStarted?()
            onPeerStarted = nil
            perform(machine.received(message), deadline: deadline)
        }
        while outcome == nil {
            // Everything readable now, including records OpenSSL already decrypted (poll cannot see them).
            reading: while outcome == nil {
                let result: TLSConnection.IOResult
                do {
                    result = try connection.read(into: &buffer)
                } catch {
                    perform(machine.connectionEnded(), deadline: deadline)
                    break reading
                }
                switch result {
                case .bytes(let count):
                    decoder.append(buffer[0..<count])
                    do {
                        while outcome == nil, let frame = try decoder.next() {
                            if let started = onPeerStarted {
                                onPeerStarted = nil
                                started()
                            }
                            perform(machine.received(try Message.decode(frame)), deadline: deadline)
                        }
                    } catch {
                        perform(machine.connectionEnded(.wire(error)), deadline: deadline)
                    }
                case .wantRead:
                    readNeedsWritable = false
                    break reading
                case .wantWrite:
                    readNeedsWritable = true
                    break reading
                case .closed:
                    perform(machine.connectionEnded(), deadline: deadline)
                }
            }
            guard outcome == nil, let answers else { break }
            if let answer = answers.take().last {
                perform(machine.userAnswered(answer), deadline: deadline)
                continue
            }
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else {
                perform(machine.timedOut(after: timeout), deadline: deadline)
                break
            }
            var entries = [
                pollfd(
                    fd: connection.fileDescriptor, events: Int16(readNeedsWritable ? POLLOUT : POLLIN), revents: 0),
                pollfd(fd: answers.readDescriptor, events: Int16(POLLIN), revents: 0),
            ]
            let status = poll(&entries, 2, pollMilliseconds(until: deadline))
            if status < 0 && errno != EINTR {
                perform(machine.connectionEnded(), deadline: deadline)
            }
        }
    }

    private func perform(_ actions: [PairingAction], deadline: ContinuousClock.Instant) {
        for (index, action) in actions.enumerated() where outcome == nil {
            switch action {
            case .send(let message):
                do {
                    let left = max(.zero, ContinuousClock.now.duration(to: deadline))
                    try connection.writeAll(message.encode(), timeout: left)
                } catch {
                    // Our answer did not reach the peer: it will not trust us, so neither do we. A refusal
                    // that was on its way out is still reported as the refusal.
                    let refusal = actions[(index + 1)...].lazy.compactMap { action -> PairingError? in
                        if case .abort(let error) = action { return error }
                        return nil
                    }.first
                    outcome = .failure(refusal ?? .connectionLost)
                    return
                }
            case .confirm(let code):
                let prompt = PairingPrompt(code: code, peer: peer, peerName: peerName)
                let (box, confirm) = (answers!, confirm!)
                let thread = Thread { box.post(confirm(prompt)) }
                thread.name = "plait-pair-confirm"
                thread.start()
            case .trustPeer:
                outcome = .success(PairingPrompt(code: machine.code!, peer: peer, peerName: peerName))
            case .abort(let error):
                outcome = .failure(error)
            }
        }
    }

    /// A name a device chose for itself, safe to print and store: control and format characters
    /// (terminal escapes, bidirectional overrides) dropped, whitespace trimmed, at most 64 characters of at most
    /// `scalarsPerCharacter` code points each. A character is what the eye sees: "Z" and 3,000 combining accents
    /// are one, and were stored whole, 6,001 bytes (third hostile tester of 2026-11-25). 16 code points keep a
    /// letter with its accents, a flag, a keycap or a skin tone whole (joiners are format characters, dropped).
    public static func displayable(_ claimed: String) -> String {
        let kept = claimed.unicodeScalars.filter { scalar in
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate, .privateUse, .unassigned:
                return false
            default:
                return true
            }
        }
        let trimmed = String(String.UnicodeScalarView(kept)).trimmingCharacters(in: .whitespaces)
        var name = String.UnicodeScalarView()
        for character in trimmed.prefix(64) { name.append(contentsOf: character.unicodeScalars.prefix(scalarsPerCharacter)) }
        return String(name)
    }

    /// The most code points of one character a displayable name keeps.
    public static let scalarsPerCharacter = 16
}
