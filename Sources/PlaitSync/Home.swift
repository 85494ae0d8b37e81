import Foundation
import PlaitCore
import PlaitPairing
import PlaitStore
import PlaitTLS

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A device home: identity (key and certificate), the store, and the config in force.
public final class Home: @unchecked Sendable {
    public static let storeFileName = "plait.db"

    public let path: String
    public let config: Config
    public let store: Store
    public let replica: Replica

    public var storePath: String { path + "/" + Self.storeFileName }

    /// `--home`, else `$PLAIT_HOME`, else `$XDG_DATA_HOME/plait` (default `~/.local/share/plait`).
    public static func resolvePath(explicit: String?, environment: [String: String]) -> String {
        if let explicit, !explicit.isEmpty { return absolute(explicit) }
        if let home = environment["PLAIT_HOME"], !home.isEmpty { return absolute(home) }
        let data = environment["XDG_DATA_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? ((environment["HOME"] ?? NSHomeDirectory()) + "/.local/share")
        return absolute(data + "/plait")
    }

    static func absolute(_ path: String) -> String {
        let url = URL(fileURLWithPath: path, relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath))
        return url.standardizedFileURL.path
    }

    private let identityLock = NSLock()
    private var loadedIdentity: Result<Identity, PlaitError>?

    /// The key and certificate, loaded on first use: only networking needs them, so a missing or damaged
    /// certificate stops `sync`, `agent` and `pair` with its own message, never reading the lists.
    public var identity: Identity {
        get throws {
            try identityLock.withLock {
                if loadedIdentity == nil {
                    loadedIdentity = Result { try Identity.load(directory: path) }.mapError { error in
                        // Between two keys (an interrupted `rejoin --new-key`, H6): not a lost key.
                        Self.interruptedKeySwapError(at: path) ?? Self.wrap(error)
                    }
                }
                return try loadedIdentity!.get()
            }
        }
    }

    /// Makes `identity` the one in force (`plait rejoin --new-key` replaced the files under it).
    func replaceIdentity(_ identity: Identity) {
        identityLock.withLock { loadedIdentity = .success(identity) }
    }

    /// `identity` for the pairing code, whose functions throw only `PairingError`.
    func pairingIdentity() throws(PairingError) -> Identity {
        do {
            return try identity
        } catch {
            throw .identity(problem: Self.wrap(error).description)
        }
    }

    private init(path: String, config: Config, identity: Identity?, store: Store) throws {
        self.path = path
        self.config = config
        loadedIdentity = identity.map { .success($0) }
        self.store = store
        do {
            replica = try Replica(store: store)
        } catch {
            throw Self.wrap(error)
        }
        replica.maxChangeBytes = config.maxChangeBytes
        replica.storedCheckpointInterval = config.checkpointInterval
        // Local changes are signed with the home's key (DESIGN §11), read at the first edit: reading the lists
        // never needs it. An old store's first edit moves the device onto a signed timeline.
        replica.signWith {
            do {
                return try P256Signer(directory: path)
            } catch {
                throw Self.interruptedKeySwapError(at: path) ?? error
            }
        }
    }

