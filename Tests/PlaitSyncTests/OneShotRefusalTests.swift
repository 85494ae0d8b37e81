import PlaitSession
@testable import PlaitSync
import PlaitTLS
import Testing

/// A one-shot sync learns that the peer refused this device from the typed error of the session's first read,
/// never from the words of an error message.
@Suite struct OneShotRefusalTests {
    /// The peer's alert and a reset after the handshake are refusals; both are explained as such.
    @Test func alertAndResetAfterTheHandshakeAreRefusals() throws {
        let alert = TLSError.rejectedByPeer(reason: "sslv3 alert bad certificate")
        guard case .rejectedByPeer = try #require(Home.refusalAfterHandshake(SessionError.tls(alert))) else {
            Issue.record("an alert was not taken as a refusal")
            return
        }
        let reset = try #require(Home.refusalAfterHandshake(SessionError.tls(.connectionReset)))
        guard case .rejectedByPeer = reset else {
            Issue.record("a reset was not taken as a refusal")
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
        ]
        for failure in failures { #expect(Home.refusalAfterHandshake(failure) == nil, "\(failure)") }
    }
}
