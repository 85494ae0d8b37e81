import Dispatch
import Foundation
import Logging
import PlaitAPI
import PlaitCore
import PlaitSync

/// API edit → applied on a peer (issue 11, the agent as a local service): an edit posted to agent A's local API
/// (`POST /api/edit` on TCP with the home's token, as a script sends it; the page's requests take the same route)
/// until agent B, paired and connected on loopback, has stored it. This is what a user of the page waits for before
/// another device shows the edit. NetworkBench's agent-to-agent latency is the same path without the HTTP hop, so
/// the difference between the two (same run, same load) is what going through the API costs.
enum APIEditBench {
    static func latency(directory: String, options: NetworkBench.Options, log: (String) -> Void) throws
        -> [String: Any]
    {
        let quiet = Logger(label: "plait.bench", factory: { _ in SwiftLogNoOpLogHandler() })
        let agents = try NetworkBench.PairedAgents(directory: directory + "/api-edit", config: Config())
        defer { agents.stop() }
        let (a, b) = (agents.a, agents.b)
        // What `plait agent` starts beside the agent; port 0 so that a user's own agent on 7480 is not in the way.
        guard let api = APIService.start(home: a, agent: agents.agentA, listen: "127.0.0.1:0", logger: quiet),
            let port = api.tcp?.port
        else { throw PlaitError.usage("the local API of the benchmark's agent did not start") }
        defer { api.stop() }
        guard let token = try APIAuth.readToken(homePath: a.path) else {
            throw PlaitError.usage("the benchmark's agent has no API token in \(a.path)")
        }
        let client = LoopbackClient(port: port)
        let bearer = ("Authorization", "Bearer \(token)")
        func post(_ fields: [String: Any]) throws {
            let reply = try client.send("POST", "/api/edit", headers: [bearer], json: fields)
            guard reply.status == 200 else {
                throw PlaitError.usage("POST /api/edit answered \(reply.status): \(reply.text)")
            }
        }

        try post(["op": "list.add", "title": "api latency"])
        let timeline = try a.store.ownTimeline()
        guard NetworkBench.waitUntil(seconds: 30, { (try? b.store.summary()[timeline]) ?? 0 >= 1 }) else {
            throw PlaitError.usage("the two agents did not connect within 30 s")
        }
        // Each edit is a request of its own on a connection of its own (LoopbackClient closes it), as a script's.
        let edits = min(options.edits, 300)
        var p50 = Sample()
        var p99 = Sample()
        for run in 0..<options.runs {
            var latencies: [Double] = []
            for index in 0..<edits {
                let start = DispatchTime.now().uptimeNanoseconds
                try post(["op": "add", "list": "api latency", "text": "api edit \(run).\(index)"])
                // The answer comes once A committed the edit: its head is now the edit's seq.
                let seq = try a.store.summary()[timeline]
                guard NetworkBench.waitUntil(seconds: 10, { (try? b.store.summary()[timeline]) ?? 0 >= seq }) else {
                    throw PlaitError.usage("API edit \(index) did not reach the other agent within 10 s")
                }
                latencies.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
            }
            let round = percentiles(latencies)
            p50.add(round.p50)
            p99.add(round.p99)
        }
        log("edit by POST /api/edit on A's API → applied on B (agents on loopback, synchronous = full, "
            + "\(options.runs) rounds of \(edits) edits): p50 \(p50.text("%.1f")) ms, p99 \(p99.text("%.1f")) ms")
        return ["api_edit_latency_p50_ms": p50.json, "api_edit_latency_p99_ms": p99.json]
    }
}
