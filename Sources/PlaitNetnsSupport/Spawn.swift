import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Starting a program with `posix_spawn`, and learning how it ended, as tests (and `plait demo`) need it.
///
/// Why not Foundation's `Process` (swift-corelibs-foundation, Swift 6.3.1 on Linux):
/// - A child inherits the signal mask of the thread that spawns it. Test code runs on Dispatch threads that
///   block nearly every signal, so a child spawned by `Process` from a test ignored SIGTERM (seen:
///   `SigBlk: fffffffe3bfbea27`), and `Process` sometimes never noticed such a child exit.
/// - `Process.run()` lists /proc/self/fd and copies each `readdir` entry's whole 256-byte name, reading past
///   the end of glibc's buffer. When that buffer ends where mapped memory ends, the process that spawns
///   crashes with SIGSEGV (CI, 2026-11-24: "Bad pointer dereference" in `Process.run()` under a CLI test;
///   swift-corelibs-foundation pull request 5472, fixed after 6.3.1).
///
/// Here a child starts with no signal blocked and the usual signals at their default action (SIGPIPE too,
/// which the test harness ignores in its own process), sees only descriptors 0, 1 and 2 (where glibc can
/// close the rest), and one thread waits for exactly its PID.
public enum Spawn {
    /// How a child ended.
    public enum Termination: Sendable, Equatable {
        case exited(Int32)
        case signaled(Int32)
        /// `waitpid` failed: someone else reaped it.
        case unknown

        /// The exit code, or the signal's number (as Foundation's `Process.terminationStatus`); -1 if unknown.
        public var status: Int32 {
            switch self {
            case .exited(let code), .signaled(let code): code
            case .unknown: -1
            }
        }

        public var bySignal: Bool {
            if case .signaled = self { return true }
            return false
        }
    }

