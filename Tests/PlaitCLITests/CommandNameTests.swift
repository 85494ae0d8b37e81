import ArgumentParser
import Testing

@testable import plait

/// Every command names itself. Without `commandName`, ArgumentParser derives the name from the type with
/// `String(describing:)`, whose first call per type scans every protocol conformance in the process: about 48 of
/// the 99 million instructions a `plait show` that fails at once ran (callgrind), for each of the ~30 commands
/// walked while parsing. Every `plait` process pays this before it does anything.
@Suite struct CommandNameTests {
    func commands(_ root: any ParsableCommand.Type) -> [any ParsableCommand.Type] {
        [root] + root.configuration.subcommands.flatMap { commands($0) }
    }

    @Test func everyCommandHasAnExplicitName() {
        let all = commands(Plait.self)
        #expect(all.count > 30)
        let unnamed = all.filter { $0.configuration.commandName == nil }.map { "\($0)" }
        #expect(unnamed.isEmpty, "commands without commandName: \(unnamed)")
    }
}
