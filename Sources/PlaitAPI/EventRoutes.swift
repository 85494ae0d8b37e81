import Foundation
import Hummingbird
import PlaitSync

/// Where an events client stands: after event `seq` of the agent run `epoch` (nil: it does not say).
struct EventPosition: Equatable, Sendable {
    var seq: UInt64
    var epoch: String?

    /// "N" or "EPOCH:N" (an SSE event's `id:`, so `Last-Event-ID` carries the epoch back). nil when neither.
    init?(_ text: Substring) {
        let text = text.trimmingCharacters(in: .whitespaces)
        if let colon = text.lastIndex(of: ":") {
            let epoch = String(text[..<colon])
            guard !epoch.isEmpty, let seq = UInt64(text[text.index(after: colon)...]) else { return nil }
            self.init(seq: seq, epoch: epoch)
        } else {
            guard let seq = UInt64(text) else { return nil }
            self.init(seq: seq, epoch: nil)
        }
    }

    init(seq: UInt64, epoch: String?) {
        self.seq = seq
        self.epoch = epoch
    }

    /// An SSE event's `id:` value.
    static func id(of event: AgentEvent) -> String { "\(event.epoch):\(event.seq)" }
}

extension APIRoutes {
    /// The longest long-poll a client may ask for, and the one it gets when it does not say (API.md).
    static let longestPoll = 60
    static let defaultPoll = 25
    /// Quiet time after which an SSE stream sends a comment line.
    static let sseKeepAlive: Duration = .seconds(15)

    /// GET /api/events (long-poll) and GET /api/events/stream (SSE), from the agent's `EventHub`. Both sit behind
    /// the same guard as every other route.
    static func addEventRoutes(
        to router: Router<APIRequestContext>, context api: APIContext, keepAlive: Duration = sseKeepAlive
    ) {
        router.get("/api/events") { request, _ -> Response in
            let hub = try eventHub(api)
            let position = try queryPosition(request) ?? EventPosition(seq: 0, epoch: nil)
            var timeout = defaultPoll
            if let text = request.uri.queryParameters["timeout"] {
                guard let value = Int(text), (0...longestPoll).contains(value) else {
                    throw APIError.badRequest("timeout must be a number of seconds from 0 to \(longestPoll).")
                }
                timeout = value
            }
            let batch = await hub.wait(after: position.seq, epoch: position.epoch, timeout: .seconds(timeout))
            var body = ByteBuffer()
            body.writeString(batch.json)
            body.writeString("\n")
            return Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: body))
        }
        router.get("/api/events/stream") { request, _ -> Response in
            let hub = try eventHub(api)
            // A reconnecting EventSource says where it stood in Last-Event-ID; a first connection may use ?since=.
            var position = try queryPosition(request) ?? EventPosition(seq: 0, epoch: nil)
            if let header = request.headers[.init("Last-Event-ID")!] {
                guard let resumed = EventPosition(Substring(header)) else {
                    throw APIError.badRequest("Last-Event-ID must be an event id this API sent (EPOCH:SEQ).")
                }
                position = resumed
            }
            let updates = hub.subscribe(after: position.seq, epoch: position.epoch, keepAlive: keepAlive)
            var headers: HTTPFields = [.contentType: "text/event-stream", .cacheControl: "no-store"]
            headers[.init("X-Accel-Buffering")!] = "no"
            return Response(status: .ok, headers: headers, body: ResponseBody { writer in
                // A first line at once: the client sees the stream open before the first event.
                try await writer.write(ByteBuffer(string: "retry: 1000\n: events of \(hub.epoch)\n\n"))
                for await update in updates {
                    var buffer = ByteBuffer()
                    switch update {
                    case let .events(events):
                        for event in events {
                            buffer.writeString("id: \(EventPosition.id(of: event))\nevent: \(event.kind.rawValue)\n")
                            buffer.writeString("data: \(event.json)\n\n")
                        }
                    case .keepAlive:
                        buffer.writeString(": keep-alive\n\n")
                    }
                    // A client gone makes this throw: the stream ends and its wait is released.
                    try await writer.write(buffer)
                }
                try await writer.finish(nil)
            })
        }
    }

    /// The agent's events; a home served without an agent has none.
    private static func eventHub(_ api: APIContext) throws -> EventHub {
        guard let agent = api.agent else {
            throw APIError.unavailable("events come from the agent, which is not running here; start `plait agent`.")
        }
        return agent.events
    }

    /// `?since=N` or `?since=EPOCH:N`, and `&epoch=EPOCH`; nil when the query names no position.
    private static func queryPosition(_ request: Request) throws -> EventPosition? {
        let since = request.uri.queryParameters["since"]
        let epoch = request.uri.queryParameters["epoch"].map(String.init)
        guard let since else { return epoch.map { EventPosition(seq: 0, epoch: $0) } }
        guard var position = EventPosition(since) else {
            throw APIError.badRequest("since must be an event's seq (a number) or an SSE id (EPOCH:SEQ).")
        }
        if let epoch { position.epoch = epoch }
        return position
    }
}
