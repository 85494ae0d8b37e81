import Foundation
import TOMLKit

/// The settings `config/plait.toml` documents. Every key is optional; a missing file means defaults.
public struct Config: Sendable, Equatable {
    /// `store.max_change_bytes`: the largest change accepted, written or pulled.
    public var maxChangeBytes = 1 << 20
    /// `store.synchronous`: "full" (every commit reaches the disk) or "normal" (faster; a power cut may lose
    /// the last commits but never corrupts the store).
    public var synchronousFull = true
    /// `store.checkpoint_interval`: changes between stored checkpoints (late changes roll back to one).
    public var checkpointInterval = 10_000

    public init() {}

    /// Every key a config file may hold, with its type; anything else is refused so a typo is not ignored.
    static let knownKeys: [String: [String: String]] = [
        "store": ["max_change_bytes": "integer", "synchronous": "string", "checkpoint_interval": "integer"],
    ]

    /// Parses TOML text. `origin` names the file in errors.
    public init(toml text: String, origin: String) throws {
        let table: TOMLTable
        do {
            table = try TOMLTable(string: text)
        } catch let error as TOMLParseError {
            throw PlaitError.config(path: origin, problem: "line \(error.source.begin.line): \(error.description)")
        } catch {
            throw PlaitError.config(path: origin, problem: "\(error)")
        }
        for key in table.keys {
            guard let section = Self.knownKeys[key] else {
                throw PlaitError.config(path: origin, problem: "unknown section [\(key)]")
            }
            guard let inner = table[key]?.table else {
                throw PlaitError.config(path: origin, problem: "\(key) must be a table ([\(key)])")
            }
            for innerKey in inner.keys where section[innerKey] == nil {
                throw PlaitError.config(path: origin, problem: "unknown key \(key).\(innerKey)")
            }
        }
        if let store = table["store"]?.table {
            if let value = store["max_change_bytes"] {
                guard let number = value.int, number >= 1024, number <= 64 << 20 else {
                    throw PlaitError.config(path: origin, problem: "store.max_change_bytes must be an integer from 1024 to 67108864")
                }
                maxChangeBytes = number
            }
            if let value = store["synchronous"] {
                guard let text = value.string, ["full", "normal"].contains(text) else {
                    throw PlaitError.config(path: origin, problem: "store.synchronous must be \"full\" or \"normal\"")
                }
                synchronousFull = text == "full"
            }
            if let value = store["checkpoint_interval"] {
                guard let number = value.int, number >= 100 else {
                    throw PlaitError.config(path: origin, problem: "store.checkpoint_interval must be an integer of at least 100")
                }
                checkpointInterval = number
            }
        }
    }

    /// Where the config is: `--config`, else `$PLAIT_CONFIG`, else `$XDG_CONFIG_HOME/plait/plait.toml`
    /// (default `~/.config`). An explicitly named file must exist; the XDG one may be absent (defaults).
    public static func load(explicitPath: String?, environment: [String: String]) throws -> (Config, String?) {
        let explicit = explicitPath ?? environment["PLAIT_CONFIG"].flatMap { $0.isEmpty ? nil : $0 }
        let path: String
        if let explicit {
            path = explicit
            guard FileManager.default.fileExists(atPath: path) else {
                throw PlaitError.config(path: path, problem: "no such file")
            }
        } else {
            let base = environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 }
                ?? ((environment["HOME"] ?? NSHomeDirectory()) + "/.config")
            path = base + "/plait/plait.toml"
            guard FileManager.default.fileExists(atPath: path) else { return (Config(), nil) }
        }
        guard let data = FileManager.default.contents(atPath: path), let text = String(data: data, encoding: .utf8) else {
            throw PlaitError.config(path: path, problem: "cannot be read as UTF-8 text")
        }
        return (try Config(toml: text, origin: path), path)
    }
}
