import Foundation
import GRDB
import PlaitCore
import PlaitTestSupport
import Testing

@testable import PlaitStore

/// A signer whose signatures anyone can recompute: SHA-256(certificate ‖ hash) ‖ SHA-256(hash ‖ certificate).
/// The store only stores what it is given; these tests check which changes get signed, over which hash.
struct RecomputableSigner: ChangeSigner {
    let certificate: [UInt8]

    init(_ name: String) { certificate = Array("test certificate of \(name)".utf8) }

    func sign(changeHash: [UInt8]) throws -> [UInt8] {
        SHA256.hash(certificate + changeHash) + SHA256.hash(changeHash + certificate)
    }

    func signs(_ signature: [UInt8]?, _ change: Change) -> Bool {
        signature == (try? sign(changeHash: change.hash))
    }

    var deviceDigest: [UInt8] { SHA256.hash(certificate) }
}

/// The rows of the changes table, every column, in replay order: two equal results mean the rows are unchanged.
func changeRows(_ store: Store, where condition: String = "1") throws -> [String] {
    try store.read { db in
        try Row.fetchAll(db, sql: "SELECT * FROM changes WHERE \(condition) ORDER BY lamport, tl, seq").map {
            $0.description
        }
    }
}

@Suite("Signed timelines in the store")
struct SignedTimelineTests {
    /// A store created with a key begins its own timeline with a signed `timeline.begin` whose certificate and
    /// nonce give the timeline's ID, and records the certificate on the timeline's row.
    @Test func aSignedStoreBeginsItsTimeline() throws {
        try withTemporaryDirectory { directory in
            let signer = RecomputableSigner("a")
            let store = try Store.create(at: directory.file("a.db"), signer: signer, synchronousFull: false)
            let own = try store.ownTimeline()
            let changes = try store.encodedChangesInReplayOrder()
            #expect(changes.count == 1)
            let begin = try #require(changes.first)
            #expect(begin.change.ref == ChangeRef(timeline: own, seq: 1))
            #expect(begin.change.kind == TimelineBegin.kind && begin.change.version == 1)
            #expect(begin.change.lamport == 1 && begin.change.witness == nil)
            let payload = try TimelineBegin(payload: begin.change.payload)
            #expect(payload.certificate == signer.certificate)
            #expect(payload.nonce.count == TimelineBegin.nonceSize)
            #expect(payload.supersedes == nil)
            #expect(payload.timelineID == own)
            #expect(signer.signs(begin.signature, begin.change))
            #expect(Array(begin.bytes) == begin.change.canonicalBytes)
            #expect(try store.certificate(of: own) == signer.certificate)

            // The begin is understood (a no-op), so nothing counts as needing a newer plait.
            let replica = try Replica(store: store, signer: signer)
            #expect(try replica.uninterpretableCount() == 0)
            #expect(replica.state.liveListIDs.isEmpty)

            // Two stores made with the same key get different timelines (different nonces).
            let other = try Store.create(at: directory.file("b.db"), signer: signer, synchronousFull: false)
            #expect(try other.ownTimeline() != own)
        }
    }

