import PlaitCore
import PlaitTLS
import PlaitWire

/// The six-digit number both users compare: the first 8 bytes of
/// SHA-256("plait-pair-code" ‖ certI ‖ certR ‖ Ni ‖ Nr), big-endian, modulo 10^6.
public struct PairingCode: Hashable, Sendable, CustomStringConvertible {
    /// 0 through 999,999.
    public let value: UInt32

    public init(value: UInt32) {
        precondition(value < 1_000_000, "a pairing code has six digits, not \(value)")
        self.value = value
    }

    /// Six digits in two groups of three, leading zeros kept: `042 917`.
    public var description: String {
        let digits = String(value)
        let padded = String(repeating: "0", count: 6 - digits.count) + digits
        return padded.prefix(3) + " " + padded.suffix(3)
    }
}

/// Which side of the pairing protocol a device plays. The TLS server is always the responder (R) and
/// the client the initiator (I), so neither side can pick the role that suits an attacker.
public enum PairingRole: Sendable, Equatable {
    /// The TLS server: commits to its nonce first, reveals it after the initiator's nonce arrived.
    case responder
    /// The TLS client: sends its nonce only once the responder's commitment arrived.
    case initiator
}

/// What the driver of a `PairingMachine` does next.
public enum PairingAction: Sendable, Equatable {
    /// Send this message to the peer.
    case send(Message)
    /// Show the code (and the peer's Device ID) to the user, ask whether both screens show the same
    /// code, and pass the answer to `userAnswered(_:)`. The peer's messages keep arriving meanwhile.
    case confirm(PairingCode)
    /// Both users said yes: trust the peer now. The attempt is over; close the connection.
    case trustPeer
    /// The attempt failed: close the connection and store nothing.
    case abort(PairingError)
}

/// The pairing protocol of one connection (DESIGN §4) as a value: messages and answers in, actions out.
/// No I/O, no clock, no randomness of its own (the nonce is given), so every path is a plain test.
///
/// The certificates are the two that the TLS handshake proved, never bytes from a message:
/// 1. R sends C = H("plait-pair-commit" ‖ certR ‖ certI ‖ Nr);
/// 2. only after C arrived, I sends Ni;
/// 3. R sends Nr, and I checks it against C;
/// 4. both show code = H("plait-pair-code" ‖ certI ‖ certR ‖ Ni ‖ Nr), first 8 bytes mod 10^6;
/// 5. each sends Confirm with its user's answer; each trusts the other only after its own user said
///    yes and the other's yes arrived.
///
/// One attempt: once it has trusted or aborted, it ignores everything. A message out of turn, a
/// commitment that does not match, a refusal, the end of the connection or a timeout abort it.
public struct PairingMachine: Sendable {
    /// The size of Nr and Ni.
    public static let nonceSize = 32

    public let role: PairingRole
    /// The certificates (DER) of the responder and the initiator, from the TLS handshake.
    public let responderCertificate: [UInt8]
    public let initiatorCertificate: [UInt8]
    /// The peer's Device ID: the hash of its certificate from the handshake.
    public let peer: DeviceID

    private let ownNonce: [UInt8]

    private enum Stage: Sendable {
        case notStarted
        /// Initiator: waiting for C.
        case awaitingCommitment
        /// Responder: C sent, waiting for Ni.
        case awaitingNonce
        /// Initiator: Ni sent, waiting for Nr, which must match `commitment`.
        case awaitingReveal(commitment: [UInt8])
        /// The code is shown; each answer is nil until it is given.
        case confirming(code: PairingCode, local: Bool?, peer: Bool?)
        case trusted
        case aborted(PairingError)
    }

    private var stage = Stage.notStarted

