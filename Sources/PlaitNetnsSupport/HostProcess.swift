import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A process a test started (usually inside a test host): its PID, its output as lines, its standard
/// input, and a `stop` that signals exactly that PID.
///
/// Started by `Spawn` (posix_spawn, not Foundation's `Process`; `Spawn` says why): no signal blocked, the
/// usual signals at their default action, and a thread of its own waiting for exactly this PID.
///
/// Standard output and standard error are read by threads of their own into lines, so a chatty
/// process never blocks on a full pipe; `nextLine` waits for the next one with a deadline, which is how
/// tests synchronise with it (never by sleeping).
public final class HostProcess: @unchecked Sendable {
    /// The two outputs of a process.
    public enum Stream: Sendable {
        case stdout, stderr
    }

    /// What the process is, for messages: `h1: plait-discovery-probe --browse`.
    public let label: String
    /// Its process ID. `ip netns exec`, `unshare` and `sh -c 'exec …'` all exec in place, so this is the
    /// PID of the program itself.
    public let pid: Int32

    /// The write end of the child's standard input; -1 once closed.
    private var input: Int32
    private let inputLock = NSLock()
    /// What the reader and waiter threads share with this object; they hold it, not the object, so
    /// dropping the object stops the process.
    private let shared = Shared()
    /// How many standard-output lines `nextLine` has consumed.
    private var cursor = 0

    private final class Shared: @unchecked Sendable {
        let condition = NSCondition()
        var output: [String] = []
        var errors: [String] = []
        var openStreams = 2
        /// The exit code, or 128 + the signal that killed it; -1 if it could not be known.
        var exitStatus: Int32?
    }

    /// Starts `executable` (a path) with `arguments` and exactly `environment`, here (not in a test host).
    public init(label: String, executable: String, arguments: [String], environment: [String: String]) throws {
        self.label = label
        signal(SIGPIPE, SIG_IGN)
        // One spawn at a time in this process, so no other HostProcess's child inherits these pipes in
        // the instant before they are marked close-on-exec (pipe2 is not visible from Swift).
        Self.spawnLock.lock()
        defer { Self.spawnLock.unlock() }
        var stdinPipe: [Int32] = [-1, -1]
        var stdoutPipe: [Int32] = [-1, -1]
        var stderrPipe: [Int32] = [-1, -1]
        guard pipe(&stdinPipe) == 0, pipe(&stdoutPipe) == 0, pipe(&stderrPipe) == 0 else {
            let reason = String(cString: strerror(errno))
            for fd in stdinPipe + stdoutPipe + stderrPipe where fd >= 0 { close(fd) }
            throw NetnsError.command(arguments: [executable] + arguments, status: -1, output: "pipe: \(reason)")
        }
        for fd in stdinPipe + stdoutPipe + stderrPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        let child: pid_t
        do {
            child = try Spawn.start(
                executable, arguments, environment: environment,
                streams: (stdinPipe[0], stdoutPipe[1], stderrPipe[1]))
        } catch {
            for fd in stdinPipe + stdoutPipe + stderrPipe { close(fd) }
            throw NetnsError.command(arguments: [executable] + arguments, status: -1, output: error.description)
        }
        close(stdinPipe[0])
        close(stdoutPipe[1])
        close(stderrPipe[1])
        pid = child
        input = stdinPipe[1]
        Self.startReading(stdoutPipe[0], into: .stdout, shared)
        Self.startReading(stderrPipe[0], into: .stderr, shared)
        Self.startWaiting(for: child, shared)
    }

    deinit {
        stop()
    }

    private static let spawnLock = NSLock()

    private static func startWaiting(for pid: pid_t, _ shared: Shared) {
        Spawn.onExit(of: pid) { termination in
            let code: Int32
            switch termination {
            case .exited(let status): code = status
            case .signaled(let signal): code = 128 + signal
            case .unknown: code = -1
            }
            shared.condition.lock()
            shared.exitStatus = code
            shared.condition.broadcast()
            shared.condition.unlock()
        }
    }

