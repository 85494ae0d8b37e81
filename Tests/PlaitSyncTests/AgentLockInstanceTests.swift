import Foundation
import PlaitCore
import PlaitNetnsSupport
import PlaitSession
@testable import PlaitSync
import PlaitTestSupport
import Testing

/// A command run beside its home's agent speaks with the agent's instance nonce (PROTOCOL.md §13.2 item 6): the
/// agent writes it in its lock file, and a peer seeing both connections sees one home, not a copied one.
@Suite struct AgentLockInstanceTests {
    @Test func aRunningAgentsNonceIsReadFromItsLockFileAndADeadOnesIsNot() throws {
        try withTemporaryDirectory { directory in
            let home = directory.path
            let nonce: [UInt8] = Array(0..<16)
            // A live process other than this one stands for the agent.
            let agent = try ChildProcess("/bin/sleep", ["30"])
            defer {
                agent.send(SIGKILL)
                agent.waitUntilExit()
            }
            let lock = home + "/" + AgentLock.fileName
            let text = "\(agent.pid)\n\(nonce.hexString)\n"
            try text.write(toFile: lock, atomically: true, encoding: .utf8)
            #expect(AgentLock.runningInstance(home: home) == nonce)
            agent.send(SIGKILL)
            agent.waitUntilExit()
            #expect(AgentLock.runningInstance(home: home) == nil, "a dead agent's nonce is not used")
            // This very process holding the lock (the agent itself) uses its own process nonce.
            let own = try AgentLock.acquire(home: home, instanceNonce: InstanceNonce.process)
            defer { own.release() }
            #expect(AgentLock.runningInstance(home: home) == nil)
            let written = try String(contentsOfFile: lock, encoding: .utf8)
            #expect(written == "\(getpid())\n\(InstanceNonce.process.hexString)\n")
        }
    }
}
