import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// How many connections that have not proved who they are the agent keeps, and for how long (DESIGN §10
/// "Admission under load").
public struct HandshakeLimits: Sendable, Equatable {
    /// Handshakes in progress from one address at most (one IPv6 /64 counts as one address).
    public var perAddress = 8
    /// Handshakes in progress at most, from all addresses.
    public var total = 64
    /// A handshake not done by then is dropped. It takes ~2 ms on a LAN; this leaves room for a slow link.
    public var deadline: Duration = .seconds(3)
    /// How often the dropped connections are summed up in one log line.
    public var summaryInterval: Duration = .seconds(60)

    public init() {}
}

/// The agent's admission of connections still handshaking, as a value: the accept loop tells it what happened
/// (a connection came, was answered, finished, failed, time passed) and does what it answers (close that
/// connection, log that line). Strangers cannot starve a paired device: when an address reaches its cap, its own
/// oldest handshake goes; when all addresses together reach the total, the oldest handshake of the address
/// holding the most goes; within an address, handshakes whose ClientHello was not answered (silent, garbage, cut
/// short) go first. A newcomer is never refused, and a paired device's handshake (one, lasting milliseconds) is
/// never the one chosen while a stranger holds more. Dropped connections are counted, not logged one by one.
struct HandshakeAdmission {
    /// One connection being handshaken, as the admission knows it.
    typealias Ticket = Int

    /// Why a connection that did not authenticate was closed.
    enum Drop: CaseIterable {
        /// Its address or all addresses together held too many handshakes; it was the oldest one there.
        case overLimit
        /// Its handshake was not done within the deadline.
        case pastDeadline
        /// Its handshake failed: garbage, a cut ClientHello, a peer that closed, a protocol not spoken here.
        case failed
        /// It presented the certificate of a device that is not paired with this one.
        case unpaired
    }

    let limits: HandshakeLimits

    private struct Entry {
        let key: String
        let host: String
        let started: ContinuousClock.Instant
        /// The client's ClientHello was complete and answered: it speaks TLS, unlike a silent or garbage flood.
        var answered = false
    }

    private var entries: [Ticket: Entry] = [:]
    private var held: [String: Int] = [:]
    private var nextTicket: Ticket = 0

    /// The current summary window: when its first drop happened, and what it counted.
    private var windowStart: ContinuousClock.Instant?
    private var drops: [Drop: Int] = [:]
    private var dropsByHost: [String: Int] = [:]

    init(limits: HandshakeLimits) {
        precondition(limits.perAddress >= 1 && limits.total >= limits.perAddress, "inconsistent handshake limits")
        self.limits = limits
    }

    /// Handshakes in progress.
    var count: Int { entries.count }

    /// Handshakes in progress from `host`'s address (its /64 for IPv6).
    func count(from host: String) -> Int { held[Self.addressKey(host)] ?? 0 }

    /// Whether admitting a connection from `host` now would drop another one.
    func isFull(for host: String) -> Bool {
        held[Self.addressKey(host), default: 0] >= limits.perAddress || entries.count >= limits.total
    }

    /// A connection from `host` arrived. Returns its ticket, and the ticket of a connection to close now to make
    /// room for it (counted as dropped over the limits), if any.
    mutating func admit(host: String, now: ContinuousClock.Instant) -> (ticket: Ticket, evict: Ticket?) {
        let key = Self.addressKey(host)
        var evict: Ticket?
        if held[key, default: 0] >= limits.perAddress {
            evict = oldest(of: key)
        } else if entries.count >= limits.total {
            // The address holding the most; among equals, the one with the oldest handshake.
            let crowded = held.keys.compactMap { key in oldest(of: key).map { (key: key, oldest: $0) } }.max {
                let (left, right) = (held[$0.key] ?? 0, held[$1.key] ?? 0)
                return left != right ? left < right : isOlder($1.oldest, than: $0.oldest)
            }
            evict = crowded?.oldest
        }
        if let evict { drop(evict, because: .overLimit, now: now) }
        let ticket = nextTicket
        nextTicket += 1
        entries[ticket] = Entry(key: key, host: host, started: now)
        held[key, default: 0] += 1
        return (ticket, evict)
    }

    /// The client of `ticket` sent a complete ClientHello and was answered: among an address's handshakes, those
    /// that have not got that far are dropped first (a paired device gets there within a millisecond).
    mutating func answered(_ ticket: Ticket) {
        entries[ticket]?.answered = true
    }

    /// The handshake of `ticket` ended without counting as a drop (done with a paired peer, this very device
    /// checking its port, the agent stopping): it no longer counts against any limit.
    mutating func release(_ ticket: Ticket) {
        remove(ticket)
    }

