import PlaitCore
@testable import PlaitSync
@testable import PlaitPairing
import PlaitTLS
import PlaitWire
import Testing

/// The pairing protocol as a value: every path with plain messages, no sockets.
@Suite struct PairingMachineTests {
    static let certR = Array("certificate of R".utf8)
    static let certI = Array("certificate of I".utf8)
    static let nonceR = [UInt8](repeating: 1, count: 32)
    static let nonceI = [UInt8](repeating: 2, count: 32)

    func responder(nonce: [UInt8] = nonceR) -> PairingMachine {
        PairingMachine(role: .responder, ownCertificate: Self.certR, peerCertificate: Self.certI, nonce: nonce)
    }

    func initiator(nonce: [UInt8] = nonceI) -> PairingMachine {
        PairingMachine(role: .initiator, ownCertificate: Self.certI, peerCertificate: Self.certR, nonce: nonce)
    }

    /// The messages among `actions`.
    func sent(_ actions: [PairingAction]) -> [Message] {
        actions.compactMap { if case .send(let message) = $0 { return message } else { return nil } }
    }

    func code(_ actions: [PairingAction]) -> PairingCode? {
        actions.lazy.compactMap { if case .confirm(let code) = $0 { return code } else { return nil } }.first
    }

    func trusts(_ actions: [PairingAction]) -> Bool { actions.contains(.trustPeer) }

    /// Runs steps 1-4 between the two; returns both codes.
    func exchangeNonces(_ r: inout PairingMachine, _ i: inout PairingMachine) -> (PairingCode?, PairingCode?) {
        #expect(i.start().isEmpty, "the initiator sends nothing before the commitment arrived")
        let commit = sent(r.start())
        #expect(commit.count == 1)
        let nonce = sent(i.received(commit[0]))
        #expect(nonce == [.pairNonce(nonce: Self.nonceI)])
        let revealActions = r.received(nonce[0])
        #expect(sent(revealActions) == [.pairReveal(nonce: Self.nonceR)])
        let confirmActions = i.received(sent(revealActions)[0])
        return (code(revealActions), code(confirmActions))
    }

    @Test func commitmentAndCodeFollowTheDesignByteForByte() {
        // Computed independently (Python hashlib) from the formulas of DESIGN §4.
        let commitment = PairingMachine.commitment(
            responderCertificate: Self.certR, initiatorCertificate: Self.certI, responderNonce: Self.nonceR)
        #expect(commitment.hexString == "d7433944da6ba46a1c2ea9da1d10dca134853b84259d21639ea3bf46a8181294")
        let code = PairingMachine.code(
            initiatorCertificate: Self.certI, responderCertificate: Self.certR, initiatorNonce: Self.nonceI,
            responderNonce: Self.nonceR)
        // First 8 bytes ab9e2fee0cd0a460 = 12366107035113186400, mod 10^6.
        #expect(code.value == 682_784)
        #expect(code.description == "682 784")
        var r = responder()
        #expect(sent(r.start()) == [.pairCommit(commitment: commitment)])
    }

    @Test func codesKeepLeadingZerosInTwoGroups() {
        #expect(PairingCode(value: 42_917).description == "042 917")
        #expect(PairingCode(value: 0).description == "000 000")
        #expect(PairingCode(value: 999_999).description == "999 999")
    }

    @Test(arguments: [true, false])
    func bothSidesShowTheSameCodeAndTrustEachOtherOnceBothSaidYes(responderAnswersFirst: Bool) {
        var r = responder()
        var i = initiator()
        let (codeR, codeI) = exchangeNonces(&r, &i)
        #expect(codeR != nil && codeR == codeI)
        #expect(r.peer == DeviceID(certificateDER: Self.certI))
        #expect(i.peer == DeviceID(certificateDER: Self.certR))
        var (first, second) = responderAnswersFirst ? (r, i) : (i, r)
        let firstYes = first.userAnswered(true)
        #expect(sent(firstYes) == [.pairConfirm(accepted: true)])
        #expect(!trusts(firstYes), "its own yes is not enough")
        #expect(!trusts(second.received(sent(firstYes)[0])), "the other's yes is not enough either")
        #expect(!second.isTrusted)
        let secondYes = second.userAnswered(true)
        #expect(sent(secondYes) == [.pairConfirm(accepted: true)])
        #expect(trusts(secondYes), "its own yes after the other's yes")
        #expect(first.received(sent(secondYes)[0]) == [.trustPeer])
        #expect(first.isTrusted && second.isTrusted)
        #expect(first.code == codeR && second.code == codeR, "the code is kept after the attempt")
    }

