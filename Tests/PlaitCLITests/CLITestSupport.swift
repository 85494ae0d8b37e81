import Foundation
import PlaitCore
import PlaitNetnsSupport
import PlaitTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The built `plait` executable, found next to the running test binary.
///
/// SwiftPM puts the test bundle and the executables in the same products directory
/// (`<scratch>/debug/plaitPackageTests.xctest` beside `<scratch>/debug/plait`), whatever the scratch path.
/// `PLAIT_EXECUTABLE` overrides the search.
enum PlaitExecutable {
    static let path: Result<String, LocateFailure> = locate()

    struct LocateFailure: Error, CustomStringConvertible {
        let searched: [String]
        var description: String {
            "cannot find the built `plait` executable; looked for an executable file named plait in:\n"
                + searched.map { "  " + $0 }.joined(separator: "\n")
                + "\nBuild it first (`swift build --build-tests`), or set PLAIT_EXECUTABLE to its path."
        }
    }

    static func locate() -> Result<String, LocateFailure> {
        let manager = FileManager.default
        if let explicit = ProcessInfo.processInfo.environment["PLAIT_EXECUTABLE"], !explicit.isEmpty {
            return isExecutableFile(explicit) ? .success(explicit) : .failure(LocateFailure(searched: [explicit]))
        }
        let cwd = URL(fileURLWithPath: manager.currentDirectoryPath, isDirectory: true)
        var starts: [URL] = []
        if let main = Bundle.main.executableURL { starts.append(main) }
        if let first = CommandLine.arguments.first { starts.append(URL(fileURLWithPath: first, relativeTo: cwd)) }
        starts.append(Bundle.main.bundleURL)
        var searched: [String] = []
        for start in starts {
            var directory = start.standardizedFileURL.resolvingSymlinksInPath().deletingLastPathComponent()
            // The products directory is the binary's own, or a few levels up from inside a bundle (macOS).
            for _ in 0..<5 {
                let candidate = directory.appendingPathComponent("plait").path
                if !searched.contains(candidate) { searched.append(candidate) }
                if isExecutableFile(candidate) { return .success(candidate) }
                let parent = directory.deletingLastPathComponent()
                if parent.path == directory.path { break }
                directory = parent
            }
        }
        return .failure(LocateFailure(searched: searched))
    }

    static func isExecutableFile(_ path: String) -> Bool {
        var isDirectory: ObjCBool = false
        return FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) && !isDirectory.boolValue
            && FileManager.default.isExecutableFile(atPath: path)
    }
}

/// What one run of `plait` did.
struct PlaitRun: CustomStringConvertible {
    let arguments: [String]
    let status: Int32
    let stdout: String
    let stderr: String
    /// Ended by a signal (a trap, a crash), not by exiting: `status` is then the signal's number.
    var signaled = false

    var succeeded: Bool { status == 0 }
    /// A trap or crash, never acceptable: killed by a signal, or the Swift runtime's fatal-error report.
    var crashed: Bool { signaled || stderr.contains("Fatal error") || stderr.contains("Program crashed") }
    var lines: [String] { stdout.split(separator: "\n", omittingEmptySubsequences: true).map(String.init) }

    /// The standard output parsed as a JSON object.
    func json() throws -> [String: Any] {
        guard let object = try JSONSerialization.jsonObject(with: Data(stdout.utf8)) as? [String: Any] else {
            throw CLITestFailure("`plait \(arguments.joined(separator: " "))` did not print a JSON object: \(stdout)")
        }
        return object
    }

    var description: String {
        "`plait \(arguments.joined(separator: " "))` exited \(status)\nstdout: \(stdout)\nstderr: \(stderr)"
    }
}

struct CLITestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A private world for one test: a temporary directory holding the device home, the XDG directories and
/// `HOME`, so the machine's real config and data are never read. Every process it starts has exited (or
/// been killed) when `run` returns.
final class Sandbox {
    let root: String
    /// The default device home (`PLAIT_HOME` of every run unless a test says otherwise).
    let home: String
    let configHome: String

