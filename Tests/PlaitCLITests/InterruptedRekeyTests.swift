import Foundation
import PlaitNetnsSupport
import PlaitTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `plait rejoin --new-key` killed after it swapped the key files and before the store started the new timeline
/// (bad-luck tester 2026-11-25, H2). The home then held the new key while its timeline was the old key's: `add`
/// said "added" and signed the change with the new key, every peer refused it as forged, `doctor` said nothing, and
/// `plait rejoin` ended the old timeline with the new key too, refused the same way. Nothing this device wrote
/// reached any other device again.
@Suite struct InterruptedRekeyTests {
    /// Runs `plait rejoin --new-key` on `home` under strace, which delivers SIGKILL to it as it enters its first
    /// `rmdir(2)`: the one right after the last key file is moved into place (`Home.rejoinWithNewKey`). The PID
    /// held is strace's; the plait process it runs dies of the signal, and strace ends with it.
    func rekeyKilledAfterTheKeySwap(_ sandbox: Sandbox, home: String) throws {
        try rekeyKilled(sandbox, home: home, entering: "rmdir", number: 1)
    }

    /// Runs `plait rejoin --new-key` on `home` under strace, which delivers SIGKILL to it as it enters its
    /// `number`th `syscall`.
    func rekeyKilled(_ sandbox: Sandbox, home: String, entering syscall: String, number: Int) throws {
        let strace = try ChildProcess(
            "/usr/bin/strace",
            ["-f", "-qq", "-o", "/dev/null", "-e", "trace=\(syscall)", "-e", "inject=\(syscall):signal=KILL:when=\(number)",
             try PlaitExecutable.path.get(), "rejoin", "--new-key", "--home", home],
            environment: sandbox.baseEnvironment, stderr: sandbox.root + "/strace.err")
        guard let ended = strace.wait(seconds: 60) else {
            strace.stop()
            throw CLITestFailure("strace running `plait rejoin --new-key` did not end")
        }
        // strace ends as its tracee did: by SIGKILL.
        let errors = (try? String(contentsOfFile: sandbox.root + "/strace.err", encoding: .utf8)) ?? ""
        #expect(ended.bySignal && ended.status == SIGKILL, "strace: \(ended), \(errors)")
    }

    /// A laptop and a server paired, the laptop holding list L with item "before", synced to the server's agent
    /// (the caller stops it).
    func laptopSyncedToAServerAgent(_ sandbox: Sandbox) throws -> (
        laptop: (home: String, id: String), server: (home: String, id: String), agent: RunningAgent
    ) {
        let devices = try sandbox.pairedHomes(["laptop", "server"])
        try sandbox.ok(["list", "add", "L", "--home", devices[0].home])
        try sandbox.ok(["add", "L", "before", "--home", devices[0].home])
        let agent = try RunningAgent(sandbox: sandbox, home: devices[1].home)
        do {
            try sandbox.ok(["sync", "--peer", agent.address, "--home", devices[0].home])
        } catch {
            agent.stop()
            throw error
        }
        return (devices[0], devices[1], agent)
    }

    @Test func anInterruptedRekeyIsFinishedByRejoinAndNothingIsSignedWithTheWrongKey() throws {
        try withSandbox { sandbox in
            let (laptop, server, agent) = try laptopSyncedToAServerAgent(sandbox)
            defer { agent.stop() }

            try rekeyKilledAfterTheKeySwap(sandbox, home: laptop.home)
            // The half-done state: the new key in the home, the old one retired, the store on the old timeline.
            #expect(try sandbox.ok(["id", "--home", laptop.home]).lines.last != laptop.id)
            let retired = laptop.home + "/retired/" + laptop.id.filter { $0 != "-" }
            #expect(FileManager.default.fileExists(atPath: retired + "/key.pem"))

            // An edit is refused, saying what to do, and writes nothing.
            let add = try sandbox.fails(["add", "L", "after1", "--home", laptop.home])
            #expect(add.stderr.contains("is not the key this device's timeline"), "\(add)")
            #expect(add.stderr.contains("run `plait rejoin` to finish it"), "\(add)")
            #expect(try !sandbox.ok(["show", "--json", "--home", laptop.home]).stdout.contains("after1"))
            // doctor says so.
            let doctor = try sandbox.run(["doctor", "--listen", "127.0.0.1:0", "--home", laptop.home])
            #expect(doctor.status != 0, "\(doctor)")
            #expect(doctor.stdout.contains("is not the key this device's timeline"), "\(doctor)")

            // `rejoin` ends the old timeline with the retired key; the next edit and the sync reach the peer.
            let rejoin = try sandbox.ok(["rejoin", "--home", laptop.home])
            #expect(rejoin.stdout.contains("finished the key swap"), "\(rejoin)")
            #expect(rejoin.stdout.contains("\nended timeline "), "\(rejoin)")
            try sandbox.ok(["add", "L", "after2", "--home", laptop.home])
            let sync = try sandbox.ok(["sync", "--peer", agent.address, "--home", laptop.home])
            #expect(!sync.stdout.contains("ERROR") && !sync.stderr.contains("ERROR"), "\(sync)")
            let onServer = try sandbox.ok(["show", "--json", "--home", server.home]).stdout
            #expect(onServer.contains("after2") && onServer.contains("before"), "\(onServer)")
            let peers = try sandbox.ok(["peers", "--home", server.home]).stdout
            #expect(!peers.contains("does not verify"), "\(peers)")
            #expect(try sandbox.run(["doctor", "--listen", "127.0.0.1:0", "--home", laptop.home]).status == 0)
        }
    }

