import COpenSSL
import Foundation
import PlaitSync

#if canImport(Glibc)
import Glibc
#endif

/// The password that lets other machines use the API (`api.password`, DESIGN §12). Only a scrypt hash of it is
/// kept, in `<home>/api-password` (mode 0600), as one line `scrypt$ln=15,r=8,p=1$SALT$KEY` (base64): the
/// parameters travel with the hash, so stronger ones later still verify old files. `plait gui --set-password`
/// writes it; the agent reads it at every login, so a new password counts at once.
public enum APIPassword {
    public static let fileName = "api-password"
    /// Shorter passwords are refused when set: the rate limit slows guessing, it does not make 4 digits safe.
    public static let minimumLength = 8
    /// scrypt's cost: N = 2^15, r = 8, p = 1 (32 MiB, about 0.1 s): each guess costs an attacker as much.
    static let logN = 15
    static let blockSize = 8
    static let parallelism = 1
    static let keyLength = 32
    static let saltLength = 16

    /// Whether the home has a password set (the file exists).
    public static func isSet(homePath: String) -> Bool {
        FileManager.default.fileExists(atPath: homePath + "/" + fileName)
    }

    /// Hashes `password` with a new random salt and stores it, replacing any earlier one (atomically, mode 0600).
    public static func set(_ password: String, homePath: String) throws {
        guard !password.isEmpty else {
            throw PlaitError.usage("the password is empty; type one of at least \(minimumLength) characters.")
        }
        guard password.count >= minimumLength else {
            throw PlaitError.usage(
                "the password has \(password.count) characters; use at least \(minimumLength) (other machines "
                    + "may try it).")
        }
        let line = try hash(password, salt: randomBytes(saltLength)) + "\n"
        try PrivateFile.replace(homePath + "/" + fileName, with: Array(line.utf8))
    }

    /// Removes the password: the agent then refuses to listen on a non-loopback address again.
    public static func clear(homePath: String) throws {
        let path = homePath + "/" + fileName
        guard unlink(path) == 0 || errno == ENOENT else {
            throw PlaitError.file(path: path, problem: "cannot be removed (\(String(cString: strerror(errno))))")
        }
    }

    /// Whether `password` is the one stored in the home; false when none is stored or the file is unreadable.
    public static func verify(_ password: String, homePath: String) -> Bool {
        guard let data = FileManager.default.contents(atPath: homePath + "/" + fileName),
            let stored = String(data: data, encoding: .utf8)
        else { return false }
        return verify(password, against: stored.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// Whether `password` matches `stored` (a line `hash` made), compared in constant time.
    static func verify(_ password: String, against stored: String) -> Bool {
        let fields = stored.split(separator: "$", omittingEmptySubsequences: false)
        guard fields.count == 4, fields[0] == "scrypt", let salt = Data(base64Encoded: String(fields[2])),
            let key = Data(base64Encoded: String(fields[3])), key.count == keyLength
        else { return false }
        var parameters: [String: Int] = [:]
        for pair in fields[1].split(separator: ",") {
            let parts = pair.split(separator: "=")
            if parts.count == 2, let value = Int(parts[1]) { parameters[String(parts[0])] = value }
        }
        guard let logN = parameters["ln"], (10...20).contains(logN), let blockSize = parameters["r"],
            (1...32).contains(blockSize), let parallelism = parameters["p"], (1...16).contains(parallelism),
            let derived = try? scrypt(
                password, salt: Array(salt), logN: logN, blockSize: blockSize, parallelism: parallelism)
        else { return false }
        return CRYPTO_memcmp(derived, Array(key), keyLength) == 0
    }

    /// The stored form of `password` with `salt`.
    static func hash(_ password: String, salt: [UInt8]) throws -> String {
        let key = try scrypt(password, salt: salt, logN: logN, blockSize: blockSize, parallelism: parallelism)
        return "scrypt$ln=\(logN),r=\(blockSize),p=\(parallelism)$\(Data(salt).base64EncodedString())$"
            + Data(key).base64EncodedString()
    }

    private static func scrypt(
        _ password: String, salt: [UInt8], logN: Int, blockSize: Int, parallelism: Int
    ) throws -> [UInt8] {
        var key = [UInt8](repeating: 0, count: keyLength)
        let passwordBytes = Array(password.utf8)
        // Memory scrypt needs is 128·r·N bytes; OpenSSL's default ceiling (32 MiB) is just below N = 2^15, r = 8.
        let memory = UInt64(128 * blockSize) << UInt64(logN) + (1 << 20)
        let ok = passwordBytes.withUnsafeBufferPointer { passwordBuffer in
            passwordBuffer.withMemoryRebound(to: CChar.self) { pass in
                EVP_PBE_scrypt(
                    pass.baseAddress, pass.count, salt, salt.count, UInt64(1) << UInt64(logN), UInt64(blockSize),
                    UInt64(parallelism), memory, &key, key.count)
            }
        }
        guard ok == 1 else {
            ERR_clear_error()
            throw PlaitError.usage("the password could not be hashed (OpenSSL's scrypt failed); try again.")
        }
        return key
    }

    private static func randomBytes(_ count: Int) throws -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: count)
        guard RAND_bytes(&bytes, Int32(count)) == 1 else {
            throw PlaitError.usage("no random bytes for the password's salt (OpenSSL's RAND_bytes failed); try again.")
        }
        return bytes
    }
}

