import Foundation
import PlaitCore
import PlaitSession
import PlaitStore
import PlaitTLS

extension Doctor {
    /// The source and what sessions found (DESIGN §10): every timeline's hash chain, changes set aside, the
    /// own timeline, forks, divergences, refusals and claims recorded per peer. Says "nothing lost" only when
    /// nothing is damaged; names what no paired peer is known to hold as unrecoverable.
    static func checkHistory(storePath: String, own: DeviceID? = nil, certificate: [UInt8]? = nil) -> [DoctorCheck] {
        let report: HistoryReport
        do {
            report = try Store.historyReport(readOnlyAt: storePath)
        } catch {
            return [DoctorCheck(name: "history", status: .failed, detail: "cannot read the history: \(error)")]
        }
        var checks: [DoctorCheck] = []
        // Damaged changes (found now) and quarantined ones (set aside earlier): who can give them back?
        var lost: [(TimelineID, ClosedRange<UInt64>, String)] = report.damaged.map { damage in
            (damage.ref.timeline, damage.ref.seq...(damage.ref.seq + UInt64(max(damage.following, 1)) - 1),
             "damaged: its hash does not continue the chain")
        }
        lost += report.quarantined.map { ($0.timeline, $0.seqs, "set aside (quarantine): \($0.reason)") }
        if lost.isEmpty {
            checks.append(
                DoctorCheck(
                    name: "hash chains", status: .ok,
                    detail: "every stored change continues its timeline's hash chain; nothing is set aside"))
        }
        for (timeline, seqs, what) in lost {
            let holders = report.peers.filter { ($0.lastSummary?[timeline] ?? 0) >= seqs.upperBound }.map(\.name)
            let count = seqs.upperBound - seqs.lowerBound + 1
            let range = "\(timeline):\(seqs.lowerBound)" + (count > 1 ? "-\(seqs.upperBound)" : "")
            if holders.isEmpty {
                checks.append(
                    DoctorCheck(
                        name: "hash chains", status: .failed,
                        detail: "changes \(range) are \(what); no paired device is known to hold them: \(count) "
                            + "changes unrecoverable unless a device not yet synced holds them",
                        advice: "run `plait repair` (it sets them aside, rebuilds the state, and pulls good copies "
                            + "from every reachable paired device)."))
            } else {
                checks.append(
                    DoctorCheck(
                        name: "hash chains", status: .failed,
                        detail: "changes \(range) are \(what); \(holders.joined(separator: ", ")) held them when "
                            + "last seen",
                        advice: "run `plait repair` or `plait sync` (good copies are pulled from those devices)."))
            }
        }
        for fault in report.headRecords {
            checks.append(
                DoctorCheck(
                    name: "head records", status: .failed,
                    detail: "\(fault): the record is damaged (bit rot, or an edited store), not the change; nothing "
                        + "is lost",
                    advice: "run `plait repair` (it rewrites the record from the change; so does the next edit, sync "
                        + "or agent start). Damage at rest can mean a failing disk: keep a backup."))
        }
        for kept in report.keptAside {
            let count = kept.seqs.upperBound - kept.seqs.lowerBound + 1
            let range = "\(kept.timeline):\(kept.seqs.lowerBound)" + (count > 1 ? "-\(kept.seqs.upperBound)" : "")
            // What no device may show: items and lists those changes created that this device does not hold at all.
            // The advice said "if it was restored from a backup, the baseline holds them already", false for an edit
            // made on the restored home before its first sync (bad-luck tester 2026-11-25, H3); a sync, `repair` and
            // `rejoin` now author them again (`Replica.bringBackKeptAside`), so this stays only when they could not.
            let unshown = report.keptAsideUnshown.filter { $0.ref.timeline == kept.timeline }
            let named = unshown.prefix(5).map {
                "\($0.kind == .list ? "list " : "")'\($0.text.terminalExcerpt(limit: 40))' (\($0.ref))"
            }.joined(separator: ", ") + (unshown.count > 5 ? " and \(unshown.count - 5) more" : "")
            checks.append(
                DoctorCheck(
                    name: "kept aside", status: unshown.isEmpty ? .warning : .failed,
                    detail: "\(count) of this device's own changes (\(range)) are kept aside, not applied: \(kept.reason). "
                        + "Nothing was deleted: their bytes and signatures are in the store's kept_aside table"
                        + (unshown.isEmpty
                            ? "; every item and list they created is held here"
                            : ". \(unshown.count) of them created items or lists this device does not hold: \(named)"),
                    advice: unshown.isEmpty
                        ? "keep this home. Other edits among them (completing, renaming, moving or deleting an item "
                            + "this device holds) cannot be checked against the baseline, and are not made again: do "
                            + "again any that is missing."
                        : "run `plait repair` (or `plait rejoin`, if the own timeline check above fails): it makes "
                            + "them again as new changes, with the edits made to them since, and syncs them."))
        }
        if let problem = report.baselineProblem {
            checks.append(
                DoctorCheck(
                    name: "baseline", status: .failed, detail: "the stored baseline does not decode: \(problem)",
                    advice: "run `plait repair`; the baseline is pulled again from a paired device."))
        }
        if let suspicion = report.ownTimelineSuspicion {
            checks.append(
                DoctorCheck(
                    name: "own timeline", status: .failed,
                    detail: "this device's timeline \(report.ownTimeline) may continue on another device: "
                        + "\(suspicion); nothing is authored on it",
                    advice: "run `plait rejoin` to go on with a new timeline (if this home is a copy of another that "
                        + "goes on too, run `plait rejoin --new-key` here instead, so the two do not share a Device "
                        + "ID)."))
        }
        if report.ownTimelineSuspicion == nil, let certificate, let begun = report.ownTimelineCertificate,
            begun != certificate
        {
            checks.append(
                DoctorCheck(
                    name: "own timeline", status: .failed,
                    detail: "this home's key (key.pem) is not the key this device's timeline \(report.ownTimeline) "
                        + "was begun with: every peer would refuse a change signed with it, so nothing is authored "
                        + "(an interrupted `plait rejoin --new-key` leaves this)",
                    advice: "run `plait rejoin`: it ends that timeline with its own key (kept in the home's retired/ "
                        + "directory) and goes on with a new one signed with this key."))
        }
        let names = Dictionary(report.peers.map { ($0.deviceID, $0.name) }, uniquingKeysWith: { first, _ in first })
        for fork in report.forks {
            checks.append(
                DoctorCheck(
                    name: "peer \(names[fork.peer] ?? fork.peer)", status: .failed, detail: "forked: \(fork.detail)",
                    advice: "on the device that is a copy (or restored from a backup), run `plait rejoin`: this fork "
                        + "(of a timeline from before signed ones, or inside a baseline) cannot be resolved by "
                        + "renaming, so the two histories are kept apart."))
        }
        // Copied homes (DESIGN §11): this Device ID, or a peer's, running from two homes at once.
        let own = own?.description
        for copied in (try? Store.copiedHomes(readOnlyAt: storePath, now: Replica.now())) ?? [] {
            let sentence = CopiedHome(
                deviceID: copied.deviceID, instances: copied.instances, reportedBy: copied.reportedBy
            ).description
            checks.append(
                DoctorCheck(
                    name: copied.deviceID == own ? "this home" : "peer \(names[copied.deviceID] ?? copied.deviceID)",
                    // A peer's report about this home is shown, but it is not a fault found here.
                    status: copied.reportedBy == nil ? .failed : .warning, detail: sentence,
                    advice: "the copies author on one timeline under one key; give one of them a key and Device ID of "
                        + "its own with `plait rejoin --new-key`."))
        }
        for peer in report.peers {
            if let diverged = peer.diverged {
                checks.append(DoctorCheck(name: "peer \(peer.name)", status: .failed, detail: diverged))
            }
            if let refused = peer.refused {
                checks.append(
                    DoctorCheck(
                        name: "peer \(peer.name)", status: .failed, detail: "refused its changes: \(refused)",
                        advice: "that device holds data this one cannot accept; run `plait doctor` there."))
            }
            if let claim = peer.claim {
                checks.append(DoctorCheck(name: "peer \(peer.name)", status: .failed, detail: claim))
            }
            // Every session failing (bad-luck tester 2026-11-25-j, J5: `doctor` was clean on devices whose every
            // session with a peer failed, and `peers` went on showing how they stood at the last one that ended well).
            if let failed = peer.failed {
                checks.append(
                    DoctorCheck(
                        name: "peer \(peer.name)", status: .failed,
                        detail: "the last session with it failed, and none has ended well since: \(failed)",
                        advice: "do what that error says, on the device it names; `plait sync` shows it again, and a "
                            + "session that ends well clears this."))
            }
        }
        return checks
    }
}
