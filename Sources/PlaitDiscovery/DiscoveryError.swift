/// What can go wrong setting up discovery or publishing. A missing avahi-daemon is not an error: it is
/// `DiscoveryState.unavailable`, and discovery retries by itself.
public enum DiscoveryError: Error, CustomStringConvertible {
    /// Avahi's event loop could not be created or started (out of memory or file descriptors).
    case eventLoop(operation: String)
    /// The announcement cannot be published as given: `reason` says which field is wrong.
    case invalidAnnouncement(reason: String)
    /// avahi-daemon refused `operation`; `code` is Avahi's error code and `message` its text.
    case avahi(operation: String, code: Int32, message: String)

    public var description: String {
        switch self {
        case .eventLoop(let operation):
            return "could not \(operation) for Avahi's event loop; the system is out of memory or file descriptors."
        case .invalidAnnouncement(let reason):
            return "cannot publish this device on the LAN: \(reason)."
        case .avahi(let operation, let code, let message):
            return "avahi-daemon refused to \(operation) (\(message), error \(code)); check `avahi-daemon` and "
                + "its log."
        }
    }
}

/// What is wrong in one of discovery's `unavailable` warnings, without what it says follows ("…; discovery is
/// off, static peers still work"), which each command words for itself.
public func unavailabilityReason(_ warning: String) -> String {
    let reason = warning.components(separatedBy: "; discovery is off").first ?? warning
    return reason.hasSuffix(".") ? String(reason.dropLast()) : reason
}
