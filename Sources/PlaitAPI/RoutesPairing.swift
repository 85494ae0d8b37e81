import Foundation
import Hummingbird
import PlaitOutput
import PlaitPairing
import PlaitSync
import PlaitTLS

/// Pairing from the page (DESIGN §12): one attempt at a time, run on a thread of its own (pairing blocks), its
/// code shown on screen and the user's answer given by a later request. The attempt is `plait pair` by address
/// (`--connect`) or by mDNS (no address), with the same checks: both users must say yes. By mDNS the devices
/// found are listed as they come and go, and nothing goes ahead until the user picks one (a later request), even
/// when only one is found: the page's user says whom to pair with, never the LAN.
final class APIPairing: @unchecked Sendable {
    private let lock = NSLock()
    private var session: PairingSessionOutput?
    /// Devices in pairing mode found by the current attempt (mDNS only), as the search sees them now.
    private var found: [PairingDeviceOutput] = []
    /// The instance the user picked, until the pairing's choosing thread takes it; `pickSignal` wakes that thread.
    private var picked: String?
    private var pickSignal: DispatchSemaphore?
    /// The name given at start (`device`): picked as soon as a device of that name is found.
    private var wanted: String?
    /// The user's answer, once the code is on screen; `waiting` wakes the pairing's asking thread.
    private var answer: Bool?
    private var waiting: DispatchSemaphore?
    /// Which attempt `session` is. An answered attempt's thread still finishes while the user may start the
    /// next one: its late callbacks must not write over the new attempt's state.
    private var attempt = 0
    /// Where the attempt's moves are announced (`pairing.state`, `pairing.found`, `pairing.lost`, `pairing.code`),
    /// so a page that is open follows them without polling.
    private var events: EventHub?
    /// How long one attempt may take, waiting for the user included.
    static let timeout: Duration = .seconds(120)
    /// Entered while an attempt's thread runs. An attempt reads as ended (refused) as soon as the user says no, but
    /// its thread still withdraws its mDNS service and closes its listener: a new attempt waits for that, or two
    /// would be published at once under one name and a device nearby could dial the one that is closing.
    private let threads = DispatchGroup()
    /// How long a start waits for the previous attempt's thread to end (it takes milliseconds once answered).
    static let endingTimeout: DispatchTimeInterval = .seconds(5)

    var snapshot: PairingOutput { lock.withLock { PairingOutput(devices: found, session: session) } }

    init(events: EventHub? = nil) { self.events = events }

    /// Runs `body` with the lock held, then announces what it changed: each device found (or found at a new
    /// address) or gone, and the attempt's new state. Published before the lock is released, so the events
    /// follow the order of the changes.
    private func changing<T>(_ body: () throws -> T) rethrows -> T {
        try lock.withLock {
            let before = (found, session)
            let result = try body()
            announce(since: before.0, before.1)
            return result
        }
    }

    /// Under the lock: the events for what changed since `oldFound` and `oldSession`.
    private func announce(since oldFound: [PairingDeviceOutput], _ oldSession: PairingSessionOutput?) {
        guard let events else { return }
        let old = Dictionary(oldFound.map { ($0.instance, $0) }, uniquingKeysWith: { first, _ in first })
        for device in found where old[device.instance] != device {
            events.publish(
                .pairingFound,
                [
                    "instance": .string(device.instance), "name": .string(device.name),
                    "address": .string(device.address),
                ])
        }
        let now = Set(found.map(\.instance))
        for device in oldFound where !now.contains(device.instance) {
            events.publish(.pairingLost, ["instance": .string(device.instance), "name": .string(device.name)])
        }
        if let session, session.state != oldSession?.state || session.error != oldSession?.error {
            events.publish(
                .pairingState,
                [
                    "state": .string(session.state), "device": EventValue(session.device),
                    "name": EventValue(session.name), "error": EventValue(session.error),
                ])
        }
    }

