import Foundation
import PlaitNetnsSupport
import PlaitTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A store that holds nothing is plait's own, not a foreign file (bad-luck tester 2026-11-25, H10 and H8): `init`
/// killed before it wrote its tables, or a store deleted under a running agent that the agent then made again
/// empty. Every command said the file "is a SQLite database but not a plait store … not made by plait", and `init`
/// refused the home ("already holds a plait device"), so the home was stuck.
@Suite struct EmptyStoreTests {
    /// Runs `plait init` on `home` under strace, which kills it with SIGKILL as it first makes `syscall` on `file`.
    static func initKilled(_ sandbox: Sandbox, home: String, at syscall: String, of file: String) throws {
        let strace = try ChildProcess(
            "/usr/bin/strace",
            ["-f", "-qq", "-o", "/dev/null", "-P", home + "/" + file, "-e", "trace=\(syscall)",
             "-e", "inject=\(syscall):signal=KILL:when=1",
             try PlaitExecutable.path.get(), "init", "--name", "laptop", "--home", home],
            environment: sandbox.baseEnvironment)
        guard let ended = strace.wait(seconds: 60) else {
            strace.stop()
            throw CLITestFailure("strace running `plait init` did not end")
        }
        #expect(ended.bySignal && ended.status == SIGKILL, "\(ended)")
    }

