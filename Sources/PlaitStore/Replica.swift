import Foundation
import GRDB
import GRDBSQLite
import PlaitCore

/// The replay engine bound to a store: one per process. Every write is one transaction that moves the
/// changes, the timeline heads and the materialized state together; a crash leaves a batch boundary.
///
/// Another process (the CLI while the agent runs) may write the same store: each transaction first checks
/// the store's generation and reloads the materialized state if someone else wrote.
public final class Replica: @unchecked Sendable {
    public let store: Store
    public let domain = ListsDomain()
    private var engine: ReplayEngine<ListsDomain>
    private var generation: Int64 = -1
    private let lock = NSLock()
    /// `uninterpretableCount()` as of a store generation.
    private var uninterpretable: (generation: Int64, count: Int)?
    /// Set by a transaction's body that knows how many stored changes of kinds this build cannot interpret it
    /// adds (a pulled batch, a local edit): the cached count then follows the commit instead of being recounted
    /// over every change at the next status read (after a catch-up, a scan of the whole table).
    private var uninterpretableAdded: Int?
    /// How many times the count was taken by scanning the change table (tests).
    private(set) var uninterpretableScans = 0
    /// Largest accepted change, in canonical bytes (config: `store.max_change_bytes`).
    public var maxChangeBytes = 1 << 20
    /// Changes between checkpoints written to the store (late changes roll back to the nearest one).
    public var storedCheckpointInterval = 10_000
    /// Stored checkpoints kept.
    public var storedCheckpointLimit = 4
    /// The state was rebuilt in memory from the source because the rows were damaged; the next write
    /// transaction rewrites every row (a read-only command writes nothing).
    private var rebuiltUnsaved = false
    /// The in-memory state is ahead of the materialized rows: pulled batches were committed (their change rows,
    /// heads and summary, durably) and their state is to be saved shortly after (DESIGN §12).
    public private(set) var derivedUnsaved = false
    /// Pulled changes applied since the rows were last saved.
    private var unsavedChanges = 0
    /// A pulled batch of at least this many changes defers saving the state (a catch-up's batches, where saving
    /// the rows was half the cost); smaller ones (live edits from a peer) save it in their own transaction.
    public var deferDerivedFrom = 64
    /// Deferred changes after which the state is saved anyway: bounds what a crash leaves to replay forward.
    public var deferDerivedLimit = 200_000
    /// Committed changes the engine has not applied yet: a pull's batches in replay order were stored and their
    /// state left to be applied from the rows when it is next needed (`catchUp`). All of them sort after the
    /// engine's position.
    ///
    /// A fresh device catching up 100,000 new items otherwise held the whole state in memory while every batch
    /// was decoded and committed (what a pull keeps in flight, plus what the allocator keeps of its freed
    /// batches): 83 – 85 MiB at the peak, against 64 for the goal. Applied from the rows once the pull ends,
    /// the state grows where the batches were.
    private(set) var lagging = false
    /// Damaged derived data healed, not yet handed to `onDerivedStateRepair`'s handler.
    private var pendingRepairs: [DerivedStateRepair] = []
    private var repairHandler: (@Sendable (DerivedStateRepair) -> Void)?
    /// The last repair reported: a failed write reloads and may meet the same damage again, which is not news.
    private var lastRepair: DerivedStateRepair?

    /// Where local changes get their signatures (DESIGN §11): none (an unsigned protocol-1 timeline, test
    /// fixtures), a signer, or one loaded at the first local edit (a home's key, which reading never needs).
    private var signerSource: SignerSource

    private enum SignerSource {
        case none
        case ready(any ChangeSigner)
        case loading(@Sendable () throws -> any ChangeSigner)
    }

    /// `signer` signs local changes; without one the own timeline must be unsigned (and stays so).
    public init(store: Store, signer: (any ChangeSigner)? = nil) throws {
        self.store = store
        signerSource = signer.map { .ready($0) } ?? .none
        engine = ReplayEngine(domain: domain, state: ListsState(), position: .zero)
        try store.read { db in try self.reload(db) }
    }

    /// Signs local changes with the signer `load` returns, loaded at the first local edit (a failure to load
    /// fails that edit, and the next edit tries again).
    public func signWith(loading load: @escaping @Sendable () throws -> any ChangeSigner) {
        lock.withLock { signerSource = .loading(load) }
    }

    /// The signer, loaded if it is not yet. Called with the lock held.
    private func resolvedSigner() throws -> (any ChangeSigner)? {
        switch signerSource {
        case .none: return nil
        case let .ready(signer): return signer
        case let .loading(load):
            let signer = try load()
            signerSource = .ready(signer)
            return signer
        }
    }

    /// The materialized state as of the last transaction or `refresh()`.
    public var state: ListsState { caughtUp { engine.state } }
    public var position: OrderKey { caughtUp { engine.position } }
    public var digest: [UInt8] { caughtUp { engine.currentDigest() } }

    /// `body` under the lock, with the engine first brought up to the changes committed ahead of it (`lagging`).
    /// A store that cannot be read then leaves the state where it was applied: the next transaction tries again,
    /// and fails with the store's error.
    private func caughtUp<T>(_ body: () -> T) -> T {
        if lock.withLock({ lagging }) { try? refresh() }
        return lock.withLock(body)
    }

    /// Reloads the state if another process wrote since, and applies the changes committed ahead of it.
    public func refresh() throws {
        try store.read { db in
            try lock.withLock {
                let current: Int64 = try Meta.get(db, .generation) ?? 0
                if current != generation { try reload(db) } else { try catchUp(db) }
            }
        }
    }

    /// Applies the stored changes beyond the engine's position, in replay order, read from the rows (each payload
    /// decoded again: the batch that brought it is gone). Called with the lock held, in a read or a transaction
    /// that saw this process's last commit.
    private func catchUp(_ db: Database) throws {
        guard lagging else { return }
        try domain.bound(to: db) {
            try StoredChanges(db: db).forEachChange(after: engine.position) { change in engine.applyNext(change) }
        }
        lagging = false
    }

    /// The summary, baseline digest, state digest and count of uninterpretable changes, consistent with each
    /// other: read in one transaction, with the state reloaded if another process wrote.
    public func status() throws -> ReplicaStatus {
        let unknown = try uninterpretableCount()
        return try store.read { db in
            try lock.withLock {
                let current: Int64 = try Meta.get(db, .generation) ?? 0
                if current != generation { try reload(db) } else { try catchUp(db) }
                return ReplicaStatus(
                    view: try Store.localView(db), stateDigest: engine.currentDigest(), uninterpretable: unknown)
            }
        }
    }

    /// Loads the materialized state; if it fails to load or to check, replays the source instead (DESIGN §10)
    /// and reports it once. Only an unreadable source is an error.
    private func reload(_ db: Database) throws {
        do {
            let loaded = try DerivedState.load(db, domain: domain) { key in try self.restartPoint(db, before: key) }
            engine = ReplayEngine(domain: domain, state: loaded.state, position: loaded.position)
            lagging = false
            rebuiltUnsaved = false
            // Changes committed beyond the rows were replayed onto them: the next write saves them.
            derivedUnsaved = loaded.replayedForward > 0
        } catch {
            let problem = DerivedState.problem(error)
            let replay = try DerivedState.replay(db, domain: domain)
            engine = replay.engine
            lagging = false
            rebuiltUnsaved = true
            derivedUnsaved = true
            report(.rebuilt(problem: problem, changes: replay.changes, fromBaseline: replay.fromBaseline))
        }
        generation = try Meta.get(db, .generation) ?? 0
    }

    /// Hands each repair of damaged derived data to `handler` (the CLI warns on stderr, the agent logs), including
    /// those found before it was set, while the replica loaded. `handler` runs under the replica's lock: it must
    /// not call back into the replica.
    public func onDerivedStateRepair(_ handler: @escaping @Sendable (DerivedStateRepair) -> Void) {
        let pending = lock.withLock {
            repairHandler = handler
            defer { pendingRepairs = [] }
            return pendingRepairs
        }
        for repair in pending { handler(repair) }
    }

