import Foundation
import GRDB
import GRDBSQLite

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Says what a failure really is: SQLite's "database is locked" or "unable to open database file" covers a
/// busy writer, a full disk, a read-only mount and a file another user owns, and only a failed integrity check
/// means the store is damaged. The file system is asked directly (mount flags, free space, what this user may
/// open), never SQLite's message text.
enum StoreDiagnosis {
    /// Refuses a missing directory, a missing store, and one this user may not read, before SQLite sees it.
    static func checkReachable(_ path: String) throws {
        let directory = (path as NSString).deletingLastPathComponent
        var status = stat()
        if stat(directory, &status) != 0 {
            if errno == EACCES { throw StoreError.permissionDenied(path: directory, access: "enter") }
            throw StoreError.missingDirectory(path: directory)
        }
        if stat(path, &status) != 0 {
            if errno == EACCES { throw StoreError.permissionDenied(path: directory, access: "enter") }
            throw StoreError.missing(path: path)
        }
        if access(path, R_OK) != 0, errno == EACCES || errno == EPERM {
            throw StoreError.permissionDenied(path: path, access: "read")
        }
    }

    /// Where read-only connections open the store. A WAL reader needs the `-wal` and `-shm` files, and creates
    /// them when they are missing, which a read-only mount or a full disk refuses. With no `-wal` file, or an
    /// empty one, the main file holds everything, and nobody can write there until the mount or the disk is
    /// fixed, so it is opened as immutable: reading the lists still works.
    static func readLocation(_ path: String) -> String {
        let directory = (path as NSString).deletingLastPathComponent
        var status = stat()
        let walMissing = stat(path + "-wal", &status) != 0 && errno == ENOENT
        guard walMissing || status.st_size == 0 else { return path }
        var volume = statvfs()
        guard statvfs(directory, &volume) == 0 else { return path }
        let readOnly = volume.f_flag & UInt(ST_RDONLY) != 0
        let full = UInt64(volume.f_bavail) * UInt64(volume.f_frsize) < 1 << 20
        guard readOnly || full else { return path }
        let allowed = CharacterSet.urlPathAllowed.subtracting(CharacterSet(charactersIn: "?#%"))
        return "file:" + (path.addingPercentEncoding(withAllowedCharacters: allowed) ?? path) + "?immutable=1"
    }

    /// A failed `sqlite3_step` as GRDB reports SQLite's errors, with its result code, so `diagnose` finds the cause
    /// (a full disk is `noSpace`, not "the store failed: database or disk is full": the second hostile tester of
    /// 2026-11-25 met that wording when a pulled baseline filled the disk).
    static func stepError(_ code: Int32, _ handle: OpaquePointer, doing: String? = nil) -> DatabaseError {
        let message = String(cString: sqlite3_errmsg(sqlite3_db_handle(handle)))
        return DatabaseError(
            resultCode: ResultCode(rawValue: code), message: doing.map { "\($0): \(message)" } ?? message)
    }

    /// The true cause of `error`, met while using the store at `path`.
    static func diagnose(_ error: any Error, path: String, busyTimeout: Double = Store.defaultBusyTimeout)
        -> StoreError
    {
        if let error = error as? StoreError {
            switch error {
            case .sqlite(let message): return probe(path) ?? .sqlite(message)
            default: return error
            }
        }
        guard let error = error as? DatabaseError else { return probe(path) ?? .io(path: path, detail: "\(error)") }
        let message = error.message ?? "\(error)"
        switch error.resultCode {
        case .SQLITE_BUSY, .SQLITE_LOCKED:
            return .busy(path: path, seconds: busyTimeout)
        case .SQLITE_FULL:
            return .noSpace(path: path)
        case .SQLITE_CORRUPT, .SQLITE_NOTADB:
            return confirmDamage(path, detail: message)
        case .SQLITE_IOERR, .SQLITE_CANTOPEN, .SQLITE_PERM, .SQLITE_READONLY, .SQLITE_AUTH:
            return probe(path) ?? .io(path: path, detail: message)
        default:
            // Not the disk's doing (a constraint, a misuse): said as SQLite's own words, not "cannot access".
            return probe(path) ?? .sqlite(message)
        }
    }

    /// Asks the file system why the store at `path` cannot be used: a read-only mount, a file or directory
    /// this user may not write, no space left. Nil when none of them holds.
    static func probe(_ path: String) -> StoreError? {
        let directory = (path as NSString).deletingLastPathComponent
        var status = stat()
        guard stat(directory, &status) == 0 else {
            if errno == EACCES { return .permissionDenied(path: directory, access: "enter") }
            return .missingDirectory(path: directory)
        }
        var volume = statvfs()
        if statvfs(directory, &volume) == 0, volume.f_flag & UInt(ST_RDONLY) != 0 {
            return .readOnlyFileSystem(path: directory)
        }
        for file in [path, path + "-wal", path + "-shm"] where stat(file, &status) == 0 {
            let descriptor = open(file, O_RDWR | O_CLOEXEC)
            if descriptor >= 0 {
                close(descriptor)
                continue
            }
            switch errno {
            case EROFS: return .readOnlyFileSystem(path: file)
            case EACCES, EPERM:
                let readable = access(file, R_OK) == 0
                return .permissionDenied(path: file, access: readable ? "write" : "read")
            default: continue
            }
        }
        // SQLite creates the -wal and -shm files beside the store.
        if access(directory, W_OK) != 0, errno == EACCES || errno == EPERM {
            return .permissionDenied(path: directory, access: "create files in")
        }
        if statvfs(directory, &volume) == 0, volume.f_bavail == 0 {
            return .noSpace(path: path)
        }
        return nil
    }

    /// "Damaged" only when SQLite's own check agrees, through a read-only connection that writes nothing.
    static func confirmDamage(_ path: String, detail: String) -> StoreError {
        _ = Store.sqliteSetUp
        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(Store.defaultBusyTimeout)
        do {
            let queue = try DatabaseQueue(path: path, configuration: configuration)
            defer { try? queue.close() }
            let problems = try queue.read { db in try String.fetchAll(db, sql: "PRAGMA integrity_check") }
            if problems == ["ok"] {
                return probe(path)
                    ?? .io(path: path, detail: "SQLite reported \"\(detail)\" but its integrity check finds the file "
                        + "sound; run `plait doctor`")
            }
            return .corrupt(path: path, detail: "integrity check: " + problems.prefix(3).joined(separator: "; "))
        } catch let error as DatabaseError where [.SQLITE_CORRUPT, .SQLITE_NOTADB].contains(error.resultCode) {
            return .corrupt(path: path, detail: error.message ?? detail)
        } catch {
            return probe(path) ?? .io(path: path, detail: detail)
        }
    }
}
