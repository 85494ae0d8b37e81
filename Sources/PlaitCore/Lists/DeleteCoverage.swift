/// What a `list.delete` covers where forks were renamed (DESIGN §11, PROTOCOL.md §22.6).
///
/// A delete removes the items whose placing change it observed. Version 1 observed a summary (`T:n`); after a
/// fork of T renamed branches, `T:n` may name changes its author never saw, so a version-1 entry with `n ≥ f`
/// (f: the first number of T where a branch leaves) covers only `T:1…f−1`. Version 2 carries the hash of the
/// change at `T:n`: it covers exactly the chain that ends there, under whichever names it has here (its own
/// timeline up to it, and every branch point back to the root), and nothing while that change is not held
/// here (a chain not held yet: the delete is replayed again when it arrives, since it sorts earlier).
public protocol ChainLocator {
    /// The name here of the held change whose hash is `hash`; `claimed` is the name its author gave it (where
    /// it is unless forks renamed it). nil when no held change has that hash.
    func locate(hash: [UInt8], claimed: ChangeRef) -> ChangeRef?
    /// The fork branch named `timeline`, nil for a timeline that is not a branch.
    func branch(_ timeline: TimelineID) -> ForkBranch.Branch?
    /// The smallest number, in `timeline`'s own numbering, at which a branch leaves it (two changes stand at
    /// that number); nil when none does.
    func forkPoint(of timeline: TimelineID) -> UInt64?
}

/// The chains a domain's deletes are resolved against: a store binds its locator for the time it replays, so
/// the same held changes give the same coverage on every device. Unbound (a replay over values, no forks), every
/// observed entry is where its author named it.
public final class ChainLookup: @unchecked Sendable {
    /// Set and cleared by the one thread that replays with this domain (a store's write or read scope).
    public var locator: (any ChainLocator)?

    public init(locator: (any ChainLocator)? = nil) { self.locator = locator }

    /// Runs `body` with `locator` bound, restoring what was bound before (scopes nest).
    public func binding<T>(_ locator: any ChainLocator, _ body: () throws -> T) rethrows -> T {
        let previous = self.locator
        self.locator = locator
        defer { self.locator = previous }
        return try body()
    }

    /// The changes a delete observing `observed` (with `heads` for version 2) covers here, as a summary.
    public func coverage(observed: Summary, heads: [TimelineID: [UInt8]]?) -> Summary {
        guard let locator else { return observed }
        var covered = Summary()
        for timeline in observed.timelines {
            let seq = observed[timeline]
            guard seq > 0 else { continue }
            guard let heads else {
                // Version 1: only the numbers below the first fork point are surely what its author saw.
                let limit = locator.forkPoint(of: timeline).map { min(seq, $0 - 1) } ?? seq
                if limit > 0 { covered[timeline] = max(covered[timeline], limit) }
                continue
            }
            guard let hash = heads[timeline],
                let head = locator.locate(hash: hash, claimed: ChangeRef(timeline: timeline, seq: seq))
            else { continue }
            Self.addChain(ending: head, to: &covered, locator)
        }
        return covered
    }

    /// Adds the chain that ends at `head`: its timeline up to it, then each parent up to where the branch left.
    static func addChain(ending head: ChangeRef, to covered: inout Summary, _ locator: any ChainLocator) {
        var timeline = head.timeline
        var seq = head.seq
        // A branch's parent is another timeline; a chain of parents ends at the root. Bounded against a cycle
        // that a damaged branch table could hold.
        for _ in 0..<64 {
            if seq > 0 { covered[timeline] = max(covered[timeline], seq) }
            guard let branch = locator.branch(timeline) else { return }
            let parentBase = locator.branch(branch.parent)?.base ?? 0
            guard branch.base >= parentBase else { return }
            timeline = branch.parent
            seq = branch.base - parentBase
        }
    }
}