    /// Why a program could not be started.
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Starts `executable` (a path) with `arguments` and exactly `environment`; its standard input, output and
    /// error are `streams` (descriptors of ours, which stay open here). With `directory` it starts there; with
    /// `ownProcessGroup` it leads a new process group. Returns its PID; call `onExit` to reap it.
    public static func start(
        _ executable: String, _ arguments: [String], environment: [String: String],
        streams: (input: Int32, output: Int32, error: Int32), directory: String? = nil, ownProcessGroup: Bool = false
    ) throws(Failure) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        // dup2 clears close-on-exec on 0, 1 and 2; the rest of the spawning process's descriptors (another
        // test's pipes, say) are closed where glibc can.
        posix_spawn_file_actions_adddup2(&actions, streams.input, 0)
        posix_spawn_file_actions_adddup2(&actions, streams.output, 1)
        posix_spawn_file_actions_adddup2(&actions, streams.error, 2)
        // Required: without it a child inherits every descriptor of ours not marked close-on-exec (Foundation's
        // `Pipe` does not mark its ends), and a pipe's reader then never sees end of file.
        guard let addCloseFrom, addCloseFrom(&actions, 3) == 0 else {
            throw Failure(description: "this C library cannot close a spawned process's inherited descriptors (posix_spawn_file_actions_addclosefrom_np, glibc 2.34 or later)")
        }
        if let directory {
            guard let addChdir, addChdir(&actions, directory) == 0 else {
                throw Failure(description: "this C library cannot start a process in a directory (posix_spawn_file_actions_addchdir_np)")
            }
        }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        var defaults = sigset_t()
        sigemptyset(&defaults)
        for signal in [SIGPIPE, SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGCHLD, SIGALRM, SIGUSR1, SIGUSR2] {
            sigaddset(&defaults, signal)
        }
        posix_spawnattr_setsigdefault(&attributes, &defaults)
        var flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF
        if ownProcessGroup {
            posix_spawnattr_setpgroup(&attributes, 0)
            flags |= POSIX_SPAWN_SETPGROUP
        }
        posix_spawnattr_setflags(&attributes, Int16(flags))

        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        let envp = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in argv + envp { free(pointer) }
        }
        var child: pid_t = 0
        let spawned = posix_spawn(&child, executable, &actions, &attributes, argv, envp)
        guard spawned == 0 else {
            throw Failure(description: "cannot start \(executable): \(String(cString: strerror(spawned)))")
        }
        return child
    }

    /// Starts a thread that waits for `pid` (a child of ours) to end, then calls `handler` with how it ended.
    ///
    /// With `lock`, the child is reaped and `handler` called while holding it: whoever signals the child under the
    /// same lock, having seen it not yet ended, signals the child itself, never a reaped PID the system has
    /// given to another process. (The thread waits with `WNOWAIT` first, which leaves the child unreaped.)
    public static func onExit(
        of pid: pid_t, reapingUnder lock: (any NSLocking & Sendable)? = nil, _ handler: @escaping @Sendable (Termination) -> Void
    ) {
        let thread = Thread {
            if let lock {
                var info = siginfo_t()
                while waitid(P_PID, id_t(pid), &info, WEXITED | WNOWAIT) == -1 && errno == EINTR {}
                lock.lock()
            }
            defer { lock?.unlock() }
            var status: Int32 = 0
            var result: pid_t
            repeat { result = waitpid(pid, &status, 0) } while result == -1 && errno == EINTR
            if result != pid {
                handler(.unknown)
            } else if status & 0x7f == 0 {
                handler(.exited((status >> 8) & 0xff))
            } else {
                handler(.signaled(status & 0x7f))
            }
        }
        thread.name = "waitpid \(pid)"
        thread.start()
    }

    private typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32
    private typealias AddChdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, UnsafePointer<CChar>?) -> Int32

    /// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34 and later) and `…_addchdir_np` (2.29 and later),
    /// looked up at run time because Swift's Glibc module does not declare them; nil where they do not exist.
    private static let addCloseFrom: AddCloseFrom? = dlsym(nil, "posix_spawn_file_actions_addclosefrom_np")
        .map { unsafeBitCast($0, to: AddCloseFrom.self) }
    private static let addChdir: AddChdir? = dlsym(nil, "posix_spawn_file_actions_addchdir_np")
        .map { unsafeBitCast($0, to: AddChdir.self) }
}

/// A program started by `Spawn`, its standard streams on files or /dev/null, with the parts of Foundation's
/// `Process` that tests and benchmarks use (and without its crash; `Spawn` says why).
public final class ChildProcess: @unchecked Sendable {
    /// Its process ID: the program itself.
    public let pid: pid_t
    private let condition = NSCondition()
    private var ended: Spawn.Termination?

    /// Starts `executable` (a path) with `arguments` and `environment` (nil: this process's). Standard input reads
    /// `stdin`; output and error are written to `stdout` and `stderr`, each created or emptied first; nil is
    /// /dev/null. With `directory` it starts there; with `ownProcessGroup` it leads a new process group.
    public convenience init(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, stdin: String? = nil,
        stdout: String? = nil, stderr: String? = nil, directory: String? = nil, ownProcessGroup: Bool = false
    ) throws(Spawn.Failure) {
        var problems: [String] = []
        func opened(_ path: String, _ flags: Int32) -> Int32 {
            let descriptor = open(path, flags | O_CLOEXEC, 0o644)
            if descriptor < 0 { problems.append("\(path): \(String(cString: strerror(errno)))") }
            return descriptor
        }
        let input = opened(stdin ?? "/dev/null", O_RDONLY)
        let output = opened(stdout ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC)
        let errors = opened(stderr ?? "/dev/null", O_WRONLY | O_CREAT | O_TRUNC)
        defer { for fd in [input, output, errors] where fd >= 0 { close(fd) } }
        guard problems.isEmpty else {
            throw Spawn.Failure(
                description: "cannot open the standard streams of \(executable): \(problems.joined(separator: "; "))")
        }
        try self.init(
            executable, arguments, environment: environment, streams: (input, output, errors), directory: directory,
            ownProcessGroup: ownProcessGroup)
    }

