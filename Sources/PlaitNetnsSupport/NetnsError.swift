/// What can go wrong building a test LAN or talking to a process in it.
public enum NetnsError: Error, CustomStringConvertible {
    /// A set-up command (`ip …`, a daemon) failed; `output` is what it printed.
    case command(arguments: [String], status: Int32, output: String)
    /// `waitingFor` did not happen within `after`; `output` is the transcript so far.
    case timeout(waitingFor: String, after: Duration, output: String)
    /// `process` exited (with `status`) before printing what was waited for.
    case exited(process: String, status: Int32, output: String)

    public var description: String {
        switch self {
        case .command(let arguments, let status, let output):
            return "`\(arguments.joined(separator: " "))` failed (status \(status)): \(output)"
        case .timeout(let waitingFor, let after, let output):
            return "timed out after \(after) waiting for \(waitingFor)\n\(output)"
        case .exited(let process, let status, let output):
            return "\(process) exited with status \(status) before printing what was awaited\n\(output)"
        }
    }
}
