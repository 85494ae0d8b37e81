/// Errors of a command's request itself, found before or while it is resolved; other failures keep their own
/// module's error (`PlaitError.notFound`, `StoreError`, …). The CLI reports `.invalid` as a usage error (with the
/// command's usage below it), the local API as 400.
public enum CommandError: Error, CustomStringConvertible, Sendable, Equatable {
    /// The request contradicts itself or misses something (`--top` and `--after` both, a blank title, an item
    /// after itself); `message` is the sentence shown, the same from the CLI and the API.
    case invalid(String)
    /// An API edit named no known operation or lacked a field it needs (`field` names it).
    case malformed(String)

    public var description: String {
        switch self {
        case let .invalid(message): return message
        case let .malformed(message): return message
        }
    }
}
