import Foundation
import PlaitCore
import PlaitSession
import PlaitStore
import PlaitTLS

/// What one-shot sync with one peer did.
public struct PeerSyncOutcome: Sendable {
    public var address: PeerAddress
    /// The peer's Device ID as its certificate proved it (nil if the connection never got that far).
    public var deviceID: String?
    /// The name stored for it at pairing (its Hello's only where none is stored).
    public var name: String?
    public var result: SessionResult?
    /// Why it failed, one sentence; nil on success.
    public var failure: String?
    /// The session was made with a retired identity and the peer took this device's new Device ID from it
    /// (`plait rejoin --new-key`, PROTOCOL.md §21).
    public var toldSuccessor = false
    /// Notes of an earlier session with the same peer in the same sync (see `SyncCommand`).
    public var extraNotes: [String] = []

    /// What the session found wrong although it ran to the end, one sentence each (DESIGN §10): forks,
    /// refused changes, a divergence, a claim on this device's own timeline, damaged stored changes, changes sent
    /// that the peer's closing report shows it did not store.
    public var problems: [String] {
        guard let result else { return [] }
        var out = result.forkedTimelines.map { fork in
            fork.description + ". Two devices wrote different changes under the same numbers (a home copied with "
                + "cp or restored from a backup) on a timeline whose fork cannot be resolved by renaming (unsigned "
                + "history from before protocol 2, or a fork inside a baseline); plait reports it and cannot merge "
                + "it. On the copy, run `plait rejoin`: it re-sends that device's lists on a new timeline"
        }
        out += result.refusedTimelines.map {
            "changes of \($0.timeline) were refused: \($0.refusal); that timeline was not taken from this peer"
        }
        out += result.damagedChanges.map { ref in
            "stored change \(ref) of this device is damaged (its hash does not continue its chain): it was set aside "
                + "with the rest of its timeline, and is pulled again from any peer that holds it; `plait doctor` "
                + "says more"
        }
        out += result.oversizedChanges.map(\.description)
        out += result.untaken.map(\.description)
        out += result.deferred.map(\.description)
        if let claim = result.staleClaim { out.append(claim.description) }
        if let divergence = result.divergence { out.append(divergence.description) }
        return out
    }

    /// What the session found and set right, one sentence each: forks resolved by renaming (DESIGN §11).
    public var notes: [String] {
        // This device's own timeline beyond its head is the stale claim (a problem, above), never changes "made
        // there while it ran" (fifth hostile tester of 2026-11-25: both were printed).
        let claimed = result?.staleClaim?.timeline
        let ahead = (result?.peerAhead ?? []).filter { $0.timeline != claimed }.map {
            "\($0.timeline):\($0.held + 1)…\($0.peerHolds)"
        }
        let aheadNote = ahead.isEmpty ? [] : [
            "the peer's closing report holds changes this device lacks (\(ahead.joined(separator: ", "))) that were "
                + "not sent in this sync: made there while it ran, or held back by the peer; a further sync takes "
                + "what the peer sends"
        ]
        let all = (result?.keptAside.map { [$0] } ?? []) + extraNotes + aheadNote + (result?.forksResolved ?? []).map {
            "timeline \($0) had forked (a home copied or restored): both histories were exchanged; the branch with "
                + "the smallest hash keeps the name and every other is kept whole under a name of its own, so "
                + "nothing is lost (a copy whose branch lost goes on on a new timeline at its next edit)"
        }
        // Once each: a sync that runs a second session carries the first one's notes, and the second may find the
        // same fork again (bad-luck tester 2026-11-25, H14: a fork note printed twice).
        var seen: Set<String> = []
        return all.filter { seen.insert($0).inserted }
    }

    /// The session ran to the end and its only problems are timelines left for a further session (`deferred`):
    /// `plait sync` runs one at once.
    public var onlyDeferred: Bool {
        guard failure == nil, let result, !result.deferred.isEmpty else { return false }
        return problems.count == result.deferred.count
    }

    /// The session ran to the end and found nothing wrong.
    public var succeeded: Bool { failure == nil && problems.isEmpty }
}

extension Home {
    /// What `bringBackKeptAside` did, for the user.
    public struct KeptAsideOutcome: Sendable {
        public var brought = KeptAsideReturn()
        /// Why nothing was brought back although something could be, if so.
        public var failure: String?

