import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The CLI through the agent (DESIGN §12): with an agent on the home, commands go over its Unix socket, and what
/// the user sees — standard output, standard error, exit status — is exactly what the CLI prints alone.
@Suite(.serialized) struct AgentClientTests {
    /// One table, run once on a home without an agent and once on an identical copy with one. Each case is run on
    /// both before the next, so later cases see what earlier ones did, on both sides alike.
    static let cases: [[String]] = [
        ["lists"], ["lists", "--json"], ["show"], ["show", "--json"], ["show", "Groceries"], ["show", "Nope"],
        ["show", "Nope", "--json"],
        // Good edits, plain and JSON.
        ["add", "Groceries", "oat milk"], ["add", "Groceries", "oat milk", "--json"],
        ["add", "Groceries", "café ☕ \u{7}bell", "--top"], ["add", "Groceries", "eggs", "--after", "bread"],
        ["list", "add", "Hardware", "--color", "#00ff00"], ["list", "add", "Garden", "--json", "--top"],
        ["list", "rename", "Hardware", "Tools"], ["list", "recolor", "Tools", "#ff0000", "--json"],
        ["list", "recolor", "Tools", "none"], ["list", "move", "Tools", "--top"],
        ["list", "move", "Garden", "--after", "Groceries", "--json"],
        ["done", "bread"], ["done", "bread", "--json"], ["reopen", "bread"], ["reopen", "bread"],
        ["edit", "bread", "rye bread"], ["edit", "eggs", "brown eggs", "--json"],
        ["move", "rye bread", "--to", "Tools"], ["move", "rye bread", "--to", "Groceries", "--after", "brown eggs"],
        ["move", "brown eggs", "--top", "--json"],
        // Bad names, blank text, unknown items, contradictions the state shows.
        ["add", "Nope", "x"], ["add", "Groceries", "   "], ["add", "Groceries", "\u{200B}"],
        ["list", "add", " "], ["list", "rename", "Nope", "X"], ["list", "rename", "Tools", ""],
        ["edit", "nothing like it", "x"], ["edit", "rye bread", "\t"], ["done", "oat milk"],
        ["done", "nothing like it", "--json"], ["move", "rye bread", "--after", "rye bread"],
        ["move", "rye bread"], ["list", "move", "Tools", "--after", "Tools"], ["list", "move", "Tools"],
        ["add", "Groceries", "x", "--top", "--after", "eggs"],
        // Removal, then what is left.
        ["rm", "rye bread"], ["rm", "rye bread"], ["list", "rm", "Garden", "--json"], ["list", "rm", "Garden"],
        ["status"], ["status", "--json"], ["log"], ["log", "--limit", "3", "--json"], ["log", "--limit", "-1"],
        ["lists"], ["lists", "--json"], ["show"], ["show", "--json"], ["show", "Tools", "--json"],
    ]

