/// One high-level user action, immutable once written: the unit every device exchanges and replays.
public struct Change: Hashable, Sendable {
    /// The largest sequence number (and any count or size a peer names that is stored alike): the store keeps them
    /// as signed 64-bit integers, as the text form of a summary does.
    public static let maxSeq = UInt64(Int64.max)

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
    /// The Lamport witness (DESIGN §11): when `lamport` is more than the previous change's + 1, the change of
    /// the author's store whose Lamport time is exactly `lamport - 1`. Nil otherwise. Hashed (field 9).
    public var witness: ChangeRef?
    /// Where the author wrote it, when a fork renamed it (DESIGN §11): its bytes, hash and signature keep
    /// `origin` as its timeline and number, while `timeline:seq` address it on the losing branch T′. Nil for
    /// every change that was not renamed (`origin` is then `ref`). Not a field of its own: the bytes are the
    /// author's.
    public var origin: ChangeRef?

    public init(
        timeline: TimelineID, seq: UInt64, lamport: UInt64, previousHash: [UInt8],
        kind: String, version: UInt32, wallTime: Int64, payload: [UInt8], witness: ChangeRef? = nil,
        origin: ChangeRef? = nil
    ) {
        self.timeline = timeline
        self.seq = seq
        self.lamport = lamport
        self.previousHash = previousHash
        self.kind = kind
        self.version = version
        self.wallTime = wallTime
        self.payload = payload
        self.witness = witness
        self.origin = origin
    }

    public static let zeroHash = [UInt8](repeating: 0, count: 32)

    /// The kind that closes a timeline (`plait rejoin`); engine-level, not a domain kind.
    public static let timelineEndKind = "timeline.end"

    /// Kinds the engine itself defines (`timeline.begin`, `timeline.end`): understood by every build of this
    /// protocol, no-ops for every domain's state.
    public static func isEngineKind(_ kind: String) -> Bool {
        kind == timelineEndKind || kind == TimelineBegin.kind
    }

    public var ref: ChangeRef { ChangeRef(timeline: timeline, seq: seq) }
    /// Where its author wrote it: the timeline and number its bytes carry.
    public var authored: ChangeRef { origin ?? ref }

    /// The same change addressed as `timeline:seq` on a fork branch (its bytes unchanged).
    public func renamed(to timeline: TimelineID, seq: UInt64) -> Change {
        var renamed = self
        renamed.origin = authored
        renamed.timeline = timeline
        renamed.seq = seq
        if renamed.origin == renamed.ref { renamed.origin = nil }
        return renamed
    }

    /// The change as its author addressed it (undoing any renaming).
    public var asAuthored: Change { origin.map { renamed(to: $0.timeline, seq: $0.seq) } ?? self }
    public var orderKey: OrderKey { OrderKey(lamport: lamport, timeline: timeline, seq: seq) }

    /// The canonical bytes that are hashed (protobuf `ChangeHeader` + payload, fields in number order).
    public var canonicalBytes: [UInt8] {
        var writer = ProtoWriter()
        writer.fixed64(1, authored.timeline.rawValue)
        writer.uint(2, authored.seq)
        writer.uint(3, lamport)
        writer.data(4, previousHash)
        writer.string(5, kind)
        writer.uint(6, UInt64(version))
        writer.uint(7, UInt64(bitPattern: wallTime))
        writer.data(8, payload)
        if let witness {
            // `ChangeRef { fixed64 timeline = 1; uint64 seq = 2; }`, written only when present, so a change
            // without a witness keeps the bytes (and hash) protocol 1 gave it.
            var inner = ProtoWriter()
            inner.fixed64(1, witness.timeline.rawValue)
            inner.uint(2, witness.seq)
            writer.data(9, inner.bytes)
        }
        return writer.bytes
    }

    /// SHA-256 of the canonical bytes: the head hash that identifies the whole history up to this change.
    public var hash: [UInt8] { SHA256.hash(canonicalBytes) }

    /// Decodes the canonical bytes (the form a change travels and is hashed in). Only the canonical form is
    /// accepted (see `EncodedChange(decoding:)`); a failure is the sender's (`badChange`).
    public init(canonical bytes: ArraySlice<UInt8>) throws(CoreError) { try self.init(strictCanonical: bytes) }
}

/// A change with the exact bytes it travels and is hashed in (DESIGN §12): decoded once from what arrived,
/// the bytes kept and never re-encoded; or encoded once from a change authored or read here.
public struct EncodedChange: Hashable, Sendable {
    public let change: Change
    /// The canonical bytes: what the hash covers and what is forwarded.
    public let bytes: ArraySlice<UInt8>
    /// The author's signature over the change hash (DESIGN §11), when the change carries one. Not part of the
    /// hashed bytes: it travels beside them, and a receiver keeps it only once verified.
    public let signature: [UInt8]?

    /// Encodes `change` once.
    public init(_ change: Change, signature: [UInt8]? = nil) {
        self.change = change
        bytes = change.canonicalBytes[...]
        self.signature = signature
    }

    /// Pairs a change with bytes already known to be its canonical encoding (read back from the store).
    public init(change: Change, bytes: ArraySlice<UInt8>, signature: [UInt8]?) {
        self.change = change
        self.bytes = bytes
        self.signature = signature
    }

