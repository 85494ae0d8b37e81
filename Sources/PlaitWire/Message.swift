#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import PlaitCore
import SwiftProtobuf

/// One message of the sync or pairing protocol, as Swift values. plait-wire.proto documents each one.
public enum Message: Hashable, Sendable {
    /// The first message on a sync connection: who the sender is and what it holds.
    case hello(Hello)
    /// Asks for what `have` lacks of the receiver's summary.
    case want(Want)
    /// One piece of a baseline.
    case baselineChunk(BaselineChunk)
    /// A batch of changes in replay order, each with the exact bytes it travels in.
    case changes([EncodedChange])
    /// Ends the stream that answered a Want.
    case done(Summary)
    /// The sender's summary changed; with a report, also what its state is at that summary. `copies`: the
    /// instance nonces of the receiver's own Device ID the sender saw connected at once (a copied home), or none.
    case notify(Summary, report: StateReport?, copies: [[UInt8]] = [])
    /// Liveness check, answered by `pong` with the same nonce.
    case ping(nonce: UInt64)
    /// The answer to `ping`.
    case pong(nonce: UInt64)
    /// The sender is closing the connection.
    case close(reason: String)
    /// Pairing step 1 (responder): the commitment to its nonce.
    case pairCommit(commitment: [UInt8])
    /// Pairing step 2 (initiator): its nonce.
    case pairNonce(nonce: [UInt8])
    /// Pairing step 3 (responder): the nonce it committed to.
    case pairReveal(nonce: [UInt8])
    /// Pairing step 5: whether the sender's user confirmed the code.
    case pairConfirm(accepted: Bool)

    /// Ping or Pong: they keep a connection alive and move no session on.
    public var isKeepAlive: Bool {
        switch self {
        case .ping, .pong: true
        default: false
        }
    }

    /// The frame type this message travels as.
    public var type: MessageType {
        switch self {
        case .hello: return .hello
        case .want: return .want
        case .baselineChunk: return .baselineChunk
        case .changes: return .changes
        case .done: return .done
        case .notify: return .notify
        case .ping: return .ping
        case .pong: return .pong
        case .close: return .close
        case .pairCommit: return .pairCommit
        case .pairNonce: return .pairNonce
        case .pairReveal: return .pairReveal
        case .pairConfirm: return .pairConfirm
        }
    }
}

/// What a device announces when a sync connection opens.
public struct Hello: Hashable, Sendable {
    /// The protocol version this build speaks.
    /// The protocol version this build speaks, as in its ALPN name `plait-sync/2` (PROTOCOL.md §17).
    public static let currentProtocolVersion: UInt32 = 2

    public var protocolVersion: UInt32
    /// The data model (`ListsDomain.name`).
    public var domainName: String
    /// The newest change version the sender's domain interprets (`ListsDomain.version`).
    public var domainVersion: UInt32
    /// The sender's Device ID in grouped text form. Informational: the certificate from the TLS handshake
    /// is what is pinned, and the session checks that this matches it.
    public var deviceID: String
    /// The device name, for display.
    public var name: String
    /// Every change the sender holds, its baseline included.
    public var summary: Summary
    /// Per timeline, the sequence number and hash of the head the sender holds.
    public var headHashes: [TimelineID: HeadHash]
    /// The changes folded into the sender's baseline.
    public var baselineSummary: Summary
    /// SHA-256 of the sender's encoded baseline; nil when it has none.
    public var baselineDigest: [UInt8]?
    /// SHA-256 of the canonical encoding of the sender's replayed state.
    public var stateDigest: [UInt8]
    /// Changes the sender holds but cannot interpret (kinds or versions newer than it knows).
    public var unknownCount: UInt64
    /// The largest frame length the sender accepts; frames sent to it must not be larger.
    public var maxFrameSize: Int
    /// 16 random bytes drawn once per process: two live connections from one Device ID with different nonces
    /// reveal a copied home (DESIGN §11). Empty when the sender sent none.
    public var instanceNonce: [UInt8]
    /// Sent by a device dialling with a retired identity: the Device ID that replaces it (PROTOCOL.md §21).
    public var succession: SuccessionStatement?
    /// The fork records the sender holds (PROTOCOL.md §22.9), sorted by branch name, one per branch.
    public var forkRecords: [ForkBranch.Record]
    /// The sender runs a one-shot session (`plait sync`): an agent runs it beside its session with the sender's
    /// agent, and neither replaces the other (PROTOCOL.md §13.5). False from an agent and from older plait.
    public var oneShot: Bool

