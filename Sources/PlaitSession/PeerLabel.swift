import Foundation
import PlaitCore
import PlaitTLS

/// How log lines and messages name a peer: the name it gives itself, made safe to print, or the short form of
/// its Device ID when that name is blank (never "session with  ended").
public func peerLabel(name: String, deviceID: String) -> String {
    guard name.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else { return name.terminalExcerpt(limit: 64) }
    return "device " + ((try? DeviceID(parsing: deviceID))?.shortForm ?? deviceID.terminalExcerpt(limit: 16))
}

extension SessionResult {
    /// The peer as log lines and messages name it (see `peerLabel`).
    public var peerLabel: String { PlaitSession.peerLabel(name: peerName, deviceID: peerDeviceID) }
}
