import Foundation
import PlaitCore
import PlaitNetnsSupport
import PlaitStore
import Testing

/// `init`, `id`, `status`, `compact`, `rejoin`, `log`, and where the home and config come from.
@Suite struct DeviceCommandTests {
    @Test func initCreatesAHomeAndASecondInitChangesNothing() throws {
        try withSandbox { sandbox in
            let created = try sandbox.ok(["init", "--name", "x"])
            #expect(created.stdout.contains("Created device 'x'"))
            let files = ["plait.db", "key.pem", "cert.pem"].map { sandbox.home + "/" + $0 }
            for file in files { #expect(FileManager.default.fileExists(atPath: file), "\(file)") }
            let before = files.map { fingerprint(ofFile: $0) }
            let listing = try FileManager.default.contentsOfDirectory(atPath: sandbox.home).sorted()

            let again = try sandbox.fails(["init", "--name", "y"])
            #expect(again.stderr.contains("already holds a plait device"), "\(again)")
            #expect(again.stderr.contains(sandbox.home), "the message names the home: \(again)")
            #expect(files.map { fingerprint(ofFile: $0) } == before)
            #expect(try FileManager.default.contentsOfDirectory(atPath: sandbox.home).sorted() == listing)
            #expect(try sandbox.status()["name"] as? String == "x")
        }
    }

    @Test func idPrintsTheDeviceIDOnTheLastLine() throws {
        try withSandbox { sandbox in
            try sandbox.initialize(name: "laptop")
            let run = try sandbox.ok(["id"])
            let id = try #require(run.lines.last)
            #expect(id.count == 63)
            let groups = id.split(separator: "-", omittingEmptySubsequences: false)
            #expect(groups.count == 8)
            #expect(
                groups.allSatisfy { $0.count == 7 && $0.allSatisfy { "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".contains($0) } }
            )
            #expect(run.lines.first == "laptop")
            let json = try sandbox.ok(["id", "--json"]).json()
            #expect(json["device"] as? String == id)
            #expect(try sandbox.status()["device"] as? String == id)
        }
    }

    @Test func statusJSONHasTheDocumentedKeys() throws {
        try withSandbox { sandbox in
            try sandbox.initialize(name: "desk")
            let empty = try sandbox.status()
            for key in ["device", "name", "timeline", "summary", "digest", "changes", "baseline", "unknown"] {
                #expect(empty[key] != nil, "status --json lacks \(key): \(empty)")
            }
            #expect(empty["name"] as? String == "desk")
            let timeline = try #require(empty["timeline"] as? String)
            #expect(timeline.count == 13)
            // A new device's timeline holds one change: its signed `timeline.begin` (DESIGN §11).
            #expect(empty["summary"] as? String == "\(timeline):1")
            let digest = try #require(empty["digest"] as? String)
            #expect(digest.count == 64 && digest.allSatisfy { "0123456789abcdef".contains($0) })
            #expect(empty["changes"] as? Int == 1)
            #expect(empty["baseline"] is NSNull)
            #expect(empty["unknown"] as? Int == 0)

            try sandbox.ok(["list", "add", "Groceries"])
            try sandbox.ok(["add", "Groceries", "milk"])
            let after = try sandbox.status()
            #expect(after["summary"] as? String == "\(timeline):3")
            #expect(after["changes"] as? Int == 3)
            #expect(after["digest"] as? String != digest)
            #expect(after["timeline"] as? String == timeline)
            let text = try sandbox.ok(["status"]).stdout
            #expect(text.contains("\(timeline):3") && text.contains(after["digest"] as! String))
        }
    }

    @Test func logListsChangesInReplayOrderWithALimit() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            try sandbox.ok(["list", "add", "Groceries"])
            for text in ["milk", "eggs", "bread"] { try sandbox.ok(["add", "Groceries", text]) }
            try sandbox.ok(["done", "eggs"])
            let timeline = try #require(try sandbox.status()["timeline"] as? String)

