import Foundation
import PlaitCore
import PlaitOutput
import PlaitStore
import PlaitSync

/// The outputs of the read commands, built one way for `--json` and the local API (one contract).
public enum ReadOutputs {
    /// `plait status --json`.
    public static func status(_ home: Home) throws -> StatusOutput {
        let store = home.store
        let summary = try store.summary()
        // The summary column, not the decoded baseline: a damaged baseline is reported by `doctor`, and its
        // status still shows.
        let baseline = try store.baselineSummaryIfAny()
        let unknown = try home.replica.uninterpretableCount()
        let changes = try store.changeCount()
        let timeline = try store.ownTimeline()
        let digest = home.replica.digest.hexString
        let state = home.replica.state
        // A damaged certificate stops networking, not the status of the lists: say so in its place.
        let device = Result { try home.identity.deviceID.description }
        var problem: String?
        if case .failure(let error) = device { problem = "\(error)" }
        return StatusOutput(
            baseline: baseline.map { $0.description }, changes: changes,
            device: try? device.get(), deviceProblem: problem, digest: digest, home: home.path,
            items: state.liveItemCount, lists: state.liveListIDs.count,
            name: home.deviceName, summary: summary.description, timeline: timeline.description, unknown: unknown,
            copied: try home.copiedHomeReports())
    }

    /// `plait lists --json`.
    public static func lists(_ state: ListsState) -> ListsOutput {
        // The walkers yield only records that exist (a loaded state is checked, see ListsState.checkConsistency);
        // display code stays free of force-unwraps all the same.
        let rows = state.liveListIDs.compactMap { id in state.lists[id].map { (id, $0) } }.map { id, list in
            ListSummary(
                color: list.color, completed: state.itemIDs(in: id, completed: true).count,
                id: id.description, pending: state.itemIDs(in: id, completed: false).count, title: list.title)
        }
        return ListsOutput(lists: rows)
    }

    /// `plait show [LIST] --json` as a value (the CLI streams the same JSON without building it).
    public static func show(_ state: ListsState, list: String?) throws -> ShowOutput {
        let ids = try list.map { [try Resolve.list($0, in: state)] } ?? state.liveListIDs
        let lists = ids.compactMap { id -> ShowList? in
            guard let list = state.lists[id] else { return nil }
            let items = { (completed: Bool) in
                state.itemIDs(in: id, completed: completed).map {
                    ShowItem(id: $0.description, text: state.items[$0]?.text ?? "")
                }
            }
            return ShowList(
                color: list.color, completed: items(true), id: id.description, pending: items(false), title: list.title)
        }
        return ShowOutput(lists: lists)
    }

    /// `plait log [--limit N] --json`: stored changes in replay order, the newest `limit` if given.
    public static func log(_ home: Home, limit: Int?) throws -> LogOutput {
        let changes = try home.store.changesInReplayOrder(limit: limit)
        let state = home.replica.state
        let domain = ListsDomain()
        let formatter = ISO8601DateFormatter()
        return LogOutput(changes: changes.map { change in
            LogEntry(
                change: change.ref.description, description: describe(change, state: state, domain: domain),
                kind: change.kind, lamport: Int(change.lamport),
                time: wallTimes.contains(change.wallTime)
                    ? formatter.string(from: Date(timeIntervalSince1970: Double(change.wallTime) / 1000)) : nil,
                version: Int(change.version))
        })
    }

    /// The wall times (ms) shown as dates: 1970-01-01 to 9999-12-31, four-digit years.
    static let wallTimes: ClosedRange<Int64> = 0...253_402_300_799_999

    /// One line of `plait log` saying what a change does, in the names the state has now.
    public static func describe(_ change: Change, state: ListsState, domain: ListsDomain) -> String {
        if change.kind == Change.timelineEndKind { return "timeline ended" }
        if change.kind == TimelineBegin.kind { return "timeline begun" }
        guard domain.canInterpret(kind: change.kind, version: change.version) else {
            return "(needs a newer plait: \(change.kind) v\(change.version))"
        }
        guard let decoded = try? ListsChange(kind: change.kind, version: change.version, payload: change.payload) else {
            return "(payload does not decode)"
        }
        let list = { (id: ObjectID) in "'\(state.lists[id]?.title ?? Resolve.short(id))'" }
        let item = { (id: ObjectID) in "'\(state.items[id]?.text ?? Resolve.short(id))'" }
        let place = { (position: Position) -> String in
            switch position {
            case .top: return "at the top"
            case .bottom: return "at the bottom"
            case let .after(id): return "after \(state.lists[id] != nil ? list(id) : item(id))"
            }
        }
        switch decoded {
        case let .listCreate(_, title, color, at):
            return "create list '\(title)'\(color.map { " (\($0))" } ?? "") \(place(at))"
        case let .listRename(id, title): return "rename list \(Resolve.short(id)) to '\(title)'"
        case let .listRecolor(id, color): return "recolor list \(list(id)) to \(color ?? "none")"
        case let .listMove(id, at): return "move list \(list(id)) \(place(at))"
        case let .listDelete(id, observed, _):
            return "delete list \(list(id)) (seen: \(observed.isEmpty ? "nothing" : observed.description))"
        case let .itemCreate(_, listID, text, at): return "add '\(text)' to \(list(listID)) \(place(at))"
        case let .itemEdit(id, text): return "edit \(Resolve.short(id)) to '\(text)'"
        case let .itemComplete(id): return "complete \(item(id))"
        case let .itemReopen(id): return "reopen \(item(id))"
        case let .itemMove(id, listID, at):
            return "move \(item(id))\(listID.map { " to \(list($0))" } ?? "") \(place(at))"
        case let .itemDelete(id): return "delete \(item(id))"
        }
    }
}

