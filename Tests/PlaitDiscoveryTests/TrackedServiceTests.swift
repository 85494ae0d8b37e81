import Testing

@testable import PlaitDiscovery

/// Merging Avahi's per-(interface, protocol) results into found, updated and removed, without Avahi.
@Suite("Tracked services")
struct TrackedServiceTests {
    let v4 = BrowseKey(interface: 2, proto: 0, name: "laptop", type: "_plait._tcp", domain: "local")
    let v6 = BrowseKey(interface: 2, proto: 1, name: "laptop", type: "_plait._tcp", domain: "local")

    func resolution(_ address: String, sum: String = "A") -> Resolution {
        Resolution(host: "laptop.local", address: address, port: 7400, txt: ["tag": "T", "proto": "1", "sum": sum])
    }

    @Test func foundOnceThenUpdatedWithEveryAddressIPv4First() {
        var service = TrackedService(name: "laptop")
        service.browsed(v6)
        service.browsed(v4)
        guard case .found(let first)? = service.resolved(v6, resolution("fd77::1")) else {
            Issue.record("the first resolution is a find")
            return
        }
        #expect(first.addresses == ["fd77::1"])
        #expect(first.preferredAddress == "fd77::1")
        #expect(first.preferredEndpoint == "[fd77::1]:7400")
        guard case .updated(let both)? = service.resolved(v4, resolution("10.77.0.1")) else {
            Issue.record("a new address is an update")
            return
        }
        #expect(both.addresses == ["10.77.0.1", "fd77::1"])
        #expect(both.preferredAddress == "10.77.0.1")
        #expect(both.preferredEndpoint == "10.77.0.1:7400")
        // The same again changes nothing.
        #expect(service.resolved(v4, resolution("10.77.0.1")) == nil)
    }

    @Test func aNewTXTRecordIsAnUpdateTakenFromTheLatestResolution() {
        var service = TrackedService(name: "laptop")
        service.browsed(v4)
        service.browsed(v6)
        _ = service.resolved(v4, resolution("10.77.0.1"))
        _ = service.resolved(v6, resolution("fd77::1"))
        guard case .updated(let updated)? = service.resolved(v6, resolution("fd77::1", sum: "B")) else {
            Issue.record("a new sum is an update")
            return
        }
        #expect(updated.txt["sum"] == "B")
        #expect(updated.addresses == ["10.77.0.1", "fd77::1"])
    }

    @Test func removedOnlyWhenTheLastResultGoesAndOnlyIfItWasFound() {
        var service = TrackedService(name: "laptop")
        service.browsed(v4)
        service.browsed(v6)
        _ = service.resolved(v4, resolution("10.77.0.1"))
        _ = service.resolved(v6, resolution("fd77::1"))
        guard case .updated(let rest)? = service.lost(v6) else {
            Issue.record("losing one family is an update")
            return
        }
        #expect(rest.addresses == ["10.77.0.1"])
        #expect(service.lost(v4) == .removed(name: "laptop"))

        var neverResolved = TrackedService(name: "laptop")
        neverResolved.browsed(v4)
        #expect(neverResolved.lost(v4) == nil)
    }

    @Test func resultsForUnbrowsedKeysAreIgnored() {
        var service = TrackedService(name: "laptop")
        #expect(service.resolved(v4, resolution("10.77.0.1")) == nil)
    }
}