    public init(
        protocolVersion: UInt32 = Hello.currentProtocolVersion, domainName: String, domainVersion: UInt32,
        deviceID: String, name: String, summary: Summary, headHashes: [TimelineID: HeadHash],
        baselineSummary: Summary, baselineDigest: [UInt8]?, stateDigest: [UInt8], unknownCount: UInt64,
        maxFrameSize: Int = Frame.defaultMaxSize, instanceNonce: [UInt8] = [],
        succession: SuccessionStatement? = nil, forkRecords: [ForkBranch.Record] = [], oneShot: Bool = false
    ) {
        self.protocolVersion = protocolVersion
        self.domainName = domainName
        self.domainVersion = domainVersion
        self.deviceID = deviceID
        self.name = name
        self.summary = summary
        self.headHashes = headHashes
        self.baselineSummary = baselineSummary
        self.baselineDigest = baselineDigest
        self.stateDigest = stateDigest
        self.unknownCount = unknownCount
        self.maxFrameSize = maxFrameSize
        self.instanceNonce = instanceNonce
        self.succession = succession
        self.forkRecords = forkRecords
        self.oneShot = oneShot
    }
}

/// A succession statement as it travels in Hello (field 15): the canonical `Succession` bytes, the old key's
/// signature over them and the new key's, all opaque here. PlaitTLS's `Succession.verify` checks them against the
/// connection.
public struct SuccessionStatement: Hashable, Sendable {
    /// Bytes of a statement at most (two certificates of plait's kind take about 800).
    public static let maxStatementBytes = 16 << 10
    /// A signature is 64 bytes r ‖ s.
    public static let signatureBytes = 64

    public var statement: [UInt8]
    /// By the old certificate's key.
    public var signature: [UInt8]
    /// By the new certificate's key: its proof of possession. Empty when the sender sent none (plait before it),
    /// which the receiver refuses.
    public var newSignature: [UInt8]

    public init(statement: [UInt8], signature: [UInt8], newSignature: [UInt8]) {
        self.statement = statement
        self.signature = signature
        self.newSignature = newSignature
    }
}

/// The head a device holds of one timeline: its sequence number and the SHA-256 of that change.
public struct HeadHash: Hashable, Sendable {
    public var seq: UInt64
    public var hash: [UInt8]

    public init(seq: UInt64, hash: [UInt8]) {
        self.seq = seq
        self.hash = hash
    }
}

/// A request for the changes the sender lacks.
public struct Want: Hashable, Sendable {
    /// What the sender holds; the receiver sends what its own summary has beyond this.
    public var have: Summary
    /// Resume an interrupted baseline transfer at this byte offset; nil to start any baseline afresh.
    public var baselineOffset: UInt64?

    public init(have: Summary, baselineOffset: UInt64? = nil) {
        self.have = have
        self.baselineOffset = baselineOffset
    }
}

/// One piece of an encoded baseline (PlaitCore's `Baseline.encoded()`), sent in order from an offset.
public struct BaselineChunk: Hashable, Sendable {
    /// The size of the whole encoded baseline.
    public var totalSize: UInt64
    /// Where `data` starts in it.
    public var offset: UInt64
    public var data: [UInt8]
    /// Whether this chunk ends the baseline (`offset + data.count == totalSize`).
    public var last: Bool
    /// The summary of the baseline being sent, so a resumed transfer continues the same baseline.
    public var baselineSummary: Summary

