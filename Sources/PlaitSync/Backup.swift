import Foundation
import PlaitCore
import PlaitStore
import PlaitTLS

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `plait backup` and `plait restore`: a home copied the way SQLite wants it copied, and put back the way a running
/// agent cannot be hurt by.
///
/// A file copy of a home (`cp -a`) while an agent or a command writes can tear: in WAL mode the latest changes are
/// in `plait.db-wal`, and a checkpoint between copying the two files leaves a copy whose pages come from two
/// moments. A copy put back over the files of a running agent (in place, not by rename) is not seen by it, which
/// goes on writing from what it had read (hostile tester 2026-11-25-i). `backup` copies the store as one read
/// transaction sees it, and `restore` refuses while an agent runs and moves what it replaces aside.
extension Home {
    /// What a backup holds besides `plait.db`: the identity (without it the backup is not this device), the retired
    /// identities of `rejoin --new-key` (an interrupted rekey is finished from them), and what the caller names
    /// (the local API's password hash and token).
    static func backedUpNames(also: [String]) -> [String] {
        [Identity.keyFileName, Identity.certificateFileName, retiredDirectoryName] + also
    }

    /// What `plait backup` wrote.
    public struct BackupReport: Sendable {
        public var path: String
        /// The Device ID, or nil when this home's certificate cannot be read (`identityProblem` says why).
        public var deviceID: String?
        public var identityProblem: String?
        public var summary: Summary
        public var changes: Int
        /// The names written in `path`, the store first.
        public var files: [String]
    }

    /// Writes a backup of this home to `destination`, a directory that must not exist or be empty (it is made, with
    /// its parents, mode 0700): the store as one moment (writers go on meanwhile), checked with `integrity_check`,
    /// and the files `backedUpNames` names that exist, links followed, each file mode 0600. A home whose identity
    /// cannot be read is backed up all the same (its store may hold what is found nowhere else), and says so. On any
    /// failure what was written is removed, and `destination` too if this made it.
    public func backup(to destination: String, also: [String] = []) throws -> BackupReport {
        let destination = Self.absolute(destination)
        let manager = FileManager.default
        if Self.isWithin(destination, path) {
            throw PlaitError.usage(
                "the backup cannot go inside the home it copies (\(destination)): choose a directory elsewhere, "
                    + "ideally on another disk")
        }
        var identityProblem: String?
        let identity: Identity?
        do {
            identity = try self.identity
        } catch {
            identity = nil
            identityProblem = "\(Self.wrap(error))"
        }
        var isDirectory: ObjCBool = false
        let existed = manager.fileExists(atPath: destination, isDirectory: &isDirectory)
        if existed {
            guard isDirectory.boolValue else {
                throw PlaitError.file(path: destination, problem: "is a file: a backup is a directory; nothing was written")
            }
            let entries = (try? manager.contentsOfDirectory(atPath: destination)) ?? []
            guard entries.isEmpty else {
                throw PlaitError.file(
                    path: destination,
                    problem: "is not empty (\(entries.count) entries): a backup goes into a new or empty directory, so "
                        + "no older backup is mixed with it; nothing was written")
            }
            // It holds the device's private key.
            guard chmod(destination, 0o700) == 0 else {
                throw PlaitError.file(
                    path: destination, problem: "cannot make it private (\(String(cString: strerror(errno))))")
            }
        } else {
            try Self.makeDirectories(destination)
        }
        var written: [String] = []
        do {
            let storeCopy = destination + "/" + Self.storeFileName
            try Self.wrapping { try Store.copy(at: storePath, to: storeCopy) }
            written.append(Self.storeFileName)
            _ = chmod(storeCopy, 0o600)
            let inspection = try Self.wrapping { try Store.inspect(at: storeCopy) }
            guard inspection.integrity == ["ok"] else {
                throw PlaitError.file(
                    path: storeCopy,
                    problem: "the copy fails SQLite's integrity check (\(inspection.integrity.prefix(3).joined(separator: "; "))): "
                        + "run `plait doctor` on this home")
            }
            for name in Self.backedUpNames(also: also) where manager.fileExists(atPath: path + "/" + name) {
                try Self.copyTree(path + "/" + name, to: destination + "/" + name)
                written.append(name)
            }
            try Self.syncDirectory(destination)
            try Self.syncDirectory((destination as NSString).deletingLastPathComponent)
            return BackupReport(
                path: destination, deviceID: identity?.deviceID.description, identityProblem: identityProblem,
                summary: inspection.summary, changes: inspection.changes, files: written)
        } catch {
            for name in written { try? manager.removeItem(atPath: destination + "/" + name) }
            if !existed { try? manager.removeItem(atPath: destination) }
            throw Self.wrap(error)
        }
    }