    init(_ label: String) throws {
        let name = "plait-cli-tests-" + label.filter { $0.isLetter || $0.isNumber } + "-" + UUID().uuidString
        root = FileManager.default.temporaryDirectory.appendingPathComponent(name).path
        home = root + "/home"
        configHome = root + "/xdg-config"
        for directory in [root, configHome, root + "/xdg-data", root + "/user", root + "/io"] {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        }
    }

    func remove() { try? FileManager.default.removeItem(atPath: root) }

    /// The environment of every run: nothing inherited but PATH and the locale.
    var baseEnvironment: [String: String] {
        var environment = [
            "HOME": root + "/user",
            "XDG_CONFIG_HOME": configHome,
            "XDG_DATA_HOME": root + "/xdg-data",
            "PLAIT_HOME": home,
            "COLUMNS": "80",
            // A bus that is not there: discovery (pair, sync, doctor) never reaches the machine's own
            // avahi-daemon; the LAN tests run plait in namespaces with a daemon of their own instead.
            "DBUS_SYSTEM_BUS_ADDRESS": "unix:path=\(root)/no-system-bus",
        ]
        let inherited = ProcessInfo.processInfo.environment
        environment["PATH"] = inherited["PATH"] ?? "/usr/bin:/bin"
        if let lang = inherited["LANG"] { environment["LANG"] = lang }
        return environment
    }

    private var runs = 0

    /// Runs `plait ARGUMENTS` to completion. `environment` entries override the base ones; a nil value
    /// removes one. Kills the process if it runs longer than `timeout` seconds.
    @discardableResult
    func run(
        _ arguments: [String], stdin: String? = nil, environment overrides: [String: String?] = [:],
        timeout: Double = 30
    ) throws -> PlaitRun {
        let executable = try PlaitExecutable.path.get()
        runs += 1
        let io = root + "/io/\(runs)"
        let manager = FileManager.default
        for suffix in [".in", ".out", ".err"] {
            guard manager.createFile(atPath: io + suffix, contents: suffix == ".in" ? Data((stdin ?? "").utf8) : nil)
            else { throw CLITestFailure("cannot create \(io + suffix)") }
        }
        var environment = baseEnvironment
        for (key, value) in overrides { environment[key] = value }

        // ChildProcess, not Foundation's Process, whose run() can crash the test process (`Spawn` says why).
        let process = try ChildProcess(
            executable, arguments, environment: environment, stdin: io + ".in", stdout: io + ".out",
            stderr: io + ".err", directory: root, ownProcessGroup: true)
        if process.wait(seconds: timeout) == nil {
            process.stop(grace: 5)
            throw CLITestFailure("`plait \(arguments.joined(separator: " "))` ran over \(timeout) s and was killed")
        }
        let read = { (path: String) in String(decoding: manager.contents(atPath: path) ?? Data(), as: UTF8.self) }
        return PlaitRun(
            arguments: arguments, status: process.terminationStatus, stdout: read(io + ".out"),
            stderr: read(io + ".err"), signaled: process.wasSignaled)
    }

    /// Homes named `names` under the sandbox, each made by `plait init --name`: their paths and Device IDs.
    func initHomes(_ names: [String]) throws -> [(home: String, id: String)] {
        try names.map { name in
            let home = root + "/" + name
            try ok(["init", "--name", name, "--home", home])
            return (home, try ok(["id", "--home", home]).lines.last ?? "")
        }
    }

    /// `initHomes`, each home trusting every other one (`plait pair --trust`, no address).
    func pairedHomes(_ names: [String]) throws -> [(home: String, id: String)] {
        let devices = try initHomes(names)
        for device in devices {
            for other in devices where other.home != device.home {
                try ok(["pair", "--trust", other.id, "--home", device.home])
            }
        }
        return devices
    }

