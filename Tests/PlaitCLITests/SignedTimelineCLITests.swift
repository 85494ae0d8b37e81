import Foundation
import GRDB
import PlaitCore
import PlaitStore
import PlaitTestSupport
import Testing

/// DESIGN §11 through the real binary: `plait init` begins a signed timeline with the home's own key, every
/// command's transaction ends at a signed change, and an old home moves onto a signed timeline losing nothing.
@Suite("Signed timelines at the command line")
struct SignedTimelineCLITests {
    /// The own timeline's changes with their stored signatures, read straight from the store file.
    func ownChanges(_ home: String) throws -> (timeline: TimelineID, changes: [EncodedChange], certificate: [UInt8]?) {
        let store = try Store.open(at: home + "/plait.db", synchronousFull: false)
        let own = try store.ownTimeline()
        return (own, try store.encodedChanges(of: own, from: 1, limit: .max), try store.certificate(of: own))
    }

    @Test func initBeginsASignedTimelineAndEveryCommandEndsSigned() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            try sandbox.ok(["list", "add", "Groceries"])
            try sandbox.ok(["batch"], stdin: "add Groceries milk\nadd Groceries eggs\nadd Groceries bread\n")

            let signer = try P256Signer(directory: sandbox.home)
            let (own, changes, certificate) = try ownChanges(sandbox.home)
            let kinds = [TimelineBegin.kind, "list.create"] + Array(repeating: "item.create", count: 3)
            #expect(changes.map(\.change.kind) == kinds)
            let begin = try TimelineBegin(payload: changes[0].change.payload)
            #expect(begin.certificate == signer.certificate, "the begin carries the home's own certificate")
            #expect(begin.timelineID == own && begin.supersedes == nil)
            #expect(certificate == signer.certificate)
            // init, `list add` and the batch each end at a signed change; nothing else is signed.
            #expect(changes.filter { $0.signature != nil }.map(\.change.seq) == [1, 2, 5])
            let verifier = P256Verifier()
            for change in changes where change.signature != nil {
                #expect(
                    verifier.verify(
                        signature: change.signature!, changeHash: change.change.hash, certificate: signer.certificate),
                    "\(change.change.ref)")
            }

            // `plait log --json` shows the begin as the first change, understood.
            let log = try sandbox.ok(["log", "--json"]).json()["changes"] as? [[String: Any]] ?? []
            #expect(log.first?["kind"] as? String == TimelineBegin.kind)
            #expect(log.first?["change"] as? String == "\(own):1")
            #expect((log.first?["description"] as? String)?.contains("newer plait") == false)
            #expect(try sandbox.status()["unknown"] as? Int ?? 0 == 0)
        }
    }

    /// Reading never needs the key; an edit without it fails with one sentence naming the file, and writes nothing.
    @Test func anEditWithoutTheKeyFailsClearlyAndReadingStillWorks() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            try sandbox.ok(["list", "add", "Groceries"])
            let key = sandbox.home + "/key.pem"
            try FileManager.default.moveItem(atPath: key, toPath: key + ".aside")
            let before = fingerprint(ofFile: sandbox.home + "/plait.db")
            let refused = try sandbox.fails(["add", "Groceries", "milk"])
            #expect(refused.stderr.contains("cannot sign changes with \(key)"), "\(refused)")
            #expect(refused.stderr.contains("nothing was changed"), "\(refused)")
            #expect(refused.stderr.split(separator: "\n").count == 1, "\(refused)")
            #expect(fingerprint(ofFile: sandbox.home + "/plait.db") == before)
            #expect(try sandbox.shown().map(\.title) == ["Groceries"])
            try FileManager.default.moveItem(atPath: key + ".aside", toPath: key)
            try sandbox.ok(["add", "Groceries", "milk"])
            #expect(try sandbox.shown().first?.pendingTexts == ["milk"])
        }
    }

    /// A home whose store an earlier plait wrote (unsigned, schema before v5): `plait show` reads it and writes
    /// nothing; the first edit continues on a new timeline signed with the home's key, superseding the old one
    /// at its head; the old changes keep their bytes, and `plait doctor` finds the store sound.
    @Test(arguments: [0x5167_C11A as UInt64])
    func anOldHomeContinuesOnASignedTimeline(seed: UInt64) throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            let path = sandbox.home + "/plait.db"
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
            var rng = SplitMix64(seed: seed)
            let old = TimelineID(rng.next())
            do {
                let device = try Store.create(at: path, timeline: old, synchronousFull: false)
                try device.setDeviceName("test-device")
                try randomEdits(try Replica(store: device), count: 25, rng: &rng)
            }
            try runSQLite(
                path,
                """
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
            let oldStore = try Store.open(at: path, synchronousFull: false)
            let oldHashes = try oldStore.changesInReplayOrder(limit: nil).map(\.hash)
            #expect(oldHashes.count == 25)
            let file = fingerprint(ofFile: path)
            let shown = try sandbox.shown()
            #expect(fingerprint(ofFile: path) == file, "reading an old store writes nothing (seed \(seed))")

            try sandbox.ok(["list", "add", "After the upgrade"])
            #expect(try sandbox.shown().count == shown.count + 1)
            let signer = try P256Signer(directory: sandbox.home)
            let (own, changes, certificate) = try ownChanges(sandbox.home)
            #expect(own != old && certificate == signer.certificate)
            #expect(changes.map(\.change.kind) == [TimelineBegin.kind, "list.create"])
            let begin = try TimelineBegin(payload: changes[0].change.payload)
            #expect(begin.supersedes?.timeline == old && begin.supersedes?.seq == 25)
            #expect(begin.supersedes?.hash == oldHashes.last)
            let verifier = P256Verifier()
            #expect(changes.allSatisfy {
                verifier.verify(
                    signature: $0.signature ?? [], changeHash: $0.change.hash, certificate: signer.certificate)
            })
            let store = try Store.open(at: path, synchronousFull: false)
            #expect(try store.changesInReplayOrder(limit: nil).filter { $0.timeline == old }.map(\.hash) == oldHashes)

            let doctor = try sandbox.run(["doctor", "--listen", "127.0.0.1:0", "--json"])
            let checks = try doctor.json()["checks"] as? [[String: Any]] ?? []
            let storeCheck = checks.first { $0["check"] as? String == "store" }
            #expect(storeCheck?["status"] as? String == "ok", "\(doctor)")
        }
    }
}
