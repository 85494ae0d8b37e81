import Foundation
import PlaitTestSupport
import Testing

/// A home restored from a backup, an item added there before its first sync, and a peer that had compacted the
/// home's later changes into its baseline (bad-luck tester 2026-11-25, H3): the new item ends up only in the
/// `kept_aside` table, and `doctor` said "if it was restored from a backup, the baseline holds them already" —
/// false for that item. plait cannot yet bring it back; `doctor` now names it, and says to add it again.
@Suite struct RestoredBackupTests {
    @Test func anItemAddedOnARestoredHomeThatOnlyKeptAsideHoldsIsNamed() throws {
        try withSandbox { sandbox in
            let devices = try sandbox.pairedHomes(["laptop", "server"])
            let (laptop, server) = (devices[0], devices[1])
            try sandbox.ok(["list", "add", "L", "--home", laptop.home])
            for text in ["x1", "x2"] { try sandbox.ok(["add", "L", text, "--home", laptop.home]) }
            var agent = try RunningAgent(sandbox: sandbox, home: server.home)
            try sandbox.ok(["sync", "--peer", agent.address, "--home", laptop.home])
            let backup = sandbox.root + "/backup"
            try FileManager.default.copyItem(atPath: laptop.home, toPath: backup)
            for text in ["y1", "y2"] { try sandbox.ok(["add", "L", text, "--home", laptop.home]) }
            try sandbox.ok(["sync", "--peer", agent.address, "--home", laptop.home])
            // The server edits after it (so its own head passes the laptop's), then compacts.
            agent.stop()
            try sandbox.ok(["add", "L", "b0", "--home", server.home])
            try sandbox.ok(["compact", "--home", server.home])
            agent = try RunningAgent(sandbox: sandbox, home: server.home)
            defer { agent.stop() }

            // The backup is restored, and an item added before the first sync.
            try FileManager.default.removeItem(atPath: laptop.home)
            try FileManager.default.copyItem(atPath: backup, toPath: laptop.home)
            try sandbox.ok(["add", "L", "z1", "--home", laptop.home])
            _ = try sandbox.run(["sync", "--peer", agent.address, "--home", laptop.home])

            let doctor = try sandbox.run(["doctor", "--listen", "127.0.0.1:0", "--home", laptop.home])
            #expect(doctor.status != 0, "\(doctor)")
            #expect(!doctor.stdout.contains("the baseline holds them already"), "\(doctor)")
            #expect(doctor.stdout.contains("1 of them created items this device does not hold: 'z1'"), "\(doctor)")
            #expect(doctor.stdout.contains("add those items again"), "\(doctor)")
        }
    }
}
