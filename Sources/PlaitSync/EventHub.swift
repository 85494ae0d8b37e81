import Foundation

/// A value in an event's `data` object: what the local API's clients read, so only JSON's plain kinds.
public enum EventValue: Sendable, Equatable, Codable, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByBooleanLiteral
{
    case string(String)
    case int(Int64)
    case bool(Bool)
    case null

    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// A string, or `null` when there is none.
    public init(_ value: String?) { self = value.map { .string($0) } ?? .null }
    public init<Integer: BinaryInteger>(_ value: Integer) { self = .int(Int64(clamping: value)) }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .int(value)
        } else {
            self = .string(try container.decode(String.self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case let .string(value): try container.encode(value)
        case let .int(value): try container.encode(value)
        case let .bool(value): try container.encode(value)
        case .null: try container.encodeNil()
        }
    }
}

/// What an event reports (API.md "Events"); the raw value is the `kind` clients see.
public enum EventKind: String, Sendable, CaseIterable {
    /// A change was applied: authored here (by any process) or pulled from a peer.
    case changeApplied = "change.applied"
    case peerConnected = "peer.connected"
    case peerDisconnected = "peer.disconnected"
    /// A session pulled a batch, or ended (with what it pulled and sent).
    case syncProgress = "sync.progress"
    /// Equal changes and baselines, different states (DESIGN §10).
    case divergence
    /// A timeline with two histories (DESIGN §11).
    case fork
    /// Damaged data repaired: derived state rebuilt, or changes set aside as damaged pulled again.
    case damageHealed = "damage.healed"
    /// An unpaired device tried to connect (listed by `plait peers --pending`).
    case pendingDevice = "pending.device"
    /// A pairing in progress shows its 6-digit code.
    case pairingCode = "pairing.code"
    /// A pairing started from the API moved on: searching, connecting, comparing, confirmed, paired, refused,
    /// failed (with what the session then says: device, name, error).
    case pairingState = "pairing.state"
    /// A search for devices in pairing mode (mDNS) found one, or found it again at another address.
    case pairingFound = "pairing.found"
    /// A device the search had found left pairing mode (or the search ended).
    case pairingLost = "pairing.lost"
    /// Two copies of one home met (DESIGN §11 "Copied homes").
    case homeCopied = "home.copied"
    /// Made by the hub, never published: events the client asked for are no longer held (the ring overflowed,
    /// or its position belongs to another epoch, an earlier run of the agent).
    case gap
}

/// One event as the local API sends it: numbered in publishing order within the epoch of one agent run.
public struct AgentEvent: Sendable, Equatable {
    /// 1, 2, 3, … in the order published (a gap event carries the last number it stands for, 0 if none).
    public var seq: UInt64
    /// Random per agent start: a client holding a position from an earlier run is told (a gap) and resets.
    public var epoch: String
    /// ISO 8601 with milliseconds, when it was published.
    public var time: String
    public var kind: EventKind
    public var data: [String: EventValue]
    /// The event as JSON (`{"data":{…},"epoch":…,"kind":…,"seq":…,"time":…}`, keys sorted), encoded once
    /// when published: every client and every SSE line sends these same bytes.
    public var json: String
}

/// The agent's recent events (DESIGN §12): a bounded ring numbered from 1 under a random epoch, published from
/// any thread, read by position (`events(after:)`), awaited for long-polls (`wait`) and followed by SSE streams
/// (`subscribe`). A client that comes back loses nothing the ring still holds; what it no longer holds is
/// reported as one "gap" event, never skipped silently. No HTTP here: PlaitAPI serves it.
public final class EventHub: @unchecked Sendable {
    public static let defaultCapacity = 4096

    /// Hexadecimal, 64 random bits.
    public let epoch: String
    public let capacity: Int

    private let lock = NSLock()
    /// Event `seq` sits at `(seq - 1) % capacity`.
    private var ring: [AgentEvent?]
    /// The newest event's number (0 before the first).
    private var latest: UInt64 = 0
    private var waits: [UInt64: WaitState] = [:]
    private var nextWait: UInt64 = 0
    /// Set by `close()`: the agent is stopping, so waits end at once and streams end.
    private var closed = false
    private let encoder: JSONEncoder
    private let formatter: ISO8601DateFormatter

    private enum WaitState {
        /// Allocated, its continuation not yet stored.
        case pending
        case waiting(CheckedContinuation<Void, Never>)
        /// Timed out or cancelled before its continuation was stored.
        case fired
    }

