import ArgumentParser
import Foundation
import PlaitCommands
import PlaitOutput
import PlaitSync

extension GlobalOptions {
    /// Runs `body` with the agent running on this home, when its Unix socket takes a connection: commands then go
    /// through it, so an edit or a read costs the same on a 100,000-item home as on an empty one (DESIGN §12).
    /// nil: no agent, a socket left by a killed one, or an agent of another home (which did nothing) — the
    /// command then opens the store itself and says nothing about it.
    ///
    /// The config is loaded first either way, so a broken config file fails the same with or without an agent.
    func throughAgent<T>(_ body: (AgentClient) throws -> T) throws -> T? {
        _ = try loadConfig()
        guard let agent = AgentClient.connect(home: homePath, environment: environment) else { return nil }
        do {
            return try body(agent)
        } catch AgentClientError.otherHome {
            return nil
        }
    }

    /// A read command's output: from the agent's memory when one serves the home (GET `target`), else built by
    /// `local` from the store. With `json`, the output is printed here and nil returned: the agent's bytes as
    /// they came (written by the same encoder as `printJSON`), or `local`'s value through `printJSON`.
    func readOutput<T: Codable>(_ target: String, json: Bool, local: (Home) throws -> T) throws -> T? {
        let answered = try throughAgent { agent -> T? in
            let body = try agent.get(target)
            if json {
                try printAgentJSON(body)
                return nil
            }
            return try agent.decode(T.self, from: body, target: target)
        }
        if let answered { return answered }
        let output = try local(try openHome())
        if json {
            try printJSON(output)
            return nil
        }
        return output
    }
}

extension AgentClient {
    /// The header of an edit's answer carrying the sentence the CLI prints (percent-encoded UTF-8), so the
    /// plain output through the agent is the CLI's own; see `APIRoutes.commandMessageHeader`.
    static let messageHeader = "plait-message"
    /// The header of an error answer saying the request itself was invalid (`CommandError.invalid`): the CLI
    /// reports that as a usage error, with the command's usage below it and exit status 64.
    static let errorKindHeader = "plait-error-kind"

    /// GET `target`: the body of a 2xx answer (JSON, written by the encoder `--json` uses).
    func get(_ target: String) throws -> [UInt8] {
        let response = try request("GET", target)
        try Self.check(response)
        return response.body
    }

    /// An answer's body decoded as `T`.
    func decode<T: Decodable>(_ type: T.Type, from body: [UInt8], target: String) throws -> T {
        do {
            return try JSONDecoder().decode(T.self, from: Data(body))
        } catch {
            throw AgentClientError.broken(socket: socketPath, problem: "its answer to \(target) does not decode")
        }
    }

    /// POST /api/edit: the agent validates, resolves and commits exactly as the CLI would. Returns the CLI's
    /// sentence and the `EditOutput` JSON.
    func edit(_ operation: DataOperation) throws -> (message: String, json: [UInt8]) {
        let body = try JSONEncoder().encode(operation)
        let response = try request("POST", "/api/edit", json: Array(body))
        try Self.check(response)
        guard let message = response.headers[Self.messageHeader]?.removingPercentEncoding else {
            throw AgentClientError.broken(socket: socketPath, problem: "its answer to an edit carries no message")
        }
        return (message, response.body)
    }

    /// POST /api/login-codes: a single-use login code for the page and the URL carrying it.
    func loginCode() throws -> LoginCodeOutput {
        let response = try request("POST", "/api/login-codes", json: Array("{}".utf8))
        try Self.check(response)
        return try decode(LoginCodeOutput.self, from: response.body, target: "/api/login-codes")
    }

    /// Throws an error answer as the CLI would have thrown the error itself: the same sentence, the same exit
    /// status (64 and the usage for an invalid request, 1 otherwise).
    static func check(_ response: Response) throws {
        guard !(200..<300).contains(response.status) else { return }
        if response.status == 421 { throw AgentClientError.otherHome }
        struct Failure: Decodable { let error: String }
        let message = (try? JSONDecoder().decode(Failure.self, from: Data(response.body)))?.error
            ?? "the agent refused the command (HTTP \(response.status)) without saying why; see its log."
        if response.headers[errorKindHeader] == "invalid" { throw ValidationError(message) }
        throw AgentClientError.agent(status: response.status, message: message)
    }

    /// A query parameter's value, percent-encoded for a request target.
    static func query(_ value: String) -> String { percentEncoded(value, keeping: "") }
}

/// Writes bytes the agent answered (JSON written by the same encoder `--json` uses) to standard output.
func printAgentJSON(_ bytes: [UInt8]) throws {
    fflush(nil)
    try writeAll(bytes, to: STDOUT_FILENO)
}