    /// Starts an attempt: with `address`, connect to a device in `plait pair --listen` there; without, search by
    /// mDNS and pair with the device the user picks (with `device`, the first found that publishes that name).
    func start(home: Home, address: PeerAddress?, device: String?, events: EventHub? = nil) throws {
        try lock.withLock { try refuseWhileRunning() }
        if threads.wait(timeout: .now() + Self.endingTimeout) == .timedOut {
            throw APIError.conflict("the last pairing is still ending; try again in a moment.")
        }
        let attempt: Int = try changing {
            try refuseWhileRunning()
            session = PairingSessionOutput(
                code: nil, device: nil, error: nil, name: nil, state: address == nil ? "searching" : "connecting")
            found = []
            answer = nil
            picked = nil
            wanted = address == nil ? device : nil
            waiting = DispatchSemaphore(value: 0)
            pickSignal = DispatchSemaphore(value: 0)
            if let events { self.events = events }
            self.attempt += 1
            return self.attempt
        }
        threads.enter()
        let thread = Thread { [self] in
            defer { threads.leave() }
            let result: Result<PairedDevice, PairingError>
            do throws(PairingError) {
                if let address {
                    result = .success(
                        try home.pair(
                            connectingTo: address, timeout: Self.timeout,
                            onConnected: { id in self.update(attempt) { $0.device = id.description } },
                            confirm: { self.ask($0, attempt) }))
                } else {
                    result = .success(
                        try home.pairByDiscovery(timeout: Self.timeout, choosing: .byUser, user: user(attempt)))
                }
            } catch {
                result = .failure(error)
            }
            finish(result, attempt)
        }
        thread.name = "api-pairing"
        thread.start()
    }

    /// Throws while an attempt runs (call with the lock held).
    private func refuseWhileRunning() throws {
        if let session, ["searching", "connecting", "comparing", "confirmed"].contains(session.state) {
            throw APIError.conflict(
                "a pairing is already running (\(session.state)); confirm or refuse it, or wait for it to end.")
        }
    }

    /// The user's pick among the devices found: pair with the one published as `instance`.
    func pick(instance: String) throws {
        let signal: DispatchSemaphore? = try changing {
            guard let session, session.state == "searching" else {
                throw APIError.conflict(
                    "no search for devices in pairing mode waits for a pick (the pairing is "
                        + "\(session?.state ?? "not started")).")
            }
            guard let device = found.first(where: { $0.instance == instance }) else {
                throw APIError.conflict(
                    "no device in pairing mode is published as '\(instance)' (any more); pick one of those listed.")
            }
            picked = instance
            self.session?.state = "connecting"
            self.session?.name = device.name
            self.session?.error = nil
            return pickSignal
        }
        signal?.signal()
    }

    /// The user's answer to the code on screen; a no while searching ends the search, nobody picked.
    func respond(_ yes: Bool) throws {
        let semaphore: DispatchSemaphore? = try changing {
            if !yes, session?.state == "searching" {
                answer = false
                session?.state = "refused"
                return pickSignal
            }
            guard let session, session.state == "comparing" else {
                throw APIError.conflict(
                    "no pairing code waits for an answer (the pairing is \(session?.state ?? "not started")).")
            }
            answer = yes
            self.session?.state = yes ? "confirmed" : "refused"
            return waiting
        }
        semaphore?.signal()
    }

    /// Runs on the pairing's asking thread: shows the code, waits for the user (or the attempt's end). An attempt
    /// that is no longer the current one gets no.
    private func ask(_ prompt: PairingPrompt, _ attempt: Int) -> Bool {
        let (semaphore, events): (DispatchSemaphore?, EventHub?) = changing {
            guard attempt == self.attempt else { return (nil, nil) }
            session?.code = prompt.code.description
            session?.device = prompt.peer.description
            session?.name = prompt.peerName
            session?.state = "comparing"
            return (waiting, self.events)
        }
        events?.publish(
            .pairingCode,
            [
                "device": .string(prompt.peer.description), "code": .string(prompt.code.description),
                "name": .string(prompt.peerName),
            ])
        guard let semaphore else { return false }
        _ = semaphore.wait(timeout: .now() + .seconds(Int(Self.timeout.components.seconds)))
        return lock.withLock { attempt == self.attempt ? answer ?? false : false }
    }

    private func finish(_ result: Result<PairedDevice, PairingError>, _ attempt: Int) {
        let semaphore: DispatchSemaphore? = changing {
            guard attempt == self.attempt else { return nil }
            switch result {
            case let .success(paired):
                session?.state = "paired"
                session?.device = paired.deviceID.description
                session?.name = paired.name
            case let .failure(error):
                session?.state = answer == false ? "refused" : "failed"
                session?.error = "\(error)"
            }
            return waiting
        }
        // An attempt that ended while its code was on screen (or while waiting for a pick) releases the thread.
        semaphore?.signal()
        lock.withLock { attempt == self.attempt ? pickSignal : nil }?.signal()
    }