    /// Called with the lock held (or from `init`).
    private func report(_ repair: DerivedStateRepair) {
        guard repair != lastRepair else { return }
        lastRepair = repair
        if let repairHandler { repairHandler(repair) } else { pendingRepairs.append(repair) }
    }

    static func position(_ db: Database) throws -> OrderKey {
        guard let data: Data = try Meta.get(db, .position) else { return .zero }
        var reader = [UInt8](data)
        guard reader.count == 24 else {
            throw StoreError.damagedDerivedState("the replay position is \(reader.count) bytes, not 24")
        }
        func word(_ offset: Int) -> UInt64 { (0..<8).reduce(0) { $0 << 8 | UInt64(reader[offset + $1]) } }
        let key = OrderKey(lamport: word(0), timeline: TimelineID(word(8)), seq: word(16))
        reader.removeAll()
        return key
    }

    static func encode(_ key: OrderKey) -> Data {
        var bytes: [UInt8] = []
        for word in [key.lamport, key.timeline.rawValue, key.seq] {
            for shift in stride(from: 56, through: 0, by: -8) { bytes.append(UInt8(truncatingIfNeeded: word >> UInt64(shift))) }
        }
        return Data(bytes)
    }

    /// One write transaction. On any error nothing is written and the in-memory state is reloaded.
    ///
    /// The body may ask (through `deferDerived`) to commit only the source: the change rows, heads and summary,
    /// durably; the materialized rows then stay at the "applied up to" marker and are saved by a later
    /// transaction (`saveDerivedState`, or any write), and after a crash the state is replayed forward from it.
    ///
    /// The engine is brought up to the stored changes first, unless `lagging` (a pull's commit): then the body
    /// applies what it commits or leaves it to `catchUp`.
    func transaction<T>(lagging mayLag: Bool = false, _ body: (Database) throws -> T) throws -> T {
        lock.lock()
        defer { lock.unlock() }
        deferDerived = false
        uninterpretableAdded = nil
        do {
            let saved = try store.write { db -> (result: T, deferred: Bool, generationBefore: Int64) in
                let current: Int64 = try Meta.get(db, .generation) ?? 0
                if current != generation { try reload(db) } else if !mayLag { try catchUp(db) }
                defer {
                    // A checkpoint still encoding when the transaction fails: awaited and freed, not stored.
                    if let encoding = checkpointEncoding {
                        checkpointEncoding = nil
                        _ = encoding.wait()
                    }
                }
                let result = try domain.bound(to: db) { try body(db) }
                let deferring = deferDerived && !rebuiltUnsaved
                if !deferring { try saveDerived(db) }
                if let encoding = checkpointEncoding {
                    checkpointEncoding = nil
                    let measured = encoding.wait()
                    try storeCheckpoint(db, measured.writer, size: measured.size, at: encoding.position)
                }
                try Meta.set(db, .generation, current + 1)
                generation = current + 1
                return (result, deferring, current)
            }
            if saved.deferred { derivedUnsaved = true } else { unsavedChanges = 0 }
            if let added = uninterpretableAdded, let cached = uninterpretable, cached.generation == saved.generationBefore {
                uninterpretable = (saved.generationBefore + 1, cached.count + added)
            }
            return saved.result
        } catch {
            generation = -1
            try? store.read { db in try reload(db) }
            throw error
        }
    }

    /// Set by a transaction's body: commit the source now and save the state later.
    private var deferDerived = false
    /// The stored checkpoint a transaction's body found due, encoding on a second thread while the rows are
    /// saved; the transaction stores it after them (`persistCheckpointIfDue`).
    private var checkpointEncoding: SnapshotEncoding?

    /// Writes the materialized rows (what changed since the last save), the position and the marker.
    private func saveDerived(_ db: Database) throws {
        try catchUp(db)
        if rebuiltUnsaved {
            // The rows were damaged and the state was rebuilt from the source: rewrite them all.
            try engine.modifyState { state in try MaterializedRows.replaceAll(&state, db) }
            rebuiltUnsaved = false
        } else {
            // Taking the change marks leaves the records, and the digest kept for them, as they were.
            try engine.modifyBookkeeping { state in try MaterializedRows.save(&state, db) }
        }
        try Meta.set(db, .position, Self.encode(engine.position))
        try Meta.set(db, .appliedSummary, try Store.summary(db).description)
        derivedUnsaved = false
    }

    /// Saves the state of pulled batches whose saving was deferred (at the end of a pull, when an agent stops).
    /// Does nothing when the rows are up to date.
    public func saveDerivedState() throws {
        guard lock.withLock({ derivedUnsaved }) else { return }
        // The pull's decoded batches are freed by now, in the arenas of the threads that held them: give their
        // pages back before the save, which then peaks on top of the state alone.
        ProcessMemory.returnFreed()
        try transaction { db in
            // Adds and removes no change: the count of uninterpretable ones stays valid past this commit.
            uninterpretableAdded = 0
            try persistCheckpointIfDue(db, added: 0)
        }
    }

    // MARK: Local edits

    /// A local edit in progress: changes appended here are applied at once, so later lines of a batch see
    /// the earlier ones, and all of them commit together.
    public final class LocalEdit {
        fileprivate unowned let replica: Replica
        let db: Database
        fileprivate var timeline: TimelineID
        fileprivate var head: (seq: UInt64, lamport: UInt64, hash: [UInt8])
        fileprivate var lamport: UInt64
        fileprivate let now: Int64
        public private(set) var appended: [Change] = []
        /// The newest change of this edit, whose head row is written once at the end.
        fileprivate var lastAppended: Change?

        /// Why the own timeline may continue elsewhere, when it may (only `rejoin` gets this far then).
        fileprivate let suspect: String?
        /// Signs this edit's changes on a signed timeline; nil when the store has no key (unsigned timelines).
        fileprivate var signer: (any ChangeSigner)?
        /// The timeline being appended to has a certificate: its changes are signed (DESIGN §11).
        fileprivate var timelineSigned: Bool
        /// The certificate of a timeline begun in this edit, recorded on its row when the head row is written.
        fileprivate var beganCertificate: [UInt8]?
        /// Changes, and their canonical bytes, appended since the last signed one.
        fileprivate var unsignedRun = 0
        fileprivate var unsignedBytes = 0
        /// The signature of `lastAppended`, if it got one as it was appended.
        fileprivate var lastSignature: [UInt8]?
        /// Whether `signer` holds the key of the own timeline (or the timeline is unsigned).
        fileprivate let signerIsTimelines: Bool
        /// Signatures made in this edit (every 1,000th change or 1 MiB, the last change, each begin).
        public private(set) var signatures = 0

        fileprivate init(
            replica: Replica, db: Database, now: Int64, signer: (any ChangeSigner)?,
            leavingSuspectTimeline: Bool = false
        ) throws {
            self.replica = replica
            self.db = db
            self.now = now
            self.signer = signer
            timeline = try Store.ownTimeline(db)
            suspect = try Meta.get(db, .ownTimelineSuspect)
            if let suspect, !leavingSuspectTimeline {
                throw StoreError.ownTimelineSuspect(timeline: timeline, reason: suspect)
            }
            let certificate = try Store.certificate(db, of: timeline)
            timelineSigned = certificate != nil
            if timelineSigned && signer == nil { throw StoreError.noSigningKey(timeline: timeline) }
            // Only the key a timeline was begun with signs its changes: every peer refuses any other's as forged.
            // The home's key changed under its timeline when `rejoin --new-key` was stopped between swapping the
            // key files and starting the new timeline (bad-luck tester 2026-11-25, H2); `rejoin` finishes it.
            signerIsTimelines = certificate == nil || signer?.certificate == certificate
            if !signerIsTimelines && !leavingSuspectTimeline { throw StoreError.keyIsNotTimelines(timeline: timeline) }
            // The next change continues the last stored one, not what the head record says of it: a damaged record
            // is rewritten from an intact last change, and a last change whose own bytes do not match the record is
            // refused rather than continued (bad-luck tester 2026-11-25, H5).
            switch try Store.checkHead(db, of: timeline) {
            case .agrees: break
            case let .recordDamaged(fault): try Store.mendHeadRecords(db, [fault])
            case let .mismatch(damaged): throw StoreError.ownChangeDamaged(damaged)
            }
            let row = try Row.fetchOne(
                db, sql: "SELECT head_seq, head_lamport, head_hash FROM timelines WHERE tl = ?",
                arguments: [timelineColumn(timeline.rawValue)])
            head = row.map {
                (UInt64(clamping: $0[0] as Int64), UInt64(clamping: $0[1] as Int64), [UInt8]($0[2] as Data))
            } ?? (0, 0, Change.zeroHash)
            lamport = try Store.largestHeldLamport(db)
        }

