import Foundation
import Testing

/// `plait pair --trust`, `unpair` and `peers`, run as a user would, on two homes.
@Suite struct PeerCommandTests {
    @Test func pairingByIDListsThePeerAndUnpairRemovesIt() throws {
        try withSandbox { sandbox in
            try sandbox.initialize(name: "laptop")
            let other = sandbox.root + "/other"
            try sandbox.ok(["init", "--name", "server", "--home", other])
            let otherID = try sandbox.ok(["id", "--home", other]).lines.last!
            let run = try sandbox.ok(["pair", "--trust", otherID, "--address", "127.0.0.1:7400", "--name", "server"])
            #expect(run.stdout.contains("paired with \(otherID)"))
            let peers = try sandbox.ok(["peers", "--json"]).json()["peers"] as? [[String: Any]] ?? []
            #expect(peers.count == 1)
            #expect(peers.first?["device"] as? String == otherID)
            #expect(peers.first?["address"] as? String == "127.0.0.1:7400")
            #expect(peers.first?["name"] as? String == "server")
            #expect(peers.first?["state"] as? String == "never seen")
            // Lower case and without dashes is the same ID: pairing again updates, does not duplicate.
            let loose = otherID.lowercased().replacingOccurrences(of: "-", with: "")
            try sandbox.ok(["pair", "--trust", loose])
            let again = try sandbox.ok(["peers", "--json"]).json()["peers"] as? [[String: Any]] ?? []
            #expect(again.count == 1 && again.first?["address"] as? String == "127.0.0.1:7400")
            try sandbox.ok(["unpair", otherID])
            let none = try sandbox.ok(["peers", "--json"]).json()["peers"] as? [[String: Any]] ?? [["x": 1]]
            #expect(none.isEmpty)
            let twice = try sandbox.fails(["unpair", otherID])
            #expect(twice.stderr.contains("no paired device"))
        }
    }

    @Test func aMistypedDeviceIDIsRejectedAndNothingIsStored() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            let other = sandbox.root + "/other"
            try sandbox.ok(["init", "--name", "server", "--home", other])
            let otherID = Array(try sandbox.ok(["id", "--home", other]).lines.last!)
            // Change one character in every group in turn: each one is caught.
            var rng = SystemRandomNumberGenerator()
            for group in 0..<8 {
                var typo = otherID
                let position = group * 8 + Int.random(in: 0..<7, using: &rng)
                let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZ234567").filter { $0 != typo[position] }
                typo[position] = alphabet.randomElement(using: &rng)!
                let run = try sandbox.fails(["pair", "--trust", String(typo)])
                #expect(run.stderr.contains("mistyped"), "group \(group + 1): \(run)")
            }
            let peers = try sandbox.ok(["peers", "--json"]).json()["peers"] as? [[String: Any]] ?? [["x": 1]]
            #expect(peers.isEmpty)
        }
    }

    @Test func pairingRefusesItselfABadAddressAndNoID() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            let own = try sandbox.ok(["id"]).lines.last!
            #expect(try sandbox.fails(["pair", "--trust", own]).stderr.contains("own ID"))
            let other = sandbox.root + "/other"
            try sandbox.ok(["init", "--home", other])
            let otherID = try sandbox.ok(["id", "--home", other]).lines.last!
            for address in ["127.0.0.1", "host:0", "host:70000", ":7400", "::1:7400", "[::1]"] {
                #expect(try sandbox.fails(["pair", "--trust", otherID, "--address", address]).stderr.contains("HOST:PORT"))
            }
            try sandbox.ok(["pair", "--trust", otherID, "--address", "[::1]:7400"])
            let peers = try sandbox.ok(["peers", "--json"]).json()["peers"] as? [[String: Any]] ?? []
            #expect(peers.first?["address"] as? String == "[::1]:7400")
            #expect(try sandbox.fails(["pair"]).stderr.contains("--trust"))
            #expect(try sandbox.ok(["peers", "--pending"]).stdout.contains("no pending devices"))
        }
    }
}
