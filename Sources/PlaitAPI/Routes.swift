import Foundation
import Hummingbird
import PlaitCommands
import PlaitCore
import PlaitOutput
import PlaitSync
import PlaitTLS

extension APIRoutes {
    /// A JSON answer, written by the same encoder as `--json` (sorted keys, the same escapes).
    public static func json<T: Encodable>(_ value: T, status: HTTPResponse.Status = .ok) throws -> Response {
        let writer = JSONWriter()
        try JSONStreamEncoder.encode(value, into: writer)
        return jsonBytes(writer.bytes, status: status)
    }

    /// A JSON answer of bytes a `JSONWriter` wrote. The writer ends the top-level value with its newline, as
    /// `--json` prints it: no second one.
    static func jsonBytes(_ bytes: [UInt8], status: HTTPResponse.Status = .ok) -> Response {
        var body = ByteBuffer()
        body.writeBytes(bytes)
        return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: body))
    }

    /// `{"error": "…"}` with the error's status.
    public static func errorResponse(_ error: APIError) -> Response {
        struct Failure: Encodable { let error: String }
        return (try? json(Failure(error: error.description), status: error.status))
            ?? Response(status: error.status)
    }

    /// The request's JSON body as `T`, within `limit` bytes.
    public static func decodeBody<T: Decodable>(
        _ type: T.Type, from request: Request, limit: Int = APILimits.maxBody
    ) async throws -> T {
        var request = request
        let buffer: ByteBuffer
        do {
            buffer = try await request.collectBody(upTo: limit)
        } catch let error as HTTPError where error.status == .contentTooLarge {
            throw APIError.tooLarge(limit: limit)
        } catch let error as HTTPError {
            throw error
        } catch {
            // The client hung up in the middle of its body, or the agent is stopping: nobody reads the answer.
            throw APIError.requestEnded("\(error)")
        }
        return try JSONDecoder().decode(T.self, from: Data(buffer.readableBytesView))
    }

    /// Runs blocking work (SQLite, a doctor's network checks) on a dispatch thread: the handlers run on Swift's
    /// cooperative pool, one thread per core, which a slow read would stall for every other request.
    public static func blocking<T: Sendable>(_ body: @Sendable @escaping () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(with: Result { try body() }) }
        }
    }

    /// The state as this process sees it, reloaded first if another process (a CLI edit) wrote since.
    static func freshState(_ api: APIContext) throws -> ListsState {
        try api.home.replica.refresh()
        return api.home.replica.state
    }

    /// GET /api/status, /api/lists, /api/show, /api/log.
    static func addReadRoutes(to router: Router<APIRequestContext>, context api: APIContext) {
        router.get("/api/status") { _, _ -> Response in
            try await blocking {
                try api.home.replica.refresh()
                return try json(try ReadOutputs.status(api.home))
            }
        }
        router.get("/api/lists") { _, _ -> Response in
            try await blocking { try json(ReadOutputs.lists(try freshState(api))) }
        }
        router.get("/api/show") { request, _ -> Response in
            let list = request.uri.queryParameters["list"].map(String.init)
            // Streamed from the state as the CLI streams it (the value built and encoded took 3/4 of the time).
            return try await blocking {
                let writer = JSONWriter()
                try ReadOutputs.streamShow(try freshState(api), list: list, into: writer)
                return jsonBytes(writer.bytes)
            }
        }
        router.get("/api/log") { request, _ -> Response in
            let text = request.uri.queryParameters["limit"]
            let limit = text.flatMap { Int($0) }
            if let text, limit == nil || limit! < 0 {
                throw APIError.badRequest("limit must be 0 or more, not '\(String(text).terminalExcerpt(limit: 20))'.")
            }
            return try await blocking {
                try api.home.replica.refresh()
                return try json(try ReadOutputs.log(api.home, limit: limit))
            }
        }
        router.get("/api/peers") { _, _ -> Response in
            try await blocking { try json(try ReadOutputs.peers(api.home)) }
        }
        router.get("/api/peers/pending") { _, _ -> Response in
            try await blocking { try json(try ReadOutputs.pendingPeers(api.home)) }
        }
        router.get("/api/holders") { request, _ -> Response in
            guard let change = request.uri.queryParameters["change"].map(String.init) else {
                throw APIError.badRequest("say which change: ?change=TIMELINE:SEQ, as `plait log` shows it.")
            }
            return try await blocking { try json(try ReadOutputs.holders(api.home, change: change)) }
        }
        router.get("/api/doctor") { _, _ -> Response in
            try await blocking {
                // The agent's own listener is checked where it is bound (it answers as this home's agent).
                var listen = try PeerAddress(parsing: api.home.config.listen, allowingPortZero: true)
                if let agent = api.agent {
                    listen = agent.settings.listen ?? listen
                    if let port = agent.boundPort { listen.port = port }
                }
                let checks = Doctor.run(
                    homePath: api.home.path, config: api.home.config, listen: listen, peerTimeout: .seconds(3))
                return try json(ReadOutputs.doctor(checks, home: api.home.path))
            }
        }
    }

    /// POST /api/edit: one data command, validated and resolved exactly as the CLI does (`DataOperation`).
    /// The request's Device ID, checked before the store is touched: a malformed one is the client's error (400),
    /// which the store's refusal (503, "retry") was not.
    static func requestedDeviceID(_ request: Request) async throws -> String {
        struct DeviceRequest: Decodable { let device: String }
        let device = try await decodeBody(DeviceRequest.self, from: request).device
        do {
            _ = try DeviceID(parsing: device)
        } catch {
            throw APIError.badRequest("\(error)")
        }
        return device
    }

    static func addEditRoutes(to router: Router<APIRequestContext>, context api: APIContext) {
        router.post("/api/edit") { request, _ -> Response in
            let operation = try await decodeBody(DataOperation.self, from: request)
            try operation.validate()
            return try await blocking {
                let result = try api.home.replica.edit { edit in try operation.perform(edit) }
                return withCommandMessage(try json(result.output), result.message)
            }
        }
        // Trust as `plait pair --trust ID` (headless pairing: the ID was compared out of band), unpair as
        // `plait unpair ID`.
        router.post("/api/trust") { request, _ -> Response in
            let device = try await requestedDeviceID(request)
            return try await blocking {
                let paired = try api.home.trust(device, address: nil, name: nil)
                return try json(
                    PairOutput(
                        address: paired.address?.description, alreadyPaired: paired.alreadyPaired,
                        device: paired.deviceID.description, name: paired.name))
            }
        }
        router.post("/api/unpair") { request, _ -> Response in
            let device = try await requestedDeviceID(request)
            return try await blocking { try json(UnpairOutput(device: try api.home.untrust(device).description)) }
        }
    }
}