    public init(totalSize: UInt64, offset: UInt64, data: [UInt8], last: Bool, baselineSummary: Summary) {
        self.totalSize = totalSize
        self.offset = offset
        self.data = data
        self.last = last
        self.baselineSummary = baselineSummary
    }
}

/// Bounds that `Message.decode` enforces on what a peer sends.
/// A device's state as of a summary, read in one instant: what the divergence alarm compares (DESIGN §10).
public struct StateReport: Hashable, Sendable {
    /// SHA-256 of the canonical encoding of the replayed state.
    public var stateDigest: [UInt8]
    /// SHA-256 of the encoded baseline; nil without one.
    public var baselineDigest: [UInt8]?
    /// Changes held that the sender cannot interpret.
    public var unknownCount: UInt64

    public init(stateDigest: [UInt8], baselineDigest: [UInt8]?, unknownCount: UInt64) {
        self.stateDigest = stateDigest
        self.baselineDigest = baselineDigest
        self.unknownCount = unknownCount
    }
}

public enum WireLimits {
    /// Hashes, digests, the pairing commitment and nonces: SHA-256 sized.
    public static let digestSize = 32
    /// The smallest `Hello.maxFrameSize` a peer may announce: anything smaller could not carry a Hello.
    public static let minimumMaxFrameSize = 64 * 1024
    /// Device names are shown to users; longer ones are refused rather than cut.
    public static let maxNameBytes = 256
    public static let maxDomainNameBytes = 64
    /// The grouped text form is 63 characters; the slack admits another encoding, not an essay.
    public static let maxDeviceIDBytes = 128
    public static let maxCloseReasonBytes = 1024
    /// A Hello's instance nonce (when sent) and each copied instance of Notify.
    public static let instanceNonceSize = 16
    /// Fork records in one Hello at most (PROTOCOL.md §22.9): each is about 100 bytes.
    public static let maxForkRecords = 4096
    /// Sequence numbers stay below 2^63, as in the text form of a summary (`Change.maxSeq`).
    public static let maxSeq = Change.maxSeq
}

// MARK: - Encoding

extension Message {
    /// A `changes` message of changes held as values: each is encoded once, here.
    public static func changes(_ changes: [Change]) -> Message { .changes(changes.map { EncodedChange($0) }) }

    /// The whole frame: length prefix, type byte, protobuf payload.
    public func encode() -> [UInt8] { encodeFrame(type: type, payload: payload()) }

    /// The frame this message travels as.
    public var frame: Frame { Frame(type: type, payload: payload()) }