    /// What `plait restore` did.
    public struct RestoreReport: Sendable {
        public var home: String
        public var deviceID: String
        public var summary: Summary
        public var changes: Int
        /// Where the files it replaced went (nil: the home held none).
        public var replacedPath: String?
        public var replaced: [String]
        /// Whether the next edit begins a new timeline by itself (a signed own timeline), or a peer's later changes
        /// of the old one will stop authoring until `plait rejoin` (an unsigned one, from before signed timelines).
        public var newTimelineAtNextEdit: Bool
    }

    /// The directory name (then a UTC time) the files a restore replaces are moved to, in the home.
    public static let replacedByRestorePrefix = "replaced-by-restore-"
    /// In a `replaced-by-restore-…` directory while the restore that made it has not finished.
    static let incompleteMarker = "restore-not-finished"
    /// In such a directory: what a cut-off restore had already put in place, moved aside by the run that finished it.
    static let putInByCutRestore = "put-in-by-an-interrupted-restore"

    /// The `replaced-by-restore-…` directory of a restore that was cut off in the home at `path`, if there is one.
    public static func cutRestore(at path: String) -> String? {
        let entries = ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
        return entries.lazy.filter { $0.hasPrefix(replacedByRestorePrefix) }.map { path + "/" + $0 }
            .first { FileManager.default.fileExists(atPath: $0 + "/" + incompleteMarker) }
    }

