import Foundation
import PlaitCore
import PlaitSession
import PlaitStore
@testable import PlaitSync
import PlaitTLS
import PlaitTestSupport
import PlaitWire
import Testing

/// The receiving side of a succession statement (PROTOCOL.md §21) against real stores, and the session's
/// handling of Hello field 15.
@Suite struct SuccessionReceiverTests {
    /// B trusts A as "laptop" at a remembered address; `fresh` is a new identity for A.
    func setUp(_ directory: TemporaryDirectory) throws -> (a: Home, b: Home, fresh: Identity) {
        let a = try Home.create(at: directory.file("a"), name: "a", config: Config())
        let b = try Home.create(at: directory.file("b"), name: "b", config: Config())
        _ = try b.trust(a.identity.deviceID.description, address: "192.0.2.7:7400", name: "laptop")
        try FileManager.default.createDirectory(atPath: directory.file("fresh"), withIntermediateDirectories: false)
        return (a, b, try Identity.create(directory: directory.file("fresh"), commonName: "a"))
    }

    /// A statement signed by both keys, as `rejoin --new-key` writes it.
    func statement(old: Identity, new: Identity) throws -> SuccessionStatement {
        let (bytes, signature, newSignature) = try Succession.sign(old: old, new: new, issuedAt: 1)
        return SuccessionStatement(statement: bytes, signature: signature, newSignature: newSignature)
    }

    @Test func aVerifiedStatementTrustsTheNewIDUnderTheOldNameAndKeepsTheOld() throws {
        try withTemporaryDirectory { directory in
            let (a, b, fresh) = try setUp(directory)
            let (old, new) = (try a.identity.deviceID.description, fresh.deviceID.description)
            try b.store.recordPending(deviceID: new, claimedName: "x", address: nil, now: 1)
            let told = try statement(old: a.identity, new: fresh)
            let outcome = b.acceptSuccession(told, connectionCertificate: try a.identity.certificateDER)
            #expect(outcome.refusal == nil)
            #expect(outcome.accepted?.new == new && outcome.accepted?.name == "laptop")
            let rows = try b.store.peers()
            #expect(rows.count == 2)
            let newRow = rows.first { $0.deviceID == new }
            #expect(newRow?.name == "laptop" && newRow?.address == "192.0.2.7:7400" && newRow?.succeededBy == nil)
            #expect(rows.first { $0.deviceID == old }?.succeededBy == new)
            #expect(try b.store.isTrusted(deviceID: old), "the other copy still uses the old ID")
            #expect(try b.store.pendingPeers().isEmpty, "the new ID is no longer a pending stranger")
            // The agent lists a refused device from another thread: a refusal of the new ID recorded only now
            // (after the statement was taken) does not list a trusted device as pending.
            try b.store.recordPending(deviceID: new, claimedName: "x", address: nil, now: 2)
            #expect(try b.store.pendingPeers().isEmpty, "a trusted device is never pending")
            // Told again (the sender did not record it the first time): nothing more changes.
            #expect(b.acceptSuccession(told, connectionCertificate: try a.identity.certificateDER).refusal == nil)
            #expect(try b.store.peers() == rows)
        }
    }

    @Test func refusedStatementsChangeNothing() throws {
        try withTemporaryDirectory { directory in
            let (a, b, fresh) = try setUp(directory)
            let c = try Home.create(at: directory.file("c"), name: "c", config: Config())
            let before = try b.store.peers()
            let cases: [(String, SuccessionStatement, [UInt8]?, String)] = [
                (
                    "naming this very device", try statement(old: a.identity, new: try b.identity),
                    try a.identity.certificateDER, "this very device"
                ),
                (
                    "from a device not paired here", try statement(old: c.identity, new: fresh),
                    try c.identity.certificateDER, "not paired here"
                ),
                (
                    "on another device's connection", try statement(old: a.identity, new: fresh),
                    try c.identity.certificateDER, "not the certificate this connection"
                ),
                (
                    "without a certificate", try statement(old: a.identity, new: fresh), nil,
                    "no certificate"
                ),
            ]
            for (label, told, certificate, reason) in cases {
                let outcome = b.acceptSuccession(told, connectionCertificate: certificate)
                #expect(outcome.accepted == nil, "\(label)")
                #expect(outcome.refusal?.contains(reason) == true, "\(label): \(String(describing: outcome.refusal))")
                #expect(try b.store.peers() == before, "\(label)")
            }
        }
    }