    /// The protobuf-encoded payload (without the frame header).
    public func payload() -> [UInt8] {
        switch self {
        case let .hello(hello):
            return serialize(
                Plait_Wire_V1_Hello.with {
                    $0.protocolVersion = hello.protocolVersion
                    $0.domainName = hello.domainName
                    $0.domainVersion = hello.domainVersion
                    $0.deviceID = hello.deviceID
                    $0.name = hello.name
                    $0.summary = hello.summary.wireEntries
                    $0.headHashes = hello.headHashes.keys.sorted().map { timeline in
                        Plait_Wire_V1_HeadHash.with {
                            $0.timeline = timeline.rawValue
                            $0.seq = hello.headHashes[timeline]!.seq
                            $0.hash = Data(hello.headHashes[timeline]!.hash)
                        }
                    }
                    $0.baselineSummary = hello.baselineSummary.wireEntries
                    $0.baselineDigest = Data(hello.baselineDigest ?? [])
                    $0.stateDigest = Data(hello.stateDigest)
                    $0.unknownCount = hello.unknownCount
                    $0.maxFrameSize = UInt32(clamping: hello.maxFrameSize)
                    $0.instanceNonce = Data(hello.instanceNonce)
                    $0.forkRecords = hello.forkRecords.map { Data($0.encoded) }
                    $0.oneShot = hello.oneShot
                    if let succession = hello.succession {
                        $0.succession = Plait_Wire_V1_SuccessionStatement.with {
                            $0.statement = Data(succession.statement)
                            $0.signature = Data(succession.signature)
                            $0.newSignature = Data(succession.newSignature)
                        }
                    }
                })
        case let .want(want):
            return serialize(
                Plait_Wire_V1_Want.with {
                    $0.have = want.have.wireEntries
                    if let offset = want.baselineOffset { $0.baselineOffset = offset }
                })
        case let .baselineChunk(chunk):
            return serialize(
                Plait_Wire_V1_BaselineChunk.with {
                    $0.totalSize = chunk.totalSize
                    $0.offset = chunk.offset
                    $0.data = Data(chunk.data)
                    $0.last = chunk.last
                    $0.baselineSummary = chunk.baselineSummary.wireEntries
                })
        case let .changes(changes):
            // Written by hand: field 1, each change's bytes as they are (no copy through `Data`).
            var writer = ProtoWriter()
            for change in changes { writer.data(1, Array(change.bytes)) }
            for (index, change) in changes.enumerated() {
                guard let signature = change.signature else { continue }
                var entry = ProtoWriter()
                entry.uint(1, UInt64(index))
                entry.data(2, signature)
                writer.data(2, entry.bytes)
            }
            return writer.bytes
        case let .done(summary):
            return serialize(Plait_Wire_V1_Done.with { $0.summary = summary.wireEntries })
        case let .notify(summary, report, copies):
            return serialize(
                Plait_Wire_V1_Notify.with {
                    $0.summary = summary.wireEntries
                    $0.copiedInstances = copies.map { Data($0) }
                    if let report {
                        $0.stateDigest = Data(report.stateDigest)
                        $0.baselineDigest = report.baselineDigest.map { Data($0) } ?? Data()
                        $0.unknownCount = report.unknownCount
                    }
                })
        case let .ping(nonce):
            return serialize(Plait_Wire_V1_Ping.with { $0.nonce = nonce })
        case let .pong(nonce):
            return serialize(Plait_Wire_V1_Pong.with { $0.nonce = nonce })
        case let .close(reason):
            return serialize(Plait_Wire_V1_Close.with { $0.reason = reason })
        case let .pairCommit(commitment):
            return serialize(Plait_Wire_V1_PairCommit.with { $0.commitment = Data(commitment) })
        case let .pairNonce(nonce):
            return serialize(Plait_Wire_V1_PairNonce.with { $0.nonce = Data(nonce) })
        case let .pairReveal(nonce):
            return serialize(Plait_Wire_V1_PairReveal.with { $0.nonce = Data(nonce) })
        case let .pairConfirm(accepted):
            return serialize(Plait_Wire_V1_PairConfirm.with { $0.accepted = accepted })
        }
    }
}

private func serialize(_ message: some SwiftProtobuf.Message) -> [UInt8] {
    do {
        return try message.serializedBytes()
    } catch {
        // proto3 messages without `Any` fail to serialize only beyond 2 GiB, which no frame reaches.
        preconditionFailure("a \(type(of: message)) did not serialize: \(error)")
    }
}

// MARK: - Decoding

extension Message {
    /// Decodes and validates a frame's payload: every field a peer sends is checked before it reaches the
    /// session (summaries well formed, hashes and nonces 32 bytes, changes in canonical form, strings
    /// bounded and free of control characters). Fields this build does not know are ignored.
    ///
    /// What needs more than one message, or local state, is the session's to check: that the Device ID
    /// matches the certificate, that a batch of changes continues the receiver's timelines without gaps,
    /// that chunks arrive in order.
    public static func decode(_ frame: Frame) throws(WireError) -> Message {
        do {
            return try decodePayload(type: frame.type, frame.payload)
        } catch {
            throw .malformedPayload(type: frame.type, reason: error.reason)
        }
    }

