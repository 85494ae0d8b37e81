import Foundation
import Testing

@testable import PlaitCore

/// The `timeline_begin` conformance vectors (PROTOCOL.md §19, §20): a begin's payload bytes and the timeline
/// ID derived from its certificate and nonce, and payloads a reader MUST refuse.
@Suite("Conformance vectors: timeline.begin")
struct TimelineBeginConformanceTests {
    static func vector() throws -> [String: Any] {
        try #require(try ConformanceTests.vectors()["timeline_begin"] as? [String: Any])
    }

    @Test func beginsEncodeAndNameTheirTimeline() throws {
        let begins = try #require(try Self.vector()["begins"] as? [[String: Any]])
        #expect(begins.contains { $0["supersedes"] != nil } && begins.contains { $0["supersedes"] == nil })
        for entry in begins {
            let name = entry["name"] as? String ?? "?"
            var supersedes: TimelineBegin.Superseded?
            if let head = entry["supersedes"] as? [String: Any] {
                supersedes = TimelineBegin.Superseded(
                    timeline: TimelineID(try #require(UInt64(head["timeline"] as? String ?? "", radix: 16))),
                    seq: UInt64(try #require(head["seq"] as? Int)), hash: try bytes(head["hash"]))
            }
            let begin = TimelineBegin(
                certificate: try bytes(entry["certificate_der"]), nonce: try bytes(entry["nonce"]),
                supersedes: supersedes)
            #expect(begin.payload.hexString == entry["payload"] as? String, "\(name)")
            #expect(try TimelineBegin(payload: try bytes(entry["payload"])) == begin, "\(name)")
            let id = begin.timelineID
            #expect(String(id.rawValue, radix: 16).leftPadded(to: 16) == entry["timeline"] as? String, "\(name)")
            #expect(id.description == entry["timeline_text"] as? String, "\(name)")
            #expect(try TimelineID(parsing: entry["timeline_text"] as? String ?? "") == id, "\(name)")
        }
    }

    @Test func malformedPayloadsAreRefused() throws {
        let refused = try #require(try Self.vector()["payloads_refused"] as? [[String: Any]])
        #expect(!refused.isEmpty)
        for entry in refused {
            #expect(throws: CoreError.self, "\(entry["why"] ?? "?")") {
                try TimelineBegin(payload: try bytes(entry["hex"]))
            }
        }
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String {
        String(repeating: "0", count: max(0, width - count)) + self
    }
}

private func bytes(_ value: Any?) throws -> [UInt8] {
    let text = try #require(value as? String)
    return try #require([UInt8](hexString: text))
}