    /// The last change of every local transaction is signed; within a long one, every 1,000th change is too,
    /// and nothing else; the signatures are over the stored changes' hashes and travel with them.
    @Test(arguments: [0x5167_0001 as UInt64])
    func transactionEndsAndEveryThousandthChangeAreSigned(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let signer = RecomputableSigner("a")
            let store = try Store.create(at: directory.file("a.db"), signer: signer, synchronousFull: false)
            let replica = try Replica(store: store, signer: signer)
            let own = try store.ownTimeline()
            try randomEdits(replica, count: 3, rng: &rng, perEdit: true)
            let list = objectID(&rng)
            try replica.edit { edit in
                try edit.append(.listCreate(id: list, title: "long", color: nil, at: .bottom))
                for index in 1..<2_500 {
                    try edit.append(.itemCreate(id: objectID(&rng), list: list, text: "item \(index)", at: .bottom))
                }
                #expect(edit.signatures == 2, "the 1,000th and 2,000th; the last is signed as the edit ends")
            }
            let changes = try store.encodedChanges(of: own, from: 1, limit: .max)
            #expect(changes.count == 1 + 3 + 2_500)
            let signed = changes.filter { $0.signature != nil }.map(\.change.seq)
            // seq 1 the begin, 2…4 one transaction each, then 5…2504: the 1,000th (1004), 2,000th (2004), last.
            #expect(signed == [1, 2, 3, 4, 1_004, 2_004, 2_504], "seed \(seed)")
            for change in changes where change.signature != nil {
                #expect(signer.signs(change.signature, change.change), "\(change.change.ref)")
            }
            // The page a sender streams carries the same signatures beside the canonical bytes.
            let page = try store.streamPageEncoded(
                for: Summary(), within: try store.summary(), after: nil, limit: .max)
            #expect(page.changes.map(\.signature) == changes.map(\.signature))
            #expect(page.changes.allSatisfy { Array($0.bytes) == $0.change.canonicalBytes })
            #expect(page.damaged.isEmpty)
        }
    }

    /// In a long transaction of large changes, the change that brings the unsigned run to 1 MiB is signed.
    @Test func everyMebibyteOfALongTransactionIsSigned() throws {
        try withTemporaryDirectory { directory in
            let signer = RecomputableSigner("a")
            let store = try Store.create(at: directory.file("a.db"), signer: signer, synchronousFull: false)
            let replica = try Replica(store: store, signer: signer)
            // 300,000-byte payloads: the 4th change brings the run past 1 MiB, then again the 8th.
            try replica.edit { edit in
                for index in 0..<9 {
                    let payload = [UInt8](repeating: UInt8(index), count: 300_000)
                    try edit.appendRaw(kind: "test.blob", version: 1, payload: payload)
                }
            }
            let changes = try store.encodedChanges(of: try store.ownTimeline(), from: 2, limit: .max)
            #expect(changes.count == 9)
            #expect(changes.filter { $0.signature != nil }.map(\.change.seq) == [5, 9, 10])
        }
    }

    /// A change whose Lamport time jumps past its predecessor's + 1 names a witness with Lamport time exactly one
    /// below: a stored change, or the head of a timeline folded into the baseline. The witness is stored, read
    /// back, and hashed (the chain still checks); a change that does not jump names none.
    @Test(arguments: [0x5167_0002 as UInt64])
    func aLamportJumpNamesItsWitness(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(a.replica, count: 5, rng: &rng)
            try randomEdits(b.replica, count: 1, rng: &rng)
            try b.pull(from: a)
            try randomEdits(b.replica, count: 2, rng: &rng)
            let ownB = try b.timeline
            let bChanges = try b.store.changes(of: ownB, from: 1, limit: .max)
            #expect(bChanges.map(\.lamport) == [1, 6, 7])
            #expect(bChanges[0].witness == nil && bChanges[2].witness == nil)
            #expect(bChanges[1].witness == ChangeRef(timeline: try a.timeline, seq: 5), "seed \(seed)")
            #expect(bChanges[2].previousHash == bChanges[1].hash, "the witness is hashed")
            #expect(try b.store.hash(of: bChanges[1].ref) == bChanges[1].hash)
            #expect(try b.replica.damagedChanges().isEmpty)
            // Every replay-order read gives the witness back, the pipelined replay included.
            #expect(try b.store.changesInReplayOrder(limit: nil).first { $0.ref == bChanges[1].ref } == bChanges[1])
            try b.replica.rebuild()
            // A third device pulling them stores the same bytes.
            let c = try Device("c", in: directory, timeline: TimelineID(rng.next()))
            try c.pull(from: b)
            #expect(try c.store.changes(of: ownB, from: 1, limit: .max) == bChanges)
            #expect(hex(c.digest) == hex(b.digest))

            // A device that folded everything it held into its baseline names the folded head as the witness.
            let d = try Device("d", in: directory, timeline: TimelineID(rng.next()))
            try d.pull(from: a)
            let report = try d.replica.compact()
            #expect(report.folded == 5 && report.remaining == 0)
            try randomEdits(d.replica, count: 1, rng: &rng)
            let first = try #require(try d.store.changes(of: try d.timeline, from: 1, limit: 1).first)
            #expect(first.lamport == 6)
            #expect(first.witness == ChangeRef(timeline: try a.timeline, seq: 5))
        }
    }

    /// A store whose timeline is signed refuses to author without its key, and writes nothing.
    @Test func aSignedTimelineRefusesUnsignedAuthoring() throws {
        try withTemporaryDirectory { directory in
            let path = directory.file("a.db")
            _ = try Store.create(at: path, signer: RecomputableSigner("a"), synchronousFull: false)
            let store = try Store.open(at: path, synchronousFull: false)
            let replica = try Replica(store: store)
            let before = try changeRows(store)
            #expect {
                try replica.edit { edit in
                    try edit.append(.listCreate(id: ObjectID.random(), title: "x", color: nil, at: .top))
                }
            } throws: { error in
                guard case StoreError.noSigningKey = error else { return false }
                return "\(error)".contains("is signed but no key was given")
            }
            #expect(try changeRows(store) == before)
        }
    }

    /// `rejoin` with a key ends the old timeline and begins a signed one whose begin supersedes the old one at
    /// its head (the end); the old row records where it was superseded.
    @Test(arguments: [0x5167_0003 as UInt64])
    func rejoinBeginsATimelineThatSupersedesTheOld(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let signer = RecomputableSigner("a")
            let store = try Store.create(at: directory.file("a.db"), signer: signer, synchronousFull: false)
            let replica = try Replica(store: store, signer: signer)
            try randomEdits(replica, count: 6, rng: &rng)
            let old = try store.ownTimeline()
            let digest = replica.digest
            let result = try replica.rejoin(now: fixedNow)
            let nowOwn = try store.ownTimeline()
            #expect(result.old == old && result.new == nowOwn)
            #expect(hex(replica.digest) == hex(digest))
            let end = try #require(try store.encodedChanges(of: old, from: 8, limit: .max).first)
            #expect(end.change.kind == Change.timelineEndKind && end.change.seq == 8)
            #expect(signer.signs(end.signature, end.change), "the old timeline's last change is signed")
            let fresh = try store.encodedChanges(of: result.new, from: 1, limit: .max)
            #expect(fresh.count == 1 + result.emitted)
            let begin = try TimelineBegin(payload: fresh[0].change.payload)
            #expect(fresh[0].change.kind == TimelineBegin.kind && begin.timelineID == result.new)
            #expect(begin.supersedes == .init(timeline: old, seq: 8, hash: end.change.hash))
            #expect(signer.signs(fresh[0].signature, fresh[0].change))
            #expect(signer.signs(fresh.last?.signature, fresh.last!.change))
            #expect(fresh[0].change.witness == end.change.ref, "the begin's Lamport time jumps past the end's")
            let authorities = try store.timelineAuthorities()
            #expect(authorities.first { $0.timeline == old }?.supersededSeq == 8)
            #expect(authorities.first { $0.timeline == result.new }?.certificate == signer.certificate)
            #expect(authorities.first { $0.timeline == result.new }?.supersededSeq == nil)
        }
    }

    /// DESIGN §11, authors nobody paired: a signed timeline whose certificate is neither this device's nor a
    /// paired peer's holds the cut-off only while one of its changes arrived within the grace.
    @Test(arguments: [0x5167_0005 as UInt64])
    func aQuietTimelineOfAnAuthorNobodyPairedStopsHoldingCompaction(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let signer = RecomputableSigner("a")
            let store = try Store.create(at: directory.file("a.db"), signer: signer, synchronousFull: false)
            let replica = try Replica(store: store, signer: signer)
            try randomEdits(replica, count: 20, rng: &rng)
            let own = try store.ownTimeline()
            let c = try Device("c", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(c.replica, count: 5, rng: &rng)
            let before = Replica.now()
            _ = try replica.integrate(try c.store.changes(of: try c.timeline, from: 1, limit: .max))
            // Integrating recorded when its changes arrived.
            let cTimeline = try c.timeline
            let arrival = try #require(try store.timelineAuthorities().first { $0.timeline == cTimeline }?.lastArrival)
            #expect(arrival >= before && arrival <= Replica.now())
            #expect(try store.timelineAuthorities().first { $0.timeline == own }?.lastArrival == nil, "authored here")
            // As if c's timeline were signed by a stranger (its begin's certificate, recorded by the intake).
            let stranger = RecomputableSigner("a stranger")
            try store.write { db in try Store.recordCertificate(db, try c.timeline, stranger.certificate) }
            let digest = replica.digest
            let held = CutOffLimit.timelineHead(try c.timeline, lamport: 5)
            #expect(try replica.compact().cutOff == held, "without the author rule it holds")
            let paired = Replica.AuthorGrace(known: [stranger.deviceDigest], graceMs: 1_000, now: arrival + 5_000)
            #expect(try replica.compact(authors: paired).cutOff == held, "a paired author holds, however quiet")
            let active = Replica.AuthorGrace(known: [], graceMs: 1_000, now: arrival + 1_000)
            #expect(try replica.compact(authors: active).cutOff == held, "seed \(seed)")
            let quiet = Replica.AuthorGrace(known: [], graceMs: 1_000, now: arrival + 1_001)
            let report = try replica.compact(authors: quiet)
            #expect(report.cutOff == .timelineHead(own, lamport: 21), "this device's own timeline is known")
            #expect(report.remaining == 0)
            #expect(hex(replica.digest) == hex(digest))
        }
    }

    /// The store side of the intake: the head it checks against carries the certificate and the superseded
    /// number; an accepted begin records its certificate, a superseding one the old timeline's stopping point,
    /// and arrivals their time; a witness is held as a stored change, a folded head, or inside the baseline.
    @Test(arguments: [0x5167_0006 as UInt64])
    func theIntakeReadsAndRecordsAuthors(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let signer = RecomputableSigner("b")
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            try randomEdits(b.replica, count: 4, rng: &rng)
            let old = try b.timeline
            // b's key arrives: its next edit begins a signed timeline superseding the unsigned one at 4.
            let signing = try Replica(store: b.store, signer: signer)
            try randomEdits(signing, count: 2, rng: &rng)
            let fresh = try b.store.ownTimeline()
            let changes = try b.store.changes(of: fresh, from: 1, limit: .max)

            let a = try Device("a", in: directory, timeline: TimelineID(rng.next()))
            try a.store.write { db in
                try ChangeRows.insert(try b.store.changes(of: old, from: 1, limit: .max), db)
                let oldHash = try #require(try b.store.hash(of: ChangeRef(timeline: old, seq: 4)))
                try Replica.setHead(db, try b.store.changes(of: old, from: 4, limit: 1)[0], hash: oldHash)
                try ChangeRows.insert(changes, signatures: { _ in nil }, db)
                try Replica.setHead(db, changes.last!, hash: changes.last!.hash)
                let begin = try TimelineBegin(payload: changes[0].payload)
                try Store.recordAuthors(
                    db, accepted: changes, superseded: [begin.supersedes!], arrivedAt: 1_700_000_000_000)
                let head = try #require(try Replica.heldHead(db, fresh))
                #expect(head.certificate == signer.certificate && head.supersededAt == nil)
                #expect(head.seq == 3 && head.hash == changes.last!.hash)
                let oldHead = try #require(try Replica.heldHead(db, old))
                #expect(oldHead.certificate == nil && oldHead.supersededAt == 4, "seed \(seed)")

                // Witnesses: b's begin (Lamport 5) names old:4 (Lamport 4).
                #expect(changes[0].witness == ChangeRef(timeline: old, seq: 4))
                var witnesses = Replica.WitnessLookup()
                #expect(try witnesses.holds(db, ChangeRef(timeline: old, seq: 4), lamport: 4))
                #expect(try !witnesses.holds(db, ChangeRef(timeline: old, seq: 4), lamport: 5), "exactly that")
                #expect(try !witnesses.holds(db, ChangeRef(timeline: old, seq: 9), lamport: 9), "not held")
            }
            let authorities = try a.store.timelineAuthorities()
            #expect(authorities.first { $0.timeline == fresh }?.lastArrival == 1_700_000_000_000)
            #expect(authorities.first { $0.timeline == old }?.lastArrival == nil)

            // Folded into the baseline: the folded head, and anything the baseline covers up to its largest time.
            let report = try a.replica.compact()
            #expect(report.remaining == 0)
            let held = try a.store.read { db -> [Bool] in
                var witnesses = Replica.WitnessLookup()
                return [
                    try witnesses.holds(db, ChangeRef(timeline: fresh, seq: 3), lamport: 7),
                    try witnesses.holds(db, ChangeRef(timeline: old, seq: 2), lamport: 2),
                    try witnesses.holds(db, ChangeRef(timeline: old, seq: 2), lamport: 8),
                ]
            }
            #expect(held == [true, true, false], "the folded head; covered by the baseline; beyond its largest time")
        }
    }

    /// A signed timeline pulled with its signatures (real P-256 keys): the receiver stores the changes with the
    /// signatures it verified, records the begin's certificate, the superseded head after a rejoin, and when the
    /// changes arrived.
    @Test(arguments: [0x5167_0007 as UInt64])
    func aPulledSignedTimelineIsStoredWithItsAuthor(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let keys = try TestKeyPair(commonName: "a")
            let signer = try P256Signer(keyPEM: keys.keyPEM, certificatePEM: keys.certificatePEM)
            let aStore = try Store.create(at: directory.file("a.db"), signer: signer, synchronousFull: false)
            let a = try Replica(store: aStore, signer: signer)
            try randomEdits(a, count: 1_500, rng: &rng, perEdit: false)
            let first = try aStore.ownTimeline()
            try a.rejoin(now: fixedNow)
            let second = try aStore.ownTimeline()
            let b = try Device("b", in: directory, timeline: TimelineID(rng.next()))
            let sent = try aStore.encodedChangesInReplayOrder()
            let result = try b.replica.integrate(encoded: sent)
            #expect(result.refused.isEmpty, "seed \(seed): \(result.refused)")
            #expect(try b.summary == aStore.summary())
            #expect(hex(b.digest) == hex(a.digest))
            let stored = try b.store.encodedChangesInReplayOrder()
            #expect(stored.map(\.change) == sent.map(\.change))
            // Only verified signatures are stored, each one a's; the last of each timeline among them.
            let verifier = P256Verifier()
            let storedSigned = stored.filter { $0.signature != nil }
            #expect(!storedSigned.isEmpty)
            for change in storedSigned {
                #expect(verifier.verify(
                    signature: change.signature!, changeHash: change.change.hash, certificate: signer.certificate))
            }
            for timeline in [first, second] {
                #expect(stored.last { $0.change.timeline == timeline }?.signature != nil)
            }
            let authorities = try b.store.timelineAuthorities()
            #expect(authorities.first { $0.timeline == first }?.certificate == signer.certificate)
            #expect(authorities.first { $0.timeline == second }?.certificate == signer.certificate)
            #expect(authorities.first { $0.timeline == first }?.supersededSeq == (try aStore.summary()[first]))
            #expect(authorities.first { $0.timeline == second }?.lastArrival != nil)
        }
    }
}