        /// The summary of everything the store holds, this edit's changes included: what a `list.delete`
        /// made now has observed.
        public func observedSummary() throws -> Summary {
            var summary = try Store.summary(db)
            if head.seq > 0 { summary[timeline] = head.seq }
            return summary
        }

        /// A `list.delete` of `list` as this edit would author it now: version 2, observing every timeline held
        /// with the hash of its head, so it covers exactly the chains its author saw whatever a fork later renames
        /// (PROTOCOL.md §22.6).
        public func listDelete(_ list: ObjectID) throws -> ListsChange {
            var summary = Summary()
            var heads: [TimelineID: [UInt8]] = [:]
            // A timeline observed at 0 (no change held) is not an entry.
            for held in try Store.heads(db) where held.seq > 0 {
                summary[held.timeline] = held.seq
                heads[held.timeline] = held.hash
            }
            // The own head row is written at the end of the edit: this edit's changes are in `head`.
            if head.seq > 0 {
                summary[timeline] = head.seq
                heads[timeline] = head.hash
            }
            return .listDelete(id: list, observed: summary, heads: heads)
        }

        /// Signs the last change if it has no signature yet, and writes the head row of the own timeline (once
        /// per edit, not per change) with the certificate of a timeline begun here.
        fileprivate func finish() throws {
            if let lastAppended {
                if timelineSigned, lastSignature == nil, let signer {
                    let signature = try signer.sign(changeHash: head.hash)
                    try db.execute(
                        sql: "UPDATE changes SET signature = ? WHERE lamport = ? AND tl = ? AND seq = ?",
                        arguments: [
                            Data(signature), Int64(lastAppended.lamport), timelineColumn(timeline.rawValue),
                            Int64(lastAppended.seq),
                        ])
                    signatures += 1
                    unsignedRun = 0
                    unsignedBytes = 0
                }
                try Replica.setHead(db, lastAppended, hash: head.hash)
            }
            if let certificate = beganCertificate, head.seq > 0 {
                try Store.recordCertificate(db, timeline, certificate)
                beganCertificate = nil
            }
            lastAppended = nil
            lastSignature = nil
        }

        /// The state including every change appended so far.
        public var state: ListsState { replica.engine.state }
        public var ownTimeline: TimelineID { timeline }

        @discardableResult
        public func append(_ change: ListsChange) throws -> Change {
            try appendRaw(kind: change.kind, version: change.version, payload: change.payload)
        }

        /// Appends a change of any kind (the engine-level `timeline.end`, or a kind for tests).
        ///
        /// A change whose Lamport time is more than its predecessor's + 1 names as its witness a held change
        /// with Lamport time exactly one below (DESIGN §11). On a signed timeline every `maxUnsignedRun`-th
        /// change, the change that brings the unsigned run to `maxUnsignedBytes`, and each begin are signed
        /// here; the last change of the edit is signed when it finishes.
        @discardableResult
        public func appendRaw(kind: String, version: UInt32, payload: [UInt8]) throws -> Change {
            // A list.delete finds the heads it observed in the store (PROTOCOL.md §22.6), its own timeline's among
            // them: the head row, written once per edit, is brought up to this edit's last change first, or a delete
            // after other lines of one batch would find its own head nowhere and cover none of the own timeline.
            if kind == "list.delete", let lastAppended { try Replica.setHead(db, lastAppended, hash: head.hash) }
            let predecessor = head.lamport
            lamport = Lamport.next(after: max(lamport, head.lamport))
            guard lamport <= Lamport.max else { throw StoreError.lamportExhausted(timeline: timeline) }
            let witness = lamport > predecessor + 1 ? try Store.witness(db, lamport: lamport - 1) : nil
            let change = Change(
                timeline: timeline, seq: head.seq + 1, lamport: lamport, previousHash: head.hash, kind: kind,
                version: version, wallTime: now, payload: payload, witness: witness)
            let bytes = change.canonicalBytes
            guard bytes.count <= replica.maxChangeBytes else {
                throw CoreError.changeTooLarge(size: bytes.count, limit: replica.maxChangeBytes)
            }
            let hash = SHA256.hash(bytes)
            var signature: [UInt8]?
            if timelineSigned, let signer {
                unsignedRun += 1
                unsignedBytes += bytes.count
                if unsignedRun >= ChangeSignature.maxUnsignedRun || unsignedBytes >= ChangeSignature.maxUnsignedBytes
                    || kind == TimelineBegin.kind
                {
                    signature = try signer.sign(changeHash: hash)
                    signatures += 1
                    unsignedRun = 0
                    unsignedBytes = 0
                }
            }
            try ChangeRows.insert([change], signatures: { _ in signature }, db)
            head = (change.seq, change.lamport, hash)
            lastAppended = change
            lastSignature = signature
            replica.engine.applyNext(change, checkpointing: false)
            appended.append(change)
            return change
        }

        /// Starts a new own timeline (after ending the old one).
        fileprivate func switchTimeline(to new: TimelineID) throws {
            try finish()
            try Meta.set(db, .ownTimeline, Int64(bitPattern: new.rawValue))
            timeline = new
            head = (0, 0, Change.zeroHash)
            timelineSigned = false
            unsignedRun = 0
            unsignedBytes = 0
        }

        /// Continues on a new signed timeline whose first change, `timeline.begin`, carries the signer's
        /// certificate and a fresh nonce (the timeline ID derives from both) and names the timeline it
        /// supersedes with that timeline's head; the superseded row records where it stops.
        fileprivate func beginSignedTimeline(superseding old: TimelineBegin.Superseded?) throws {
            guard let signer else { throw StoreError.inconsistent("a signed timeline was to begin without a key") }
            var generator = SystemRandomNumberGenerator()
            let nonce = (0..<TimelineBegin.nonceSize).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let begin = TimelineBegin(certificate: signer.certificate, nonce: nonce, supersedes: old)
            try switchTimeline(to: begin.timelineID)
            // Marked here as every receiver marks it: only a timeline of this key, or an unsigned one (after
            // `rejoin --new-key` the old timeline is stopped by its end, signed by the old key).
            if let old, TimelineBegin.maySupersede(try Store.certificate(db, of: old.timeline), by: signer.certificate) {
                try Store.markSuperseded(db, old.timeline, at: old.seq)
            }
            timelineSigned = true
            beganCertificate = signer.certificate
            try appendRaw(kind: TimelineBegin.kind, version: 1, payload: begin.payload)
        }

        /// Moves an unsigned own timeline onto a signed one when there is a key (a store made before signed
        /// timelines, or created without a key): the old timeline and its changes stay exactly as they are, and
        /// the new one's begin supersedes it at its head. Nothing to do on a signed timeline or without a key.
        fileprivate func continueOnSignedTimelineIfNeeded() throws {
            if signer != nil, try Meta.get(db, .ownTimelineForkedAway) as String? != nil {
                // The own timeline forked and the other branch kept its name (DESIGN §11): authoring goes on, on a
                // timeline of its own; what this copy wrote before is on the renamed branch, nothing lost.
                try Meta.set(db, .ownTimelineForkedAway, nil)
                try beginSignedTimeline(superseding: nil)
                return
            }
            guard signer != nil, !timelineSigned else { return }
            let old = head.seq > 0 ? TimelineBegin.Superseded(timeline: timeline, seq: head.seq, hash: head.hash) : nil
            try beginSignedTimeline(superseding: old)
        }
    }

    /// Runs `body` as one transaction of local changes; a throw writes nothing.
    public func edit<T>(now: Int64 = Replica.now(), _ body: (LocalEdit) throws -> T) throws -> T {
        try edit(now: now, leavingSuspectTimeline: false, body)
    }

