import Foundation
import PlaitCore
import PlaitStore
import PlaitTestSupport
import Testing
@testable import plait

/// The edit mix of `plait demo`, run on three stores that exchange changes every few rounds (no agent, no
/// clock: the same run every time).
@Suite struct DemoScriptTests {
    /// Every change `from` holds and `to` lacks, in replay order, integrated into `to`.
    func send(_ from: Device, _ to: Device) throws {
        let held = try to.summary
        let missing = try from.store.changesInReplayOrder(limit: nil).filter { !held.contains($0.ref) }
        if !missing.isEmpty { _ = try to.replica.integrate(missing) }
    }

    func exchangeAll(_ devices: [Device]) throws {
        for from in devices {
            for to in devices where to !== from { try send(from, to) }
        }
    }

    @Test func theMixUsesEveryKindAndTheAddsConcurrentWithTheDeleteKeepTheSharedList() throws {
        // Not `withTemporaryDirectory { … }`: this body in a closure crashes Swift 6.3.1's SendNonSendable pass.
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let edits = 200
        let devices = try (0..<3).map { try Device("d\($0)", in: directory, timeline: TimelineID(UInt64(10 + $0))) }
        var scripts = (0..<3).map { DemoScript(device: $0, name: "d\($0)", edits: edits, seed: 42) }
        #expect(Set(scripts.map(\.sharedList)).count == 1, "every device derives the same shared list ID")
        #expect(Set(scripts.map(\.ownList)).count == 3)
        var kinds: [String: Int] = [:]
        for index in 0..<edits {
            // Every fifth round the devices catch up, and right before the meeting (so the delete and the
            // adds there are made against the same state, and none of them sees the others).
            if index % 5 == 0 || index == scripts[0].meeting { try exchangeAll(devices) }
            for (number, device) in devices.enumerated() {
                let kind = try edit(device, &scripts[number], at: index)
                kinds[kind, default: 0] += 1
                if index == scripts[0].meeting {
                    let expected = number == 1 ? "list.delete" : "item.create"
                    #expect(kind == expected, "device \(number) at the meeting")
                }
            }
        }
        #expect(Set(kinds.keys) == ListsChange.kinds, "kinds used: \(kinds)")
        #expect(kinds["list.delete"] == 1)
        #expect(kinds.values.reduce(0, +) == 3 * edits)

        try exchangeAll(devices)
        let summaries = try devices.map { try $0.summary }
        #expect(Set(summaries).count == 1 && summaries[0].count == UInt64(3 * edits))
        #expect(Set(devices.map(\.digest)).count == 1)
        #expect(Set(try devices.map { try $0.reopened().digest }).count == 1)
        let state = devices[0].replica.state
        let shared = try #require(state.lists[scripts[0].sharedList])
        #expect(!shared.deleted, "the adds concurrent with the delete keep Groceries alive")
    }

    /// Makes `script`'s edit number `index` on `device`, as `plait demo` does: one transaction. Returns its kind.
    func edit(_ device: Device, _ script: inout DemoScript, at index: Int) throws -> String {
        var local = script
        defer { script = local }
        return try device.replica.edit { edit in
            let change = try local.change(at: index, in: edit.state, delete: { try edit.listDelete($0) })
            try edit.append(change)
            return change.kind
        }
    }

    /// The kinds of the first `count` edits of one device alone, with `seed`.
    func kinds(seed: UInt64, device number: Int, count: Int, in directory: TemporaryDirectory) throws -> [String] {
        let device = try Device("s\(seed)-\(number)-\(UUID().uuidString)", in: directory, timeline: TimelineID(7))
        var script = DemoScript(device: number, name: "d", edits: count, seed: seed)
        return try (0..<count).map { index in try edit(device, &script, at: index) }
    }

    @Test func theSeedFixesTheDrawsAndEachDeviceDrawsDifferently() throws {
        try withTemporaryDirectory { directory in
            let first = try kinds(seed: 3, device: 2, count: 40, in: directory)
            let again = try kinds(seed: 3, device: 2, count: 40, in: directory)
            let otherSeed = try kinds(seed: 4, device: 2, count: 40, in: directory)
            let otherDevice = try kinds(seed: 3, device: 3, count: 40, in: directory)
            #expect(first == again)
            #expect(first != otherSeed)
            #expect(first != otherDevice)
        }
    }
}