    /// The hostile tester's finding (2026-11-25): a paired device signed, with its own key only, a statement naming
    /// another paired device's certificate as its successor, and B marked it "succeeded by" that device. The new
    /// key must sign too (check 6): without its signature, or with one by any other key, nothing changes.
    @Test func aStatementNamingAnotherPairedDeviceWithoutItsKeyIsRefused() throws {
        try withTemporaryDirectory { directory in
            let (a, b, _) = try setUp(directory)
            let c = try Home.create(at: directory.file("c"), name: "c", config: Config())
            _ = try b.trust(c.identity.deviceID.description, address: "192.0.2.9:7400", name: "phone")
            let before = try b.store.peers()
            let (bytes, signature) = try Succession.sign(
                old: a.identity, newCertificate: try c.identity.certificateDER, issuedAt: 1)
            let cases: [(String, [UInt8], String)] = [
                ("signed by the old key only", [], "not signed by its new certificate's key"),
                (
                    "with a new signature by the old key", try Succession.newSignature(over: bytes, by: a.identity),
                    "new signature does not verify"
                ),
                ("with the old signature twice", signature, "new signature does not verify"),
            ]
            for (label, newSignature, reason) in cases {
                let told = SuccessionStatement(statement: bytes, signature: signature, newSignature: newSignature)
                let outcome = b.acceptSuccession(told, connectionCertificate: try a.identity.certificateDER)
                #expect(outcome.accepted == nil, "\(label)")
                #expect(outcome.refusal?.contains(reason) == true, "\(label): \(String(describing: outcome.refusal))")
                #expect(try b.store.peers() == before, "\(label): no \"succeeded by\" mark, no new trust")
            }
        }
    }

    /// The tester's second case: the user unpaired D, and a paired device's statement naming D's certificate made
    /// B trust D again. A statement naming a device unpaired here is refused even when D's key signed it (D may
    /// collude, or be the hostile device's own); pairing D again clears the mark.
    @Test func aStatementNamingADeviceUnpairedHereIsRefusedUntilItIsPairedAgain() throws {
        try withTemporaryDirectory { directory in
            let (a, b, _) = try setUp(directory)
            let d = try Home.create(at: directory.file("d"), name: "d", config: Config())
            let dID = try d.identity.deviceID.description
            _ = try b.trust(dID, address: "192.0.2.11:7400", name: "old tablet")
            _ = try b.untrust(dID)
            #expect(try b.store.unpairedDevices() == [dID])
            let before = try b.store.peers()
            let told = try statement(old: a.identity, new: try d.identity)
            let outcome = b.acceptSuccession(told, connectionCertificate: try a.identity.certificateDER)
            #expect(outcome.accepted == nil)
            #expect(outcome.refusal?.contains("was unpaired here") == true, "\(String(describing: outcome.refusal))")
            #expect(try b.store.peers() == before, "D is not trusted again, A is not marked")
            #expect(try !b.store.isTrusted(deviceID: dID))

            // Pairing D again is the user's decision: the mark goes, and the same statement is then taken.
            _ = try b.trust(dID, address: nil, name: "tablet")
            #expect(try b.store.unpairedDevices().isEmpty)
            let again = b.acceptSuccession(told, connectionCertificate: try a.identity.certificateDER)
            #expect(again.refusal == nil && again.accepted?.new == dID)
            #expect(try b.store.peers().first { $0.deviceID == dID }?.name == "tablet", "its row is left as it is")
        }
    }

    /// A Hello carrying a statement: the owner's check runs before the greeting; a refusal ends the session with
    /// a Close that names it, and nothing else is exchanged.
    @Test func aRefusedStatementClosesTheSessionBeforeAnythingIsExchanged() throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: 0x5CC_0001)
            let device = try Device("d", in: directory, timeline: TimelineID(rng.next()))
            let told = SuccessionStatement(
                statement: [1, 2, 3], signature: Array(repeating: 5, count: 64), newSignature: [])
            var hello = rawHello()
            if case .hello(var inner) = hello {
                inner.succession = told
                hello = .hello(inner)
            }
            let checked = Counter()
            var options = SessionOptions()
            options.onSuccession = { statement in
                checked.add(statement == told ? 1 : 100)
                return "its signature does not verify"
            }
            let (error, seen) = try sessionAgainstRawPeer(device, options: options) { peer in try peer.send(hello) }
            guard case .successionRefused = error else {
                Issue.record("expected a refused succession, got \(error)")
                return
            }
            #expect(checked.wait(for: 1, seconds: 1))
            #expect(seen.count == 2, "Hello, then Close: \(seen.map(\.type))")
            guard case let .close(reason)? = seen.last else {
                Issue.record("the peer was not told: \(seen)")
                return
            }
            #expect(reason.contains("succession statement was refused (its signature does not verify)"), "\(reason)")
            // With no check at all the statement is refused too, never taken silently.
            let (unchecked, _) = try sessionAgainstRawPeer(device, options: SessionOptions()) { peer in
                try peer.send(hello)
            }
            guard case .successionRefused = unchecked else {
                Issue.record("expected a refused succession without a handler, got \(unchecked)")
                return
            }
        }
    }
}

