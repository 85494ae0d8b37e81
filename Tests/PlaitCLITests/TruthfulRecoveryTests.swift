import Foundation
import PlaitCore
import PlaitNetnsSupport
import PlaitTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// What plait says while a user recovers from bad luck must be true and must be followable (DESIGN §10). Each test
/// is a finding of a hostile tester (2026-11-24), seen failing before its fix.
@Suite struct TruthfulRecoveryTests {
    /// The `tl` column value of a timeline (sign bit flipped, see PlaitStore).
    func column(_ timeline: TimelineID) -> Int64 { Int64(bitPattern: timeline.rawValue ^ 0x8000_0000_0000_0000) }

    func sqlite(_ path: String, _ sql: String) throws {
        let shell = try ChildProcess.run("/usr/bin/sqlite3", [path, sql])
        guard shell.succeeded else { throw CLITestFailure("sqlite3 failed: \(sql): \(shell.errors)") }
    }

    func ownTimeline(_ sandbox: Sandbox, _ home: String) throws -> TimelineID {
        try TimelineID(parsing: try sandbox.ok(["status", "--json", "--home", home]).json()["timeline"] as? String ?? "")
    }

    /// A new device in the sandbox's home with a list L of items a1, a2, a3 (changes: timeline.begin 1, the list 2,
    /// the items 3 – 5); its timeline.
    func listOfThree(_ sandbox: Sandbox) throws -> TimelineID {
        try sandbox.initialize()
        try sandbox.ok(["list", "add", "L"])
        for text in ["a1", "a2", "a3"] { try sandbox.ok(["add", "L", text]) }
        return try ownTimeline(sandbox, sandbox.home)
    }

    /// Damages change `seq` of `timeline` in the home's store with `assignment` (SQL), as rot would.
    func damage(_ sandbox: Sandbox, _ timeline: TimelineID, seq: Int, _ assignment: String) throws {
        try sqlite(
            sandbox.home + "/plait.db",
            "UPDATE changes SET \(assignment) WHERE tl = \(column(timeline)) AND seq = \(seq)")
    }

