import Foundation
import PlaitCore

/// The `tag` a device puts in its TXT record: paired peers recognise it, strangers cannot follow it.
///
/// `tag(deviceID:date:)` is the first 16 characters of the RFC 4648 base32 encoding (alphabet `A–Z2–7`,
/// no padding) of SHA-256 over exactly these bytes, with nothing between or after them:
///
/// 1. the UTF-8 bytes of the Device ID text as given — callers pass the canonical form `plait id` prints
///    (`DeviceID.description`: eight groups of seven characters joined by `-`), the same form on both sides;
/// 2. the 10 ASCII bytes of the UTC calendar date of `date`, `YYYY-MM-DD`.
///
/// 16 characters are 80 bits of the hash. The tag changes every UTC day, so the same laptop shows
/// unrelated tags on different days and networks, while a peer that knows the Device ID computes the
/// same value for each ID it trusts (`matchingDevice`).
public enum DiscoveryTag {
    /// Characters in a tag.
    public static let length = 16

    /// The tag `deviceID` publishes on the UTC day of `date`.
    public static func tag(deviceID: String, date: Date) -> String {
        tag(deviceID: deviceID, utcDay: utcDay(of: date))
    }

    /// The Device ID among `trusted` whose tag is `tag`, or nil.
    ///
    /// Checks the UTC day of `date` and the day before — a peer that has not refreshed its TXT since
    /// midnight, or whose clock is behind — and the day after, for a peer whose clock is ahead.
    public static func matchingDevice(tag: String, trusted: [String], date: Date = Date()) -> String? {
        guard tag.utf8.count == length else { return nil }
        let days = [date, date.addingTimeInterval(-86_400), date.addingTimeInterval(86_400)].map(utcDay(of:))
        for day in days {
            if let match = trusted.first(where: { Self.tag(deviceID: $0, utcDay: day) == tag }) { return match }
        }
        return nil
    }

    /// `YYYY-MM-DD` of `date` in UTC (proleptic Gregorian calendar, from Unix time, so no time zone
    /// database or locale is involved).
    public static func utcDay(of date: Date) -> String {
        let days = Int64((date.timeIntervalSince1970 / 86_400).rounded(.down))
        let (year, month, day) = civilDate(daysSinceEpoch: days)
        func padded(_ value: Int64, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return padded(year, 4) + "-" + padded(month, 2) + "-" + padded(day, 2)
    }

    static func tag(deviceID: String, utcDay: String) -> String {
        var hasher = SHA256()
        hasher.update(Array(deviceID.utf8))
        hasher.update(Array(utcDay.utf8))
        // 16 characters × 5 bits = the first 10 bytes exactly.
        return String(Base32.string(Array(hasher.finalize().prefix(10))).prefix(length))
    }

    /// Days since 1970-01-01 to (year, month, day): Howard Hinnant's `civil_from_days`.
    static func civilDate(daysSinceEpoch: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = daysSinceEpoch + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}
