import Foundation
import PlaitTLS
import Testing

@testable import PlaitSync

#if canImport(Glibc)
import Glibc
#endif

/// The pairing listener's handshakes, driven side by side (`PairingHandshakes`), on a real listener over loopback.
@Suite struct PairingHandshakesTests {
    /// A connection dropped at the deadline starts the drops' summary window. Once the summary is due, a step
    /// says it and the listener has nothing due any more: left due, it made poll(2) return at once and `plait pair
    /// --listen` spun at 100 % of a core from a minute after the first drop on (fourth hostile tester of
    /// 2026-11-25).
    @Test func aDropSummedUpLeavesNothingDue() throws {
        let alpha = try TemporaryHome("alpha")
        defer { alpha.remove() }
        let listener = try PairingListener(home: alpha.home, address: loopbackAnyPort)
        defer { listener.close() }
        var limits = PairingHandshakes.limits
        limits.deadline = .milliseconds(100)
        limits.summaryInterval = .milliseconds(300)
        let handshakes = listener.handshakes(limits: limits)
        defer { handshakes.closeAll() }

        let silent = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(silent) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = listener.address.port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(silent, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        try #require(connected == 0)

        var said: [String] = []
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline, !said.contains(where: { $0.contains("at the handshake") }) {
            var entries = handshakes.pollEntries()
            _ = poll(&entries, nfds_t(entries.count), pollMilliseconds(until: handshakes.nextDue ?? deadline))
            for case let .refused(line) in try handshakes.step(entries) { said.append(line) }
        }
        #expect(said.first?.contains("did not finish its TLS handshake") == true, "\(said)")
        #expect(said.contains { $0.contains("dropped 1 connection") && $0.contains("past the") }, "\(said)")
        #expect(handshakes.count == 0)
        #expect(handshakes.nextDue == nil, "nothing is due once the summary was said")
    }
}
