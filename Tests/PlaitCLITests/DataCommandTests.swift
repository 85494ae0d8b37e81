import Foundation
import Testing

/// The data commands, one process each, and what `show --json` and `lists --json` then say.
@Suite struct DataCommandTests {
    /// Every data command once or more, with the expected shape after the steps that matter.
    static let script: [[String]] = [
        ["list", "add", "Groceries", "--color", "green"],
        ["list", "add", "Hardware"],
        ["list", "add", "Chores", "--top"],
        ["list", "rename", "Hardware", "Tools"],
        ["list", "recolor", "Tools", "#ff0000"],
        ["list", "recolor", "Groceries", "none"],
        ["list", "move", "Tools", "--top"],
        ["list", "move", "Chores", "--after", "Groceries"],
        ["add", "Chores", "laundry"],
        ["list", "rm", "Chores"],
        ["add", "Groceries", "milk"],
        ["add", "Groceries", "eggs"],
        ["add", "Groceries", "bread", "--top"],
        ["add", "Groceries", "butter", "--after", "milk"],
        ["edit", "eggs", "free-range eggs"],
        ["done", "milk"],
        ["done", "bread"],
        ["reopen", "milk"],
        ["move", "milk", "--top"],
        ["move", "butter", "--after", "free-range eggs"],
        ["add", "Tools", "hammer"],
        ["move", "milk", "--to", "Tools"],
        ["move", "free-range eggs", "--to", "Tools", "--after", "milk"],
        ["rm", "butter"],
    ]

    /// (title, color, pending, completed) per live list, in order.
    typealias Shape = [String]

    static func shape(_ lists: [ShownList]) -> Shape { lists.map(\.description) }

    static let finalShape: Shape = [
        "Tools (#ff0000): [\"milk\", \"free-range eggs\", \"hammer\"] done []",
        "Groceries (no color): [] done [\"bread\"]",
    ]

    @Test func dataCommandsShapeTheLists() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            let checkpoints: [Int: Shape] = [
                3: [
                    "Chores (no color): [] done []", "Groceries (green): [] done []", "Hardware (no color): [] done []",
                ],
                8: [
                    "Tools (#ff0000): [] done []", "Groceries (no color): [] done []", "Chores (no color): [] done []",
                ],
                10: ["Tools (#ff0000): [] done []", "Groceries (no color): [] done []"],
                14: [
                    "Tools (#ff0000): [] done []",
                    "Groceries (no color): [\"bread\", \"milk\", \"butter\", \"eggs\"] done []",
                ],
                16: [
                    "Tools (#ff0000): [] done []",
                    "Groceries (no color): [\"bread\", \"butter\", \"free-range eggs\"] done [\"milk\"]",
                ],
                // `done` puts the item at the top of completed.
                17: [
                    "Tools (#ff0000): [] done []",
                    "Groceries (no color): [\"butter\", \"free-range eggs\"] done [\"bread\", \"milk\"]",
                ],
                // `reopen` puts it at the bottom of pending.
                18: [
                    "Tools (#ff0000): [] done []",
                    "Groceries (no color): [\"butter\", \"free-range eggs\", \"milk\"] done [\"bread\"]",
                ],
                20: [
                    "Tools (#ff0000): [] done []",
                    "Groceries (no color): [\"milk\", \"free-range eggs\", \"butter\"] done [\"bread\"]",
                ],
                22: [
                    "Tools (#ff0000): [\"milk\", \"hammer\"] done []",
                    "Groceries (no color): [\"free-range eggs\", \"butter\"] done [\"bread\"]",
                ],
                24: Self.finalShape,
            ]
            var createdIDs: [String: String] = [:]
            for (index, arguments) in Self.script.enumerated() {
                let run = try sandbox.ok(arguments + ["--json"])
                let object = try run.json()
                if ["add"].contains(arguments[0]) || arguments.prefix(2) == ["list", "add"] {
                    let id = try #require(object["id"] as? String)
                    #expect(id.count == 32 && id.allSatisfy(\.isHexDigit))
                    createdIDs[arguments[0] == "add" ? arguments[2] : arguments[2]] = id
                }
                if let expected = checkpoints[index + 1] {
                    #expect(Self.shape(try sandbox.shown()) == expected, "after step \(index + 1): \(arguments)")
                }
            }
            // The IDs shown are the ones the commands reported.
            let shown = try sandbox.shown()
            #expect(shown.map(\.id) == [createdIDs["Hardware"], createdIDs["Groceries"]])
            #expect(shown[0].pending.map(\.id) == [createdIDs["milk"], createdIDs["eggs"], createdIDs["hammer"]])
            #expect(shown[1].completed.map(\.id) == [createdIDs["bread"]])

