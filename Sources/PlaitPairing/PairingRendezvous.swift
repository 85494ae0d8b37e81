import Foundation
import PlaitDiscovery
import PlaitTLS

/// A device found on the LAN in pairing mode: `plait pair` runs there and publishes `pair=1`.
public struct PairingCandidate: Sendable, Hashable {
    /// The DNS-SD instance name it publishes (`desktop (pairing)`).
    public var instance: String
    /// The name to show: the instance name without the pairing suffix, safe to print. What the device claims,
    /// unverified.
    public var name: String
    /// Its daily tag: only the device whose certificate hashes to it can be the one that published it.
    public var tag: String
    /// Its pairing listener: the preferred resolved address (IPv4 first) and the published port.
    public var endpoint: PeerAddress

    public init(instance: String, name: String, tag: String, endpoint: PeerAddress) {
        self.instance = instance
        self.name = name
        self.tag = tag
        self.endpoint = endpoint
    }

    /// Reads a resolved service: nil unless it carries plait's TXT record with `pair=1` and an address.
    public init?(_ service: DiscoveredService) {
        guard let txt = TXTRecord(service.txt), txt.pairing, let text = service.preferredEndpoint,
            let endpoint = try? PeerAddress(parsing: text)
        else { return nil }
        self.init(
            instance: service.name, name: PairingRendezvous.displayName(ofInstance: service.name), tag: txt.tag,
            endpoint: endpoint)
    }

    /// Whether `deviceID` (from a TLS handshake) is the device that published this candidate: its tag is the
    /// one that ID has on the UTC day of `date`, the day before or the day after.
    public func isPublished(by deviceID: String, date: Date = Date()) -> Bool {
        DiscoveryTag.matchingDevice(tag: tag, trusted: [deviceID], date: date) != nil
    }

    /// `desktop (10.77.0.2)`.
    public var description: String { "\(name) (\(endpoint.host))" }
}

/// Who pairs with whom when devices run `plait pair` with no address: a value-type state machine fed with
/// what discovery finds, the pairing connections that arrive, the clock and the user's choice; it returns
/// what to do. The shell (`Home.pairByDiscovery`) only performs the actions.
///
/// - Whom: the devices in pairing mode other than this one (`pair=1`, a tag that is not this device's).
///   Devices found within `settleTime` of the first one are offered together; with exactly one it goes
///   ahead, with several the user picks one by number.
/// - Who dials: the device whose tag sorts lower connects to the other's pairing listener; the other keeps
///   listening (`role(ownTag:peerTag:)`). Both compare the same two published strings, so exactly one of
///   them dials: they never connect to each other at once.
/// - Who is let in: a pairing connection is run only if the connecting device's certificate hashes to the
///   tag of the device chosen (or of the only one found); others are held until the choice is made, then
///   refused. A device that dialled first even though its tag sorts higher is accepted as well: what counts
///   is that one connection carries the attempt.
///
/// - Or, chosen `byUser` (the page): every device found is offered as it comes and goes, and nothing goes ahead
///   until the user picks one by its instance name, even when it is the only one.
///
/// One attempt per run: after `connect` or `accept` the machine is done.
public struct PairingRendezvous: Sendable {
    /// How the device to pair with is chosen.
    public enum Choosing: Sendable, Equatable {
        /// `plait pair`: the only device found goes ahead once found devices settled; among several the user
        /// answers with a number.
        case automatic
        /// The page: the devices found are offered (`offer`) as they come and go, and the user answers `ask` with
        /// the instance name of the one picked. A device that connects first is held until then.
        case byUser
    }

    /// Which end of the pairing connection this device takes with a given peer.
    public enum Role: Sendable, Equatable {
        /// Connects to the peer's pairing listener (TLS client).
        case initiator
        /// Waits for the peer to connect (TLS server).
        case responder
    }

    /// What the shell does.
    public enum Action: Sendable, Equatable {
        /// Tell the user a device was found in pairing mode.
        case show(PairingCandidate)
        /// Ask the user which device to pair with (numbered from 1, in this order); `problem` says what was wrong
        /// with the previous answer. The answer comes back through `answered`.
        case ask([PairingCandidate], problem: String?)
        /// Stop listening and connect to this device's pairing listener.
        case connect(PairingCandidate)
        /// Tell the user this device now waits for that one to connect.
        case waitFor(PairingCandidate)
        /// Stop listening and run the attempt on the held connection `connection`, from this device.
        case accept(connection: Int, PairingCandidate)
        /// Close the held connection `connection`.
        case refuse(connection: Int, reason: String)
        /// Give up with this error.
        case abort(PairingError)
        /// The devices in pairing mode found so far changed (`byUser` only): these, by name.
        case offer([PairingCandidate])
    }

