// Outputs of the local API that no command prints (the others are in Outputs.swift, shared with `--json`).

/// `GET /api/holders?change=T:S`: which devices hold a change.
public struct HoldersOutput: Codable, Sendable, Equatable {
    public var change: String
    public var devices: [Device]

    public init(change: String, devices: [Device]) {
        self.change = change
        self.devices = devices
    }

    public struct Device: Codable, Sendable, Equatable {
        /// This device: by its store. A paired one: by the summary it last acknowledged.
        public var holds: Bool
        public var id: String
        public var name: String
        /// Whether it is the device answering.
        public var this: Bool

        public init(holds: Bool, id: String, name: String, this: Bool) {
            self.holds = holds
            self.id = id
            self.name = name
            self.this = this
        }
    }
}

/// The answer of POST /api/session: the session's page key. The cookie set with it is not a session on its own
/// (browsers send it to every port of the host); every request of the session sends this key too, in the
/// `Plait-Page-Key` header, and the page keeps it where only its own origin reads it (localStorage).
public struct SessionOutput: Codable, Sendable, Equatable {
    public var pageKey: String

    public init(pageKey: String) {
        self.pageKey = pageKey
    }

    public enum CodingKeys: String, CodingKey { case pageKey = "page_key" }
}

/// The answer of POST /api/login-codes.
public struct LoginCodeOutput: Codable, Sendable, Equatable {
    public var code: String
    /// ISO-8601, UTC.
    public var expires: String
    public var url: String

    public init(code: String, expires: String, url: String) {
        self.code = code
        self.expires = expires
        self.url = url
    }
}

/// The answer of POST /api/unpair: the device no longer trusted.
public struct UnpairOutput: Codable, Sendable, Equatable {
    public var device: String

    public init(device: String) { self.device = device }
}

/// `GET /api/pairing` (and the answer of the pairing POSTs): devices found in pairing mode, and the attempt.
public struct PairingOutput: Codable, Sendable, Equatable {
    public var devices: [PairingDeviceOutput]
    /// The current or last attempt; null before the first.
    @Nullable public var session: PairingSessionOutput?

    public init(devices: [PairingDeviceOutput], session: PairingSessionOutput?) {
        self.devices = devices
        self.session = session
    }
}

/// A device in pairing mode, as found by mDNS (its name is its own claim, unverified).
public struct PairingDeviceOutput: Codable, Sendable, Equatable {
    public var address: String
    /// The DNS-SD instance name it publishes (`desktop (pairing)`): unique on the LAN, what a pick names.
    public var instance: String
    public var name: String

    public init(address: String, instance: String, name: String) {
        self.address = address
        self.instance = instance
        self.name = name
    }
}

/// One pairing attempt.
public struct PairingSessionOutput: Codable, Sendable, Equatable {
    /// The six digits to compare with the other screen (`042 917`), once known.
    @Nullable public var code: String?
    /// The other device's ID (from its certificate), once connected.
    @Nullable public var device: String?
    /// Why the attempt failed.
    @Nullable public var error: String?
    /// The name the other device gives itself.
    @Nullable public var name: String?
    /// searching, connecting, comparing (the code waits for an answer), confirmed (this side said yes),
    /// paired, refused or failed.
    public var state: String

    public init(code: String?, device: String?, error: String?, name: String?, state: String) {
        self.code = code
        self.device = device
        self.error = error
        self.name = name
        self.state = state
    }
}
