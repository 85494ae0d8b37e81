import Foundation
import PlaitDiscovery
@testable import PlaitPairing
import Testing

@testable import PlaitSync

/// Who pairs with whom and who dials, when devices run `plait pair` with no address: the pure rules and the
/// state machine, fed by hand.
@Suite struct PairingRendezvousTests {
    static let date = Date(timeIntervalSince1970: 1_763_700_000)
    let start = ContinuousClock.now

    /// A device in pairing mode as discovery reports it: its tag is today's for `device`.
    func service(
        _ name: String, device: String, addresses: [String] = ["10.77.0.2"], port: UInt16 = 40001,
        pairing: Bool = true
    ) -> DiscoveredService {
        let txt = TXTRecord(tag: tag(device), proto: 1, sum: "S", pairing: pairing)
        return DiscoveredService(
            name: name + PairingRendezvous.instanceSuffix, host: "\(name).local", addresses: addresses, port: port,
            txt: Dictionary(uniqueKeysWithValues: txt.entries.map { ($0.key, $0.value) }))
    }

    func tag(_ device: String) -> String { DiscoveryTag.tag(deviceID: device, date: Self.date) }

    /// Two device IDs whose tags sort as asked: (lower, higher).
    func devicesByTag() -> (lower: String, higher: String) {
        let (a, b) = ("DEVICE-A", "DEVICE-B")
        return tag(a) < tag(b) ? (a, b) : (b, a)
    }

    func after(_ seconds: Double) -> ContinuousClock.Instant { start + .milliseconds(Int(seconds * 1000)) }

    // MARK: Pure rules

    @Test func exactlyOneOfTwoDevicesDials() {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<1000 {
            let a = DiscoveryTag.tag(deviceID: "\(generator.next() as UInt64)", date: Self.date)
            let b = DiscoveryTag.tag(deviceID: "\(generator.next() as UInt64)", date: Self.date)
            guard a != b else { continue }
            let roles = [PairingRendezvous.role(ownTag: a, peerTag: b), PairingRendezvous.role(ownTag: b, peerTag: a)]
            #expect(Set(roles) == [.initiator, .responder], "\(a) vs \(b)")
            #expect(PairingRendezvous.role(ownTag: min(a, b), peerTag: max(a, b)) == .initiator, "the lower tag dials")
        }
    }

    @Test func choicesAreNumbersFromOne() {
        #expect(PairingRendezvous.choice("1", among: 3) == 0)
        #expect(PairingRendezvous.choice(" 3 ", among: 3) == 2)
        #expect(PairingRendezvous.choice("#2", among: 3) == 1)
        for wrong in ["0", "4", "-1", "", "one", "1.5", "1 2"] {
            #expect(PairingRendezvous.choice(wrong, among: 3) == nil, "'\(wrong)'")
        }
    }

    @Test func instanceNamesCarryASuffixAndFitOneLabel() {
        #expect(PairingRendezvous.instanceName(deviceName: "desktop") == "desktop (pairing)")
        let long = String(repeating: "é", count: 40)  // 80 bytes
        let name = PairingRendezvous.instanceName(deviceName: long)
        #expect(name.utf8.count <= Announcement.maximumNameBytes && name.hasSuffix(" (pairing)"), "\(name)")
        #expect(name.hasPrefix("éééé"), "cut at a character boundary: \(name)")

        #expect(PairingRendezvous.displayName(ofInstance: "desktop (pairing)") == "desktop")
        #expect(PairingRendezvous.displayName(ofInstance: "desktop (pairing) #2") == "desktop #2", "renamed by Avahi")
        #expect(PairingRendezvous.displayName(ofInstance: "a (pairing) b") == "a (pairing) b")
        #expect(PairingRendezvous.displayName(ofInstance: "evil\u{1B}[2J (pairing)") == "evil[2J", "no escapes")
        #expect(PairingRendezvous.displayName(ofInstance: " (pairing)") == "(no name)")
    }