    private func edit<T>(now: Int64, leavingSuspectTimeline: Bool, _ body: (LocalEdit) throws -> T) throws -> T {
        // Loaded before the transaction: a key that cannot be read leaves the store's files untouched.
        let signer = try lock.withLock { try resolvedSigner() }
        return try transaction { db in
            let edit = try LocalEdit(
                replica: self, db: db, now: now, signer: signer, leavingSuspectTimeline: leavingSuspectTimeline)
            // `rejoin` starts its new timeline itself.
            if !leavingSuspectTimeline { try edit.continueOnSignedTimelineIfNeeded() }
            let result = try body(edit)
            try edit.finish()
            uninterpretableAdded = domain.uninterpretable(in: edit.appended)
            try persistCheckpointIfDue(db, added: edit.appended.count)
            return result
        }
    }

    public static func now() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    static func setHead(_ db: Database, _ change: Change, hash: [UInt8]) throws {
        try db.execute(
            sql: """
                INSERT INTO timelines (tl, head_seq, head_lamport, head_hash, ended) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (tl) DO UPDATE SET head_seq = excluded.head_seq, head_lamport = excluded.head_lamport,
                head_hash = excluded.head_hash, ended = max(ended, excluded.ended)
                """,
            arguments: [
                timelineColumn(change.timeline.rawValue), Int64(change.seq), Int64(change.lamport), Data(hash),
                change.kind == Change.timelineEndKind ? 1 : 0,
            ])
    }

    /// Ends the own timeline with `timeline.end`, starts a new one, and re-emits the current state as creates
    /// (and completes), which collapse as duplicates on devices that already have them. With a key the new
    /// timeline is signed and its begin supersedes the old one at its head.
    ///
    /// `retiredSigner` is the key the old timeline was signed with when it is no longer this replica's signer
    /// (`rejoin --new-key`): the end is signed with it, as every change of that timeline must be to verify, and so
    /// stops the old timeline everywhere — a begin of the new key may not supersede it (PROTOCOL.md §20.5).
    ///
    /// The old timeline is left without an end when no key at hand is its own (`ended` false): an end signed by
    /// another key is refused by every peer as forged.
    public func rejoin(now: Int64 = Replica.now(), retiredSigner: (any ChangeSigner)? = nil) throws -> (
        old: TimelineID, new: TimelineID, emitted: Int, ended: Bool, setAside: [TimelineID]
    ) {
        try edit(now: now, leavingSuspectTimeline: true) { edit in
            let old = edit.ownTimeline
            let oldSigned = try Store.certificate(edit.db, of: old) != nil
            let ownKey = try retiredSigner.map { retired in
                try Store.certificate(edit.db, of: old).map { $0 == retired.certificate } ?? true
            } ?? edit.signerIsTimelines
            // This device's own histories that a peer holds another history of inside its baseline (a restored
            // home that made more changes than the backup lost, with a peer that had compacted): that peer refuses
            // to send its baseline while this device holds them, and the two never converge. They are set aside
            // (`kept_aside`), after the state they made is read for re-sending below; the old timeline is then
            // neither ended nor superseded here (the other history goes on under its name).
            let forked = try Store.forkedOwnHistories(edit.db, key: try Store.certificate(edit.db, of: old))
            // A timeline that may continue on another device is left as it is: an end appended here could be a
            // second change under a number that device already used.
            // Nor one marked as going on elsewhere (a restore, a fork it lost, a baseline's word): its next number
            // may be held by another history (bad-luck tester 2026-11-25-j, J3: a restored home's `rejoin` ended its
            // timeline under a number its peers held, and every later change of that history was refused).
            let forkedAway = try Meta.get(edit.db, .ownTimelineForkedAway) as String? != nil
            let ending = edit.suspect == nil && ownKey && !forked.contains(old) && !forkedAway
            // What is re-sent: the state as this device shows it now, the histories set aside included.
            let shown = edit.state
            if !forked.isEmpty {
                try Store.setAside(forked, edit.db, now: now)
                try edit.db.execute(sql: "DELETE FROM checkpoints")
                engine = try DerivedState.replay(edit.db, domain: domain).engine
                rebuiltUnsaved = true
                // The next change's Lamport time and witness come from what is still held.
                edit.lamport = try Store.largestHeldLamport(edit.db)
            }
            if ending {
                let signer = edit.signer
                if let retiredSigner { edit.signer = retiredSigner }
                try edit.appendRaw(kind: Change.timelineEndKind, version: 1, payload: [])
                try edit.finish()
                edit.signer = signer
            }
            if edit.signer != nil {
                // The new timeline's begin supersedes the old one at its head (the end just appended, if any) — but
                // only when this copy owns that head. A suspect timeline goes on elsewhere (a copied home): a
                // supersession here would make every device refuse the other copy's later changes on it.
                let head = edit.head
                let owned = ending && head.seq > 0
                try edit.beginSignedTimeline(
                    superseding: owned ? .init(timeline: old, seq: head.seq, hash: head.hash) : nil)
            } else {
                try edit.switchTimeline(to: TimelineID.random())
            }
            let new = edit.ownTimeline
            try Meta.set(edit.db, .ownTimelineSuspect, nil)
            try Meta.set(edit.db, .ownTimelineSuspectCause, nil)
            // The new timeline is the one to go on on: the next edit begins no other.
            try Meta.set(edit.db, .ownTimelineForkedAway, nil)
            let state = shown
            // Completions are re-sent only where the history that made them does not reach the peers as it is: set
            // aside here, or an unsigned timeline (a fork of it is never exchanged). A signed one's changes reach
            // every peer, under its name or a branch's, and a completion sent again with a later time undid a
            // reopen made meanwhile on another device (bad-luck tester 2026-11-25-j, J4). Creates of an existing
            // ID change nothing, so they are sent all the same.
            let resendCompletions = !forked.isEmpty || !oldSigned
            var emitted = 0
            for listID in state.liveListIDs {
                let list = state.lists[listID]!
                try edit.append(.listCreate(id: listID, title: list.title, color: list.color, at: .bottom))
                emitted += 1
                for itemID in state.itemIDs(in: listID, completed: false) {
                    try edit.append(.itemCreate(id: itemID, list: listID, text: state.items[itemID]!.text, at: .bottom))
                    emitted += 1
                }
                let completed = state.itemIDs(in: listID, completed: true)
                for itemID in completed {
                    try edit.append(.itemCreate(id: itemID, list: listID, text: state.items[itemID]!.text, at: .bottom))
                    emitted += 1
                }
                // Completing bottom-up leaves the completed section in its current order.
                for itemID in completed.reversed() where resendCompletions {
                    try edit.append(.itemComplete(id: itemID))
                    emitted += 1
                }
            }
            return (old, new, emitted, ending, forked)
        }
    }

    // MARK: Pulled changes

    /// What integrating a pulled batch did.
    public struct IntegrateResult: Sendable {
        public var stats = ReplayStats()
        /// Changes stored and replayed.
        public var added = 0
        /// Changes already held (re-pulled, same hash), skipped.
        public var duplicates = 0
        /// Timelines refused from some change on (the sender's fault, or a fork); the rest of the batch was taken.
        public var refused: [RefusedTimeline] = []
        /// Changes of this device's own timeline arrived beyond its head: the home is stale or copied. They
        /// were stored (they continue the chain), and the own timeline is marked as one that may continue
        /// elsewhere, so nothing more is authored on it until `plait rejoin`.
        public var ownTimelineContinued: TimelineID?
        /// Timelines with a fork this batch added a branch to (named again, state replayed).
        public var forks: [TimelineID] = []
    }

    /// The one check of arriving changes, with this store's size cap and domain, hashing and verifying change
    /// signatures with OpenSSL.
    var intake: Intake<ListsDomain> {
        Intake(domain: domain, maxChangeBytes: maxChangeBytes, sha256: FastSHA256.function, verifier: Self.verifier)
    }

    /// One verifier per process: it caches the parsed keys of the certificates it met.
    static let verifier = P256Verifier()

