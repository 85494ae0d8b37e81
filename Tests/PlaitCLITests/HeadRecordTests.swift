import Foundation
import PlaitCore
import PlaitTestSupport
import Testing

/// A timeline's head record (its `timelines` row) is bookkeeping beside the change rows, which are the source
/// (bad-luck tester 2026-11-25, H5). One flipped bit in the own timeline's `head_hash`, or `head_seq` one too high:
/// the next `add` said "added" and chained that edit to the wrong hash or numbered it past a gap, every peer refused
/// it, and `doctor` blamed the intact last change (or said nothing).
@Suite struct HeadRecordTests {
    func column(_ timeline: TimelineID) -> Int64 { Int64(bitPattern: timeline.rawValue ^ 0x8000_0000_0000_0000) }

    func ownTimeline(_ sandbox: Sandbox, _ home: String) throws -> TimelineID {
        try TimelineID(parsing: try sandbox.ok(["status", "--json", "--home", home]).json()["timeline"] as? String ?? "")
    }

    /// Damages the head record of `timeline` in the store at `path` as one flipped bit would: the lowest bit of
    /// the hash's first byte, or the number one too high.
    func damageHeadRecord(_ path: String, _ timeline: TimelineID, _ part: String) throws {
        let row = "WHERE tl = \(column(timeline))"
        if part == "hash" {
            let hex = try sqliteShell(path, "SELECT hex(head_hash) FROM timelines \(row)")
                .trimmingCharacters(in: .whitespacesAndNewlines)
            let first = UInt8(hex.prefix(2), radix: 16) ?? 0
            let flipped = String(format: "%02X", first ^ 1) + hex.dropFirst(2)
            try sqliteShell(path, "UPDATE timelines SET head_hash = X'\(flipped)' \(row)")
        } else {
            try sqliteShell(path, "UPDATE timelines SET head_seq = head_seq + 1 \(row)")
        }
    }

    /// The status of `doctor --json`'s check named `name`, and its details (several checks may share a name).
    func doctorChecks(_ sandbox: Sandbox, _ home: String, named name: String) throws -> [String] {
        let doctor = try sandbox.run(["doctor", "--json", "--listen", "127.0.0.1:0", "--home", home])
        let checks = (try doctor.json()["checks"] as? [[String: Any]]) ?? []
        return checks.filter { $0["check"] as? String == name }
            .map { "\($0["status"] as? String ?? "?"): \($0["detail"] as? String ?? "")" }
    }

    @Test(arguments: ["hash", "seq"])
    func aDamagedOwnHeadRecordIsRewrittenAndTheNextEditReachesThePeer(part: String) throws {
        try withSandbox { sandbox in
            let devices = try sandbox.pairedHomes(["laptop", "server"])
            let (laptop, server) = (devices[0], devices[1])
            try sandbox.ok(["list", "add", "L", "--home", laptop.home])
            try sandbox.ok(["add", "L", "x1", "--home", laptop.home])
            let agent = try RunningAgent(sandbox: sandbox, home: server.home)
            defer { agent.stop() }
            try sandbox.ok(["sync", "--peer", agent.address, "--home", laptop.home])
            let own = try ownTimeline(sandbox, laptop.home)
            try damageHeadRecord(laptop.home + "/plait.db", own, part)

            // doctor names the record, not the intact change, and promises nothing false.
            let records = try doctorChecks(sandbox, laptop.home, named: "head records")
            #expect(records.count == 1 && records[0].hasPrefix("failed: the head record of timeline \(own)"), "\(records)")
            let chains = try doctorChecks(sandbox, laptop.home, named: "hash chains")
            #expect(chains.allSatisfy { $0.hasPrefix("ok") }, "\(chains)")

            try sandbox.ok(["add", "L", "x2", "--home", laptop.home])
            let sync = try sandbox.ok(["sync", "--peer", agent.address, "--home", laptop.home])
            #expect(!sync.stdout.contains("ERROR") && !sync.stderr.contains("ERROR"), "\(sync)")
            let onServer = try sandbox.ok(["show", "--json", "--home", server.home]).stdout
            #expect(onServer.contains("x2"), "the edit made after the damage reached the peer: \(onServer)")
            #expect(try sandbox.run(["doctor", "--listen", "127.0.0.1:0", "--home", laptop.home]).status == 0)
            #expect(try doctorChecks(sandbox, laptop.home, named: "head records").isEmpty)
        }
    }

    /// `repair` names the record it rewrote; afterwards `doctor` finds nothing.
    @Test func repairRewritesADamagedHeadRecordAndSaysSo() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            try sandbox.ok(["list", "add", "L"])
            try sandbox.ok(["add", "L", "a1"])
            let own = try ownTimeline(sandbox, sandbox.home)
            try damageHeadRecord(sandbox.home + "/plait.db", own, "hash")
            let repair = try sandbox.ok(["repair"])
            #expect(repair.stdout.contains("rewrote a damaged head record from its change: the head record of "
                + "timeline \(own) names another hash, but its last stored change is \(own):3"), "\(repair)")
            #expect(!repair.stdout.contains("set aside"), "\(repair)")
            #expect(try sandbox.run(["doctor", "--listen", "127.0.0.1:0"]).status == 0)
            #expect(try sandbox.shown().first?.pendingTexts == ["a1"])
        }
    }

    /// A last change whose own bytes are damaged (the record intact): continuing it would chain the new edit to a
    /// change every peer and `repair` set aside, and the edit with it. It is refused, naming the change and
    /// `repair`, and nothing is written.
    @Test func anEditDoesNotContinueADamagedLastChange() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            try sandbox.ok(["list", "add", "L"])
            try sandbox.ok(["add", "L", "a1"])
            let own = try ownTimeline(sandbox, sandbox.home)
            let store = sandbox.home + "/plait.db"
            try sqliteShell(
                store, "UPDATE changes SET payload = payload || X'00' WHERE tl = \(column(own)) AND seq = 3")
            let count = "SELECT count(*) FROM changes"
            let before = try sqliteShell(store, count)
            let add = try sandbox.fails(["add", "L", "a2"])
            #expect(add.stderr.contains("last stored change \(own):3 does not match its timeline's head record"), "\(add)")
            #expect(add.stderr.contains("Run `plait repair`"), "\(add)")
            #expect(try sqliteShell(store, count) == before)
        }
    }
}
