import Foundation
import PlaitCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Strangers that open TCP connections to a listener and never finish a TLS handshake, for the admission tests
/// (DESIGN §10 "Admission under load"): silent connections, garbage, and ClientHellos cut short, each held open
/// until the listener closes it and then opened again.
///
/// One thread drives every socket with poll(2). The flood is bounded: it stops by itself after `duration` or
/// `maximumOpens` connections, whichever comes first (or at `stop()`), and closes every socket it opened.
/// Loopback only: the sockets are bound to the given source addresses of 127.0.0.0/8.
public final class HandshakeFlood: @unchecked Sendable {
    /// What one flood connection sends after connecting.
    public enum Kind: String, Sendable, CaseIterable {
        /// Nothing at all.
        case silent
        /// Random bytes (not a TLS record).
        case garbage
        /// The first bytes of a TLS handshake record that announces more than is ever sent.
        case partialClientHello
    }

    /// The shape of a flood.
    public struct Plan: Sendable {
        /// Source addresses (each in 127.0.0.0/8); the connections are spread over them in turn.
        public var sources: [String]
        /// Connections kept open at once.
        public var connections: Int
        /// Connections opened per second at most, over the whole flood (reopening is immediate otherwise).
        public var opensPerSecond: Int
        /// The flood stops after this long.
        public var duration: Duration
        /// The flood stops after opening this many connections.
        public var maximumOpens: Int
        /// Seeds the choice of kinds and the garbage bytes.
        public var seed: UInt64
        /// Percent of silent connections; the rest are garbage and cut ClientHellos in equal parts.
        public var silentPercent: Int

        public init(
            sources: [String], connections: Int, opensPerSecond: Int = 400, duration: Duration = .seconds(45),
            maximumOpens: Int = 20_000, seed: UInt64, silentPercent: Int = 70
        ) {
            self.sources = sources
            self.connections = connections
            self.opensPerSecond = opensPerSecond
            self.duration = duration
            self.maximumOpens = maximumOpens
            self.seed = seed
            self.silentPercent = silentPercent
        }
    }

    /// What the flood did so far.
    public struct Tally: Sendable, CustomStringConvertible {
        /// Connections the listener accepted at the TCP level (connect succeeded).
        public var opened = 0
        /// Connections the listener closed (or reset) while they were held.
        public var closedByListener = 0
        /// connect(2) calls that failed (refused, or the listener's backlog was full).
        public var failedConnects = 0
        /// Connections opened, by kind.
        public var byKind: [Kind: Int] = [:]
        /// Connections open right now.
        public var open = 0

        public var description: String {
            let kinds = Kind.allCases.map { "\($0.rawValue) \(byKind[$0] ?? 0)" }.joined(separator: ", ")
            return "opened \(opened) (\(kinds)), closed by the listener \(closedByListener), "
                + "failed connects \(failedConnects), open now \(open)"
        }
    }

    private enum SlotState {
        case idle
        case connecting(Int32, Kind)
        case holding(Int32)
    }

    public let plan: Plan
    private let port: UInt16
    private let lock = NSLock()
    private var stopping = false
    private var current = Tally()
    private let finished = DispatchSemaphore(value: 0)
    private var started = false

    /// A flood of `plan` against `127.0.0.1:port`; nothing happens before `start()`.
    public init(port: UInt16, plan: Plan) {
        precondition(!plan.sources.isEmpty && plan.connections > 0 && plan.opensPerSecond > 0)
        self.port = port
        self.plan = plan
    }

    /// What the flood did so far.
    public var tally: Tally { lock.withLock { current } }

    /// Starts the flood on its own thread.
    public func start() {
        precondition(!started, "HandshakeFlood.start twice")
        started = true
        let thread = Thread { [self] in
            run()
            finished.signal()
        }
        thread.name = "handshake-flood"
        thread.start()
    }

    /// Stops the flood, waits until its thread has closed every socket, and returns what it did.
    @discardableResult
    public func stop() -> Tally {
        lock.withLock { stopping = true }
        if started {
            finished.wait()
            finished.signal()  // a second stop() does not wait forever
        }
        return tally
    }

