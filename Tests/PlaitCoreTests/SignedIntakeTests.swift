import Synchronization
import Testing

@testable import PlaitCore

/// Signed timelines, `timeline.begin` and Lamport witnesses in the one intake (DESIGN §11), over plain values.
/// Signatures here are a test value (a keyed hash of the signed message), checked by a verifier that counts its
/// calls; the store's tests run the real ECDSA P-256.
@Suite struct SignedIntakeTests {
    /// "Signs" with SHA-256(certificate ‖ message) ‖ 32 zero bytes: valid only for that certificate and message.
    final class FakeVerifier: ChangeVerifier {
        let calls = Atomic<Int>(0)
        static func sign(_ hash: [UInt8], certificate: [UInt8]) -> [UInt8] {
            SHA256.hash(certificate + ChangeSignature.message(forChangeHash: hash)) + [UInt8](repeating: 0, count: 32)
        }
        func verify(signature: [UInt8], changeHash: [UInt8], certificate: [UInt8]) -> Bool {
            calls.add(1, ordering: .relaxed)
            return signature == Self.sign(changeHash, certificate: certificate)
        }
    }

    /// Authors one signed timeline: a begin, then changes; each change records its own signature.
    struct SignedAuthor {
        let certificate: [UInt8]
        let timeline: TimelineID
        var changes: [Change] = []
        var signatures: [UInt64: [UInt8]] = [:]

        init(_ name: String, nonce: UInt8 = 1, lamport: UInt64 = 1, witness: ChangeRef? = nil) {
            certificate = Array("certificate of \(name)".utf8)
            let begin = TimelineBegin(certificate: certificate, nonce: [UInt8](repeating: nonce, count: 16))
            timeline = begin.timelineID
            changes.append(Change(
                timeline: timeline, seq: 1, lamport: lamport, previousHash: Change.zeroHash, kind: TimelineBegin.kind,
                version: 1, wallTime: 0, payload: begin.payload, witness: witness))
            sign(1)
        }

        var last: Change { changes.last! }

        mutating func sign(_ seq: UInt64) {
            signatures[seq] = FakeVerifier.sign(changes[Int(seq) - 1].hash, certificate: certificate)
        }

        /// Appends an item create at `lamport` (default: the next), signed unless told otherwise.
        @discardableResult
        mutating func append(lamport: UInt64? = nil, witness: ChangeRef? = nil, signed: Bool = true) -> Change {
            let seq = last.seq + 1
            let change = Change(
                timeline: timeline, seq: seq, lamport: lamport ?? last.lamport + 1, previousHash: last.hash,
                kind: "item.create", version: 1, wallTime: 0,
                payload: ListsChange.itemCreate(
                    id: objectID(seq + 1000), list: objectID(1), text: "\(timeline) \(seq)", at: .bottom).payload,
                witness: witness)
            changes.append(change)
            if signed { sign(seq) }
            return change
        }

        /// The changes `range` as they travel, each with its signature if it has one.
        func encoded(_ range: ClosedRange<UInt64>? = nil, signatures override: [UInt64: [UInt8]]? = nil)
            -> [EncodedChange]
        {
            let wanted = range ?? 1...last.seq
            return changes.filter { wanted.contains($0.seq) }.map {
                EncodedChange($0, signature: (override ?? signatures)[$0.seq])
            }
        }
    }

    /// A receiver's holdings as values: heads (with certificates), hashes, Lamport times.
    struct Held {
        var heads: [TimelineID: HeldHead] = [:]
        var lamports: [ChangeRef: UInt64] = [:]
        var hashes: [ChangeRef: [UInt8]] = [:]

        mutating func store(_ result: Intake<ListsDomain>.Result) {
            for (timeline, head) in result.heads { heads[timeline] = head }
            for accepted in result.accepted {
                lamports[accepted.change.ref] = accepted.change.lamport
                hashes[accepted.change.ref] = accepted.hash
            }
        }

