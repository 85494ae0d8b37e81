import Foundation
import PlaitOutput
import Testing

/// Every `--json` output, as the real binary prints it on a real home, against golden files in Tests/Golden/json.
///
/// Volatile values are normalised before comparing, explicitly: the sandbox path becomes `$ROOT`; Device IDs,
/// SHA-256 digests (and their 16-digit prefixes), object IDs and timeline IDs become `<device-N>`, `<digest-N>`,
/// `<id-N>` and `<timeline-N>`, a peer's default label "device ABCDEFG" becomes "device <short-device-N>",
/// numbered by first appearance in that output (so "the same ID twice" stays visible); ISO 8601 times become
/// `<time>`. Everything else — keys, their order, nesting, types, null versus absent, escaping — must match.
/// `PLAIT_RECORD_GOLDEN=1` rewrites the files (then review the diff).
///
/// Each output is also decoded into its `PlaitOutput` type and encoded again: the bytes must be those printed,
/// so the CLI prints exactly the typed value (for `show`, its streamed writer equals the encoder).
@Suite struct JSONOutputTests {
    static let goldenDirectory = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Golden/json")

    @Test func everyJSONOutputMatchesItsGoldenFile() throws {
        try withSandbox { sandbox in
            var checked: [String] = []
            func check<T: Codable>(
                _ name: String, _ type: T.Type, _ arguments: [String], stdin: String? = nil, failing: Bool = false,
                sourceLocation: SourceLocation = #_sourceLocation
            ) throws -> PlaitRun {
                let run = try sandbox.run(arguments + ["--json"], stdin: stdin)
                #expect(run.succeeded != failing, "\(run)", sourceLocation: sourceLocation)
                try Self.compare(name, run, type, root: sandbox.root, sourceLocation: sourceLocation)
                checked.append(name)
                return run
            }
            let config = sandbox.root + "/quiet.toml"
            try Data("[discovery]\nenabled = false\n".utf8).write(to: URL(fileURLWithPath: config))

            _ = try check("init", InitOutput.self, ["init", "--name", "golden"])
            _ = try check("id", IdOutput.self, ["id"])
            _ = try check("list-add", EditOutput.self, ["list", "add", "Groceries", "--color", "green"])
            _ = try check("list-add-plain", EditOutput.self, ["list", "add", "Chores"])
            // Text that must be escaped: a quote, a backslash, a tab, a bidi override, DEL, non-ASCII.
            let tricky = "say \"hi\" \\ tab\there \u{202E}evil\u{7F} café 🍎"
            _ = try check("add", EditOutput.self, ["add", "Groceries", tricky])
            try sandbox.ok(["add", "Groceries", "bread"])
            try sandbox.ok(["add", "Chores", "dishes"])
            _ = try check("edit", EditOutput.self, ["edit", "bread", "rye bread"])
            _ = try check("done", EditOutput.self, ["done", "rye bread"])
            _ = try check("reopen", EditOutput.self, ["reopen", "rye bread"])
            try sandbox.ok(["done", "rye bread"])
            _ = try check("move", EditOutput.self, ["move", "dishes", "--to", "Groceries"])
            _ = try check("list-rename", EditOutput.self, ["list", "rename", "Chores", "House"])
            _ = try check("list-recolor", EditOutput.self, ["list", "recolor", "House", "#ff0000"])
            _ = try check("list-recolor-none", EditOutput.self, ["list", "recolor", "House", "none"])
            _ = try check("list-move", EditOutput.self, ["list", "move", "House", "--top"])
            _ = try check("batch", BatchOutput.self, ["batch"], stdin: "list add Spare\nadd Spare 'one'\nrm one\n")
            _ = try check("list-rm", EditOutput.self, ["list", "rm", "Spare"])
            try sandbox.ok(["add", "House", "temporary"])
            _ = try check("rm", EditOutput.self, ["rm", "temporary"])
            _ = try check("lists", ListsOutput.self, ["lists"])
            _ = try check("show", ShowOutput.self, ["show"])
            _ = try check("show-one", ShowOutput.self, ["show", "Groceries"])
            _ = try check("log", LogOutput.self, ["log", "--limit", "4"])
            _ = try check("status", StatusOutput.self, ["status"])
            _ = try check("compact", CompactOutput.self, ["compact"])
            _ = try check("status-compacted", StatusOutput.self, ["status"])
            // Before pairing, so no check depends on another machine's port.
            _ = try check(
                "doctor", DoctorOutput.self, ["doctor", "--listen", "127.0.0.1:0", "--config", config, "--timeout", "1"])
            let otherHome = sandbox.root + "/other"
            try sandbox.ok(["init", "--name", "other", "--home", otherHome])
            let other = try JSONDecoder().decode(
                IdOutput.self, from: Data(try sandbox.ok(["id", "--json", "--home", otherHome]).stdout.utf8))
            _ = try check("sync-unpaired", SyncOutput.self, ["sync", "--no-discovery"], failing: true)
            _ = try check("pair-trust", PairOutput.self, ["pair", "--trust", other.device, "--address", "127.0.0.1:9"])
            _ = try check("peers", PeersOutput.self, ["peers"])
            _ = try check("peers-pending", PendingPeersOutput.self, ["peers", "--pending"])
            _ = try check(
                "sync-refused", SyncOutput.self, ["sync", "--peer", "127.0.0.1:9", "--no-discovery", "--timeout", "2"],
                failing: true)
            _ = try check("repair", RepairOutput.self, ["repair"])
            _ = try check("backup", BackupOutput.self, ["backup", sandbox.root + "/backup"])
            _ = try check("restore", RestoreOutput.self, ["restore", sandbox.root + "/backup"])
            #expect(checked.count == 32, "outputs checked: \(checked)")
        }
    }