    /// Runs a command that must succeed; records the output as the failure otherwise.
    @discardableResult
    func ok(
        _ arguments: [String], stdin: String? = nil, environment: [String: String?] = [:],
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> PlaitRun {
        let result = try run(arguments, stdin: stdin, environment: environment)
        guard result.succeeded else {
            Issue.record("expected success: \(result)", sourceLocation: sourceLocation)
            throw CLITestFailure("command failed")
        }
        return result
    }

    /// Runs a command that must fail with a non-zero status and a message on standard error.
    @discardableResult
    func fails(
        _ arguments: [String], stdin: String? = nil, environment: [String: String?] = [:],
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> PlaitRun {
        let result = try run(arguments, stdin: stdin, environment: environment)
        #expect(result.status != 0, "expected a failure: \(result)", sourceLocation: sourceLocation)
        #expect(!result.stderr.isEmpty, "a failure must say why on stderr: \(result)", sourceLocation: sourceLocation)
        #expect(
            !result.stderr.contains("Fatal error"), "never a crash on user input: \(result)",
            sourceLocation: sourceLocation)
        return result
    }

    /// `plait init` of the default home.
    func initialize(name: String = "test-device") throws {
        try ok(["init", "--name", name])
    }

    /// `status --json`.
    func status(_ extra: [String] = []) throws -> [String: Any] { try ok(["status", "--json"] + extra).json() }

    /// The state a refused command must leave: summary and digest.
    func fingerprint() throws -> String {
        let status = try status()
        return
            "summary \(status["summary"] ?? "?") digest \(status["digest"] ?? "?") changes \(status["changes"] ?? "?")"
    }

    /// `show --json`, as lists of (title, color, pending texts, completed texts).
    func shown() throws -> [ShownList] {
        let object = try ok(["show", "--json"]).json()
        guard let lists = object["lists"] as? [[String: Any]] else { throw CLITestFailure("show --json: no lists") }
        return try lists.map { try ShownList($0) }
    }
}

/// One list of `show --json`, checked for exactly the documented keys.
struct ShownList: Equatable, CustomStringConvertible {
    var id: String
    var title: String
    var color: String?
    var pending: [ShownItem]
    var completed: [ShownItem]

    init(_ object: [String: Any]) throws {
        guard Set(object.keys) == ["id", "title", "color", "pending", "completed"] else {
            throw CLITestFailure("a list in show --json has keys \(object.keys.sorted())")
        }
        guard let id = object["id"] as? String, let title = object["title"] as? String,
            let pending = object["pending"] as? [[String: Any]], let completed = object["completed"] as? [[String: Any]]
        else { throw CLITestFailure("a list in show --json has values of the wrong type: \(object)") }
        self.id = id
        self.title = title
        color = object["color"] as? String
        if color == nil && !(object["color"] is NSNull) { throw CLITestFailure("color is neither a string nor null") }
        self.pending = try pending.map { try ShownItem($0) }
        self.completed = try completed.map { try ShownItem($0) }
    }

    var pendingTexts: [String] { pending.map(\.text) }
    var completedTexts: [String] { completed.map(\.text) }
    var description: String { "\(title) (\(color ?? "no color")): \(pendingTexts) done \(completedTexts)" }
}

struct ShownItem: Equatable {
    var id: String
    var text: String

