import Foundation
import PlaitCore
import PlaitTLS

/// How log lines and messages name a peer: the name it gives itself, made safe to print, with the short form
/// of its Device ID; only the short form when it gives no name (never "session with  ended").
public func peerLabel(name: String, deviceID: String) -> String {
    let short = (try? DeviceID(parsing: deviceID))?.shortForm ?? deviceID.terminalExcerpt(limit: 16)
    let shown = name.trimmingCharacters(in: .whitespaces).isEmpty ? "" : name.terminalExcerpt(limit: 64)
    return shown.isEmpty ? "device \(short)" : "\(shown) (\(short))"
}

extension SessionResult {
    /// The peer as log lines and messages name it (see `peerLabel`).
    public var peerLabel: String { PlaitSync.peerLabel(name: peerName, deviceID: peerDeviceID) }
}