    /// The large case: `show --json` of a home with 10,000 items is one valid JSON document holding every item
    /// once, in order — written in many flushes of the 64 KiB buffer.
    @Test func showOfALargeHomeIsValidJSONWithEveryItem() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            let lists = 7
            let count = 10_000
            var lines = (0..<lists).map { "list add L\($0)" }
            for index in 0..<count { lines.append("add L\(index % lists) 'item \(index)'") }
            try sandbox.ok(["batch"], stdin: lines.joined(separator: "\n"))
            let run = try sandbox.ok(["show", "--json"])
            #expect(run.stdout.utf8.count > 8 << 16, "the output spans many buffer flushes")
            let shown = try JSONDecoder().decode(ShowOutput.self, from: Data(run.stdout.utf8))
            #expect(shown.lists.map(\.title) == (0..<lists).map { "L\($0)" })
            let items = shown.lists.flatMap(\.pending)
            #expect(items.count == count)
            #expect(Set(items.map(\.id)).count == count, "every item once")
            for (index, list) in shown.lists.enumerated() {
                let expected = stride(from: index, to: count, by: lists).map { "item \($0)" }
                #expect(list.pending.map(\.text) == expected, "list L\(index) in display order")
            }
        }
    }

    // MARK: Comparing

    static func compare<T: Codable>(
        _ name: String, _ run: PlaitRun, _ type: T.Type, root: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let value: T
        do {
            value = try JSONDecoder().decode(T.self, from: Data(run.stdout.utf8))
        } catch {
            Issue.record("\(name): the output does not decode as \(T.self): \(error)\n\(run)", sourceLocation: sourceLocation)
            return
        }
        #expect(
            try JSONStreamEncoder.text(value) == run.stdout,
            "\(name): the output is not exactly its typed value encoded", sourceLocation: sourceLocation)
        let normalised = normalise(run.stdout, root: root)
        let file = goldenDirectory.appendingPathComponent(name + ".json")
        if ProcessInfo.processInfo.environment["PLAIT_RECORD_GOLDEN"] == "1" {
            try FileManager.default.createDirectory(at: goldenDirectory, withIntermediateDirectories: true)
            try Data(normalised.utf8).write(to: file)
            return
        }
        guard let golden = FileManager.default.contents(atPath: file.path) else {
            Issue.record(
                "\(name): no golden file \(file.path); record with PLAIT_RECORD_GOLDEN=1", sourceLocation: sourceLocation)
            return
        }
        #expect(
            normalised == String(decoding: golden, as: UTF8.self),
            "\(name) differs from \(file.lastPathComponent):\n\(normalised)", sourceLocation: sourceLocation)
    }

    /// The output with its volatile values replaced (see the suite's comment).
    static func normalise(_ text: String, root: String) -> String {
        var text = text.replacingOccurrences(of: root, with: "$ROOT")
        let patterns: [(String, String)] = [
            ("[A-Z2-7]{7}(-[A-Z2-7]{7}){7}", "device"),
            ("(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])", "digest"),
            ("(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])", "id"),
            // Doctor's short digests and peer labels ("device ABCDEFG": the Device ID's first group).
            ("(?<![0-9a-f])[0-9a-f]{16}(?![0-9a-f])", "digest16"),
            ("(?<=device )[A-Z2-7]{7}(?![A-Z2-7-])", "short-device"),
            ("[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z", "time"),
            // In a directory's name (`replaced-by-restore-20261125T171433Z`).
            ("(?<![0-9])[0-9]{8}T[0-9]{6}Z", "time"),
            ("(?<![0-9A-Z])[0-9A-HJKMNP-TV-Z]{13}(?![0-9A-Z])", "timeline"),
        ]
        for (pattern, label) in patterns {
            let regex = try! NSRegularExpression(pattern: pattern)
            var numbers: [String: Int] = [:]
            let matches = regex.matches(in: text, range: NSRange(text.startIndex..., in: text))
            var out = ""
            var cursor = text.startIndex
            for match in matches {
                let range = Range(match.range, in: text)!
                let token = String(text[range])
                let number = numbers[token] ?? (numbers.count + 1)
                numbers[token] = number
                out += text[cursor..<range.lowerBound]
                out += label == "time" ? "<time>" : "<\(label)-\(number)>"
                cursor = range.upperBound
            }
            out += text[cursor...]
            text = out
        }
        return text
    }
}
