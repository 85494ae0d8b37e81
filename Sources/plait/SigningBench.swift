import Foundation
import PlaitCore
import PlaitStore
import PlaitSync

/// What signing costs (issue 10), measured beside the same work unsigned in the same run: authoring as
/// `plait batch` does it (one transaction of many changes, and many one-change transactions, the interactive
/// case) and the bytes per change on disk. The catch-up half (verifying on intake) is in NetworkBench.
enum SigningBench {
    /// A store on an unsigned timeline (what a store was before signing), written by a replica without a key.
    static func unsignedReplica(at path: String, config: Config) throws -> Replica {
        let store = try Store.create(at: path, timeline: TimelineID.random(), synchronousFull: config.synchronousFull)
        let replica = try Replica(store: store)
        // As a home's replica is set up (Home.init), so the two differ only in signing.
        replica.maxChangeBytes = config.maxChangeBytes
        replica.storedCheckpointInterval = config.checkpointInterval
        return replica
    }

    /// A home whose store holds an unsigned timeline written by `write` (the home's key is never used for it):
    /// the source of a catch-up its receiver takes without verifying anything.
    static func unsignedHome(at path: String, name: String, config: Config, write: (Replica) throws -> Void)
        throws -> Home
    {
        // The identity (key, certificate: the agent's TLS needs them) from a normal home, whose signed store is
        // then replaced by an unsigned one before the home is opened again.
        let storePath = try Home.create(at: path, name: name, config: config).storePath
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: storePath + suffix) }
        let replica = try unsignedReplica(at: storePath, config: config)
        try replica.store.setDeviceName(name)
        try write(replica)
        return try Home.open(at: path, config: config)
    }

    /// Signatures stored with the changes of `store`.
    static func signatures(in store: Store) throws -> Int {
        try store.encodedChangesInReplayOrder().reduce(0) { $0 + ($1.signature == nil ? 0 : 1) }
    }

    /// `plait batch` of `lines` in one transaction, then `singles` one-line batches (one transaction each),
    /// on a signed home and on an unsigned store, `runs` times each; rates, signatures made and bytes on disk.
    static func authoring(
        lines: [String], singles: Int, directory: String, runs: Int, log: (String) -> Void
    ) throws -> [String: Any] {
        let config = Config()
        var results: [String: Any] = [:]
        let single = (0..<singles).map { "add 'List \($0 % 10)' \"single \($0) with some text\"" }
        for signed in [true, false] {
            let prefix = signed ? "authoring_signed_" : "authoring_unsigned_"
            var bulk = Sample()
            var singleRate = Sample()
            var bulkSignatures = 0
            var singleSignatures = 0
            var bytesPerChange = 0.0
            for run in 0..<runs {
                let path = directory + "/\(prefix)\(run)"
                let replica: Replica
                if signed {
                    replica = try Home.create(at: path, name: "authoring", config: config).replica
                } else {
                    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
                    replica = try unsignedReplica(at: path + "/" + Home.storeFileName, config: config)
                }
                let before = try signatures(in: replica.store)
                var start = DispatchTime.now().uptimeNanoseconds
                let batch = try Plait.Batch.commit(lines: lines, to: replica)
                bulk.add(Double(batch.changes) / (Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9))
                let afterBulk = try signatures(in: replica.store)
                bulkSignatures = afterBulk - before
                try replica.store.checkpointWAL()
                bytesPerChange = Double(replica.store.fileSize()) / Double(batch.changes)

                start = DispatchTime.now().uptimeNanoseconds
                var changes = 0
                for line in single { changes += try Plait.Batch.commit(lines: [line], to: replica).changes }
                if singles > 0 {
                    singleRate.add(Double(changes) / (Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9))
                }
                singleSignatures = try signatures(in: replica.store) - afterBulk
                try? FileManager.default.removeItem(atPath: path)
            }
            results[prefix + "batch_changes_per_second"] = bulk.json
            results[prefix + "batch_signatures"] = bulkSignatures
            results[prefix + "bytes_per_change"] = bytesPerChange
            log("plait batch of \(lines.count) lines, one transaction, \(signed ? "signed" : "unsigned store"): "
                + "\(bulk.text()) changes/s, \(bulkSignatures) signatures, "
                + String(format: "%.1f bytes per change on disk", bytesPerChange))
            if singles > 0 {
                results[prefix + "single_changes_per_second"] = singleRate.json
                results[prefix + "single_signatures"] = singleSignatures
                log("  \(singles) one-line batches (a transaction each): \(singleRate.text()) changes/s, "
                    + "\(singleSignatures) signatures")
            }
        }
        return results
    }
}
