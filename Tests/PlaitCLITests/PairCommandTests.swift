import Foundation
import PlaitNetnsSupport
import PlaitPairing
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A `plait pair` process started by a test, with its answer on standard input; always stopped by its PID.
final class RunningPair {
    let process: ChildProcess
    let arguments: [String]
    let outputPath: String
    let errorPath: String

    init(sandbox: Sandbox, _ arguments: [String], answer: String) throws {
        self.arguments = arguments
        let base = sandbox.root + "/io/pair-\(UUID().uuidString)"
        outputPath = base + ".out"
        errorPath = base + ".err"
        _ = FileManager.default.createFile(atPath: base + ".in", contents: Data(answer.utf8))
        process = try ChildProcess(
            try PlaitExecutable.path.get(), arguments, environment: sandbox.baseEnvironment, stdin: base + ".in",
            stdout: outputPath, stderr: errorPath)
    }

    var stdout: String { (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? "" }
    var stderr: String { (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? "" }

    /// The port a `--listen 127.0.0.1:0` responder printed, once it did (it dies or 20 s pass: an error).
    func listeningPort() throws -> UInt16 {
        let marker = "listening for pairing on 127.0.0.1:"
        let deadline = Date().addingTimeInterval(20)
        while true {
            if let line = stdout.split(separator: "\n").first(where: { $0.hasPrefix(marker) }),
                let port = line.dropFirst(marker.count).split(separator: " ").first.flatMap({ UInt16($0) })
            {
                return port
            }
            guard process.isRunning, Date() < deadline else {
                stop()
                throw CLITestFailure("`plait pair` did not start listening: \(self)")
            }
            usleep(10_000)
        }
    }

    /// Waits for the exit (SIGTERM after `seconds`, then SIGKILL) and returns the status.
    @discardableResult
    func finish(within seconds: Double = 30) -> Int32 {
        if !waitForExit(seconds) {
            stop()
        }
        return process.terminationStatus
    }

    /// Stops the process if it still runs.
    func stop() {
        process.stop(grace: 5)
    }

    /// Whether the process exited within `seconds`.
    private func waitForExit(_ seconds: Double) -> Bool {
        process.wait(seconds: seconds) != nil
    }

    var description: String {
        "`plait \(arguments.joined(separator: " "))`\nstdout: \(stdout)\nstderr: \(stderr)"
    }
}

/// Interactive pairing as two users do it: two `plait pair` processes, answers typed on standard input.
@Suite(.serialized) struct PairCommandTests {
    func device(_ sandbox: Sandbox, _ name: String) throws -> (home: String, id: String) {
        let home = sandbox.root + "/" + name
        try sandbox.ok(["init", "--name", name, "--home", home])
        return (home, try sandbox.ok(["id", "--home", home]).lines.last!)
    }

    func peers(_ sandbox: Sandbox, _ home: String) throws -> [[String: Any]] {
        try sandbox.ok(["peers", "--json", "--home", home]).json()["peers"] as? [[String: Any]] ?? [["broken": true]]
    }

    /// The code a transcript showed.
    func code(_ transcript: String) -> String? {
        transcript.split(separator: "\n").first { $0.hasPrefix("code: ") }.map { String($0.dropFirst(6)) }
    }

    /// Runs a responder with `listenerAnswer` and an initiator with `initiatorAnswer`; returns both, finished.
    func pair(
        _ sandbox: Sandbox, _ a: (home: String, id: String), _ b: (home: String, id: String),
        listenerAnswer: String, initiatorAnswer: String
    ) throws -> (listener: RunningPair, initiator: RunningPair, port: UInt16) {
        let listener = try RunningPair(
            sandbox: sandbox, ["pair", "--listen", "127.0.0.1:0", "--home", a.home, "--timeout", "30"],
            answer: listenerAnswer)
        defer { listener.stop() }
        let port = try listener.listeningPort()
        #expect(listener.stdout.contains("this device: \(a.id) (alpha)"))
        let initiator = try RunningPair(
            sandbox: sandbox, ["pair", "--connect", "127.0.0.1:\(port)", "--home", b.home, "--timeout", "30"],
            answer: initiatorAnswer)
        defer { initiator.stop() }
        initiator.finish()
        listener.finish()
        return (listener, initiator, port)
    }

    @Test func twoDevicesThatBothSayYesTrustEachOtherAndSync() throws {
        try withSandbox { sandbox in
            let a = try device(sandbox, "alpha")
            let b = try device(sandbox, "beta")
            let (listener, initiator, port) = try pair(sandbox, a, b, listenerAnswer: "y\n", initiatorAnswer: "yes\n")
            #expect(listener.process.terminationStatus == 0, "\(listener)")
            #expect(initiator.process.terminationStatus == 0, "\(initiator)")
            let shown = code(listener.stdout)
            #expect(shown != nil && shown == code(initiator.stdout), "both screens show one code")
            #expect(shown?.wholeMatch(of: /[0-9]{3} [0-9]{3}/) != nil, "six digits in two groups: \(shown ?? "none")")
            #expect(listener.stdout.contains("other device: \(b.id) (\"beta\""))
            #expect(initiator.stdout.contains("other device: \(a.id) (\"alpha\""))
            #expect(listener.stdout.contains("Do both screens show the same code? [y/N]"))
            #expect(listener.stdout.contains("paired with \(b.id)"))
            #expect(initiator.stdout.contains("paired with \(a.id) (\"alpha\") at 127.0.0.1:\(port)"))

            let onA = try peers(sandbox, a.home)
            let onB = try peers(sandbox, b.home)
            #expect(onA.map { $0["device"] as? String } == [b.id] && onA.first?["name"] as? String == "beta")
            #expect(onB.map { $0["device"] as? String } == [a.id] && onB.first?["name"] as? String == "alpha")
            #expect(onB.first?["address"] as? String == "127.0.0.1:\(port)", "the initiator knows where it connected")

            // Paired means sync works, both ways.
            try sandbox.ok(["batch", "--home", a.home], stdin: "list add Inbox\nadd Inbox milk\n")
            let agent = try RunningAgent(sandbox: sandbox, home: a.home)
            defer { agent.stop() }
            let sync = try sandbox.ok(["sync", "--peer", agent.address, "--home", b.home])
            #expect(sync.stdout.contains("pulled 3 changes"), "\(sync)")
        }
    }

    /// Eight TCP connections that never send a byte, made to `plait pair --listen` before the honest device
    /// connects from the same address, do not keep it from pairing. The listener handshook one connection at a
    /// time, each for up to 10 s: the honest `--connect --timeout 20` failed (third hostile tester of 2026-11-25).
    @Test func silentConnectionsDoNotHoldUpAnHonestDevice() throws {
        try withSandbox { sandbox in
            let a = try device(sandbox, "alpha")
            let b = try device(sandbox, "beta")
            let listener = try RunningPair(
                sandbox: sandbox, ["pair", "--listen", "127.0.0.1:0", "--home", a.home, "--timeout", "40"],
                answer: "y\n")
            defer { listener.stop() }
            let port = try listener.listeningPort()
            var silent: [Int32] = []
            defer { for descriptor in silent { close(descriptor) } }
            for _ in 0..<8 { silent.append(try silentConnection(to: port)) }
            let initiator = try RunningPair(
                sandbox: sandbox, ["pair", "--connect", "127.0.0.1:\(port)", "--home", b.home, "--timeout", "20"],
                answer: "y\n")
            defer { initiator.stop() }
            #expect(initiator.finish() == 0, "\(initiator)")
            #expect(listener.finish() == 0, "\(listener)")
            #expect(try peers(sandbox, a.home).first?["device"] as? String == b.id)
            #expect(try peers(sandbox, b.home).first?["device"] as? String == a.id)
        }
    }

    /// A TCP connection to 127.0.0.1:`port` that sends nothing (the caller closes it).
    func silentConnection(to port: UInt16) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        try #require(descriptor >= 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        if connected != 0 { close(descriptor) }
        try #require(connected == 0, "connect: \(String(cString: strerror(errno)))")
        return descriptor
    }

    @Test func oneSideAnsweringNoStoresNothingOnEither() throws {
        try withSandbox { sandbox in
            let a = try device(sandbox, "alpha")
            let b = try device(sandbox, "beta")
            let (listener, initiator, _) = try pair(sandbox, a, b, listenerAnswer: "n\n", initiatorAnswer: "y\n")
            #expect(listener.process.terminationStatus != 0, "\(listener)")
            #expect(initiator.process.terminationStatus != 0, "\(initiator)")
            #expect(listener.stderr.contains("codes were refused: nothing stored"), "\(listener)")
            #expect(initiator.stderr.contains("pairing cancelled: the other device refused"), "\(initiator)")
            #expect(try peers(sandbox, a.home).isEmpty)
            #expect(try peers(sandbox, b.home).isEmpty)
            for run in [listener, initiator] { #expect(!run.stderr.contains("Fatal error")) }
        }
    }

    @Test func noAnswerAtAllIsNo() throws {
        try withSandbox { sandbox in
            let a = try device(sandbox, "alpha")
            let b = try device(sandbox, "beta")
            // The initiator's standard input is empty: the end of input is a no.
            let (listener, initiator, _) = try pair(sandbox, a, b, listenerAnswer: "y\n", initiatorAnswer: "")
            #expect(initiator.process.terminationStatus != 0, "\(initiator)")
            // Said as what it was: nobody answered (it read "codes were refused").
            #expect(initiator.stderr.contains("no answer: standard input ended before a y or n"), "\(initiator)")
            #expect(listener.process.terminationStatus != 0 && listener.stderr.contains("the other device refused"))
            #expect(try peers(sandbox, a.home).isEmpty && peers(sandbox, b.home).isEmpty)
        }
    }

    @Test func withoutAvahiPairingByDiscoverySaysSoAndHowToPairInstead() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            let started = Date()
            let run = try sandbox.fails(["pair"])
            #expect(Date().timeIntervalSince(started) < 10, "it does not wait for a daemon that is not there")
            #expect(run.stderr.contains("cannot look for devices in pairing mode: avahi-daemon"), "\(run)")
            #expect(run.stderr.split(separator: "\n").count == 1, "one sentence: \(run)")
            for option in ["--listen", "--connect", "--trust", "systemctl start avahi-daemon"] {
                #expect(run.stderr.contains(option), "\(run)")
            }
            let address = try sandbox.fails(["pair", "--address", "192.0.2.7:7400"])
            #expect(address.stderr.contains("pairing by discovery stores no address"), "\(address)")
            let both = try sandbox.fails(["pair", "--listen", "127.0.0.1:0", "--connect", "127.0.0.1:7400"])
            #expect(both.stderr.contains("only one of"))
            #expect(try sandbox.fails(["pair", "--listen", "127.0.0.1:0", "--json"]).stderr.contains("--json goes with --trust"))
            #expect(try sandbox.fails(["pair", "--connect", "127.0.0.1:1"]).stderr.contains("plait pair --listen"))
            #expect(try sandbox.fails(["pair", "--listen", "127.0.0.1"]).stderr.contains("HOST:PORT"))
            let help = try sandbox.ok(["pair", "--help"]).stdout
            for words in ["--listen <host:port>", "--connect <host:port>", "--trust <device-id>", "--timeout", "[y/N]"] {
                #expect(help.contains(words), "pair help lacks \(words)")
            }
        }
    }
}