    /// Rot in one change of a device with no peer: repair sets it (and what follows) aside, and items stop
    /// showing. It used to say "it already matched the replay; nothing visible changed" (it compared after the
    /// set-aside had rewritten the rows).
    @Test func repairSaysWhatSettingChangesAsideHid() throws {
        try withSandbox { sandbox in
            // a2's payload (change 4) damaged.
            let own = try listOfThree(sandbox)
            try damage(sandbox, own, seq: 4, "payload = payload || X'00'")
            let repair = try sandbox.run(["repair"])
            #expect(repair.status == 1, "\(repair)")
            #expect(!repair.stdout.contains("nothing visible changed"), "\(repair)")
            #expect(
                repair.stdout.contains(
                    "setting changes aside changed what shows: 1 lists and 3 items before, 1 lists and 1 items now"),
                "\(repair)")
            let json = try sandbox.run(["repair", "--json"])
            let object = try json.json()
            let before = object["shown_before"] as? [String: Any]
            let after = object["shown_after"] as? [String: Any]
            // The second repair finds the set-aside already done: what shows stays as it is.
            #expect(before?["items"] as? Int == 1 && after?["items"] as? Int == 1, "\(json)")
            #expect(before?["digest"] as? String == after?["digest"] as? String, "\(json)")
        }
    }

    /// One index entry that disagrees with the rows (bad-luck tester 2026-11-25, H4): `doctor` says only the
    /// indexes are damaged and sends the user to `repair`, not to a backup; `repair` rebuilds them and sets no
    /// sound change aside; afterwards the store is sound and every item shows.
    @Test func aDamagedIndexIsRepairedInPlace() throws {
        try withSandbox { sandbox in
            let own = try listOfThree(sandbox)
            try makeIndexEntryStale(store: sandbox.home + "/plait.db", timelineColumn: column(own), seq: 4)
            let doctor = try sandbox.run(["doctor"])
            #expect(doctor.stdout.contains("only the store's indexes are damaged"), "\(doctor)")
            #expect(!doctor.stdout.contains("restore it from a backup"), "\(doctor)")
            let repair = try sandbox.ok(["repair"])
            #expect(repair.stdout.contains("rebuilt the store's indexes from its rows"), "\(repair)")
            #expect(!repair.stdout.contains("set aside"), "\(repair)")
            #expect(try sandbox.ok(["doctor"]).stdout.contains("integrity_check ok"))
            #expect(try sandbox.shown().first?.pendingTexts == ["a1", "a2", "a3"])
        }
    }

    /// Rot inside a batch (only its last change is signed): the sound changes of the batch before the damaged
    /// one go aside with it. Repair said "set aside change T:8 (and the 4 after it)" and then "10 changes
    /// (T:3-12) are still set aside"; doctor said all ten "do not continue the chain".
    @Test func repairAndDoctorNameTheSoundChangesSetAsideWithTheDamagedOne() throws {
        try withSandbox { sandbox in
            let home = sandbox.home
            try sandbox.initialize()
            try sandbox.ok(["list", "add", "L"])
            try sandbox.ok(["batch"], stdin: (1...10).map { "add L b\($0)\n" }.joined())
            let own = try ownTimeline(sandbox, home)
            try damage(sandbox, own, seq: 8, "payload = payload || X'00'")
            let repair = try sandbox.run(["repair"])
            #expect(repair.status == 1, "\(repair)")
            #expect(
                repair.stdout.contains(
                    "set aside change \(own):8 (and the 4 after it), with the 5 sound changes before it that no "
                        + "signature covers without it"),
                "\(repair)")
            #expect(repair.stderr.contains("10 changes (\(own):3-12) are still set aside"), "\(repair)")
            let doctor = try sandbox.run(["doctor", "--json", "--listen", "127.0.0.1:0"])
            #expect(
                doctor.stdout.contains(
                    "change \(own):8: its hash does not continue the chain of its timeline; the 5 before it, which "
                        + "no signature covers without it, are set aside with it"),
                "\(doctor)")
        }
    }

    /// Rot in a change's kind: `status` said the change "needs a newer plait" and doctor's advice ended "(nothing
    /// is lost)" while repair would set the change aside and its item would stop showing.
    @Test func aRottedKindIsNotCalledNewerAndDoctorPromisesNothingFalse() throws {
        try withSandbox { sandbox in
            let own = try listOfThree(sandbox)
            // a2's create (change 4): "item.create" with one letter changed, as a flipped bit leaves it.
            try damage(sandbox, own, seq: 4, "kind = 'item.crecte'")
            let status = try sandbox.ok(["status"]).stdout
            #expect(status.contains("from a newer plait, or damaged"), "\(status)")
            #expect(!status.contains("need a newer plait"), "\(status)")
            let doctor = try sandbox.run(["doctor", "--json", "--listen", "127.0.0.1:0"])
            #expect(doctor.status != 0, "\(doctor)")
            #expect(!doctor.stdout.contains("nothing is lost"), "\(doctor)")
            let checks = (try doctor.json()["checks"] as? [[String: Any]]) ?? []
            let chains = checks.first { $0["check"] as? String == "hash chains" }
            #expect(chains?["status"] as? String == "failed", "\(checks)")
            #expect((chains?["detail"] as? String)?.contains("\(own):4-5 are damaged") == true, "\(checks)")
        }
    }

    /// The store was damaged, and the error said "move it aside and `plait init` again"; `init` then refused the
    /// home ("already holds a plait device") and every other command said "run `plait init` first". Now `init`
    /// makes a new store there and keeps the identity, which the peers still trust: pairing them again on this
    /// side and a sync bring the lists back.
    @Test func initAfterTheStoreWasMovedAsideKeepsTheIdentityAndSyncBringsTheListsBack() throws {
        try withSandbox { sandbox in
            let devices = try sandbox.pairedHomes(["laptop", "server"])
            let (laptop, server) = (devices[0], devices[1])
            try sandbox.ok(["list", "add", "Groceries", "--home", laptop.home])
            for text in ["milk", "eggs"] { try sandbox.ok(["add", "Groceries", text, "--home", laptop.home]) }
            let agent = try RunningAgent(sandbox: sandbox, home: server.home)
            defer { agent.stop() }
            try sandbox.ok(["sync", "--peer", agent.address, "--home", laptop.home])
            let shownOnServer = try sandbox.ok(["show", "--json", "--home", server.home]).stdout

            // The laptop's store is damaged; the user follows the advice.
            let store = laptop.home + "/plait.db"
            try Data(repeating: 0x5A, count: 4096).write(to: URL(fileURLWithPath: store))
            let damaged = try sandbox.fails(["show", "--home", laptop.home])
            #expect(damaged.stderr.contains("move it aside (with its -wal and -shm files), `plait init` again"), "\(damaged)")
            let aside = sandbox.root + "/aside"
            try FileManager.default.createDirectory(atPath: aside, withIntermediateDirectories: true)
            // First only the main file: the -wal left behind is refused, not replayed into the new store.
            try FileManager.default.moveItem(atPath: store, toPath: aside + "/plait.db")
            if FileManager.default.fileExists(atPath: store + "-wal") {
                let leftover = try sandbox.fails(["init", "--home", laptop.home])
                #expect(leftover.stderr.contains("plait.db-wal: left from a store that is no longer here"), "\(leftover)")
                #expect(!FileManager.default.fileExists(atPath: store))
            }
            for suffix in ["-wal", "-shm"] where FileManager.default.fileExists(atPath: store + suffix) {
                try FileManager.default.moveItem(atPath: store + suffix, toPath: aside + "/plait.db" + suffix)
            }
            let initialized = try sandbox.ok(["init", "--home", laptop.home])
            #expect(initialized.stdout.contains("keeping this home's key and certificate"), "\(initialized)")
            #expect(try sandbox.ok(["id", "--home", laptop.home]).lines.last == laptop.id)

            // The server still trusts the laptop; the laptop's list of trusted devices was in the old store.
            try sandbox.ok(["pair", "--trust", server.id, "--home", laptop.home])
            try sandbox.ok(["sync", "--peer", agent.address, "--home", laptop.home])
            #expect(try sandbox.ok(["show", "--json", "--home", laptop.home]).stdout == shownOnServer)
            // And it goes on writing: the server takes the new timeline's changes.
            try sandbox.ok(["add", "Groceries", "bread", "--home", laptop.home])
            try sandbox.ok(["sync", "--peer", agent.address, "--home", laptop.home])
            #expect(try sandbox.ok(["show", "--json", "--home", server.home]).stdout.contains("bread"))
            let doctor = try sandbox.run(["doctor", "--home", laptop.home, "--listen", "127.0.0.1:0"])
            #expect(doctor.status == 0, "\(doctor)")
        }
    }

    /// A lost key.pem: the messages said "create a new identity with `plait init`", which refuses the home.
    @Test func aLostKeySaysAWayOnThatWorks() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            try sandbox.ok(["list", "add", "L"])
            try FileManager.default.removeItem(atPath: sandbox.home + "/key.pem")
            let id = try sandbox.fails(["id"])
            #expect(id.stderr.contains("key.pem is missing; restore it from a backup"), "\(id)")
            #expect(id.stderr.contains("`plait init --home DIR`"), "\(id)")
            #expect(!id.stderr.contains("create a new identity with `plait init`"), "\(id)")
            // What it says of `init` is so.
            let again = try sandbox.fails(["init"])
            #expect(again.stderr.contains("already holds a plait device"), "\(again)")
            // A home with only half an identity and no store is refused with what is missing.
            let half = sandbox.root + "/half"
            try sandbox.ok(["init", "--home", half])
            for file in ["plait.db", "plait.db-wal", "plait.db-shm", "key.pem"] { unlink(half + "/" + file) }
            let refused = try sandbox.fails(["init", "--home", half])
            #expect(refused.stderr.contains("holds cert.pem but no key.pem; nothing was changed"), "\(refused)")
            #expect(!FileManager.default.fileExists(atPath: half + "/plait.db"))
        }
    }

    /// Doctor named a backup for every store it could not inspect. A missing store or a foreign SQLite file has
    /// its own remedy; only a damaged file is a case for a backup.
    @Test func doctorNamesABackupOnlyForADamagedStore() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            let store = sandbox.home + "/plait.db"
            func storeCheck() throws -> [String: Any] {
                let run = try sandbox.run(["doctor", "--json", "--listen", "127.0.0.1:0"])
                let checks = try run.json()["checks"] as? [[String: Any]] ?? []
                return try #require(checks.first { $0["check"] as? String == "store" }, "\(run)")
            }
            for suffix in ["", "-wal", "-shm"] { unlink(store + suffix) }
            let missing = try storeCheck()
            #expect(missing["status"] as? String == "failed")
            #expect((missing["advice"] as? String ?? "").contains("`plait init` creates the store"), "\(missing)")
            #expect(!(missing["advice"] as? String ?? "").contains("backup"), "\(missing)")

            try sqlite(store, "CREATE TABLE recipes (name TEXT)")
            let foreign = try storeCheck()
            #expect((foreign["advice"] as? String ?? "").contains("not made by plait"), "\(foreign)")
            #expect(!(foreign["advice"] as? String ?? "").contains("backup"), "\(foreign)")

            for suffix in ["", "-wal", "-shm"] { unlink(store + suffix) }
            try Data(repeating: 0x5A, count: 4096).write(to: URL(fileURLWithPath: store))
            let damaged = try storeCheck()
            #expect((damaged["advice"] as? String ?? "").contains("from a backup"), "\(damaged)")
        }
    }

    /// An empty `--home` (an unset shell variable) used the default home, and created a device there.
    @Test func anEmptyHomeOrConfigIsRefused() throws {
        try withSandbox { sandbox in
            let refused = try sandbox.fails(["init", "--home", ""])
            #expect(refused.status == 64 && refused.stderr.contains("--home is empty"), "\(refused)")
            let config = try sandbox.fails(["show", "--config", ""])
            #expect(config.stderr.contains("--config is empty"), "\(config)")
            // Nothing was created anywhere: not in $PLAIT_HOME, not in the XDG default.
            #expect(!FileManager.default.fileExists(atPath: sandbox.home))
            #expect(!FileManager.default.fileExists(atPath: sandbox.root + "/xdg-data/plait"))
        }
    }

    /// A batch line's own `--home` was accepted and ignored: the line went to the batch's home.
    @Test func aBatchLineNamingAHomeOrConfigIsRefused() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            try sandbox.ok(["list", "add", "L"])
            let before = try sandbox.fingerprint()
            for option in ["--home \(sandbox.root)/other", "--config /nonexistent.toml"] {
                let batch = try sandbox.fails(["batch"], stdin: "add L first\nadd L dentist \(option)\n")
                #expect(batch.stderr.contains("cannot be given on a batch line"), "\(batch)")
                #expect(batch.stderr.contains("Nothing of the batch was written"), "\(batch)")
            }
            #expect(try sandbox.fingerprint() == before)
        }
    }

    /// A home under a regular file said "NSCocoaErrorDomain error 512".
    @Test func aHomeUnderAFileSaysWhatIsInTheWay() throws {
        try withSandbox { sandbox in
            let file = sandbox.root + "/notadir"
            FileManager.default.createFile(atPath: file, contents: Data("x".utf8))
            let under = try sandbox.fails(["init", "--home", file + "/home"])
            #expect(under.stderr.contains("\(file) is a file, not a directory"), "\(under)")
            #expect(!under.stderr.contains("NSCocoaErrorDomain"), "\(under)")
            let itself = try sandbox.fails(["init", "--home", file])
            #expect(itself.stderr.contains("is a file, not a directory; nothing was changed"), "\(itself)")
            #expect(try String(contentsOfFile: file, encoding: .utf8) == "x")
        }
    }
}