        func check(_ batch: [EncodedChange], _ intake: Intake<ListsDomain>) -> Intake<ListsDomain>.Result {
            intake.check(
                batch, head: { heads[$0] }, heldHash: { hashes[$0] },
                witness: { ref, lamport in lamports[ref] == lamport })
        }
    }

    static func intake(_ verifier: FakeVerifier = FakeVerifier()) -> Intake<ListsDomain> {
        Intake(domain: ListsDomain(), maxChangeBytes: 1 << 20, sha256: { SHA256.reference($0) }, verifier: verifier)
    }

    @Test func aSignedTimelineIsTakenWithItsVerifiedSignatureAndCertificate() {
        var author = SignedAuthor("A")
        author.append()
        author.append()
        let result = Held().check(author.encoded(), Self.intake())
        #expect(result.refused.isEmpty)
        #expect(result.accepted.map(\.change.seq) == [1, 2, 3])
        #expect(result.heads[author.timeline]?.certificate == author.certificate)
        // Only the signature that was checked is handed on to be stored.
        #expect(result.accepted.last?.signature == author.signatures[3])
    }

    @Test func aForgedChangeOnAnotherDevicesTimelineIsRefused() {
        var author = SignedAuthor("A")
        author.append()
        var held = Held()
        held.store(Held().check(author.encoded(), Self.intake()))
        // A peer appends to A's timeline and signs with its own key: the chain continues, the signature does not.
        var forged = author
        forged.append(signed: false)
        let forgedSignature = FakeVerifier.sign(forged.last.hash, certificate: Array("certificate of M".utf8))
        let result = held.check([EncodedChange(forged.last, signature: forgedSignature)], Self.intake())
        #expect(result.accepted.isEmpty)
        #expect(result.refused == [RefusedTimeline(timeline: author.timeline, refusal: .badSignature(seq: 3))])
    }

    @Test func aBeginWithSomeoneElsesCertificateIsRefused() {
        let victim = SignedAuthor("victim")
        // The attacker copies the victim's certificate into a begin under a timeline ID of its choosing…
        let begin = TimelineBegin(certificate: victim.certificate, nonce: [UInt8](repeating: 9, count: 16))
        let claimed = TimelineID(begin.timelineID.rawValue ^ 1)
        let change = Change(
            timeline: claimed, seq: 1, lamport: 1, previousHash: Change.zeroHash, kind: TimelineBegin.kind,
            version: 1, wallTime: 0, payload: begin.payload)
        let result = Held().check(
            [EncodedChange(change, signature: FakeVerifier.sign(change.hash, certificate: victim.certificate))],
            Self.intake())
        #expect(result.accepted.isEmpty)
        guard case .badBegin(1, _) = result.refused.first?.refusal else {
            Issue.record("expected badBegin, got \(result.refused)")
            return
        }
        // …or under the matching ID, signed with its own key instead of the victim's: the signature fails.
        let honestID = Change(
            timeline: begin.timelineID, seq: 1, lamport: 1, previousHash: Change.zeroHash, kind: TimelineBegin.kind,
            version: 1, wallTime: 0, payload: begin.payload)
        let second = Held().check(
            [EncodedChange(honestID, signature: FakeVerifier.sign(honestID.hash, certificate: Array("mine".utf8)))],
            Self.intake())
        #expect(second.accepted.isEmpty)
        #expect(second.refused.first?.refusal == .badSignature(seq: 1))
    }

    @Test func aBeginThatIsNotFirstIsRefused() {
        var author = SignedAuthor("A")
        author.append()
        let begin = TimelineBegin(certificate: author.certificate, nonce: [UInt8](repeating: 1, count: 16))
        let late = Change(
            timeline: author.timeline, seq: 3, lamport: 3, previousHash: author.last.hash, kind: TimelineBegin.kind,
            version: 1, wallTime: 0, payload: begin.payload)
        let batch = author.encoded() + [EncodedChange(late, signature: FakeVerifier.sign(late.hash, certificate: author.certificate))]
        let result = Held().check(batch, Self.intake())
        #expect(result.accepted.map(\.change.seq) == [1, 2])
        guard case .badBegin(3, _) = result.refused.first?.refusal else {
            Issue.record("expected badBegin at 3, got \(result.refused)")
            return
        }
    }