            let lists = try #require(try sandbox.ok(["lists", "--json"]).json()["lists"] as? [[String: Any]])
            #expect(
                lists.map { Set($0.keys) }
                    == Array(repeating: ["id", "title", "color", "pending", "completed"], count: 2))
            #expect(lists.map { $0["title"] as? String } == ["Tools", "Groceries"])
            #expect(lists.map { $0["pending"] as? Int } == [3, 0])
            #expect(lists.map { $0["completed"] as? Int } == [0, 1])
            let one = try #require(try sandbox.ok(["show", "Groceries", "--json"]).json()["lists"] as? [[String: Any]])
            #expect(one.map { $0["title"] as? String } == ["Groceries"])

            let status = try sandbox.status()
            // One change per line, after the timeline's begin.
            #expect((status["summary"] as? String)?.hasSuffix(":\(Self.script.count + 1)") == true)
            #expect(status["changes"] as? Int == Self.script.count + 1)
            let text = try sandbox.ok(["show"]).stdout
            #expect(text.contains("[x] bread") && text.contains("[ ] hammer"), "\(text)")
        }
    }

    /// What a new user met (tests/hostile/2026-11-25-f, F7, F8, F12): an item command given a list's title, or
    /// `--after` an item of another list, said only "no item matches"; a second list of the same title was made
    /// without a word, and every command by that title then asked for "a longer ID prefix".
    @Test func namesThatMeanSomethingElseAreSaidSo() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            try sandbox.ok(["batch"], stdin: "list add Groceries\nlist add Hardware\nadd Groceries \"call mum\"\nadd Groceries rice\nadd Hardware drill\n")
            let list = try sandbox.fails(["rm", "Hardware"])
            #expect(list.stderr.contains("'Hardware' is a list: lists have commands of their own (`plait list rm`"), "\(list)")
            let elsewhere = try sandbox.fails(["move", "rice", "--after", "call mum", "--to", "Hardware"])
            #expect(elsewhere.stderr.contains("'call mum' is in list 'Groceries', not 'Hardware'."), "\(elsewhere)")
            let shortPrefix = try sandbox.fails(["done", "c33"])
            #expect(shortPrefix.stderr.contains("An ID prefix has at least 4 hex digits."), "\(shortPrefix)")
            // A typing slip finds what was meant among the candidates ("mlk" found nothing for a new user).
            for slip in ["rcie", "drll", "drilll", "dril", "call mun", "cal mum", "call mmu"] {
                let typo = try sandbox.fails(["done", slip])
                let meant = slip.hasPrefix("r") ? "'rice'" : slip.hasPrefix("d") ? "'drill'" : "'call mum'"
                #expect(typo.stderr.contains("candidates: ") && typo.stderr.contains(meant), "\(slip): \(typo)")
            }
            let far = try sandbox.fails(["done", "rust"])
            #expect(far.stderr.contains("none of the 3 items is similar"), "\(far)")
            let twin = try sandbox.ok(["list", "add", "Groceries"])
            #expect(twin.stdout.contains("note: another list has this title ("), "\(twin)")
            let renamed = try sandbox.ok(["list", "rename", "Hardware", "Groceries"])
            #expect(renamed.stdout.contains("note: 2 other lists have this title"), "\(renamed)")
            let unique = try sandbox.ok(["list", "add", "Chores"])
            #expect(!unique.stdout.contains("note:"), "\(unique)")
            // The same text again writes no change (it appended one each time).
            let before = try sandbox.ok(["status", "--json"]).json()["summary"] as? String
            let same = try sandbox.ok(["edit", "rice", "rice"])
            #expect(same.stdout.contains("already reads 'rice'; nothing was changed"), "\(same)")
            #expect(try sandbox.ok(["status", "--json"]).json()["summary"] as? String == before)
            // A directory given as the config file is said to be one (it read "cannot be read as UTF-8 text").
            let directory = try sandbox.fails(["lists", "--config", sandbox.root])
            #expect(directory.stderr.contains("is a directory, not a file"), "\(directory)")
        }
    }

    @Test func itemsAreFoundByIDPrefixOrExactText() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            try sandbox.ok(["list", "add", "Groceries"])
            for text in ["milk", "oat milk", "eggs", "flour", "sugar"] { try sandbox.ok(["add", "Groceries", text]) }
            let items = try #require(try sandbox.shown().first).pending
            let ids = items.map(\.id)
            let id = { (text: String) in items.first { $0.text == text }!.id }

            // A unique prefix of at least 4 characters.
            let eggs = uniquePrefix(of: id("eggs"), among: ids)
            #expect(eggs.count >= 4)
            try sandbox.ok(["done", eggs])
            // Upper case, and a whole ID in UUID form with dashes.
            let flour = id("flour")
            try sandbox.ok(["edit", uniquePrefix(of: flour, among: ids).uppercased(), "rye flour"])
            let dashed = [
                flour.prefix(8), flour.dropFirst(8).prefix(4), flour.dropFirst(12).prefix(4),
                flour.dropFirst(16).prefix(4), flour.dropFirst(20),
            ].joined(separator: "-")
            try sandbox.ok(["move", dashed, "--top"])
            // Exact text, even when it is also a substring of another item's text.
            try sandbox.ok(["rm", "milk"])
            let after = try #require(try sandbox.shown().first)
            #expect(after.pendingTexts == ["rye flour", "oat milk", "sugar"])
            #expect(after.completedTexts == ["eggs"])
            #expect(after.pending.first?.id == flour)
        }
    }

    struct Refusal: CustomStringConvertible, Sendable {
        let name: String
        let arguments: [String]
        /// Strings stderr must contain (the candidates).
        let mentions: [String]
        var description: String { name }
    }

    static let refusals: [Refusal] = [
        Refusal(
            name: "unknown list", arguments: ["add", "Hardware", "nails"],
            mentions: ["no list matches", "Groceries", "Bakery"]),
        Refusal(
            name: "unknown list to rename", arguments: ["list", "rename", "Nope", "X"],
            mentions: ["no list matches", "Groceries"]),
        Refusal(
            name: "unknown item", arguments: ["done", "mil"],
            mentions: ["no item matches", "'milk' in Groceries", "'milk' in Bakery", "'oat milk'"]),
        Refusal(
            name: "ambiguous item", arguments: ["edit", "milk", "whole milk"],
            mentions: ["matches several items", "'milk' in Groceries", "'milk' in Bakery"]),
        Refusal(name: "ambiguous list", arguments: ["add", "Twin", "x"], mentions: ["matches several lists", "Twin"]),
        Refusal(name: "prefix too short", arguments: ["done", "SHORT-PREFIX"], mentions: ["no item matches"]),
        Refusal(
            name: "unknown anchor", arguments: ["add", "Groceries", "x", "--after", "nothing like it"],
            mentions: ["no item matches"]),
        Refusal(
            name: "unknown target list", arguments: ["move", "oat milk", "--to", "Nowhere"],
            mentions: ["no list matches", "Groceries"]),
        Refusal(name: "already completed", arguments: ["done", "eggs"], mentions: ["already completed"]),
        Refusal(
            name: "top and after", arguments: ["add", "Groceries", "x", "--top", "--after", "oat milk"],
            mentions: ["--top", "--after"]),
        Refusal(name: "move nowhere", arguments: ["move", "oat milk"], mentions: ["say where"]),
    ]

    /// A LIST or ITEM that matches nothing or several things: a non-zero exit, the candidates on stderr, and
    /// the store untouched.
    @Test(arguments: Self.refusals)
    func unknownOrAmbiguousNamesChangeNothing(refusal: Refusal) throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            try sandbox.ok(
                ["batch"],
                stdin: """
                    list add Groceries
                    list add Bakery
                    list add Twin
                    list add Twin
                    add Groceries milk
                    add Groceries 'oat milk'
                    add Groceries eggs
                    add Bakery milk
                    done eggs
                    """)
            // A three-character prefix is too short to be taken as an ID.
            let eggs = try #require(try sandbox.shown().first { $0.title == "Groceries" }?.completed.first?.id)
            let arguments = refusal.arguments.map { $0 == "SHORT-PREFIX" ? String(eggs.prefix(3)) : $0 }
            let before = try sandbox.fingerprint()
            let shown = try sandbox.shown()

            let run = try sandbox.fails(arguments)
            for mention in refusal.mentions { #expect(run.stderr.contains(mention), "stderr lacks \(mention): \(run)") }
            #expect(try sandbox.fingerprint() == before)
            #expect(try sandbox.shown() == shown)
        }
    }

    /// When several items match but exactly one fits the command (the pending one for `done`), it is taken.
    @Test func doneAndReopenPreferTheItemTheyCanActOn() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            try sandbox.ok(["list", "add", "A"])
            try sandbox.ok(["list", "add", "B"])
            try sandbox.ok(["add", "A", "milk"])
            try sandbox.ok(["add", "B", "milk"])
            let bMilk = try #require(try sandbox.shown()[1].pending.first?.id)
            try sandbox.ok([
                "done", uniquePrefix(of: bMilk, among: [bMilk] + (try sandbox.shown()[0].pending.map(\.id))),
            ])
            try sandbox.ok(["done", "milk"])
            #expect(
                Self.shape(try sandbox.shown()) == [
                    "A (no color): [] done [\"milk\"]", "B (no color): [] done [\"milk\"]",
                ])
            try sandbox.fails(["done", "milk"])
            try sandbox.fails(["reopen", "milk"])
        }
    }
}
