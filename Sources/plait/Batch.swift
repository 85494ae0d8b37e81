import ArgumentParser
import Foundation
import PlaitCore
import PlaitStore
import PlaitSync

/// The grammar of one `plait batch` line: the data commands, without `plait` in front.
struct BatchLine: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "",
        subcommands: [
            Plait.ListCommand.self, Plait.Add.self, Plait.Edit.self, Plait.Done.self, Plait.Reopen.self,
            Plait.Move.self, Plait.Remove.self,
        ])
}

extension Plait {
    struct Batch: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Read data commands from standard input, one per line, and commit them in one transaction.",
            discussion: """
                Each line is a data command as you would type it after `plait` (list add|rename|recolor|move|rm, \
                add, edit, done, reopen, move, rm), with shell-style quoting. Blank lines and lines starting \
                with # are skipped. Later lines see what earlier lines did. If any line fails, the error names \
                its line number and nothing at all is written.

                Example:
                  printf '%s\\n' 'list add Groceries' 'add Groceries "oat milk"' 'done "oat milk"' | plait batch
                """)

        @OptionGroup var global: GlobalOptions
        @Flag(help: "Print the result as JSON.") var json = false

        func run() throws {
            let home = try global.openHome()
            var lines: [String] = []
            while let line = readLine(strippingNewline: true) { lines.append(line) }
            let result = try Self.commit(lines: lines, to: home.replica)
            if json {
                printJSON(["lines": result.lines, "changes": result.changes])
            } else {
                print("committed \(result.changes) changes from \(result.lines) lines")
            }
        }

        /// Parses and applies `lines` in one local edit; the first bad line aborts everything.
        static func commit(lines: [String], to replica: Replica) throws -> (lines: Int, changes: Int) {
            var commands = 0
            let changes = try replica.edit { edit -> Int in
                for (index, line) in lines.enumerated() {
                    let number = index + 1
                    let tokens: [String]
                    do {
                        tokens = try ShellWords.split(line)
                    } catch {
                        throw PlaitError.batchLine(number: number, text: line, problem: "\(error)")
                    }
                    if tokens.isEmpty { continue }
                    let command: DataCommand
                    do {
                        let parsed = try BatchLine.parseAsRoot(tokens)
                        guard let data = parsed as? DataCommand else {
                            throw PlaitError.usage("not a data command (use list add|rename|recolor|move|rm, add, edit, done, reopen, move or rm)")
                        }
                        command = data
                    } catch let error as PlaitError {
                        throw PlaitError.batchLine(number: number, text: line, problem: error.description)
                    } catch {
                        let message = BatchLine.message(for: error).split(separator: "\n").first.map(String.init) ?? "\(error)"
                        throw PlaitError.batchLine(number: number, text: line, problem: message + ".")
                    }
                    do {
                        _ = try command.perform(edit)
                    } catch {
                        throw PlaitError.batchLine(number: number, text: line, problem: "\(error)")
                    }
                    commands += 1
                }
                return edit.appended.count
            }
            return (commands, changes)
        }
    }
}

/// Splits a line the way a POSIX shell splits words: whitespace separates; 'single quotes' are literal;
/// "double quotes" allow \" \\ \$ \`; a backslash outside quotes escapes the next character; a word
/// starting with # begins a comment.
enum ShellWords {
    struct Unterminated: Error, CustomStringConvertible {
        let quote: Character
        var description: String { "unterminated \(quote) quote." }
    }

    static func split(_ line: String) throws -> [String] {
        var words: [String] = []
        var current = ""
        var inWord = false
        var iterator = Array(line).makeIterator()
        while let character = iterator.next() {
            switch character {
            case " ", "\t", "\r":
                if inWord { words.append(current) }
                current = ""
                inWord = false
            case "#" where !inWord:
                return words
            case "'":
                inWord = true
                var closed = false
                while let next = iterator.next() {
                    if next == "'" {
                        closed = true
                        break
                    }
                    current.append(next)
                }
                if !closed { throw Unterminated(quote: "'") }
            case "\"":
                inWord = true
                var closed = false
                while let next = iterator.next() {
                    if next == "\"" {
                        closed = true
                        break
                    }
                    if next == "\\" {
                        guard let escaped = iterator.next() else { break }
                        if !"\"\\$`".contains(escaped) { current.append("\\") }
                        current.append(escaped)
                    } else {
                        current.append(next)
                    }
                }
                if !closed { throw Unterminated(quote: "\"") }
            case "\\":
                inWord = true
                if let next = iterator.next() { current.append(next) }
            default:
                inWord = true
                current.append(character)
            }
        }
        if inWord { words.append(current) }
        return words
    }
}
