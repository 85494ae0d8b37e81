import Foundation
import Testing

/// `plait batch` (quoting, one transaction, line-numbered errors) and the help output.
@Suite struct BatchTests {
    @Test func quotedLinesCommitInOneTransaction() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            let before = try sandbox.status()
            let input = #"""
                # a shopping list, with every kind of quoting

                list add 'Weekly shop' --color "dark green"
                list add Other --top
                   add "Weekly shop" "oat \"barista\" milk"   # trailing comment
                add 'Weekly shop' it\'s\ fine
                add 'Weekly shop' "back\\slash \$HOME and \`tick\`"
                add 'Weekly shop' 'single "double" inside' --top
                add 'Weekly shop' "tab	inside" --after=it\'s\ fine
                done "oat \"barista\" milk"
                list recolor Other --json '#00ff00'
                list move 'Weekly shop' --top
                """#
            let run = try sandbox.ok(["batch"], stdin: input)
            #expect(run.stdout.contains("committed 10 changes from 10 lines"), "\(run)")
            let after = try sandbox.status()
            let timeline = try #require(before["timeline"] as? String)
            #expect(after["summary"] as? String == "\(timeline):11", "one timeline: its begin and ten changes")
            let shown = try sandbox.shown()
            #expect(shown.map(\.title) == ["Weekly shop", "Other"])
            #expect(shown.map(\.color) == ["dark green", "#00ff00"])
            #expect(
                shown[0].pendingTexts == [
                    "single \"double\" inside", "it's fine", "tab\tinside", "back\\slash $HOME and `tick`",
                ])
            #expect(shown[0].completedTexts == ["oat \"barista\" milk"])

            let json = try sandbox.ok(["batch", "--json"], stdin: "add Other one\nadd Other two\n").json()
            #expect(json["changes"] as? Int == 2)
            #expect(json["lines"] as? Int == 2)
            let empty = try sandbox.ok(["batch"], stdin: "\n# nothing\n")
            #expect(empty.stdout.contains("committed 0 changes"), "\(empty)")
        }
    }

    /// The same script as 24 separate commands and as one batch ends in the same lists.
    @Test func aBatchMatchesTheSameCommandsRunOneByOne() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            let quote = { (word: String) in "'" + word.replacingOccurrences(of: "'", with: #"'\''"#) + "'" }
            let input = DataCommandTests.script.map { $0.map(quote).joined(separator: " ") }.joined(separator: "\n")
            let run = try sandbox.ok(["batch"], stdin: input + "\n")
            #expect(run.stdout.contains("committed \(DataCommandTests.script.count) changes"), "\(run)")
            #expect(DataCommandTests.shape(try sandbox.shown()) == DataCommandTests.finalShape)
        }
    }

    struct BadLine: CustomStringConvertible, Sendable {
        let name: String
        let line: String
        let mentions: [String]
        var description: String { name }
    }

    static let badLines: [BadLine] = [
        BadLine(name: "unknown item", line: #"edit "no such item" x"#, mentions: ["no item matches"]),
        BadLine(name: "unterminated quote", line: #"add Groceries "unterminated"#, mentions: ["unterminated"]),
        BadLine(name: "unknown command", line: "frobnicate all", mentions: []),
        BadLine(name: "not a data command", line: "status", mentions: []),
        BadLine(name: "missing argument", line: "add Groceries", mentions: []),
        BadLine(name: "unknown option", line: "add Groceries x --sideways", mentions: ["--sideways"]),
        BadLine(name: "move nowhere", line: "list move Groceries", mentions: ["say where"]),
        BadLine(name: "top and after", line: "add Groceries x --top --after milk", mentions: ["--top", "--after"]),
        BadLine(name: "empty text", line: "add Groceries ''", mentions: ["needs text"]),
        BadLine(name: "another home", line: "add Groceries x --home /elsewhere", mentions: ["run a batch per home)."]),
    ]

    /// A bad line anywhere aborts the whole batch, names its line number, and writes nothing.
    @Test(arguments: Self.badLines)
    func aBadLineAbortsTheWholeBatch(bad: BadLine) throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            try sandbox.ok(["batch"], stdin: "list add Groceries\nadd Groceries milk\n")
            let before = try sandbox.fingerprint()
            let shown = try sandbox.shown()
            // Line 6 counting the blank line and the comment.
            let input = [
                "add Groceries eggs", "", "# a comment", "list add Hardware", "done milk", bad.line,
                "add Groceries late",
            ]
            .joined(separator: "\n")
            let run = try sandbox.fails(["batch"], stdin: input)
            #expect(run.stderr.contains("line 6"), "the error names line 6: \(run)")
            #expect(!run.stderr.contains("line 1 ") && !run.stderr.contains("line 7"))
            for mention in bad.mentions { #expect(run.stderr.contains(mention), "stderr lacks \(mention): \(run)") }
            #expect(run.stderr.contains("Nothing of the batch was written"), "\(run)")
            #expect(!run.stderr.contains(") Nothing of the batch"), "every problem ends with a full stop: \(run)")
            #expect(try sandbox.fingerprint() == before)
            #expect(try sandbox.shown() == shown)
        }
    }
}

/// Help output is part of the product.
@Suite struct HelpTests {
    @Test func rootHelpListsTheSubcommands() throws {
        try withSandbox { sandbox in
            let help = try sandbox.ok(["--help"]).stdout
            #expect(help.contains("USAGE: plait <subcommand>"))
            for command in [
                "init", "id", "status", "rejoin", "lists", "list", "add", "edit", "done", "reopen", "move",
                "rm", "show", "log", "compact", "batch",
            ] {
                #expect(help.contains("\n  \(command) "), "root help lacks \(command)")
            }
            #expect(help.contains("--home") && help.contains("PLAIT_HOME") && help.contains("PLAIT_CONFIG"))
            #expect(try sandbox.ok(["help"]).stdout == help)
            let version = try sandbox.ok(["--version"]).stdout
            #expect(version.split(separator: ".").count == 3, "\(version)")
        }
    }

    @Test func batchHelpDescribesTheLineFormat() throws {
        try withSandbox { sandbox in
            let help = try sandbox.ok(["batch", "--help"]).stdout
            #expect(help.contains("USAGE: plait batch"))
            let flowing = help.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            for words in [
                "--home", "--config", "--json", "shell-style quoting", "names its line number",
                "nothing at all is written", "starting with # are skipped", "one transaction",
            ] {
                #expect(flowing.contains(words), "batch help lacks '\(words)'")
            }
            #expect(try sandbox.ok(["help", "batch"]).stdout == help)
        }
    }

    /// The example is meant to be copied: at the default width of 80 columns it must stay on one line.
    @Test func batchHelpExampleIsCopyable() throws {
        try withSandbox { sandbox in
            let help = try sandbox.ok(["batch", "--help"]).stdout
            let lines = help.split(separator: "\n").map(String.init)
            // Every example line is whole: the file lines and the command that reads them.
            for expected in ["  list add Groceries --color green", "  add Groceries \"oat milk\"", "  done \"oat milk\"",
                "plait batch < shopping.txt"]
            {
                #expect(lines.contains(expected), "the example line '\(expected)' is cut or missing: \(help)")
            }
        }
    }

    @Test func listHelpListsItsSubcommands() throws {
        try withSandbox { sandbox in
            let help = try sandbox.ok(["list", "--help"]).stdout
            #expect(help.contains("USAGE: plait list <subcommand>"))
            for command in ["add", "rename", "recolor", "move", "rm"] {
                #expect(help.contains("\n  \(command) "), "list help lacks \(command)")
            }
            let add = try sandbox.ok(["list", "add", "--help"]).stdout
            #expect(
                add.contains("USAGE: plait list add") && add.contains("--color") && add.contains("--top")
                    && add.contains("--after"))
        }
    }

    @Test func aUsageErrorPrintsUsage() throws {
        try withSandbox { sandbox in
            let run = try sandbox.fails(["add"])
            #expect(run.stderr.contains("Usage: plait add") || run.stderr.contains("USAGE: plait add"), "\(run)")
            let unknown = try sandbox.fails(["frobnicate"])
            #expect(unknown.stderr.contains("frobnicate"), "\(unknown)")
        }
    }
}
