import Foundation
import Testing

@testable import PlaitTLS

/// The pairing protocol admits a device that is not trusted yet, and only the pairing protocol does.
@Suite("TLS pairing admission")
struct PairingAdmissionTests {
    let alice = TestIdentities.alice
    let bob = TestIdentities.bob
    let mallory = TestIdentities.mallory

    @Test func aPairingServerRefusesAStrangerOnSyncAndAdmitsItOnPairing() throws {
        let listener = try makeListener(alice, acceptsPairing: true)
        defer { listener.close() }

        // Sync from mallory, a stranger: refused at the handshake, not one byte of data.
        let refusing = serveOne(listener, trusting: [bob.deviceID]) { connection in
            try connection.writeAll(Array("secret".utf8), timeout: .seconds(5))
        }
        let syncClient = try connectClient(mallory, port: listener.port, trusting: alice.deviceID, offering: .sync)
        #expect(throws: TLSError.self) { _ = try syncClient.readExactly(1, timeout: .seconds(5)) }
        guard case .failure(TLSError.peerNotTrusted(let refused)) = refusing.join() else {
            Issue.record("the server should refuse mallory on sync: \(refusing.join())")
            return
        }
        #expect(refused == mallory.deviceID)

        // Pairing from the same stranger: admitted, and both sides know it is a pairing connection.
        let admitting = serveOne(listener, trusting: [bob.deviceID]) { connection in
            try connection.writeAll([42], timeout: .seconds(5))
            return (connection.applicationProtocol, connection.peerDeviceID, connection.peerCommonName)
        }
        let pairClient = try connectClient(mallory, port: listener.port, trusting: bob.deviceID, offering: .pairing)
        defer { pairClient.close() }
        #expect(pairClient.applicationProtocol == .pairing)
        #expect(pairClient.peerDeviceID == alice.deviceID)
        #expect(pairClient.peerCommonName == "alice")
        #expect(try pairClient.readExactly(1, timeout: .seconds(5)) == [42])
        let server = try admitting.join().get()
        #expect(server.0 == .pairing)
        #expect(server.1 == mallory.deviceID)
        #expect(server.2 == "mallory")
    }

    @Test func aServerThatDoesNotAcceptPairingStillRefusesAStranger() throws {
        // The agent's context: sync only. Offering pairing does not get a stranger through.
        let listener = try makeListener(alice, acceptsPairing: false)
        defer { listener.close() }
        let server = serveOne(listener, trusting: []) { connection in
            try connection.writeAll([1], timeout: .seconds(5))
        }
        #expect(throws: TLSError.self) {
            _ = try connectClient(mallory, port: listener.port, trusting: alice.deviceID, offering: .pairing)
        }
        guard case .failure(TLSError.alpnMismatch) = server.join() else {
            Issue.record("expected an ALPN refusal: \(server.join())")
            return
        }
    }

    @Test func closingGracefullyDeliversTheLastBytesAndReturnsOnThePeersClose() throws {
        let listener = try makeListener(alice, acceptsPairing: true)
        defer { listener.close() }
        let server = serveOne(listener, trusting: []) { connection in
            try connection.writeAll([7, 8, 9], timeout: .seconds(5))
            let start = ContinuousClock.now
            connection.closeGracefully(timeout: .seconds(10))
            return (connection.isClosed, ContinuousClock.now - start)
        }
        let client = try connectClient(bob, port: listener.port, trusting: alice.deviceID, offering: .pairing)
        // Bytes the server will never read: they must not turn its close into a reset.
        try client.writeAll([1, 2, 3], timeout: .seconds(5))
        #expect(try client.readExactly(3, timeout: .seconds(5)) == [7, 8, 9])
        let result = try readSomething(client, upTo: 16)
        #expect(result == .closed, "the server's close_notify ends the stream")
        let (closed, took) = try server.join().get()
        #expect(closed)
        #expect(took < .seconds(5), "it returned when the client answered with its close_notify")
    }
}
