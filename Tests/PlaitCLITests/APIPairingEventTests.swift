import Foundation
@testable import PlaitAPI
import PlaitPairing
import PlaitSync
import PlaitTLS
import Testing

/// The pairing's moves as events (DESIGN §12), at the value level: the devices an mDNS search finds and loses,
/// as the rendezvous offers them, become `pairing.found` and `pairing.lost` in the agent's event ring — what the
/// page follows instead of asking every second. (LANAPIPairingTests checks the same with real avahi-daemons.)
@Suite struct APIPairingEventTests {
    static func candidate(_ name: String, _ address: String) throws -> PairingCandidate {
        PairingCandidate(
            instance: "\(name) (pairing)", name: name, tag: "tag-\(name)", endpoint: try PeerAddress(parsing: address))
    }

    @Test func devicesFoundAndGoneDuringASearchArePublished() throws {
        let hub = EventHub(capacity: 64, epoch: "e1")
        let pairing = APIPairing(events: hub)
        let beta = try Self.candidate("beta", "10.0.0.2:4000")
        let gamma = try Self.candidate("gamma", "10.0.0.3:4000")

        pairing.offered([beta], 0)
        var events = hub.events(after: 0).events
        #expect(events.map(\.kind) == [.pairingFound])
        #expect(
            events.first?.data == ["instance": "beta (pairing)", "name": "beta", "address": "10.0.0.2:4000"],
            "\(events)")

        // The same list again is no news; a second device is; one found at another address is again.
        pairing.offered([beta], 0)
        pairing.offered([beta, gamma], 0)
        let moved = try Self.candidate("beta", "10.0.0.9:4000")
        pairing.offered([moved, gamma], 0)
        events = hub.events(after: 1).events
        #expect(events.map(\.kind) == [.pairingFound, .pairingFound], "\(events)")
        #expect(events.map { $0.data["instance"] } == ["gamma (pairing)", "beta (pairing)"])
        #expect(events.last?.data["address"] == "10.0.0.9:4000")

        pairing.offered([gamma], 0)
        events = hub.events(after: 3).events
        #expect(events.map(\.kind) == [.pairingLost], "\(events)")
        #expect(events.first?.data == ["instance": "beta (pairing)", "name": "beta"])
        #expect(pairing.snapshot.devices.map(\.instance) == ["gamma (pairing)"])
    }
}