    /// Integrates changes pulled from a peer in one transaction: each timeline must continue without a gap,
    /// its hash chain and Lamport times (at most 2^62); a change under a number already held must have the
    /// same hash. What passes is stored and replayed (rolling back to a checkpoint for late changes); a
    /// timeline that fails is refused from that change on and reported, and the rest is taken (DESIGN §10).
    /// `skip` timelines are dropped silently (refused earlier in the session, or forked with this peer).
    public func integrate(_ batch: [Change], skip: Set<TimelineID> = []) throws -> IntegrateResult {
        try integrate(encoded: batch.map { EncodedChange($0) }, skip: skip)
    }

    /// `integrate` for changes as they arrived: decoded once, with the bytes they travelled in.
    public func integrate(encoded batch: [EncodedChange], skip: Set<TimelineID> = []) throws -> IntegrateResult {
        // Checked first in a read: a batch already held entirely (a re-pull), or refused entirely, writes
        // nothing, so other processes need not reload.
        let validated = try validate(batch, skip: skip)
        return try commit(validated)
    }

    /// A batch checked by the intake, not yet committed.
    public struct ValidatedBatch: Sendable {
        let batch: [EncodedChange]
        let skip: Set<TimelineID>
        let verdict: Intake<ListsDomain>.Result
        /// The head number each timeline it touches was checked against.
        let used: [TimelineID: UInt64]
        /// How many fork branches the store held then. Another session's commit that records a branch renames
        /// changes (DESIGN §11): a head can keep its number and stand on another chain, so the verdict is stale.
        let branches: Int

        /// Changes held back for the next batch of the stream (not covered by a signature yet).
        var heldBack: [EncodedChange] { verdict.heldBack }

        /// What the intake decided (the commit may still fail): changes to store, duplicates, refusals.
        public var preliminary: IntegrateResult {
            var result = IntegrateResult()
            result.added = verdict.accepted.count
            result.duplicates = verdict.duplicates
            result.refused = verdict.refused
            // The timelines whose branches the commit names again (`integrateFork`): a session learns of a fork
            // resolved in its intake from this, not from the commit it does not wait for.
            var roots = Set(verdict.branches.map(\.parent))
            for accepted in verdict.accepted {
                if let origin = accepted.change.origin { roots.insert(origin.timeline) }
            }
            result.forks = roots.sorted()
            return result
        }
    }

    /// Runs the intake over `batch` against the stored heads, or against `projected` heads where a batch
    /// validated before it is still committing (`pendingHashes` holds its changes' hashes).
    func validate(
        _ batch: [EncodedChange], skip: Set<TimelineID>, projected: [TimelineID: HeldHead] = [:],
        pending: [ChangeRef: PendingChange] = [:]
    ) throws -> ValidatedBatch {
        try store.read { db in try validate(db, batch, skip: skip, projected: projected, pending: pending) }
    }

    /// A change validated and not yet committed (the batch before, still committing): its hash for the fork
    /// check of a change sent again, its Lamport time for the witness check.
    struct PendingChange: Sendable {
        var hash: [UInt8]
        var lamport: UInt64
    }

    private func validate(
        _ db: Database, _ batch: [EncodedChange], skip: Set<TimelineID>, projected: [TimelineID: HeldHead] = [:],
        pending: [ChangeRef: PendingChange] = [:]
    ) throws -> ValidatedBatch {
        var used: [TimelineID: UInt64] = [:]
        var witnesses = WitnessLookup()
        let branchCount = try Store.branchCount(db)
        let verdict = try intake.check(
            batch, skip: skip,
            head: { timeline in
                // A projected head stands for a batch still committing, ahead of the store. Once the store is at
                // or beyond it (that batch is in, and another session or process may have added more), the
                // store's head is the one to continue: a stale projection refused the next change as a gap.
                let stored = try Self.heldHead(db, timeline)
                var head = stored
                if let ahead = projected[timeline], ahead.seq > stored?.seq ?? 0 { head = ahead }
                used[timeline] = head?.seq ?? 0
                return head
            }, heldHash: { try pending[$0]?.hash ?? Store.hash(db, of: $0) },
            witness: { ref, lamport in
                if let change = pending[ref] { return change.lamport == lamport }
                return try witnesses.holds(db, ref, lamport: lamport)
            },
            heldChange: { ref in
                if let change = pending[ref] { return HeldHead(seq: ref.seq, lamport: change.lamport, hash: change.hash) }
                return try Store.heldChange(db, ref)
            },
            // The intake asks for every timeline of the batch; a store holding no branch (the usual case) answers
            // from the one count instead of a query each.
            branches: { root in branchCount == 0 ? [] : try Store.branches(db, root: root) },
            heldLamport: max(
                try Store.largestHeldLamport(db),
                projected.values.reduce(0) { max($0, $1.lamport) },
                pending.values.reduce(0) { max($0, $1.lamport) }))
        return ValidatedBatch(batch: batch, skip: skip, verdict: verdict, used: used, branches: branchCount)
    }

    /// Whether the store holds a Lamport witness (DESIGN §11): the change itself with exactly that Lamport time,
    /// or a baseline that folded it and reaches that time. The baseline's summary is read once per batch.
    struct WitnessLookup {
        private var baseline: (summary: Summary, maxLamport: UInt64)??
        private var forks: Bool?

        mutating func holds(_ db: Database, _ ref: ChangeRef, lamport: UInt64) throws -> Bool {
            if let stored = try Int64.fetchOne(
                db.cachedStatement(sql: "SELECT lamport FROM changes WHERE tl = ? AND seq = ?"),
                arguments: [timelineColumn(ref.timeline.rawValue), Int64(ref.seq)])
            {
                if UInt64(stored) == lamport { return true }
            }
            // The author named the witness where it wrote it: on a fork branch, it is stored renamed.
            if forks == nil { forks = try Store.recordsForks(db) }
            if forks == true, try Int64.fetchOne(
                db.cachedStatement(
                    sql: "SELECT 1 FROM changes WHERE origin_tl = ? AND origin_seq = ? AND lamport = ? LIMIT 1"),
                arguments: [timelineColumn(ref.timeline.rawValue), Int64(ref.seq), Int64(lamport)]) != nil
            {
                return true
            }
            if baseline == nil {
                baseline = try Row.fetchOne(db, sql: "SELECT summary, max_lamport FROM baseline WHERE id = 1").map {
                    (try Summary(parsing: $0[0] as String), UInt64(clamping: $0[1] as Int64))
                }
            }
            guard let folded = baseline ?? nil else { return false }
            return folded.summary[ref.timeline] >= ref.seq && folded.maxLamport >= lamport
        }
    }

