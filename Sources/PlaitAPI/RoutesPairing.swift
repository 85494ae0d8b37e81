import Foundation
import Hummingbird
import PlaitOutput
import PlaitSync

/// Pairing from the page (DESIGN §12): one attempt at a time, run on a thread of its own (pairing blocks), its
/// code shown on screen and the user's answer given by a later request. The attempt is `plait pair` by address
/// (`--connect`) or by mDNS (no address), with the same checks: both users must say yes.
final class APIPairing: @unchecked Sendable {
    private let lock = NSLock()
    private var session: PairingSessionOutput?
    /// Devices in pairing mode found by the current attempt (mDNS only).
    private var found: [PairingDeviceOutput] = []
    /// The user's answer, once the code is on screen; `waiting` wakes the pairing's asking thread.
    private var answer: Bool?
    private var waiting: DispatchSemaphore?
    /// Which attempt `session` is. An answered attempt's thread still finishes while the user may start the
    /// next one: its late callbacks must not write over the new attempt's state.
    private var attempt = 0
    /// Where the code is announced (`pairing.code`), so a page that is open shows it without polling.
    private var events: EventHub?
    /// How long one attempt may take, waiting for the user included.
    static let timeout: Duration = .seconds(120)

    var snapshot: PairingOutput { lock.withLock { PairingOutput(devices: found, session: session) } }

    /// Starts an attempt: with `address`, connect to a device in `plait pair --listen` there; without, pair by
    /// mDNS (with `device`, only with the one of that name when several are in pairing mode).
    func start(home: Home, address: PeerAddress?, device: String?, events: EventHub? = nil) throws {
        let attempt: Int = try lock.withLock {
            if let session, ["searching", "connecting", "comparing", "confirmed"].contains(session.state) {
                throw APIError.conflict(
                    "a pairing is already running (\(session.state)); confirm or refuse it, or wait for it to end.")
            }
            session = PairingSessionOutput(
                code: nil, device: nil, error: nil, name: nil, state: address == nil ? "searching" : "connecting")
            found = []
            answer = nil
            waiting = DispatchSemaphore(value: 0)
            self.events = events
            self.attempt += 1
            return self.attempt
        }
        let thread = Thread { [self] in
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
                        try home.pairByDiscovery(timeout: Self.timeout, user: user(choosing: device, attempt)))
                }
            } catch {
                result = .failure(error)
            }
            finish(result, attempt)
        }
        thread.name = "api-pairing"
        thread.start()
    }

    /// The user's answer to the code on screen.
    func respond(_ yes: Bool) throws {
        let semaphore: DispatchSemaphore? = try lock.withLock {
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
        let (semaphore, events): (DispatchSemaphore?, EventHub?) = lock.withLock {
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
        let semaphore: DispatchSemaphore? = lock.withLock {
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
        // An attempt that ended while its code was on screen releases the asking thread.
        semaphore?.signal()
    }

    private func update(_ attempt: Int, _ change: (inout PairingSessionOutput) -> Void) {
        lock.withLock {
            if attempt == self.attempt, var current = session {
                change(&current)
                session = current
            }
        }
    }

    /// The mDNS attempt's callbacks: found devices are listed; with several, `device` names the one.
    private func user(choosing device: String?, _ attempt: Int) -> DiscoveryPairingUser {
        DiscoveryPairingUser(
            started: { _, _ in },
            found: { candidate in
                self.lock.withLock {
                    guard attempt == self.attempt else { return }
                    self.found.append(
                        PairingDeviceOutput(address: candidate.endpoint.description, name: candidate.name))
                }
            },
            choose: { candidates, _ in
                guard let device, let index = candidates.firstIndex(where: { $0.name == device }) else { return nil }
                return String(index + 1)
            },
            connecting: { _ in self.update(attempt) { $0.state = "connecting" } },
            waiting: { _ in self.update(attempt) { $0.state = "connecting" } },
            connected: { id, _ in self.update(attempt) { $0.device = id.description } },
            refused: { _ in },
            confirm: { self.ask($0, attempt) })
    }
}

extension APIRoutes {
    /// GET /api/pairing, POST /api/pairing/start, /api/pairing/confirm, /api/pairing/refuse.
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
