import ArgumentParser
import Foundation
import PlaitCommands
import PlaitCore
import PlaitStore
import PlaitOutput
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
            commandName: "batch",
            abstract: "Read data commands from standard input, one per line, and commit them in one transaction.",
            discussion: """
                Each line is a data command as you would type it after `plait` (list add|rename|recolor|move|rm, \
                add, edit, done, reopen, move, rm), with shell-style quoting. Blank lines and lines starting \
                with # are skipped. Later lines see what earlier lines did. If any line fails, the error names \
                its line number and nothing at all is written.

                Example (a file, then standard input):
                  list add Groceries --color green
                  add Groceries "oat milk"
                  done "oat milk"
                plait batch < shopping.txt
                """)

        @OptionGroup var global: GlobalOptions
        @Flag(help: "Print the result as JSON.") var json = false

        func run() throws {
            let home = try global.openHome()
            // No valid line is longer than twice the largest change (every byte quoted with a backslash), so a
            // longer one is refused before it is parsed: a 100 MiB line costs only its reading.
            let lines = try Self.lines(
                FileHandle.standardInput.readDataToEndOfFile(), maxLineBytes: 2 * home.config.maxChangeBytes + 65_536)
            let result = try Self.commit(lines: lines, to: home.replica)
            if json {
                try printJSON(BatchOutput(changes: result.changes, lines: result.lines))
            } else {
                print("committed \(result.changes) changes from \(result.lines) lines")
            }
        }

        /// Splits standard input into lines (without "\n" or "\r\n"), refusing a line that is not UTF-8
        /// rather than storing its text with replacement characters, and a line over `maxLineBytes`.
        static func lines(_ input: Data, maxLineBytes: Int) throws -> [String] {
            try input.withUnsafeBytes { raw throws -> [String] in
                let buffer = raw.bindMemory(to: UInt8.self)
                var lines: [String] = []
                var start = 0
                var number = 0
                // memchr finds line ends at memory speed: this runs on any input, before anything is parsed.
                // A line break ends a line; input ending in one has no (empty) line after it, as with readLine.
                while start < buffer.count {
                    let found = memchr(buffer.baseAddress! + start, 0x0A, buffer.count - start)
                    let end = found.map { UnsafeRawPointer($0) - raw.baseAddress! } ?? buffer.count
                    number += 1
                    var line = UnsafeBufferPointer(rebasing: buffer[start..<end])
                    if line.last == UInt8(ascii: "\r") { line = UnsafeBufferPointer(rebasing: line.dropLast()) }
                    start = end + 1
                    guard line.count <= maxLineBytes else {
                        let head = String(decoding: line.prefix(320), as: UTF8.self).unicodeScalars.prefix(80)
                        throw PlaitError.batchLine(
                            number: number, text: String(String.UnicodeScalarView(head)).terminalSafe
                                + "… (\(line.count) bytes in all)",
                            problem: "it is longer than any data command can be (store.max_change_bytes is "
                                + "\(maxLineBytes / 2 - 32_768) bytes).")
                    }
                    guard let text = String(validating: line, as: UTF8.self) else {
                        throw PlaitError.batchLine(
                            number: number, text: String(decoding: line, as: UTF8.self).terminalExcerpt(),
                            problem: "it is not valid UTF-8 text; convert the input to UTF-8 (e.g. with iconv) and "
                                + "run the batch again.")
                    }
                    lines.append(text)
                }
                return lines
            }
        }

        /// Parses and applies `lines` in one local edit; the first bad line aborts everything.
        static func commit(lines: [String], to replica: Replica) throws -> (lines: Int, changes: Int) {
            var commands = 0
            let changes = try replica.edit { edit -> Int in
                for (index, line) in lines.enumerated() {
                    let number = index + 1
                    // An error quotes only the start of the line: a bad line may be megabytes long.
                    let quoted = { line.terminalExcerpt() }
                    let tokens: [String]
                    do {
                        tokens = try ShellWords.split(line)
                    } catch {
                        throw PlaitError.batchLine(number: number, text: quoted(), problem: "\(error)")
                    }
                    if tokens.isEmpty { continue }
                    let operation: DataOperation
                    do {
                        operation = try parseDataLine(tokens)
                    } catch let error as PlaitError {
                        throw PlaitError.batchLine(number: number, text: quoted(), problem: error.description)
                    } catch {
                        // ArgumentParser's message may quote a whole (huge) word of the line: keep its start.
                        let message = BatchLine.message(for: error).split(separator: "\n").first.map(String.init)
                            ?? "\(error)"
                        throw PlaitError.batchLine(
                            number: number, text: quoted(), problem: message.terminalExcerpt(limit: 200) + ".")
                    }
                    do {
                        _ = try operation.performAsCommand(edit)
                    } catch {
                        throw PlaitError.batchLine(number: number, text: quoted(), problem: "\(error)")
                    }
                    commands += 1
                }
                return edit.appended.count
            }
            return (commands, changes)
        }
    }
}

