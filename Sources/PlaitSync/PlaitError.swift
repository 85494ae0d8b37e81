import PlaitCore
import PlaitStore
import PlaitTLS

/// Errors of the composition layer; the CLI prints `description` as one sentence and exits non-zero.
public enum PlaitError: Error, CustomStringConvertible, Sendable {
    /// The config file does not parse or holds an unknown key or a bad value.
    case config(path: String, problem: String)
    /// There is no device home where one was expected.
    case noHome(path: String)
    /// Another `plait agent` holds the home's agent lock (`pid` as written in the lock file, if readable).
    case agentRunning(pid: Int32?, home: String)
    /// `plait init` found an existing home.
    case homeExists(path: String)
    /// A file in the home could not be created or read.
    case file(path: String, problem: String)
    /// A LIST or ITEM argument matches nothing; `candidates` are similar ones (or all, when few), `total` how
    /// many there are to choose from (nil: as many as the candidates).
    /// `hint`: one sentence more, where what was typed names something else (a list, an item of another list).
    case notFound(what: String, query: String, candidates: [String], total: Int? = nil, hint: String? = nil)
    /// A LIST or ITEM argument matches several objects.
    case ambiguous(what: String, query: String, candidates: [String])
    /// A command's arguments are wrong in a way the parser cannot see.
    case usage(String)
    case store(StoreError)
    case identity(IdentityError)
    case core(CoreError)
    /// A line of `plait batch` failed; nothing of the batch was written. `text` is what is quoted of the line
    /// (its start, escaped: see `terminalExcerpt`).
    case batchLine(number: Int, text: String, problem: String)

    public var description: String {
        switch self {
        case let .config(path, problem):
            return "config \(path): \(problem). Every key is described in config/plait.toml of plait's source "
                + "(README, \"Commands\")."
        case let .noHome(path): return "no plait device at \(path): run `plait init` first, or pass --home."
        case let .agentRunning(pid, home):
            let holder = pid.map { "another plait agent (PID \($0))" } ?? "another plait agent"
            return "\(holder) is already running on \(home); only one agent may serve a home. Stop that one first"
                + (pid.map { " (kill \($0))" } ?? "") + ", or pass another --home."
        case let .homeExists(path):
            return "\(path) already holds a plait device; nothing was changed. Use another --home to create a new one."
        case let .file(path, problem): return "\(path): \(problem)."
        case let .notFound(what, query, candidates, total, hint):
            let list: String
            if !candidates.isEmpty {
                list = "candidates: " + candidates.map(\.terminalSafe).joined(separator: "; ")
            } else if let total, total > 0 {
                let none = total == 1 ? "the only \(what) is not similar" : "none of the \(total) \(what)s is similar"
                list = none + "; `plait show` lists them"
            } else {
                list = "there are none"
            }
            // A short hex query was meant as an ID prefix, which needs 4 digits (a new user typed `done c33`).
            let short = (1...3).contains(query.count) && query.allSatisfy(\.isHexDigit)
            return "no \(what) matches '\(query.terminalExcerpt())' (\(list)); nothing was changed."
                + (short ? " An ID prefix has at least 4 hex digits." : "") + (hint.map { " " + $0 } ?? "")
        case let .ambiguous(what, query, candidates):
            return "'\(query.terminalExcerpt())' matches several \(what)s: "
                + "\(candidates.map(\.terminalSafe).joined(separator: "; ")); "
                + "give a longer ID prefix. Nothing was changed."
        case let .usage(message): return message
        case let .store(error): return error.description
        case let .identity(error): return error.description
        case let .core(error): return error.description
        case let .batchLine(number, text, problem):
            // A problem without its own full stop gets one (a new user saw "(run a batch per home) Nothing of …").
            let said = problem.hasSuffix(".") ? problem : problem + "."
            return "batch line \(number) (\(text)): \(said) Nothing of the batch was written."
        }
    }
}
