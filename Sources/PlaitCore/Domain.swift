/// What replaying one change did.
public enum ApplyOutcome: Sendable, Equatable {
    /// The change changed the state.
    case applied
    /// The change was valid but had nothing to act on (its object is gone, a duplicate create…).
    case noop
    /// The kind or version is not one this build understands: stored, forwarded, skipped.
    case uninterpretable
}

/// The seam between the engine (ordering, summaries, replay, baselines) and what changes mean.
///
/// A domain is deterministic: the same state and change give the same result on every device.
public protocol Domain: Sendable {
    associatedtype State: Sendable
    /// A change's payload decoded: an arriving change is decoded once, at intake, and applied as this.
    associatedtype Operation: Sendable

    /// Sent in Hello so peers know they speak the same data model.
    static var name: String { get }
    /// Raised when a kind gains a new version; older builds skip changes newer than they know.
    static var version: UInt32 { get }

    func emptyState() -> State
    /// Whether this build interprets changes of this kind and version. A change it does not interpret (engine
    /// kinds included) leaves every state as it was: `apply` skips it, and replay relies on that (`isInert`).
    func canInterpret(kind: String, version: UInt32) -> Bool
    func apply(_ change: Change, to state: inout State) -> ApplyOutcome
    /// Decodes the payload of a change of a kind and version this domain interprets; nil for any other
    /// (kept and skipped); throws when an interpreted kind's payload does not decode.
    func decode(_ change: Change) throws(CoreError) -> Operation?
    /// Applies a change whose payload `decode` already decoded (`operation` nil: not interpreted here).
    func apply(_ operation: Operation?, of change: Change, to state: inout State) -> ApplyOutcome
    /// About how many bytes a copy of `state` takes: bounds the in-memory checkpoints of replay.
    func approximateSize(of state: State) -> Int

    /// The canonical encoding whose SHA-256 is the state digest.
    func canonicalEncoding(of state: State) -> [UInt8]
    /// SHA-256 of the canonical encoding (a domain may hash it in pieces instead of encoding it whole).
    func digest(of state: State) -> [UInt8]
    /// A self-contained, versioned encoding of the state for baselines and checkpoints. `weight` ranks
    /// this snapshot's object versions against another's in `join` (a larger history weighs more).
    func snapshot(of state: State, weight: UInt64) -> [UInt8]
    func restore(snapshot: ArraySlice<UInt8>) throws(CoreError) -> State
    /// The join of two snapshots: commutative, associative, idempotent; no object in either is lost.
    func join(_ lhs: [UInt8], _ rhs: [UInt8]) throws(CoreError) -> [UInt8]
    /// Refuses a peer's snapshot that does not decode (as `restore` would), or that names what its baseline does
    /// not fold: a version stamped (or placed) by a change outside `folded`, or later than `maxLamport`. Such a
    /// version would beat every later honest one in each join to come.
    func checkSnapshot(_ snapshot: ArraySlice<UInt8>, folds folded: Summary, maxLamport: UInt64) throws(CoreError)
}

extension Domain {
    /// SHA-256 of the canonical encoding.
    public func digest(of state: State) -> [UInt8] { SHA256.hash(canonicalEncoding(of: state)) }

    /// Whether replaying `change` leaves any state as it was, wherever it sorts: engine kinds (`timeline.begin`,
    /// `timeline.end`) and kinds this build cannot interpret, which replay skips. One arriving late needs no
    /// rollback: a new device's `timeline.begin` sorts before most of an old device's history, and made that
    /// device replay all of it.
    public func isInert(_ change: Change) -> Bool { !canInterpret(kind: change.kind, version: change.version) }

    /// Whether the engine or the domain understands this change.
    public func understands(_ change: Change) -> Bool {
        Change.isEngineKind(change.kind) || canInterpret(kind: change.kind, version: change.version)
    }
}