    private static func decodePayload(type: MessageType, _ payload: [UInt8]) throws(Invalid) -> Message {
        switch type {
        case .hello:
            let proto = try parse(Plait_Wire_V1_Hello.self, payload)
            return .hello(try Hello(validating: proto))
        case .want:
            let proto = try parse(Plait_Wire_V1_Want.self, payload)
            let have = try Summary(wireEntries: proto.have, field: "have")
            return .want(Want(have: have, baselineOffset: proto.hasBaselineOffset ? proto.baselineOffset : nil))
        case .baselineChunk:
            let proto = try parse(Plait_Wire_V1_BaselineChunk.self, payload)
            return .baselineChunk(try BaselineChunk(validating: proto))
        case .changes:
            return .changes(try decodeChanges(payload))
        case .done:
            let proto = try parse(Plait_Wire_V1_Done.self, payload)
            return .done(try Summary(wireEntries: proto.summary, field: "summary"))
        case .notify:
            let proto = try parse(Plait_Wire_V1_Notify.self, payload)
            let summary = try Summary(wireEntries: proto.summary, field: "summary")
            var copies: [[UInt8]] = []
            for copy in proto.copiedInstances {
                copies.append(try validInstanceNonce(copy, field: "a copied instance"))
            }
            guard !proto.stateDigest.isEmpty else {
                guard proto.baselineDigest.isEmpty, proto.unknownCount == 0 else {
                    throw Invalid("a state report without its state digest")
                }
                return .notify(summary, report: nil, copies: copies)
            }
            return .notify(
                summary,
                report: StateReport(
                    stateDigest: try digest(proto.stateDigest, field: "state digest"),
                    baselineDigest: proto.baselineDigest.isEmpty
                        ? nil : try digest(proto.baselineDigest, field: "baseline digest"),
                    unknownCount: proto.unknownCount),
                copies: copies)
        case .ping:
            return .ping(nonce: try parse(Plait_Wire_V1_Ping.self, payload).nonce)
        case .pong:
            return .pong(nonce: try parse(Plait_Wire_V1_Pong.self, payload).nonce)
        case .close:
            let reason = try parse(Plait_Wire_V1_Close.self, payload).reason
            try checkText(reason, field: "reason", maxBytes: WireLimits.maxCloseReasonBytes)
            return .close(reason: reason)
        case .pairCommit:
            let commitment = try parse(Plait_Wire_V1_PairCommit.self, payload).commitment
            return .pairCommit(commitment: try digest(commitment, field: "commitment"))
        case .pairNonce:
            let nonce = try parse(Plait_Wire_V1_PairNonce.self, payload).nonce
            return .pairNonce(nonce: try digest(nonce, field: "nonce"))
        case .pairReveal:
            let nonce = try parse(Plait_Wire_V1_PairReveal.self, payload).nonce
            return .pairReveal(nonce: try digest(nonce, field: "nonce"))
        case .pairConfirm:
            return .pairConfirm(accepted: try parse(Plait_Wire_V1_PairConfirm.self, payload).accepted)
        }
    }
}

/// Why a payload was refused, before the frame type is attached.
private struct Invalid: Error {
    var reason: String
    init(_ reason: String) { self.reason = reason }
}

private func parse<M: SwiftProtobuf.Message>(_: M.Type, _ payload: [UInt8]) throws(Invalid) -> M {
    var options = BinaryDecodingOptions()
    options.discardUnknownFields = true
    do {
        return try M(serializedBytes: payload, options: options)
    } catch {
        throw Invalid("not a valid protobuf \(M.protoMessageName) (\(error))")
    }
}

private func digest(_ data: Data, field: String) throws(Invalid) -> [UInt8] {
    guard data.count == WireLimits.digestSize else {
        throw Invalid("\(field) is \(data.count) bytes, not \(WireLimits.digestSize)")
    }
    return [UInt8](data)
}