@Suite("Migration of a store made before signed timelines")
struct SignedTimelineMigrationTests {
    /// Makes a store exactly as the previous version left it: changes authored and pulled by the code, then the
    /// columns and migration of `v7-signed-timelines` taken out again (checked against the schema the previous
    /// migrations make). Returns the path.
    static func previousVersionStore(
        in directory: TemporaryDirectory, rng: inout SplitMix64, own: Int = 30, other: Int = 50
    ) throws -> (path: String, own: TimelineID, other: TimelineID) {
        let path = directory.file("old.db")
        let ownTimeline = TimelineID(rng.next())
        let otherTimeline = TimelineID(rng.next())
        do {
            // Every handle is dropped at the end of this block, before the file is changed.
            let a = try Device("old", in: directory, timeline: ownTimeline)
            let b = try Device("other", in: directory, timeline: otherTimeline)
            try randomEdits(a.replica, count: own, rng: &rng)
            try randomEdits(b.replica, count: other, rng: &rng)
            try a.pull(from: b)
            // The previous version wrote no witness (nothing here jumped) and no signature.
            let marked = try a.store.read { db in
                try Int.fetchOne(
                    db, sql: "SELECT count(*) FROM changes WHERE witness_tl IS NOT NULL OR signature IS NOT NULL")
            }
            #expect(marked == 0)
        }
        try runSQLite(
            path,
            """
            ALTER TABLE peers DROP COLUMN failed; ALTER TABLE peers DROP COLUMN failed_at;
            DELETE FROM grdb_migrations WHERE identifier = 'v17-peer-session-failures';
            DELETE FROM grdb_migrations WHERE identifier = 'v16-unpaired-stagings';
            ALTER TABLE peers DROP COLUMN refused_me_at;
            DELETE FROM grdb_migrations WHERE identifier = 'v15-refused-by-peer';
            DROP TABLE unpaired_devices; DELETE FROM grdb_migrations WHERE identifier = 'v14-unpaired-devices';
            ALTER TABLE copied_homes DROP COLUMN reported_by;
            DELETE FROM grdb_migrations WHERE identifier = 'v13-copied-home-reporters';
            ALTER TABLE peers DROP COLUMN last_heads;
            DROP TABLE kept_aside; DELETE FROM grdb_migrations WHERE identifier = 'v11-kept-aside';
            DELETE FROM grdb_migrations WHERE identifier = 'v10-fork-records';
            DELETE FROM grdb_migrations WHERE identifier = 'v9-acknowledged-heads';
            DROP INDEX changes_by_origin; ALTER TABLE changes DROP COLUMN origin_seq;
            ALTER TABLE changes DROP COLUMN origin_tl; DROP TABLE fork_branches;
            DELETE FROM grdb_migrations WHERE identifier = 'v8-fork-branches';
            ALTER TABLE changes DROP COLUMN signature; ALTER TABLE changes DROP COLUMN witness_seq;
            ALTER TABLE changes DROP COLUMN witness_tl; ALTER TABLE quarantine DROP COLUMN signature;
            ALTER TABLE quarantine DROP COLUMN witness_seq; ALTER TABLE quarantine DROP COLUMN witness_tl;
            ALTER TABLE timelines DROP COLUMN certificate; ALTER TABLE timelines DROP COLUMN superseded_seq;
            ALTER TABLE timelines DROP COLUMN last_arrival;
            DELETE FROM grdb_migrations WHERE identifier = 'v7-signed-timelines';
            """)
        // The result has exactly the columns the previous migrations make.
        let reference = try DatabaseQueue(path: directory.file("reference.db"))
        try Schema.migrator.migrate(reference, upTo: "v6-succession")
        let old = try DatabaseQueue(path: path)
        #expect(try columns(old) == columns(reference))
        try old.close()
        try reference.close()
        return (path, ownTimeline, otherTimeline)
    }

