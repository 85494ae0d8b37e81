import Foundation
import PlaitSync
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Where the agent's Unix socket goes (the agent and the CLI compute it alike), and what a path already holds.
struct UnixSocketPathTests {
    @Test func homeWhenItFitsElseTheRuntimeDirectoryByDeviceID() {
        let short = "/tmp/h"
        #expect(UnixSocketPath.path(home: short, environment: [:], deviceShortID: { nil }) == "/tmp/h/api.sock")
        // The longest home that fits leaves room for the private bind path (`<home>/.XXXXXX/s`, 2 bytes longer).
        let fitting = "/" + String(repeating: "a", count: UnixSocketPath.capacity - 12)
        #expect(UnixSocketPath.path(home: fitting, environment: [:], deviceShortID: { nil }) == fitting + "/api.sock")
        let long = fitting + "a"
        var asked = 0
        let id = { () -> String? in
            asked += 1
            return "ABCDEFG"
        }
        #expect(UnixSocketPath.path(home: long, environment: ["XDG_RUNTIME_DIR": "/run/user/0"], deviceShortID: id)
            == "/run/user/0/plait-ABCDEFG.sock")
        #expect(asked == 1)
        // No runtime directory, a relative one, or one too long itself: no socket at all.
        #expect(UnixSocketPath.path(home: long, environment: [:], deviceShortID: id) == nil)
        #expect(UnixSocketPath.path(home: long, environment: ["XDG_RUNTIME_DIR": "run"], deviceShortID: id) == nil)
        #expect(UnixSocketPath.path(home: long, environment: ["XDG_RUNTIME_DIR": long], deviceShortID: id) == nil)
    }

    @Test func probeTellsFreeStaleLiveAndForeignPaths() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("plait-sock-\(getpid())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/s"
        #expect(UnixSocketOccupant.probe(path) == .none)

        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        #expect(listener >= 0)
        var address = try #require(UnixSocketAddress(path))
        #expect(address.withSockaddr { bind(listener, $0, $1) } == 0)
        #expect(listen(listener, 4) == 0)
        #expect(UnixSocketOccupant.probe(path) == .live)
        close(listener)
        #expect(UnixSocketOccupant.probe(path) == .stale, "a socket file nobody listens on any more")

        unlink(path)
        FileManager.default.createFile(atPath: path, contents: Data("not a socket".utf8))
        #expect(UnixSocketOccupant.probe(path) == .other)
    }
}
