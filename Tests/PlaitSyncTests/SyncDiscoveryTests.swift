import Foundation
import PlaitDiscovery
import PlaitTLS
import Testing

@testable import PlaitSync

/// `plait sync` without --peer: recognising paired agents on the LAN, and one target per device.
@Suite struct SyncDiscoveryTests {
    static let date = Date(timeIntervalSince1970: 1_763_700_000)

    func agent(
        _ name: String, device: String, addresses: [String] = ["10.77.0.2"], port: UInt16 = 7400, pairing: Bool = false
    ) -> DiscoveredService {
        let tag = DiscoveryTag.tag(deviceID: device, date: Self.date)
        let txt = TXTRecord(tag: tag, proto: 1, sum: "S", pairing: pairing)
        return DiscoveredService(
            name: name, host: "\(name).local", addresses: addresses, port: port,
            txt: Dictionary(uniqueKeysWithValues: txt.entries.map { ($0.key, $0.value) }))
    }

    func address(_ text: String) -> PeerAddress { (try? PeerAddress(parsing: text))! }

    @Test func pairedAgentsAreRecognisedByTheirTag() {
        var search = PairedPeerSearch(trusted: ["A", "B"])
        #expect(search.seen(agent("stranger", device: "X"), date: Self.date) == nil)
        #expect(search.seen(agent("a-pairing", device: "A", pairing: true), date: Self.date) == nil,
                "a pairing listener is not where it syncs")
        #expect(search.seen(agent("alpha", device: "A", addresses: ["10.77.0.2", "fd77::2"]), date: Self.date) == "A")
        #expect(search.endpoints == ["A": address("10.77.0.2:7400")])
        #expect(!search.isComplete)
        // Seen over IPv6 first: kept, but the search goes on for its IPv4 address.
        search.seen(agent("bravo", device: "B", addresses: ["fe80::3%eth0"]), date: Self.date)
        #expect(search.endpoints["B"] == address("[fe80::3%eth0]:7400"))
        #expect(!search.isComplete)
        search.seen(agent("bravo", device: "B", addresses: ["10.77.0.3", "fe80::3%eth0"], port: 7411), date: Self.date)
        #expect(search.endpoints["B"] == address("10.77.0.3:7411"))
        #expect(search.isComplete)
        search.removed(instance: "alpha")
        #expect(search.endpoints["A"] == nil && !search.isComplete)
        // A tag from yesterday (a peer that has not refreshed its TXT since midnight) still counts.
        search.seen(agent("alpha", device: "A"), date: Self.date.addingTimeInterval(86_400))
        #expect(search.endpoints["A"] != nil)
        #expect(PairedPeerSearch(trusted: []).isComplete)
    }

    @Test func eachPairedDeviceIsSyncedOnceDiscoveredAddressFirst() {
        let paired: [(deviceID: String, address: PeerAddress?)] = [
            ("A", address("192.0.2.1:7400")),  // known both ways, at different addresses
            ("B", nil),  // paired by discovery: no address until found
            ("C", address("192.0.2.3:7400")),  // not found now
            ("D", nil),  // neither
            ("E", address("10.77.0.5:7400")),  // found where it was
            ("A", address("192.0.2.1:7400")),
        ]
        let discovered = [
            "A": address("10.77.0.1:7400"), "B": address("10.77.0.2:7400"), "E": address("10.77.0.5:7400"),
        ]
        let targets = SyncTarget.plan(paired: paired, discovered: discovered)
        #expect(targets == [
            SyncTarget(
                deviceID: "A", addresses: [address("10.77.0.1:7400"), address("192.0.2.1:7400")], source: .discovered),
            SyncTarget(deviceID: "B", addresses: [address("10.77.0.2:7400")], source: .discovered),
            SyncTarget(deviceID: "C", addresses: [address("192.0.2.3:7400")], source: .stored),
            SyncTarget(deviceID: "E", addresses: [address("10.77.0.5:7400")], source: .discovered),
        ])
        #expect(SyncTarget.plan(paired: paired, discovered: [:]).map(\.deviceID) == ["A", "C", "E"])
    }
}
