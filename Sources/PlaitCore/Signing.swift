/// Signed timelines (DESIGN §11): what a signature covers, who may sign, and the seams through which the store
/// injects OpenSSL's ECDSA P-256 (the engine itself does no public-key cryptography).
public enum ChangeSignature {
    /// Signatures are 64 bytes: r ‖ s, each 32 bytes big-endian, with s in the lower half of the group order.
    public static let size = 64

    /// The context string that keeps a change signature apart from the same key's TLS signatures.
    public static let context: [UInt8] = Array("plait-change-v1".utf8) + [0]

    /// The bytes that are signed (ECDSA P-256 with SHA-256 over them): the context string, then the change hash.
    public static func message(forChangeHash hash: [UInt8]) -> [UInt8] { context + hash }

    /// The author signs the last change of every local transaction, and at least every `maxUnsignedRun`-th
    /// change and every `maxUnsignedBytes` of a long one (so a receiver never holds more than that back).
    public static let maxUnsignedRun = 1_000
    public static let maxUnsignedBytes = 1 << 20
}

/// Signs changes with a device's key (the store's authoring path; OpenSSL in PlaitStore/PlaitTLS).
public protocol ChangeSigner: Sendable {
    /// The signing key's X.509 certificate (DER): what a `timeline.begin` carries.
    var certificate: [UInt8] { get }
    /// 64 bytes r ‖ s (low-S) over `ChangeSignature.message(forChangeHash:)`.
    func sign(changeHash: [UInt8]) throws -> [UInt8]
}

/// Checks change signatures. Implementations cache parsed keys; a certificate that does not parse, or a key
/// that is not P-256, verifies nothing.
public protocol ChangeVerifier: Sendable {
    /// True when `signature` is 64 bytes r ‖ s with low S, and is valid for `changeHash` under the key of
    /// `certificate` (DER).
    func verify(signature: [UInt8], changeHash: [UInt8], certificate: [UInt8]) -> Bool
}

/// The payload of `timeline.begin`, the first change of every signed timeline.
public struct TimelineBegin: Hashable, Sendable {
    public static let kind = "timeline.begin"
    public static let nonceSize = 16

    /// The author's X.509 certificate, DER. Its key signs the timeline.
    public var certificate: [UInt8]
    /// 16 random bytes, so one key can author several timelines.
    public var nonce: [UInt8]
    /// The timeline this one replaces, with that timeline's head (`rejoin`, migration): that timeline stops
    /// holding the compaction cut-off at `seq`, and a change on it beyond `seq` is a fork.
    public var supersedes: Superseded?

    public struct Superseded: Hashable, Sendable {
        public var timeline: TimelineID
        public var seq: UInt64
        public var hash: [UInt8]

        public init(timeline: TimelineID, seq: UInt64, hash: [UInt8]) {
            self.timeline = timeline
            self.seq = seq
            self.hash = hash
        }
    }

    /// Whether a begin carrying `certificate` may supersede a timeline whose own begin carried `held` (nil: an
    /// unsigned timeline of protocol 1, which any key may continue and so supersede): only the key that signs a
    /// timeline may stop it (PROTOCOL.md §20.5). A begin of another key still opens its own timeline; its
    /// `supersedes` is ignored, so a paired peer cannot silence another device's timeline everywhere.
    public static func maySupersede(_ held: [UInt8]?, by certificate: [UInt8]?) -> Bool {
        held == nil || held == certificate
    }

    public init(certificate: [UInt8], nonce: [UInt8], supersedes: Superseded? = nil) {
        self.certificate = certificate
        self.nonce = nonce
        self.supersedes = supersedes
    }

    /// The timeline a begin opens: the first 8 bytes of SHA-256("plait-timeline" ‖ certificate ‖ nonce), read
    /// as a big-endian unsigned integer.
    public static func timelineID(certificate: [UInt8], nonce: [UInt8]) -> TimelineID {
        var hasher = SHA256()
        hasher.update(Array("plait-timeline".utf8))
        hasher.update(certificate)
        hasher.update(nonce)
        let digest = hasher.finalize()
        return TimelineID(digest.prefix(8).reduce(0) { $0 << 8 | UInt64($1) })
    }

    public var timelineID: TimelineID { Self.timelineID(certificate: certificate, nonce: nonce) }

    /// `TimelineBegin { bytes certificate = 1; bytes nonce = 2; Superseded supersedes = 3; }`,
    /// `Superseded { fixed64 timeline = 1; uint64 seq = 2; bytes hash = 3; }`, fields in number order.
    public var payload: [UInt8] {
        var writer = ProtoWriter()
        writer.data(1, certificate)
        writer.data(2, nonce)
        if let supersedes {
            var inner = ProtoWriter()
            inner.fixed64(1, supersedes.timeline.rawValue)
            inner.uint(2, supersedes.seq)
            inner.data(3, supersedes.hash)
            writer.data(3, inner.bytes)
        }
        return writer.bytes
    }

    /// Decodes a begin payload; the certificate must be present, the nonce 16 bytes, a superseded hash 32.
    public init(payload: [UInt8]) throws(CoreError) {
        func bad(_ reason: String) -> CoreError { .malformedPayload(kind: Self.kind, reason: reason) }
        var reader = ProtoReader(payload)
        var certificate: [UInt8] = []
        var nonce: [UInt8] = []
        var supersedes: Superseded?
        do throws(CoreError) {
            while let (field, value) = try reader.next() {
                switch field {
                case 1: certificate = Array(try value.data())
                case 2: nonce = Array(try value.data())
                case 3:
                    var inner = ProtoReader(try value.data())
                    var timeline: UInt64 = 0
                    var seq: UInt64 = 0
                    var hash: [UInt8] = []
                    while let (innerField, innerValue) = try inner.next() {
                        switch innerField {
                        case 1: timeline = try innerValue.uint()
                        case 2: seq = try innerValue.uint()
                        case 3: hash = Array(try innerValue.data())
                        default: break
                        }
                    }
                    guard seq >= 1, seq <= Change.maxSeq, hash.count == 32 else {
                        throw bad("the superseded head needs a number from 1 to 2^63-1 and a 32-byte hash")
                    }
                    supersedes = Superseded(timeline: TimelineID(timeline), seq: seq, hash: hash)
                default: break
                }
            }
        } catch {
            if case .malformedPayload = error { throw error }
            throw bad(error.reason)
        }
        guard !certificate.isEmpty else { throw bad("it carries no certificate") }
        guard nonce.count == Self.nonceSize else { throw bad("its nonce is \(nonce.count) bytes, not 16") }
        self.init(certificate: certificate, nonce: nonce, supersedes: supersedes)
    }
}