    @Test func sameOutputErrorsAndStatusWithAndWithoutAgent() throws {
        try withSandbox("same") { sandbox in
            try sandbox.initialize()
            try sandbox.ok(["list", "add", "Groceries", "--color", "green"])
            try sandbox.ok(["add", "Groceries", "bread"])
            let alone = sandbox.root + "/alone"
            let served = sandbox.root + "/served"
            try FileManager.default.copyItem(atPath: sandbox.home, toPath: alone)
            try FileManager.default.copyItem(atPath: sandbox.home, toPath: served)
            // Identical homes, neither taken for a copy at its first write (`HandRestoreTests` has that), so both go on
            // on the one timeline and print the same.
            for home in [alone, served] { try forgetStoreFile(home: home) }
            let agent = try RunningAgent(sandbox: sandbox, home: served)
            defer { #expect(agent.stop() == 0, "the agent exits cleanly: \(agent.log)") }
            try awaitSocket(agent)

            var normalizeAlone = Normalizer(home: alone)
            var normalizeServed = Normalizer(home: served)
            for arguments in Self.cases {
                let without = try sandbox.run(arguments, environment: ["PLAIT_HOME": alone])
                let with = try sandbox.run(arguments, environment: ["PLAIT_HOME": served])
                let expected = normalizeAlone.outcome(without)
                let got = normalizeServed.outcome(with)
                #expect(got == expected, "`plait \(arguments.joined(separator: " "))` through the agent differs")
                #expect(!with.crashed, "\(with)")
            }
            #expect(!agent.log.contains("error"), "the agent logged an error: \(agent.log)")
        }
    }

    /// The commands of the table really went to the agent: with the store's files hidden from the CLI (a mount
    /// namespace of its own), the CLI alone finds no store, but reads and edits through the agent still work.
    @Test func commandsGoToTheAgentNotTheStore() throws {
        try withSandbox("route") { sandbox in
            try sandbox.initialize()
            try sandbox.ok(["list", "add", "Groceries"])
            // The probe discriminates: without an agent, a hidden store is no store.
            guard let alone = try runWithStoreHidden(sandbox, home: sandbox.home, ["show"], environment: [:]) else {
                return
            }
            #expect(alone.status == 1 && alone.stdout.isEmpty && alone.stderr.contains("plait.db"), "\(alone)")
            let agent = try RunningAgent(sandbox: sandbox, home: sandbox.home)
            defer { #expect(agent.stop() == 0, "the agent exits cleanly: \(agent.log)") }
            try awaitSocket(agent)
            func hidden(_ arguments: [String]) throws -> PlaitRun {
                try runWithStoreHidden(sandbox, home: sandbox.home, arguments, environment: [:])!
            }
            let added = try hidden(["add", "Groceries", "milk", "--json"])
            let shown = try hidden(["show", "--json"])
            let status = try hidden(["status"])
            let log = try hidden(["log"])
            #expect(added.succeeded && added.stdout.contains("\"text\": \"milk\""), "\(added)")
            #expect(shown.succeeded && shown.stdout.contains("\"milk\""), "\(shown)")
            #expect(status.succeeded && status.stdout.contains("1 lists, 1 items"), "\(status)")
            #expect(log.succeeded && log.stdout.contains("item.create"), "\(log)")
            // And the edit is in the store the agent wrote, for a CLI without an agent to see.
            agent.stop()
            #expect(try sandbox.shown().first?.pendingTexts == ["milk"])
        }
    }

    /// `plait gui` mints its login code over the agent's Unix socket, which needs no token: with the token file
    /// replaced after the agent started (the agent keeps the one it read), the URL still comes and logs in.
    @Test func guiGetsItsLoginCodeOverTheSocketWithoutTheToken() throws {
        try withSandbox("gui") { sandbox in
            try sandbox.initialize()
            let api = try APIAgent(sandbox: sandbox, home: sandbox.home)
            defer { #expect(api.agent.stop() == 0, "\(api.agent.log)") }
            try awaitSocket(api.agent)
            let tokenFile = sandbox.home + "/api-token"
            try Data("NOTTHEAGENTSTOKENATALL0000\n".utf8).write(to: URL(fileURLWithPath: tokenFile))
            #expect(chmod(tokenFile, 0o600) == 0)
            let code = try api.loginCode(sandbox)
            let redeemed = try api.redeem(code)
            #expect(redeemed.status == 200, "\(redeemed.text)")
            #expect(redeemed.text.contains("\"page_key\""), "\(redeemed.text)")
            // --token still prints the file's token, for scripts.
            #expect(try sandbox.ok(["gui", "--token"]).lines.last == "NOTTHEAGENTSTOKENATALL0000")
        }
    }
}

/// Waits until the agent says its Unix socket is in place; returns the path it names.
@discardableResult
func awaitSocket(_ agent: RunningAgent, sourceLocation: SourceLocation = #_sourceLocation) throws -> String {
    let marker = "local API for plait commands on "
    guard eventually(20, { agent.log.contains(marker) }),
        let line = agent.log.split(separator: "\n").first(where: { $0.contains(marker) }),
        let path = line.components(separatedBy: marker).last
    else {
        throw CLITestFailure("the agent did not open its Unix socket: \(agent.log)")
    }
    return path.trimmingCharacters(in: .whitespaces)
}

/// Makes two runs on two copies of one home comparable: the home's path, and what is random in each copy (the
/// IDs of objects made since the copy, the state digest over them, wall-clock times), become tokens numbered in
/// order of first appearance. Everything else must be equal byte for byte.
struct Normalizer {
    let home: String
    private var ids: [String: Int] = [:]
    private var digests: [String: Int] = [:]

    init(home: String) { self.home = home }

    struct Outcome: Equatable, CustomStringConvertible {
        var status: Int32
        var stdout: String
        var stderr: String
        var description: String { "exit \(status)\n--- stdout\n\(stdout)--- stderr\n\(stderr)" }
    }

    mutating func outcome(_ run: PlaitRun) -> Outcome {
        Outcome(status: run.status, stdout: normalize(run.stdout), stderr: normalize(run.stderr))
    }

    mutating func normalize(_ text: String) -> String {
        var text = text.replacingOccurrences(of: home, with: "<home>")
        text = Self.replace(#"\b[0-9a-f]{64}\b"#, in: text) { match in
            "<digest \(Self.number(match, in: &digests))>"
        }
        // A full ID and its 8-character short form are one object: numbered by the short form.
        text = Self.replace(#"\b[0-9a-f]{32}\b|\b[0-9a-f]{8}\b"#, in: text) { match in
            "<id \(Self.number(String(match.prefix(8)), in: &ids))>"
        }
        return Self.replace(#"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z"#, in: text) { _ in "<time>" }
    }

    private static func number(_ key: String, in table: inout [String: Int]) -> Int {
        if let known = table[key] { return known }
        table[key] = table.count + 1
        return table.count
    }

    private static func replace(_ pattern: String, in text: String, _ token: (String) -> String) -> String {
        let expression = try! NSRegularExpression(pattern: pattern)
        var result = ""
        var last = text.startIndex
        for match in expression.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
            guard let range = Range(match.range, in: text) else { continue }
            result += text[last..<range.lowerBound]
            result += token(String(text[range]))
            last = range.upperBound
        }
        return result + text[last...]
    }
}