extension ReadOutputs {
    /// `plait peers --json`: each paired device, its state (what went wrong outranks what the summaries say:
    /// "in sync" only when nothing did, DESIGN §10) and the summary it last acknowledged.
    public static func peers(_ home: Home) throws -> PeersOutput {
        let summary = try home.store.summary()
        let rows = try home.store.peers()
        let forks = Dictionary(grouping: try home.store.forks(), by: \.peer)
        let copied = Set(try home.store.copiedHomes(now: Replica.now()).map(\.deviceID))
        let state = { (peer: PeerRecord) -> String in
            if copied.contains(peer.deviceID) { return "home copied (run `plait rejoin --new-key` on one copy)" }
            // What the last connection found outranks what the last session that ran said.
            if peer.refusedThisDeviceAt != nil { return "refuses this device (not paired there)" }
            if forks[peer.deviceID] != nil { return "forked" }
            if peer.diverged != nil { return "diverged" }
            if peer.refused != nil { return "refused changes" }
            if peer.claim != nil { return "claims this device's timeline" }
            // The summaries below are those of the last session that ended well: not what holds now.
            if peer.failed != nil { return "the last session failed (`plait doctor` says why)" }
            guard let theirs = peer.lastSummary else { return "never seen" }
            if theirs == summary { return "in sync" }
            if summary.covers(theirs) { return "behind" }
            if theirs.covers(summary) { return "ahead" }
            return "out of step (each has changes the other lacks)"
        }
        return PeersOutput(
            peers: rows.map {
                let shown = state($0)
                return PeerOutput(
                    address: $0.address, claim: $0.claim, device: $0.deviceID, diverged: $0.diverged,
                    forked: (forks[$0.deviceID] ?? []).map(\.detail), inSync: shown == "in sync",
                    lastSeen: time($0.lastSeen), name: $0.name, pairedAt: time($0.pairedAt), refused: $0.refused,
                    state: shown, summary: $0.lastSummary?.description, succeededBy: $0.succeededBy,
                    refusedThisDevice: time($0.refusedThisDeviceAt))
            })
    }

    /// `plait peers --pending --json`: devices that tried to connect without being paired.
    public static func pendingPeers(_ home: Home) throws -> PendingPeersOutput {
        PendingPeersOutput(
            pending: try home.store.pendingPeers().map {
                PendingPeerOutput(
                    address: $0.address, attempts: $0.attempts, device: $0.deviceID, firstSeen: time($0.firstSeen),
                    lastSeen: time($0.lastSeen), name: $0.name)
            })
    }

    /// `plait doctor --json` from its checks.
    public static func doctor(_ checks: [DoctorCheck], home: String) -> DoctorOutput {
        DoctorOutput(
            checks: checks.map {
                DoctorCheckOutput(advice: $0.advice, check: $0.name, detail: $0.detail, status: $0.status.rawValue)
            },
            home: home, ok: !checks.contains { $0.status == .failed })
    }

    /// Which devices hold `change` ("TIMELINE:SEQ"): this one by its store, each paired one by the summary it last
    /// acknowledged (it may hold more by now, never less).
    public static func holders(_ home: Home, change text: String) throws -> HoldersOutput {
        let parts = text.split(separator: ":")
        guard parts.count == 2, let timeline = try? TimelineID(parsing: parts[0]), let seq = UInt64(parts[1]), seq >= 1
        else {
            throw CommandError.invalid(
                "'\(text.terminalExcerpt(limit: 60))' is not a change: write TIMELINE:SEQ as `plait log` shows it")
        }
        let ref = ChangeRef(timeline: timeline, seq: seq)
        var devices = [
            HoldersOutput.Device(
                holds: try home.store.summary().contains(ref), id: (try? home.identity.deviceID.description) ?? "",
                name: home.deviceName, this: true)
        ]
        for peer in try home.store.peers() {
            devices.append(
                HoldersOutput.Device(
                    holds: peer.lastSummary?.contains(ref) ?? false, id: peer.deviceID, name: peer.name, this: false))
        }
        return HoldersOutput(change: ref.description, devices: devices)
    }

    static func time(_ ms: Int64?) -> String? {
        ms.map { ISO8601DateFormatter().string(from: Date(timeIntervalSince1970: Double($0) / 1000)) }
    }
}
