import PlaitDiscovery
import PlaitStore
import PlaitTLS
import PlaitWire

/// Why an interactive pairing attempt ended without trusting anyone. Whatever the case, nothing was
/// stored on this device. The description is one sentence a user can act on.
public enum PairingError: Error, CustomStringConvertible, Sendable, Equatable {
    /// This device's user said the codes differ (or did not say yes).
    case refusedHere
    /// The other device's user said the codes differ.
    case refusedByPeer
    /// The responder's nonce does not match the commitment it sent first: a device in the middle
    /// tried to choose the code. The initiator aborts before any code is shown.
    case commitmentMismatch
    /// The peer sent a message out of turn (say, its nonce before the commitment) or a second attempt.
    case protocolViolation(String)
    /// A frame from the peer did not decode, or was over the pairing limit.
    case wire(WireError)
    /// The connection ended before both answers were exchanged.
    case connectionLost
    /// The connection ended before the code was known: the other side closed it before its part of the code.
    case closedBeforeCode
    /// The attempt took longer than allowed (no device came, or the answers did not).
    case timedOut(after: Duration)
    /// The address did not complete a connection and a TLS handshake within `after` (a port that accepts and says
    /// nothing, or a host that does not answer at all).
    case silentAddress(String, after: Duration)
    /// The connection does not speak the pairing protocol (it negotiated `negotiated`).
    case notPairing(negotiated: String?)
    /// The other end is this very device.
    case ownDevice
    /// Connecting, listening or the TLS handshake failed.
    case tls(TLSError)
    /// Both said yes, but the peer could not be stored.
    case store(StoreError)
    /// This device's key or certificate cannot be loaded, so it cannot connect to anyone: `problem` says why.
    case identity(problem: String)
    /// `plait pair` without an address needs avahi-daemon, and it cannot be reached; `warning` says why.
    case discoveryUnavailable(warning: String)
    /// Discovery could not be started or could not publish this device.
    case discovery(DiscoveryError)
    /// No other device in pairing mode showed up on the LAN in time.
    case noDeviceFound(after: Duration)
    /// Several devices were in pairing mode and the user chose none (end of input).
    case noDeviceChosen
    /// The device found in pairing mode as `name` could not be reached at `address`.
    case unreachable(name: String, address: String, reason: String)
    /// The device that answered is not the one found in pairing mode under `name`: its certificate does not
    /// hash to the tag that device published.
    case unexpectedPeer(name: String, connected: DeviceID)

    public var description: String {
        switch self {
        case .refusedHere:
            return "codes were refused: nothing stored. Pair again, and check both screens, if it was a mistake."
        case .refusedByPeer:
            return "pairing cancelled: the other device refused (its user saw a different code, or said no); "
                + "nothing stored."
        case .commitmentMismatch:
            return "the other device's nonce does not match the commitment it sent: something between the two "
                + "devices is interfering. Nothing stored; pair again on a network you trust."
        case .protocolViolation(let detail):
            return "the other device broke the pairing protocol (\(detail)); nothing stored."
        case .wire(let error):
            return "the pairing connection was closed because \(error.description) Nothing stored."
        case .connectionLost:
            return "the connection closed before both devices had answered: nothing stored. Run `plait pair` "
                + "again on both devices."
        case .closedBeforeCode:
            return "the other device closed the connection before a code was shown: it may be pairing with another "
                + "device that answered first (one attempt per `plait pair --listen` run), or it stopped. Nothing "
                + "stored; run `plait pair` again on both devices."
        case .tls(.closedDuringHandshake):
            return "the other device closed the connection during the TLS handshake: it is not taking pairing "
                + "connections now (it may be pairing with another device, or be busy). Nothing stored; run "
                + "`plait pair` again on both devices."
        case .silentAddress(let address, let after):
            return "\(address) did not answer within \(after) (no TLS handshake): it is not a plait device in "
                + "pairing mode, it cannot be reached, or it is busy. Check the address and port, and run `plait pair "
                + "--listen` there. Nothing stored."
        case .timedOut(let after):
            return "pairing did not finish within \(after): nothing stored. Run `plait pair` on both devices "
                + "at the same time (or give a longer --timeout)."
        case .notPairing(let negotiated):
            return "the connection speaks \(negotiated ?? "no protocol"), not pairing; nothing stored."
        case .ownDevice:
            return "that is this device itself: pair with another device. Nothing stored."
        case .tls(.refused(let address, let reason)):
            return "could not connect to \(address) (\(reason)): run `plait pair --listen HOST:PORT` on the other "
                + "device first (it stops listening once a device pairs with it), and check the address and port."
        case .tls(let error):
            return error.description
        case .store(let error):
            return "both devices confirmed, but storing the other device failed: \(error.description)"
        case .identity(let problem):
            return "cannot pair without this device's certificate: \(problem)"
        case .discoveryUnavailable(let warning):
            return "cannot look for devices in pairing mode: \(unavailabilityReason(warning)). Start avahi-daemon "
                + "(`systemctl start avahi-daemon`), or pair without it: `plait pair --listen HOST:PORT` on one "
                + "device and `plait pair --connect HOST:PORT` on the other, or `plait pair --trust DEVICE-ID`."
        case .discovery(let error):
            return "cannot look for devices in pairing mode: \(error.description) Pair without discovery: "
                + "`plait pair --listen HOST:PORT` / `--connect HOST:PORT`, or `--trust DEVICE-ID`."
        case .noDeviceFound(let after):
            return "no device in pairing mode showed up within \(after): run `plait pair` on the other device too, "
                + "on the same network (or use `plait pair --listen`/`--connect`, or `--trust DEVICE-ID`)."
        case .noDeviceChosen:
            return "no device was chosen: nothing stored. Run `plait pair` again and answer with a number."
        case .unreachable(let name, let address, let reason):
            return "could not connect to \(name) at \(address) (\(reason)): it may have left pairing mode. Run "
                + "`plait pair` again on both devices."
        case .unexpectedPeer(let name, let connected):
            return "the device that answered (\(connected)) is not the one found in pairing mode as \"\(name)\": "
                + "nothing stored. Run `plait pair` again on both devices."
        }
    }

    public static func == (lhs: PairingError, rhs: PairingError) -> Bool {
        switch (lhs, rhs) {
        case (.refusedHere, .refusedHere), (.refusedByPeer, .refusedByPeer), (.commitmentMismatch, .commitmentMismatch),
            (.connectionLost, .connectionLost), (.closedBeforeCode, .closedBeforeCode), (.ownDevice, .ownDevice):
            return true
        case (.protocolViolation(let a), .protocolViolation(let b)): return a == b
        case (.wire(let a), .wire(let b)): return a == b
        case (.timedOut(let a), .timedOut(let b)): return a == b
        case (.silentAddress(let a, let x), .silentAddress(let b, let y)): return a == b && x == y
        case (.notPairing(let a), .notPairing(let b)): return a == b
        case (.tls(let a), .tls(let b)): return a.description == b.description
        case (.store(let a), .store(let b)): return a.description == b.description
        case (.discoveryUnavailable(let a), .discoveryUnavailable(let b)): return a == b
        case (.discovery(let a), .discovery(let b)): return a.description == b.description
        case (.noDeviceFound(let a), .noDeviceFound(let b)): return a == b
        case (.noDeviceChosen, .noDeviceChosen): return true
        case (.unexpectedPeer(let a, let x), .unexpectedPeer(let b, let y)): return a == b && x == y
        case (.unreachable(let a, let x, let r), .unreachable(let b, let y, let q)): return a == b && x == y && r == q
        default: return false
        }
    }
}