    private func update(_ attempt: Int, _ change: (inout PairingSessionOutput) -> Void) {
        changing {
            if attempt == self.attempt, var current = session {
                change(&current)
                session = current
            }
        }
    }

    /// Runs on the mDNS attempt's choosing thread: waits for the user's pick (or the name given at start), and
    /// answers with its instance; nil when the attempt ended or is no longer the current one. `problem`: the pick
    /// before could not be used (that device left), so the search goes on.
    private func choose(_ problem: String?, _ attempt: Int) -> String? {
        let signal: DispatchSemaphore? = changing {
            guard attempt == self.attempt else { return nil }
            if let problem {
                session?.state = "searching"
                session?.error = problem
                session?.name = nil
            }
            return pickSignal
        }
        guard let signal else { return nil }
        while true {
            let (instance, ended): (String?, Bool) = lock.withLock {
                guard attempt == self.attempt, let session, session.state == "searching" || picked != nil else {
                    return (nil, true)
                }
                defer { picked = nil }
                return (picked, false)
            }
            if instance != nil || ended { return instance }
            if signal.wait(timeout: .now() + .seconds(Int(Self.timeout.components.seconds))) == .timedOut {
                return nil
            }
        }
    }

    /// The mDNS attempt's devices, kept current; the one named at start is picked when it shows up.
    func offered(_ candidates: [PairingCandidate], _ attempt: Int) {
        let signal: DispatchSemaphore? = changing {
            guard attempt == self.attempt else { return nil }
            found = candidates.map {
                PairingDeviceOutput(address: $0.endpoint.description, instance: $0.instance, name: $0.name)
            }
            guard let wanted, session?.state == "searching",
                let device = candidates.first(where: { $0.name == wanted })
            else { return nil }
            self.wanted = nil
            picked = device.instance
            session?.state = "connecting"
            session?.name = device.name
            return pickSignal
        }
        signal?.signal()
    }

    /// The mDNS attempt's callbacks: the devices found are listed as they change; the user picks one.
    private func user(_ attempt: Int) -> DiscoveryPairingUser {
        DiscoveryPairingUser(
            started: { _, _ in },
            found: { _ in },
            choose: { _, problem in self.choose(problem, attempt) },
            connecting: { _ in self.update(attempt) { $0.state = "connecting" } },
            waiting: { _ in self.update(attempt) { $0.state = "connecting" } },
            connected: { id, _ in self.update(attempt) { $0.device = id.description } },
            refused: { _ in },
            confirm: { self.ask($0, attempt) },
            offered: { self.offered($0, attempt) })
    }
}

extension APIRoutes {
    /// GET /api/pairing, POST /api/pairing/start, /api/pairing/pick, /api/pairing/confirm, /api/pairing/refuse.
    static func addPairingRoutes(to router: Router<APIRequestContext>, context api: APIContext) {
        router.get("/api/pairing") { _, _ -> Response in try json(api.pairing.snapshot) }
        router.post("/api/pairing/start") { request, _ -> Response in
            struct Start: Decodable {
                let address: String?
                let device: String?
            }
            let start = try await decodeBody(Start.self, from: request)
            let address = try start.address.map { text in
                do { return try PeerAddress(parsing: text) } catch { throw APIError.badRequest("\(error)") }
            }
            try api.pairing.start(home: api.home, address: address, device: start.device, events: api.agent?.events)
            return try json(api.pairing.snapshot)
        }
        router.post("/api/pairing/pick") { request, _ -> Response in
            struct Pick: Decodable {
                let instance: String
            }
            try api.pairing.pick(instance: try await decodeBody(Pick.self, from: request).instance)
            return try json(api.pairing.snapshot)
        }
        router.post("/api/pairing/confirm") { _, _ -> Response in
            try api.pairing.respond(true)
            return try json(api.pairing.snapshot)
        }
        router.post("/api/pairing/refuse") { _, _ -> Response in
            try api.pairing.respond(false)
            return try json(api.pairing.snapshot)
        }
    }
}