        public init() {}

        /// One line for each of what was brought back and what could not be.
        public var notes: [String] {
            guard let failure else {
                guard !brought.shown.isEmpty else { return [] }
                return [
                    "made again, as new changes, \(Self.count(brought.shown)) that only changes of this device kept "
                        + "aside had made (a restored or copied home; `plait doctor` says more): "
                        + Self.names(brought.shown)
                ]
            }
            return [failure]
        }

        static func count(_ objects: [KeptAsideObject]) -> String {
            let items = objects.filter { $0.kind == .item }.count
            let lists = objects.count - items
            return [(items, "item"), (lists, "list")].filter { $0.0 > 0 }
                .map { "\($0.0) \($0.1)\($0.0 == 1 ? "" : "s")" }.joined(separator: " and ")
        }

        static func names(_ objects: [KeptAsideObject]) -> String {
            objects.prefix(5).map { "\($0.kind == .list ? "list " : "")'\($0.text.terminalExcerpt(limit: 40))'" }
                .joined(separator: ", ") + (objects.count > 5 ? " and \(objects.count - 5) more" : "")
        }
    }

    /// Makes again the items and lists that only kept-aside changes of this device created (`Replica.
    /// bringBackKeptAside`): after a sync adopted a baseline that kept them aside, after `repair` and `rejoin`. A
    /// failure is returned, not thrown: the sync that came before it stands.
    public func bringBackKeptAside() -> KeptAsideOutcome {
        var outcome = KeptAsideOutcome()
        do {
            outcome.brought = try replica.bringBackKeptAside()
        } catch {
            let waiting = (try? store.keptAsideUnshown()) ?? []
            guard !waiting.isEmpty else { return outcome }
            let cause: String = switch error {
            case StoreError.ownTimelineSuspect: "this device's own timeline may continue on another device; run "
                + "`plait rejoin`, which makes them again"
            default: "making them again failed: \(Home.wrap(error))"
            }
            outcome.failure = "\(KeptAsideOutcome.count(waiting)) exist only in changes of this device kept aside "
                + "(\(KeptAsideOutcome.names(waiting))): \(cause)"
        }
        return outcome
    }

    /// The copied homes this device knows of (its own Device ID's or a peer's), one sentence each with what to do.
    public func copiedHomeReports() throws -> [String] {
        try store.copiedHomes(now: Replica.now()).map {
            CopiedHome(deviceID: $0.deviceID, instances: $0.instances, reportedBy: $0.reportedBy).description
        }
    }

    /// The Device IDs this device trusts, read once (the TLS trust callback must not touch the store).
    public func trustedDeviceIDs() throws -> Set<String> { Set(try store.peers().map(\.deviceID)) }

    /// Who this device is in Hello. A command run beside this home's agent speaks with the agent's instance nonce:
    /// both are one home, and a peer seeing the two connections must not take them for a copied home.
    public var sessionIdentity: SessionIdentity {
        get throws {
            SessionIdentity(
                deviceID: try identity.deviceID.description, name: deviceName,
                instanceNonce: AgentLock.runningInstance(home: path) ?? InstanceNonce.process)
        }
    }

    /// Connects to `address` over TLS (sync protocol), requires the peer to be paired, and runs one session
    /// both ways. Never throws: failures are reported in the outcome, so `plait sync` can go on.
    ///
    /// A peer that has still to learn this device's new Device ID (`plait rejoin --new-key`) is dialled with the
    /// retired identity it trusts, and the signed statement goes in Hello. `expecting` is the peer's Device ID
    /// when known; when not (`--peer`), the current identity is tried first, and if the peer that refused it is
    /// one still to be told, the retired one.
    public func syncOnce(
        with address: PeerAddress, expecting peer: String? = nil, timeout: Duration,
        onPulled: (@Sendable (Int) -> Void)? = nil
    ) -> PeerSyncOutcome {
        if let peer, let credentials = successionCredentials(for: peer) {
            return syncOnce(with: address, telling: credentials, timeout: timeout, onPulled: onPulled)
        }
        let outcome = syncOnce(with: address, telling: nil, timeout: timeout, onPulled: onPulled)
        if peer == nil, outcome.result == nil, let refusing = outcome.deviceID,
            let credentials = successionCredentials(for: refusing)
        {
            return syncOnce(with: address, telling: credentials, timeout: timeout, onPulled: onPulled)
        }
        return outcome
    }