    static func columns(_ queue: DatabaseQueue) throws -> [String] {
        try queue.read { db in
            let tables = try String.fetchAll(
                db,
                sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
            return try tables.flatMap { table in
                try Row.fetchAll(db, sql: "PRAGMA table_info(\(table))").map { row in
                    "\(table).\(row["name"] as String) \(row["type"] as String) notnull=\(row["notnull"] as Int)"
                }
            }
        }
    }

    /// An upgraded plait opening an old store with a key: reading writes nothing; the first edit continues on a
    /// new signed timeline whose signed begin supersedes the old one at its head, and nothing old changes.
    @Test(arguments: [0x5167_0004 as UInt64])
    func anOldStoreContinuesOnANewSignedTimelineWithNothingLost(seed: UInt64) throws {
        try withTemporaryDirectory { directory in
            var rng = SplitMix64(seed: seed)
            let (path, oldOwn, other) = try Self.previousVersionStore(in: directory, rng: &rng)
            let fileBefore = try Data(contentsOf: URL(fileURLWithPath: path))
            let signer = RecomputableSigner("upgraded")

            let store = try Store.open(at: path, synchronousFull: false)
            let replica = try Replica(store: store, signer: signer)
            let stateBefore = replica.state
            let oldChanges = try store.changesInReplayOrder(limit: nil)
            let oldHashes = oldChanges.map(\.hash)
            let oldHead = try #require(try store.heads().first { $0.timeline == oldOwn })
            #expect(oldChanges.count == 80)
            #expect(try replica.uninterpretableCount() == 0)
            // Reading migrated and wrote nothing.
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == fileBefore, "seed \(seed)")

            let list = objectID(&rng)
            _ = try replica.edit { edit in
                try edit.append(.listCreate(id: list, title: "after", color: nil, at: .top))
            }

            let newOwn = try store.ownTimeline()
            #expect(newOwn != oldOwn)
            let fresh = try store.encodedChanges(of: newOwn, from: 1, limit: .max)
            #expect(fresh.map(\.change.kind) == [TimelineBegin.kind, "list.create"])
            let begin = try TimelineBegin(payload: fresh[0].change.payload)
            #expect(begin.timelineID == newOwn && begin.certificate == signer.certificate)
            #expect(begin.supersedes == .init(timeline: oldOwn, seq: oldHead.seq, hash: oldHead.hash))
            #expect(signer.signs(fresh[0].signature, fresh[0].change))
            #expect(signer.signs(fresh[1].signature, fresh[1].change))
            let maxLamport = oldChanges.map(\.lamport).max()!
            #expect(fresh[0].change.lamport == maxLamport + 1)
            #expect(fresh[0].change.witness.map { ref in oldChanges.first { $0.ref == ref }?.lamport } == maxLamport)

            // Nothing old changed: the same changes, the same hashes, no witness or signature added.
            let after = try store.changesInReplayOrder(limit: nil).filter { $0.timeline != newOwn }
            #expect(after == oldChanges)
            #expect(after.map(\.hash) == oldHashes)
            let oldSigned = "tl != \(timelineColumn(newOwn.rawValue)) AND signature IS NOT NULL"
            #expect(try changeRows(store, where: oldSigned).isEmpty)
            let heads = try store.heads()
            #expect(heads.first { $0.timeline == oldOwn } == oldHead, "the old timeline is not ended or moved")
            let authorities = try store.timelineAuthorities()
            #expect(authorities.first { $0.timeline == oldOwn }?.supersededSeq == oldHead.seq)
            #expect(authorities.first { $0.timeline == oldOwn }?.certificate == nil)
            #expect(authorities.first { $0.timeline == other }?.supersededSeq == nil)
            #expect(authorities.first { $0.timeline == newOwn }?.certificate == signer.certificate)

            // The state is the old one plus the new list; the store is sound; a replay agrees.
            #expect(Set(replica.state.liveListIDs) == Set(stateBefore.liveListIDs + [list]))
            #expect(try Store.inspect(at: path).integrity == ["ok"])
            #expect(try replica.damagedChanges().isEmpty)
            let live = replica.digest
            try replica.rebuild()
            #expect(hex(replica.digest) == hex(live))

            // Done once: the next edit stays on the new timeline.
            _ = try replica.edit { edit in try edit.append(.listRename(id: list, title: "renamed")) }
            #expect(try store.ownTimeline() == newOwn)
            #expect(try store.changeCount() == 83)
            let digest = replica.digest

            // The superseded timeline no longer holds compaction back: the other timeline's head does.
            let report = try replica.compact()
            #expect(report.cutOff == .timelineHead(other, lamport: 50))
            #expect(report.folded > 0)
            #expect(hex(replica.digest) == hex(digest))
        }
    }
}
