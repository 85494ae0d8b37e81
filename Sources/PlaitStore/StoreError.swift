import PlaitCore

/// What the store can refuse; each case reads as one sentence saying what happened, to which path, and
/// what to do. Only `corrupt` suggests a backup: it is thrown only when the file is not SQLite or SQLite
/// itself finds it damaged (`integrity_check`).
public enum StoreError: Error, CustomStringConvertible, Sendable {
    /// There is no store file at the path.
    case missing(path: String)
    /// The directory that should hold the store does not exist.
    case missingDirectory(path: String)
    /// A store already exists where one was to be created.
    case alreadyExists(path: String)
    /// The file is not a SQLite database, or SQLite's integrity check finds it damaged.
    case corrupt(path: String, detail: String)
    /// The file is a sound SQLite database but not a plait store (another program's file).
    case notAPlaitStore(path: String, detail: String)
    /// The store was written by a newer plait (unknown migrations).
    case newerSchema(path: String, unknown: [String])
    /// Another process held the store's write lock longer than the busy timeout.
    case busy(path: String, seconds: Double)
    /// The file system holding `path` is full.
    case noSpace(path: String)
    /// This user may not read or write `path` (the store, its `-wal` or `-shm` file, or the directory).
    case permissionDenied(path: String, access: String)
    /// The file system holding `path` is mounted read-only.
    case readOnlyFileSystem(path: String)
    /// An I/O error SQLite reported for `path`, with the system's reason.
    case io(path: String, detail: String)
    /// SQLite reported an error.
    case sqlite(String)
    /// The engine refused the data (a gap, a fork, a payload that does not decode…).
    case rejected(CoreError)
    /// The store holds an impossible value (a bug or a damaged file).
    case inconsistent(String)
    /// The own timeline may continue on another device (`reason`): authoring on it could put two changes
    /// under one number, so nothing is written until `plait rejoin` starts a new timeline.
    case ownTimelineSuspect(timeline: TimelineID, reason: String)
    /// The own timeline is signed (DESIGN §11) but the store was opened without the key that signs it.
    case noSigningKey(timeline: TimelineID)
    /// The store file holds nothing: no bytes, or a SQLite database with no table.
    case emptyStore(path: String)
    /// The store file was deleted (or moved) while this process had the store open.
    case deletedStore(path: String)
    /// The stored baseline's bytes are not the ones stored (`Store.baselineDamage`).
    case damagedBaseline(String)
    /// The home's key is not the key the own timeline was begun with.
    case keyIsNotTimelines(timeline: TimelineID)
    /// The own timeline's last stored change does not match its head record, and is not shown intact.
    case ownChangeDamaged(ChangeRef)
    /// The Lamport clock reached its limit (2^62): no change can be authored after it.
    case lamportExhausted(timeline: TimelineID)
    /// Derived data (the materialized state, its replay position, a checkpoint) fails to load or to check. It
    /// is rebuilt from the changes, so a user sees this only if `plait repair` could not rebuild it.
    case damagedDerivedState(String)
    /// The device's signing key or certificate (`what`: a path, or a description) cannot be read, does not
    /// parse, or is not an ECDSA P-256 key.
    case signingIdentityUnusable(what: String, detail: String)
    /// The private key is not the key of the certificate it came with (`what`: the home or a description).
    case signingKeyMismatch(what: String)
    /// OpenSSL failed to sign a change (out of memory, a broken provider), with its message.
    case signingFailed(detail: String)

    /// Whether this is `.damagedBaseline`.
    public var isDamagedBaseline: Bool {
        if case .damagedBaseline = self { return true }
        return false
    }

    public var description: String { describing(unchanged: "nothing was changed") }