/// The sending side's store: the timeline `rejoin --new-key` begins is the new key's.
@Suite struct RejoinWithNewKeyTests {
    /// `rejoin --new-key` writes a statement both keys signed; a `succession.bin` from before (the old key's
    /// signature only, which receivers now refuse) is made again when read, naming this home's certificate and
    /// signed by both keys, whatever certificate the old file named.
    @Test func theStatementIsSignedByBothKeysAndAnOlderFileIsSignedAgain() throws {
        try withTemporaryDirectory { directory in
            let home = try Home.create(at: directory.file("a"), name: "a", config: Config())
            let peer = try Home.create(at: directory.file("b"), name: "b", config: Config())
            let peerID = try peer.identity.deviceID.description
            _ = try home.trust(peerID, address: "192.0.2.7:7400", name: "b")
            let rekeyed = try home.rejoinWithNewKey(now: 1_234)
            let retired = try Identity.load(directory: rekeyed.retiredPath)
            let current = try home.identity
            func check(_ credentials: SuccessionCredentials?) throws {
                let told = try #require(credentials)
                #expect(told.identity.certificateDER == retired.certificateDER)
                let succession = try Succession.verify(
                    statement: told.statement.statement, signature: told.statement.signature,
                    newSignature: told.statement.newSignature, connectionCertificate: retired.certificateDER)
                #expect(succession.newCertificate == current.certificateDER && succession.issuedAt == 1_234)
            }
            try check(home.successionCredentials(for: peerID))

            let file = rekeyed.retiredPath + "/" + Home.successionFileName
            let (older, signature) = try Succession.sign(
                old: retired, newCertificate: try peer.identity.certificateDER, issuedAt: 1_234)
            try Data(older + signature).write(to: URL(fileURLWithPath: file))
            try check(home.successionCredentials(for: peerID))
            let rewritten = try Data(contentsOf: URL(fileURLWithPath: file))
            #expect(Home.singlySigned(Array(rewritten)) == nil, "the file now holds both signatures")
            #expect(Home.singlySigned(older + signature) != nil)
        }
    }

    /// A `Home` that signed before its key was replaced keeps no signer of the old key: the new timeline's begin
    /// carries the new certificate (a peer would otherwise take the new timeline as the retired key's), and the
    /// next edit goes on that timeline.
    @Test func theNewTimelineIsTheNewKeysEvenWhenTheOldKeySignedBefore() throws {
        try withTemporaryDirectory { directory in
            let home = try Home.create(at: directory.file("a"), name: "a", config: Config())
            let oldCertificate = try home.identity.certificateDER
            // An edit loads the signer (the old key) into the replica.
            _ = try home.replica.edit { edit in
                try edit.append(.listCreate(id: .random(), title: "before", color: nil, at: .bottom))
            }
            let rekeyed = try home.rejoinWithNewKey()
            let newCertificate = try Identity.load(directory: home.path).certificateDER
            #expect(newCertificate != oldCertificate)
            #expect(try home.identity.certificateDER == newCertificate)
            #expect(try home.store.certificate(of: rekeyed.newTimeline) == newCertificate, "the begin's certificate")
            #expect(try home.store.certificate(of: rekeyed.oldTimeline) == oldCertificate)
            _ = try home.replica.edit { edit in
                try edit.append(.listCreate(id: .random(), title: "after", color: nil, at: .bottom))
            }
            #expect(try home.store.certificate(of: rekeyed.newTimeline) == newCertificate)
            #expect(try home.store.ownTimeline() == rekeyed.newTimeline, "not moved onto yet another timeline")
        }
    }

    /// The old timeline's end is signed by the old key: a peer verifies every change of that timeline under the
    /// old certificate, and the new key's begin may not supersede it (PROTOCOL.md §20.5). Before, the end was
    /// signed by the new key and every peer refused it ("the signature … does not verify").
    @Test func theOldTimelineEndsWithTheOldKeysSignatureEverywhere() throws {
        try withTemporaryDirectory { directory in
            let home = try Home.create(at: directory.file("a"), name: "a", config: Config())
            _ = try home.replica.edit { edit in
                try edit.append(.listCreate(id: .random(), title: "before", color: nil, at: .bottom))
            }
            let rekeyed = try home.rejoinWithNewKey()
            #expect(rekeyed.endedOldTimeline)
            let peer = try Device("peer", in: directory, timeline: .random())
            let result = try peer.replica.integrate(encoded: try home.store.encodedChangesInReplayOrder())
            #expect(result.refused.isEmpty, "\(result.refused)")
            #expect(try peer.summary == home.store.summary())
            let old = try peer.store.changes(of: rekeyed.oldTimeline, from: 1, limit: .max)
            #expect(old.last?.kind == Change.timelineEndKind)
            #expect(hex(peer.digest) == hex(home.replica.digest))
        }
    }
}
