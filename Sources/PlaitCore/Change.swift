/// One high-level user action, immutable once written: the unit every device exchanges and replays.
public struct Change: Hashable, Sendable {
    public var timeline: TimelineID
    public var seq: UInt64
    /// Strictly increasing along the timeline; 1 + the largest Lamport time the author's store held.
    public var lamport: UInt64
    /// SHA-256 of the previous change of this timeline; 32 zero bytes for the first.
    public var previousHash: [UInt8]
    /// What the change does (`item.complete`), interpreted by a `Domain`.
    public var kind: String
    /// The version of the kind's payload format; a build skips versions newer than it knows.
    public var version: UInt32
    /// Milliseconds since 1970 on the author's clock. For display only, never for ordering.
    public var wallTime: Int64
    /// The kind's payload, stored and forwarded as the exact bytes that travel.
    public var payload: [UInt8]

    public init(
        timeline: TimelineID, seq: UInt64, lamport: UInt64, previousHash: [UInt8],
        kind: String, version: UInt32, wallTime: Int64, payload: [UInt8]
    ) {
        self.timeline = timeline
        self.seq = seq
        self.lamport = lamport
        self.previousHash = previousHash
        self.kind = kind
        self.version = version
        self.wallTime = wallTime
        self.payload = payload
    }

    public static let zeroHash = [UInt8](repeating: 0, count: 32)

    /// The kind that closes a timeline (`plait rejoin`); engine-level, not a domain kind.
    public static let timelineEndKind = "timeline.end"

    public var ref: ChangeRef { ChangeRef(timeline: timeline, seq: seq) }
    public var orderKey: OrderKey { OrderKey(lamport: lamport, timeline: timeline, seq: seq) }

    /// The canonical bytes that are hashed (protobuf `ChangeHeader` + payload, fields in number order).
    public var canonicalBytes: [UInt8] {
        var writer = ProtoWriter()
        writer.fixed64(1, timeline.rawValue)
        writer.uint(2, seq)
        writer.uint(3, lamport)
        writer.data(4, previousHash)
        writer.string(5, kind)
        writer.uint(6, UInt64(version))
        writer.uint(7, UInt64(bitPattern: wallTime))
        writer.data(8, payload)
        return writer.bytes
    }

    /// SHA-256 of the canonical bytes: the head hash that identifies the whole history up to this change.
    public var hash: [UInt8] { SHA256.hash(canonicalBytes) }

    /// Decodes the canonical bytes (the form a change travels and is hashed in).
    public init(canonical bytes: ArraySlice<UInt8>) throws(CoreError) {
        var reader = ProtoReader(bytes)
        var timeline: UInt64?
        var seq: UInt64?
        var lamport: UInt64?
        var previous: [UInt8] = Change.zeroHash
        var kind: String?
        var version: UInt64 = 1
        var wall: UInt64 = 0
        var payload: [UInt8] = []
        // Changes are decoded from these bytes only when they arrive, so a failure is the sender's (badChange).
        let ref = { () -> String? in
            guard let timeline else { return nil }
            return seq.map { "\(TimelineID(timeline)):\($0)" } ?? "\(TimelineID(timeline)):?"
        }
        do {
            while let (field, value) = try reader.next() {
                switch field {
                case 1: timeline = try value.uint()
                case 2: seq = try value.uint()
                case 3: lamport = try value.uint()
                case 4: previous = Array(try value.data())
                case 5: kind = try value.string()
                case 6: version = try value.uint()
                case 7: wall = try value.uint()
                case 8: payload = Array(try value.data())
                default: continue
                }
            }
        } catch {
            throw .badChange(ref: ref(), reason: error.reason)
        }
        guard let timeline, let seq, let lamport, let kind else {
            throw .badChange(ref: ref(), reason: "it lacks its timeline, number, Lamport time or kind")
        }
        guard seq >= 1, previous.count == 32, version <= UInt64(UInt32.max) else {
            throw .badChange(ref: ref(), reason: "it has an invalid number, hash or version")
        }
        self.init(
            timeline: TimelineID(timeline), seq: seq, lamport: lamport, previousHash: previous, kind: kind,
            version: UInt32(version), wallTime: Int64(bitPattern: wall), payload: payload)
    }
}