    /// Commits a validated batch in one transaction, checking it again first if a head it was checked against
    /// moved (another process wrote, or a batch validated before it was not committed).
    ///
    /// `applyingLater` (a pull's pipeline): a large batch in replay order is only stored, its state applied from
    /// the rows when it is next needed (`lagging`); its `stats` then stay empty.
    func commit(_ validated: ValidatedBatch, applyingLater mayLag: Bool = false) throws -> IntegrateResult {
        var result = validated.preliminary
        result.added = 0
        guard !validated.verdict.accepted.isEmpty else { return result }
        return try transaction(lagging: mayLag) { db in
            var verdict = validated.verdict
            // Validated in a read before this transaction: another writer (a session with another peer, an edit)
            // may have moved a head since, or recorded a fork branch and renamed changes under the same numbers.
            if try validated.used.contains(where: { timeline, seq in try Self.heldHead(db, timeline)?.seq ?? 0 != seq })
                || (try Store.branchCount(db)) != validated.branches
            {
                verdict = try validate(db, validated.batch, skip: validated.skip).verdict
                result.duplicates = verdict.duplicates
                result.refused = verdict.refused
            }
            let fresh = verdict.accepted.map { $0.change }
            guard !fresh.isEmpty else { return result }
            // (A store without the marker yet, new or written before it, saves once to set it.)
            let marked = (try Meta.get(db, .appliedSummary) as String?) != nil
            // Applied later from the rows: a large batch that neither forks nor sorts before what the engine
            // applied (changes committed ahead of the engine are read back in replay order with it).
            let applyLater = mayLag && marked && !rebuiltUnsaved && fresh.count >= deferDerivedFrom
                && unsavedChanges + fresh.count < deferDerivedLimit && verdict.branches.isEmpty
                && !fresh.contains(where: { $0.origin != nil }) && engine.rollbackPoint(of: fresh) == nil
            // Otherwise the engine applies the changes before these first (they are not in the table yet).
            if !applyLater { try catchUp(db) }
            try ChangeRows.insert(verdict.accepted, db)
            uninterpretableAdded = domain.uninterpretable(in: fresh)
            var healed: Set<TimelineID> = []
            for accepted in verdict.accepted where verdict.heads[accepted.change.timeline]?.seq == accepted.change.seq {
                try Self.setHead(db, accepted.change, hash: accepted.hash)
                // Good copies of changes set aside as damaged are in: the quarantine empties up to here.
                try db.execute(
                    sql: "DELETE FROM quarantine WHERE tl = ? AND seq <= ?",
                    arguments: [timelineColumn(accepted.change.timeline.rawValue), Int64(accepted.change.seq)])
                if db.changesCount > 0 { healed.insert(accepted.change.timeline) }
            }
            try Store.recordAuthors(db, accepted: fresh, superseded: verdict.superseded, arrivedAt: Replica.now())
            if !verdict.branches.isEmpty || fresh.contains(where: { $0.origin != nil }) {
                // A fork (DESIGN §11): every branch of the timelines it touched is named again, and the state is
                // replayed from the baseline with the branches at their own Lamport times.
                return try integrateFork(db, verdict: verdict, result: result)
            }
            // Late changes that are inert (a new device's `timeline.begin`) are skipped where they stand; any
            // other late change rolls replay back to before the batch.
            let late = !applyLater && engine.rollbackPoint(of: fresh) != nil
            if late {
                var earliest = fresh[0].orderKey
                for change in fresh where change.orderKey < earliest { earliest = change.orderKey }
                if derivedUnsaved {
                    // A late batch rolls back and rewrites only the records it changed: save what is pending first.
                    try saveDerived(db)
                }
                try db.execute(
                    sql: "DELETE FROM checkpoints WHERE (lamport, tl, seq) >= (?, ?, ?)",
                    arguments: [
                        Int64(earliest.lamport), timelineColumn(earliest.timeline.rawValue), Int64(earliest.seq),
                    ])
            }
            // Keep the old state only when replay will roll back: holding a copy makes the next mutation
            // copy the whole state.
            let before: ListsState? = late ? engine.state : nil
            if applyLater {
                lagging = true
            } else {
                result.stats = try engine.integrate(verdict.accepted.map { $0.decoded }, source: StoredChanges(db: db)) {
                    key in try self.restartPoint(db, before: key)
                }
            }
            result.added = fresh.count
            if result.stats.rolledBack, let before {
                // The change marks of a checkpoint are stale: rewrite exactly the records that differ.
                let differences = ListsState.differences(from: before, to: engine.state)
                engine.modifyBookkeeping { state in
                    state.trackChanges = true
                    _ = state.takeChanges()
                }
                try MaterializedRows.save(engine.state, lists: differences.lists, items: differences.items.sorted(), db)
            }
            try Self.clearHealedSuspicion(db)
            let own = try Store.ownTimeline(db)
            // Changes of the own timeline beyond its head, other than good copies of ones set aside as damaged.
            let healing = try Meta.get(db, .ownTimelineSuspectCause) as String? == SuspectCause.damage.rawValue
            // A copy whose own history lost the name in a fork (DESIGN §11) knows why it goes on elsewhere: the
            // winner's later changes are no sign of a stale home, and its next edit begins a timeline of its own.
            let forkedAway = try Meta.get(db, .ownTimelineForkedAway) as String? != nil
            if verdict.heads[own] != nil && !healing && !healed.contains(own) && !forkedAway {
                try Self.markOwnTimelineSuspect(
                    db, own, reason: "a peer sent changes of it beyond this device's head (this home was restored "
                        + "from a backup or copied)")
                result.ownTimelineContinued = own
            }
            // A late batch was just replayed over a long stretch, and the stream it belongs to is likely to roll
            // back again at its next batch: a stored checkpoint (a snapshot of the whole state) per batch was most
            // of the cost of two devices catching up on each other. Rolled-back batches store one less often.
            // A large batch in replay order commits its source now and its state shortly after (DESIGN §12).
            unsavedChanges += fresh.count
            deferDerived = applyLater
                || (!result.stats.rolledBack && (fresh.count >= deferDerivedFrom || derivedUnsaved)
                    && unsavedChanges < deferDerivedLimit && marked)
            // Stored checkpoints (a snapshot of the whole state each) are derived state too: while it is deferred
            // they are counted, and the save that ends the deferral stores the one that is due.
            try persistCheckpointIfDue(
                db, added: fresh.count, every: result.stats.rolledBack ? 5 : 1, store: !deferDerived)
            return result
        }
    }

    /// The rest of a commit whose batch added changes to fork branches: records the branches, names every branch
    /// of each forked timeline again, replays everything from the baseline and saves the state. When this
    /// device's own timeline lost (its last change is now on a branch), its next edit begins a new timeline.
    private func integrateFork(
        _ db: Database, verdict: Intake<ListsDomain>.Result, result: IntegrateResult
    ) throws -> IntegrateResult {
        var result = result
        try Store.recordBranches(db, verdict.branches)
        var roots = Set(verdict.branches.map(\.parent))
        for accepted in verdict.accepted { if let origin = accepted.change.origin { roots.insert(origin.timeline) } }
        let own = try Store.ownTimeline(db)
        let ownHead = try Self.heldHead(db, own)
        for root in roots.sorted() { _ = try Store.renameForks(db, root: root) }
        if roots.contains(own), let ownHead, try Self.heldHead(db, own)?.hash != ownHead.hash {
            // The own head now stands on a branch: the other copy's history kept the name.
            try Meta.set(db, .ownTimelineForkedAway, "1")
        }
        try db.execute(sql: "DELETE FROM checkpoints")
        let replay = try DerivedState.replay(db, domain: domain)
        engine = replay.engine
        rebuiltUnsaved = true
        try saveDerived(db)
        deferDerived = false
        result.added = verdict.accepted.count
        result.stats.rolledBack = true
        result.stats.replayed = replay.changes
        result.forks = roots.sorted()
        return result
    }

    /// The head this store holds of `timeline`, nil when it holds none of it (with its certificate and where a
    /// begin superseded it: `Store.heldHead`).
    static func heldHead(_ db: Database, _ timeline: TimelineID) throws -> HeldHead? {
        try Store.heldHead(db, timeline)
    }

    /// Why the own timeline was marked as one that may continue on another device.
    enum SuspectCause: String {
        /// Another history of it exists, or a peer held it beyond this head: only `rejoin` clears it.
        case elsewhere
        /// One of its stored changes was damaged and set aside: cleared once good copies are pulled again.
        case damage
    }

    /// Marks the own timeline as one that may continue on another device: nothing more is authored on it.
    static func markOwnTimelineSuspect(
        _ db: Database, _ timeline: TimelineID, reason: String, cause: SuspectCause = .elsewhere
    ) throws {
        guard try Store.ownTimeline(db) == timeline else { return }
        let current: String? = try Meta.get(db, .ownTimelineSuspectCause)
        // A mark for another history outranks one for damage; an existing mark of the same rank stays.
        guard current == nil || (current == SuspectCause.damage.rawValue && cause == .elsewhere) else { return }
        try Meta.set(db, .ownTimelineSuspect, reason)
        try Meta.set(db, .ownTimelineSuspectCause, cause.rawValue)
    }

    /// Clears a mark set by damage once nothing of the own timeline is set aside any more.
    static func clearHealedSuspicion(_ db: Database) throws {
        guard try Meta.get(db, .ownTimelineSuspectCause) as String? == SuspectCause.damage.rawValue else { return }
        let own = try Store.ownTimeline(db)
        let left = try Int.fetchOne(
            db, sql: "SELECT count(*) FROM quarantine WHERE tl = ?", arguments: [timelineColumn(own.rawValue)]) ?? 0
        guard left == 0 else { return }
        try Meta.set(db, .ownTimelineSuspect, nil)
        try Meta.set(db, .ownTimelineSuspectCause, nil)
    }

