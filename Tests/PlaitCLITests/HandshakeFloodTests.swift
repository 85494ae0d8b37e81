import Foundation
import PlaitTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Admission under load (DESIGN §10, issue 8 case 10): strangers flooding the agent's port with connections that
/// never finish a handshake neither lock a paired device out nor fill the agent's log.
@Suite(.serialized) struct HandshakeFloodTests {
    static let seed: UInt64 = 0xF100_D010

    /// 64 connections from 127.0.0.2 (silent ones, garbage, ClientHellos cut short), each reopened as soon as the
    /// agent closes it; meanwhile the paired device syncs from 127.0.0.1 with the real binary, 8 times.
    @Test func aHandshakeFloodDoesNotLockOutAPairedDevice() throws {
        try withSandbox { sandbox in
            let server = sandbox.root + "/server"
            let laptop = sandbox.root + "/laptop"
            try sandbox.ok(["init", "--name", "server", "--home", server])
            try sandbox.ok(["init", "--name", "laptop", "--home", laptop])
            let serverID = try sandbox.ok(["id", "--home", server]).lines.last!
            let laptopID = try sandbox.ok(["id", "--home", laptop]).lines.last!
            try sandbox.ok(["pair", "--trust", laptopID, "--home", server])
            try sandbox.ok(["pair", "--trust", serverID, "--home", laptop])
            try sandbox.ok(["list", "add", "Inbox", "--home", server])

            let agent = try RunningAgent(sandbox: sandbox, home: server)
            var agentStopped = false
            defer { if !agentStopped { agent.stop() } }
            let plan = HandshakeFlood.Plan(
                sources: ["127.0.0.2"], connections: 64, opensPerSecond: 300, duration: .seconds(60),
                maximumOpens: 18_000, seed: Self.seed)
            let flood = HandshakeFlood(port: agent.port, plan: plan)
            flood.start()
            defer { flood.stop() }
            let context = "seed \(String(Self.seed, radix: 16))"
            // The flood is on: every slot opened, and the agent is already closing strangers.
            let warm = flood.wait { $0.opened >= 64 && $0.closedByListener >= 16 }
            #expect(warm, "the flood never got going (\(context)): \(flood.tally)")

            let before = flood.tally
            var failures: [String] = []
            for round in 0..<8 {
                try sandbox.ok(["add", "Inbox", "item \(round)", "--home", server])
                let run = try sandbox.run(["sync", "--peer", agent.address, "--home", laptop, "--timeout", "10"])
                if !run.succeeded { failures.append("round \(round): \(run.stderr)") }
            }
            let during = flood.tally
            let tally = flood.stop()
            let failed = failures.joined(separator: "\n")
            #expect(failures.isEmpty, "\(failures.count) of 8 syncs failed (\(context), flood \(tally)):\n\(failed)")
            #expect(
                during.opened - before.opened >= 100,
                "the flood must go on while the paired device syncs (\(context)): before \(before), after \(during)")
            let laptopShown = try sandbox.ok(["show", "--json", "--home", laptop]).stdout
            let serverShown = try sandbox.ok(["show", "--json", "--home", server]).stdout
            #expect(laptopShown == serverShown, "the laptop got every item")

            #expect(agent.stop() == 0, "the agent exits cleanly: \(agent.log.suffix(2000))")
            agentStopped = true
            let lines = agent.log.split(separator: "\n").map(String.init)
            // One summary line a minute (and one when the agent stops), never one line per stranger.
            let summaries = lines.filter { $0.contains("at the handshake") }
            let strangers = lines.filter {
                $0.contains("127.0.0.2") || $0.contains("handshak") || $0.contains("connection failed")
            }
            let shown = strangers.prefix(20).joined(separator: "\n")
            #expect(
                (1...2).contains(summaries.count) && strangers.count == summaries.count,
                "at most a couple of summary lines about strangers (\(context), flood \(tally)):\n\(shown)")
            let dropped = summaries.compactMap { line -> Int? in
                guard let range = line.range(of: "dropped ") else { return nil }
                return Int(line[range.upperBound...].prefix { $0.isNumber })
            }.reduce(0, +)
            #expect(
                dropped >= tally.closedByListener / 2,
                "the summary counts the strangers the agent closed (\(tally)): \(summaries)")
            #expect(summaries.allSatisfy { $0.contains("from 1 address") }, "\(summaries)")
            #expect(lines.count < 60, "the log stays short: \(lines.count) lines")
        }
    }

    /// A server that closes the connection in the middle of the TLS handshake (as an overloaded agent does) is
    /// reported as such, not as "not a plait device": once with an orderly close, once with a reset.
    @Test func aConnectionClosedDuringTheHandshakeIsReportedAsSuch() throws {
        try withSandbox { sandbox in
            try sandbox.initialize(name: "laptop")
            let closer = try HandshakeCloser(rounds: 2)
            defer { closer.stop() }
            for round in 0..<2 {
                let run = try sandbox.fails(["sync", "--peer", "127.0.0.1:\(closer.port)", "--timeout", "10"])
                #expect(
                    run.stderr.contains("closed the connection during the TLS handshake"),
                    "round \(round) (\(round == 0 ? "close" : "reset")): \(run.stderr)")
                #expect(!run.stderr.contains("not a plait device"), "\(run.stderr)")
                #expect(run.stderr.split(separator: "\n").count == 1, "one line: \(run.stderr)")
            }
        }
    }
}

/// A TCP server on 127.0.0.1 that takes `rounds` connections, reads what the client sends first (its ClientHello),
/// and closes: the first with an orderly close (FIN), the next with a reset (RST).
private final class HandshakeCloser: @unchecked Sendable {
    let port: UInt16
    private let descriptor: Int32
    private let done = DispatchSemaphore(value: 0)

    init(rounds: Int) throws {
        let (listening, bound) = try listeningOnLoopback()
        port = bound
        descriptor = listening
        let finished = done
        let thread = Thread {
            defer { finished.signal() }
            for round in 0..<rounds {
                var entry = pollfd(fd: listening, events: Int16(POLLIN), revents: 0)
                guard poll(&entry, 1, 20_000) > 0 else { return }
                let client = accept(listening, nil, nil)
                guard client >= 0 else { return }
                var buffer = [UInt8](repeating: 0, count: 4096)
                var waiting = pollfd(fd: client, events: Int16(POLLIN), revents: 0)
                if poll(&waiting, 1, 10_000) > 0, round == 0 {
                    _ = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
                } else {
                    // Unread bytes and a zero linger: close(2) sends a reset.
                    var linger = linger(l_onoff: 1, l_linger: 0)
                    _ = setsockopt(client, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<linger>.size))
                }
                close(client)
            }
        }
        thread.start()
    }

    /// Stops listening and waits for the thread (which gives up on its own after 20 s without a client).
    func stop() {
        shutdown(descriptor, Int32(SHUT_RDWR))
        done.wait()
        done.signal()
        close(descriptor)
    }
}

/// A TCP socket listening on 127.0.0.1 at a port the kernel picks: its descriptor (the caller closes it) and port.
/// The kernel completes connections to it whether or not they are accepted.
func listeningOnLoopback() throws -> (descriptor: Int32, port: UInt16) {
    let listening = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(listening, $0, length) == 0 && listen(listening, 4) == 0 && getsockname(listening, $0, &length) == 0
        }
    }
    guard bound else {
        close(listening)
        throw CLITestFailure("cannot listen on 127.0.0.1: \(String(cString: strerror(errno)))")
    }
    return (listening, UInt16(bigEndian: address.sin_port))
}
