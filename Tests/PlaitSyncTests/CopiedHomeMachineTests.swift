import PlaitCore
@testable import PlaitSession
import PlaitTLS
import PlaitWire
import Testing

/// Instance nonces and copied homes in the session protocol (PROTOCOL.md §13.2 item 6), over plain values.
@Suite struct CopiedHomeMachineTests {
    typealias Values = SessionMachineValueTests
    static let mine: [UInt8] = Array(repeating: 0xA1, count: 16)
    static let twin: [UInt8] = Array(repeating: 0xB2, count: 16)
    static let me = SessionIdentity(deviceID: Values.me.deviceID, name: "here", instanceNonce: mine)

    /// One number for the protocol: the ALPN name and Hello say the same version.
    @Test func theALPNNameAndHelloSpeakTheSameVersion() {
        #expect(Int(Hello.currentProtocolVersion) == TLSApplicationProtocol.syncVersion)
        #expect(TLSApplicationProtocol.sync.rawValue == "plait-sync/\(TLSApplicationProtocol.syncVersion)")
        #expect(TLSApplicationProtocol.otherSyncVersion(in: ["plait-sync/1"]) == 1)
        #expect(TLSApplicationProtocol.otherSyncVersion(in: ["plait-sync/2"]) == nil)
        #expect(TLSApplicationProtocol.otherSyncVersion(in: ["h2"]) == nil)
    }

    @Test func helloCarriesThisProcesssInstanceNonce() throws {
        var machine = SessionMachine(identity: Self.me, options: SessionOptions())
        _ = machine.start()
        let actions = try machine.answered(.status(Values.status(summary: [:])))
        let hello = try #require(Values.sent(actions).first.flatMap(Values.helloOf))
        #expect(hello.instanceNonce == Self.mine && hello.protocolVersion == 2)
        #expect(InstanceNonce.process.count == 16 && InstanceNonce.process == InstanceNonce.process)
    }

    /// This very Device ID from another instance is a copy of this home: refused like itself, but named as a copy.
    @Test func ownDeviceIDFromAnotherInstanceIsACopiedHome() throws {
        var own = Values.hello(summary: [:])
        own.deviceID = Self.me.deviceID
        for (nonce, copied) in [(Self.twin, true), (Self.mine, false), ([], false)] {
            own.instanceNonce = nonce
            var machine = SessionMachine(identity: Self.me, options: SessionOptions())
            do {
                _ = try machine.received(.hello(own))
                Issue.record("its own Device ID was accepted")
            } catch {
                if case let .copiedHome(home) = error {
                    #expect(copied, "nonce \(nonce)")
                    #expect(home.instances == [Self.mine, Self.twin])
                    #expect(error.description.contains(
                        "home copied: device LOCAL-DEVICE is running from two homes (instances a1a1a1a1, b2b2b2b2); "
                            + "run `plait rejoin --new-key` on one of them"), "\(error)")
                } else if case .incompatible = error {
                    #expect(!copied, "nonce \(nonce): \(error)")
                } else {
                    Issue.record("unexpected \(error)")
                }
            }
        }
    }

    /// A valid Hello asks the owner to admit the peer before anything is read (the agent keeps one per instance).
    @Test func aValidHelloIsOfferedForAdmissionFirst() throws {
        var machine = SessionMachine(identity: Self.me, options: SessionOptions())
        var hello = Values.hello(summary: [:])
        hello.instanceNonce = Self.twin
        let actions = try machine.received(.hello(hello))
        guard case let .admit(admitted)? = actions.first, case .readGreeting? = actions.last else {
            Issue.record("no admission before the greeting read: \(actions)")
            return
        }
        #expect(admitted.instanceNonce == Self.twin)
    }

    /// A Notify naming two instances of this device's ID: reported and recorded; told on, the copies are in
    /// the next Notify.
    @Test func copiedInstancesInNotifyAreReportedRecordedAndTold() throws {
        var machine = SessionMachine(identity: Self.me, options: SessionOptions(mode: .agent))
        _ = machine.start()
        _ = try machine.answered(.status(Values.status(summary: [:])))
        _ = try Values.greet(&machine, hello: Values.hello(summary: [:]), local: Values.status(summary: [:]))
        let actions = try machine.received(.notify([:], report: nil, copies: [Self.twin, Self.mine]))
        let findings = actions.compactMap { if case let .finding(text) = $0 { text } else { nil } }
        // The peer's word, said as such (this device cannot see the other copy's connection).
        #expect(
            findings.contains {
                $0.hasPrefix("peer \(Values.peerID) reports that device LOCAL-DEVICE (this device) is running from two "
                    + "homes (instances a1a1a1a1, b2b2b2b2) at once: if so, this home was copied")
            }, "\(findings)")
        let recorded = actions.compactMap { if case let .recordCopiedHome(home) = $0 { home } else { nil } }
        #expect(
            recorded == [
                CopiedHome(deviceID: Self.me.deviceID, instances: [Self.mine, Self.twin], reportedBy: Values.peerID)
            ])
        // One instance only is not a copy.
        var single = SessionMachine(identity: Self.me, options: SessionOptions(mode: .agent))
        _ = single.start()
        _ = try single.answered(.status(Values.status(summary: [:])))
        _ = try Values.greet(&single, hello: Values.hello(summary: [:]), local: Values.status(summary: [:]))
        let lone = try single.received(.notify([:], report: nil, copies: [Self.mine]))
        #expect(!lone.contains { if case .recordCopiedHome = $0 { true } else { false } })

        // Telling: the next Notify carries the instances, the one after it does not.
        var teller = SessionMachine(identity: Self.me, options: SessionOptions(mode: .agent))
        _ = teller.start()
        _ = try teller.answered(.status(Values.status(summary: [:])))
        _ = try Values.greet(&teller, hello: Values.hello(summary: [:]), local: Values.status(summary: [:]))
        var told = try teller.tellCopies([Self.mine, Self.twin])
        guard case .readStatus? = told.last else { Issue.record("no status read for the Notify: \(told)"); return }
        told = try teller.answered(.status(Values.status(summary: [:])))
        guard case let .notify(_, _, copies)? = Values.sent(told).first else {
            Issue.record("no Notify: \(told)")
            return
        }
        #expect(copies == [Self.mine, Self.twin])
        _ = try teller.localChanged()
        let next = try teller.answered(.summary([:]))
        guard case let .notify(_, _, later)? = Values.sent(next).first else {
            Issue.record("no Notify: \(next)")
            return
        }
        #expect(later.isEmpty)
    }
}
