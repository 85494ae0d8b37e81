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