    /// A machine for one connection. `nonce` is this side's 32 random bytes (Nr or Ni), fresh from a
    /// CSPRNG for every connection (`PairingMachine.randomNonce()`); the certificates are the DER of
    /// this device's certificate and of the one the peer presented in the TLS handshake.
    public init(role: PairingRole, ownCertificate: [UInt8], peerCertificate: [UInt8], nonce: [UInt8]) {
        precondition(nonce.count == Self.nonceSize, "a pairing nonce is \(Self.nonceSize) bytes")
        self.role = role
        switch role {
        case .responder:
            responderCertificate = ownCertificate
            initiatorCertificate = peerCertificate
        case .initiator:
            responderCertificate = peerCertificate
            initiatorCertificate = ownCertificate
        }
        peer = DeviceID(certificateDER: peerCertificate)
        ownNonce = nonce
    }

    /// 32 bytes from the system's CSPRNG (getrandom(2) on Linux).
    public static func randomNonce() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        var bytes: [UInt8] = []
        bytes.reserveCapacity(nonceSize)
        while bytes.count < nonceSize {
            withUnsafeBytes(of: generator.next() as UInt64) { bytes.append(contentsOf: $0) }
        }
        return bytes
    }

    /// C = H("plait-pair-commit" ‖ certR ‖ certI ‖ Nr).
    public static func commitment(responderCertificate: [UInt8], initiatorCertificate: [UInt8], responderNonce: [UInt8])
        -> [UInt8]
    {
        var hash = SHA256()
        hash.update("plait-pair-commit")
        hash.update(responderCertificate)
        hash.update(initiatorCertificate)
        hash.update(responderNonce)
        return hash.finalize()
    }

    /// The first 8 bytes of H("plait-pair-code" ‖ certI ‖ certR ‖ Ni ‖ Nr), big-endian, mod 10^6.
    public static func code(
        initiatorCertificate: [UInt8], responderCertificate: [UInt8], initiatorNonce: [UInt8], responderNonce: [UInt8]
    ) -> PairingCode {
        var hash = SHA256()
        hash.update("plait-pair-code")
        hash.update(initiatorCertificate)
        hash.update(responderCertificate)
        hash.update(initiatorNonce)
        hash.update(responderNonce)
        let prefix = hash.finalize().prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return PairingCode(value: UInt32(prefix % 1_000_000))
    }

    /// The code, from the moment both nonces are known (nil before; kept after the attempt ends).
    public private(set) var code: PairingCode?

    /// Whether both users said yes: the peer may be trusted.
    public var isTrusted: Bool {
        if case .trusted = stage { return true }
        return false
    }

    /// Why the attempt failed, once it has.
    public var failure: PairingError? {
        if case .aborted(let error) = stage { return error }
        return nil
    }

    /// Whether the attempt is over (trusted or aborted).
    public var isFinished: Bool { isTrusted || failure != nil }

    // MARK: Inputs

    /// Starts the attempt once the TLS handshake is done: the responder sends its commitment, the
    /// initiator waits for it. Only the first call does anything.
    public mutating func start() -> [PairingAction] {
        guard case .notStarted = stage else { return [] }
        if responderCertificate == initiatorCertificate {
            return abort(.ownDevice)
        }
        switch role {
        case .responder:
            stage = .awaitingNonce
            let commitment = Self.commitment(
                responderCertificate: responderCertificate, initiatorCertificate: initiatorCertificate,
                responderNonce: ownNonce)
            return [.send(.pairCommit(commitment: commitment))]
        case .initiator:
            stage = .awaitingCommitment
            return []
        }
    }

    /// A message from the peer. Anything but the one message expected next aborts the attempt.
    public mutating func received(_ message: Message) -> [PairingAction] {
        switch (stage, message) {
        case (.trusted, _), (.aborted, _):
            return []
        case (.awaitingCommitment, .pairCommit(let commitment)):
            stage = .awaitingReveal(commitment: commitment)
            return [.send(.pairNonce(nonce: ownNonce))]
        case (.awaitingNonce, .pairNonce(let initiatorNonce)):
            let code = Self.code(
                initiatorCertificate: initiatorCertificate, responderCertificate: responderCertificate,
                initiatorNonce: initiatorNonce, responderNonce: ownNonce)
            self.code = code
            stage = .confirming(code: code, local: nil, peer: nil)
            return [.send(.pairReveal(nonce: ownNonce)), .confirm(code)]
        case (.awaitingReveal(let commitment), .pairReveal(let responderNonce)):
            let expected = Self.commitment(
                responderCertificate: responderCertificate, initiatorCertificate: initiatorCertificate,
                responderNonce: responderNonce)
            guard constantTimeEqual(expected, commitment) else { return abort(.commitmentMismatch) }
            let code = Self.code(
                initiatorCertificate: initiatorCertificate, responderCertificate: responderCertificate,
                initiatorNonce: ownNonce, responderNonce: responderNonce)
            self.code = code
            stage = .confirming(code: code, local: nil, peer: nil)
            return [.confirm(code)]
        case (.confirming(let code, let local, nil), .pairConfirm(let accepted)):
            guard accepted else { return abort(.refusedByPeer) }
            if local == true {
                stage = .trusted
                return [.trustPeer]
            }
            stage = .confirming(code: code, local: local, peer: true)
            return []
        default:
            return abort(.protocolViolation(unexpected(message)))
        }
    }

    /// This device's user answered the question about the code (any answer but yes is no). Ignored
    /// unless the code was being confirmed and this user had not answered yet.
    public mutating func userAnswered(_ accepted: Bool) -> [PairingAction] {
        guard case .confirming(let code, nil, let peer) = stage else { return [] }
        guard accepted else {
            stage = .aborted(.refusedHere)
            return [.send(.pairConfirm(accepted: false)), .abort(.refusedHere)]
        }
        if peer == true {
            stage = .trusted
            return [.send(.pairConfirm(accepted: true)), .trustPeer]
        }
        stage = .confirming(code: code, local: true, peer: peer)
        return [.send(.pairConfirm(accepted: true))]
    }

    /// The connection ended (closed by the peer, broken, or a message could not be read or sent) before
    /// the attempt finished: nothing is trusted. `reason` is what the driver saw, if anything.
    public mutating func connectionEnded(_ error: PairingError = .connectionLost) -> [PairingAction] {
        guard !isFinished else { return [] }
        // Before the code: the other side gave up on this connection (a listener pairing with another device that
        // answered first closes the rest), not a break in the middle of an attempt.
        if case .connectionLost = error, code == nil { return abort(.closedBeforeCode) }
        return abort(error)
    }

    /// The attempt ran out of time.
    public mutating func timedOut(after duration: Duration) -> [PairingAction] {
        guard !isFinished else { return [] }
        return abort(.timedOut(after: duration))
    }

    // MARK: Helpers

    private mutating func abort(_ error: PairingError) -> [PairingAction] {
        stage = .aborted(error)
        return [.abort(error)]
    }

    /// Why `message` is out of turn here, one phrase.
    private func unexpected(_ message: Message) -> String {
        let expected: String
        switch stage {
        case .notStarted: expected = "nothing before the attempt started"
        case .awaitingCommitment: expected = "the commitment (PairCommit) first"
        case .awaitingNonce: expected = "the initiator's nonce (PairNonce)"
        case .awaitingReveal: expected = "the responder's nonce (PairReveal)"
        case .confirming(_, _, let peer):
            expected = peer == nil ? "the other user's answer (PairConfirm)" : "nothing more from the other device"
        case .trusted, .aborted: expected = "nothing more"
        }
        return "it sent \(message.type) while this device (\(role == .responder ? "responder" : "initiator")) "
            + "expected \(expected)"
    }
}

/// Compares two byte strings in time that depends only on their lengths.
func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    var difference: UInt8 = 0
    for index in a.indices { difference |= a[index] ^ b[index] }
    return difference == 0
}
