import Foundation
import PlaitCore
import Testing

@testable import PlaitDiscovery

/// The daily tag, checked against vectors computed independently with Python:
///
///     import hashlib, base64
///     base64.b32encode(hashlib.sha256(device_id.encode() + day.encode()).digest()).decode()[:16]
@Suite("Discovery tag")
struct DiscoveryTagTests {
    static let laptop = "IOJSLJO-5T3B3US-JVDUEGW-ZMVXOVF-QMPOX7B-KDZDV2C-FYT3AWN-HCJ53AN"
    static let phone = "P56IOI7-MZJNU2Y-IQGDREY-DM2MGTI-MGL3BXN-PQ6W5BM-TBBZ4TJ-XZWICQ2"
    /// 2026-11-21 23:59:59 UTC.
    static let lastSecondOfTheDay = Date(timeIntervalSince1970: 1_795_305_599)

    @Test func matchesTheIndependentlyComputedVectors() {
        #expect(DiscoveryTag.tag(deviceID: Self.laptop, date: Self.lastSecondOfTheDay) == "XCUETIOSOTTFEAFS")
        // 2026-11-21 00:00:00 UTC is the same day; one second before it is the day before.
        let midnight = Date(timeIntervalSince1970: 1_795_219_200)
        #expect(DiscoveryTag.tag(deviceID: Self.laptop, date: midnight) == "XCUETIOSOTTFEAFS")
        #expect(DiscoveryTag.tag(deviceID: Self.laptop, date: midnight.addingTimeInterval(-1)) == "X2VVZXZ4GA4O5QZH")
        // 2000-02-29 12:00 UTC: a leap day.
        let leapDay = Date(timeIntervalSince1970: 951_825_600)
        #expect(DiscoveryTag.tag(deviceID: Self.phone, date: leapDay) == "POGTXZ6ADZ6VUXK5")
        #expect(DiscoveryTag.tag(deviceID: "", date: Date(timeIntervalSince1970: 0)) == "QXAUFFWZLGCVJ3VS")
    }

    @Test func aTagIsSixteenCharactersOfTheBase32Alphabet() {
        let tag = DiscoveryTag.tag(deviceID: Self.phone, date: Date())
        #expect(tag.count == DiscoveryTag.length)
        #expect(tag.allSatisfy { "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567".contains($0) })
    }

    @Test func utcDaysAreProlepticGregorianAndIgnoreTheLocalTimeZone() {
        #expect(DiscoveryTag.utcDay(of: Date(timeIntervalSince1970: 0)) == "1970-01-01")
        #expect(DiscoveryTag.utcDay(of: Date(timeIntervalSince1970: -3600)) == "1969-12-31")
        #expect(DiscoveryTag.utcDay(of: Date(timeIntervalSince1970: 951_825_600)) == "2000-02-29")
        #expect(DiscoveryTag.utcDay(of: Self.lastSecondOfTheDay) == "2026-11-21")
        #expect(DiscoveryTag.utcDay(of: Self.lastSecondOfTheDay.addingTimeInterval(1)) == "2026-11-22")
        #expect(DiscoveryTag.utcDay(of: Date(timeIntervalSince1970: 253_402_300_799)) == "9999-12-31")
    }

    @Test func aPairedPeerRecognisesTodaysYesterdaysAndTomorrowsTag() {
        let trusted = [Self.phone, Self.laptop]
        let now = Self.lastSecondOfTheDay
        for offset in [0.0, -86_400, 86_400] {
            let tag = DiscoveryTag.tag(deviceID: Self.laptop, date: now.addingTimeInterval(offset))
            #expect(DiscoveryTag.matchingDevice(tag: tag, trusted: trusted, date: now) == Self.laptop)
        }
        // Just after midnight, yesterday's tag (a peer that has not refreshed yet) still matches.
        #expect(
            DiscoveryTag.matchingDevice(tag: "XCUETIOSOTTFEAFS", trusted: trusted, date: now.addingTimeInterval(1))
                == Self.laptop)
        let twoDaysAgo = DiscoveryTag.tag(deviceID: Self.laptop, date: now.addingTimeInterval(-2 * 86_400))
        #expect(DiscoveryTag.matchingDevice(tag: twoDaysAgo, trusted: trusted, date: now) == nil)
    }

    @Test func strangersAndMalformedTagsMatchNobody() {
        let tag = DiscoveryTag.tag(deviceID: Self.laptop, date: Self.lastSecondOfTheDay)
        #expect(DiscoveryTag.matchingDevice(tag: tag, trusted: [Self.phone], date: Self.lastSecondOfTheDay) == nil)
        #expect(DiscoveryTag.matchingDevice(tag: tag, trusted: [], date: Self.lastSecondOfTheDay) == nil)
        #expect(DiscoveryTag.matchingDevice(tag: "", trusted: [Self.laptop]) == nil)
        let day = Self.lastSecondOfTheDay
        #expect(DiscoveryTag.matchingDevice(tag: tag.lowercased(), trusted: [Self.laptop], date: day) == nil)
    }

    @Test func base32FollowsRFC4648() {
        // RFC 4648 §10 test vectors, without padding.
        let vectors = ["": "", "f": "MY", "fo": "MZXQ", "foo": "MZXW6", "foob": "MZXW6YQ", "fooba": "MZXW6YTB",
            "foobar": "MZXW6YTBOI"]
        for (input, output) in vectors { #expect(Base32.string(Array(input.utf8)) == output) }
    }
}