private func checkText(_ text: String, field: String, maxBytes: Int, allowEmpty: Bool = true) throws(Invalid) {
    let size = text.utf8.count
    guard size <= maxBytes else { throw Invalid("\(field) is \(size) bytes, over the limit of \(maxBytes)") }
    guard allowEmpty || size > 0 else { throw Invalid("\(field) is empty") }
    // Peer-chosen text ends up on terminals and in log lines: control characters could drive the terminal
    // or forge lines.
    if let scalar = text.unicodeScalars.first(where: { $0.properties.generalCategory == .control }) {
        throw Invalid("\(field) holds the control character U+\(String(scalar.value, radix: 16, uppercase: true))")
    }
}

/// The `Changes` message read by hand: each change is decoded once, in place, from a slice of the frame, and
/// keeps that slice as its bytes (DESIGN §12). Unknown fields are skipped, as for every message.
private func decodeChanges(_ payload: [UInt8]) throws(Invalid) -> [EncodedChange] {
    var reader = ProtoReader(payload)
    var changes: [EncodedChange] = []
    var signatures: [Int: [UInt8]] = [:]
    while true {
        let next: (field: UInt32, value: ProtoReader.Value)?
        do {
            next = try reader.next()
        } catch {
            throw Invalid("not a valid protobuf plait.wire.v1.Changes (\(error.reason))")
        }
        guard let (field, value) = next else { break }
        guard field == 1 || field == 2 else { continue }
        guard case let .bytes(slice) = value else {
            throw Invalid("not a valid protobuf plait.wire.v1.Changes (field \(field) is not bytes)")
        }
        if field == 1 {
            changes.append(try decodeChange(slice, position: changes.count + 1))
        } else {
            let (index, signature) = try decodeSignature(slice)
            guard signatures.updateValue(signature, forKey: index) == nil else {
                throw Invalid("the batch carries two signatures for change \(index + 1)")
            }
        }
    }
    guard !signatures.isEmpty else { return changes }
    if let beyond = signatures.keys.first(where: { $0 >= changes.count }) {
        throw Invalid("the batch carries a signature for change \(beyond + 1) of \(changes.count)")
    }
    for (index, signature) in signatures {
        let change = changes[index]
        changes[index] = EncodedChange(change: change.change, bytes: change.bytes, signature: signature)
    }
    return changes
}

/// One `ChangeSignature`: the index of the change it signs and 64 bytes (whether they verify is the intake's
/// business; their size is the message's).
private func decodeSignature(_ bytes: ArraySlice<UInt8>) throws(Invalid) -> (Int, [UInt8]) {
    var reader = ProtoReader(bytes)
    var index: UInt64 = 0
    var signature: ArraySlice<UInt8> = []
    do {
        while let (field, value) = try reader.next() {
            switch field {
            case 1: index = try value.uint()
            case 2: signature = try value.data()
            default: continue
            }
        }
    } catch {
        throw Invalid("a change signature of the batch does not decode (\(error.reason))")
    }
    guard signature.count == ChangeSignature.size else {
        throw Invalid("a change signature of the batch is \(signature.count) bytes, not \(ChangeSignature.size)")
    }
    guard index <= UInt64(Int32.max) else { throw Invalid("a change signature names change \(index)") }
    return (Int(index), Array(signature))
}

private func decodeChange(_ bytes: ArraySlice<UInt8>, position: Int) throws(Invalid) -> EncodedChange {
    // The bytes that travel must be the bytes that are hashed and forwarded: a change in another encoding
    // (unknown fields, fields out of order, padded varints) is refused, never silently rewritten.
    let encoded: EncodedChange
    do {
        encoded = try EncodedChange(decoding: bytes)
    } catch {
        throw Invalid("change \(position) of the batch does not decode or is not in canonical form (\(error.reason))")
    }
    guard encoded.change.seq <= WireLimits.maxSeq else {
        throw Invalid("change \(position) of the batch has sequence number \(encoded.change.seq), over 2^63-1")
    }
    return encoded
}