    private static func startReading(_ descriptor: Int32, into stream: Stream, _ shared: Shared) {
        let thread = Thread {
            var pending: [UInt8] = []
            var chunk = [UInt8](repeating: 0, count: 4096)
            func publish(_ lines: [String]) {
                shared.condition.lock()
                switch stream {
                case .stdout: shared.output.append(contentsOf: lines)
                case .stderr: shared.errors.append(contentsOf: lines)
                }
                shared.condition.broadcast()
                shared.condition.unlock()
            }
            while true {
                let count = chunk.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { break }
                pending.append(contentsOf: chunk[0..<count])
                var lines: [String] = []
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    lines.append(String(decoding: pending[..<newline], as: UTF8.self))
                    pending.removeSubrange(...newline)
                }
                if !lines.isEmpty { publish(lines) }
            }
            if !pending.isEmpty { publish([String(decoding: pending, as: UTF8.self)]) }
            close(descriptor)
            shared.condition.lock()
            shared.openStreams -= 1
            shared.condition.broadcast()
            shared.condition.unlock()
        }
        thread.name = "HostProcess \(stream)"
        thread.start()
    }

    /// Every line printed so far on `stream`.
    public func lines(_ stream: Stream = .stdout) -> [String] {
        shared.condition.lock()
        defer { shared.condition.unlock() }
        return stream == .stdout ? shared.output : shared.errors
    }

    /// Whether the process has not exited yet.
    public var isRunning: Bool {
        shared.condition.lock()
        defer { shared.condition.unlock() }
        return shared.exitStatus == nil
    }

    /// Waits for the next standard-output line (after those already returned) that satisfies
    /// `predicate`, skipping the others. Throws `timeout` when `timeout` passes first, `exited` when
    /// the process closed its output without printing one.
    public func nextLine(timeout: Duration, where predicate: (String) -> Bool = { _ in true }) throws -> String {
        let deadline = Date().addingTimeInterval(timeout.seconds)
        shared.condition.lock()
        defer { shared.condition.unlock() }
        while true {
            while cursor < shared.output.count {
                let line = shared.output[cursor]
                cursor += 1
                if predicate(line) { return line }
            }
            if shared.openStreams == 0 {
                throw NetnsError.exited(process: label, status: shared.exitStatus ?? -1, output: unlockedTranscript)
            }
            if !shared.condition.wait(until: deadline) && Date() >= deadline {
                throw NetnsError.timeout(
                    waitingFor: "a line from \(label)", after: timeout, output: unlockedTranscript)
            }
        }
    }

    /// Waits until a line on `stream` (from its first, whatever `nextLine` consumed) satisfies `predicate`.
    public func waitForLine(
        on stream: Stream, timeout: Duration, where predicate: (String) -> Bool
    ) throws -> String {
        let deadline = Date().addingTimeInterval(timeout.seconds)
        shared.condition.lock()
        defer { shared.condition.unlock() }
        var checked = 0
        while true {
            let lines = stream == .stdout ? shared.output : shared.errors
            while checked < lines.count {
                if predicate(lines[checked]) { return lines[checked] }
                checked += 1
            }
            if shared.openStreams == 0 {
                throw NetnsError.exited(process: label, status: shared.exitStatus ?? -1, output: unlockedTranscript)
            }
            if !shared.condition.wait(until: deadline) && Date() >= deadline {
                throw NetnsError.timeout(
                    waitingFor: "a line from \(label)", after: timeout, output: unlockedTranscript)
            }
        }
    }

    /// Waits up to `timeout` until both outputs reached end of file (the process and its children
    /// closed them), so `lines` holds everything. Returns whether they did.
    @discardableResult
    public func waitForEndOfOutput(timeout: Duration) -> Bool {
        let deadline = Date().addingTimeInterval(timeout.seconds)
        shared.condition.lock()
        defer { shared.condition.unlock() }
        while shared.openStreams > 0 {
            if !shared.condition.wait(until: deadline) && Date() >= deadline { return false }
        }
        return true
    }

    /// Writes `line` and a newline to the process's standard input (nothing if it is closed or gone).
    public func send(_ line: String) {
        inputLock.withLock {
            guard input >= 0 else { return }
            var bytes = Array((line + "\n").utf8)[...]
            while !bytes.isEmpty {
                let written = bytes.withUnsafeBytes { write(input, $0.baseAddress, $0.count) }
                if written < 0 && errno == EINTR { continue }
                if written <= 0 { return }
                bytes = bytes.dropFirst(written)
            }
        }
    }

    /// Closes the process's standard input (end of file).
    public func closeInput() {
        inputLock.withLock {
            if input >= 0 { close(input) }
            input = -1
        }
    }

    /// Waits up to `timeout` for the process to exit by itself; returns its status, or nil if it still runs.
    @discardableResult
    public func waitForExit(timeout: Duration) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout.seconds)
        shared.condition.lock()
        defer { shared.condition.unlock() }
        while shared.exitStatus == nil {
            if !shared.condition.wait(until: deadline) && Date() >= deadline { break }
        }
        return shared.exitStatus
    }

    /// Sends `signal` to `pid` (SIGKILL: a crash or a power cut, as the agent sees it) while it runs.
    public func deliver(signal: Int32) {
        if isRunning { kill(pid, signal) }
    }

    /// Sends SIGTERM to `pid`, waits up to `timeout`, then SIGKILL. Returns the exit status (128 + the
    /// signal's number for a process a signal killed). Idempotent.
    @discardableResult
    public func stop(timeout: Duration = .seconds(5)) -> Int32 {
        if isRunning {
            kill(pid, SIGTERM)
            if waitForExit(timeout: timeout) == nil {
                kill(pid, SIGKILL)
                _ = waitForExit(timeout: .seconds(30))
            }
        }
        closeInput()
        return waitForExit(timeout: .zero) ?? -1
    }

    /// Both outputs so far, for failure messages (the last 60 lines of each).
    public var transcript: String {
        shared.condition.lock()
        defer { shared.condition.unlock() }
        return unlockedTranscript
    }

    private var unlockedTranscript: String {
        let out = shared.output.suffix(60).joined(separator: "\n")
        let err = shared.errors.suffix(60).joined(separator: "\n")
        return "[\(label), pid \(pid)]\n--- stdout\n\(out)\n--- stderr\n\(err)"
    }
}

extension Duration {
    /// The duration in seconds, as a Double.
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