    /// The connection of `ticket` was closed without authenticating; it is counted for the next summary.
    mutating func drop(_ ticket: Ticket, because reason: Drop, now: ContinuousClock.Instant) {
        guard let entry = remove(ticket) else { return }
        count(reason, host: entry.host, now: now)
    }

    /// Counts a connection that was closed before it was admitted at all (e.g. the agent is stopping).
    mutating func count(_ reason: Drop, host: String, now: ContinuousClock.Instant) {
        if windowStart == nil { windowStart = now }
        drops[reason, default: 0] += 1
        dropsByHost[host, default: 0] += 1
    }

    /// The handshakes whose deadline has passed, oldest first (to be closed and dropped `pastDeadline`).
    func expired(now: ContinuousClock.Instant) -> [Ticket] {
        entries.keys.filter { now - (entries[$0]?.started ?? now) >= limits.deadline }.sorted { isOlder($0, than: $1) }
    }

    /// When the next thing is due: a handshake's deadline or the summary; nil if nothing is.
    var nextDue: ContinuousClock.Instant? {
        let deadline = entries.values.map(\.started).min().map { $0 + limits.deadline }
        let summary = windowStart.map { $0 + limits.summaryInterval }
        return [deadline, summary].compactMap { $0 }.min()
    }

    /// The summary line of the drops counted since the window began, once `summaryInterval` has passed since its
    /// first drop (or at once if `final`, when the agent stops); nil when there is nothing to say yet. Saying it
    /// starts a new window.
    mutating func summary(now: ContinuousClock.Instant, final: Bool = false) -> String? {
        guard let start = windowStart, final || now - start >= limits.summaryInterval else { return nil }
        let total = drops.values.reduce(0, +)
        let addresses = Set(dropsByHost.keys.map(Self.addressKey)).count
        let interval = final ? now - start : limits.summaryInterval
        let span = interval == .seconds(60) ? "minute" : "\(Self.seconds(interval)) s"
        var parts: [String] = []
        if let n = drops[.overLimit] {
            parts.append("\(n) over \(limits.perAddress) per address or \(limits.total) in all")
        }
        if let n = drops[.pastDeadline] { parts.append("\(n) past the \(Self.seconds(limits.deadline)) s deadline") }
        if let n = drops[.failed] { parts.append("\(n) failed \(n == 1 ? "handshake" : "handshakes")") }
        if let n = drops[.unpaired] { parts.append("\(n) from unpaired devices") }
        let top = dropsByHost.sorted { $0.value != $1.value ? $0.value > $1.value : $0.key < $1.key }.prefix(3)
        let most = top.map { "\($0.key) (\($0.value))" }.joined(separator: ", ")
        windowStart = nil
        drops = [:]
        dropsByHost = [:]
        return "dropped \(total) \(total == 1 ? "connection" : "connections") from \(addresses) "
            + "\(addresses == 1 ? "address" : "addresses") in the last \(span) (at the handshake: "
            + parts.joined(separator: ", ") + "); most from \(most)"
    }

    /// What counts as one address: the address itself for IPv4 (also IPv4-mapped IPv6), the /64 prefix for IPv6
    /// (a single host commonly holds a whole /64).
    static func addressKey(_ host: String) -> String {
        var address = in6_addr()
        guard host.contains(":"), inet_pton(AF_INET6, host, &address) == 1 else { return host }
        let bytes = withUnsafeBytes(of: &address) { Array($0) }
        if bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF {
            return bytes[12...].map(String.init).joined(separator: ".")
        }
        let groups = stride(from: 0, to: 8, by: 2).map {
            String(UInt16(bytes[$0]) << 8 | UInt16(bytes[$0 + 1]), radix: 16)
        }
        return groups.joined(separator: ":") + "::/64"
    }

    @discardableResult
    private mutating func remove(_ ticket: Ticket) -> Entry? {
        guard let entry = entries.removeValue(forKey: ticket) else { return nil }
        let left = held[entry.key, default: 1] - 1
        held[entry.key] = left > 0 ? left : nil
        return entry
    }

    /// The handshake to drop from the address `key`: its oldest that has not been answered, else its oldest.
    private func oldest(of key: String) -> Ticket? {
        let from = entries.keys.filter { entries[$0]?.key == key }
        let unanswered = from.filter { entries[$0]?.answered == false }
        return (unanswered.isEmpty ? from : unanswered).min { isOlder($0, than: $1) }
    }

    /// Whether `ticket` started before `other` (tickets are handed out in order: they break ties).
    private func isOlder(_ ticket: Ticket, than other: Ticket) -> Bool {
        guard let left = entries[ticket]?.started, let right = entries[other]?.started else { return ticket < other }
        return left != right ? left < right : ticket < other
    }

    private static func seconds(_ duration: Duration) -> String {
        let value = Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
        return value == value.rounded() ? String(Int(value)) : String(format: "%.1f", value)
    }
}
