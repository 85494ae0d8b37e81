import Foundation
import PlaitCore
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Findings of a hostile tester acting as a paired peer (2026-11-24), each seen failing before its fix: the real
/// agent, real TLS on loopback.
@Suite(.serialized) struct HostilePeerTests {
    let sync = SyncTests()

    func openDescriptors(_ pid: pid_t) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
    }

    /// Every session the agent ran stayed alive after it ended (its options' closures held the entry that holds
    /// the session), with its wake-up pipe: two descriptors per `plait sync`, so ordinary reconnects used up the
    /// agent's descriptors.
    @Test func endedSessionsLeaveNoDescriptorsBehind() throws {
        try withSandbox { sandbox in
            let devices = try sync.devices(sandbox, ["server", "laptop"])
            try sync.pair(sandbox, devices[0], devices[1])
            let agent = try RunningAgent(sandbox: sandbox, home: devices[0].home)
            defer { agent.stop() }
            try sandbox.ok(["list", "add", "L", "--home", devices[1].home])
            // Warm: the first session opens what the agent keeps (the store's connections, the event hub).
            try sandbox.ok(["sync", "--peer", agent.address, "--home", devices[1].home])
            let before = openDescriptors(agent.process.pid)
            for index in 1...20 {
                try sandbox.ok(["add", "L", "item \(index)", "--home", devices[1].home])
                try sandbox.ok(["sync", "--peer", agent.address, "--home", devices[1].home])
            }
            // The agent closes a session's connection as it ends; let the last one finish.
            let settled = eventually(10) { openDescriptors(agent.process.pid) <= before + 4 }
            #expect(settled, "descriptors \(before) before 20 syncs, \(openDescriptors(agent.process.pid)) after")
        }
    }
}
