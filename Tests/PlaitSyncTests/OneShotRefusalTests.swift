import Foundation
import PlaitSession
@testable import PlaitSync
import PlaitTLS
import PlaitTestSupport
import Testing

/// A one-shot sync learns that the peer refused this device from the typed error of the session's first read,
/// never from the words of an error message.
@Suite struct OneShotRefusalTests {
    /// The peer's alert after the handshake is a refusal, explained as such.
    @Test func anAlertAfterTheHandshakeIsARefusal() throws {
        let alert = TLSError.rejectedByPeer(reason: "sslv3 alert bad certificate")
        guard case .rejectedByPeer = try #require(Home.refusalAfterHandshake(SessionError.tls(alert))) else {
            Issue.record("an alert was not taken as a refusal")
            return
        }
    }

    /// Other failures are not refusals, whatever their text says.
    @Test func otherFailuresAreNotRefusals() {
        let failures: [any Error] = [
            SessionError.transport("write: bad certificate, reset by peer"),
            SessionError.tls(.closed(reason: "bad certificate")),
            SessionError.peerClosed(reason: "reset by peer"),
            TLSError.rejectedByPeer(reason: "not from a session"),
            // A peer killed right after the handshake resets the connection too (third hostile tester of
            // 2026-11-25): `plait peers` said "refuses this device" until the next session reached its Hello.
            SessionError.tls(.connectionReset),
        ]
        for failure in failures { #expect(Home.refusalAfterHandshake(failure) == nil, "\(failure)") }
    }

    /// A paired peer that resets the connection right after the handshake (killed at that moment) is not said to
    /// refuse this device, and no refusal is recorded for `plait peers` (third hostile tester of 2026-11-25: "refused
    /// this device: it is not paired there", and `peers` said "refuses this device" until the next session).
    @Test func aPeerResettingRightAfterTheHandshakeIsNoRefusal() throws {
        try withTemporaryDirectory { directory in
            let (server, friend, _) = try serverFriendAndRogue(in: directory)
            let listener = try TLSListener(
                host: "127.0.0.1", port: 0, context: TLSContext(identity: server.identity, role: .server(acceptsPairing: false)))
            defer { listener.close() }
            let port = listener.port
            let killed = JoinableThread { () throws -> Void in
                let connection = try listener.accept(trust: { _ in true }, timeout: .seconds(10))
                // The client's Hello has arrived: the server dies with it unread, and the kernel resets.
                var entry = pollfd(fd: connection.fileDescriptor, events: Int16(POLLIN), revents: 0)
                _ = poll(&entry, 1, 10_000)
                let socket = dup(connection.fileDescriptor)
                var abort = linger(l_onoff: 1, l_linger: 0)
                _ = setsockopt(socket, SOL_SOCKET, SO_LINGER, &abort, socklen_t(MemoryLayout<linger>.size))
                // As a killed process: no close_notify. The connection's own descriptor is pointed at /dev/null, so
                // what its close writes goes nowhere and the socket's last descriptor, closed here, resets it.
                let null = open("/dev/null", O_WRONLY)
                _ = dup2(null, connection.fileDescriptor)
                _ = Glibc.close(null)
                _ = Glibc.close(socket)
                connection.close()
            }
            let outcome = friend.syncOnce(with: try PeerAddress(parsing: "127.0.0.1:\(port)"), timeout: .seconds(10))
            try killed.join().get()
            let failure = outcome.failure ?? "(succeeded)"
            #expect(failure.contains("reset the connection right after the TLS handshake, before its Hello"), "\(failure)")
            #expect(!failure.contains("not paired there"), "\(failure)")
            let serverID = try server.identity.deviceID.description
            let row = try #require(try friend.store.peers().first { $0.deviceID == serverID })
            #expect(row.refusedThisDeviceAt == nil, "a refusal was recorded")
        }
    }
}