extension Hello {
    fileprivate init(validating proto: Plait_Wire_V1_Hello) throws(Invalid) {
        guard proto.protocolVersion >= 1 else { throw Invalid("protocol version is missing") }
        try checkText(
            proto.domainName, field: "domain name", maxBytes: WireLimits.maxDomainNameBytes, allowEmpty: false)
        guard proto.domainVersion >= 1 else { throw Invalid("domain version is missing") }
        let deviceID = proto.deviceID
        guard !deviceID.isEmpty, deviceID.utf8.count <= WireLimits.maxDeviceIDBytes else {
            throw Invalid("device ID is \(deviceID.utf8.count) bytes, not 1 to \(WireLimits.maxDeviceIDBytes)")
        }
        guard deviceID.utf8.allSatisfy({ isASCIIAlphanumeric($0) || $0 == UInt8(ascii: "-") }) else {
            throw Invalid("device ID holds characters other than letters, digits and dashes")
        }
        try checkText(proto.name, field: "name", maxBytes: WireLimits.maxNameBytes)
        let summary = try Summary(wireEntries: proto.summary, field: "summary")
        var heads: [TimelineID: HeadHash] = [:]
        for entry in proto.headHashes {
            let timeline = TimelineID(entry.timeline)
            guard heads[timeline] == nil else { throw Invalid("head hashes: timeline \(timeline) appears twice") }
            guard entry.seq >= 1, entry.seq <= WireLimits.maxSeq else {
                throw Invalid("head hashes: timeline \(timeline) has sequence number \(entry.seq)")
            }
            heads[timeline] = HeadHash(seq: entry.seq, hash: try digest(entry.hash, field: "head hash of \(timeline)"))
        }
        let baselineSummary = try Summary(wireEntries: proto.baselineSummary, field: "baseline summary")
        let baselineDigest = proto.baselineDigest.isEmpty
            ? nil : try digest(proto.baselineDigest, field: "baseline digest")
        let stateDigest = try digest(proto.stateDigest, field: "state digest")
        guard proto.maxFrameSize >= WireLimits.minimumMaxFrameSize else {
            throw Invalid("max frame size \(proto.maxFrameSize) is under \(WireLimits.minimumMaxFrameSize)")
        }
        guard proto.forkRecords.count <= WireLimits.maxForkRecords else {
            throw Invalid("it carries \(proto.forkRecords.count) fork records, more than \(WireLimits.maxForkRecords)")
        }
        var forkRecords: [ForkBranch.Record] = []
        for (index, bytes) in proto.forkRecords.enumerated() {
            let record: ForkBranch.Record
            do { record = try ForkBranch.Record(decoding: [UInt8](bytes)[...]) } catch {
                // The reason alone: the description of a decoding error speaks of stored bytes and this store.
                throw Invalid("fork record \(index + 1) is refused: \(error.reason)")
            }
            guard record.encoded.elementsEqual(bytes) else {
                throw Invalid("fork record \(index + 1) is not in canonical form")
            }
            if let last = forkRecords.last, !(last.branch < record.branch) {
                throw Invalid("fork records are not sorted by branch, one per branch (at record \(index + 1))")
            }
            forkRecords.append(record)
        }
        self.init(
            protocolVersion: proto.protocolVersion, domainName: proto.domainName, domainVersion: proto.domainVersion,
            deviceID: deviceID, name: proto.name, summary: summary, headHashes: heads,
            baselineSummary: baselineSummary, baselineDigest: baselineDigest, stateDigest: stateDigest,
            unknownCount: proto.unknownCount, maxFrameSize: Int(proto.maxFrameSize),
            instanceNonce: proto.instanceNonce.isEmpty
                ? [] : try validInstanceNonce(proto.instanceNonce, field: "instance nonce"),
            succession: proto.hasSuccession ? try SuccessionStatement(validating: proto.succession) : nil,
            forkRecords: forkRecords, oneShot: proto.oneShot)
    }
}