/// The brake on password guessing: each source address gets `freeTries` wrong passwords, then waits 2, 4, 8 …
/// seconds (at most `maxWait`) before the next try; all sources together get `globalFreeTries`, then the same
/// back-off for every source but those that signed in with the right password before, while this agent runs (many
/// addresses guessing at once). A right password clears its source's count. A source that stays quiet
/// `forgetAfter` starts afresh.
///
/// The shared back-off held back everyone, so a client with a handful of addresses kept the owner out for up to 5
/// minutes at a time, told "too many wrong passwords" though they had sent none (API tester 2026-11-25, G5). An
/// address the owner has signed in from is now let through it (its own count still applies); a new address waits
/// like any other, so a guesser with many addresses (an IPv6 /64 offers 2^64) still gets no more than the shared
/// budget. Sources are full addresses: on a LAN the owner and a guesser usually share one /64, so grouping by
/// prefix would put the guesser's failures on the owner.
public final class LoginLimiter: Sendable {
    public static let freeTries = 3
    public static let globalFreeTries = 20
    public static let maxWait: Duration = .seconds(300)
    static let forgetAfter: Duration = .seconds(900)
    /// Sources remembered at most; beyond it those not waiting are forgotten (an attacker with many addresses
    /// meets the global limit instead).
    static let maxSources = 4096
    /// Addresses a right password came from, remembered at most (the oldest forgotten first).
    static let maxTrusted = 64

    private struct Record {
        var failures = 0
        var last: ContinuousClock.Instant
        var blockedUntil: ContinuousClock.Instant
    }

    private struct Counts {
        var sources: [String: Record] = [:]
        var global: Record
        /// Addresses that signed in with the right password, oldest first.
        var trusted: [String] = []
    }

    private let state: LockedValue<Counts>

    public init(now: ContinuousClock.Instant = .now) {
        state = LockedValue(Counts(global: Record(last: now, blockedUntil: now)))
    }

    /// How long `source` must still wait before a password is even checked; nil if it may try now.
    /// How long a source must wait, and whether it is for other sources' failures (the shared back-off, which
    /// grows while they go on) rather than its own.
    public struct Wait: Sendable, Equatable {
        public var duration: Duration
        public var shared: Bool
    }

    public func wait(source: String, now: ContinuousClock.Instant = .now) -> Duration? {
        state.withLock { counts in Self.waitLeft(counts, source: source, now: now)?.duration }
    }

    /// Counts a wrong password from `source`.
    public func failed(source: String, now: ContinuousClock.Instant = .now) {
        state.withLock { counts in Self.countFailure(&counts, source: source, now: now) }
    }

    /// `wait`, and when the try may go on, counted as a wrong password at once, in one step: a password is
    /// checked only after its try is counted. (Checked first and counted after the slow scrypt, 300 guesses sent
    /// together were all checked: each saw the count before any was added.) `succeeded` takes a right one back.
    public func beginTry(source: String, now: ContinuousClock.Instant = .now) -> Wait? {
        state.withLock { counts in
            if let wait = Self.waitLeft(counts, source: source, now: now) { return wait }
            Self.countFailure(&counts, source: source, now: now)
            return nil
        }
    }

    /// A right password from `source`: its count starts again, and the try `beginTry` counted against every
    /// source is taken back.
    public func succeeded(source: String) {
        state.withLock { counts in
            _ = counts.sources.removeValue(forKey: source)
            counts.global.failures = max(counts.global.failures - 1, 0)
            counts.trusted.removeAll { $0 == source }
            counts.trusted.append(source)
            if counts.trusted.count > Self.maxTrusted {
                counts.trusted.removeFirst(counts.trusted.count - Self.maxTrusted)
            }
        }
    }

    private static func waitLeft(_ counts: Counts, source: String, now: ContinuousClock.Instant) -> Wait? {
        let own = counts.sources[source]?.blockedUntil ?? now
        // An address the owner signed in from is not held back by other sources' failures.
        let until = counts.trusted.contains(source) ? own : max(counts.global.blockedUntil, own)
        return until > now ? Wait(duration: until - now, shared: until > own) : nil
    }

    private static func countFailure(_ counts: inout Counts, source: String, now: ContinuousClock.Instant) {
        if counts.sources.count >= maxSources {
            counts.sources = counts.sources.filter { $0.value.blockedUntil > now }
        }
        var record = counts.sources[source] ?? Record(last: now, blockedUntil: now)
        count(&record, freeTries: freeTries, now: now)
        counts.sources[source] = record
        count(&counts.global, freeTries: globalFreeTries, now: now)
    }

    private static func count(_ record: inout Record, freeTries: Int, now: ContinuousClock.Instant) {
        if now - record.last > forgetAfter { record.failures = 0 }
        record.failures += 1
        record.last = now
        guard record.failures >= freeTries else { return }
        let exponent = min(record.failures - freeTries + 1, 16)
        record.blockedUntil = now + min(.seconds(1 << exponent), maxWait)
    }
}