/// Parses one batch line. The common forms take a hand-written fast path (ArgumentParser costs about a
/// millisecond per line, which would make a 100,000-line import take minutes); anything else, errors
/// included, goes through ArgumentParser, which stays the grammar's reference.
func parseDataLine(_ tokens: [String]) throws -> DataOperation {
    if let operation = DataLineParser.parse(tokens) {
        try operation.validateAsCommand()
        return operation
    }
    try CommandLineCheck.knownCommand(tokens, root: BatchLine.self, path: [])
    let parsed = try BatchLine.parseAsRoot(tokens)
    guard let command = parsed as? DataCommand else {
        throw PlaitError.usage("not a data command (use list add|rename|recolor|move|rm, add, edit, done, reopen, move or rm)")
    }
    // Every line goes to the home and config `batch` itself was given: a line naming another is refused, not
    // silently applied to this one.
    if command.global.home != nil || command.global.config != nil {
        throw PlaitError.usage(
            "--home and --config cannot be given on a batch line: every line goes to the home of `plait batch` "
                + "(run a batch per home)")
    }
    return command.operation
}

/// The fast path of `parse`: nil for anything it does not recognise exactly.
enum DataLineParser {
    static func parse(_ tokens: [String]) -> DataOperation? {
        guard let first = tokens.first else { return nil }
        if first == "list" {
            guard tokens.count >= 2, let parsed = Options(tokens.dropFirst(2)) else { return nil }
            let words = parsed.positional
            switch tokens[1] {
            case "add":
                guard words.count == 1, parsed.to == nil else { return nil }
                return .listAdd(title: words[0], color: parsed.color, top: parsed.top, after: parsed.after)
            case "rename":
                guard words.count == 2, parsed.isPlain else { return nil }
                return .listRename(list: words[0], title: words[1])
            case "recolor":
                guard words.count == 2, parsed.isPlain else { return nil }
                return .listRecolor(list: words[0], color: words[1])
            case "move":
                guard words.count == 1, parsed.color == nil, parsed.to == nil else { return nil }
                return .listMove(list: words[0], top: parsed.top, after: parsed.after)
            case "rm":
                guard words.count == 1, parsed.isPlain else { return nil }
                return .listRemove(list: words[0])
            default: return nil
            }
        }
        guard let parsed = Options(tokens.dropFirst()) else { return nil }
        let words = parsed.positional
        switch first {
        case "add":
            guard words.count == 2, parsed.color == nil, parsed.to == nil else { return nil }
            return .add(list: words[0], text: words[1], top: parsed.top, after: parsed.after)
        case "edit":
            guard words.count == 2, parsed.isPlain else { return nil }
            return .edit(item: words[0], text: words[1])
        case "done", "reopen", "rm":
            guard words.count == 1, parsed.isPlain else { return nil }
            return first == "done" ? .done(item: words[0]) : first == "reopen" ? .reopen(item: words[0]) : .remove(item: words[0])
        case "move":
            guard words.count == 1, parsed.color == nil else { return nil }
            return .move(item: words[0], top: parsed.top, after: parsed.after, to: parsed.to)
        default:
            return nil
        }
    }

    /// Positional words and the few options data commands take; nil on anything unexpected.
    struct Options {
        var positional: [String] = []
        var top = false
        var after: String?
        var to: String?
        var color: String?

        var isPlain: Bool { !top && after == nil && to == nil && color == nil }

        init?(_ tokens: ArraySlice<String>) {
            var iterator = tokens.makeIterator()
            while let token = iterator.next() {
                guard token.hasPrefix("-") else {
                    positional.append(token)
                    continue
                }
                var name = token
                var inline: String?
                if let equals = token.firstIndex(of: "=") {
                    name = String(token[..<equals])
                    inline = String(token[token.index(after: equals)...])
                }
                switch name {
                case "--top":
                    guard inline == nil, !top else { return nil }
                    top = true
                case "--json":
                    guard inline == nil else { return nil }
                case "--after", "--to", "--color":
                    guard let value = inline ?? iterator.next(), !value.hasPrefix("-") || inline != nil else { return nil }
                    switch name {
                    case "--after": after = value
                    case "--to": to = value
                    default: color = value
                    }
                default:
                    return nil
                }
            }
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
        // Every character the grammar cares about is ASCII, so walking UTF-8 bytes is exact and fast.
        let bytes = Array(line.utf8)
        var words: [String] = []
        var current: [UInt8] = []
        var inWord = false
        var index = 0
        func finishWord() {
            if inWord { words.append(String(decoding: current, as: UTF8.self)) }
            current.removeAll(keepingCapacity: true)
            inWord = false
        }
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            switch byte {
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\r"):
                finishWord()
            case UInt8(ascii: "#") where !inWord:
                return words
            case UInt8(ascii: "'"):
                inWord = true
                guard let close = bytes[index...].firstIndex(of: UInt8(ascii: "'")) else { throw Unterminated(quote: "'") }
                current.append(contentsOf: bytes[index..<close])
                index = close + 1
            case UInt8(ascii: "\""):
                inWord = true
                var closed = false
                while index < bytes.count {
                    let next = bytes[index]
                    index += 1
                    if next == UInt8(ascii: "\"") {
                        closed = true
                        break
                    }
                    if next == UInt8(ascii: "\\"), index < bytes.count {
                        let escaped = bytes[index]
                        index += 1
                        if !"\"\\$`".utf8.contains(escaped) { current.append(next) }
                        current.append(escaped)
                    } else {
                        current.append(next)
                    }
                }
                if !closed { throw Unterminated(quote: "\"") }
            case UInt8(ascii: "\\"):
                inWord = true
                if index < bytes.count {
                    current.append(bytes[index])
                    index += 1
                }
            default:
                inWord = true
                current.append(byte)
            }
        }
        finishWord()
        return words
    }
}