extension SuccessionStatement {
    fileprivate init(validating proto: Plait_Wire_V1_SuccessionStatement) throws(Invalid) {
        guard !proto.statement.isEmpty, proto.statement.count <= Self.maxStatementBytes else {
            throw Invalid("succession statement is \(proto.statement.count) bytes, not 1 to \(Self.maxStatementBytes)")
        }
        guard proto.signature.count == Self.signatureBytes else {
            throw Invalid("succession signature is \(proto.signature.count) bytes, not \(Self.signatureBytes)")
        }
        // Absent, it decodes: the receiver refuses the statement with a reason its sender is told (PROTOCOL.md §21).
        guard proto.newSignature.isEmpty || proto.newSignature.count == Self.signatureBytes else {
            throw Invalid(
                "succession new signature is \(proto.newSignature.count) bytes, not 0 or \(Self.signatureBytes)")
        }
        self.init(
            statement: [UInt8](proto.statement), signature: [UInt8](proto.signature),
            newSignature: [UInt8](proto.newSignature))
    }
}

/// An instance nonce: exactly `WireLimits.instanceNonceSize` bytes.
private func validInstanceNonce(_ data: Data, field: String) throws(Invalid) -> [UInt8] {
    guard data.count == WireLimits.instanceNonceSize else {
        throw Invalid("\(field) is \(data.count) bytes, not \(WireLimits.instanceNonceSize)")
    }
    return Array(data)
}

private func isASCIIAlphanumeric(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
        UInt8(ascii: "a")...UInt8(ascii: "z"):
        return true
    default:
        return false
    }
}

extension BaselineChunk {
    fileprivate init(validating proto: Plait_Wire_V1_BaselineChunk) throws(Invalid) {
        let total = proto.totalSize
        let offset = proto.offset
        let size = UInt64(proto.data.count)
        guard total >= 1 else { throw Invalid("total size is missing") }
        // The store keeps sizes as signed 64-bit integers (2^63 and above trapped there).
        guard total <= WireLimits.maxSeq else { throw Invalid("total size \(total) is over 2^63-1") }
        guard offset <= total, size <= total - offset else {
            throw Invalid("\(size) bytes at offset \(offset) run past the total size \(total)")
        }
        let ends = offset + size == total
        guard proto.last == ends else {
            throw Invalid(
                proto.last
                    ? "the last chunk ends at \(offset + size), short of the total size \(total)"
                    : "a chunk that reaches the total size \(total) is not marked last")
        }
        // An empty chunk that is not the last would let a peer stall a transfer forever.
        guard size > 0 || proto.last else { throw Invalid("a chunk that is not the last is empty") }
        self.init(
            totalSize: total, offset: offset, data: [UInt8](proto.data), last: proto.last,
            baselineSummary: try Summary(wireEntries: proto.baselineSummary, field: "baseline summary"))
    }
}

// MARK: - Summary ↔ SummaryEntry

extension Summary {
    /// The proto entries, sorted by timeline.
    var wireEntries: [Plait_Wire_V1_SummaryEntry] {
        timelines.map { timeline in
            Plait_Wire_V1_SummaryEntry.with {
                $0.timeline = timeline.rawValue
                $0.seq = self[timeline]
            }
        }
    }

    /// Reads proto entries strictly: one per timeline, sequence numbers 1 to 2^63-1. Any order is accepted.
    fileprivate init(wireEntries entries: [Plait_Wire_V1_SummaryEntry], field: String) throws(Invalid) {
        var heads: [TimelineID: UInt64] = [:]
        heads.reserveCapacity(entries.count)
        for entry in entries {
            let timeline = TimelineID(entry.timeline)
            guard entry.seq >= 1 else { throw Invalid("\(field): timeline \(timeline) has sequence number 0") }
            guard entry.seq <= WireLimits.maxSeq else {
                throw Invalid("\(field): timeline \(timeline) has sequence number \(entry.seq), over 2^63-1")
            }
            guard heads.updateValue(entry.seq, forKey: timeline) == nil else {
                throw Invalid("\(field): timeline \(timeline) appears twice")
            }
        }
        self.init(heads)
    }
}
