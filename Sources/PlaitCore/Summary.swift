/// Per timeline, the highest sequence number held, contiguous from 1. Names a set of changes exactly.
///
/// Text form: `ID:SEQ` joined by `,`, sorted by ID; the empty set is the empty string.
public struct Summary: Hashable, Sendable, CustomStringConvertible {
    public private(set) var heads: [TimelineID: UInt64]

    public init(_ heads: [TimelineID: UInt64] = [:]) {
        self.heads = heads.filter { $0.value > 0 }
    }

    public static let empty = Summary()

    public var isEmpty: Bool { heads.isEmpty }

    /// The highest sequence number held of `timeline` (0 for none).
    public subscript(timeline: TimelineID) -> UInt64 {
        get { heads[timeline] ?? 0 }
        set { heads[timeline] = newValue == 0 ? nil : newValue }
    }

    /// Timelines in ID order.
    public var timelines: [TimelineID] { heads.keys.sorted() }

    /// Total number of changes named.
    public var count: UInt64 { heads.values.reduce(0, +) }

    public func contains(_ ref: ChangeRef) -> Bool { ref.seq >= 1 && ref.seq <= self[ref.timeline] }

    /// Whether every change `other` names is named here too.
    public func covers(_ other: Summary) -> Bool {
        other.heads.allSatisfy { self[$0.key] >= $0.value }
    }

    /// Per-timeline maximum: the smallest summary covering both.
    public func union(_ other: Summary) -> Summary {
        var merged = heads
        for (timeline, seq) in other.heads where seq > merged[timeline] ?? 0 { merged[timeline] = seq }
        return Summary(merged)
    }

    /// The changes `other` holds that this summary does not: per timeline, a closed range of sequence numbers.
    public func missing(from other: Summary) -> [MissingRange] {
        other.timelines.compactMap { timeline in
            let theirs = other[timeline]
            let mine = self[timeline]
            return theirs > mine ? MissingRange(timeline: timeline, seqs: (mine + 1)...theirs) : nil
        }
    }

    public var description: String {
        timelines.map { "\($0):\(heads[$0]!)" }.joined(separator: ",")
    }

    /// Parses the text form strictly: sorted, no duplicates, no empty entries, sequence numbers 1...2^63-1.
    public init(parsing text: String) throws(CoreError) {
        var heads: [TimelineID: UInt64] = [:]
        guard !text.isEmpty else {
            self.heads = [:]
            return
        }
        var previous: TimelineID?
        for (index, entry) in text.split(separator: ",", omittingEmptySubsequences: false).enumerated() {
            let position = "entry \(index + 1)"
            guard !entry.isEmpty else {
                throw .malformedSummary(text, reason: "\(position) is empty (a stray or trailing comma?)")
            }
            let parts = entry.split(separator: ":", omittingEmptySubsequences: false)
            guard parts.count == 2 else {
                throw .malformedSummary(text, reason: "\(position) '\(entry)' is not ID:SEQ")
            }
            guard !parts[0].isEmpty else { throw .malformedSummary(text, reason: "\(position) has an empty timeline ID") }
            let timeline: TimelineID
            do {
                timeline = try TimelineID(parsing: parts[0])
            } catch {
                throw .malformedSummary(text, reason: "\(position): \(error.description.dropLast())")
            }
            let digits = parts[1]
            guard !digits.isEmpty else { throw .malformedSummary(text, reason: "\(position) has an empty sequence number") }
            guard digits.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) else {
                throw .malformedSummary(text, reason: "\(position): sequence number '\(digits)' is not a non-negative integer")
            }
            guard digits.count == 1 || digits.first != "0" else {
                throw .malformedSummary(text, reason: "\(position): sequence number '\(digits)' has a leading zero")
            }
            guard let seq = UInt64(digits), seq <= Change.maxSeq else {
                throw .malformedSummary(text, reason: "\(position): sequence number '\(digits)' is too large")
            }
            guard seq >= 1 else { throw .malformedSummary(text, reason: "\(position): sequence numbers start at 1") }
            if let previous {
                if previous == timeline {
                    throw .malformedSummary(text, reason: "timeline \(timeline) appears twice")
                }
                if timeline < previous {
                    throw .malformedSummary(text, reason: "timeline \(timeline) is out of order (entries are sorted by ID)")
                }
            }
            previous = timeline
            heads[timeline] = seq
        }
        self.heads = heads
    }
}

/// A run of changes of one timeline that one side lacks.
public struct MissingRange: Hashable, Sendable {
    public var timeline: TimelineID
    public var seqs: ClosedRange<UInt64>
}
