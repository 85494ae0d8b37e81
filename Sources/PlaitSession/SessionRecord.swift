import PlaitCore

/// What a session recorded about its peer, as values (`SessionOptions.onRecorded`): the agent turns them into
/// events without reading the store or matching the log's sentences.
public enum SessionRecord: Sendable, Equatable {
    /// A timeline the two devices hold with different histories, and the last number both hold.
    public struct Fork: Sendable, Hashable {
        public var timeline: TimelineID
        public var seq: UInt64

        public init(timeline: TimelineID, seq: UInt64) {
            self.timeline = timeline
            self.seq = seq
        }
    }

    /// Every fork found with `peer` so far (replacing an earlier list; empty: none).
    case forks(peer: String, [Fork])
    /// What was found wrong with `peer`'s state at equal changes: the divergence's sentence, nil for none.
    case findings(peer: String, diverged: String?)
}
