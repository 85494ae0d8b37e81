import Foundation
import PlaitNetnsSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `plait demo`: devices started, paired, editing at once and converging, and nothing left behind.
@Suite(.serialized) struct DemoTests {
    /// Whether a process with this PID exists (a zombie counts: the demo must have reaped its children).
    func exists(_ pid: Int) -> Bool {
        kill(pid_t(pid), 0) == 0 || errno != ESRCH
    }

    /// A temporary directory of the sandbox's own, as $TMPDIR for the demo: whatever it leaves shows there.
    func temporary(_ sandbox: Sandbox) throws -> String {
        let path = sandbox.root + "/tmp"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// Checks the figures of a converged run: every device holds every edit, one summary, one digest, and
    /// nothing it started is left.
    func expectConvergedAndClean(_ figures: [String: Any], devices: Int, edits: Int, tmp: String) {
        #expect(figures["converged"] as? Bool == true, "\(figures)")
        let rows = figures["devices"] as? [[String: Any]] ?? []
        #expect(rows.count == devices)
        #expect(Set(rows.compactMap { $0["summary"] as? String }).count == 1, "\(rows)")
        #expect(Set(rows.compactMap { $0["digest"] as? String }).count == 1, "\(rows)")
        // Each device's edits, and each device's signed timeline.begin.
        #expect(rows.allSatisfy { $0["changes"] as? Int == devices * (edits + 1) && $0["edits"] as? Int == edits })
        #expect(rows.allSatisfy { $0["agent_exit"] as? Int == 0 }, "each agent stops cleanly on SIGTERM: \(rows)")
        #expect(figures["summary"] as? String == rows.first?["summary"] as? String)
        #expect((figures["converge_seconds"] as? Double).map { $0 >= 0 && $0 < 60 } == true)
        let pids = (figures["agent_pids"] as? [Int] ?? []) + (figures["daemon_pids"] as? [Int] ?? [])
        #expect((figures["agent_pids"] as? [Int])?.count == devices)
        #expect(pids.allSatisfy { !exists($0) }, "processes left running: \(pids.filter(exists))")
        if let directory = figures["directory"] as? String {
            #expect(!FileManager.default.fileExists(atPath: directory), "the homes are removed")
        } else {
            Issue.record("no directory in \(figures)")
        }
        let left = (try? FileManager.default.contentsOfDirectory(atPath: tmp)) ?? ["(cannot list)"]
        #expect(left.isEmpty, "left in $TMPDIR: \(left)")
    }

    @Test func loopbackDevicesConvergeAndLeaveNothingBehind() throws {
        try withSandbox("demo") { sandbox in
            let tmp = try temporary(sandbox)
            let run = try sandbox.run(
                ["demo", "--mode", "loopback", "--devices", "3", "--edits", "50", "--json"],
                environment: ["TMPDIR": tmp], timeout: 120)
            #expect(run.succeeded, "\(run)")
            let figures = try run.json()
            #expect(figures["mode"] as? String == "loopback")
            #expect(figures["edits"] as? Int == 150)
            expectConvergedAndClean(figures, devices: 3, edits: 50, tmp: tmp)
        }
    }

    @Test func withoutATerminalTheTableIsPlainLinesAndKeepKeepsTheHomes() throws {
        try withSandbox("demo") { sandbox in
            let tmp = try temporary(sandbox)
            let run = try sandbox.run(
                ["demo", "--mode", "loopback", "--devices", "2", "--edits", "20", "--seed", "3", "--keep"],
                environment: ["TMPDIR": tmp], timeout: 120)
            #expect(run.succeeded, "\(run)")
            #expect(!run.stdout.contains("\u{1B}["), "no escape sequences into a file")
            #expect(run.stdout.contains("seed 3"))
            #expect(run.lines.contains { $0.contains("laptop") && $0.contains("127.0.0.1:") && $0.contains("in sync") })
            #expect(run.lines.contains { $0.hasPrefix("converged in ") && $0.contains(" s after the last edit") })
            let kept = try #require(run.lines.first { $0.contains("kept the homes in ") })
            let directory = try #require(
                kept.components(separatedBy: "kept the homes in ").last?.components(separatedBy: ":").first)
            #expect(directory.hasPrefix(tmp + "/plait-demo-"), "the homes go under $TMPDIR: \(directory)")
            for name in ["laptop", "desktop"] {
                let home = directory + "/" + name
                #expect(FileManager.default.fileExists(atPath: home + "/agent.log"))
                let status = try sandbox.ok(["status", "--json", "--home", home]).json()
                #expect((status["summary"] as? String)?.split(separator: ",").count == 2, "\(status)")
            }
            let peers = try sandbox.ok(["peers", "--json", "--home", directory + "/laptop"]).json()
            #expect((peers["peers"] as? [[String: Any]])?.first?["name"] as? String == "desktop")
        }
    }