    /// Creates a home: directory (mode 0700), key and certificate, store and first timeline. Refuses an
    /// existing device; if any step fails, removes what it created.
    ///
    /// A home that holds its key and certificate but no store (the store was damaged and moved aside, as the
    /// store's error advises) keeps that identity, and with it its Device ID, which its peers still trust: only the
    /// store is created, on a new timeline. Its own list of paired devices was in the store: pairing them again
    /// and syncing bring the data back.
    public static func create(at path: String, name: String, config: Config) throws -> Home {
        let manager = FileManager.default
        let storePath = path + "/" + storeFileName
        let certificatePath = path + "/" + Identity.certificateFileName
        var isDirectory: ObjCBool = false
        if manager.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue {
            throw PlaitError.file(path: path, problem: "is a file, not a directory; nothing was changed")
        }
        if manager.fileExists(atPath: storePath) {
            // A store that holds nothing (an `init` cut off, H10; one made empty under a running agent, H8) is made
            // again rather than refusing the home for good. Its -wal and -shm go with it: they hold nothing either.
            guard Store.isEmptyStore(at: storePath) else { throw PlaitError.homeExists(path: path) }
            // Not under a running agent, which may hold that file open.
            let agentLock = try AgentLock.acquire(home: path)
            defer { agentLock.release() }
            for file in [storePath, storePath + "-wal", storePath + "-shm"] where manager.fileExists(atPath: file) {
                try? manager.removeItem(atPath: file)
            }
        }
        // A store's `-wal` left behind belongs to the store that was moved: SQLite would replay it into the new one.
        for leftover in [storePath + "-wal", storePath + "-shm"] where manager.fileExists(atPath: leftover) {
            throw PlaitError.file(
                path: leftover,
                problem: "left from a store that is no longer here, so nothing was changed: move it aside with that "
                    + "store (it may hold the store's last changes) and run `plait init` again")
        }
        // `init` killed while it wrote the certificate (bad-luck tester 2026-11-25, H10): its key beside an empty
        // cert.pem, and no store. Such a key signed nothing yet, so a new identity is made rather than the home
        // refused ("cert.pem is corrupt"). The old pair is moved aside, not deleted: the same files are left by a
        // home whose store was moved aside (as its errors advise) and whose certificate was then emptied, and that
        // key matters (the certificate can be had again from the store's timeline.begin).
        let keyPath = path + "/" + Identity.keyFileName
        if holdsInterruptedIdentity(at: path) {
            let aside = path + "/" + interruptedIdentityPrefix + "\(Replica.now())"
            do {
                try manager.createDirectory(
                    atPath: aside, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
                for file in [keyPath, certificatePath] {
                    try manager.moveItem(atPath: file, toPath: aside + "/" + (file as NSString).lastPathComponent)
                }
            } catch {
                throw PlaitError.file(
                    path: path, problem: "holds key.pem beside an empty cert.pem, which could not be moved aside "
                        + "(\(error.localizedDescription)); nothing else was changed")
            }
        }
        let hasKey = keepsIdentity(at: path)
        if hasKey != manager.fileExists(atPath: certificatePath) {
            throw PlaitError.file(
                path: path,
                problem: "holds \(hasKey ? "key.pem but no cert.pem" : "cert.pem but no key.pem"); nothing was "
                    + "changed. Restore the missing file from a backup, or move the other aside to create a new device")
        }
        if hasKey {
            // The identity must load (its key matching its certificate); it is never removed.
            let identity: Identity
            do {
                identity = try Identity.load(directory: path)
            } catch {
                throw Self.wrap(error)
            }
            return try createStore(at: path, name: name, config: config, identity: identity)
        }
        var createdDirectory = false
        if !manager.fileExists(atPath: path) {
            try Self.makeDirectories(path)
            createdDirectory = true
        }
        var created: [String] = []
        let result = Result<Home, any Error> { () throws -> Home in
            let identity: Identity
            do {
                identity = try Identity.create(directory: path, commonName: name)
            } catch {
                throw Self.wrap(error)
            }
            created += [path + "/" + Identity.keyFileName, path + "/" + Identity.certificateFileName]
            return try createStore(at: path, name: name, config: config, identity: identity)
        }
        if case .failure = result {
            for file in created { try? manager.removeItem(atPath: file) }
            if createdDirectory { try? manager.removeItem(atPath: path) }
        }
        return try result.get()
    }

    /// Whether `create` would keep the identity of the home at `path` (it holds a key; `create` refuses a key
    /// without its certificate).
    /// Whether the home at `path` holds what an `init` killed as it wrote the certificate leaves: key.pem beside
    /// an empty cert.pem, and no store. `create` moves that pair aside (`interruptedIdentityPrefix`) and makes a
    /// new identity.
    public static func holdsInterruptedIdentity(at path: String) -> Bool {
        let manager = FileManager.default
        return !manager.fileExists(atPath: path + "/" + storeFileName)
            && manager.fileExists(atPath: path + "/" + Identity.keyFileName)
            && (try? manager.attributesOfItem(atPath: path + "/" + Identity.certificateFileName)[.size] as? Int) == 0
    }

    /// The directory name (then a time in ms) an interrupted identity is moved to.
    public static let interruptedIdentityPrefix = "identity-left-by-init-"

    public static func keepsIdentity(at path: String) -> Bool {
        FileManager.default.fileExists(atPath: path + "/" + Identity.keyFileName)
    }

    /// Why `path` cannot be made a directory, from the nearest part of it that exists (Foundation's own error
    /// says only "The operation could not be completed"); nil when that does not tell.
    static func whyNoDirectory(_ path: String) -> String? {
        var ancestor = (path as NSString).deletingLastPathComponent
        var status = stat()
        while !ancestor.isEmpty, ancestor != "/" {
            if stat(ancestor, &status) == 0 { break }
            ancestor = (ancestor as NSString).deletingLastPathComponent
        }
        guard stat(ancestor, &status) == 0 else { return nil }
        if status.st_mode & S_IFMT != S_IFDIR { return "\(ancestor) is a file, not a directory" }
        if access(ancestor, W_OK | X_OK) != 0 {
            return "\(ancestor): " + String(cString: strerror(errno))
        }
        return nil
    }

    /// The store of a new device, or of a home that kept its identity: a signed timeline, begun with
    /// `timeline.begin` carrying the certificate of the home's key. Removed again if a later step fails.
    private static func createStore(at path: String, name: String, config: Config, identity: Identity) throws -> Home {
        let storePath = path + "/" + storeFileName
        let store: Store
        do {
            store = try Store.create(
                at: storePath, signer: try P256Signer(directory: path), synchronousFull: config.synchronousFull,
                busyTimeout: config.busyTimeoutSeconds)
        } catch {
            throw Self.wrap(error)
        }
        // The store is this call's from here on: a failure removes it.
        let result = Result<Home, any Error> { () throws -> Home in
            do {
                try store.setDeviceName(name)
            } catch {
                throw Self.wrap(error)
            }
            return try Home(path: path, config: config, identity: identity, store: store)
        }
        if case .failure = result {
            for file in [storePath, storePath + "-wal", storePath + "-shm"] { unlink(file) }
        }
        return try result.get()
    }

    static func wrap(_ error: any Error) -> PlaitError {
        if let error = error as? PlaitError { return error }
        if let error = error as? IdentityError { return .identity(error) }
        if let error = error as? StoreError { return .store(error) }
        if let error = error as? CoreError { return .core(error) }
        return .file(path: "", problem: "\(error)")
    }

    /// Opens an existing home. The identity is loaded when networking first needs it.
    public static func open(at path: String, config: Config) throws -> Home {
        let storePath = path + "/" + storeFileName
        // A directory that is there but unreadable is not a missing home: the store says what it is.
        var status = stat()
        if stat(path, &status) != 0, errno == ENOENT || errno == ENOTDIR { throw PlaitError.noHome(path: path) }
        if stat(storePath, &status) != 0, errno == ENOENT {
            if let cut = cutRestore(at: path) {
                throw PlaitError.file(
                    path: path,
                    problem: "a `plait restore` was cut off here before it put the backup's store in place (the files "
                        + "it was replacing are in \(cut)): run the same `plait restore` again to finish it")
            }
            throw PlaitError.noHome(path: path)
        }
        let store: Store
        do {
            store = try Store.open(
                at: storePath, synchronousFull: config.synchronousFull, busyTimeout: config.busyTimeoutSeconds)
        } catch {
            throw Self.wrap(error)
        }
        return try Home(path: path, config: config, identity: nil, store: store)
    }

    public var deviceName: String { (try? store.deviceName()) ?? (try? identity)?.commonName ?? "" }

    /// The authors compaction waits for however quiet (DESIGN §11): this device and its paired peers, by the
    /// SHA-256 of their certificates (their Device IDs); a signed timeline of anyone else holds the cut-off only
    /// while one of its changes arrived within `graceMs`.
    public func authorGrace(graceMs: Int64, now: Int64 = Replica.now()) throws -> Replica.AuthorGrace {
        var known: Set<[UInt8]> = []
        if let identity = try? identity { known.insert(identity.deviceID.digest) }
        for peer in try store.peers() {
            if let id = try? DeviceID(parsing: peer.deviceID) { known.insert(id.digest) }
        }
        return Replica.AuthorGrace(known: known, graceMs: graceMs, now: now)
    }
}
