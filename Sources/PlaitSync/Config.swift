import Foundation
import PlaitTLS
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
    /// `store.busy_timeout_seconds`: how long a write waits for another process's write before it gives up.
    public var busyTimeoutSeconds = 10.0

    /// `agent.listen`: where the agent listens for peers.
    public var listen = "0.0.0.0:7400"
    /// `agent.peers`: addresses the agent keeps a connection to, besides paired peers' known addresses.
    public var staticPeers: [String] = []
    /// `agent.log_level`: trace, debug, info, notice, warning, error or critical.
    public var logLevel = "info"
    /// `compaction.interval_seconds`: how often the agent compacts (0 disables it).
    public var compactionIntervalSeconds = 3600
    /// `compaction.peer_grace_days`: a paired peer unseen this long no longer holds compaction back.
    public var peerGraceDays = 30
    /// `sync.batch_changes`: changes per batch sent to a peer at most (each batch is one transaction there).
    public var batchChanges = 8_000
    /// `discovery.enabled`: publish and browse `_plait._tcp` with avahi-daemon (`--no-discovery` turns it off).
    public var discoveryEnabled = true
    /// `discovery.browse_seconds`: how long `plait sync` looks for paired devices by mDNS (it stops sooner once
    /// every one is found). `plait pair` waits up to its `--timeout` instead.
    public var browseSeconds = 3.0
    /// `api.listen`: where the agent serves the local HTTP API (DESIGN §12); "" turns it off. Beyond loopback only
    /// with a password set (`plait gui --set-password`), and then over HTTPS.
    public var apiListen = "127.0.0.1:7480"

    public init() {}

    /// Every key a config file may hold, with its type; anything else is refused so a typo is not ignored.
    static let knownKeys: [String: [String: String]] = [
        "store": ["max_change_bytes": "integer", "synchronous": "string", "checkpoint_interval": "integer",
                  "busy_timeout_seconds": "number"],
        "agent": ["listen": "string", "peers": "array", "log_level": "string"],
        "compaction": ["interval_seconds": "integer", "peer_grace_days": "integer"],
        "sync": ["batch_changes": "integer"],
        "discovery": ["enabled": "boolean", "browse_seconds": "number"],
        "api": ["listen": "string"],
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
                if key == "api" && innerKey == "password" {
                    // A password written here would sit in clear text in a file often shared or backed up.
                    throw PlaitError.config(
                        path: origin,
                        problem: "api.password is not kept in this file; remove it and run `plait gui "
                            + "--set-password`, which stores only a hash of it in the home")
                }
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
            if let value = store["busy_timeout_seconds"] {
                guard let number = value.double ?? value.int.map(Double.init), number >= 0.1, number <= 3600 else {
                    throw PlaitError.config(
                        path: origin, problem: "store.busy_timeout_seconds must be a number from 0.1 to 3600")
                }
                busyTimeoutSeconds = number
            }
        }
        try readAgent(table, origin: origin)
    }

    private mutating func readAgent(_ table: TOMLTable, origin: String) throws {
        if let agent = table["agent"]?.table {
            if let value = agent["listen"] {
                guard let text = value.string, (try? PeerAddress(parsing: text, allowingPortZero: true)) != nil else {
                    throw PlaitError.config(path: origin, problem: "agent.listen must be \"HOST:PORT\"")
                }
                listen = text
            }
            if let value = agent["peers"] {
                guard let array = value.array else {
                    throw PlaitError.config(path: origin, problem: "agent.peers must be a list of \"HOST:PORT\" strings")
                }
                var peers: [String] = []
                for element in array {
                    guard let text = element.string, (try? PeerAddress(parsing: text)) != nil else {
                        throw PlaitError.config(path: origin, problem: "agent.peers must be a list of \"HOST:PORT\" strings")
                    }
                    peers.append(text)
                }
                staticPeers = peers
            }
            if let value = agent["log_level"] {
                let levels = ["trace", "debug", "info", "notice", "warning", "error", "critical"]
                guard let text = value.string, levels.contains(text) else {
                    throw PlaitError.config(path: origin, problem: "agent.log_level must be one of \(levels.joined(separator: ", "))")
                }
                logLevel = text
            }
        }
        if let compaction = table["compaction"]?.table {
            if let value = compaction["interval_seconds"] {
                guard let number = value.int, number >= 0 else {
                    throw PlaitError.config(path: origin, problem: "compaction.interval_seconds must be 0 or more")
                }
                compactionIntervalSeconds = number
            }
            if let value = compaction["peer_grace_days"] {
                guard let number = value.int, number >= 1 else {
                    throw PlaitError.config(path: origin, problem: "compaction.peer_grace_days must be at least 1")
                }
                peerGraceDays = number
            }
        }
        if let sync = table["sync"]?.table, let value = sync["batch_changes"] {
            guard let number = value.int, (1...1_000_000).contains(number) else {
                throw PlaitError.config(path: origin, problem: "sync.batch_changes must be an integer from 1 to 1000000")
            }
            batchChanges = number
        }
        if let discovery = table["discovery"]?.table {
            if let value = discovery["enabled"] {
                guard let flag = value.bool else {
                    throw PlaitError.config(path: origin, problem: "discovery.enabled must be true or false")
                }
                discoveryEnabled = flag
            }
            if let value = discovery["browse_seconds"] {
                guard let number = value.double ?? value.int.map(Double.init), number > 0, number <= 60 else {
                    throw PlaitError.config(path: origin, problem: "discovery.browse_seconds must be a number above 0 and at most 60")
                }
                browseSeconds = number
            }
        }
        if let api = table["api"]?.table, let value = api["listen"] {
            guard let text = value.string else {
                throw PlaitError.config(path: origin, problem: "api.listen must be \"HOST:PORT\" or \"\"")
            }
            if !text.isEmpty { try Self.checkAPIListen(text, origin: origin) }
            apiListen = text
        }
    }

    /// An address beyond loopback is accepted here: whether it is served (a password set, then HTTPS) is the
    /// agent's decision when it starts, which warns and syncs on without the API otherwise.
    public static func checkAPIListen(_ text: String, origin: String) throws {
        guard (try? PeerAddress(parsing: text, allowingPortZero: true)) != nil else {
            throw PlaitError.config(path: origin, problem: "api.listen must be \"HOST:PORT\" or \"\"")
        }
    }

    /// Whether `host` (an api.listen host) reaches this machine only: 127.0.0.0/8, ::1 or localhost.
    public static func isLoopback(host: String) -> Bool {
        ["::1", "localhost"].contains(host.lowercased()) || host.hasPrefix("127.")
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
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw PlaitError.config(path: path, problem: "is a directory, not a file")
        }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw PlaitError.config(path: path, problem: "cannot be read (check that this user may read it)")
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw PlaitError.config(path: path, problem: "cannot be read as UTF-8 text")
        }
        return (try Config(toml: text, origin: path), path)
    }
}
