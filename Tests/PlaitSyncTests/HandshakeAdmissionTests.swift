import Foundation
import Testing

@testable import PlaitSync

/// The admission of connections still handshaking, as plain values (DESIGN §10 "Admission under load").
struct HandshakeAdmissionTests {
    let start = ContinuousClock.now

    func at(_ milliseconds: Int) -> ContinuousClock.Instant { start + .milliseconds(milliseconds) }

    func limits(perAddress: Int, total: Int) -> HandshakeLimits {
        var limits = HandshakeLimits()
        limits.perAddress = perAddress
        limits.total = total
        return limits
    }

    /// An address at its cap loses its own oldest handshake to its newcomer; other addresses are untouched.
    @Test func anAddressAtItsCapLosesItsOwnOldestHandshake() {
        var admission = HandshakeAdmission(limits: limits(perAddress: 3, total: 64))
        let paired = admission.admit(host: "127.0.0.1", now: at(0))
        let first = admission.admit(host: "127.0.0.2", now: at(1))
        _ = admission.admit(host: "127.0.0.2", now: at(2))
        _ = admission.admit(host: "127.0.0.2", now: at(3))
        #expect(first.evict == nil && paired.evict == nil)
        let fourth = admission.admit(host: "127.0.0.2", now: at(4))
        #expect(fourth.evict == first.ticket)
        #expect(admission.count(from: "127.0.0.2") == 3 && admission.count(from: "127.0.0.1") == 1)
        // A thousand more from the stranger never touch the paired device's handshake.
        for index in 0..<1000 {
            let next = admission.admit(host: "127.0.0.2", now: at(5 + index))
            #expect(next.evict != paired.ticket)
        }
        #expect(admission.count == 4 && admission.count(from: "127.0.0.1") == 1)
    }

    /// At the total cap the address holding the most loses its oldest handshake, never an address holding fewer;
    /// among addresses holding equally many, the oldest handshake goes.
    @Test func atTheTotalCapTheAddressHoldingTheMostLosesItsOldest() {
        var admission = HandshakeAdmission(limits: limits(perAddress: 4, total: 6))
        var strangers: [String: [HandshakeAdmission.Ticket]] = [:]
        for (index, host) in ["10.0.0.1", "10.0.0.1", "10.0.0.1", "10.0.0.2", "10.0.0.2"].enumerated() {
            strangers[host, default: []].append(admission.admit(host: host, now: at(index)).ticket)
        }
        let paired = admission.admit(host: "10.0.0.9", now: at(10)).ticket
        #expect(admission.count == 6)
        // Full: the newcomer from a third address takes the place of 10.0.0.1's oldest (it holds the most).
        let newcomer = admission.admit(host: "10.0.0.3", now: at(11))
        #expect(newcomer.evict == strangers["10.0.0.1"]?[0])
        // Now 10.0.0.1 and 10.0.0.2 hold 2 each: the older of their handshakes goes (10.0.0.1's, at 1 ms).
        let fourth = admission.admit(host: "10.0.0.4", now: at(12))
        #expect(fourth.evict == strangers["10.0.0.1"]?[1])
        // 10.0.0.2 now holds the most (2).
        let fifth = admission.admit(host: "10.0.0.5", now: at(13))
        #expect(fifth.evict == strangers["10.0.0.2"]?[0])
        #expect(admission.count == 6 && admission.count(from: "10.0.0.9") == 1)
        // Every address holds one: the oldest handshake goes, and the paired device's is younger than some.
        let next = admission.admit(host: "10.0.0.6", now: at(14))
        #expect(next.evict == strangers["10.0.0.1"]?[2])
        #expect(next.evict != paired)
    }

    /// Within an address, handshakes whose ClientHello was not answered (silent, garbage, cut short) go first: a
    /// paired device sharing an address with a flood (one NAT) keeps its handshake, however old.
    @Test func unansweredHandshakesGoFirst() {
        var admission = HandshakeAdmission(limits: limits(perAddress: 3, total: 64))
        let paired = admission.admit(host: "192.168.1.20", now: at(0)).ticket
        admission.answered(paired)
        let silent = (1...2).map { admission.admit(host: "192.168.1.20", now: at($0)).ticket }
        let third = admission.admit(host: "192.168.1.20", now: at(3))
        #expect(third.evict == silent[0])
        for index in 0..<100 {
            let next = admission.admit(host: "192.168.1.20", now: at(4 + index))
            #expect(next.evict != paired)
        }
        // When every handshake of the address was answered, the oldest goes after all.
        var answered = HandshakeAdmission(limits: limits(perAddress: 2, total: 64))
        let first = answered.admit(host: "192.168.1.20", now: at(0)).ticket
        let second = answered.admit(host: "192.168.1.20", now: at(1)).ticket
        answered.answered(first)
        answered.answered(second)
        let newcomer = answered.admit(host: "192.168.1.20", now: at(2))
        #expect(newcomer.evict == first)
    }

