// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "plait",
    platforms: [.macOS(.v13)],
    products: [
        .executable(name: "plait", targets: ["plait"]),
        .library(name: "PlaitCore", targets: ["PlaitCore"]),
        .library(name: "PlaitStore", targets: ["PlaitStore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/LebJe/TOMLKit", from: "0.6.0"),
        .package(url: "https://github.com/apple/swift-protobuf", from: "1.39.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // The local HTTP API (DESIGN §12). Without its default ConfigurationSupport trait: plait reads its own TOML.
        .package(
            url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: ["FullFoundation"]),
        // Hummingbird's own dependency, named for the API server's graceful shutdown (a cancelled server logged
        // two "error" lines at every agent stop).
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
    ],
    targets: [
        // The replay engine: ids, summaries, changes, the lists domain, baselines. No I/O.
        // Cross-module optimization: the engine's generics (ReplayEngine, Intake over ListsDomain) are specialized
        // where the store calls them, instead of running through runtime generic metadata on every change.
        .target(
            name: "PlaitCore", exclude: ["plait.proto"],
            swiftSettings: [.unsafeFlags(["-cross-module-optimization"], .when(configuration: .release))]),
        // What `--json` prints and the local API answers: typed outputs, and a JSON writer that streams them.
        .target(name: "PlaitOutput", dependencies: ["PlaitCore"]),
        // The SQLite store. COpenSSL: the SHA-256 it injects into Core (OpenSSL's, ~10× the pure-Swift one).
        // PlaitTLS: the one ECDSA P-256 implementation (`P256`), which change signatures share with succession
        // statements, and the OpenSSL helpers beside it.
        .target(
            name: "PlaitStore",
            dependencies: [
                "PlaitCore", "COpenSSL", "PlaitTLS", "CSQLiteConfig", "CMalloc", "CFileIdentity",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
            ]),
        // One call Swift cannot make itself (sqlite3_config is variadic): SQLite's memory statistics off, whose
        // process-wide mutex every allocation of every connection took.
        .target(name: "CSQLiteConfig", linkerSettings: [.linkedLibrary("sqlite3")]),
        // glibc's malloc_trim, which Swift's Glibc module does not import: a pull's freed batches go back to the
        // system (`ProcessMemory`).
        .target(name: "CMalloc"),
        // `statfs` and `statx`, which Swift's Glibc module does not import: the store tells its own file from a copy
        // by inode and the inode's birth time (`Store.fileIdentity`).
        .target(name: "CFileIdentity"),
        .systemLibrary(
            name: "COpenSSL",
            pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]),
        // Frames and messages of the sync protocol. No I/O: bytes in, values or a typed error out.
        .target(
            name: "PlaitWire",
            dependencies: ["PlaitCore", .product(name: "SwiftProtobuf", package: "swift-protobuf")],
            exclude: ["plait-wire.proto"]),
        // Identity: key pair, self-signed certificate, Device ID.
        .target(name: "PlaitTLS", dependencies: ["COpenSSL", "PlaitCore"]),
        // One sync session with a peer: the protocol as a value (SessionMachine) and the driver that performs its
        // actions against the replica and a frame transport.
        .target(name: "PlaitSession", dependencies: ["PlaitCore", "PlaitStore", "PlaitTLS", "PlaitWire"]),
        // Pairing two devices (DESIGN §7): the code-comparison protocol as a value (PairingMachine), the driver that
        // runs it over one TLS connection, and the mDNS rendezvous (PairingRendezvous). Storing the result is the
        // composition root's (Home).
        .target(
            name: "PlaitPairing",
            dependencies: ["PlaitCore", "PlaitStore", "PlaitTLS", "PlaitWire", "PlaitDiscovery"]),
        // Composition root: a device home (identity + store + config) and what commands do with it.
        .target(
            name: "PlaitSync",
            dependencies: [
                "PlaitCore", "PlaitStore", "PlaitTLS", "PlaitWire", "PlaitDiscovery", "PlaitSession", "PlaitPairing",
                .product(name: "TOMLKit", package: "TOMLKit"),
                .product(name: "Logging", package: "swift-log"),
            ]),
        // What the commands do, shared by the CLI and the local API: a data edit as a value with its validation and
        // name resolution (DataOperation, Resolve), so both answer alike.
        .target(name: "PlaitCommands", dependencies: ["PlaitCore", "PlaitStore", "PlaitSync", "PlaitOutput"]),
        // The local HTTP API the agent serves (DESIGN §12): auth, the security rules, the endpoints.
        .target(
            name: "PlaitAPI",
            dependencies: [
                "PlaitCore", "PlaitStore", "PlaitSync", "PlaitPairing", "PlaitOutput", "PlaitCommands",
                .product(name: "Hummingbird", package: "hummingbird"),
                // HTTP1Channel's idle timeout (API connections that send no request are closed).
                .product(name: "HummingbirdCore", package: "hummingbird"),
                // HTTPS beyond loopback (api.password): a self-signed GUI certificate, its scrypt password hash.
                "COpenSSL", "PlaitTLS", .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]),
        .systemLibrary(
            name: "CAvahi",
            pkgConfig: "avahi-client",
            providers: [.apt(["libavahi-client-dev"])]),
        // Discovery on the LAN through avahi-daemon: publish, browse, resolve; the daily tag.
        .target(
            name: "PlaitDiscovery",
            dependencies: ["CAvahi", "PlaitCore", .product(name: "Logging", package: "swift-log")]),
        .executableTarget(
            name: "plait",
            dependencies: [
                // PlaitNetnsSupport: `plait demo` runs its devices on a LAN of network namespaces.
                // PlaitAPI: the agent serves the local API; PlaitCommands: what the data commands do (shared with it).
                "PlaitCore", "PlaitSync", "PlaitSession", "PlaitPairing", "PlaitTLS", "PlaitNetnsSupport", "PlaitOutput",
                "PlaitCommands", "PlaitAPI",
                // GRDB: `plait bench` measures SQLite's own insert rate of the change rows, the ceiling of a catch-up.
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            // The release binary's layout (README, "Issue 9, twelfth pass"): what a catch-up runs, packed together at
            // the start of the code, so that a catch-up maps 2.4 – 2.8 MiB of the binary's code instead of 8.5 – 8.6;
            // relative relocations packed (DT_RELR, glibc 2.36), 0.3 MiB instead of 1.4. lld, for both; the order
            // file is made by scripts/gen-order-file. Functions move one by one only when compiled into sections of
            // their own (scripts/build-release passes -function-sections); without it the build links alike, less
            // packed.
            linkerSettings: [
                .unsafeFlags(
                    [
                        "-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
                        "-Xlinker", "--symbol-ordering-file=\(Context.packageDirectory)/link/plait.order",
                        "-Xlinker", "--no-warn-symbol-ordering",
                        "-Xlinker", "\(Context.packageDirectory)/link/text-layout.ld",
                    ], .when(configuration: .release))
            ]),
        // Fixtures shared by the tests that work on real stores, and the stranger flood of the admission tests.
        // COpenSSL: test key pairs (P-256 and the key types a verifier must refuse) without a PlaitTLS identity.
        // PlaitNetnsSupport: the sqlite3 shell that damages a store as a user would.
        .target(
            name: "PlaitTestSupport",
            dependencies: [
                "PlaitCore", "PlaitStore", "PlaitTLS", "COpenSSL", "PlaitNetnsSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]),
        // Test LANs of network namespaces, each host with its own dbus-daemon and avahi-daemon, and `Spawn`, how tests
        // start processes. Foundation only, so any test target (and `plait demo`) can use it.
        .target(name: "PlaitNetnsSupport"),
        // Test helper, in no product: publishes and browses with PlaitDiscovery inside a test host and prints
        // what it sees as JSON lines (a test process can be in one network namespace only).
        .executableTarget(
            name: "plait-discovery-probe",
            dependencies: ["PlaitDiscovery", .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "PlaitCoreTests", dependencies: ["PlaitCore", "PlaitNetnsSupport"]),
        .testTarget(name: "PlaitOutputTests", dependencies: ["PlaitOutput", "PlaitCore"]),
        .testTarget(
            name: "PlaitStoreTests",
            dependencies: [
                "PlaitCore", "PlaitStore", "PlaitTLS", "PlaitTestSupport", "PlaitNetnsSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]),
        .testTarget(name: "PlaitTLSTests", dependencies: ["PlaitTLS", "PlaitCore", "PlaitNetnsSupport"]),
        .testTarget(
            name: "PlaitWireTests",
            dependencies: ["PlaitWire", "PlaitCore", .product(name: "SwiftProtobuf", package: "swift-protobuf")]),
        .testTarget(
            name: "PlaitSyncTests",
            dependencies: [
                "PlaitSync", "PlaitSession", "PlaitPairing", "PlaitStore", "PlaitWire", "PlaitCore", "PlaitTLS",
                "PlaitTestSupport", "PlaitDiscovery", "PlaitNetnsSupport",
                .product(name: "Logging", package: "swift-log"),
            ]),
        // Runs the built `plait` binary; the LAN tests also read the stores and build namespaces.
        .testTarget(
            name: "PlaitCLITests",
            dependencies: [
                // GRDB: tests damage a store file the way a user with sqlite3 would. plait: the demo's edit script,
                // a CLI-only helper, is tested as a value. PlaitAPI: its loopback client talks to the agent's API.
                "PlaitCore", "PlaitStore", "PlaitNetnsSupport", "PlaitTestSupport", "PlaitOutput", "PlaitTLS", "plait",
                "PlaitAPI", "PlaitPairing",
                .product(name: "GRDB", package: "GRDB.swift"),
            ]),
        .testTarget(name: "PlaitDiscoveryTests", dependencies: ["PlaitDiscovery", "PlaitCore", "PlaitNetnsSupport"]),
    ],
    swiftLanguageModes: [.v6]
)
