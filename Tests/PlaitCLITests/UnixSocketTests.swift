import Foundation
import PlaitNetnsSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The agent's Unix socket (DESIGN §12): private from the first instant, only for the agent's user and root,
/// under `$XDG_RUNTIME_DIR` when the home's path is too long, a killed agent's socket replaced and a live one never.
@Suite(.serialized) struct UnixSocketTests {
    /// `stat` of a path: (is a socket, permission bits); nil when there is nothing.
    static func socketMode(_ path: String) -> (isSocket: Bool, mode: UInt32)? {
        var status = stat()
        guard lstat(path, &status) == 0 else { return nil }
        return (status.st_mode & S_IFMT == S_IFSOCK, UInt32(status.st_mode & 0o7777))
    }

    /// Entries of `directory` left by the private bind step (`.XXXXXX`).
    static func bindLeftovers(_ directory: String) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
        return names.filter { $0.hasPrefix(".") && $0.count == 7 }
    }

    @Test func socketIsPrivateAndAStaleOneIsReplaced() throws {
        try withSandbox("mode") { sandbox in
            try sandbox.initialize()
            try sandbox.ok(["list", "add", "Groceries"])
            let first = try RunningAgent(sandbox: sandbox, home: sandbox.home)
            let path = try awaitSocket(first)
            #expect(path == sandbox.home + "/api.sock")
            let mode = Self.socketMode(path)
            #expect(mode?.isSocket == true && mode?.mode == 0o600, "mode \(String(describing: mode))")
            #expect(Self.bindLeftovers(sandbox.home).isEmpty)
            let through = try sandbox.run(["lists"])

            // Killed: the socket file stays behind, nobody listens. The CLI opens the store, saying nothing more.
            kill(first.process.pid, SIGKILL)
            first.stop()
            #expect(Self.socketMode(path)?.isSocket == true, "a killed agent leaves its socket file")
            let alone = try sandbox.run(["lists"])
            #expect(alone.succeeded && alone.stdout == through.stdout && alone.stderr.isEmpty, "\(alone)")

            // The next agent replaces the stale socket and serves on it.
            let second = try RunningAgent(sandbox: sandbox, home: sandbox.home)
            defer { #expect(second.stop() == 0, "\(second.log)") }
            #expect(try awaitSocket(second) == path)
            #expect(!second.log.contains("local socket off"), "\(second.log)")
            #expect(Self.socketMode(path)?.mode == 0o600)
            try expectServedByAgent(sandbox, environment: [:])
            second.stop()
            #expect(Self.socketMode(path) == nil, "a stopped agent removes its socket")
            // A normal stop logs no error: the servers ended gracefully (cancelled, each logged "Waiting on child
            // channel: CancellationError()" at error level, at every stop).
            let errors = second.log.split(separator: "\n").filter { $0.contains(" error ") }
            #expect(errors.isEmpty, "\(errors)")
        }
    }

    /// Another user reaches the socket only if its file modes let it (here opened up on purpose, as a mistaken
    /// chmod would): SO_PEERCRED still refuses it, and nothing it asked for is done.
    @Test func anotherUserIsRefused() throws {
        guard getuid() == 0 else {
            print("skipped anotherUserIsRefused: running another uid needs root (this is uid \(getuid()))")
            return
        }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else {
            print("skipped anotherUserIsRefused: /usr/bin/setpriv is not installed")
            return
        }
        try withSandbox("uid") { sandbox in
            try sandbox.initialize()
            try sandbox.ok(["list", "add", "Groceries"])
            let agent = try RunningAgent(sandbox: sandbox, home: sandbox.home)
            defer { #expect(agent.stop() == 0, "\(agent.log)") }
            let path = try awaitSocket(agent)
            let before = try sandbox.fingerprint()
            // Open every door but the kernel's check: the home traversable, the socket writable by anyone.
            #expect(chmod(sandbox.home, 0o711) == 0 && chmod(path, 0o666) == 0)
            let executable = try PlaitExecutable.path.get()
            let stranger = try runProcess(
                "/usr/bin/setpriv",
                ["--reuid=65534", "--regid=65534", "--clear-groups", "--", executable, "add", "Groceries", "sneaky"],
                environment: sandbox.baseEnvironment, directory: sandbox.root)
            #expect(stranger.status == 1, "\(stranger)")
            #expect(
                stranger.stderr.contains("uid 65534 was refused") && !stranger.stderr.contains("Fatal error"),
                "\(stranger)")
            #expect(agent.log.contains("refused a connection on the Unix socket from uid 65534"), "\(agent.log)")
            #expect(try sandbox.fingerprint() == before, "the refused edit changed nothing")
            // Root (the test) is still served.
            try expectServedByAgent(sandbox, environment: [:])
        }
    }

    /// A home whose `<home>/api.sock` does not fit in sun_path: the agent and the CLI both use
    /// `$XDG_RUNTIME_DIR/plait-<first 7 of Device ID>.sock`.
    @Test func longHomePathUsesTheRuntimeDirectory() throws {
        try withSandbox("xdg") { sandbox in
            let runtime = sandbox.root + "/run"
            try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: false,
                attributes: [.posixPermissions: 0o700])
            let home = sandbox.root + "/" + String(repeating: "h", count: max(1, 110 - sandbox.root.count))
            let environment: [String: String?] = ["PLAIT_HOME": home, "XDG_RUNTIME_DIR": runtime]
            #expect((home + "/api.sock").utf8.count > 107)
            try sandbox.ok(["init", "--name", "long"], environment: environment)
            try sandbox.ok(["list", "add", "Groceries"], environment: environment)
            let device = try sandbox.ok(["status", "--json"], environment: environment).json()["device"] as? String
            let agent = try RunningAgent(sandbox: sandbox, home: home, environment: ["XDG_RUNTIME_DIR": runtime])
            defer { #expect(agent.stop() == 0, "\(agent.log)") }
            let path = try awaitSocket(agent)
            #expect(path == runtime + "/plait-\(device?.prefix(7) ?? "?").sock")
            #expect(Self.socketMode(path)?.mode == 0o600)
            #expect(Self.socketMode(home + "/api.sock") == nil)
            #expect(Self.bindLeftovers(runtime).isEmpty)
            try expectServedByAgent(sandbox, home: home, environment: environment)
            // A CLI without XDG_RUNTIME_DIR cannot find the socket: it opens the store, as without an agent.
            let alone = try sandbox.run(["lists"], environment: ["PLAIT_HOME": home, "XDG_RUNTIME_DIR": nil])
            #expect(alone.succeeded && alone.stderr.isEmpty && alone.stdout.contains("Groceries"), "\(alone)")
        }
    }

    /// Two copies of a long-path home share a Device ID, so their sockets would have the same name: the first
    /// agent keeps its socket, the second serves none, and a command on the second copy never edits the first.
    @Test func aLiveSocketIsNeverTakenAndAnotherHomesAgentIsNotUsed() throws {
        try withSandbox("copy") { sandbox in
            let runtime = sandbox.root + "/run"
            try FileManager.default.createDirectory(atPath: runtime, withIntermediateDirectories: false,
                attributes: [.posixPermissions: 0o700])
            let long = String(repeating: "c", count: max(1, 110 - sandbox.root.count))
            let one = sandbox.root + "/1" + long
            let two = sandbox.root + "/2" + long
            try sandbox.ok(["init", "--name", "copied"], environment: ["PLAIT_HOME": one])
            try sandbox.ok(["list", "add", "Groceries"], environment: ["PLAIT_HOME": one])
            try FileManager.default.copyItem(atPath: one, toPath: two)
            // Not taken for a copy at its first write (`HandRestoreTests`): this test is about the socket alone.
            try forgetStoreFile(home: two)
            let first = try RunningAgent(sandbox: sandbox, home: one, environment: ["XDG_RUNTIME_DIR": runtime])
            defer { #expect(first.stop() == 0, "\(first.log)") }
            let path = try awaitSocket(first)
            var before = stat()
            #expect(lstat(path, &before) == 0)
            let second = try RunningAgent(sandbox: sandbox, home: two, environment: ["XDG_RUNTIME_DIR": runtime])
            defer { #expect(second.stop() == 0, "\(second.log)") }
            #expect(eventually(20) { second.log.contains("local socket off: another plait agent is listening on") },
                "\(second.log)")
            var after = stat()
            #expect(lstat(path, &after) == 0 && after.st_ino == before.st_ino, "the first agent's socket is kept")

            // A command on the second copy reaches the first agent's socket, which refuses it: it edits its own.
            let added = try sandbox.run(
                ["add", "Groceries", "only on two"], environment: ["PLAIT_HOME": two, "XDG_RUNTIME_DIR": runtime])
            #expect(added.succeeded && added.stderr.isEmpty, "\(added)")
            let onOne = try sandbox.ok(["show"], environment: ["PLAIT_HOME": one, "XDG_RUNTIME_DIR": runtime])
            let onTwo = try sandbox.ok(["show"], environment: ["PLAIT_HOME": two, "XDG_RUNTIME_DIR": runtime])
            #expect(!onOne.stdout.contains("only on two"), "\(onOne)")
            #expect(onTwo.stdout.contains("only on two"), "\(onTwo)")
            try expectServedByAgent(sandbox, home: one, environment: ["PLAIT_HOME": one, "XDG_RUNTIME_DIR": runtime])
        }
    }
}

/// Proves a read and an edit are answered by the agent: run with the store's files hidden from the CLI (and only
/// from it), the CLI alone would find no plait store at the home. (Moving the store aside instead is no proof:
/// the agent's own SQLite pool opens new connections by path, and would find the hole too.)
func expectServedByAgent(
    _ sandbox: Sandbox, home: String? = nil, environment: [String: String?],
    sourceLocation: SourceLocation = #_sourceLocation
) throws {
    let home = home ?? sandbox.home
    guard let shown = try runWithStoreHidden(sandbox, home: home, ["show", "--json"], environment: environment),
        let added = try runWithStoreHidden(
            sandbox, home: home, ["add", "Groceries", "through the agent"], environment: environment)
    else { return }
    #expect(shown.succeeded && shown.stdout.contains("Groceries"), "\(shown)", sourceLocation: sourceLocation)
    #expect(added.succeeded && added.stdout.hasPrefix("added"), "\(added)", sourceLocation: sourceLocation)
}

/// Runs `plait arguments` in a mount namespace of its own where the home's store files (`plait.db`, its WAL and
/// shared memory) are empty files: whatever the command gets right, it got from the agent, which sees the real
/// ones. nil (and a note) where mount namespaces are not allowed (not root, no unshare).
func runWithStoreHidden(
    _ sandbox: Sandbox, home: String, _ arguments: [String], environment overrides: [String: String?]
) throws -> PlaitRun? {
    guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/unshare") else {
        print("skipped a check through a hidden store: it needs root and /usr/bin/unshare (this is uid \(getuid()))")
        return nil
    }
    let empty = sandbox.root + "/empty-store"
    if !FileManager.default.fileExists(atPath: empty) {
        FileManager.default.createFile(atPath: empty, contents: Data())
    }
    var environment = sandbox.baseEnvironment
    for (key, value) in overrides { environment[key] = value }
    environment["PLAIT_HOME"] = home
    environment["HIDE_WITH"] = empty
    let script = """
        for f in "$PLAIT_HOME/plait.db" "$PLAIT_HOME/plait.db-wal" "$PLAIT_HOME/plait.db-shm"; do
            if [ -e "$f" ]; then mount --bind "$HIDE_WITH" "$f" || exit 99; fi
        done
        exec "$0" "$@"
        """
    let executable = try PlaitExecutable.path.get()
    let run = try runProcess(
        "/usr/bin/unshare", ["--mount", "--propagation", "private", "--", "/bin/sh", "-c", script, executable]
            + arguments,
        environment: environment, directory: sandbox.root)
    if run.status == 99 || run.stderr.contains("unshare:") {
        throw CLITestFailure("could not hide the store in a mount namespace: \(run)")
    }
    return run
}

/// Runs any program to completion (here: plait under setpriv), capturing its output through files.
func runProcess(
    _ executable: String, _ arguments: [String], environment: [String: String], directory: String
) throws -> PlaitRun {
    let run = try ChildProcess.run(executable, arguments, environment: environment, directory: directory)
    return PlaitRun(
        arguments: [executable] + arguments, status: run.termination.status, stdout: run.output,
        stderr: run.errors, signaled: run.termination.bySignal)
}