    init(_ object: [String: Any]) throws {
        guard Set(object.keys) == ["id", "text"], let id = object["id"] as? String, let text = object["text"] as? String
        else { throw CLITestFailure("an item in show --json is \(object)") }
        self.id = id
        self.text = text
    }
}

/// Runs `body` in a fresh sandbox, removed afterwards whatever happens.
func withSandbox<T>(_ label: String = #function, _ body: (Sandbox) throws -> T) throws -> T {
    let sandbox = try Sandbox(label)
    defer { sandbox.remove() }
    return try body(sandbox)
}

/// A file's size and SHA-256: compared instead of the bytes, so a failure prints two short lines.
func fingerprint(ofFile path: String) -> String {
    guard let data = FileManager.default.contents(atPath: path) else { return "(no file)" }
    return "\(data.count) bytes, sha256 \(SHA256.hash([UInt8](data)).hexString)"
}

/// The shortest prefix (at least 4 characters) of `id` that no other of `ids` shares.
func uniquePrefix(of id: String, among ids: [String]) -> String {
    var length = 4
    while length < id.count, ids.contains(where: { $0 != id && $0.hasPrefix(id.prefix(length)) }) { length += 1 }
    return String(id.prefix(length))
}

/// Calls `body` with the socket address 127.0.0.1:`port` and its length (to connect or bind a test's socket).
func withLoopbackAddress<R>(port: Int, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
}

// MARK: A small disk (root only: tests needing it are enabled `if: getuid() == 0`)

/// A new tmpfs of `size` (e.g. "2m") mounted in the sandbox; the caller unmounts it (`mount(["-u", path])`).
func smallTmpfs(_ sandbox: Sandbox, size: String) throws -> String {
    let mountPoint = sandbox.root + "/small"
    try FileManager.default.createDirectory(atPath: mountPoint, withIntermediateDirectories: true)
    try mount(["-t", "tmpfs", "-o", "size=\(size)", "tmpfs", mountPoint])
    return mountPoint
}

/// Fills what is left of the file system at `directory` with a file of zeros.
func fill(_ directory: String) throws {
    let filler = directory + "/filler"
    guard FileManager.default.createFile(atPath: filler, contents: nil),
        let handle = FileHandle(forWritingAtPath: filler)
    else { throw CLITestFailure("cannot create \(filler)") }
    let block = Data(count: 64 << 10)
    while (try? handle.write(contentsOf: block)) != nil {}
    try? handle.close()
}

func mount(_ arguments: [String]) throws {
    let mounted = try ChildProcess.run(
        arguments.first == "-u" ? "/bin/umount" : "/bin/mount",
        arguments.first == "-u" ? Array(arguments.dropFirst()) : arguments)
    guard mounted.succeeded else {
        throw CLITestFailure("mount \(arguments.joined(separator: " ")) ended \(mounted.termination): \(mounted.errors)")
    }
}

/// Puts a backup of a home back by hand, as `cp -a backup/. home/` does over the home's existing files (no process
/// has the home open): each file is rewritten in place, so `plait.db` keeps its inode and plait cannot tell it was
/// put back (a filesystem snapshot's rollback, which also keeps inodes, looks the same) until a peer shows the
/// timeline went on. Files the backup does not hold (a `-wal` written since) are removed.
func restoreInPlace(_ backup: String, over home: String) throws {
    let manager = FileManager.default
    let kept = Set(try manager.subpathsOfDirectory(atPath: backup))
    for path in try manager.subpathsOfDirectory(atPath: home) where !kept.contains(path) {
        let target = home + "/" + path
        var isDirectory: ObjCBool = false
        if manager.fileExists(atPath: target, isDirectory: &isDirectory), !isDirectory.boolValue {
            try manager.removeItem(atPath: target)
        }
    }
    for path in kept.sorted() {
        let (source, target) = (backup + "/" + path, home + "/" + path)
        var isDirectory: ObjCBool = false
        _ = manager.fileExists(atPath: source, isDirectory: &isDirectory)
        if isDirectory.boolValue {
            if !manager.fileExists(atPath: target) {
                try manager.createDirectory(atPath: target, withIntermediateDirectories: true)
            }
        } else if let handle = FileHandle(forWritingAtPath: target) {
            defer { try? handle.close() }
            try handle.truncate(atOffset: 0)
            try handle.write(contentsOf: try Data(contentsOf: URL(fileURLWithPath: source)))
        } else {
            try manager.copyItem(atPath: source, toPath: target)
        }
    }
}

/// `forgetStoreFile(storePath:)` on the store of `home`: a copy of the home is then not noticed as one at its first
/// write (a clone that keeps inodes; a home last written by a plait from before the identity was recorded).
func forgetStoreFile(home: String) throws {
    try forgetStoreFile(storePath: home + "/plait.db")
}