            let all = try #require(try sandbox.ok(["log", "--json"]).json()["changes"] as? [[String: Any]])
            // Seq 1 is the timeline's begin (DESIGN §11).
            #expect(all.map { $0["change"] as? String } == (1...6).map { "\(timeline):\($0)" })
            #expect(
                all.map { $0["kind"] as? String } == [
                    "timeline.begin", "list.create", "item.create", "item.create", "item.create", "item.complete",
                ])
            let lamports = all.compactMap { $0["lamport"] as? Int }
            #expect(lamports == lamports.sorted() && Set(lamports).count == 6)
            #expect(all.allSatisfy { Set($0.keys) == ["change", "lamport", "kind", "version", "description", "time"] })
            #expect((all.last?["description"] as? String)?.contains("eggs") == true)

            let newest = try #require(
                try sandbox.ok(["log", "--json", "--limit", "2"]).json()["changes"] as? [[String: Any]])
            #expect(newest.map { $0["change"] as? String } == ["\(timeline):5", "\(timeline):6"])
            let none = try #require(
                try sandbox.ok(["log", "--json", "--limit", "0"]).json()["changes"] as? [[String: Any]])
            #expect(none.isEmpty)
            try sandbox.fails(["log", "--limit", "-1"])
            #expect(try sandbox.ok(["log"]).lines.count == 6)
        }
    }

    @Test func compactPrintsTheCutOffAndKeepsTheDigest() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            try sandbox.ok(["list", "add", "Groceries"])
            for text in ["milk", "eggs", "bread"] { try sandbox.ok(["add", "Groceries", text]) }
            try sandbox.ok(["rm", "milk"])
            let before = try sandbox.status()
            let shown = try sandbox.shown()

            let run = try sandbox.ok(["compact"])
            // The begin, then five edits.
            #expect(run.stdout.contains("cut-off 6"), "\(run)")
            #expect(run.stdout.contains("folded 6 changes"), "\(run)")
            let after = try sandbox.status()
            #expect(after["digest"] as? String == before["digest"] as? String)
            #expect(after["summary"] as? String == before["summary"] as? String)
            #expect(after["changes"] as? Int == 0)
            #expect(after["baseline"] as? String == before["summary"] as? String)
            #expect(try sandbox.shown() == shown)
            #expect(try sandbox.ok(["log", "--json"]).json()["changes"] as? [Any] != nil)
            #expect((try sandbox.ok(["log", "--json"]).json()["changes"] as? [Any])?.isEmpty == true)

            // Later edits continue on top of the baseline.
            try sandbox.ok(["add", "Groceries", "butter"])
            let json = try sandbox.ok(["compact", "--json"]).json()
            #expect(json["cutoff"] as? Int == 7)
            #expect(json["folded"] as? Int == 1)
            #expect(try sandbox.shown().first?.pendingTexts == ["eggs", "bread", "butter"])
        }
    }

    @Test func rejoinStartsANewTimelineAndKeepsTheDigest() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            try sandbox.ok(["list", "add", "Groceries"])
            try sandbox.ok(["add", "Groceries", "milk"])
            try sandbox.ok(["add", "Groceries", "eggs"])
            try sandbox.ok(["done", "milk"])
            let before = try sandbox.status()
            let old = try #require(before["timeline"] as? String)

            let run = try sandbox.ok(["rejoin"])
            let after = try sandbox.status()
            let new = try #require(after["timeline"] as? String)
            #expect(new != old)
            #expect(run.stdout.contains(old) && run.stdout.contains(new), "\(run)")
            #expect(after["digest"] as? String == before["digest"] as? String)
            // The old timeline (begin and four edits) got its end; the new one its begin (superseding the old),
            // then the re-sent list and two items. Not the completion: the old signed timeline's own changes reach
            // every peer, and a completion sent again would undo a reopen made meanwhile elsewhere (J4).
            let summary = try #require(after["summary"] as? String)
            #expect(Set(summary.split(separator: ",").map(String.init)) == ["\(old):6", "\(new):4"])
            let log = try #require(try sandbox.ok(["log", "--json"]).json()["changes"] as? [[String: Any]])
            #expect(log.contains { $0["change"] as? String == "\(old):6" && $0["kind"] as? String == "timeline.end" })
            #expect(log.contains { $0["change"] as? String == "\(new):1" && $0["kind"] as? String == "timeline.begin" })
            // Editing goes on, on the new timeline.
            try sandbox.ok(["add", "Groceries", "bread"])
            #expect((try sandbox.status()["summary"] as? String)?.contains("\(new):5") == true)
        }
    }

    @Test func homeOptionTakesPrecedenceOverPLAIT_HOME() throws {
        try withSandbox { sandbox in
            let explicit = sandbox.root + "/explicit"
            try sandbox.ok(["init", "--name", "explicit", "--home", explicit])
            #expect(FileManager.default.fileExists(atPath: explicit + "/plait.db"))
            #expect(!FileManager.default.fileExists(atPath: sandbox.home), "--home wins over PLAIT_HOME")

            let missing = try sandbox.fails(["id"])
            #expect(missing.stderr.contains(sandbox.home), "the error names the home it looked in: \(missing)")
            #expect(missing.stderr.contains("plait init"), "\(missing)")

            try sandbox.ok(["init", "--name", "environment"])
            let viaOption = try sandbox.ok(["id", "--home", explicit]).lines
            let viaEnvironment = try sandbox.ok(["id"], environment: ["PLAIT_HOME": explicit]).lines
            let defaultHome = try sandbox.ok(["id"]).lines
            #expect(viaOption.first == "explicit")
            #expect(viaEnvironment == viaOption)
            #expect(defaultHome.first == "environment")
            #expect(defaultHome.last != viaOption.last)

            // Without either, the XDG data directory.
            try sandbox.ok(["init", "--name", "xdg"], environment: ["PLAIT_HOME": nil])
            #expect(FileManager.default.fileExists(atPath: sandbox.root + "/xdg-data/plait/plait.db"))
            #expect(try sandbox.ok(["id"], environment: ["PLAIT_HOME": nil]).lines.first == "xdg")
            // A relative --home is taken from the working directory.
            #expect(try sandbox.ok(["id", "--home", "explicit"]).lines == viaOption)
        }
    }

    enum ConfigSource: String, CaseIterable, CustomStringConvertible {
        case xdg, option, environment
        var description: String { rawValue }
    }

    @Test(arguments: ConfigSource.allCases)
    func aConfigWithAnUnknownKeyIsRefused(source: ConfigSource) throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            let before = try sandbox.fingerprint()
            let file: String
            var arguments: [String] = []
            var environment: [String: String?] = [:]
            switch source {
            case .xdg:
                try FileManager.default.createDirectory(
                    atPath: sandbox.configHome + "/plait", withIntermediateDirectories: true)
                file = sandbox.configHome + "/plait/plait.toml"
            case .option:
                file = sandbox.root + "/option.toml"
                arguments = ["--config", file]
            case .environment:
                file = sandbox.root + "/environment.toml"
                environment["PLAIT_CONFIG"] = file
            }
            try "[store]\nmax_change_bytes = 4096\nmax_chnage_bytes = 1\n".write(
                toFile: file, atomically: true, encoding: .utf8)
            let refused = try sandbox.fails(["list", "add", "Groceries"] + arguments, environment: environment)
            #expect(refused.stderr.contains("store.max_chnage_bytes"), "the error names the key: \(refused)")
            #expect(refused.stderr.contains(file), "the error names the file: \(refused)")

            try "[stroe]\nmax_change_bytes = 4096\n".write(toFile: file, atomically: true, encoding: .utf8)
            let section = try sandbox.fails(["status"] + arguments, environment: environment)
            #expect(section.stderr.contains("stroe"), "\(section)")

            try "[store]\nmax_change_bytes = 4096\n".write(toFile: file, atomically: true, encoding: .utf8)
            #expect(try sandbox.fingerprint() == before, "nothing was written while the config was refused")
            try sandbox.ok(["list", "add", "Groceries"] + arguments, environment: environment)
            // The limit from the config is in force: a 5000-byte item is over 4096 bytes.
            let big = String(repeating: "x", count: 5000)
            let tooLarge = try sandbox.fails(["add", "Groceries", big] + arguments, environment: environment)
            #expect(tooLarge.stderr.contains("4096"), "\(tooLarge)")
        }
    }

    @Test func anExplicitConfigThatDoesNotExistIsRefused() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            let missing = sandbox.root + "/nope.toml"
            let run = try sandbox.fails(["status", "--config", missing])
            #expect(run.stderr.contains(missing), "\(run)")
            #expect(try sandbox.fails(["status"], environment: ["PLAIT_CONFIG": missing]).stderr.contains(missing))
        }
    }

    @Test func aDamagedStoreIsRefusedAndLeftAsItIs() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            try sandbox.ok(["list", "add", "Groceries"])
            let store = sandbox.home + "/plait.db"
            for suffix in ["-wal", "-shm"] { try? FileManager.default.removeItem(atPath: store + suffix) }
            // Seeded garbage (SplitMix64, seed 0xDA4A6E).
            var state: UInt64 = 0xDA4A6E
            let garbage = (0..<16384).map { _ -> UInt8 in
                state &+= 0x9E37_79B9_7F4A_7C15
                var z = state
                z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
                z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
                return UInt8(truncatingIfNeeded: z ^ (z >> 31))
            }
            try Data(garbage).write(to: URL(fileURLWithPath: store))
            let before = fingerprint(ofFile: store)

            for command in [["status"], ["show"], ["list", "add", "x"], ["compact"], ["id"]] {
                let run = try sandbox.fails(command)
                #expect(run.stderr.contains("is damaged (not a SQLite database)"), "\(run)")
                #expect(run.stderr.split(separator: "\n").count == 1, "one sentence, no stack trace: \(run)")
                #expect(fingerprint(ofFile: store) == before)
            }
            #expect(!FileManager.default.fileExists(atPath: store + "-wal"))
        }
    }

    /// A store a newer plait migrated: refused with a clear error, and the file is left byte for byte.
    @Test func aStoreFromANewerPlaitIsRefusedAndLeftAsItIs() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            try sandbox.ok(["list", "add", "Groceries"])
            let store = sandbox.home + "/plait.db"
            try runSQLite(store, "INSERT INTO grdb_migrations VALUES ('v99-future');")
            let before = fingerprint(ofFile: store)

            for command in [["status"], ["list", "add", "x"]] {
                let run = try sandbox.fails(command)
                #expect(run.stderr.contains("newer plait") && run.stderr.contains("v99-future"), "\(run)")
                #expect(
                    fingerprint(ofFile: store) == before, "`plait \(command.joined(separator: " "))` wrote to the store"
                )
            }
        }
    }
}