    /// Where replay restarts when no in-memory checkpoint is early enough (see the static form).
    func restartPoint(_ db: Database, before key: OrderKey) throws -> (key: OrderKey, state: ListsState) {
        try Self.restartPoint(db, before: key, domain: domain) { report($0) }
    }

    /// Where replay restarts when no in-memory checkpoint is early enough: the newest stored checkpoint
    /// before `key`, else the baseline, else the empty state.
    /// A checkpoint that does not decode is derived data: it is dropped (when `db` may write) and reported, and
    /// the one before it is tried.
    static func restartPoint(
        _ db: Database, before key: OrderKey, domain: ListsDomain, report: (DerivedStateRepair) -> Void
    ) throws -> (key: OrderKey, state: ListsState) {
        var bound = key
        while let row = try Row.fetchOne(
            db,
            sql: """
                SELECT lamport, tl, seq, snapshot FROM checkpoints WHERE (lamport, tl, seq) < (?, ?, ?)
                ORDER BY lamport DESC, tl DESC, seq DESC LIMIT 1
                """,
            arguments: [
                Int64(bitPattern: bound.lamport), timelineColumn(bound.timeline.rawValue), Int64(bitPattern: bound.seq),
            ])
        {
            let checkpointKey = OrderKey(
                lamport: UInt64(bitPattern: try row.decode(Int64.self, atIndex: 0)),
                timeline: TimelineID(timelineFromColumn(try row.decode(Int64.self, atIndex: 1))),
                seq: UInt64(bitPattern: try row.decode(Int64.self, atIndex: 2)))
            // A damaged row could hold a key that is not before `bound`; stop rather than loop.
            guard checkpointKey < bound else { break }
            do {
                let snapshot = [UInt8](try row.decode(Data.self, atIndex: 3))
                return (checkpointKey, try domain.restore(snapshot: snapshot[...]))
            } catch {
                report(.droppedCheckpoint(at: checkpointKey, problem: "\(error)"))
                if !db.configuration.readonly {
                    try db.execute(
                        sql: "DELETE FROM checkpoints WHERE lamport = ? AND tl = ? AND seq = ?",
                        arguments: [row[0] as DatabaseValue, row[1] as DatabaseValue, row[2] as DatabaseValue])
                }
                bound = checkpointKey
            }
        }
        if let baseline = try Store.baseline(db) {
            return (.zero, try domain.restore(snapshot: baseline.snapshot[...]))
        }
        return (.zero, domain.emptyState())
    }