    @Test func aCandidateIsAPlaitServiceInPairingModeWithAnAddress() throws {
        let found = try #require(
            PairingCandidate(service("desktop", device: "D", addresses: ["fe80::1%eth0", "10.77.0.2"])))
        #expect(found.name == "desktop" && found.instance == "desktop (pairing)")
        #expect(found.endpoint.description == "10.77.0.2:40001", "IPv4 preferred")
        #expect(found.description == "desktop (10.77.0.2)")
        #expect(found.isPublished(by: "D", date: Self.date) && !found.isPublished(by: "E", date: Self.date))
        #expect(found.isPublished(by: "D", date: Self.date.addingTimeInterval(86_400)), "a day of clock skew")
        #expect(PairingCandidate(service("agent", device: "D", pairing: false)) == nil, "an agent, not pairing")
        #expect(PairingCandidate(service("nowhere", device: "D", addresses: [])) == nil)
        var foreign = service("printer", device: "D")
        foreign.txt = ["pair": "1"]
        #expect(PairingCandidate(foreign) == nil, "not plait's TXT record")
    }

    // MARK: The machine

    @Test func withOneDeviceTheLowerTagConnectsOnceItSettled() throws {
        let (lower, higher) = devicesByTag()
        var machine = PairingRendezvous(ownTag: tag(lower))
        let found = machine.found(service("desktop", device: higher), now: after(0))
        let candidate = try #require(PairingCandidate(service("desktop", device: higher)))
        #expect(found == [.show(candidate)])
        #expect(machine.nextDeadline == after(1))
        #expect(machine.tick(now: after(0.5)) == [])
        #expect(machine.tick(now: after(1)) == [.connect(candidate)])
        #expect(machine.isDone)
        #expect(machine.connected(1, deviceID: higher, date: Self.date) == [
            .refuse(connection: 1, reason: "this device is already pairing")
        ])
    }

    @Test func withOneDeviceTheHigherTagWaitsAndLetsInOnlyThatDevice() throws {
        let (lower, higher) = devicesByTag()
        var machine = PairingRendezvous(ownTag: tag(higher))
        _ = machine.found(service("laptop", device: lower), now: after(0))
        let candidate = try #require(PairingCandidate(service("laptop", device: lower)))
        #expect(machine.tick(now: after(1)) == [.waitFor(candidate)])
        #expect(machine.nextDeadline == nil)
        #expect(machine.removed(instance: candidate.instance) == [], "it withdraws its service as it dials")
        #expect(machine.connected(1, deviceID: "INTRUDER", date: Self.date) == [
            .refuse(connection: 1, reason: "it is not laptop, the device chosen")
        ])
        #expect(machine.connected(2, deviceID: lower, date: Self.date) == [.accept(connection: 2, candidate)])
        #expect(machine.isDone)
    }

    @Test func theOnlyDeviceFoundIsLetInAtOnceEvenBeforeItWasFound() throws {
        let (lower, higher) = devicesByTag()
        // It dialled before this side settled.
        var machine = PairingRendezvous(ownTag: tag(higher))
        _ = machine.found(service("laptop", device: lower), now: after(0))
        let candidate = try #require(PairingCandidate(service("laptop", device: lower)))
        #expect(machine.connected(7, deviceID: lower, date: Self.date) == [.accept(connection: 7, candidate)])

        // It dialled before this side had even resolved it: held until it shows up.
        var early = PairingRendezvous(ownTag: tag(higher))
        #expect(early.connected(3, deviceID: lower, date: Self.date) == [])
        #expect(early.found(service("laptop", device: lower), now: after(0)) == [
            .show(candidate), .accept(connection: 3, candidate),
        ])
    }

    @Test func withSeveralDevicesTheUserChoosesByNumber() throws {
        var machine = PairingRendezvous(ownTag: tag("ME"))
        _ = machine.found(service("zeta", device: "Z"), now: after(0))
        let shown = machine.found(service("alpha", device: "A"), now: after(0.4))
        let alpha = try #require(PairingCandidate(service("alpha", device: "A")))
        let zeta = try #require(PairingCandidate(service("zeta", device: "Z")))
        #expect(shown == [.show(alpha)])
        #expect(machine.connected(1, deviceID: "Z", date: Self.date) == [], "held: there is a choice to make")
        #expect(machine.nextDeadline == after(1), "the window starts with the first device found")
        #expect(machine.tick(now: after(1)) == [.ask([alpha, zeta], problem: nil)], "by name")
        // Found while the question is open: kept out of the numbered list the user is looking at.
        #expect(machine.found(service("mid", device: "M"), now: after(1.5)) == [])
        #expect(machine.answered("3") == [.ask([alpha, zeta], problem: "'3' is not one of the numbers 1 to 2")])
        #expect(machine.connected(2, deviceID: "A", date: Self.date) == [])
        let chosen = machine.answered("1")
        #expect(chosen.contains(.accept(connection: 2, alpha)), "alpha had dialled already: \(chosen)")
        #expect(chosen.contains(.refuse(connection: 1, reason: "this device pairs with alpha")))
        #expect(machine.isDone)
    }

    @Test func choosingADeviceThatHasNotDialledConnectsOrWaitsByTag() throws {
        for (own, other) in [devicesByTag(), (devicesByTag().higher, devicesByTag().lower)] {
            var machine = PairingRendezvous(ownTag: tag(own))
            _ = machine.found(service("other", device: other), now: after(0))
            _ = machine.found(service("third", device: "THIRD"), now: after(0))
            _ = machine.tick(now: after(1))
            let candidate = try #require(PairingCandidate(service("other", device: other)))
            let expected: PairingRendezvous.Action =
                tag(own) < tag(other) ? .connect(candidate) : .waitFor(candidate)
            #expect(machine.answered("1") == [expected])
        }
    }

    // MARK: Picked by the user (the page)

    @Test func pickedByTheUserEvenTheOnlyDeviceWaitsForThePick() throws {
        let (lower, higher) = devicesByTag()
        var machine = PairingRendezvous(ownTag: tag(lower), choosing: .byUser)
        let desktop = try #require(PairingCandidate(service("desktop", device: higher)))
        #expect(machine.begin() == [.ask([], problem: nil)], "the question is open from the start")
        #expect(machine.found(service("desktop", device: higher), now: after(0)) == [.offer([desktop])])
        #expect(machine.nextDeadline == nil, "no settling: nothing goes ahead on its own")
        #expect(machine.tick(now: after(60)) == [])
        #expect(machine.answered(desktop.instance) == [.connect(desktop)])
        #expect(machine.isDone)
    }

    @Test func pickedByTheUserTheListFollowsDevicesComingAndGoing() throws {
        var machine = PairingRendezvous(ownTag: tag("ME"), choosing: .byUser)
        _ = machine.begin()
        let alpha = try #require(PairingCandidate(service("alpha", device: "A")))
        let zeta = try #require(PairingCandidate(service("zeta", device: "Z")))
        _ = machine.found(service("zeta", device: "Z"), now: after(0))
        #expect(machine.found(service("alpha", device: "A"), now: after(5)) == [.offer([alpha, zeta])])
        #expect(machine.removed(instance: zeta.instance) == [.offer([alpha])])
        #expect(machine.removed(instance: "unknown (pairing)") == [])
        #expect(machine.answered(zeta.instance) == [
            .ask([alpha], problem: "'zeta (pairing)' is no longer in pairing mode")
        ])
        #expect(machine.answered("1") == [.ask([alpha], problem: "'1' is no longer in pairing mode")], "not a number")
        #expect(!machine.isDone)
    }

    @Test func pickedByTheUserADeviceThatDialledIsHeldUntilPicked() throws {
        let (lower, higher) = devicesByTag()
        var machine = PairingRendezvous(ownTag: tag(higher), choosing: .byUser)
        _ = machine.begin()
        let laptop = try #require(PairingCandidate(service("laptop", device: lower)))
        _ = machine.found(service("laptop", device: lower), now: after(0))
        #expect(machine.connected(1, deviceID: lower, date: Self.date) == [], "held: the user has not picked")
        #expect(machine.connected(2, deviceID: "OTHER", date: Self.date) == [])
        #expect(machine.answered(laptop.instance) == [
            .refuse(connection: 2, reason: "this device pairs with laptop"), .accept(connection: 1, laptop),
        ])
        // No pick at all (the attempt ended): whoever waits is refused.
        var unpicked = PairingRendezvous(ownTag: tag(higher), choosing: .byUser)
        _ = unpicked.begin()
        _ = unpicked.found(service("laptop", device: lower), now: after(0))
        _ = unpicked.connected(3, deviceID: lower, date: Self.date)
        #expect(unpicked.answered(nil) == [
            .refuse(connection: 3, reason: "no device was chosen"), .abort(.noDeviceChosen),
        ])
        // Stopped before anything was found.
        var stopped = PairingRendezvous(ownTag: tag(higher), choosing: .byUser)
        _ = stopped.begin()
        #expect(stopped.answered(nil) == [.abort(.noDeviceChosen)])
        #expect(stopped.isDone)
        // `plait pair` asks nothing before devices are found.
        var automatic = PairingRendezvous(ownTag: tag(higher))
        #expect(automatic.begin() == [])
    }

    @Test func theEndOfInputChoosesNobody() {
        var machine = PairingRendezvous(ownTag: tag("ME"))
        _ = machine.found(service("a", device: "A"), now: after(0))
        _ = machine.found(service("b", device: "B"), now: after(0))
        _ = machine.tick(now: after(1))
        _ = machine.connected(4, deviceID: "B", date: Self.date)
        #expect(machine.answered(nil) == [
            .refuse(connection: 4, reason: "no device was chosen"), .abort(.noDeviceChosen),
        ])
    }

    @Test func onlyOtherDevicesInPairingModeCount() {
        var machine = PairingRendezvous(ownTag: tag("ME"))
        #expect(machine.found(service("me", device: "ME"), now: after(0)) == [], "this very device")
        #expect(machine.found(service("agent", device: "A", pairing: false), now: after(0)) == [], "an agent")
        #expect(machine.candidates.isEmpty && machine.nextDeadline == nil)
        _ = machine.found(service("desktop", device: "D"), now: after(0))
        // It leaves pairing mode (TXT update) before the window closes: nothing to do.
        #expect(machine.found(service("desktop", device: "D", pairing: false), now: after(0.5)) == [])
        #expect(machine.candidates.isEmpty && machine.tick(now: after(2)) == [])
        // A fresh window starts with the next device found.
        _ = machine.found(service("laptop", device: "L"), now: after(3))
        #expect(machine.nextDeadline == after(4))
        _ = machine.found(service("laptop", device: "L", addresses: ["10.77.0.9"]), now: after(3.5))
        #expect(machine.candidates.map(\.endpoint.host) == ["10.77.0.9"], "an update moves it, not a second one")
        #expect(machine.nextDeadline == after(4))
    }

    @Test func aDeviceIsShownWithItsIPv4AddressOnceKnown() throws {
        var machine = PairingRendezvous(ownTag: tag("ME"))
        #expect(machine.found(service("desktop", device: "D", addresses: ["fd77::2"]), now: after(0)) == [])
        let both = service("desktop", device: "D", addresses: ["10.77.0.2", "fd77::2"])
        #expect(machine.found(both, now: after(0.01)) == [.show(try #require(PairingCandidate(both)))])
        #expect(machine.found(both, now: after(0.02)) == [], "shown once")

        // IPv6 only until it is time to go ahead: shown as it is, just before.
        var sixOnly = PairingRendezvous(ownTag: tag("ME"))
        let six = service("laptop", device: "L", addresses: ["fe80::1%eth0"])
        _ = sixOnly.found(six, now: after(0))
        let candidate = try #require(PairingCandidate(six))
        let role = PairingRendezvous.role(ownTag: tag("ME"), peerTag: tag("L"))
        let next: PairingRendezvous.Action = role == .initiator ? .connect(candidate) : .waitFor(candidate)
        #expect(sixOnly.tick(now: after(1)) == [.show(candidate), next])
    }

    /// Two machines wired to each other as two hosts would be: each finds the other, exactly one dials, the
    /// other lets that connection in.
    @Test func twoDevicesAgreeOnWhoDials() throws {
        let (lower, higher) = devicesByTag()
        var low = PairingRendezvous(ownTag: tag(lower))
        var high = PairingRendezvous(ownTag: tag(higher))
        _ = high.found(service("low", device: lower), now: after(0))
        _ = low.found(service("high", device: higher), now: after(0.2))
        #expect(high.tick(now: after(1)) == [.waitFor(try #require(PairingCandidate(service("low", device: lower))))])
        let dial = low.tick(now: after(1.2))
        #expect(dial == [.connect(try #require(PairingCandidate(service("high", device: higher))))])
        let accepted = high.connected(1, deviceID: lower, date: Self.date)
        #expect(accepted == [.accept(connection: 1, try #require(PairingCandidate(service("low", device: lower))))])
    }
}