    /// A batch may end inside a signed timeline's run (pages are cut in replay order): the tail is held back,
    /// not stored, and taken with the next batch that brings its signature.
    @Test func anUnsignedTailIsHeldBackUntilItsSignatureArrives() {
        var author = SignedAuthor("A")
        author.append()
        author.append(signed: false)
        author.append(signed: false)
        author.append()
        var held = Held()
        let first = held.check(author.encoded(1...4), Self.intake())
        #expect(first.accepted.map(\.change.seq) == [1, 2])
        #expect(first.refused.isEmpty)
        #expect(first.heldBack.map(\.change.seq) == [3, 4])
        #expect(first.heads[author.timeline]?.seq == 2)
        held.store(first)
        let second = held.check(first.heldBack + author.encoded(5...5), Self.intake())
        #expect(second.accepted.map(\.change.seq) == [3, 4, 5])
        #expect(second.heldBack.isEmpty)
    }

    @Test func anUnsignedRunLongerThanTheSigningRuleIsRefused() {
        var author = SignedAuthor("A")
        for _ in 0..<1_001 { author.append(signed: false) }
        let result = Held().check(author.encoded(), Self.intake())
        #expect(result.accepted.map(\.change.seq) == [1])
        #expect(result.heldBack.isEmpty)
        #expect(result.refused == [RefusedTimeline(timeline: author.timeline, refusal: .unsigned(seq: 2))])
    }