    public init(capacity: Int = EventHub.defaultCapacity, epoch: String? = nil) {
        precondition(capacity >= 1, "an event ring holds at least one event")
        self.capacity = capacity
        self.epoch = epoch ?? String(UInt64.random(in: 1...UInt64.max), radix: 16)
        ring = Array(repeating: nil, count: capacity)
        encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
    }

    /// The newest event's number (0 before the first).
    public var latestSeq: UInt64 { lock.withLock { latest } }

    /// Whether `close()` was called.
    public var isClosed: Bool { lock.withLock { closed } }

    /// Ends every wait and stream, now and from now on (the agent is stopping: an open stream must not hold its
    /// HTTP server's shutdown). Publishing still works, for what happens while stopping.
    public func close() {
        let woken = lock.withLock { () -> [CheckedContinuation<Void, Never>] in
            closed = true
            return takeWaiting()
        }
        for continuation in woken { continuation.resume() }
    }

    /// Under `lock`: every stored continuation, removed.
    private func takeWaiting() -> [CheckedContinuation<Void, Never>] {
        var woken: [CheckedContinuation<Void, Never>] = []
        for (id, state) in waits {
            guard case let .waiting(continuation) = state else { continue }
            woken.append(continuation)
            waits[id] = nil
        }
        return woken
    }

    /// Long-polls waiting now (for tests: a wake can be shown without sleeping).
    var waitingCount: Int {
        lock.withLock { waits.values.filter { if case .waiting = $0 { true } else { false } }.count }
    }

    /// Numbers and stores an event, and wakes every waiting long-poll and stream. Safe from any thread; events
    /// are numbered in the order their publishers took the lock, and none is lost but by overflowing the ring.
    @discardableResult
    public func publish(_ kind: EventKind, _ data: [String: EventValue] = [:]) -> AgentEvent {
        let (event, woken) = lock.withLock { () -> (AgentEvent, [CheckedContinuation<Void, Never>]) in
            latest += 1
            let event = makeEvent(seq: latest, kind: kind, data: data)
            ring[Int((latest - 1) % UInt64(capacity))] = event
            return (event, takeWaiting())
        }
        for continuation in woken { continuation.resume() }
        return event
    }

    /// Every held event after `since`, oldest first, led by a gap event when some the caller asked for are no
    /// longer held, or when its position is not one of this epoch's (`epoch` names another run, or `since` is
    /// beyond the newest event): then everything held follows, and the caller resets.
    public func events(after since: UInt64, epoch: String? = nil) -> EventBatch {
        lock.withLock { heldEvents(after: since, epoch: epoch) }
    }

    /// As `events(after:epoch:)`, but when nothing is there yet waits until an event is published or `timeout`
    /// passes (then the batch is empty). A long-poll; cancelling the task ends the wait early.
    public func wait(after since: UInt64, epoch: String? = nil, timeout: Duration) async -> EventBatch {
        let (now, id) = lock.withLock { () -> (EventBatch, UInt64?) in
            let batch = heldEvents(after: since, epoch: epoch)
            guard batch.events.isEmpty, !closed else { return (batch, nil) }
            nextWait += 1
            waits[nextWait] = .pending
            return (batch, nextWait)
        }
        guard let id else { return now }
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            if !Task.isCancelled { self?.fire(id) }
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = lock.withLock { () -> Bool in
                    // Published since the check above, or fired already: nothing to wait for.
                    if case .fired = waits[id] {
                    } else if latest <= since && !closed {
                        waits[id] = .waiting(continuation)
                        return false
                    }
                    waits[id] = nil
                    return true
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            fire(id)
        }
        timer.cancel()
        return events(after: since, epoch: epoch)
    }

    /// Follows the events after `since` (an SSE stream): each step yields what was published since the last one
    /// (led by a gap when the follower fell more than a ring behind), or `.keepAlive` after `keepAlive` of quiet.
    /// It holds no buffer of its own: a slow reader costs the agent nothing, and learns what it missed as a gap.
    public func subscribe(after since: UInt64, epoch: String? = nil, keepAlive: Duration) -> EventSubscription {
        EventSubscription(hub: self, since: since, epoch: epoch, keepAlive: keepAlive)
    }

