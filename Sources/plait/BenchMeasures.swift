import Foundation
import GRDB
import GRDBSQLite
import PlaitCore
import PlaitNetnsSupport
import PlaitStore
import PlaitSession
import PlaitSync

/// One figure measured several times: reported as a range (this machine is a noisy VM) with its median.
struct Sample {
    var values: [Double] = []

    init(_ values: [Double] = []) { self.values = values }

    mutating func add(_ value: Double) { values.append(value) }

    var min: Double { values.min() ?? 0 }
    var max: Double { values.max() ?? 0 }
    var median: Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return 0 }
        return sorted.count % 2 == 1
            ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
    }

    /// "1.2 – 1.9 (median 1.4)" with `format` for each number; one run prints one number.
    func text(_ format: String = "%.0f") -> String {
        let one = { (value: Double) in String(format: format, value) }
        if values.count <= 1 { return one(median) }
        return "\(one(min)) – \(one(max)) (median \(one(median)))"
    }

    var json: [String: Any] { ["min": min, "median": median, "max": max, "runs": values] }
}

/// The p50 and p99 of one round of timings (milliseconds), as every latency benchmark reports them.
func percentiles(_ timings: [Double]) -> (p50: Double, p99: Double) {
    let sorted = timings.sorted()
    return (sorted[sorted.count / 2], sorted[Swift.min(sorted.count - 1, sorted.count * 99 / 100)])
}

/// A child process measured from outside: wall time, CPU and peak resident memory from `wait4`'s rusage.
///
/// The child is started by a small helper process (this binary, `plait bench --measure-child FILE -- CMD…`),
/// not by the benchmark itself: on Linux a child's `ru_maxrss` is the larger of its own peak and the peak of
/// the memory of the process it was spawned from (posix_spawn shares the parent's memory until exec, and exec
/// records that memory's peak), so a child spawned by the benchmark (hundreds of MiB) would report the
/// benchmark's peak, not its own. The helper's own peak is reported as `floorKiB`: a child's figure at or near
/// it only says the child used no more.
struct ChildMeasurement {
    var seconds: Double
    var peakKiB: Int
    var cpuSeconds: Double
    var exitStatus: Int32
    var floorKiB: Int
    var output: Data

    var peakMiB: Double { Double(peakKiB) / 1024 }