    /// A's change names a witness on B that is held back (B's signature comes later): A's change waits with it,
    /// and A falls back to its last verified signature before it, so no stored head is unsigned.
    @Test func aChangeWhoseWitnessIsHeldBackWaitsWithIt() {
        var other = SignedAuthor("B")
        other.append(signed: false)  // B:2 at Lamport 2, signed only by B:3
        other.append()
        var author = SignedAuthor("A")
        author.append()  // A:2 at 2, signed
        author.append(lamport: 3, witness: ChangeRef(timeline: other.timeline, seq: 2), signed: false)
        author.append()  // A:4 signs A:3 too
        var held = Held()
        let first = held.check(author.encoded() + other.encoded(1...2), Self.intake())
        #expect(first.refused.isEmpty, "\(first.refused)")
        #expect(first.heads[author.timeline]?.seq == 2)
        #expect(first.heads[other.timeline]?.seq == 1)
        #expect(Set(first.heldBack.map(\.change.ref)) == Set([
            ChangeRef(timeline: author.timeline, seq: 3), ChangeRef(timeline: author.timeline, seq: 4),
            ChangeRef(timeline: other.timeline, seq: 2),
        ]))
        held.store(first)
        let second = held.check(first.heldBack + other.encoded(3...3), Self.intake())
        #expect(second.refused.isEmpty)
        #expect(second.heldBack.isEmpty)
        #expect(second.heads[author.timeline]?.seq == 4)
        #expect(second.heads[other.timeline]?.seq == 3)
    }

    @Test func aChangeIsNeverTakenWithoutAVerifier() {
        let author = SignedAuthor("A")
        let unverifying = Intake(domain: ListsDomain(), maxChangeBytes: 1 << 20, sha256: { SHA256.reference($0) })
        let result = Held().check(author.encoded(), unverifying)
        #expect(result.accepted.isEmpty)
        #expect(result.refused.first?.refusal == .badSignature(seq: 1))
    }

    /// A relay plants a bad signature on a change in the middle of an honest chain. The receiver does not need
    /// it (a later signature covers the change), so it neither stores it nor refuses the chain; a receiver that
    /// pulls from it later gets only verified signatures and takes the same chain.
    @Test func aPlantedBadSignatureIsNeitherStoredNorFatalToTheHonestChain() {
        var author = SignedAuthor("A")
        for _ in 0..<20 { author.append() }
        var planted = author.signatures
        planted[7] = [UInt8](repeating: 0xEE, count: 64)
        let relay = Self.intake()
        let first = Held().check(author.encoded(signatures: planted), relay)
        #expect(first.refused.isEmpty)
        #expect(first.accepted.count == 21)
        let stored = first.accepted.compactMap { $0.signature == nil ? nil : $0.change.seq }
        #expect(!stored.contains(7))
        #expect(stored == [21])
        // The relay forwards exactly what it stored.
        let forwarded = first.accepted.map { EncodedChange($0.change, signature: $0.signature) }
        let later = Held().check(forwarded, Self.intake())
        #expect(later.refused.isEmpty)
        #expect(later.accepted.count == 21)
    }

    @Test func signaturesAreVerifiedSparselyAboutOncePerThousandChanges() {
        var author = SignedAuthor("A")
        for _ in 0..<2_999 { author.append() }
        let verifier = FakeVerifier()
        let result = Held().check(author.encoded(), Self.intake(verifier))
        #expect(result.accepted.count == 3_000)
        let calls = verifier.calls.load(ordering: .relaxed)
        #expect(calls >= 3 && calls <= 4, "verified \(calls) signatures for 3,000 changes")
        // The verified ones are stored, no more than 1,000 changes apart.
        let stored = result.accepted.compactMap { $0.signature == nil ? nil : $0.change.seq }
        #expect(zip([0] + stored, stored).allSatisfy { $1 - $0 <= 1_000 })
        #expect(stored.last == 3_000)
    }

    @Test func aBadSignatureCutsBackToTheLastVerifiedOne() {
        var author = SignedAuthor("A")
        for _ in 0..<2_499 { author.append() }
        var bad = author.signatures
        bad[2_500] = [UInt8](repeating: 1, count: 64)
        let result = Held().check(author.encoded(signatures: bad), Self.intake())
        let taken = result.accepted.last?.change.seq ?? 0
        #expect(taken >= 1_000 && taken < 2_500)
        #expect(result.accepted.last?.signature != nil)
        #expect(result.refused == [RefusedTimeline(timeline: author.timeline, refusal: .badSignature(seq: 2_500))])
    }

    // MARK: Lamport witnesses

    @Test func aLamportJumpWithoutAWitnessIsRefused() {
        var author = SignedAuthor("A")
        author.append()
        author.append(lamport: 1_000)
        let result = Held().check(author.encoded(), Self.intake())
        #expect(result.accepted.map(\.change.seq) == [1, 2])
        #expect(result.refused.first?.refusal == .missingWitness(seq: 3, lamport: 1_000, previous: 2))
    }

    @Test func aJumpToTheCapIsRefusedWhateverWitnessItNames() {
        var author = SignedAuthor("A")
        author.append(lamport: Lamport.max, witness: ChangeRef(timeline: TimelineID(42), seq: 1))
        let result = Held().check(author.encoded(), Self.intake())
        #expect(result.accepted.map(\.change.seq) == [1])
        #expect(result.refused.first?.refusal
            == .witnessNotHeld(seq: 2, witness: ChangeRef(timeline: TimelineID(42), seq: 1), lamport: Lamport.max))
    }

    @Test func aWitnessHeldHereOrInTheSameBatchIsAccepted() {
        var other = SignedAuthor("B")
        for _ in 0..<9 { other.append() }  // B reaches Lamport 10
        var held = Held()
        held.store(Held().check(other.encoded(1...5), Self.intake()))  // B:5 at Lamport 5 is held
        var author = SignedAuthor("A")
        author.append(lamport: 6, witness: ChangeRef(timeline: other.timeline, seq: 5))  // witness held
        author.append(lamport: 11, witness: ChangeRef(timeline: other.timeline, seq: 10))  // witness in the batch
        let batch = author.encoded() + other.encoded(6...10)
        let result = held.check(batch, Self.intake())
        #expect(result.refused.isEmpty, "\(result.refused)")
        #expect(result.heads[author.timeline]?.seq == 3)
        // The witness must have exactly the Lamport time one below: B:9 is at 9, not 10.
        var wrong = SignedAuthor("C")
        wrong.append(lamport: 11, witness: ChangeRef(timeline: other.timeline, seq: 9))
        let refused = held.check(wrong.encoded() + other.encoded(6...10), Self.intake())
        #expect(refused.refused.map(\.timeline) == [wrong.timeline])
    }

    /// A witness whose own timeline is cut (here: its signature is bad) does not count, and the change naming it
    /// is refused too — whatever the batch order, every receiver judges the same.
    @Test func aCutWitnessTakesTheChangesNamingItWithIt() {
        var other = SignedAuthor("B")
        for _ in 0..<4 { other.append() }
        var bad = other.signatures
        bad[5] = [UInt8](repeating: 3, count: 64)
        var author = SignedAuthor("A")
        author.append(lamport: 6, witness: ChangeRef(timeline: other.timeline, seq: 5))
        let batch = author.encoded() + other.encoded(signatures: bad)
        var verdicts: [[TimelineID]] = []
        var generator = SplitMix64(seed: 7)
        for _ in 0..<4 {
            let result = Held().check(batch.shuffled(using: &generator), Self.intake())
            verdicts.append(result.refused.map(\.timeline).sorted())
            #expect(result.heads[author.timeline]?.seq == 1)
            #expect(result.heads[other.timeline] == nil)
        }
        #expect(Set(verdicts.map { $0.map(\.rawValue) }).count == 1)
        #expect(verdicts[0] == [author.timeline, other.timeline].sorted())
    }

    @Test func aWitnessFoldedIntoTheBaselineCounts() {
        var author = SignedAuthor("A")
        let folded = ChangeRef(timeline: TimelineID(77), seq: 40)
        author.append(lamport: 500, witness: folded)
        // The receiver's baseline covers B:40 and reaches Lamport 600.
        let result = Self.intake().check(
            author.encoded(), head: { _ in nil }, heldHash: { _ in nil },
            witness: { ref, lamport in ref == folded && lamport <= 600 })
        #expect(result.refused.isEmpty)
        #expect(result.accepted.count == 2)
    }

    @Test func aChangeBeyondTheSupersededHeadIsRefused() {
        var old = SignedAuthor("A", nonce: 1)
        old.append()
        var held = Held()
        held.store(Held().check(old.encoded(), Self.intake()))
        // A new timeline of the same key supersedes the old one at 2.
        let begin = TimelineBegin(
            certificate: old.certificate, nonce: [UInt8](repeating: 2, count: 16),
            supersedes: .init(timeline: old.timeline, seq: 2, hash: old.last.hash))
        let change = Change(
            timeline: begin.timelineID, seq: 1, lamport: 3, previousHash: Change.zeroHash, kind: TimelineBegin.kind,
            version: 1, wallTime: 0, payload: begin.payload, witness: old.last.ref)
        let result = held.check(
            [EncodedChange(change, signature: FakeVerifier.sign(change.hash, certificate: old.certificate))],
            Self.intake())
        #expect(result.superseded == [begin.supersedes!])
        held.store(result)
        held.heads[old.timeline]?.supersededAt = 2
        old.append()
        let after = held.check(old.encoded(3...3), Self.intake())
        #expect(after.refused.first?.refusal == .afterSuperseded(seq: 3, at: 2))
    }

    @Test func unsignedTimelinesOfProtocolOneAreTakenAsTheyAre() {
        let (a, _) = IntakeTests.twoTimelines()
        let result = Held().check(a.map { EncodedChange($0) }, Self.intake())
        #expect(result.refused.isEmpty)
        #expect(result.accepted.count == a.count)
        #expect(result.heads[a[0].timeline]?.certificate == nil)
    }
}
