import Foundation
import HTTPTypes
import Hummingbird
import PlaitCommands

/// What the CLI needs from an answer beyond the JSON to print exactly what it prints without an agent
/// (DESIGN §12: output, errors and exit codes identical either way). Sent on both transports; harmless to others.
extension APIRoutes {
    /// An edit's answer: the sentence `plait <command>` prints (percent-encoded UTF-8, as a header value must be
    /// ASCII). The JSON body stays `EditOutput`, exactly what `--json` prints.
    public static let commandMessageHeader = HTTPField.Name("Plait-Message")!
    /// An error answer: "invalid" when the request contradicts itself (`CommandError.invalid`), which the CLI
    /// reports as a usage error (exit status 64, the command's usage below it) rather than a plain failure.
    public static let errorKindHeader = HTTPField.Name("Plait-Error-Kind")!

    /// `response` carrying the CLI's sentence for an edit.
    static func withCommandMessage(_ response: Response, _ message: String) -> Response {
        var response = response
        var unreserved = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789")
        unreserved.insert(charactersIn: "-._~")
        response.headers[commandMessageHeader] = message.addingPercentEncoding(withAllowedCharacters: unreserved)
        return response
    }

    /// Marks an error answer whose error the CLI reports as a usage error.
    static func markErrorKind(of error: any Error, in response: inout Response) {
        if case CommandError.invalid = error { response.headers[errorKindHeader] = "invalid" }
    }
}
