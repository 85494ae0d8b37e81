import Foundation
import Testing

/// `plait doctor`: every check reports, failures say what to do, nothing is written.
@Suite(.serialized) struct DoctorTests {
    let sync = SyncTests()

    func checks(_ run: PlaitRun) throws -> [String: (status: String, detail: String, advice: String?)] {
        let list = try run.json()["checks"] as? [[String: Any]] ?? []
        var out: [String: (String, String, String?)] = [:]
        for check in list {
            out[check["check"] as? String ?? "?"] = (
                check["status"] as? String ?? "?", check["detail"] as? String ?? "", check["advice"] as? String
            )
        }
        return out
    }

    @Test func aHealthyDeviceAndItsPeers() throws {
        try withSandbox { sandbox in
            let d = try sync.devices(sandbox, ["laptop", "server"])
            try sync.pair(sandbox, d[0], d[1])
            let agent = try RunningAgent(sandbox: sandbox, home: d[1].home)
            defer { #expect(agent.stop() == 0) }
            try sandbox.ok(["pair", "--trust", d[1].id, "--address", agent.address, "--name", "server", "--home", d[0].home])
            let storeBefore = fingerprint(ofFile: d[0].home + "/plait.db")
            let run = try sandbox.ok(["doctor", "--home", d[0].home, "--listen", "127.0.0.1:0", "--json"])
            let found = try checks(run)
            #expect(found["certificate"]?.status == "ok" && found["certificate"]?.detail.contains(d[0].id) == true)
            #expect(found["store"]?.status == "ok" && found["store"]?.detail.contains("integrity_check ok") == true)
            #expect(found["listen address"]?.status == "ok")
            #expect(found["peer server"]?.status == "ok", "\(run)")
            // The probe's close is not reported with the dialling side's words (bad-luck tester 2026-11-25, H12).
            let probed = eventually(10) { agent.log.contains("closed its connection before its Hello (`plait doctor`") }
            #expect(probed && !agent.log.contains("it is busy"), "\(agent.log)")
            // No avahi-daemon here (the sandbox's bus leads nowhere): a warning, not a failure.
            #expect(found["avahi-daemon"]?.status == "warning", "\(run)")
            #expect(found["avahi-daemon"]?.detail.contains("cannot be reached") == true, "\(run)")
            #expect(found["avahi-daemon"]?.advice?.contains("systemctl start avahi-daemon") == true)
            #expect(found["avahi-daemon"]?.advice?.contains("agent.peers") == true)
            let config = sandbox.root + "/no-discovery.toml"
            try Data("[discovery]\nenabled = false\n".utf8).write(to: URL(fileURLWithPath: config))
            let off = try checks(
                try sandbox.ok(
                    ["doctor", "--home", d[0].home, "--listen", "127.0.0.1:0", "--json", "--config", config]))
            #expect(off["avahi-daemon"]?.status == "ok" && off["avahi-daemon"]?.detail.contains("not checked") == true)
            #expect(fingerprint(ofFile: d[0].home + "/plait.db") == storeBefore, "doctor writes nothing")

            // The agent's own port: held by this home's agent is fine, held by another device's is not.
            let own = try sandbox.ok(["doctor", "--home", d[1].home, "--listen", agent.address, "--json"])
            #expect(try checks(own)["listen address"]?.detail.contains("this home's running agent") == true, "\(own)")
            // Another, free address while this home's agent runs: not "free for `plait agent`" as if none ran (a new
            // user's finding, tests/hostile/2026-11-25-f F10).
            let elsewhere = try sandbox.ok(["doctor", "--home", d[1].home, "--listen", "127.0.0.1:0", "--json"])
            let detail = try checks(elsewhere)["listen address"]?.detail ?? ""
            #expect(detail.contains("this home's agent is running, not at 127.0.0.1:0"), "\(elsewhere)")
            let other = try sandbox.run(["doctor", "--home", d[0].home, "--listen", agent.address])
            #expect(other.status == 1 && other.stdout.contains("FAIL  listen address"), "\(other)")
            #expect(!agent.log.contains("pending"), "doctor's probe is not a pending device: \(agent.log)")
        }
    }

    @Test func failuresSayWhatToDo() throws {
        try withSandbox { sandbox in
            let d = try sync.devices(sandbox, ["laptop", "desktop"])
            // Paired here only, at an address where nothing listens.
            try sandbox.ok(["pair", "--trust", d[1].id, "--address", "127.0.0.1:1", "--name", "desktop", "--home", d[0].home])
            let unreachable = try sandbox.run(["doctor", "--home", d[0].home, "--listen", "127.0.0.1:0"])
            #expect(unreachable.status == 1)
            #expect(unreachable.stdout.contains("FAIL  peer desktop: 127.0.0.1:1 is unreachable"), "\(unreachable)")
            #expect(unreachable.stdout.contains("→ start `plait agent` on desktop"), "\(unreachable)")

            // A damaged store: reported with advice, and left exactly as it was.
            let store = d[0].home + "/plait.db"
            var bytes = [UInt8](FileManager.default.contents(atPath: store)!)
            for index in stride(from: 4096, to: min(bytes.count, 12_288), by: 7) { bytes[index] ^= 0x5A }
            FileManager.default.createFile(atPath: store, contents: Data(bytes))
            let before = fingerprint(ofFile: store)
            let damaged = try sandbox.run(["doctor", "--home", d[0].home, "--listen", "127.0.0.1:0", "--json"])
            #expect(damaged.status == 1)
            let found = try checks(damaged)
            #expect(found["store"]?.status == "failed", "\(damaged)")
            #expect(found["store"]?.advice?.contains("backup") == true)
            #expect(found["certificate"]?.status == "ok", "one broken piece does not hide the others")
            #expect(fingerprint(ofFile: store) == before)
        }
    }
    /// Own changes kept aside when a baseline folded their timeline beyond them (`ForkBaselineTests` makes them the
    /// real way): doctor names them as a warning, says nothing was deleted, and what it means; it writes nothing.
    @Test func ownChangesKeptAsideAreReported() throws {
        try withSandbox { sandbox in
            let d = try sync.devices(sandbox, ["laptop"])
            try sandbox.ok(["list", "add", "Groceries", "--home", d[0].home])
            try sandbox.ok(["add", "Groceries", "milk", "--home", d[0].home])
            let store = d[0].home + "/plait.db"
            let quiet = try checks(try sandbox.ok(["doctor", "--home", d[0].home, "--listen", "127.0.0.1:0", "--json"]))
            #expect(quiet["kept aside"] == nil)
            // As adoption leaves them: moved out of the changes table with their bytes.
            try runSQLite(
                store,
                """
                INSERT INTO kept_aside (tl, seq, lamport, kind, version, wall, prev, payload, witness_tl, witness_seq,
                    signature, reason, at)
                SELECT tl, seq, lamport, kind, version, wall, prev, payload, witness_tl, witness_seq, signature,
                    'a peer''s baseline folds this timeline up to change 9', 0 FROM changes;
                """)
            let before = fingerprint(ofFile: store)
            let run = try sandbox.run(["doctor", "--home", d[0].home, "--listen", "127.0.0.1:0", "--json"])
            let found = try checks(run)
            let kept = try #require(found["kept aside"], "\(run)")
            #expect(kept.status == "warning")
            #expect(kept.detail.contains("of this device's own changes") && kept.detail.contains("Nothing was deleted"))
            #expect(kept.detail.contains("folds this timeline up to change 9"))
            #expect(kept.advice?.contains("keep this home") == true)
            #expect(fingerprint(ofFile: store) == before, "doctor writes nothing")
        }
    }
}