    /// `plait init` killed by strace as it first opens the store's -wal (the store file exists, no table does).
    @Test func anInitKilledBeforeItsTablesCanBeRunAgain() throws {
        try withSandbox { sandbox in
            let home = sandbox.root + "/laptop"
            try Self.initKilled(sandbox, home: home, at: "openat", of: "plait.db-wal")
            #expect(FileManager.default.fileExists(atPath: home + "/plait.db"))
            let certificate = try Data(contentsOf: URL(fileURLWithPath: home + "/cert.pem"))

            let show = try sandbox.fails(["show", "--home", home])
            #expect(show.stderr.contains("is empty (no plait tables, so no data)"), "\(show)")
            #expect(!show.stderr.contains("not a plait store"), "\(show)")
            let doctor = try sandbox.run(["doctor", "--listen", "127.0.0.1:0", "--home", home])
            #expect(doctor.stdout.contains("`plait init` makes the store again"), "\(doctor)")
            #expect(!doctor.stdout.contains("not made by plait"), "\(doctor)")

            try sandbox.ok(["init", "--name", "laptop", "--home", home])
            #expect(
                try Data(contentsOf: URL(fileURLWithPath: home + "/cert.pem")) == certificate,
                "the identity made before is kept")
            try sandbox.ok(["list", "add", "L", "--home", home])
            try sandbox.ok(["add", "L", "milk", "--home", home])
            #expect(try sandbox.run(["doctor", "--listen", "127.0.0.1:0", "--home", home]).status == 0)
        }
    }

    /// `plait init` killed as it writes cert.pem (its key written, the certificate empty, no store yet): `init`
    /// said "cert.pem is corrupt; restore it from a backup", though no device was ever made there.
    @Test func anInitKilledAsItWritesTheCertificateCanBeRunAgain() throws {
        try withSandbox { sandbox in
            let home = sandbox.root + "/laptop"
            try Self.initKilled(sandbox, home: home, at: "write", of: "cert.pem")
            let size = try FileManager.default.attributesOfItem(atPath: home + "/cert.pem")[.size] as? Int
            #expect(size == 0 && FileManager.default.fileExists(atPath: home + "/key.pem"))
            #expect(!FileManager.default.fileExists(atPath: home + "/plait.db"))

            let key = try Data(contentsOf: URL(fileURLWithPath: home + "/key.pem"))
            let again = try sandbox.ok(["init", "--name", "laptop", "--home", home])
            #expect(!again.stdout.contains("keeping this home's key"), "\(again)")
            #expect(again.stdout.contains("moved to identity-left-by-init-"), "\(again)")
            try sandbox.ok(["list", "add", "L", "--home", home])
            #expect(try sandbox.run(["doctor", "--listen", "127.0.0.1:0", "--home", home]).status == 0)
            // The old key is moved aside, never deleted.
            let aside = try FileManager.default.contentsOfDirectory(atPath: home).filter {
                $0.hasPrefix("identity-left-by-init-")
            }
            #expect(aside.count == 1, "\(aside)")
            #expect(
                try Data(contentsOf: URL(fileURLWithPath: home + "/" + (aside.first ?? "?") + "/key.pem")) == key)
        }
    }

    /// An empty cert.pem beside a store that holds a device is damage, not a killed `init`: nothing is remade.
    @Test func anEmptyCertificateOfADeviceIsNotRemade() throws {
        try withSandbox { sandbox in
            let home = sandbox.root + "/laptop"
            try sandbox.ok(["init", "--name", "laptop", "--home", home])
            let key = try Data(contentsOf: URL(fileURLWithPath: home + "/key.pem"))
            try Data().write(to: URL(fileURLWithPath: home + "/cert.pem"))
            let again = try sandbox.fails(["init", "--name", "laptop", "--home", home])
            #expect(again.stderr.contains("already holds a plait device"), "\(again)")
            #expect(try Data(contentsOf: URL(fileURLWithPath: home + "/key.pem")) == key)
        }
    }

    /// The store deleted, or replaced by another file, while an agent runs: the agent wrote on into the file it had
    /// open, which no command opened any more, and what it took or made from then on was lost when it stopped
    /// (bad-luck tester 2026-11-25, H8, what its fix left). It now stops at once, saying why, with status 1.
    @Test(arguments: ["deleted", "replaced", "home moved"])
    func anAgentWhoseStoreIsGoneStops(how: String) throws {
        try withSandbox { sandbox in
            let home = sandbox.root + "/laptop"
            try sandbox.ok(["init", "--name", "laptop", "--home", home])
            try sandbox.ok(["list", "add", "L", "--home", home])
            let agent = try RunningAgent(sandbox: sandbox, home: home)
            defer { agent.stop() }
            // Through the agent: its writer is open on the store.
            try sandbox.ok(["add", "L", "milk", "--home", home])
            let store = home + "/plait.db"
            switch how {
            case "deleted":
                for file in [store, store + "-wal", store + "-shm"] { unlink(file) }
            case "replaced":
                try FileManager.default.copyItem(atPath: store, toPath: home + "/restored.db")
                #expect(rename(home + "/restored.db", store) == 0)
            default:
                // The home moved away and a copy put in its place (hostile tester 2026-11-25-i, I3): the agent went
                // on writing into the moved store while another agent could start on the copy.
                #expect(rename(home, home + ".old") == 0)
                try FileManager.default.copyItem(atPath: home + ".old", toPath: home)
            }
            let ended = agent.process.wait(seconds: 20)
            #expect(ended?.status == 1, "the agent stops with status 1: \(String(describing: ended)) \(agent.log)")
            // A moved home is seen as its store gone, or replaced if the copy is in place by then.
            let said = ["deleted": ["was deleted"], "replaced": ["was replaced"]][how] ?? ["was deleted", "was replaced"]
            #expect(said.contains { agent.log.contains($0) }, "\(agent.log)")
        }
    }

    /// The store deleted while an agent runs: the agent's first write used to make an empty store in its place.
    /// It makes none now, and says the store is gone; `init` then makes it again and a sync brings the data back.
    @Test func aStoreDeletedUnderARunningAgentIsNotMadeAgainEmpty() throws {
        try withSandbox { sandbox in
            let devices = try sandbox.pairedHomes(["laptop", "server"])
            let (laptop, server) = (devices[0], devices[1])
            try sandbox.ok(["list", "add", "L", "--home", laptop.home])
            try sandbox.ok(["add", "L", "milk", "--home", laptop.home])
            let serverAgent = try RunningAgent(sandbox: sandbox, home: server.home)
            defer { serverAgent.stop() }
            try sandbox.ok(["sync", "--peer", serverAgent.address, "--home", laptop.home])

            let agent = try RunningAgent(sandbox: sandbox, home: laptop.home)
            let store = laptop.home + "/plait.db"
            for file in [store, store + "-wal", store + "-shm"] { unlink(file) }
            // The server's next change makes the laptop's agent write (the first write opens its writer).
            try sandbox.ok(["add", "L", "eggs", "--home", server.home])
            _ = try sandbox.run(["sync", "--peer", agent.address, "--home", server.home])
            #expect(!FileManager.default.fileExists(atPath: store), "the agent made a store in place of the deleted one")
            agent.stop()

            try sandbox.ok(["init", "--name", "laptop", "--home", laptop.home])
            try sandbox.ok(["pair", "--trust", server.id, "--home", laptop.home])
            try sandbox.ok(["sync", "--peer", serverAgent.address, "--home", laptop.home])
            let shown = try sandbox.ok(["show", "--json", "--home", laptop.home]).stdout
            #expect(shown.contains("milk") && shown.contains("eggs"), "\(shown)")
        }
    }
}
