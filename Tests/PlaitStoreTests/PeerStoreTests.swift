import Foundation
import PlaitCore
import PlaitTestSupport
import GRDB
import Testing

@testable import PlaitStore

/// The trust store: paired peers and the bounded list of pending ones.
@Suite struct PeerStoreTests {
    func id(_ number: Int) -> String {
        // The store keeps IDs in the 63-character grouped form; the format is checked by the caller.
        let digits = String(format: "%07d", number)
        return ([digits] + Array(repeating: "AAAAAAA", count: 7)).joined(separator: "-")
    }

    @Test func trustUntrustAndSeen() throws {
        try withTemporaryDirectory { directory in
            let store = try Store.create(at: directory.file("a.db"), timeline: TimelineID(1))
            try store.trust(deviceID: id(1), name: "b", address: "127.0.0.1:7400", now: 10)
            #expect(try store.isTrusted(deviceID: id(1)))
            #expect(try !store.isTrusted(deviceID: id(2)))
            try store.peerSeen(deviceID: id(1), address: nil, summary: Summary([TimelineID(5): 3]), now: 20)
            let peer = try #require(try store.peers().first)
            #expect(peer.address == "127.0.0.1:7400" && peer.lastSeen == 20)
            #expect(peer.lastSummary == Summary([TimelineID(5): 3]))
            #expect(try store.untrust(deviceID: id(1), now: 30))
            #expect(try !store.untrust(deviceID: id(1), now: 31))
            #expect(try store.peers().isEmpty)
            // The unpair is remembered (PROTOCOL.md §21) until the device is paired again; unpairing a device that
            // was not paired marks nothing.
            #expect(try store.unpairedDevices() == [id(1)])
            #expect(try !store.untrust(deviceID: id(2), now: 32))
            #expect(try store.unpairedDevices() == [id(1)])
            try store.trust(deviceID: id(1), name: "b", address: nil, now: 40)
            #expect(try store.unpairedDevices().isEmpty)
        }
    }

    /// A baseline a device was sending when it was unpaired is dropped with it: it was kept (up to 256 MiB) for a
    /// resume that can no longer come (third hostile tester of 2026-11-25). Another paired device's stays.
    @Test func unpairDropsTheBaselineTheDeviceWasSending() throws {
        try withTemporaryDirectory { directory in
            let store = try Store.create(at: directory.file("a.db"), timeline: TimelineID(1))
            for number in 1...2 {
                try store.trust(deviceID: id(number), name: "peer \(number)", address: nil, now: 10)
                let staged = try store.stageBaselineChunk(
                    from: id(number), summary: Summary([TimelineID(9): 4]), digest: nil, total: 1_000, offset: 0,
                    data: Array(repeating: UInt8(number), count: 600))
                #expect(staged == 600)
            }
            #expect(try store.untrust(deviceID: id(1), now: 20))
            #expect(try store.stagedBaseline(from: id(1)) == nil)
            #expect(try store.stagedBaseline(from: id(2))?.staged == 600, "a paired device's staging stays")
            let chunks = try store.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM staged_baseline_chunks") }
            #expect(chunks == 1, "the unpaired device's chunks are gone, not only its row")
        }
    }

    @Test func pendingKeepsTheSixteenMostRecentAndTrustRemovesOne() throws {
        try withTemporaryDirectory { directory in
            let store = try Store.create(at: directory.file("a.db"), timeline: TimelineID(1))
            for number in 0..<20 {
                try store.recordPending(
                    deviceID: id(number), claimedName: "stranger \(number)", address: "127.0.0.1:1", now: Int64(number))
            }
            try store.recordPending(deviceID: id(19), claimedName: "again", address: nil, now: 30)
            let pending = try store.pendingPeers()
            #expect(pending.count == Store.pendingLimit)
            #expect(pending.first?.deviceID == id(19) && pending.first?.attempts == 2)
            #expect(Set(pending.map(\.deviceID)) == Set((4..<20).map(id)))
            try store.trust(deviceID: id(10), name: "now known", address: nil, now: 40)
            #expect(try store.pendingPeers().count == Store.pendingLimit - 1)
        }
    }
}
