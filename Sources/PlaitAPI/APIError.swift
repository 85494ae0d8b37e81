import Hummingbird
import PlaitCommands
import PlaitCore
import PlaitStore
import PlaitSync
import PlaitTLS

/// Errors of the local API. Each becomes a response `{"error": description}` with `status`; the description is
/// one sentence saying what happened and what to do, like every plait error.
public enum APIError: Error, CustomStringConvertible, Sendable {
    /// No valid session cookie or bearer token (401).
    case unauthorized(String)
    /// The request breaks a browser rule: a foreign Host or Origin (403).
    case forbidden(String)
    /// No such endpoint, or no such list, item or device (404).
    case notFound(String)
    /// The request is malformed or invalid (400).
    case badRequest(String)
    /// The request is valid but the data says no (409): the item is already completed.
    case conflict(String)
    /// A non-GET without `Content-Type: application/json` (415).
    case unsupportedMediaType(String)
    /// A body over the limit (413).
    case tooLarge(limit: Int)
    /// What the request needs is not running here (503): an endpoint that needs the agent.
    case unavailable(String)
    /// The listener could not bind `address`; `problem` says why in words, `detail` as the system said it.
    case listen(address: String, problem: String, detail: String)
    /// Too many wrong passwords from this source (or from everywhere): the next try is checked after `wait` (429).
    case tooManyTries(wait: Duration, shared: Bool = false)
    /// `api.listen` is not a loopback address and no password is set: other machines would reach the API.
    case noPassword(address: String)
    /// The API is off because of `error` (the agent logs this and goes on).
    indirect case off(because: APIError)
    /// The request ended before it was whole (the client hung up mid-body) or was cut by the agent's stop; nobody
    /// reads the answer (400), and it is logged at debug level only.
    case requestEnded(String)

    private var isNoPassword: Bool {
        if case .noPassword = self { return true }
        return false
    }

    /// Whole seconds, rounded up (a wait of 0.2 s is said as 1 s).
    static func seconds(_ duration: Duration) -> Int64 {
        duration.components.seconds + (duration.components.attoseconds > 0 ? 1 : 0)
    }

    /// Wraps any start failure as `.off`.
    static func turnedOff(by error: any Error) -> APIError {
        .off(because: error as? APIError ?? .unavailable("\(error)"))
    }

    public var status: HTTPResponse.Status {
        switch self {
        case .unauthorized: return .unauthorized
        case .forbidden: return .forbidden
        case .notFound: return .notFound
        case .badRequest, .requestEnded: return .badRequest
        case .conflict: return .conflict
        case .unsupportedMediaType: return .unsupportedMediaType
        case .tooLarge: return .contentTooLarge
        case .tooManyTries: return .tooManyRequests
        case .unavailable, .listen, .noPassword, .off: return .serviceUnavailable
        }
    }

    public var description: String {
        switch self {
        case let .unauthorized(message), let .forbidden(message), let .notFound(message), let .badRequest(message),
            let .conflict(message), let .unsupportedMediaType(message), let .unavailable(message):
            return message
        case let .tooLarge(limit): return "the request body is larger than \(limit) bytes; send less."
        case let .requestEnded(detail): return "the request ended before it was whole (\(detail))."
        case let .listen(address, problem, detail):
            // NIO's own text ("bind(descriptor:ptr:bytes:): … (errno: 98)") only where the problem is not known.
            return problem == "cannot be bound" ? "\(address) \(problem) (\(detail))" : "\(address) \(problem)"
        case let .tooManyTries(wait, shared) where shared:
            // The shared back-off grows while other addresses go on guessing: the wait is a floor, not a promise
            // (hostile tester 2026-11-25-i, I4: the owner waited as told and was refused again).
            return "too many wrong passwords from several addresses; wait at least \(Self.seconds(wait)) s (longer "
                + "while they go on). An address the right password came from before is let through."
        case let .tooManyTries(wait, _):
            return "too many wrong passwords; wait \(Self.seconds(wait)) s before the next try."
        case let .noPassword(address):
            return "api.listen \(address) is not a loopback address, and serving other machines needs a password"
        case let .off(error) where error.isNoPassword:
            return "local API off: \(error); the agent syncs as usual. Run `plait gui --set-password` and restart the "
                + "agent (or set api.listen to a loopback address such as 127.0.0.1:7480)."
        case let .off(error):
            return "local API off: \(error); the agent syncs as usual. Set api.listen to a free port "
                + "(or \"\" to turn the API off) and restart the agent."
        }
    }

    /// The API's answer to any error a handler threw: its status and sentence. Errors of the commands keep the
    /// CLI's message; the status says what kind of failure it is.
    static func classify(_ error: any Error) -> APIError {
        switch error {
        case let error as APIError: return error
        case let error as CommandError:
            return .badRequest(error.description)
        case let error as CoreError: return .badRequest(error.description)
        case is CancellationError:
            return .requestEnded("the agent is stopping")
        case let error as PlaitError:
            switch error {
            case .notFound: return .notFound(error.description)
            case .ambiguous, .core, .batchLine: return .badRequest(error.description)
            case .usage: return .conflict(error.description)
            default: return .unavailable(error.description)
            }
        case let StoreError.rejected(error):
            // The edit itself breaks a rule of the data (a change over store.max_change_bytes): the client's to
            // change, not a reason to retry (it was 503, hostile tester 2026-11-25, G6).
            return .badRequest(error.description)
        case let error as StoreError: return .unavailable(error.description)
        case let error as PeerAddressError: return .badRequest(error.description)
        case let error as DecodingError: return .badRequest(describe(error))
        case let error as any HTTPResponseError:
            switch error.status {
            case .notFound: return .notFound("no such endpoint; docs/openapi.yaml lists them.")
            case .contentTooLarge: return .tooLarge(limit: APILimits.maxBody)
            case .methodNotAllowed: return .notFound("this endpoint takes another method; see docs/openapi.yaml.")
            default: return .badRequest("the request was refused (\(error.status.code)); see docs/openapi.yaml.")
            }
        default: return .unavailable("\(error)")
        }
    }

    /// A JSON decoding failure in words: which field, what was wrong.
    static func describe(_ error: DecodingError) -> String {
        let path = { (context: DecodingError.Context) in
            context.codingPath.map(\.stringValue).joined(separator: ".")
        }
        switch error {
        case let .keyNotFound(key, _): return "the body lacks the field \"\(key.stringValue)\"; see docs/openapi.yaml."
        case let .typeMismatch(type, context):
            return "the field \"\(path(context))\" must be \(Self.name(of: type)); see docs/openapi.yaml."
        case let .valueNotFound(type, context):
            return "the field \"\(path(context))\" must be \(Self.name(of: type)), not null; see docs/openapi.yaml."
        case .dataCorrupted: return "the body is not a JSON object; send one (see docs/openapi.yaml)."
        @unknown default: return "the body does not decode; see docs/openapi.yaml."
        }
    }

    private static func name(of type: Any.Type) -> String {
        switch type {
        case is String.Type: return "a string"
        case is Bool.Type: return "true or false"
        case is Int.Type: return "an integer"
        default: return "\(type)"
        }
    }
}