    /// The description, with `unchanged` saying what the failure left as it was where the description says
    /// "nothing was changed" (a sync that stored batches before failing says that only its last batch was not).
    public func describing(unchanged: String) -> String {
        switch self {
        case let .missing(path):
            return "no plait store at \(path): run `plait init` first (or pass --home)."
        case let .missingDirectory(path):
            return "the directory \(path) does not exist: run `plait init` first, or pass the right --home."
        case let .alreadyExists(path):
            return "a plait store already exists at \(path); \(unchanged)."
        case let .corrupt(path, detail):
            return "the store \(path) is damaged (\(detail)); it was left as it is. Restore it from a backup, or "
                + "move it aside (with its -wal and -shm files), `plait init` again (the home keeps its identity), "
                + "pair your other devices again and sync from them."
        case let .notAPlaitStore(path, detail):
            return "\(path) is a SQLite database but not a plait store (\(detail)); it was left as it is. "
                + "Check --home or $PLAIT_HOME."
        case let .newerSchema(path, unknown):
            return "the store \(path) was written by a newer plait (schema \(unknown.joined(separator: ", "))); "
                + "upgrade plait to use it. Nothing was changed."
        case let .busy(path, seconds):
            return "the store \(path) is busy (another plait process is writing) and stayed locked for "
                + "\(seconds.rounded() == seconds ? "\(Int(seconds))" : "\((seconds * 10).rounded() / 10)") s; nothing "
                + "was changed. Try again (store.busy_timeout_seconds sets how long a write waits)."
        case let .noSpace(path):
            return "no space left on the device holding \(path); \(unchanged). Free some space and try again."
        case let .permissionDenied(path, access):
            return "permission denied: this user cannot \(access) \(path); \(unchanged). Run plait as the "
                + "home's owner, or fix the file's owner and mode."
        case let .readOnlyFileSystem(path):
            return "\(path) is on a read-only file system; \(unchanged). Remount it read-write to change "
                + "the lists (reading them works)."
        case let .io(path, detail):
            return "cannot access \(path): \(detail); \(unchanged). Check the disk and the file system."
        case let .sqlite(message):
            return "the store failed: \(message)."
        case let .rejected(error):
            return error.description
        case let .inconsistent(detail):
            return "the store is inconsistent: \(detail); run `plait doctor`."
        case let .ownTimelineSuspect(timeline, reason):
            return "this device's timeline \(timeline) may continue on another device: \(reason). Nothing was "
                + "changed. Run `plait rejoin` to go on with a new timeline (`plait doctor` says more)."
        case let .emptyStore(path):
            return "\(path) is empty (no plait tables, so no data): left by an interrupted `plait init`, or made when "
                + "the store was deleted under a running agent; nothing was changed. Run `plait init` to make the store "
                + "again (the home keeps its key and Device ID), then pair and sync to bring the data back from your "
                + "other devices, or restore the store from a backup."
        case let .deletedStore(path):
            return "\(path) is gone: the store was deleted or moved while plait had it open; nothing was written, "
                + "and no new store was made in its place. Stop the agent; restore the store, or run `plait init` "
                + "to make a new one (the home keeps its identity) and sync the data back from your other devices."
        case let .damagedBaseline(detail):
            return "the stored baseline is damaged: \(detail); nothing was changed, and it is neither used nor sent. "
                + "A sync replaces it with a paired device's baseline once one folds at least as much; to rebuild "
                + "this home now, move plait.db aside (with its -wal and -shm files), run `plait init` (the home "
                + "keeps its identity), pair your other devices again and sync."
        case let .keyIsNotTimelines(timeline):
            return "this home's key (key.pem) is not the key this device's timeline \(timeline) was begun with, so "
                + "every peer would refuse a change signed with it as forged; nothing was changed. An interrupted "
                + "`plait rejoin --new-key` leaves this: run `plait rejoin` to finish it (it ends that timeline with "
                + "its own key, kept in the home's retired/ directory, and goes on with a new one)."
        case let .ownChangeDamaged(ref):
            return "this device's last stored change \(ref) does not match its timeline's head record, and its "
                + "signature does not show it intact: it is damaged, and a change made now would continue a damaged "
                + "chain; nothing was changed. Run `plait repair`: it sets the change aside and pulls a good copy "
                + "from a paired device that holds it (`plait doctor` says which)."
        case let .noSigningKey(timeline):
            return "this store's timeline \(timeline) is signed but no key was given to sign changes with; nothing "
                + "was changed. Use the home the store belongs to (its key.pem and cert.pem)."
        case let .lamportExhausted(timeline):
            return "the Lamport clock of timeline \(timeline) reached its limit (2^62); \(unchanged)."
        case let .damagedDerivedState(detail):
            return "the materialized state is damaged (\(detail)); run `plait repair` to rebuild it from the changes."
        case let .signingIdentityUnusable(what, detail):
            return "cannot sign changes with \(what): \(detail); \(unchanged). Check the home's key.pem and "
                + "cert.pem (`plait doctor`)."
        case let .signingKeyMismatch(what):
            return "the private key of \(what) is not the certificate's key, so no change can be signed; nothing was "
                + "changed. Restore key.pem and cert.pem as the pair they were (`plait doctor`)."
        case let .signingFailed(detail):
            return "signing a change failed (\(detail)); \(unchanged). Try again."
        }
    }
}
