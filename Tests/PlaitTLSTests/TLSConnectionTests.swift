import COpenSSL
import Foundation
import Testing

@testable import PlaitTLS

/// Real sockets on 127.0.0.1: handshakes, pinning, ALPN, bulk transfer and timeouts.
@Suite("TLS connections")
struct TLSConnectionTests {
    let alice = TestIdentities.alice
    let bob = TestIdentities.bob
    let mallory = TestIdentities.mallory

    @Test func trustedPeersHandshakeMutuallyAndExchangeOneMiBEachWay() throws {
        let toServer = testPattern(count: 1 << 20, seed: 1)
        let toClient = testPattern(count: 1 << 20, seed: 2)
        let listener = try makeListener(alice)
        defer { listener.close() }
        let server = serveOne(listener, trusting: [bob.deviceID]) { connection in
            let received = try connection.readExactly(toServer.count, timeout: .seconds(10))
            try connection.writeAll(toClient, timeout: .seconds(10))
            // The client closes first; its close_notify ends the connection cleanly.
            let end = try readSomething(connection, upTo: 1, operation: "closing")
            return (
                peer: connection.peerDeviceID, alpn: connection.negotiatedALPN,
                version: connection.protocolVersion, intact: received == toServer, end: end
            )
        }
        defer { server.join() }

        let client = try connectClient(bob, port: listener.port, trusting: alice.deviceID)
        #expect(client.peerDeviceID == alice.deviceID)
        #expect(client.peerCertificateDER == alice.certificateDER)
        #expect(client.protocolVersion == "TLSv1.3")
        #expect(SSL_version(client.ssl) == TLS1_3_VERSION)
        #expect(client.negotiatedALPN == "plait-sync/2")
        #expect(client.applicationProtocol == .sync)
        try client.writeAll(toServer, timeout: .seconds(10))
        let received = try client.readExactly(toClient.count, timeout: .seconds(10))
        #expect(received == toClient)
        // No resumption: not resumed, and no ticket arrived that could resume a later connection.
        #expect(SSL_session_reused(client.ssl) == 0)
        #expect(SSL_SESSION_is_resumable(SSL_get_session(client.ssl)) == 0)
        client.close()

        let report = try server.join().get()
        #expect(report.peer == bob.deviceID)
        #expect(report.alpn == "plait-sync/2")
        #expect(report.version == "TLSv1.3")
        #expect(report.intact)
        #expect(report.end == .closed)
    }

    @Test func serverThatDoesNotTrustTheClientSendsItNothing() throws {
        let listener = try makeListener(alice)
        defer { listener.close() }
        // Trusts only mallory: bob is a stranger here. Had it accepted, it would have written.
        let server = serveOne(listener, trusting: [mallory.deviceID]) { connection in
            try connection.writeAll(Array("secret".utf8), timeout: .seconds(5))
        }
        defer { server.join() }

        // TLS 1.3: the client's handshake completes before the server judged its certificate...
        let client = try connectClient(bob, port: listener.port, trusting: alice.deviceID)
        defer { client.close() }
        #expect(client.peerDeviceID == alice.deviceID)
        // ...and the refusal arrives on its first read, with no application byte before it.
        var result = TLSConnection.IOResult.wantRead
        var failure: (any Error)?
        do {
            result = try readSomething(client)
        } catch {
            failure = error
        }
        if case .bytes(let count) = result {
            Issue.record("the client received \(count) bytes from a server that does not trust it")
        }
        guard case .rejectedByPeer(let reason) = failure as? TLSError else {
            Issue.record("expected rejectedByPeer, got \(String(describing: failure)) and \(result)")
            return
        }
        #expect(reason.contains("bad certificate"))
        #expect(client.isClosed)

        guard case .failure(TLSError.peerNotTrusted(let id)) = server.join() else {
            Issue.record("the server should refuse bob: \(server.join())")
            return
        }
        #expect(id == bob.deviceID)
    }

