import Foundation
import PlaitNetnsSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `Spawn` and `ChildProcess`, how every test and benchmark starts a program (Foundation's `Process` can crash the
/// process that spawns; `Spawn` says why).
@Suite struct SpawnTests {
    @Test func exitCodesSignalsInputAndOutputsComeBack() throws {
        let finished = try ChildProcess.run("/bin/sh", ["-c", "read line; echo \"got $line\"; echo oops >&2; exit 3"], input: "milk\n")
        #expect(finished.termination == .exited(3))
        #expect(finished.output == "got milk\n" && finished.errors == "oops\n")
        #expect(!finished.succeeded)
        let killed = try ChildProcess.run("/bin/sh", ["-c", "kill -9 $$"])
        #expect(killed.termination == .signaled(SIGKILL) && killed.termination.bySignal && killed.termination.status == 9)
        #expect(try ChildProcess.run("/bin/true", []).succeeded)
    }

    @Test func aProgramThatCannotStartIsAClearError() throws {
        #expect {
            _ = try ChildProcess.run("/nonexistent/plait-spawn-test", [])
        } throws: { error in
            "\(error)".contains("/nonexistent/plait-spawn-test") && "\(error)".contains("No such file")
        }
    }

    /// A child started from a test thread (which blocks most signals) still dies of SIGTERM, and `stop` reaps it.
    @Test func stopEndsAChildWithSIGTERMAndAWaitHasADeadline() throws {
        let child = try ChildProcess("/bin/sleep", ["30"])
        #expect(child.wait(seconds: 0.05) == nil && child.isRunning)
        #expect(child.stop(grace: 20) == .signaled(SIGTERM))
        #expect(!child.isRunning && child.terminationStatus == SIGTERM && child.wasSignaled)
        #expect(child.stop() == .signaled(SIGTERM), "stopping again only returns how it ended")
    }

    @Test func itStartsInTheDirectoryWithTheEnvironmentAndOnlyTheStandardDescriptors() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("spawn-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        // A descriptor of ours without close-on-exec: the child must not see it.
        let leaked = open("/dev/null", O_RDONLY)
        defer { close(leaked) }
        let finished = try ChildProcess.run(
            "/bin/sh", ["-c", "pwd; echo \"$PLAIT_SPAWN_TEST\"; ls /proc/self/fd | sort -n | tr '\\n' ' '"],
            environment: ["PLAIT_SPAWN_TEST": "kept", "PATH": "/usr/bin:/bin"], directory: directory.path)
        let lines = finished.output.split(separator: "\n").map(String.init)
        #expect(lines.count == 3, "\(finished)")
        #expect(lines.first.map { URL(fileURLWithPath: $0).resolvingSymlinksInPath().path }
            == directory.resolvingSymlinksInPath().path)
        #expect(lines.dropFirst().first == "kept")
        // 0, 1, 2, and the one `ls` opens to list the directory.
        #expect(lines.last?.split(separator: " ").count == 4, "descriptors the child saw: \(lines.last ?? "")")
    }

    /// No test or benchmark goes back to Foundation's `Process` (it crashed the test process in CI).
    @Test func nothingStartsAProcessWithFoundationsProcess() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        // Spelled in two parts so this file does not match itself.
        let patterns = ["= " + "Process()", "Process" + "()."]
        var offenders: [String] = []
        for folder in ["Sources", "Tests"] {
            let base = root.appendingPathComponent(folder)
            let files = FileManager.default.enumerator(atPath: base.path)?.compactMap { $0 as? String } ?? []
            #expect(!files.isEmpty, "nothing found under \(base.path)")
            for file in files where file.hasSuffix(".swift") {
                let text = try String(contentsOf: base.appendingPathComponent(file), encoding: .utf8)
                for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
                where patterns.contains(where: { line.contains($0) }) {
                    offenders.append("\(folder)/\(file):\(number + 1)")
                }
            }
        }
        #expect(offenders.isEmpty, "Foundation's Process is used here; use ChildProcess: \(offenders)")
    }
}