    /// Ends a wait (timed out or cancelled), whether or not its continuation is stored yet.
    private func fire(_ id: UInt64) {
        let continuation = lock.withLock { () -> CheckedContinuation<Void, Never>? in
            switch waits[id] {
            case let .waiting(continuation):
                waits[id] = nil
                return continuation
            case .pending:
                waits[id] = .fired
                return nil
            case .fired, nil:
                return nil
            }
        }
        continuation?.resume()
    }

    /// Under `lock`.
    private func heldEvents(after since: UInt64, epoch other: String?) -> EventBatch {
        let oldest = latest >= UInt64(capacity) ? latest - UInt64(capacity) + 1 : 1
        var events: [AgentEvent] = []
        var start: UInt64
        if (other != nil && other != epoch) || since > latest {
            // A position from another run of the agent means nothing here: everything held, after a gap that
            // says so (from 1: the client resets whatever it held). Also a position beyond the newest event,
            // 2^64 - 1 included (`since + 1` trapped on it: one GET stopped the agent).
            events.append(gap(from: 1, to: oldest - 1, reason: "epoch"))
            start = oldest
        } else {
            start = since + 1  // since ≤ latest < 2^64 - 1
            if start < oldest {
                events.append(gap(from: start, to: oldest - 1, reason: "overflow"))
                start = oldest
            }
        }
        if start <= latest {
            for seq in start...latest {
                if let event = ring[Int((seq - 1) % UInt64(capacity))] { events.append(event) }
            }
        }
        return EventBatch(epoch: epoch, events: events)
    }

    /// Under `lock`.
    private func gap(from: UInt64, to: UInt64, reason: String) -> AgentEvent {
        makeEvent(seq: to, kind: .gap, data: ["from": EventValue(from), "to": EventValue(to), "reason": .init(reason)])
    }

    /// Under `lock` (the encoder and formatter are not shared across threads otherwise).
    private func makeEvent(seq: UInt64, kind: EventKind, data: [String: EventValue]) -> AgentEvent {
        let time = formatter.string(from: Date())
        let wire = WireEvent(seq: seq, epoch: epoch, time: time, kind: kind.rawValue, data: data)
        // Plain strings, integers and booleans always encode.
        let json = (try? encoder.encode(wire)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
        return AgentEvent(seq: seq, epoch: epoch, time: time, kind: kind, data: data, json: json)
    }

    private struct WireEvent: Encodable {
        var seq: UInt64
        var epoch: String
        var time: String
        var kind: String
        var data: [String: EventValue]
    }
}

/// What `GET /api/events` answers: the epoch and the events (possibly none, after a timeout).
public struct EventBatch: Sendable, Equatable {
    public var epoch: String
    public var events: [AgentEvent]

    /// `{"epoch":"…","events":[…]}`, the events as they were encoded when published.
    public var json: String {
        let epochJSON = (try? JSONEncoder().encode(epoch)).map { String(decoding: $0, as: UTF8.self) } ?? "\"\""
        return "{\"epoch\":\(epochJSON),\"events\":[" + events.map(\.json).joined(separator: ",") + "]}"
    }
}

/// An SSE stream's view of the hub: each `next()` is one long wait from where the stream stands.
public struct EventSubscription: AsyncSequence, Sendable {
    public enum Update: Sendable, Equatable {
        /// Published since the last update, in order (a gap first when some were no longer held).
        case events([AgentEvent])
        /// Nothing for `keepAlive`: time for a comment line, so proxies and the client see the stream alive.
        case keepAlive
    }

    let hub: EventHub
    let since: UInt64
    let epoch: String?
    let keepAlive: Duration

    public func makeAsyncIterator() -> Iterator {
        Iterator(hub: hub, cursor: since, epoch: epoch, keepAlive: keepAlive)
    }

    public struct Iterator: AsyncIteratorProtocol {
        let hub: EventHub
        var cursor: UInt64
        var epoch: String?
        let keepAlive: Duration

        /// nil once the task is cancelled (the client went away) or the hub closed (the agent is stopping).
        public mutating func next() async -> Update? {
            if Task.isCancelled || hub.isClosed { return nil }
            let batch = await hub.wait(after: cursor, epoch: epoch, timeout: keepAlive)
            if Task.isCancelled || (batch.events.isEmpty && hub.isClosed) { return nil }
            guard let last = batch.events.last else { return .keepAlive }
            // From here on the stream stands in the hub's epoch, after the newest event it was given.
            cursor = last.seq
            epoch = batch.epoch
            return .events(batch.events)
        }
    }
}