    /// Decodes bytes that must be in canonical form: fields 1 to 8 (and 9 when present), each once, in order,
    /// with their wire types, varints in their shortest form, nothing after. Any other encoding of the same change would hash
    /// differently, so it is refused rather than rewritten; checking the form while decoding spares encoding
    /// the change again to compare.
    public init(decoding bytes: ArraySlice<UInt8>, signature: [UInt8]? = nil) throws(CoreError) {
        change = try Change(canonical: bytes)
        self.bytes = bytes
        self.signature = signature
    }
}

extension Change {
    /// The strict decoder behind `EncodedChange(decoding:)`.
    init(strictCanonical bytes: ArraySlice<UInt8>) throws(CoreError) {
        var reader = CanonicalReader(bytes: bytes)
        var timeline: UInt64?
        var seq: UInt64?
        do throws(CanonicalReader.Problem) {
            let timelineValue = try reader.fixed64(1)
            timeline = timelineValue
            seq = try reader.varint(2)
            let lamport = try reader.varint(3)
            let previous = try reader.bytes(4)
            let kind = try reader.bytes(5)
            let version = try reader.varint(6)
            let wall = try reader.varint(7)
            let payload = try reader.bytes(8)
            var witness: ChangeRef?
            if reader.index < bytes.endIndex {
                var inner = CanonicalReader(bytes: try reader.bytes(9))
                let witnessTimeline = try inner.fixed64(1)
                let witnessSeq = try inner.varint(2)
                guard inner.index == inner.bytes.endIndex else { throw .init("bytes after the witness's number") }
                guard witnessSeq >= 1 else { throw .init("its witness has number 0") }
                guard witnessSeq <= Change.maxSeq else { throw .init("its witness's number is over 2^63-1") }
                witness = ChangeRef(timeline: TimelineID(witnessTimeline), seq: witnessSeq)
            }
            guard reader.index == bytes.endIndex else { throw .init("bytes after the witness (field 9)") }
            guard let seq, seq >= 1, previous.count == 32, version <= UInt64(UInt32.max) else {
                throw .init("it has an invalid number, hash or version")
            }
            guard let kindText = String(validating: kind, as: UTF8.self) else {
                throw .init("its kind is not UTF-8")
            }
            self.init(
                timeline: TimelineID(timelineValue), seq: seq, lamport: lamport, previousHash: Array(previous),
                kind: kindText, version: UInt32(version), wallTime: Int64(bitPattern: wall), payload: Array(payload),
                witness: witness)
        } catch {
            // What of `timeline:seq` could be read names the change.
            let ref = timeline.map { "\(TimelineID($0)):" + (seq.map(String.init) ?? "?") }
            throw .badChange(ref: ref, reason: error.reason)
        }
    }
}

/// Reads the canonical encoding of a change field by field, refusing anything but the one canonical form.
private struct CanonicalReader {
    struct Problem: Error {
        var reason: String
        init(_ reason: String) { self.reason = reason }
    }

    let bytes: ArraySlice<UInt8>
    var index: Int

    init(bytes: ArraySlice<UInt8>) {
        self.bytes = bytes
        index = bytes.startIndex
    }

    private mutating func tag(_ number: UInt8, _ wireType: UInt8) throws(Problem) {
        guard index < bytes.endIndex else { throw Problem("it ends before field \(number)") }
        guard bytes[index] == number << 3 | wireType else {
            throw Problem("field \(number) is missing, out of order or not in canonical form")
        }
        index += 1
    }

    private mutating func rawVarint(_ number: UInt8) throws(Problem) -> UInt64 {
        var result: UInt64 = 0
        var shift: UInt64 = 0
        while true {
            guard index < bytes.endIndex else { throw Problem("field \(number) is truncated") }
            let byte = bytes[index]
            index += 1
            guard shift < 64, shift < 63 || byte <= 1 else { throw Problem("field \(number) overflows 64 bits") }
            result |= UInt64(byte & 0x7f) << shift
            if byte & 0x80 == 0 {
                // The shortest form never ends in a zero byte after the first.
                guard byte != 0 || shift == 0 else { throw Problem("field \(number) is not in canonical form") }
                return result
            }
            shift += 7
        }
    }

    mutating func varint(_ number: UInt8) throws(Problem) -> UInt64 {
        try tag(number, 0)
        return try rawVarint(number)
    }

    mutating func fixed64(_ number: UInt8) throws(Problem) -> UInt64 {
        try tag(number, 1)
        guard bytes.endIndex - index >= 8 else { throw Problem("field \(number) is truncated") }
        var value: UInt64 = 0
        for offset in 0..<8 { value |= UInt64(bytes[index + offset]) << UInt64(offset * 8) }
        index += 8
        return value
    }

    mutating func bytes(_ number: UInt8) throws(Problem) -> ArraySlice<UInt8> {
        try tag(number, 2)
        let length = try rawVarint(number)
        guard length <= UInt64(bytes.endIndex - index) else { throw Problem("length beyond the end") }
        let slice = bytes[index..<index + Int(length)]
        index += Int(length)
        return slice
    }
}
