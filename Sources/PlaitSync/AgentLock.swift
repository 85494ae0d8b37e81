import Foundation
import PlaitCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// One agent per home: an exclusive `flock` on `agent.lock` in the home, holding the owner's PID and, on a second
/// line, its instance nonce in hexadecimal (a `plait sync` run beside the agent says the same nonce in Hello, so
/// its peers see one home, not a copied one).
///
/// Two agents on one home fight over every peer (each connection replaces the other's). The kernel drops
/// the lock when the process dies, however it dies (SIGKILL included), so a stale file never blocks a
/// restart; the PID in it is only there to name the holder.
public final class AgentLock: @unchecked Sendable {
    public static let fileName = "agent.lock"
    private var descriptor: Int32

    private init(descriptor: Int32) { self.descriptor = descriptor }

    /// Takes the lock at once, or throws `agentRunning` naming the PID written by the holder.
    public static func acquire(home: String, instanceNonce: [UInt8] = []) throws -> AgentLock {
        let path = home + "/" + fileName
        let descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            let code = errno
            throw PlaitError.file(
                path: path, problem: "cannot open the agent's lock file (\(String(cString: strerror(code))))")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            defer { close(descriptor) }
            if code == EWOULDBLOCK {
                throw PlaitError.agentRunning(pid: readPID(descriptor), home: home)
            }
            throw PlaitError.file(path: path, problem: "cannot lock it (\(String(cString: strerror(code))))")
        }
        let text = Array("\(getpid())\n\(instanceNonce.hexString)\n".utf8)
        guard ftruncate(descriptor, 0) == 0, pwrite(descriptor, text, text.count, 0) == text.count else {
            let code = errno
            close(descriptor)
            throw PlaitError.file(
                path: path, problem: "cannot write the agent's PID (\(String(cString: strerror(code))))")
        }
        return AgentLock(descriptor: descriptor)
    }

    static func readPID(_ descriptor: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = pread(descriptor, &buffer, buffer.count, 0)
        guard count > 0 else { return nil }
        let text = String(decoding: buffer[..<count], as: UTF8.self)
        return Int32(text.split(separator: "\n").first.map(String.init) ?? "")
    }

    /// Whether an agent holds the lock of `home` now: the kernel's word, not the PID in the file (a dead agent's
    /// PID may belong to another process by now). Tries a shared lock and gives it back at once.
    public static func isHeld(home: String) -> Bool {
        let descriptor = open(home + "/" + fileName, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return false }
        defer { close(descriptor) }
        if flock(descriptor, LOCK_SH | LOCK_NB) == 0 {
            flock(descriptor, LOCK_UN)
            return false
        }
        return errno == EWOULDBLOCK
    }

    /// The instance nonce of the agent running on `home`, if one runs (its PID is alive); nil otherwise.
    public static func runningInstance(home: String) -> [UInt8]? {
        let descriptor = open(home + "/" + fileName, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 128)
        let count = pread(descriptor, &buffer, buffer.count, 0)
        guard count > 0 else { return nil }
        let lines = String(decoding: buffer[..<count], as: UTF8.self).split(separator: "\n").map(String.init)
        guard lines.count >= 2, let pid = Int32(lines[0]), pid != getpid(), kill(pid, 0) == 0 || errno == EPERM,
            let nonce = [UInt8](hexString: lines[1]), !nonce.isEmpty
        else { return nil }
        return nonce
    }

    /// Releases the lock (also done by the kernel when the process ends).
    public func release() {
        guard descriptor >= 0 else { return }
        close(descriptor)
        descriptor = -1
    }

    deinit { release() }
}