/// Runs SQL on a file with the system's `sqlite3` shell, as another program (or a newer plait) would.
func runSQLite(_ path: String, _ sql: String) throws {
    guard let tool = ["/usr/bin/sqlite3", "/usr/local/bin/sqlite3"].first(where: FileManager.default.isExecutableFile)
    else { throw CLITestFailure("this test needs the sqlite3 shell (apt-get install -y sqlite3)") }
    let shell = try ChildProcess.run(tool, [path, sql])
    guard shell.succeeded else {
        throw CLITestFailure("sqlite3 \(path) failed (\(shell.termination)): \(shell.errors)")
    }
}

/// Wall times are the author's clock, its word: one a broken or hostile clock gave (2^63 − 1 ms, before 1970)
/// is not printed as a date in year 5,828,963 (third hostile tester of 2026-11-25); `time` is null, and the plain
/// log says so.
@Suite struct AbsurdWallTimeTests {
    @Test func aChangeWithAnAbsurdWallTimeIsLoggedWithoutADate() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            try sandbox.ok(["list", "add", "Groceries"])
            let store = try Store.open(at: sandbox.home + "/plait.db", synchronousFull: false)
            let replica = try Replica(store: store)
            var previous: Change?
            for (seq, wall) in [Int64.max, -1, Int64.min].enumerated() {
                let payload = ListsChange.listCreate(
                    id: ObjectID(high: 0xC10C, low: UInt64(seq + 1)), title: "from \(wall)", color: nil,
                    at: .top)
                let change = Change(
                    timeline: TimelineID(0xC10C), seq: UInt64(seq + 1), lamport: UInt64(seq + 1),
                    previousHash: previous?.hash ?? Change.zeroHash, kind: payload.kind, version: 1, wallTime: wall,
                    payload: payload.payload)
                _ = try replica.integrate([change])
                previous = change
            }
            let entries = try #require(try sandbox.ok(["log", "--json"]).json()["changes"] as? [[String: Any]])
            let foreign = entries.filter { ($0["change"] as? String)?.hasPrefix(TimelineID(0xC10C).description) == true }
            #expect(foreign.count == 3 && foreign.allSatisfy { $0["time"] is NSNull }, "\(foreign)")
            let own = entries.filter { !foreign.map { $0["change"] as? String }.contains($0["change"] as? String) }
            #expect(!own.isEmpty && own.allSatisfy { ($0["time"] as? String)?.hasPrefix("20") == true }, "\(own)")
            let plain = try sandbox.ok(["log"]).stdout
            #expect(plain.components(separatedBy: "(no valid wall time)").count == 4, "\(plain)")
            #expect(!plain.contains("5828963"), "\(plain)")
        }
    }
}