    /// The path of this executable, to run `plait` subcommands (and the measuring helper) as child processes.
    static var executable: String {
        (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
            ?? Bundle.main.executablePath ?? CommandLine.arguments[0]
    }

    /// Runs `arguments` (an executable path and its arguments) through the measuring helper. Its standard
    /// output is captured when `captureOutput`, else sent to /dev/null.
    static func run(_ arguments: [String], captureOutput: Bool, scratch: String) throws -> ChildMeasurement {
        let base = scratch + "/measure-\(UUID().uuidString)"
        let (resultPath, outputPath) = (base + ".json", base + ".out")
        defer { for path in [resultPath, outputPath] { try? FileManager.default.removeItem(atPath: path) } }
        let output = open(captureOutput ? outputPath : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard output >= 0 else { throw PlaitError.usage("cannot create \(outputPath): \(String(cString: strerror(errno)))") }
        defer { close(output) }
        // ChildProcess, not Foundation's Process, whose run() can crash this process (`Spawn` says why). Standard
        // input and error are this process's.
        let process = try ChildProcess(
            executable, ["bench", "--measure-child", resultPath, "--"] + arguments,
            streams: (STDIN_FILENO, output, STDERR_FILENO))
        process.waitUntilExit()
        let printed = captureOutput ? FileManager.default.contents(atPath: outputPath) ?? Data() : Data()
        guard let data = FileManager.default.contents(atPath: resultPath),
            let json = try JSONSerialization.jsonObject(with: data) as? [String: Any],
            let seconds = json["seconds"] as? Double, let peak = json["max_rss_kib"] as? Int,
            let cpu = json["cpu_seconds"] as? Double, let status = json["exit_status"] as? Int,
            let floor = json["helper_peak_kib"] as? Int
        else {
            throw PlaitError.usage("measuring `\(arguments.joined(separator: " "))` failed (no result from the helper)")
        }
        return ChildMeasurement(
            seconds: seconds, peakKiB: peak, cpuSeconds: cpu, exitStatus: Int32(status), floorKiB: floor,
            output: printed)
    }

    /// The helper's side: spawns `command`, waits for it with `wait4`, writes the figures to `resultPath`.
    static func measure(command: [String], resultPath: String) throws {
        guard let path = command.first else { throw PlaitError.usage("--measure-child needs a command after --") }
        let argv = command.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let floor = Plait.Bench.peakResidentKiB()
        let start = DispatchTime.now().uptimeNanoseconds
        let code = posix_spawn(&pid, path, nil, nil, argv, environ)
        guard code == 0 else {
            throw PlaitError.usage("could not start \(path): \(String(cString: strerror(code)))")
        }
        var status: Int32 = 0
        var usage = rusage()
        while wait4(pid, &status, 0, &usage) < 0 && errno == EINTR {}
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        // WIFEXITED / WEXITSTATUS (macros Swift cannot import); a signal is reported as 128 + its number.
        let exitStatus = status & 0x7f == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
        let result: [String: Any] = [
            "seconds": seconds, "max_rss_kib": usage.ru_maxrss, "cpu_seconds": usage.cpuSeconds, "exit_status": Int(exitStatus),
            "helper_peak_kib": floor,
        ]
        try JSONSerialization.data(withJSONObject: result).write(to: URL(fileURLWithPath: resultPath))
    }
}

extension rusage {
    /// User plus system CPU time, in seconds.
    var cpuSeconds: Double {
        Double(ru_utime.tv_sec + ru_stime.tv_sec) + Double(ru_utime.tv_usec + ru_stime.tv_usec) / 1e6
    }
}

/// The practical ceiling of a catch-up: SQLite itself inserting the same change rows into the same table.
enum SQLiteCeiling {
    /// The rows split as a sync sends them: at most `batchChanges` changes and, past the first, at most
    /// `batchBytes` by the sender's own size bound (SessionMachine's paging), so each transaction here
    /// commits what one received batch commits.
    static func batches(of rows: [Change], batchChanges: Int, batchBytes: Int) -> [ArraySlice<Change>] {
        var batches: [ArraySlice<Change>] = []
        var start = 0
        var bytes = 0
        for index in rows.indices {
            let size = Store.encodedSizeBound(of: rows[index])
            if index > start && (index - start >= batchChanges || bytes + size > batchBytes) {
                batches.append(rows[start..<index])
                start = index
                bytes = 0
            }
            bytes += size
        }
        if start < rows.count { batches.append(rows[start...]) }
        return batches
    }

    /// Seconds to insert `batches` into a fresh store at `path` (created by `Store.create`, so the schema,
    /// indexes, WAL mode and `synchronous` setting are the store's own), one IMMEDIATE transaction per batch,
    /// through one prepared statement bound with SQLite's C API. The rows are built before the clock starts.
    static func insertSeconds(_ batches: [ArraySlice<Change>], path: String, synchronousFull: Bool) throws -> Double {
        let store = try Store.create(at: path, timeline: TimelineID.random(), synchronousFull: synchronousFull)
        defer { _ = store }
        let pragma = synchronousFull ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL"
        let pool = try DatabasePool(path: path)
        // Set after GRDB's own WAL set-up (which sets NORMAL), as Store does for its writer.
        try pool.writeWithoutTransaction { db in try db.execute(sql: pragma) }
        let start = DispatchTime.now().uptimeNanoseconds
        for batch in batches {
            try pool.writeWithoutTransaction { db in
                try db.inTransaction(.immediate) {
                    try insert(batch, db)
                    return .commit
                }
            }
        }
        let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
        try pool.close()
        return seconds
    }

    private static func insert(_ rows: ArraySlice<Change>, _ db: Database) throws {
        let statement = try db.makeStatement(
            sql: """
                INSERT INTO changes (tl, seq, lamport, kind, version, wall, prev, payload)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """)
        let handle = statement.sqliteStatement
        let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
        for change in rows {
            sqlite3_reset(handle)
            // The timeline column is the ID with its sign bit flipped (Store's timelineColumn).
            sqlite3_bind_int64(handle, 1, Int64(bitPattern: change.timeline.rawValue ^ 0x8000_0000_0000_0000))
            sqlite3_bind_int64(handle, 2, Int64(change.seq))
            sqlite3_bind_int64(handle, 3, Int64(change.lamport))
            change.kind.utf8CString.withUnsafeBufferPointer { text in
                _ = sqlite3_bind_text(handle, 4, text.baseAddress, Int32(text.count - 1), transient)
            }
            sqlite3_bind_int64(handle, 5, Int64(change.version))
            sqlite3_bind_int64(handle, 6, change.wallTime)
            change.previousHash.withUnsafeBytes { bytes in
                _ = sqlite3_bind_blob(handle, 7, bytes.baseAddress, Int32(bytes.count), transient)
            }
            change.payload.withUnsafeBytes { bytes in
                _ = sqlite3_bind_blob(handle, 8, bytes.baseAddress, Int32(bytes.count), transient)
            }
            guard sqlite3_step(handle) == SQLITE_DONE else {
                let message = String(cString: sqlite3_errmsg(sqlite3_db_handle(handle)))
                throw PlaitError.usage("SQLite refused change \(change.ref): \(message)")
            }
        }
        sqlite3_reset(handle)
    }
}

/// pycrdt applying the equivalent update in memory (scripts/pycrdt-anchor.py), when python3 has pycrdt.
enum PycrdtAnchor {
    struct Result {
        var operations: Int
        var updateBytes: Int
        var apply: Sample
        var version: String
    }

    /// The script: `explicit`, else scripts/pycrdt-anchor.py in the working directory or in the checkout that
    /// holds this binary (.build/<config>/plait).
    static func script(explicit: String?) -> String? {
        if let explicit { return explicit }
        let binary = URL(fileURLWithPath: ChildMeasurement.executable)
        let candidates = [
            FileManager.default.currentDirectoryPath + "/scripts/pycrdt-anchor.py",
            binary.deletingLastPathComponent().appendingPathComponent("../../scripts/pycrdt-anchor.py")
                .standardizedFileURL.path,
            binary.deletingLastPathComponent().appendingPathComponent("../../../scripts/pycrdt-anchor.py")
                .standardizedFileURL.path,
        ]
        return candidates.first { FileManager.default.fileExists(atPath: $0) }
    }

    /// Why the anchor cannot run here, or nil when it can.
    static func unavailable(script: String?) -> String? {
        guard let script else { return "scripts/pycrdt-anchor.py not found (pass --pycrdt-script)" }
        guard FileManager.default.fileExists(atPath: script) else { return "\(script) does not exist" }
        guard let probe = try? ChildProcess.run("/usr/bin/env", ["python3", "-c", "import pycrdt"]),
            probe.termination != .exited(127)
        else { return "python3 is not installed" }
        return probe.succeeded ? nil : "python3 cannot import pycrdt (`pip install pycrdt`)"
    }

    static func run(script: String, arguments: [String], runs: Int) throws -> Result {
        let process = try ChildProcess.run("/usr/bin/env", ["python3", script, "--runs", "\(runs)"] + arguments)
        let data = Data(process.output.utf8)
        guard process.succeeded,
            let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let operations = json["operations"] as? Int, let bytes = json["update_bytes"] as? Int,
            let seconds = json["apply_seconds"] as? [Double]
        else {
            throw PlaitError.usage("the pycrdt anchor failed: \(process.output)\(process.errors)")
        }
        return Result(
            operations: operations, updateBytes: bytes, apply: Sample(seconds),
            version: json["pycrdt_version"] as? String ?? "?")
    }
}
