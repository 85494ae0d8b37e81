import ArgumentParser
import Foundation
import PlaitCommands
import PlaitCore
import PlaitOutput
import PlaitStore
import PlaitSync

extension Plait {
    struct Lists: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "lists", abstract: "List the lists, in order, with item counts.")
        @OptionGroup var global: GlobalOptions
        @Flag(help: "Print the result as JSON.") var json = false

        func run() throws {
            guard let output = try global.readOutput("/api/lists", json: json, local: { home in
                ReadOutputs.lists(home.replica.state)
            }) else { return }
            let rows = output.lists
            if rows.isEmpty { print("no lists yet: create one with `plait list add TITLE`") }
            for row in rows {
                let color = row.color.map { " (\($0.terminalSafe))" } ?? ""
                print("\(row.id.prefix(8))  \(row.title.terminalSafe)\(color)  \(row.pending) pending, "
                    + "\(row.completed) done")
            }
        }
    }

    struct Show: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "show", abstract: "Show lists and their items in display order.")
        @OptionGroup var global: GlobalOptions
        @Argument(help: "Only this list (title or ID prefix).") var list: String?
        @Flag(help: "Print the result as JSON.") var json = false

        func run() throws {
            // With an agent on the home, it answers from its memory (AgentClient+Commands.swift).
            let target = "/api/show" + (list.map { "?list=" + AgentClient.query($0) } ?? "")
            let answered = try global.throughAgent { agent -> ShowOutput? in
                let body = try agent.get(target)
                if json {
                    try printAgentJSON(body)
                    return nil
                }
                return try agent.decode(ShowOutput.self, from: body, target: target)
            }
            let output: ShowOutput
            if let answered {
                guard let answered else { return }
                output = answered
            } else {
                let state = try global.openHome().replica.state
                if json {
                    try writeJSON { writer in try ReadOutputs.streamShow(state, list: list, into: writer) }
                    return
                }
                output = try ReadOutputs.show(state, list: list)
            }
            if output.lists.isEmpty { print("no lists yet: create one with `plait list add TITLE`") }
            for list in output.lists {
                let color = list.color.map { " (\($0.terminalSafe))" } ?? ""
                print("\(list.title.terminalSafe)\(color)  [\(list.id.prefix(8))]")
                for item in list.pending { print("  [ ] \(item.text.terminalSafe)  \(item.id.prefix(8))") }
                for item in list.completed { print("  [x] \(item.text.terminalSafe)  \(item.id.prefix(8))") }
            }
        }
    }

    struct Log: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "log",
            abstract: "Show stored changes in replay order: timeline:seq, Lamport time, kind, description.",
            discussion: "Changes folded into the baseline are no longer listed (see `plait status`).")
        @OptionGroup var global: GlobalOptions
        // Unconditional, so `--limit -1` reaches validate() instead of being taken for an option.
        @Option(parsing: .unconditional, help: "Show only the newest N changes.") var limit: Int?
        @Flag(help: "Print the result as JSON.") var json = false

        func validate() throws {
            if let limit, limit < 0 { throw ValidationError("--limit must be 0 or more") }
        }

        func run() throws {
            let target = "/api/log" + (limit.map { "?limit=\($0)" } ?? "")
            guard let output = try global.readOutput(target, json: json, local: { home in
                try ReadOutputs.log(home, limit: limit)
            }) else { return }
            for row in output.changes {
                print("\(row.change)  \(row.lamport)  \(row.kind.terminalSafe)  \(row.description.terminalSafe)  \(row.time ?? "(no valid wall time)")")
            }
        }
    }
}
