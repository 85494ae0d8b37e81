import Foundation
import PlaitCore
import PlaitStore
import PlaitTLS

extension Home {
    /// Parses a Device ID typed by a user; a one-character typo is caught by the check characters.
    public static func parseDeviceID(_ text: String) throws -> DeviceID {
        do {
            return try DeviceID(parsing: text)
        } catch {
            throw wrap(error)
        }
    }

    /// Headless pairing: trusts `deviceID` (read off the other device with `plait id`).
    ///
    /// A device in the pending list (it tried to connect unpaired) brings its claimed name, marked "(unverified)",
    /// unless `name` is given; not an address (the host its dial came from says nothing of the port it listens
    /// on), so it has one only when `address` is given. A device already paired keeps its name unless `name` is given.
    public func trust(_ text: String, address: String?, name: String?) throws -> PairedDevice {
        let id = try Self.parseDeviceID(text)
        guard id != (try identity).deviceID else {
            throw PlaitError.usage("that is this device's own ID; run `plait pair --trust` with the other device's ID.")
        }
        var parsed = try address.map { try PeerAddress(parsing: $0) }
        let pending = try store.pendingPeers().first { $0.deviceID == id.description }
        if parsed == nil, let remembered = pending?.address {
            parsed = try? PeerAddress(parsing: remembered)
        }
        let existing = try store.peers().first { $0.deviceID == id.description }
        let claimed = pending.flatMap { Self.unverifiedName($0.name) }
        let stored = name ?? existing?.name ?? claimed ?? "device \(id.shortForm)"
        try store.trust(deviceID: id.description, name: stored, address: parsed?.description, now: Replica.now())
        return PairedDevice(
            deviceID: id, name: stored, address: parsed ?? existing?.address.flatMap { try? PeerAddress(parsing: $0) },
            code: nil, alreadyPaired: existing != nil)
    }

    /// A name a device claimed before it was paired, marked as such; nil when it claimed none.
    static func unverifiedName(_ claimed: String) -> String? {
        let name = claimed.trimmingCharacters(in: .whitespaces)
        // The agent records "(unknown)" for a refused device whose certificate names nobody.
        guard !name.isEmpty, name != "(unknown)" else { return nil }
        return name.hasSuffix(" (unverified)") ? name : name + " (unverified)"
    }

    /// Revokes trust in a device, and remembers it was unpaired: no peer's succession statement brings it back
    /// (PROTOCOL.md §21); pairing it again does.
    public func untrust(_ text: String) throws -> DeviceID {
        let id = try Self.parseDeviceID(text)
        guard try store.untrust(deviceID: id.description, now: Replica.now()) else {
            throw PlaitError.notFound(
                what: "paired device", query: text, candidates: try store.peers().map { "\($0.deviceID) (\($0.name))" })
        }
        return id
    }
}