    /// A handshake past its deadline is expired, oldest first; the next thing due is the oldest's deadline.
    @Test func handshakesPastTheDeadlineExpireOldestFirst() {
        var limits = limits(perAddress: 8, total: 64)
        limits.deadline = .seconds(3)
        var admission = HandshakeAdmission(limits: limits)
        let a = admission.admit(host: "127.0.0.2", now: at(0)).ticket
        let b = admission.admit(host: "127.0.0.3", now: at(500)).ticket
        let c = admission.admit(host: "127.0.0.2", now: at(2900)).ticket
        #expect(admission.nextDue == at(3000))
        #expect(admission.expired(now: at(2999)).isEmpty)
        #expect(admission.expired(now: at(3600)) == [a, b])
        admission.drop(a, because: .pastDeadline, now: at(3600))
        admission.drop(b, because: .pastDeadline, now: at(3600))
        admission.release(c)
        #expect(admission.count == 0)
        // Now only the summary is due, a minute after the first drop.
        #expect(admission.nextDue == at(3600) + .seconds(60))
    }

    /// Drops are summed up in one line a minute after the first one (never sooner), then counting starts afresh;
    /// when the agent stops, what was counted is said at once.
    @Test func dropsAreSummedUpOnceAMinute() throws {
        var admission = HandshakeAdmission(limits: limits(perAddress: 2, total: 64))
        let nothing = admission.summary(now: at(0))
        #expect(nothing == nil, "nothing dropped, nothing to say")
        var tickets: [HandshakeAdmission.Ticket] = []
        for index in 0..<10 {
            let admitted = admission.admit(host: "127.0.0.2", now: at(index))
            tickets.append(admitted.ticket)
        }
        let failed = admission.admit(host: "127.0.0.3", now: at(20)).ticket
        admission.drop(failed, because: .failed, now: at(20))
        let early = admission.summary(now: at(59_000))
        #expect(early == nil, "not before a minute has passed")
        let said = admission.summary(now: at(60_002))
        let line = try #require(said)
        #expect(
            line == "dropped 9 connections from 2 addresses in the last minute (at the handshake: 8 over 2 per "
                + "address or 64 in all, 1 failed handshake); most from 127.0.0.2 (8), 127.0.0.3 (1)", "\(line)")
        let quiet = admission.summary(now: at(200_000))
        #expect(quiet == nil, "a new window begins with the next drop")
        admission.drop(tickets[9], because: .pastDeadline, now: at(200_000))
        let final = admission.summary(now: at(212_000), final: true)
        let last = try #require(final)
        #expect(last.hasPrefix("dropped 1 connection from 1 address in the last 12 s (at the handshake: 1 past the"))
    }

    /// One address is the address itself for IPv4 and IPv4-mapped IPv6, and the /64 for IPv6.
    @Test func anIPv6HostCountsByItsSlash64() {
        #expect(HandshakeAdmission.addressKey("127.0.0.2") == "127.0.0.2")
        #expect(HandshakeAdmission.addressKey("::ffff:127.0.0.2") == "127.0.0.2")
        #expect(HandshakeAdmission.addressKey("2001:db8::1") == HandshakeAdmission.addressKey("2001:db8::ffff:2"))
        #expect(HandshakeAdmission.addressKey("2001:db8::1") == "2001:db8:0:0::/64")
        #expect(HandshakeAdmission.addressKey("2001:db8:0:1::1") != HandshakeAdmission.addressKey("2001:db8::1"))
        var admission = HandshakeAdmission(limits: limits(perAddress: 2, total: 64))
        let first = admission.admit(host: "2001:db8::1", now: at(0)).ticket
        _ = admission.admit(host: "2001:db8::2", now: at(1))
        let third = admission.admit(host: "2001:db8::3", now: at(2))
        #expect(third.evict == first)
    }
}
