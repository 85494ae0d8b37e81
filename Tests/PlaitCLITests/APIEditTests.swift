import Foundation
import PlaitAPI
import Testing

/// POST /api/edit against the CLI: the same operation gives the same output, the same state and, when it is
/// refused, the same sentence (DataOperation is one implementation behind both).
@Suite(.serialized) struct APIEditTests {
    func object(_ reply: LoopbackClient.Reply) throws -> [String: String] {
        let parsed = try JSONSerialization.jsonObject(with: Data(reply.body)) as? [String: Any] ?? [:]
        return parsed.mapValues { "\($0)" }
    }

    func stringly(_ run: PlaitRun) throws -> [String: String] { try run.json().mapValues { "\($0)" } }

    /// The sentence of a failed run, as the API states it (ArgumentParser prints "Error: " before it).
    func sentence(_ run: PlaitRun) -> String {
        String(run.stderr.split(separator: "\n").first ?? "").replacingOccurrences(of: "Error: ", with: "")
    }

    @Test func anEditByPostAnswersAndChangesWhatTheSameCommandDoes() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            try sandbox.ok(["list", "add", "Groceries"])
            let api = try APIAgent(sandbox: sandbox, home: sandbox.home)
            defer { #expect(api.agent.stop() == 0, "\(api.agent.log)") }
            let post = { (fields: [String: Any]) throws -> LoopbackClient.Reply in
                try api.client.send("POST", "/api/edit", headers: [("Origin", api.origin), api.bearer], json: fields)
            }
            let added = try post(["op": "add", "list": "Groceries", "text": "milk"])
            #expect(added.status == 200, "\(added.text)")
            let byAPI = try object(added)
            let byCLI = try stringly(try sandbox.ok(["add", "Groceries", "bread", "--json"]))
            #expect(Set(byAPI.keys) == Set(byCLI.keys) && byAPI["list"] == byCLI["list"], "\(byAPI) \(byCLI)")
            let milk = try #require(byAPI["id"])
            // The same edit of the same item, once each way: the outputs are equal.
            let cliEdit = try stringly(try sandbox.ok(["edit", String(milk.prefix(8)), "oat milk", "--json"]))
            let apiEdit = try object(try post(["op": "edit", "item": String(milk.prefix(8)), "text": "oat milk"]))
            #expect(cliEdit == apiEdit && apiEdit["text"] == "oat milk", "\(cliEdit) \(apiEdit)")
            // Names resolve alike: the item's exact text, the list's title in another case.
            let done = try post(["op": "done", "item": "oat milk"])
            #expect(try object(done) == ["id": milk], "\(done.text)")
            let moved = try post(["op": "move", "item": "bread", "top": true, "to": "groceries"])
            #expect(moved.status == 200, "\(moved.text)")
            // The agent's state is the store's: its digest is what `plait status` computes from the file.
            let status = try object(try api.client.send("GET", "/api/status", headers: [api.bearer]))
            #expect(status["digest"] == (try sandbox.status()["digest"] as? String))
            let shown = try api.client.send("GET", "/api/show", headers: [api.bearer])
            let cliShown = try sandbox.ok(["show", "--json"]).stdout
            #expect(
                try JSONSerialization.jsonObject(with: Data(shown.body)) as? NSDictionary
                    == JSONSerialization.jsonObject(with: Data(cliShown.utf8)) as? NSDictionary,
                "show by API and by CLI: \(shown.text) \(cliShown)")

            // Refusals: the same sentence, a status that says what kind.
            let refusals: [(fields: [String: Any], arguments: [String], status: Int)] = [
                (["op": "done", "item": "oat milk"], ["done", "oat milk"], 409),
                (["op": "add", "list": "Nope", "text": "x"], ["add", "Nope", "x"], 404),
                (["op": "add", "list": "Groceries", "text": " \u{200B}"], ["add", "Groceries", " \u{200B}"], 400),
                (["op": "move", "item": "bread"], ["move", "bread"], 400),
                (["op": "edit", "item": "zzzz-nothing", "text": "y"], ["edit", "zzzz-nothing", "y"], 404),
            ]
            for refusal in refusals {
                let reply = try post(refusal.fields)
                let cli = try sandbox.fails(refusal.arguments)
                #expect(reply.status == refusal.status, "\(refusal.arguments): \(reply.text)")
                #expect(reply.errorMessage == sentence(cli), "\(refusal.arguments): \(reply.text) vs \(cli.stderr)")
            }
            let unknown = try post(["op": "explode"])
            #expect(unknown.status == 400 && unknown.errorMessage?.contains("unknown op") == true, "\(unknown.text)")
            let missing = try post(["op": "add", "list": "Groceries"])
            #expect(missing.status == 400 && missing.errorMessage?.contains("\"text\"") == true, "\(missing.text)")
            let extra = try post(["op": "rm", "item": "bread", "after": "x"])
            #expect(extra.status == 400 && extra.errorMessage?.contains("\"after\"") == true, "\(extra.text)")
            #expect(try sandbox.status()["digest"] as? String == status["digest"], "no refusal wrote anything")
        }
    }
}