    private enum Phase: Sendable, Equatable {
        case looking
        case choosing([PairingCandidate])
        case waiting(PairingCandidate)
        case done
    }

    /// The suffix of the instance name `plait pair` publishes, so it never clashes with the agent of the same
    /// home, which publishes the bare device name.
    public static let instanceSuffix = " (pairing)"

    /// How long after the first device is found others are still gathered before going ahead. Devices the
    /// daemon already knows arrive within milliseconds of each other; one that was starting at the same
    /// moment takes about 0.8 s (mDNS probing).
    public static let defaultSettleTime: Duration = .seconds(1)

    /// This device's published tag.
    public let ownTag: String
    public let settleTime: Duration
    public let choosing: Choosing
    /// The devices in pairing mode found so far, by name (then instance).
    public private(set) var candidates: [PairingCandidate] = []
    private var phase = Phase.looking
    private var settleDeadline: ContinuousClock.Instant?
    /// The instances shown to the user so far.
    private var shown: Set<String> = []
    /// Connections that arrived before it was known whether they are wanted, with their device's ID.
    private var held: [(connection: Int, deviceID: String, date: Date)] = []

    public init(ownTag: String, settleTime: Duration = defaultSettleTime, choosing: Choosing = .automatic) {
        self.ownTag = ownTag
        self.settleTime = settleTime
        self.choosing = choosing
    }

    /// When `tick` has something to do, if ever.
    public var nextDeadline: ContinuousClock.Instant? { phase == .looking ? settleDeadline : nil }

    /// Whether the machine has issued its final action (`connect`, `accept` or `abort`).
    public var isDone: Bool { phase == .done }

    // MARK: Pure rules

    /// The lower tag dials.
    public static func role(ownTag: String, peerTag: String) -> Role {
        ownTag < peerTag ? .initiator : .responder
    }

    /// The index (from 0) chosen by `answer` among `count` devices numbered from 1, or nil if it names none.
    public static func choice(_ answer: String, among count: Int) -> Int? {
        var text = answer.trimmingCharacters(in: .whitespaces)
        if text.hasPrefix("#") { text.removeFirst() }
        guard let number = Int(text), (1...count).contains(number) else { return nil }
        return number - 1
    }

    /// The instance name for `deviceName` in pairing mode: the name and the suffix, the name cut (at a character
    /// boundary) so the whole fits one DNS label.
    public static func instanceName(deviceName: String) -> String {
        let budget = Announcement.maximumNameBytes - instanceSuffix.utf8.count
        var name = deviceName.isEmpty ? "plait" : deviceName
        while name.utf8.count > budget { name.removeLast() }
        return name + instanceSuffix
    }

    /// The device name in an instance name: without the pairing suffix (also when Avahi renamed it after a
    /// collision, `desktop (pairing) #2`), made safe to print.
    public static func displayName(ofInstance instance: String) -> String {
        var name = instance
        if let range = instance.range(of: instanceSuffix, options: .backwards) {
            let rest = instance[range.upperBound...]
            let renamed = rest.hasPrefix(" #") && rest.dropFirst(2).allSatisfy(\.isNumber) && rest.count > 2
            if rest.isEmpty || renamed { name = String(instance[..<range.lowerBound]) + rest }
        }
        let shown = Pairing.displayable(name)
        return shown.isEmpty ? "(no name)" : shown
    }

    // MARK: Inputs

    /// The search began. With `byUser` the question opens at once, before any device is found: the user may
    /// also stop the search (answer nil) while nothing was found.
    public mutating func begin() -> [Action] {
        guard choosing == .byUser, phase == .looking else { return [] }
        phase = .choosing(candidates)
        return [.ask(candidates, problem: nil)]
    }

    /// Discovery found or updated a service.
    public mutating func found(_ service: DiscoveredService, now: ContinuousClock.Instant) -> [Action] {
        guard let candidate = PairingCandidate(service), candidate.tag != ownTag else {
            // Not (or no longer) in pairing mode, or this very device (the same home running twice).
            return removed(instance: service.name)
        }
        if let index = candidates.firstIndex(where: { $0.instance == candidate.instance }) {
            candidates[index] = candidate
        } else {
            candidates.append(candidate)
            candidates.sort { ($0.name, $0.instance) < ($1.name, $1.instance) }
        }
        if choosing == .byUser { return offerChanged() }
        guard phase == .looking else { return [] }
        if settleDeadline == nil { settleDeadline = now + settleTime }
        return showFound(all: false) + settleHeld()
    }