    /// Puts the backup at `backup` in place as the home at `homePath` (made, with its parents, if missing). Refuses
    /// while an agent runs there (it holds the store open and would write on from what it had read), a backup in
    /// the home itself, one whose store fails `integrity_check` or whose key and certificate do not belong
    /// together, and a backup of another device than the home's. The backup's store is copied as one moment (with
    /// its `-wal`, if it has one) and its files under temporary names first: a failure there changes nothing. Then
    /// the home's files they replace are moved to `replaced-by-restore-TIME/` in the home (never deleted), and the
    /// copies renamed into place. Cut off after that, running it again finishes it, into the same directory.
    public static func restore(
        from backup: String, to homePath: String, also: [String] = [], dropped: [String] = [], now: Date = Date()
    ) throws -> RestoreReport {
        let backup = absolute(backup)
        let manager = FileManager.default
        let backupStore = backup + "/" + storeFileName
        if isWithin(backup, homePath) {
            throw PlaitError.usage(
                "the backup \(backup) is in the home it would replace: move it out of \(homePath) first (a restore "
                    + "moves the home's files aside); nothing was changed")
        }
        for name in [storeFileName, Identity.keyFileName, Identity.certificateFileName]
        where !manager.fileExists(atPath: backup + "/" + name) {
            throw PlaitError.file(
                path: backup,
                problem: "holds no \(name): not a backup made by `plait backup` (one holds plait.db, key.pem and "
                    + "cert.pem); nothing was changed")
        }
        let identity = try wrapping { try Identity.load(directory: backup) }
        let inspection = try wrapping { try Store.inspect(at: backupStore) }
        guard inspection.integrity == ["ok"] else {
            throw PlaitError.file(
                path: backupStore,
                problem: "fails SQLite's integrity check (\(inspection.integrity.prefix(3).joined(separator: "; "))): "
                    + "this backup is damaged; nothing was changed")
        }
        let deviceID = identity.deviceID.description
        if let current = try? Identity.load(directory: homePath), current.deviceID != identity.deviceID {
            throw PlaitError.usage(
                "the backup in \(backup) is of device \(deviceID), and the home \(homePath) is device "
                    + "\(current.deviceID): restoring it would put one device's data and key in place of another's "
                    + "(or undo a `plait rejoin --new-key`). Nothing was changed. To look into the backup, restore it "
                    + "into an empty directory with --home and read it there (start no agent on it)")
        }
        var isDirectory: ObjCBool = false
        let madeHome = !manager.fileExists(atPath: homePath, isDirectory: &isDirectory)
        if madeHome {
            try makeDirectories(homePath)
        } else if !isDirectory.boolValue {
            throw PlaitError.file(path: homePath, problem: "is a file, not a directory; nothing was changed")
        }
        let undoHome = {
            guard madeHome else { return }
            try? manager.removeItem(atPath: homePath + "/" + AgentLock.fileName)
            _ = rmdir(homePath)
        }
        // No agent may hold the store open meanwhile, nor start before the restore is done.
        let agentLock: AgentLock
        do {
            agentLock = try AgentLock.acquire(home: homePath)
        } catch let PlaitError.agentRunning(pid, _) {
            undoHome()
            let holder = pid.map { "a plait agent (PID \($0))" } ?? "a plait agent"
            throw PlaitError.usage(
                "\(holder) is running on \(homePath): stop it first (`systemctl --user stop plait-agent`"
                    + (pid.map { ", or `kill \($0)`" } ?? "") + "), then run the restore again; nothing was changed")
        } catch {
            undoHome()
            throw error
        }
        defer { agentLock.release() }
        let names = backedUpNames(also: also).filter { manager.fileExists(atPath: backup + "/" + $0) }
        let staged = { (name: String) in homePath + "/.restoring-" + name }
        let stagedStore = staged(storeFileName)
        let stagedFiles = names.map(staged) + [stagedStore] + ["-journal", "-wal", "-shm"].map { stagedStore + $0 }
        let newTimeline: Bool
        do {
            for file in stagedFiles { try? manager.removeItem(atPath: file) }  // left by a restore that was cut off
            // As one moment, with the backup's -wal if it has one (a `cp -a` of a home, a replaced-by-restore
            // directory): a file copy of plait.db alone would leave out what that -wal holds.
            try wrapping { try Store.copy(at: backupStore, to: stagedStore) }
            _ = chmod(stagedStore, 0o600)
            for name in names { try copyTree(backup + "/" + name, to: staged(name)) }
            let staging = try wrapping { try Store.inspect(at: stagedStore) }
            guard staging.integrity == ["ok"], staging.summary == inspection.summary else {
                throw PlaitError.file(
                    path: stagedStore,
                    problem: "the copy of the backup's store does not check out (\(staging.integrity.prefix(3).joined(separator: "; ")), "
                        + "summary \(staging.summary)); nothing was changed")
            }
            // The backup's own timeline may have gone on after it was made (its peers hold what it synced since):
            // the restored home goes on on a new one rather than writing again at numbers they hold.
            newTimeline = try wrapping { try Store.markRestored(at: stagedStore) }
            try syncDirectory(homePath)
        } catch {
            for file in stagedFiles { try? manager.removeItem(atPath: file) }
            undoHome()
            throw wrap(error)
        }
        // What the restore replaces, and what belongs to the store it replaces (its -wal holds its last changes).
        let replaceable = [storeFileName, storeFileName + "-wal", storeFileName + "-shm"]
            + backedUpNames(also: also) + dropped
        let present = replaceable.filter { manager.fileExists(atPath: homePath + "/" + $0) }
        var aside = cutRestore(at: homePath)
        if aside == nil, !present.isEmpty {
            let formatter = DateFormatter()
            formatter.locale = Locale(identifier: "en_US_POSIX")
            formatter.timeZone = TimeZone(identifier: "UTC")
            formatter.dateFormat = "yyyyMMdd'T'HHmmss'Z'"
            var candidate = homePath + "/" + replacedByRestorePrefix + formatter.string(from: now)
            var suffix = 1
            while manager.fileExists(atPath: candidate) {
                suffix += 1
                candidate = homePath + "/" + replacedByRestorePrefix + formatter.string(from: now) + "-\(suffix)"
            }
            try makeDirectory(candidate, mayExist: false)
            // Made in place (FileManager's createFile writes a temporary file and renames it).
            let marker = Glibc.open(candidate + "/" + incompleteMarker, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
            guard marker >= 0 else {
                throw PlaitError.file(
                    path: candidate, problem: "cannot write in it (\(String(cString: strerror(errno)))); nothing was changed")
            }
            close(marker)
            try syncDirectory(candidate)
            try syncDirectory(homePath)
            aside = candidate
        }
        if let aside {
            // Killed from here on, the home lacks some files and `aside` holds them: the next run finishes the
            // restore into the same directory (`cutRestore`), so a store and its -wal stay together. What a cut-off
            // run had already put in place (the backup's copies) goes to a directory of its own there.
            for name in present {
                var target = aside + "/" + name
                if manager.fileExists(atPath: target) {
                    try makeDirectory(aside + "/" + putInByCutRestore, mayExist: true)
                    target = aside + "/" + putInByCutRestore + "/" + name
                    try? manager.removeItem(atPath: target)
                }
                try rename(homePath + "/" + name, to: target)
            }
        }
        for name in [storeFileName] + names { try rename(staged(name), to: homePath + "/" + name) }
        try syncDirectory(homePath)
        if let aside {
            try? manager.removeItem(atPath: aside + "/" + incompleteMarker)
            try? syncDirectory(aside)
        }
        return RestoreReport(
            home: homePath, deviceID: deviceID, summary: inspection.summary, changes: inspection.changes,
            replacedPath: aside, replaced: present, newTimelineAtNextEdit: newTimeline)
    }

    /// Whether `path` is `directory` or inside it, their links resolved (as far as they exist).
    static func isWithin(_ path: String, _ directory: String) -> Bool {
        let (path, directory) = (resolved(path), resolved(directory))
        return path == directory || path.hasPrefix(directory + "/")
    }

    /// `path` with the links of its longest existing prefix resolved (`realpath`), the rest appended.
    static func resolved(_ path: String) -> String {
        var head = path
        var tail: [String] = []
        while !head.isEmpty, head != "/" {
            if let real = realpath(head, nil) {
                defer { free(real) }
                return ([String(cString: real)] + tail.reversed()).joined(separator: "/")
            }
            tail.append((head as NSString).lastPathComponent)
            head = (head as NSString).deletingLastPathComponent
        }
        return path
    }

    /// Makes `path` and its missing parents, each mode 0700; the error says why not from the file system.
    static func makeDirectories(_ path: String) throws {
        do {
            try FileManager.default.createDirectory(
                atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            let reason = whyNoDirectory(path) ?? error.localizedDescription
            throw PlaitError.file(path: path, problem: "cannot create the directory (\(reason))")
        }
    }

    /// Runs `body`, turning a store's or identity's error into `PlaitError`.
    static func wrapping<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch { throw wrap(error) }
    }

    /// Copies a file (mode 0600, synced to disk) or a directory (0700) with everything in it, links followed; what
    /// is neither is refused. `to` must not exist. Everything a home keeps beside its store is private or harmless
    /// as such: a mode from the source (a FAT stick, a tar) is not carried over.
    static func copyTree(_ from: String, to: String) throws {
        var status = stat()
        guard stat(from, &status) == 0 else {
            throw PlaitError.file(path: from, problem: "cannot read it (\(String(cString: strerror(errno))))")
        }
        if status.st_mode & S_IFMT == S_IFDIR {
            guard mkdir(to, 0o700) == 0 else {
                throw PlaitError.file(path: to, problem: "cannot create the directory (\(String(cString: strerror(errno))))")
            }
            let entries = try FileManager.default.contentsOfDirectory(atPath: from)
            for entry in entries.sorted() { try copyTree(from + "/" + entry, to: to + "/" + entry) }
            try syncDirectory(to)
            return
        }
        guard status.st_mode & S_IFMT == S_IFREG else {
            throw PlaitError.file(path: from, problem: "is neither a file nor a directory, so it cannot be copied")
        }
        let input = Glibc.open(from, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else {
            throw PlaitError.file(path: from, problem: "cannot read it (\(String(cString: strerror(errno))))")
        }
        defer { close(input) }
        let output = Glibc.open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard output >= 0 else {
            throw PlaitError.file(path: to, problem: "cannot create it (\(String(cString: strerror(errno))))")
        }
        defer { close(output) }
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = read(input, &buffer, buffer.count)
            if count < 0 {
                throw PlaitError.file(path: from, problem: "cannot read it (\(String(cString: strerror(errno))))")
            }
            if count == 0 { break }
            var offset = 0
            while offset < count {
                let wrote = buffer.withUnsafeBytes { write(output, $0.baseAddress! + offset, count - offset) }
                guard wrote > 0 else {
                    let code = errno
                    let problem = code == ENOSPC ? "no space left on its device" : String(cString: strerror(code))
                    throw PlaitError.file(path: to, problem: "cannot write it (\(problem))")
                }
                offset += wrote
            }
        }
        guard fsync(output) == 0 else {
            throw PlaitError.file(path: to, problem: "cannot sync it to disk (\(String(cString: strerror(errno))))")
        }
    }

    /// Syncs a directory's entries (new names, renames) to disk.
    static func syncDirectory(_ path: String) throws {
        let descriptor = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw PlaitError.file(path: path, problem: "cannot open the directory (\(String(cString: strerror(errno))))")
        }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else {
            throw PlaitError.file(path: path, problem: "cannot sync the directory (\(String(cString: strerror(errno))))")
        }
    }
}