    private func syncOnce(
        with address: PeerAddress, telling credentials: SuccessionCredentials?, timeout: Duration,
        onPulled: (@Sendable (Int) -> Void)?
    ) -> PeerSyncOutcome {
        var outcome = PeerSyncOutcome(address: address)
        // A copied store is noticed before the session reads the own timeline's state (`Store.openForWriting`). A
        // store that cannot be opened for writing fails the session below with its own error.
        try? store.openForWriting()
        // A head record that does not describe its intact last change would go out in the Hello (a peer then sees
        // a fork, or is asked for a change that is not here): rewritten from the change first (H5). A store that
        // cannot be written fails the session below with its own error.
        _ = try? replica.mendHeadRecords()
        // What the session stored before a failure: each batch commits on its own, so a store failure mid-way
        // (a full disk) leaves those, and the failure must not say that nothing was changed.
        let pulled = PulledCounter()
        // Whether the peer's Hello arrived: a reset before it is told apart from one in the middle of a session.
        let answered = PulledCounter()
        // A baseline adopted before a failure is kept too, and counts no pulled changes: what the store held at the
        // start tells whether the session stored anything (the second hostile tester of 2026-11-25 was told "nothing
        // was changed" by a sync whose adopted baseline filled the disk only afterwards).
        let summaryBefore = try? store.summary()
        /// The name the device `peer` was given at pairing here, if it is listed.
        let storedName = { [store] (peer: String) in try? store.peers().first { $0.deviceID == peer }?.name }
        do {
            TLS.setUp()
            let trusted = try trustedDeviceIDs()
            let context = try TLSContext(identity: credentials?.identity ?? identity, role: .client(offering: .sync))
            let connection = try TLSConnection.connect(
                host: address.host, port: address.port, context: context,
                trust: { trusted.contains($0.description) }, timeout: timeout)
            defer { connection.close() }
            guard let peer = connection.peerDeviceID?.description else {
                throw PlaitError.usage("the peer presented no certificate.")
            }
            outcome.deviceID = peer
            var options = SessionOptions(mode: .oneShot)
            options.certifiedPeerID = peer
            options.maxBatchChanges = config.batchChanges
            options.idleTimeout = timeout
            options.onPulled = { added in
                _ = pulled.add(added)
                onPulled?(added)
            }
            options.succession = credentials?.statement
            // A read per batch or page: an unpair run meanwhile stops the sync, as it stops an agent's session. A
            // failing read answers yes: the batch's own write fails then, with its own reason.
            options.stillTrusted = { [store] in (try? store.isTrusted(deviceID: peer)) ?? true }
            // Its Hello shows it holds this device as paired: a refusal recorded before is over.
            options.admitPeer = { [store] _ in
                _ = answered.add(1)
                try? store.peerAnsweredThisDevice(deviceID: peer)
                return true
            }
            let certificate = connection.peerCertificateDER
            options.onSuccession = { [self] statement in
                self.acceptSuccession(statement, connectionCertificate: certificate).refusal
            }
            var me = try sessionIdentity
            if let credentials { me.deviceID = credentials.identity.deviceID.description }
            let session = try Session(
                transport: TLSFrameTransport(connection), replica: replica, identity: me, options: options)
            let result = try session.run()
            // The name given at pairing: a Hello's name is only what the peer calls itself.
            outcome.name = storedName(peer) ?? result.peerName
            outcome.result = result
            if credentials != nil {
                try store.successionTold(peer: peer)
                outcome.toldSuccessor = true
            }
            try store.peerSeen(deviceID: peer, address: address.description, summary: result.acknowledged,
                now: Replica.now())
        } catch let error as TLSError {
            if case let .peerNotTrusted(id) = error, id == (try? identity.deviceID) {
                // `pair --trust` of its own ID is refused: that advice would not work (a new user's finding).
                outcome.failure = "\(address) is this device's own agent (device \(id)): give the address of another "
                    + "device (`plait peers` lists the paired ones)."
            } else {
                outcome.failure = Self.explain(error, address: address)
            }
        } catch {
            // The peer as stored at pairing (fourth hostile tester of 2026-11-25: the line gave the address only).
            let name = {
                outcome.deviceID.flatMap { peer in storedName(peer).map { peerLabel(name: $0, deviceID: peer) } }
            }
            // In TLS 1.3 a server that does not trust this device refuses it only after the client's handshake
            // completed: the refusal arrives as an alert on the session's first read.
            if outcome.result == nil, let refusal = Self.refusalAfterHandshake(error) {
                outcome.failure = Self.explain(refusal, address: address, name: name())
                // `plait peers` says so from now on, not the state of the last session it took part in.
                if let peer = outcome.deviceID { _ = try? store.peerRefusedThisDevice(deviceID: peer, now: Replica.now()) }
            } else if case .tls(.connectionReset) = error as? SessionError, answered.value == 0 {
                // A reset with no alert is not a refusal (a plait agent refuses with the alert, PROTOCOL.md §3): the
                // peer stopped at that moment, or is a plait from before 2026-11-25, which could refuse so.
                outcome.failure = "\(name() ?? "the peer") reset the connection right after the TLS handshake, before its "
                    + "Hello: it stopped at that moment, or (a plait from before 2026-11-25) it refused this device. Run "
                    + "the sync again; a refusal is then said as one."
            } else if case let .store(storeError) = error as? SessionError, pulled.value > 0 {
                let cause = storeError.describing(unchanged: "the batch being stored was not stored")
                outcome.failure = "the local store failed after storing \(pulled.value) changes from this peer (they "
                    + "are kept, and the next sync goes on from them): \(cause)"
            } else if case let .store(storeError) = error as? SessionError, let summaryBefore,
                (try? store.summary()).map({ $0 != summaryBefore }) ?? true
            {
                let cause = storeError.describing(unchanged: "what was being stored then was not stored")
                outcome.failure = "the local store failed after storing part of what this peer sent (its baseline; "
                    + "it is kept, and the next sync goes on from it): \(cause)"
            } else {
                // `plait sync` puts the address before it.
                outcome.failure = "\(error)"
            }
        }
        return outcome
    }