    /// Waits (up to `seconds`) until `condition` holds for the tally; returns whether it did.
    public func wait(seconds: Double = 20, until condition: (Tally) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if condition(tally) { return true }
            usleep(10_000)
        }
        return condition(tally)
    }

    private func update(_ change: (inout Tally) -> Void) { lock.withLock { change(&current) } }

    private func run() {
        var rng = SplitMix64(seed: plan.seed)
        var slots = [SlotState](repeating: .idle, count: plan.connections)
        let begin = ContinuousClock.now
        let interval = Duration.seconds(1) / plan.opensPerSecond
        var nextOpen = begin
        var opens = 0
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !lock.withLock({ stopping }), ContinuousClock.now - begin < plan.duration {
            // Open what the rate allows into idle slots.
            for index in slots.indices {
                guard case .idle = slots[index], opens < plan.maximumOpens, ContinuousClock.now >= nextOpen else {
                    continue
                }
                nextOpen = max(nextOpen + interval, ContinuousClock.now - .milliseconds(50))
                opens += 1
                let source = plan.sources[index % plan.sources.count]
                let kind = chooseKind(&rng)
                if let descriptor = openConnection(from: source) {
                    slots[index] = .connecting(descriptor, kind)
                } else {
                    update { $0.failedConnects += 1 }
                }
            }
            var entries: [pollfd] = []
            var owners: [Int] = []
            for (index, slot) in slots.enumerated() {
                switch slot {
                case .idle: continue
                case let .connecting(descriptor, _):
                    entries.append(pollfd(fd: descriptor, events: Int16(POLLOUT), revents: 0))
                case let .holding(descriptor):
                    entries.append(pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0))
                }
                owners.append(index)
            }
            let ready = poll(&entries, nfds_t(entries.count), 5)
            guard ready > 0 else { continue }
            for (entry, index) in zip(entries, owners) where entry.revents != 0 {
                switch slots[index] {
                case .idle:
                    break
                case let .connecting(descriptor, kind):
                    var error: Int32 = 0
                    var length = socklen_t(MemoryLayout<Int32>.size)
                    _ = getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &error, &length)
                    guard error == 0 else {
                        close(descriptor)
                        slots[index] = .idle
                        update { $0.failedConnects += 1 }
                        continue
                    }
                    let payload = self.payload(kind, &rng)
                    _ = payload.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    slots[index] = .holding(descriptor)
                    update {
                        $0.opened += 1
                        $0.open += 1
                        $0.byKind[kind, default: 0] += 1
                    }
                case let .holding(descriptor):
                    // Whatever the listener says (an alert, say) is read and dropped; end of stream or an error
                    // means it closed the connection.
                    let count = buffer.withUnsafeMutableBytes { recv(descriptor, $0.baseAddress, $0.count, 0) }
                    if count > 0 { continue }
                    if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) { continue }
                    close(descriptor)
                    slots[index] = .idle
                    update {
                        $0.closedByListener += 1
                        $0.open -= 1
                    }
                }
            }
        }
        for slot in slots {
            switch slot {
            case .idle: break
            case let .connecting(descriptor, _): close(descriptor)
            case let .holding(descriptor):
                close(descriptor)
                update { $0.open -= 1 }
            }
        }
    }

    private func chooseKind(_ rng: inout SplitMix64) -> Kind {
        let roll = Int.random(in: 0..<100, using: &rng)
        if roll < plan.silentPercent { return .silent }
        return roll % 2 == 0 ? .garbage : .partialClientHello
    }

    private func payload(_ kind: Kind, _ rng: inout SplitMix64) -> [UInt8] {
        switch kind {
        case .silent:
            return []
        case .garbage:
            // Never starts like a TLS handshake record (0x16), so it is garbage to a TLS server at once.
            var bytes = rng.bytes(Int.random(in: 1...200, using: &rng))
            if bytes[0] == 0x16 { bytes[0] = 0x47 }
            return bytes
        case .partialClientHello:
            // A handshake record of 512 bytes announcing a ClientHello of 508, of which only a few arrive.
            let header: [UInt8] = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xFC, 0x03, 0x03]
            return header + rng.bytes(Int.random(in: 0...40, using: &rng))
        }
    }

    /// A non-blocking TCP socket bound to `source`, connecting to 127.0.0.1:`port`; nil if that failed at once.
    private func openConnection(from source: String) -> Int32? {
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        let descriptor = socket(AF_INET, type, 0)
        guard descriptor >= 0 else { return nil }
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        local.sin_addr.s_addr = inet_addr(source)
        var remote = sockaddr_in()
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_port = port.bigEndian
        remote.sin_addr.s_addr = inet_addr("127.0.0.1")
        let size = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, size) }
        }
        guard bound == 0 else {
            close(descriptor)
            return nil
        }
        let connected = withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, size) }
        }
        guard connected == 0 || errno == EINPROGRESS else {
            close(descriptor)
            return nil
        }
        return descriptor
    }
}