    /// Stores a checkpoint once `storedCheckpointInterval` × `every` changes were added since the last one. Called
    /// at the end of a transaction's body: the checkpoint is encoded on a second thread while the transaction
    /// saves the materialized rows on this one, and stored after them (after a catch-up of 100,000 new items,
    /// each costs about 0.1 – 0.2 s, and the other core was idle).
    private func persistCheckpointIfDue(_ db: Database, added: Int, every: Int = 1, store: Bool = true) throws {
        let pending = (try Int.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'since_checkpoint'") ?? 0) + added
        if store && pending >= storedCheckpointInterval * every && engine.position > .zero {
            // The state as it stands (a copy sharing its storage: saving the rows takes only the change marks,
            // which the encoding does not read).
            checkpointEncoding = SnapshotEncoding(engine.state, at: engine.position)
            try db.execute(sql: "INSERT OR REPLACE INTO meta (key, value) VALUES ('since_checkpoint', 0)")
        } else {
            try db.execute(sql: "INSERT OR REPLACE INTO meta (key, value) VALUES ('since_checkpoint', ?)", arguments: [pending])
        }
    }

    /// Stores a checkpoint at `key`: the snapshot `writer` writes, of `size` bytes. Keeps the newest
    /// `storedCheckpointLimit`.
    ///
    /// The row is inserted with a zeroblob of the snapshot's size and the writer's pieces (about 64 KiB each) go
    /// into it by incremental blob I/O as they are encoded, straight into its pages: the snapshot is never held
    /// whole. Bound to the insert, SQLite first built one record holding a copy of it (9 MiB for 100,000 items,
    /// beside ours); encoded into pieces kept until the write, it was 10 MiB at the end of a growing catch-up,
    /// then the peak of its memory.
    private func storeCheckpoint(_ db: Database, _ writer: ListsSnapshotWriter, size: Int, at key: OrderKey) throws {
        // Incremental blob I/O takes 32-bit sizes. A checkpoint only saves replay time: a state too large for
        // one (tens of millions of items) goes without.
        guard size < Int(Int32.max) else { return }
        try db.execute(
            sql: "INSERT OR REPLACE INTO checkpoints (lamport, tl, seq, snapshot) VALUES (?, ?, ?, zeroblob(?))",
            arguments: [
                Int64(bitPattern: key.lamport), timelineColumn(key.timeline.rawValue), Int64(bitPattern: key.seq), size,
            ])
        var blob: OpaquePointer?
        let opened = sqlite3_blob_open(db.sqliteConnection, "main", "checkpoints", "snapshot", db.lastInsertedRowID, 1, &blob)
        defer { sqlite3_blob_close(blob) }
        guard opened == SQLITE_OK, let blob else {
            throw DatabaseError(resultCode: ResultCode(rawValue: opened), message: "opening the checkpoint's blob")
        }
        var offset = 0
        try writer.write { piece in
            // The writer encodes the same state the same way twice; a piece beyond the measured size would be a
            // bug in it, refused here rather than stored as a truncated snapshot.
            guard offset + piece.count <= size else {
                throw StoreError.inconsistent("a checkpoint's snapshot came out longer than it measured")
            }
            let written = sqlite3_blob_write(blob, piece.baseAddress, Int32(piece.count), Int32(offset))
            guard written == SQLITE_OK else {
                throw DatabaseError(resultCode: ResultCode(rawValue: written), message: "writing the checkpoint's blob")
            }
            offset += piece.count
        }
        guard offset == size else {
            throw StoreError.inconsistent("a checkpoint's snapshot came out shorter than it measured")
        }
        try db.execute(
            sql: """
                DELETE FROM checkpoints WHERE (lamport, tl, seq) NOT IN
                (SELECT lamport, tl, seq FROM checkpoints ORDER BY lamport DESC, tl DESC, seq DESC LIMIT ?)
                """,
            arguments: [storedCheckpointLimit])
    }

    // MARK: Full replay

    /// Replays everything from the baseline (or nothing) and rewrites the materialized state. Returns the
    /// number of changes replayed and the seconds replay took (reading and applying, not the rewrite).
    @discardableResult
    public func rebuild() throws -> (changes: Int, replaySeconds: Double) {
        try transaction { db in try replayAll(db) }
    }

    /// `rebuild` inside a transaction that is already open.
    func replayAll(_ db: Database) throws -> (changes: Int, replaySeconds: Double) {
        let replay = try DerivedState.replay(db, domain: domain)
        engine = replay.engine
        try engine.modifyState { state in try MaterializedRows.replaceAll(&state, db) }
        rebuiltUnsaved = false
        return (replay.changes, replay.seconds)
    }

    /// What `rebuildDerivedState` found and did.
    public struct DerivedStateRebuild: Sendable {
        /// Why the stored materialized state could not be used (it did not load or check), if so.
        public var problem: String?
        /// Whether the stored state loaded and equalled the replay (then the rebuild changed nothing visible).
        public var matched: Bool
        public var changes: Int
        public var fromBaseline: Bool
        public var checkpointsDropped: Int
        public var checkpointsWritten: Int
        public var lists: Int
        public var items: Int
        /// The state digest after the rebuild.
        public var digest: [UInt8]
    }

    /// Rebuilds every piece of derived state from the source in one transaction (`plait repair`): the
    /// materialized rows and replay position from a full replay; the stored checkpoints dropped and one taken at
    /// the head.
    public func rebuildDerivedState() throws -> DerivedStateRebuild {
        try transaction { db in
            var stored: [UInt8]?
            var problem: String?
            do {
                stored = domain.digest(of: try DerivedState.load(db, domain: domain) { key in
                    try self.restartPoint(db, before: key)
                }.state)
            } catch {
                problem = DerivedState.problem(error)
            }
            let replay = try DerivedState.replay(db, domain: domain)
            engine = replay.engine
            try engine.modifyState { state in try MaterializedRows.replaceAll(&state, db) }
            rebuiltUnsaved = false
            let dropped = try Int.fetchOne(db, sql: "SELECT count(*) FROM checkpoints") ?? 0
            try db.execute(sql: "DELETE FROM checkpoints")
            var written = 0
            if engine.position > .zero {
                let writer = ListsSnapshotWriter(engine.state, weight: 0)
                try storeCheckpoint(db, writer, size: writer.size, at: engine.position)
                written = 1
            }
            try db.execute(sql: "INSERT OR REPLACE INTO meta (key, value) VALUES ('since_checkpoint', 0)")
            let digest = engine.digest
            return DerivedStateRebuild(
                problem: problem, matched: stored == digest, changes: replay.changes, fromBaseline: replay.fromBaseline,
                checkpointsDropped: dropped, checkpointsWritten: written, lists: engine.state.liveListIDs.count,
                items: engine.state.liveItemCount, digest: digest)
        }
    }

    /// Seconds to read every stored change in replay order without applying it (a benchmark baseline).
    public func measureScan() throws -> Double {
        try store.read { db in
            let start = DispatchTime.now().uptimeNanoseconds
            var count = 0
            try StoredChanges(db: db).forEachChange(after: .zero) { _ in count += 1 }
            return Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        }
    }

    // MARK: Compaction

    /// What `compact` did.
    public struct CompactionReport: Sendable {
        public var cutOff: CutOffLimit?
        public var folded: Int
        public var baseline: Baseline?
        public var remaining: Int
    }

    /// The authors compaction waits for (DESIGN §11): a signed timeline whose certificate is neither this
    /// device's nor a paired peer's holds the cut-off only while one of its changes arrived within `graceMs`.
    public struct AuthorGrace: Sendable {
        /// SHA-256 of the certificates (DER) of this device and its paired peers: their Device IDs' bytes.
        /// The certificates of the own timeline and of the signer are added to it.
        public var known: Set<[UInt8]>
        public var graceMs: Int64
        public var now: Int64

        public init(known: Set<[UInt8]>, graceMs: Int64, now: Int64 = Replica.now()) {
            self.known = known
            self.graceMs = graceMs
            self.now = now
        }
    }

    /// Folds every change with Lamport ≤ the cut-off into the baseline (DESIGN §2). `limits` lowers the
    /// cut-off further (what paired peers have acknowledged); the earliest change this build cannot
    /// interpret always does. A timeline superseded at a head held stops holding it; with `authors`, so does
    /// a quiet one of an author nobody here paired (`Compaction.released`). The state, and so the digest, do
    /// not change.
    public func compact(limits: [CutOffLimit] = [], authors: AuthorGrace? = nil) throws -> CompactionReport {
        try transaction { db in
            var known = authors?.known ?? []
            if let own = try Store.certificate(db, of: try Store.ownTimeline(db)) { known.insert(SHA256.hash(own)) }
            if case let .ready(signer) = signerSource { known.insert(SHA256.hash(signer.certificate)) }
            let heads = try Store.heads(db).map { head in
                let authority = try Store.authority(db, of: head.timeline)
                let released = Compaction.released(
                    ended: head.ended, seq: head.seq, supersededSeq: authority.supersededSeq,
                    authorKnown: authors == nil ? nil : authority.certificate.map { known.contains(SHA256.hash($0)) },
                    lastArrival: authority.lastArrival, now: authors?.now ?? 0, graceMs: authors?.graceMs ?? 0)
                return TimelineHead(timeline: head.timeline, seq: head.seq, lamport: head.lamport, released: released)
            }
            var allLimits = limits
            if let unknown = try Store.earliestUninterpretable(db, understands: { kind, version in
                self.domain.understands(kind: kind, storedVersion: version)
            }) {
                allLimits.append(.uninterpretable(lamport: unknown.lamport - 1))
            }
            let previous = try Store.baseline(db)
            guard let cut = Compaction.cutOff(heads: heads, limits: allLimits) else {
                return CompactionReport(cutOff: nil, folded: 0, baseline: previous, remaining: 0)
            }
            var folder = try BaselineFolder(domain: domain, previous: previous)
            folder.forks += try Store.forkRecords(db)
            let statement = try db.makeStatement(
                sql: "SELECT \(try ChangeRows.columns(db)) FROM changes WHERE lamport <= ? ORDER BY lamport, tl, seq")
            statement.arguments = [Int64(cut.lamport)]
            try ChangeRows.scan(statement, withChain: true) { change in try folder.add(change) }
            let remaining = try Int.fetchOne(db, sql: "SELECT count(*) FROM changes WHERE lamport > ?", arguments: [Int64(cut.lamport)]) ?? 0
            guard folder.folded > 0 else {
                return CompactionReport(cutOff: cut, folded: 0, baseline: previous, remaining: remaining)
            }
            let baseline = folder.finish()
            try db.execute(sql: "DELETE FROM changes WHERE lamport <= ?", arguments: [Int64(cut.lamport)])
            try Store.writeBaseline(db, baseline)
            try db.execute(sql: "DELETE FROM checkpoints WHERE lamport <= ?", arguments: [Int64(cut.lamport)])
            engine.dropCheckpoints(through: OrderKey(lamport: cut.lamport, timeline: TimelineID(.max), seq: .max))
            return CompactionReport(cutOff: cut, folded: folder.folded, baseline: baseline, remaining: remaining)
        }
    }

    /// Stored changes this build cannot interpret (a newer plait wrote them): kept, forwarded, skipped.
    /// Counting scans every stored change, so the count is kept until the store's generation moves (every
    /// session's Hello carries it).
    public func uninterpretableCount() throws -> Int {
        let current: Int64 = try store.read { db in try Meta.get(db, .generation) ?? 0 }
        if let cached = lock.withLock({ uninterpretable }), cached.generation == current { return cached.count }
        let count = try store.read { db in
            // The distinct kinds first (a small temporary table, not a sort of every row: 2 MiB of SQLite's
            // sorter at the end of a catch-up), then only the kinds this build cannot interpret are counted.
            try Store.kinds(db).filter { !domain.understands(kind: $0.kind, storedVersion: $0.version) }
                .reduce(0) { total, kind in total + (try Store.changeCount(db, kind: kind.kind, version: kind.version)) }
        }
        lock.withLock {
            uninterpretable = (current, count)
            uninterpretableScans += 1
        }
        return count
    }
}

extension Domain {
    func understands(kind: String, version: UInt32) -> Bool {
        Change.isEngineKind(kind) || canInterpret(kind: kind, version: version)
    }

    /// A version as a row stores it: one that does not fit 32 bits (a damaged row) no build understands.
    func understands(kind: String, storedVersion: Int64) -> Bool {
        guard let version = UInt32(exactly: storedVersion) else { return false }
        return understands(kind: kind, version: version)
    }

    /// How many of `changes` are of kinds this build cannot interpret.
    func uninterpretable(in changes: [Change]) -> Int {
        changes.reduce(0) { $0 + (understands(kind: $1.kind, version: $1.version) ? 0 : 1) }
    }
}

extension Replica.IntegrateResult {
    /// A result that only refuses (changes held back for a signature that never came).
    public init(refused: [RefusedTimeline]) {
        self.init()
        self.refused = refused
    }
}

/// A stored checkpoint's snapshot, measured on a thread of its own (while the transaction saves the rows); the
/// transaction then has the same writer encode it into the blob (`storeCheckpoint`).
private final class SnapshotEncoding: @unchecked Sendable {
    /// The position of the state encoded.
    let position: OrderKey
    private let done = DispatchSemaphore(value: 0)
    /// Written by the measuring thread before `done` is signalled, read after.
    private var measured: (writer: ListsSnapshotWriter, size: Int)?

    init(_ state: ListsState, at position: OrderKey) {
        self.position = position
        let thread = Thread { [self] in
            let writer = ListsSnapshotWriter(state, weight: 0)
            measured = (writer, writer.size)
            done.signal()
        }
        thread.name = "plait-snapshot"
        thread.start()
    }

    /// The writer and the size of what it writes, once measured.
    func wait() -> (writer: ListsSnapshotWriter, size: Int) {
        done.wait()
        return measured!
    }
}
