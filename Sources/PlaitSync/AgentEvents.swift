import Foundation
import PlaitCore
import PlaitSession
import PlaitStore

/// What the agent has told its event clients so far, so that it tells them only what is new. It is read and
/// written only when something happened (a commit seen, a batch pulled, a session's record): an idle agent
/// publishes nothing and reads nothing for its events (DESIGN §12).
final class AgentEventState: @unchecked Sendable {
    let lock = NSLock()
    /// The store's summary when "change.applied" events were last published: the next ones are its difference.
    var published: Summary?
    /// Per peer, the forked timelines already published.
    var forks: [String: Set<TimelineID>] = [:]
    /// Per peer, the divergence already published.
    var diverged: [String: String] = [:]
    /// Changes set aside as damaged (DESIGN §10), as last read; each pulled batch checks whether they came back.
    var quarantined: [QuarantinedRange] = []
}

extension Agent {
    /// More new changes than this in one look are published as one event per timeline (`changes`: N): a
    /// catch-up of 100,000 changes must not push everything else out of the ring.
    static let changeEventsPerLook = 256

    /// Publishes "change.applied" for every change the store gained since the last call: the difference of the
    /// stored summary (one read of the timelines' heads), then the new rows of each timeline. Called only when
    /// the store changed: a commit seen by the watch thread (any process, the agent's own API edits included), or
    /// a batch a session pulled from `peer`. Serialized: two callers never publish one change twice.
    func publishAppliedChanges(pulledFrom peer: String?) {
        eventState.lock.withLock {
            guard let summary = try? home.store.summary() else { return }
            let before = eventState.published ?? Summary()
            guard summary != before else { return }
            eventState.published = summary
            let own = try? home.store.ownTimeline()
            var ranges: [(timeline: TimelineID, first: UInt64, last: UInt64)] = []
            for timeline in summary.timelines where summary[timeline] > before[timeline] {
                ranges.append((timeline, before[timeline] + 1, summary[timeline]))
            }
            let total = ranges.reduce(0) { $0 + Int($1.last - $1.first + 1) }
            let origin = { (timeline: TimelineID) -> [String: EventValue] in
                var data: [String: EventValue] = ["origin": timeline == own ? "local" : "pulled"]
                if timeline != own, let peer { data["from"] = .string(peer) }
                return data
            }
            guard total <= Self.changeEventsPerLook else {
                for range in ranges {
                    var data = origin(range.timeline)
                    data["timeline"] = .string(range.timeline.description)
                    data["first"] = EventValue(range.first)
                    data["last"] = EventValue(range.last)
                    data["changes"] = EventValue(range.last - range.first + 1)
                    events.publish(.changeApplied, data)
                }
                return
            }
            var changes: [Change] = []
            for range in ranges {
                let limit = Int(range.last - range.first + 1)
                changes += (try? home.store.changes(of: range.timeline, from: range.first, limit: limit)) ?? []
            }
            // Several timelines in one look: in replay order, as the state applied them.
            changes.sort { $0.orderKey < $1.orderKey }
            let state = changes.isEmpty ? nil : home.replica.state
            for change in changes {
                var data = origin(change.timeline)
                data["change"] = .string(change.ref.description)
                data["kind"] = .string(change.kind)
                if let decoded = try? ListsChange(kind: change.kind, version: change.version, payload: change.payload) {
                    let (list, item) = Self.objects(of: decoded)
                    if let item { data["item"] = .string(item.description) }
                    // The agent's state knows what it pulled; another process's new item is in the rows.
                    let known = { (item: ObjectID) -> ObjectID? in
                        state?.items[item]?.list ?? (try? self.home.store.list(ofItem: item)) ?? nil
                    }
                    if let list = list ?? item.flatMap(known) {
                        data["list"] = .string(list.description)
                    }
                }
                events.publish(.changeApplied, data)
            }
            if peer != nil && !eventState.quarantined.isEmpty { publishHealedChanges() }
        }
    }

    /// The list and item a change names (an item's list when the change says it: create, move to a list).
    static func objects(of change: ListsChange) -> (list: ObjectID?, item: ObjectID?) {
        switch change {
        case let .listCreate(id, _, _, _), let .listRename(id, _), let .listRecolor(id, _), let .listMove(id, _),
            let .listDelete(id, _, _):
            return (id, nil)
        case let .itemCreate(id, list, _, _):
            return (list, id)
        case let .itemMove(id, list, _):
            return (list, id)
        case let .itemEdit(id, _), let .itemComplete(id), let .itemReopen(id), let .itemDelete(id):
            return (nil, id)
        }
    }

    /// Reads which changes are set aside as damaged, after something was found (at start, or by a session):
    /// from then on each pulled batch checks whether good copies came back.
    func noteQuarantine() {
        guard let ranges = try? home.store.quarantined() else { return }
        eventState.lock.withLock { eventState.quarantined = ranges }
    }

    /// Under `eventState.lock`: "damage.healed" for each stretch of set-aside changes that good copies replaced.
    private func publishHealedChanges() {
        guard let now = try? home.store.quarantined() else { return }
        for old in eventState.quarantined {
            let left = now.first { $0.timeline == old.timeline }
            let healedUpTo = left.map { $0.seqs.lowerBound - 1 } ?? old.seqs.upperBound
            guard healedUpTo >= old.seqs.lowerBound else { continue }
            events.publish(
                .damageHealed,
                [
                    "what": "changes", "timeline": .string(old.timeline.description),
                    "first": EventValue(old.seqs.lowerBound), "last": EventValue(healedUpTo),
                ])
        }
        eventState.quarantined = now
    }

    /// Damaged derived data rebuilt from the source (the replica's repair handler).
    func publishRepair(_ repair: DerivedStateRepair) {
        events.publish(.damageHealed, ["what": "derived state", "detail": .string(repair.description)])
    }

    /// A session's record of its peer: a fork or a divergence not published yet becomes an event.
    func publishRecord(_ record: SessionRecord) {
        switch record {
        case let .forks(peer, forks):
            let fresh = eventState.lock.withLock { () -> [SessionRecord.Fork] in
                let known = eventState.forks[peer] ?? []
                eventState.forks[peer] = Set(forks.map(\.timeline))
                return forks.filter { !known.contains($0.timeline) }
            }
            for fork in fresh {
                let data: [String: EventValue] = [
                    "device": .string(peer), "timeline": .string(fork.timeline.description),
                    "seq": EventValue(fork.seq),
                ]
                events.publish(.fork, data)
            }
        case let .findings(peer, diverged):
            let fresh = eventState.lock.withLock { () -> Bool in
                defer { eventState.diverged[peer] = diverged }
                return diverged != nil && eventState.diverged[peer] != diverged
            }
            if fresh, let diverged {
                events.publish(.divergence, ["device": .string(peer), "detail": .string(diverged)])
            }
        }
    }
}

extension Agent {
    /// Two copies of one home met: the device and how many instances of it were seen at once.
    func publishCopiedHome(_ copied: CopiedHome) {
        events.publish(
            .homeCopied,
            [
                "device": .string(copied.deviceID), "instances": EventValue(copied.instances.count),
                "detail": .string(copied.description),
            ])
    }
}