    @Test func ctrlCStopsEverythingItStarted() throws {
        try withSandbox("demo") { sandbox in
            let tmp = try temporary(sandbox)
            let output = sandbox.root + "/demo.out"
            var environment = sandbox.baseEnvironment
            environment["TMPDIR"] = tmp
            let process = try ChildProcess(
                try PlaitExecutable.path.get(), ["demo", "--mode", "loopback", "--edits", "100000", "--interval", "5"],
                environment: environment, stdout: output)
            let text = { String(decoding: FileManager.default.contents(atPath: output) ?? Data(), as: UTF8.self) }
            // Interrupt once the edits are under way (a table line shows changes).
            let editing = eventually(60) { text().contains("missing") || text().contains("has all") }
            #expect(editing, "\(text())")
            process.send(SIGINT)
            if process.wait(seconds: 30) == nil {
                process.send(SIGKILL)
                process.waitUntilExit()
                Issue.record("the demo did not stop within 30 s of SIGINT")
            }
            #expect(process.terminationStatus == 130)
            let agents = text().split(separator: "\n").first { $0.hasPrefix("agents: ") } ?? ""
            let pids = agents.components(separatedBy: "(pid ").dropFirst().compactMap { Int($0.prefix { $0.isNumber }) }
            #expect(pids.count == 3, "\(agents)")
            #expect(pids.allSatisfy { !exists($0) }, "agents left running: \(pids.filter(exists))")
            let left = (try? FileManager.default.contentsOfDirectory(atPath: tmp)) ?? ["(cannot list)"]
            #expect(left.isEmpty, "left in $TMPDIR: \(left)")
        }
    }

    @Test func aReaderThatGoesAwayStopsItCleanly() throws {
        // `plait demo | head`: once the pipe is closed, the next write fails; the demo stops what it started.
        try withSandbox("demo") { sandbox in
            let tmp = try temporary(sandbox)
            var environment = sandbox.baseEnvironment
            environment["TMPDIR"] = tmp
            let pipe = Pipe()
            let nothing = open("/dev/null", O_RDWR | O_CLOEXEC)
            defer { close(nothing) }
            let process = try ChildProcess(
                try PlaitExecutable.path.get(), ["demo", "--mode", "loopback", "--edits", "100000", "--interval", "5"],
                environment: environment,
                streams: (nothing, pipe.fileHandleForWriting.fileDescriptor, nothing))
            // Only the demo holds the write end now: its reader going away is this end being closed.
            try pipe.fileHandleForWriting.close()
            var text = ""
            while !text.contains("\nagents: ") || !text.hasSuffix("\n") {
                let chunk = pipe.fileHandleForReading.availableData
                if chunk.isEmpty { break }
                text += String(decoding: chunk, as: UTF8.self)
            }
            try pipe.fileHandleForReading.close()
            if process.wait(seconds: 30) == nil {
                process.send(SIGKILL)
                process.waitUntilExit()
                Issue.record("the demo did not stop within 30 s of its reader going away")
            }
            #expect(process.terminationStatus == 128 + SIGPIPE, "\(text)")
            let agents = text.split(separator: "\n").first { $0.hasPrefix("agents: ") } ?? ""
            let pids = agents.components(separatedBy: "(pid ").dropFirst().compactMap { Int($0.prefix { $0.isNumber }) }
            #expect(pids.count == 3, "\(text)")
            #expect(pids.allSatisfy { !exists($0) }, "agents left running: \(pids.filter(exists))")
            let left = (try? FileManager.default.contentsOfDirectory(atPath: tmp)) ?? ["(cannot list)"]
            #expect(left.isEmpty, "left in $TMPDIR: \(left)")
        }
    }

    @Test func wrongOptionsAreRefusedAndHelpSaysWhatItNeeds() throws {
        try withSandbox("demo") { sandbox in
            for arguments in [["--devices", "1"], ["--devices", "9"], ["--edits", "0"], ["--mode", "cloud"]] {
                let run = try sandbox.fails(["demo"] + arguments)
                #expect(run.stderr.contains(arguments[0]), "\(run)")
            }
            let help = try sandbox.ok(["demo", "--help"]).stdout
            let phrases = [
                "--devices", "--edits", "--mode", "--static-peers", "--seed", "--keep", "--json", "root",
                "avahi-daemon", "loopback",
            ]
            for phrase in phrases {
                #expect(help.contains(phrase), "help mentions \(phrase)")
            }
            #expect(try sandbox.ok(["--help"]).stdout.contains("demo"))
        }
    }

    /// The netns mode, each device in a network namespace with its own avahi-daemon; the agents find each
    /// other by mDNS alone (the demo's default, no --static-peers).
    @Test(.disabled(if: NetnsLAN.skipReason != nil, Comment(rawValue: NetnsLAN.skipReason ?? "")))
    func netnsDevicesConvergeAndTheLANIsTornDown() throws {
        // A short sandbox name: the LAN's D-Bus sockets live under $TMPDIR, and socket paths are limited.
        try withSandbox("netns") { sandbox in
            let tmp = try temporary(sandbox)
            let run = try sandbox.run(
                ["demo", "--mode", "netns", "--devices", "3", "--edits", "50", "--json"],
                environment: ["TMPDIR": tmp], timeout: 180)
            #expect(run.succeeded, "\(run)")
            let figures = try run.json()
            #expect(figures["mode"] as? String == "netns")
            #expect((figures["daemon_pids"] as? [Int])?.count == 3, "an avahi-daemon per host")
            let rows = figures["devices"] as? [[String: Any]] ?? []
            let addresses = rows.compactMap { $0["address"] as? String }
            #expect(addresses == ["10.77.0.1:7400", "10.77.0.2:7400", "10.77.0.3:7400"])
            expectConvergedAndClean(figures, devices: 3, edits: 50, tmp: tmp)
            let namespaces = figures["namespaces"] as? [String] ?? []
            #expect(namespaces.count == 3)
            let names = try ChildProcess.run(NetnsLAN.findExecutable("ip") ?? "/usr/sbin/ip", ["netns", "list"]).output
            // Host namespaces are <base>-h<i>, the bridge's <base>-br: nothing with the base may be left.
            for base in Set(namespaces.map { $0.components(separatedBy: "-h").dropLast().joined(separator: "-h") }) {
                #expect(!names.contains(base), "namespaces left: \(names)")
            }
        }
    }
}
