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
        public var deviceID: String
        public var summary: Summary
        public var changes: Int
        /// The names written in `path`, the store first.
        public var files: [String]
    }

    /// Writes a backup of this home to `destination`, a directory that must not exist or be empty: the store as
    /// one moment (writers go on meanwhile), checked with `integrity_check`, and the files `backedUpNames` names
    /// that exist. On any failure what was written is removed, and `destination` too if this made it.
    public func backup(to destination: String, also: [String] = []) throws -> BackupReport {
        let destination = Self.absolute(destination)
        let manager = FileManager.default
        if destination == path || destination.hasPrefix(path + "/") {
            throw PlaitError.usage(
                "the backup cannot go inside the home it copies (\(destination)): choose a directory elsewhere, "
                    + "ideally on another disk")
        }
        let identity = try self.identity
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
        } else {
            if let why = Self.whyNoDirectory(destination) { throw PlaitError.file(path: destination, problem: why) }
            try Self.makeDirectory(destination, mayExist: false)
        }
        var written: [String] = []
        do {
            let storeCopy = destination + "/" + Self.storeFileName
            written.append(Self.storeFileName)
            try Self.wrapping { try Store.copy(at: storePath, to: storeCopy) }
            let inspection = try Self.wrapping { try Store.inspect(at: storeCopy) }
            guard inspection.integrity == ["ok"] else {
                throw PlaitError.file(
                    path: storeCopy,
                    problem: "the copy fails SQLite's integrity check (\(inspection.integrity.prefix(3).joined(separator: "; "))): "
                        + "run `plait doctor` on this home")
            }
            for name in Self.backedUpNames(also: also) where manager.fileExists(atPath: path + "/" + name) {
                written.append(name)
                try Self.copyTree(path + "/" + name, to: destination + "/" + name)
            }
            try Self.syncDirectory(destination)
            return BackupReport(
                path: destination, deviceID: identity.deviceID.description, summary: inspection.summary,
                changes: inspection.changes, files: written)
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

    /// Puts the backup at `backup` in place as the home at `homePath` (made if missing). Refuses while an agent
    /// runs there (it holds the store open and would write on from what it had read), a backup whose store fails
    /// `integrity_check` or whose key and certificate do not belong together, and a backup of another device than
    /// the home's. The backup's files are copied into the home under temporary names first (a failure there
    /// changes nothing); then the home's files they replace are moved to `replaced-by-restore-TIME/` in the home
    /// (never deleted), and the copies renamed into place.
    public static func restore(
        from backup: String, to homePath: String, also: [String] = [], dropped: [String] = [], now: Date = Date()
    ) throws -> RestoreReport {
        let backup = absolute(backup)
        let manager = FileManager.default
        let backupStore = backup + "/" + storeFileName
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
        if !manager.fileExists(atPath: homePath, isDirectory: &isDirectory) {
            if let why = whyNoDirectory(homePath) { throw PlaitError.file(path: homePath, problem: why) }
            try makeDirectory(homePath, mayExist: false)
        } else if !isDirectory.boolValue {
            throw PlaitError.file(path: homePath, problem: "is a file, not a directory; nothing was changed")
        }
        // No agent may hold the store open meanwhile, nor start before the restore is done.
        let agentLock = try AgentLock.acquire(home: homePath)
        defer { agentLock.release() }
        let names = backedUpNames(also: also).filter { manager.fileExists(atPath: backup + "/" + $0) }
        let staged = { (name: String) in homePath + "/.restoring-" + name }
        let newTimeline: Bool
        do {
            for name in [storeFileName] + names {
                try? manager.removeItem(atPath: staged(name))  // left by a restore that was cut off
                try copyTree(backup + "/" + name, to: staged(name))
            }
            // The backup's own timeline may have gone on after it was made (its peers hold what it synced since):
            // the restored home goes on on a new one rather than writing again at numbers they hold.
            newTimeline = try wrapping { try Store.markRestored(at: staged(storeFileName)) }
            try syncDirectory(homePath)
        } catch {
            for name in [storeFileName] + names { try? manager.removeItem(atPath: staged(name)) }
            throw wrap(error)
        }
        // What the restore replaces, and what belongs to the store it replaces (its -wal holds its last changes).
        let replaceable = [storeFileName, storeFileName + "-wal", storeFileName + "-shm"]
            + backedUpNames(also: also) + dropped
        let present = replaceable.filter { manager.fileExists(atPath: homePath + "/" + $0) }
        var aside: String?
        if !present.isEmpty {
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
            // Killed from here on, the home lacks some files and the aside directory holds them: running the
            // restore again finishes it (a home without a certificate is not checked against the backup's).
            for name in present { try rename(homePath + "/" + name, to: candidate + "/" + name) }
            aside = candidate
        }
        for name in [storeFileName] + names { try rename(staged(name), to: homePath + "/" + name) }
        try syncDirectory(homePath)
        return RestoreReport(
            home: homePath, deviceID: deviceID, summary: inspection.summary, changes: inspection.changes,
            replacedPath: aside, replaced: present, newTimelineAtNextEdit: newTimeline)
    }

    /// Runs `body`, turning a store's or identity's error into `PlaitError`.
    static func wrapping<T>(_ body: () throws -> T) throws -> T {
        do { return try body() } catch { throw wrap(error) }
    }

    /// Copies a file (its mode kept, synced to disk) or a directory with everything in it. `to` must not exist.
    static func copyTree(_ from: String, to: String) throws {
        var status = stat()
        guard lstat(from, &status) == 0 else {
            throw PlaitError.file(path: from, problem: "cannot read it (\(String(cString: strerror(errno))))")
        }
        let mode = mode_t(status.st_mode & 0o7777)
        if status.st_mode & S_IFMT == S_IFDIR {
            guard mkdir(to, mode | 0o700) == 0 else {
                throw PlaitError.file(path: to, problem: "cannot create the directory (\(String(cString: strerror(errno))))")
            }
            let entries = try FileManager.default.contentsOfDirectory(atPath: from)
            for entry in entries.sorted() { try copyTree(from + "/" + entry, to: to + "/" + entry) }
            try syncDirectory(to)
            return
        }
        guard status.st_mode & S_IFMT == S_IFREG else { return }  // sockets, links: nothing a home needs back
        let input = Glibc.open(from, O_RDONLY | O_CLOEXEC)
        guard input >= 0 else {
            throw PlaitError.file(path: from, problem: "cannot read it (\(String(cString: strerror(errno))))")
        }
        defer { close(input) }
        let output = Glibc.open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode)
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