    /// A refused client that sent its first frames before the refusal reached it reads the alert, not a reset
    /// (PROTOCOL.md §3): the server keeps the refused socket open for sending nothing and reads what arrives until
    /// the client closes. With an immediate close the unread bytes made the kernel reset the connection, and the
    /// client could not tell the refusal from a peer killed at that moment (2 – 6 % of small writes, nearly every
    /// large one, measured on loopback).
    @Test func aRefusedClientThatAlreadyWroteReadsTheAlertNotAReset() throws {
        let listener = try makeListener(alice)
        defer { listener.close() }
        var outcomes: [String] = []
        for round in 0..<12 {
            let server = serveOne(listener, trusting: [mallory.deviceID]) { _ in }
            let client = try connectClient(bob, port: listener.port, trusting: alice.deviceID)
            outcomes.append(Self.refusal(seenBy: client, afterWriting: round.isMultiple(of: 2) ? 64 : 1 << 20))
            client.close()
            _ = server.join()
        }
        #expect(outcomes.allSatisfy { $0 == "alert" }, "\(outcomes)")
    }

    /// What `client` learns after writing `count` bytes and reading: "alert" for the refusal's alert.
    private static func refusal(seenBy client: TLSConnection, afterWriting count: Int) -> String {
        do {
            try client.writeAll([UInt8](repeating: 7, count: count), timeout: .seconds(5))
            return "\(try readSomething(client))"
        } catch TLSError.rejectedByPeer {
            return "alert"
        } catch {
            return "\(error)"
        }
    }