    /// The peer's refusal of this device, when a session failed with one on its first read: its alert. A reset is
    /// not one (a peer killed at that moment resets too; an agent refuses with the alert, PROTOCOL.md §3).
    static func refusalAfterHandshake(_ error: any Error) -> TLSError? {
        guard case let .tls(failure) = error as? SessionError, case .rejectedByPeer = failure else { return nil }
        return failure
    }

    /// `error` as one sentence about the peer at `address`, named `name` where it is known (a paired device).
    static func explain(_ error: TLSError, address: PeerAddress, name: String? = nil) -> String {
        switch error {
        case .refused: return "\(address) is unreachable (connection refused): is `plait agent` running there?"
        case .timeout: return "\(address) did not answer in time: is the address right, and the agent running?"
        case .closedDuringHandshake:
            return "\(address) closed the connection during the TLS handshake (it may be overloaded): try again "
                + "in a moment."
        case .rejectedByPeer:
            // `plait sync` puts the address first: the name, not the address again.
            let peer = name ?? "\(address)"
            return "\(peer) refused this device: it is not paired there (run `plait pair --trust` on it with this ID)."
        case let .peerNotTrusted(id):
            return "\(address) is device \(id), which is not paired here (`plait pair --trust \(id)` if it should be)."
        case let .alpnMismatch(offered) where offered.contains(TLSApplicationProtocol.sync.rawValue):
            // This side offered only its own sync version: the server knows no name of it (or selected none).
            let version = TLSApplicationProtocol.syncVersion
            return "the peer at \(address) does not speak plait protocol \(version) (it may run an older plait, which "
                + "speaks \(version - 1)): upgrade plait there."
        default: return "\(address): TLS failed: \(error)"
        }
    }
}

/// The running total of changes a session pulled and stored (its pull callback runs on the session's thread).
public final class PulledCounter: @unchecked Sendable {
    private let lock = NSLock()
    private var total = 0

    public init() {}

    /// Adds `count`; returns the new total.
    public func add(_ count: Int) -> Int {
        lock.withLock {
            total += count
            return total
        }
    }

    public var value: Int { lock.withLock { total } }
}