    /// Discovery lost a service. While waiting for the chosen device nothing changes: it withdraws its
    /// service once this device runs the attempt it dialled (a dialler stays published until then).
    public mutating func removed(instance: String) -> [Action] {
        let before = candidates.count
        candidates.removeAll { $0.instance == instance }
        if phase == .looking && candidates.isEmpty { settleDeadline = nil }
        return choosing == .byUser && candidates.count != before ? offerChanged() : []
    }

    /// A pairing connection arrived and completed its handshake; `deviceID` is from its certificate.
    public mutating func connected(_ connection: Int, deviceID: String, date: Date = Date()) -> [Action] {
        switch phase {
        case .looking:
            held.append((connection, deviceID, date))
            return settleHeld()
        case .choosing:
            held.append((connection, deviceID, date))
            return []
        case .waiting(let chosen):
            if chosen.isPublished(by: deviceID, date: date) {
                phase = .done
                return [.accept(connection: connection, chosen)]
            }
            return [.refuse(connection: connection, reason: "it is not \(chosen.name), the device chosen")]
        case .done:
            return [.refuse(connection: connection, reason: "this device is already pairing")]
        }
    }

    /// Time passed: once the first device has been found for `settleTime`, go ahead or ask.
    public mutating func tick(now: ContinuousClock.Instant) -> [Action] {
        guard phase == .looking, let settleDeadline, now >= settleDeadline, !candidates.isEmpty else { return [] }
        let found = showFound(all: true)
        if candidates.count == 1 { return found + select(candidates[0]) }
        phase = .choosing(candidates)
        return found + [.ask(candidates, problem: nil)]
    }

    /// The user answered the question of `ask` (nil: end of input, or no pick): a number among the devices
    /// offered, or with `byUser` the instance name of one of them.
    public mutating func answered(_ answer: String?) -> [Action] {
        guard case .choosing(let offered) = phase else { return [] }
        guard let answer else {
            phase = .done
            return refuseHeld(except: nil, reason: "no device was chosen") + [.abort(.noDeviceChosen)]
        }
        if choosing == .byUser {
            guard let picked = offered.first(where: { $0.instance == answer }) else {
                return [.ask(offered, problem: "'\(answer)' is no longer in pairing mode")]
            }
            return select(picked)
        }
        guard let index = Self.choice(answer, among: offered.count) else {
            return [.ask(offered, problem: "'\(answer)' is not one of the numbers 1 to \(offered.count)")]
        }
        return select(offered[index])
    }

    // MARK: Deciding

    /// `byUser`: the devices found changed; the question stays open with the list kept current.
    private mutating func offerChanged() -> [Action] {
        guard case .choosing = phase else { return [] }
        phase = .choosing(candidates)
        return [.offer(candidates)]
    }

    /// While looking: the only device found has already connected here, so the attempt can start at once.
    private mutating func settleHeld() -> [Action] {
        guard candidates.count == 1,
            held.contains(where: { candidates[0].isPublished(by: $0.deviceID, date: $0.date) })
        else { return [] }
        return showFound(all: true) + select(candidates[0])
    }

    /// `show` for the devices not shown yet: those with an IPv4 address (Avahi resolves each family on its own,
    /// and `10.77.0.2` tells a user more than `fe80::…%eth0`), or `all` of them when it is time to go ahead.
    private mutating func showFound(all: Bool) -> [Action] {
        let due = candidates.filter { !shown.contains($0.instance) && (all || !$0.endpoint.host.contains(":")) }
        shown.formUnion(due.map(\.instance))
        return due.map { .show($0) }
    }

    private mutating func select(_ chosen: PairingCandidate) -> [Action] {
        if let arrived = held.first(where: { chosen.isPublished(by: $0.deviceID, date: $0.date) }) {
            phase = .done
            let others = refuseHeld(except: arrived.connection, reason: "this device pairs with \(chosen.name)")
            return others + [.accept(connection: arrived.connection, chosen)]
        }
        switch Self.role(ownTag: ownTag, peerTag: chosen.tag) {
        case .initiator:
            phase = .done
            return refuseHeld(except: nil, reason: "this device pairs with \(chosen.name)") + [.connect(chosen)]
        case .responder:
            phase = .waiting(chosen)
            return refuseHeld(except: nil, reason: "it is not \(chosen.name), the device chosen") + [.waitFor(chosen)]
        }
    }

    private mutating func refuseHeld(except kept: Int?, reason: String) -> [Action] {
        let refused = held.filter { $0.connection != kept }.map {
            Action.refuse(connection: $0.connection, reason: reason)
        }
        held = []
        return refused
    }
}