    @Test func differentNoncesGiveDifferentCodes() {
        var r = responder()
        var i = initiator()
        let (code1, _) = exchangeNonces(&r, &i)
        var r2 = responder(nonce: [UInt8](repeating: 3, count: 32))
        var i2 = initiator()
        _ = i2.start()
        let commit = sent(r2.start())[0]
        let nonce = sent(i2.received(commit))[0]
        #expect(code(r2.received(nonce)) != code1)
    }

    @Test func aRevealThatDoesNotMatchTheCommitmentAbortsBeforeAnyCode() {
        var r = responder()
        var i = initiator()
        _ = i.start()
        let commit = sent(r.start())[0]
        _ = i.received(commit)
        // A device in the middle picks Nr only after seeing Ni: it cannot match the commitment.
        let actions = i.received(.pairReveal(nonce: [UInt8](repeating: 9, count: 32)))
        #expect(actions == [.abort(.commitmentMismatch)])
        #expect(i.code == nil && i.failure == .commitmentMismatch)
        #expect(i.userAnswered(true).isEmpty && !i.isTrusted)
    }

    @Test func aNonceBeforeTheCommitmentIsRefused() {
        // The responder has not committed yet: a nonce now would let it choose Nr knowing Ni.
        var r = responder()
        guard case .abort(.protocolViolation(let why))? = r.received(.pairNonce(nonce: Self.nonceI)).first else {
            Issue.record("the responder must refuse a nonce before it committed")
            return
        }
        #expect(why.contains("PairNonce"))
        #expect(r.start().isEmpty, "and there is no second attempt on this connection")
        // The initiator refuses anything but the commitment first, and sends its nonce only after it.
        for early in [Message.pairNonce(nonce: Self.nonceR), .pairReveal(nonce: Self.nonceR), .pairConfirm(accepted: true)] {
            var i = initiator()
            #expect(i.start().isEmpty)
            guard case .abort(.protocolViolation)? = i.received(early).first else {
                Issue.record("the initiator must refuse \(early.type) before the commitment")
                continue
            }
            #expect(i.isFinished && !i.isTrusted)
        }
    }

    @Test func outOfOrderAndForeignMessagesAbort() {
        var r = responder()
        _ = r.start()
        #expect(r.received(.ping(nonce: 1)).first.map { if case .abort = $0 { true } else { false } } == true)
        var i = initiator()
        _ = i.start()
        _ = i.received(.pairCommit(commitment: [UInt8](repeating: 0, count: 32)))
        // A second commitment is a second attempt: refused.
        guard case .abort(.protocolViolation)? = i.received(.pairCommit(commitment: [UInt8](repeating: 1, count: 32))).first
        else {
            Issue.record("a second commitment must abort")
            return
        }
        // A confirmation before the code exists is out of turn too.
        var r2 = responder()
        _ = r2.start()
        guard case .abort(.protocolViolation)? = r2.received(.pairConfirm(accepted: true)).first else {
            Issue.record("a confirmation before the nonces must abort")
            return
        }
    }

    @Test(arguments: [true, false])
    func aRefusalOnEitherSideTrustsNothingAnywhere(responderRefuses: Bool) {
        var r = responder()
        var i = initiator()
        _ = exchangeNonces(&r, &i)
        var (refuser, other) = responderRefuses ? (r, i) : (i, r)
        // The other user already said yes: still nothing is trusted.
        let yes = other.userAnswered(true)
        _ = refuser.received(sent(yes)[0])
        let no = refuser.userAnswered(false)
        #expect(no == [.send(.pairConfirm(accepted: false)), .abort(.refusedHere)])
        #expect(other.received(sent(no)[0]) == [.abort(.refusedByPeer)])
        #expect(!refuser.isTrusted && !other.isTrusted)
        #expect(refuser.failure == .refusedHere && other.failure == .refusedByPeer)
        // Nothing afterwards changes that.
        #expect(refuser.userAnswered(true).isEmpty)
        #expect(other.received(.pairConfirm(accepted: true)).isEmpty)
        #expect(!refuser.isTrusted && !other.isTrusted)
    }

    @Test func aRefusalThatArrivesBeforeThisUserAnsweredEndsTheAttempt() {
        var r = responder()
        var i = initiator()
        _ = exchangeNonces(&r, &i)
        #expect(r.received(.pairConfirm(accepted: false)) == [.abort(.refusedByPeer)])
        #expect(r.userAnswered(true).isEmpty, "a late yes changes nothing")
        #expect(!r.isTrusted)
    }

