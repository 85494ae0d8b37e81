import PlaitCore

/// What the store can refuse; each case reads as one sentence saying what to do.
public enum StoreError: Error, CustomStringConvertible, Sendable {
    /// There is no store file at the path.
    case missing(path: String)
    /// A store already exists where one was to be created.
    case alreadyExists(path: String)
    /// The file is not a SQLite database or is damaged.
    case corrupt(path: String, detail: String)
    /// The store was written by a newer plait (unknown migrations).
    case newerSchema(path: String, unknown: [String])
    /// SQLite reported an error.
    case sqlite(String)
    /// The engine refused the data (a gap, a fork, a payload that does not decode…).
    case rejected(CoreError)
    /// The store holds an impossible value (a bug or a damaged file).
    case inconsistent(String)
    /// The own timeline may continue on another device (`reason`): authoring on it could put two changes
    /// under one number, so nothing is written until `plait rejoin` starts a new timeline.
    case ownTimelineSuspect(timeline: TimelineID, reason: String)
    /// The Lamport clock reached its limit (2^62): no change can be authored after it.
    case lamportExhausted(timeline: TimelineID)

    public var description: String {
        switch self {
        case let .missing(path):
            return "no plait store at \(path): run `plait init` first (or pass --home)."
        case let .alreadyExists(path):
            return "a plait store already exists at \(path); nothing was changed."
        case let .corrupt(path, detail):
            return "the store \(path) is damaged or not a plait store (\(detail)); it was left as it is. "
                + "Run `plait doctor`, or restore it from a backup."
        case let .newerSchema(path, unknown):
            return "the store \(path) was written by a newer plait (schema \(unknown.joined(separator: ", "))); "
                + "upgrade plait to use it. Nothing was changed."
        case let .sqlite(message):
            return "the store failed: \(message)."
        case let .rejected(error):
            return error.description
        case let .inconsistent(detail):
            return "the store is inconsistent: \(detail); run `plait doctor`."
        case let .ownTimelineSuspect(timeline, reason):
            return "this device's timeline \(timeline) may continue on another device: \(reason). Nothing was "
                + "changed. Run `plait rejoin` to go on with a new timeline (`plait doctor` says more)."
        case let .lamportExhausted(timeline):
            return "the Lamport clock of timeline \(timeline) reached its limit (2^62); nothing was changed."
        }
    }
}
