import Dispatch
import Foundation
import Logging
import PlaitCore
import PlaitSync

/// Edit → event latency (DESIGN §12 "Endpoints and events"): an agent runs on a home; edits are made through a
/// store of their own on the same file, as another process's `plait add` would be (the agent learns of them by
/// inotify and one `PRAGMA data_version`, then reads the summary's difference), and each edit's
/// "change.applied" event is awaited in the agent's event hub. The HTTP hop to an SSE client is on top of this
/// (the end-to-end test EventStreamTests prints that figure).
enum EventBench {
    static func latency(directory: String, options: NetworkBench.Options, log: (String) -> Void) throws
        -> [String: Any]
    {
        let quiet = Logger(label: "plait.bench", factory: { _ in SwiftLogNoOpLogHandler() })
        let home = try Home.create(at: directory + "/events", name: "events", config: Config())
        let agent = Agent(home: home, settings: Agent.Settings(), logger: quiet)
        try agent.start()
        defer { agent.stop() }
        let editor = try Home.open(at: home.path, config: Config())  // another connection, as another process
        let list = ObjectID.random()
        try editor.replica.edit { try $0.append(.listCreate(id: list, title: "events", color: nil, at: .bottom)) }
        let edits = min(options.edits, 300)
        var p50 = Sample()
        var p99 = Sample()
        for run in 0..<options.runs {
            var latencies: [Double] = []
            for index in 0..<edits {
                let start = DispatchTime.now().uptimeNanoseconds
                let change = try editor.replica.edit {
                    try $0.append(
                        .itemCreate(id: ObjectID.random(), list: list, text: "e\(run).\(index)", at: .bottom))
                }
                let wanted = EventValue.string(change.ref.description)
                let seen = NetworkBench.waitUntil(seconds: 10) {
                    let latest = agent.events.latestSeq
                    return agent.events.events(after: latest > 4 ? latest - 4 : 0).events
                        .contains { $0.data["change"] == wanted }
                }
                guard seen else { throw PlaitError.usage("edit \(index) raised no event within 10 s") }
                latencies.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6)
            }
            let round = percentiles(latencies)
            p50.add(round.p50)
            p99.add(round.p99)
        }
        log("edit by another connection → its event in the agent (\(options.runs) rounds of \(edits) edits): "
            + "p50 \(p50.text("%.1f")) ms, p99 \(p99.text("%.1f")) ms")
        return ["event_latency_p50_ms": p50.json, "event_latency_p99_ms": p99.json]
    }
}