    @Test func oneAttemptPerConnection() {
        var r = responder()
        var i = initiator()
        _ = exchangeNonces(&r, &i)
        _ = r.received(sent(i.userAnswered(true))[0])
        _ = i.received(sent(r.userAnswered(true))[0])
        #expect(r.isTrusted && i.isTrusted)
        // Once over, a machine ignores everything: no second commitment, no second code.
        #expect(r.start().isEmpty)
        #expect(r.received(.pairNonce(nonce: Self.nonceI)).isEmpty)
        #expect(i.received(.pairCommit(commitment: [UInt8](repeating: 0, count: 32))).isEmpty)
        #expect(r.userAnswered(false).isEmpty && r.isTrusted)
        // And after a failure, likewise.
        var failed = responder()
        _ = failed.start()
        _ = failed.timedOut(after: .seconds(1))
        #expect(failed.received(.pairNonce(nonce: Self.nonceI)).isEmpty)
        #expect(failed.code == nil && failed.failure == .timedOut(after: .seconds(1)))
    }

    @Test func aDisconnectOrTimeoutAfterThePeersYesTrustsNothing() {
        var r = responder()
        var i = initiator()
        _ = exchangeNonces(&r, &i)
        _ = r.received(sent(i.userAnswered(true))[0])
        #expect(r.connectionEnded() == [.abort(.connectionLost)])
        #expect(r.userAnswered(true).isEmpty && !r.isTrusted)
        #expect(i.timedOut(after: .seconds(5)) == [.abort(.timedOut(after: .seconds(5)))])
        #expect(!i.isTrusted)
    }

    /// A connection closed before the code is the other side giving up on this connection (a listener pairing with
    /// a device that answered first closes the rest): said so, not "closed before both devices had answered".
    @Test func aCloseBeforeTheCodeIsToldApart() {
        var waiting = initiator()
        _ = waiting.start()
        #expect(waiting.connectionEnded() == [.abort(.closedBeforeCode)])
        var answered = initiator()
        _ = answered.start()
        _ = answered.received(.pairCommit(commitment: [UInt8](repeating: 7, count: 32)))
        #expect(answered.connectionEnded() == [.abort(.closedBeforeCode)], "the nonce sent, no reveal yet")
        #expect(PairingError.closedBeforeCode.description.contains("another device that answered first"))
    }

    @Test func pairingWithItselfIsRefused() {
        var machine = PairingMachine(
            role: .responder, ownCertificate: Self.certR, peerCertificate: Self.certR, nonce: Self.nonceR)
        #expect(machine.start() == [.abort(.ownDevice)])
    }

    @Test func noncesAreFreshAndFullSize() {
        let nonces = (0..<8).map { _ in PairingMachine.randomNonce() }
        #expect(nonces.allSatisfy { $0.count == 32 })
        #expect(Set(nonces).count == nonces.count)
    }

    @Test func aNameFromAPeersCertificateIsMadeSafeToPrint() {
        #expect(Pairing.displayable("laptop") == "laptop")
        #expect(Pairing.displayable("  l\u{1B}[2Jap\u{202E}top\n ") == "l[2Japtop")
        #expect(Pairing.displayable(String(repeating: "é", count: 100)).count == 64)
        #expect(Pairing.displayable("\u{7}\u{0}").isEmpty)
        // One character of 3,001 code points ("Z" and combining accents) is cut to a bounded size; a letter with
        // its accents, a flag, a keycap and a skin tone stay whole.
        let zalgo = Pairing.displayable("Z" + String(repeating: "\u{301}", count: 3_000))
        #expect(zalgo.unicodeScalars.count == Pairing.scalarsPerCharacter && zalgo.unicodeScalars.first == "Z")
        let long = Pairing.displayable(String(repeating: "Z" + String(repeating: "\u{301}", count: 50), count: 100))
        #expect(long.count == 64 && long.utf8.count <= 64 * (1 + 2 * (Pairing.scalarsPerCharacter - 1)))
        let marked = "Ngu\u{1EC5}n \u{1E69}\u{0323}\u{0307} \u{1F1EB}\u{1F1F7} 1\u{FE0F}\u{20E3} \u{1F44D}\u{1F3FD}"
        #expect(Pairing.displayable(marked) == marked)
    }
}