    /// The same with standard streams that are descriptors of ours (a pipe's end, say), which stay open here.
    public init(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil,
        streams: (input: Int32, output: Int32, error: Int32), directory: String? = nil, ownProcessGroup: Bool = false
    ) throws(Spawn.Failure) {
        pid = try Spawn.start(
            executable, arguments, environment: environment ?? ProcessInfo.processInfo.environment, streams: streams,
            directory: directory, ownProcessGroup: ownProcessGroup)
        // Reaped under the condition's lock, which `send` holds while it signals: never a reused PID.
        Spawn.onExit(of: pid, reapingUnder: condition) { [condition] termination in
            self.ended = termination
            condition.broadcast()
        }
    }

    /// How it ended; nil while it runs.
    public var termination: Spawn.Termination? { condition.withLock { ended } }

    public var isRunning: Bool { termination == nil }

    /// Its exit code, or the number of the signal that ended it (as `Process.terminationStatus`); -1 while it
    /// runs or if it could not be known.
    public var terminationStatus: Int32 { termination?.status ?? -1 }

    /// Whether a signal ended it.
    public var wasSignaled: Bool { termination?.bySignal ?? false }

    /// Waits up to `seconds` for it to end: how it ended, or nil if it still runs.
    @discardableResult
    public func wait(seconds: Double = .infinity) -> Spawn.Termination? {
        // Without a deadline, `wait()`: NSCondition traps converting `Date.distantFuture` to a timespec.
        let deadline = seconds.isFinite ? Date(timeIntervalSinceNow: seconds) : nil
        return condition.withLock {
            while ended == nil {
                if let deadline {
                    guard condition.wait(until: deadline) else { break }
                } else {
                    condition.wait()
                }
            }
            return ended
        }
    }

    /// Waits for it to end, however long that takes.
    public func waitUntilExit() {
        wait()
    }

    /// Sends `signal` to it, if it still runs (it is not reaped meanwhile, so the PID is still its own).
    public func send(_ signal: Int32) {
        condition.withLock {
            if ended == nil { kill(pid, signal) }
        }
    }

    /// SIGTERM, then SIGKILL if it still runs `grace` seconds later; waits for it to end, at most 60 s after the
    /// SIGKILL (a child stuck in the kernel: nil, rather than a test that never ends). Idempotent.
    @discardableResult
    public func stop(grace: Double = 5) -> Spawn.Termination? {
        send(SIGTERM)
        if wait(seconds: grace) == nil {
            send(SIGKILL)
            return wait(seconds: 60)
        }
        return termination
    }

    /// What `run` returns.
    public struct Finished: Sendable {
        public var termination: Spawn.Termination
        public var output: String
        public var errors: String
        public var succeeded: Bool { termination == .exited(0) }
    }

    /// Runs a tool to its end, `input` (if any) on its standard input and its outputs captured, through files of
    /// a temporary directory removed after.
    public static func run(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, directory: String? = nil,
        input: String? = nil
    ) throws(Spawn.Failure) -> Finished {
        var template = Array((NSTemporaryDirectory() + "/plait-run-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else {
            throw Spawn.Failure(description: "cannot make a temporary directory: \(String(cString: strerror(errno)))")
        }
        let scratch = String(cString: made)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        if let input, !FileManager.default.createFile(atPath: scratch + "/in", contents: Data(input.utf8)) {
            throw Spawn.Failure(description: "cannot write the input of \(executable) in \(scratch)")
        }
        let child = try ChildProcess(
            executable, arguments, environment: environment, stdin: input == nil ? nil : scratch + "/in",
            stdout: scratch + "/out", stderr: scratch + "/err", directory: directory)
        let termination = child.wait() ?? .unknown
        let read = { (name: String) in
            String(decoding: FileManager.default.contents(atPath: scratch + "/" + name) ?? Data(), as: UTF8.self)
        }
        return Finished(termination: termination, output: read("out"), errors: read("err"))
    }
}