    /// Killed between its renames (bad-luck tester 2026-11-25, H6): a rekey makes six, the statement's two, then
    /// the old key and certificate into `retired/<old ID>/` and the new ones into the home. Killed as it enters the
    /// 4th, 5th or 6th, the home held one key file or none, and every command said "key.pem is missing; restore it
    /// from a backup" — though both keys were there. `plait rejoin` now finishes the swap (the paired device was
    /// recorded as one to tell), and the next edit reaches the peer under the new Device ID.
    @Test(arguments: [3, 4, 5, 6])
    func aRekeyKilledBetweenItsRenamesIsFinishedByRejoin(rename: Int) throws {
        try withSandbox { sandbox in
            let (laptop, server, agent) = try laptopSyncedToAServerAgent(sandbox)
            defer { agent.stop() }

            try rekeyKilled(sandbox, home: laptop.home, entering: "rename", number: rename)
            if rename > 3 {
                let doctor = try sandbox.run(["doctor", "--listen", "127.0.0.1:0", "--home", laptop.home])
                #expect(doctor.stdout.contains("run `plait rejoin`"), "\(doctor)")
                #expect(!doctor.stdout.contains("from a backup"), "\(doctor)")
                let id = try sandbox.fails(["id", "--home", laptop.home])
                #expect(id.stderr.contains("Run `plait rejoin` to finish it"), "\(id)")
            }
            let rejoin = try sandbox.ok(["rejoin", "--home", laptop.home])
            #expect(rejoin.stdout.contains("finished the key swap"), "\(rejoin)")
            #expect(try sandbox.ok(["id", "--home", laptop.home]).lines.last != laptop.id)
            try sandbox.ok(["add", "L", "after", "--home", laptop.home])
            let sync = try sandbox.ok(["sync", "--peer", agent.address, "--home", laptop.home])
            #expect(!sync.stdout.contains("ERROR") && !sync.stderr.contains("ERROR"), "\(sync)")
            let onServer = try sandbox.ok(["show", "--json", "--home", server.home]).stdout
            #expect(onServer.contains("after") && onServer.contains("before"), "\(onServer)")
            #expect(try sandbox.run(["doctor", "--listen", "127.0.0.1:0", "--home", laptop.home]).status == 0)
        }
    }

    /// The same on a device with no paired device to tell: the swap still goes forward (no paired device was
    /// recorded, which must not make it go back half way: a review found the new key then left beside the old
    /// certificate), and the home's identity is whole afterwards.
    @Test(arguments: [4, 6])
    func aRekeyOfAnUnpairedDeviceKilledBetweenItsRenamesIsFinished(rename: Int) throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            try sandbox.ok(["list", "add", "L"])
            try sandbox.ok(["add", "L", "before"])
            let id = try sandbox.ok(["id"]).lines.last
            try rekeyKilled(sandbox, home: sandbox.home, entering: "rename", number: rename)
            let rejoin = try sandbox.ok(["rejoin"])
            #expect(rejoin.stdout.contains("finished the key swap"), "\(rejoin)")
            #expect(try sandbox.ok(["id"]).lines.last != id)
            try sandbox.ok(["add", "L", "after"])
            #expect(try sandbox.shown().first?.pendingTexts == ["before", "after"])
            #expect(try sandbox.run(["doctor", "--listen", "127.0.0.1:0"]).status == 0)
        }
    }
}