    @Test func clientThatDoesNotTrustTheServerRefusesIt() throws {
        let listener = try makeListener(alice)
        defer { listener.close() }
        let server = serveOne(listener, trusting: [bob.deviceID]) { connection in
            try connection.writeAll(Array("secret".utf8), timeout: .seconds(5))
        }
        defer { server.join() }

        #expect {
            _ = try connectClient(bob, port: listener.port, trusting: mallory.deviceID)
        } throws: { error in
            guard case TLSError.peerNotTrusted(let id) = error else { return false }
            return id == alice.deviceID
        }
        // The client's alert fails the server's handshake too: nothing was written.
        guard case .failure(TLSError.rejectedByPeer(let reason)) = server.join() else {
            Issue.record("the server's handshake should fail: \(server.join())")
            return
        }
        #expect(reason.contains("bad certificate"))
    }

    @Test func plainTLSClientWithAnUntrustedCertificateGetsNoData() throws {
        let listener = try makeListener(alice)
        defer { listener.close() }
        let server = serveOne(listener, trusting: [bob.deviceID]) { connection in
            try connection.writeAll(Array("secret".utf8), timeout: .seconds(5))
        }
        defer { server.join() }

        let client = try PlainTLSClient(port: listener.port, identity: mallory)
        _ = client.handshake()  // may succeed: TLS 1.3 judges the client certificate afterwards
        #expect(client.readSome() == [])

        guard case .failure(TLSError.peerNotTrusted(let id)) = server.join() else {
            Issue.record("the server should refuse mallory: \(server.join())")
            return
        }
        #expect(id == mallory.deviceID)
    }

    @Test func clientWithoutACertificateGetsNoData() throws {
        let listener = try makeListener(alice)
        defer { listener.close() }
        let server = serveOne(listener, trusting: [bob.deviceID]) { connection in
            try connection.writeAll(Array("secret".utf8), timeout: .seconds(5))
        }
        defer { server.join() }

        let client = try PlainTLSClient(port: listener.port, identity: nil)
        _ = client.handshake()
        #expect(client.readSome() == [])

        guard case .failure(TLSError.handshakeFailed(let reason)) = server.join() else {
            Issue.record("the server's handshake should fail: \(server.join())")
            return
        }
        #expect(reason.contains("peer did not return a certificate"))
    }

    @Test func aTrustedCertificateInAChainOfTwoIsRefused() throws {
        let listener = try makeListener(alice)
        defer { listener.close() }
        let server = serveOne(listener, trusting: [bob.deviceID]) { connection in
            try connection.writeAll(Array("secret".utf8), timeout: .seconds(5))
        }
        defer { server.join() }

        // Bob's own certificate, but sent with another one after it: not a chain of exactly one.
        let client = try PlainTLSClient(port: listener.port, identity: bob, chainedTo: mallory)
        _ = client.handshake()
        #expect(client.readSome() == [])

        guard case .failure(TLSError.handshakeFailed(let reason)) = server.join() else {
            Issue.record("the server's handshake should fail: \(server.join())")
            return
        }
        #expect(reason.contains("certificate verify failed"))
    }

    /// Another protocol, none, or the sync protocol's version 1 (an older plait, DESIGN §11 "Versions"): refused at
    /// the handshake, and the refusal of an older plait names both versions.
    @Test(arguments: [nil, "h2", "plait-sync/1"] as [String?])
    func aClientOfferingNoPlaitProtocolGetsNoData(alpn: String?) throws {
        let listener = try makeListener(alice)
        defer { listener.close() }
        let server = serveOne(listener, trusting: [bob.deviceID]) { connection in
            try connection.writeAll(Array("secret".utf8), timeout: .seconds(5))
        }
        defer { server.join() }

        let client = try PlainTLSClient(port: listener.port, identity: bob, alpn: alpn)
        _ = client.handshake()
        #expect(client.readSome() == [])

        guard case .failure(TLSError.alpnMismatch(let offered)) = server.join() else {
            Issue.record("the server should refuse the client: \(server.join())")
            return
        }
        #expect(offered == (alpn.map { [$0] } ?? []))
        let refusal = TLSError.alpnMismatch(offered: offered).description
        #expect(
            refusal.contains("the peer speaks plait protocol 1; this device speaks protocol 2: upgrade plait there")
                == (alpn == "plait-sync/1"), "\(refusal)")
    }

    @Test func tls12IsRefused() throws {
        let listener = try makeListener(alice)
        defer { listener.close() }
        let server = serveOne(listener, trusting: [bob.deviceID]) { connection in
            try connection.writeAll(Array("secret".utf8), timeout: .seconds(5))
        }
        defer { server.join() }

        let client = try PlainTLSClient(port: listener.port, identity: bob, maxVersion: TLS1_2_VERSION)
        #expect(!client.handshake())
        guard case .failure(TLSError.handshakeFailed(let reason)) = server.join() else {
            Issue.record("the server's handshake should fail: \(server.join())")
            return
        }
        #expect(reason.contains("unsupported protocol"))
    }

    @Test func pairingIsRefusedByAServerThatIsNotPairing() throws {
        let listener = try makeListener(alice, acceptsPairing: false)
        defer { listener.close() }
        let server = serveOne(listener, trusting: [bob.deviceID]) { connection in
            try connection.writeAll(Array("secret".utf8), timeout: .seconds(5))
        }
        defer { server.join() }

        #expect {
            _ = try connectClient(bob, port: listener.port, trusting: alice.deviceID, offering: .pairing)
        } throws: { error in
            guard case TLSError.alpnMismatch(let offered) = error else { return false }
            return offered == ["plait-pair/1"]
        }
        guard case .failure(TLSError.alpnMismatch(let offered)) = server.join() else {
            Issue.record("the server should refuse the pairing protocol: \(server.join())")
            return
        }
        #expect(offered == ["plait-pair/1"])
    }

    @Test(arguments: [TLSApplicationProtocol.pairing, .sync])
    func aPairingServerSpeaksBothProtocols(offering: TLSApplicationProtocol) throws {
        let listener = try makeListener(alice, acceptsPairing: true)
        defer { listener.close() }
        let server = serveOne(listener, trusting: [bob.deviceID]) { connection in
            try connection.writeAll([1], timeout: .seconds(5))
            return connection.negotiatedALPN
        }
        defer { server.join() }

        let client = try connectClient(bob, port: listener.port, trusting: alice.deviceID, offering: offering)
        defer { client.close() }
        #expect(client.applicationProtocol == offering)
        #expect(try client.readExactly(1, timeout: .seconds(5)) == [1])
        #expect(try server.join().get() == offering.rawValue)
    }

    @Test func simultaneousLargeTransfersBothWaysDoNotDeadlock() throws {
        let size = 8 << 20
        let toServer = testPattern(count: size, seed: 3)
        let toClient = testPattern(count: size, seed: 4)
        let listener = try makeListener(alice)
        defer { listener.close() }
        let bothDone = DispatchSemaphore(value: 0)
        let server = BackgroundThread { () -> Bool in
            let connection = try listener.accept(
                trust: { $0 == TestIdentities.bob.deviceID }, timeout: .seconds(5), handshakeTimeout: .seconds(5))
            defer { connection.close() }
            let received = try exchangeAtOnce(connection, sending: toClient, expecting: size)
            // Closing before the client has read everything could reset the connection under it.
            _ = bothDone.wait(timeout: .now() + 10)
            return received == toServer
        }
        defer { server.join() }

        let client = try connectClient(bob, port: listener.port, trusting: alice.deviceID)
        defer { client.close() }
        let received: [UInt8]
        do {
            received = try exchangeAtOnce(client, sending: toServer, expecting: size)
        } catch {
            bothDone.signal()
            throw error
        }
        bothDone.signal()
        #expect(received == toClient)
        #expect(try server.join().get())
    }

    @Test func handshakeTimesOutAgainstASilentServer() throws {
        // A plain TCP listener: the kernel completes the TCP handshake, nobody ever speaks TLS.
        let (silent, port) = try listenTCP(host: "127.0.0.1", port: 0, backlog: 4)
        defer { closeSocket(silent) }
        let start = ContinuousClock.now
        #expect {
            _ = try connectClient(bob, port: port, trusting: alice.deviceID, timeout: .milliseconds(300))
        } throws: { error in
            guard case TLSError.timeout = error else { return false }
            return true
        }
        let elapsed = ContinuousClock.now - start
        #expect(elapsed >= .milliseconds(300) && elapsed < .seconds(5))
        // Accept the connection that waited in the backlog, and close it.
        if let accepted = try acceptTCP(silent) { closeSocket(accepted) }
    }

    @Test func acceptTimesOutAgainstASilentClient() throws {
        let listener = try makeListener(alice)
        defer { listener.close() }
        let silent = try connectTCP(host: "127.0.0.1", port: listener.port, deadline: Deadline(.seconds(5)))
        defer { closeSocket(silent) }
        let start = ContinuousClock.now
        #expect {
            _ = try listener.accept(
                trust: { _ in true }, timeout: .seconds(5), handshakeTimeout: .milliseconds(300))
        } throws: { error in
            guard case TLSError.timeout = error else { return false }
            return true
        }
        #expect(ContinuousClock.now - start < .seconds(5))
    }

    @Test func acceptTimesOutWhenNobodyConnects() throws {
        let listener = try makeListener(alice)
        defer { listener.close() }
        #expect {
            _ = try listener.accept(trust: { _ in true }, timeout: .milliseconds(100))
        } throws: { error in
            guard case TLSError.timeout = error else { return false }
            return true
        }
    }

    @Test func connectingToAClosedPortIsRefused() throws {
        let (probe, port) = try listenTCP(host: "127.0.0.1", port: 0, backlog: 1)
        closeSocket(probe)  // nothing listens on `port` any more
        #expect {
            _ = try connectClient(bob, port: port, trusting: alice.deviceID)
        } throws: { error in
            guard case TLSError.refused(let address, let reason) = error else { return false }
            return address == "127.0.0.1:\(port)" && reason == "Connection refused"
        }
    }

    @Test func errorsDescribeThemselvesInOneSentence() {
        let errors: [TLSError] = [
            .refused(address: "127.0.0.1:22000", reason: "Connection refused"),
            .timeout(operation: "handshaking", after: .seconds(1)),
            .handshakeFailed(reason: "error:0A000126:SSL routines::unexpected eof while reading"),
            .closedDuringHandshake(reason: "Connection reset by peer"),
            .peerNotTrusted(alice.deviceID),
            .rejectedByPeer(reason: "sslv3 alert bad certificate"),
            .alpnMismatch(offered: ["plait-pair/1"]),
            .closed(reason: "Connection reset by peer"),
            .socket(operation: "listen on 127.0.0.1:1", reason: "Permission denied"),
            .openSSL(operation: "create a TLS context", message: "malloc failure"),
        ]
        for error in errors {
            let text = error.description
            #expect(text.hasSuffix("."))
            #expect(text.filter { $0 == "." }.count >= 1)
            #expect(!text.dropLast().contains(". "), "more than one sentence: \(text)")
        }
        #expect(TLSError.peerNotTrusted(alice.deviceID).description.contains(alice.deviceID.description))
    }
}
