import Logging
import PlaitDiscovery

extension Discovery {
    /// Discovery for a one-shot command, which reports discovery's state itself (one warning, a doctor line):
    /// discovery's own log would repeat it.
    static func forCommand(retryDelay: Duration = .seconds(5)) throws(DiscoveryError) -> Discovery {
        let silent = Logger(label: "plait.discovery", factory: { _ in SwiftLogNoOpLogHandler() })
        return try Discovery(logger: silent, retryDelay: retryDelay)
    }
}
