import Foundation
import PlaitCore
import PlaitSession
import PlaitStore
import PlaitTLS
import PlaitWire

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What `plait rejoin --new-key` did.
public struct Rekeyed: Sendable {
    public var oldDeviceID: DeviceID
    public var newDeviceID: DeviceID
    /// Where the old key, certificate and the signed statement now are (`<home>/retired/<old ID>`).
    public var retiredPath: String
    /// The paired devices that learn the new Device ID at the next sync with them.
    public var peersToTell: [String]
    public var oldTimeline: TimelineID
    public var newTimeline: TimelineID
    /// False when the old timeline was left as it was: another copy of this home may own its head.
    public var endedOldTimeline: Bool
    /// Changes re-sent on the new timeline.
    public var emitted: Int
}

/// A retired identity to dial a peer with, and the statement to put in Hello (PROTOCOL.md §21).
public struct SuccessionCredentials: @unchecked Sendable {
    /// The retired key and certificate: the Device ID the peer trusts.
    public let identity: Identity
    public let statement: SuccessionStatement
}

extension Home {
    /// The directory in a home where `rejoin --new-key` keeps retired identities, one directory per Device ID.
    public static let retiredDirectoryName = "retired"
    /// The statement in a retired identity's directory: the canonical `Succession` bytes, then the 64-byte
    /// signature by that directory's key, then the 64-byte signature by the new key. A file written before the new
    /// key signed too (one signature) is signed again when next read: receivers refuse it without.
    public static let successionFileName = "succession.bin"

    /// The directory of the retired identity `id`: its grouped form without dashes.
    public func retiredPath(_ id: String) -> String {
        path + "/" + Self.retiredDirectoryName + "/" + id.filter { $0 != "-" }
    }

    /// Replaces this device's key and Device ID (`plait rejoin --new-key`, PROTOCOL.md §21): the old key and
    /// certificate move to `retired/<old ID>/` beside a statement signed by the old key naming the new
    /// certificate, signed by both keys; every paired device is recorded as one to tell; then the store's rejoin
    /// starts a new timeline
    /// (ending the old one unless another copy of this home may own its head). Refused while an agent runs here.
    public func rejoinWithNewKey(now: Int64 = Replica.now()) throws -> Rekeyed {
        let agentLock = try AgentLock.acquire(home: path)
        defer { agentLock.release() }
        let old = try identity
        let oldID = old.deviceID.description
        let root = path + "/" + Self.retiredDirectoryName
        let retired = retiredPath(oldID)
        let staging = retired + "/next"
        try Self.makeDirectory(root, mayExist: true)
        do {
            try Self.makeDirectory(retired, mayExist: false)
        } catch {
            throw PlaitError.file(
                path: retired,
                problem: "a retired identity of this Device ID is already there (an earlier `rejoin --new-key` "
                    + "stopped half way?); move it aside and run the command again")
        }
        let new: Identity
        let peers: [String]
        do {
            try Self.makeDirectory(staging, mayExist: false)
            let name = old.commonName.isEmpty ? String(deviceName.prefix(64)) : old.commonName
            new = try Identity.create(directory: staging, commonName: name.isEmpty ? "plait" : name)
            try Self.writeStatement(old: old, new: new, directory: retired, now: now)
            // A peer still waiting for an earlier succession trusts that older ID only: it gets a statement from
            // that key naming this new certificate.
            for earlier in Set(try store.successionPending().values) where earlier != oldID {
                let earlierIdentity = try Identity.load(directory: retiredPath(earlier))
                try Self.writeStatement(old: earlierIdentity, new: new, directory: retiredPath(earlier), now: now)
            }
            peers = try store.peers().map(\.deviceID)
            try store.recordSuccessionPending(retired: oldID, peers: peers)
        } catch {
            for file in [Identity.keyFileName, Identity.certificateFileName] { unlink(staging + "/" + file) }
            rmdir(staging)
            unlink(retired + "/" + Self.successionFileName)
            rmdir(retired)
            throw Self.wrap(error)
        }
        // The old identity goes aside, then the new one takes its place: each a rename within the home.
        for file in [Identity.keyFileName, Identity.certificateFileName] {
            try Self.rename(path + "/" + file, to: retired + "/" + file)
        }
        for file in [Identity.keyFileName, Identity.certificateFileName] {
            try Self.rename(staging + "/" + file, to: path + "/" + file)
        }
        rmdir(staging)
        try useTheSwappedKey()
        let rejoined: (old: TimelineID, new: TimelineID, emitted: Int, ended: Bool, setAside: [TimelineID])
        do {
            // The old timeline's end is signed by the old key: only that key's signature verifies on it.
            rejoined = try replica.rejoin(now: now, retiredSigner: try P256Signer(directory: retired))
        } catch {
            // The key is replaced and the peers are recorded: only the timeline is left, which `plait rejoin` does.
            throw PlaitError.usage(
                "the new key is in place (Device ID \(new.deviceID)) but the new timeline could not be started "
                    + "(\(Self.wrap(error))); run `plait rejoin` to start it.")
        }
        return Rekeyed(
            oldDeviceID: old.deviceID, newDeviceID: new.deviceID, retiredPath: retired, peersToTell: peers,
            oldTimeline: rejoined.old, newTimeline: rejoined.new, endedOldTimeline: rejoined.ended,
            emitted: rejoined.emitted)
    }

    /// `plait rejoin`: ends the own timeline and goes on with a new one (`Replica.rejoin`). When the home's key is
    /// not the key the timeline was begun with — `rejoin --new-key` stopped after swapping the key files, before
    /// starting the new timeline (bad-luck tester 2026-11-25, H2) — the timeline's own key is taken from the
    /// retired identities, so that its end verifies and stops it everywhere; without it the timeline is left
    /// without an end (`ended` false), never ended with a signature every peer would refuse.
    public func rejoin(now: Int64 = Replica.now()) throws -> (
        old: TimelineID, new: TimelineID, emitted: Int, ended: Bool, keySwap: String?, setAside: [TimelineID]
    ) {
        let keySwap = try finishInterruptedKeySwap()
        if keySwap != nil { try useTheSwappedKey() }
        var timelinesSigner: P256Signer?
        if let certificate = try store.certificate(of: try store.ownTimeline()),
            let current = try? identity, current.certificateDER != certificate
        {
            timelinesSigner = retiredSigner(of: certificate)
        }
        let rejoined = try replica.rejoin(now: now, retiredSigner: timelinesSigner)
        return (rejoined.old, rejoined.new, rejoined.emitted, rejoined.ended, keySwap, rejoined.setAside)
    }

    /// The retired identity directory whose key swap `rejoin --new-key` began and did not finish: it still holds
    /// the staging directory (`next/`) the new key was made in, which the command removes last. Nil when none.
    public func interruptedKeySwap() -> String? { Self.interruptedKeySwap(at: path) }

    /// `interruptedKeySwap()` of the home at `path`.
    public static func interruptedKeySwap(at path: String) -> String? {
        let root = path + "/" + retiredDirectoryName
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        return names.sorted().map { root + "/" + $0 }.first { directory in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: directory + "/next", isDirectory: &isDirectory)
                && isDirectory.boolValue
        }
    }

    /// The error for a key that does not load in a home whose key swap was interrupted (nil when none was).
    static func interruptedKeySwapError(at path: String) -> PlaitError? {
        interruptedKeySwap(at: path).map { .file(path: path, problem: interruptedKeySwapProblem($0)) }
    }

    /// The sentence for a home whose key swap was interrupted: what it is and how to finish it.
    static func interruptedKeySwapProblem(_ retired: String) -> String {
        "is between its old key and its new one: `plait rejoin --new-key` was stopped while it swapped them (both "
            + "are kept, in \(retired) and its next/ directory); nothing was changed. Run `plait rejoin` to finish it"
    }

    /// Finishes the key swap of a `rejoin --new-key` stopped between its renames (bad-luck tester 2026-11-25, H6):
    /// the identity files were then split between the home, `retired/<old ID>/` and its `next/`, and the home's
    /// identity did not load ("key.pem is missing; restore it from a backup"), though both keys were there.
    ///
    /// Where each file is says how far the swap went: an old file is in `retired/<old ID>/` once moved, else in the
    /// home; a new one is in `next/` until moved, then in the home. When both new files are somewhere, the swap goes
    /// forward (what the user asked for): each old file the home still holds moves to `retired/<old ID>/`, each new
    /// one from `next/` to the home. When a new file is nowhere (the command stopped while it made the new key,
    /// before any rename), it goes back: the old files return to the home and the partial new key, the statement and
    /// the directories are removed. Returns what it did (one sentence), nil when there was nothing to finish.
    func finishInterruptedKeySwap() throws -> String? {
        guard let retired = interruptedKeySwap() else { return nil }
        let agentLock = try AgentLock.acquire(home: path)
        defer { agentLock.release() }
        let staging = retired + "/next"
        let manager = FileManager.default
        let files = [Identity.keyFileName, Identity.certificateFileName]
        let exists = { (file: String) in manager.fileExists(atPath: file) }
        // A new file is in next/, or in the home once its old one has moved to retired/.
        let newComplete = files.allSatisfy { file in
            exists(staging + "/" + file) || (exists(retired + "/" + file) && exists(path + "/" + file))
        }
        for file in files {
            let inHome = path + "/" + file
            let old = retired + "/" + file
            let new = staging + "/" + file
            if newComplete {
                if exists(inHome), !exists(old), exists(new) { try Self.rename(inHome, to: old) }
                if exists(new), !exists(inHome) { try Self.rename(new, to: inHome) }
            } else {
                if exists(old), !exists(inHome) { try Self.rename(old, to: inHome) }
                unlink(new)
            }
        }
        guard rmdir(staging) == 0 else {
            throw PlaitError.file(
                path: staging,
                problem: "still holds files after finishing an interrupted `plait rejoin --new-key`; compare them "
                    + "with the home's key.pem and cert.pem before removing anything")
        }
        if !newComplete {
            unlink(retired + "/" + Self.successionFileName)
            rmdir(retired)
            return "undid an interrupted `plait rejoin --new-key` (it stopped while making the new key, which is "
                + "removed): this device keeps its Device ID; run `plait rejoin --new-key` again for a new one"
        }
        return "finished the key swap of an interrupted `plait rejoin --new-key`: the old key is in \(retired)"
    }

    /// The signer of the retired identity whose certificate is `certificate`, if one in `retired/` loads.
    func retiredSigner(of certificate: [UInt8]) -> P256Signer? {
        let root = path + "/" + Self.retiredDirectoryName
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []
        for name in names.sorted() {
            if let signer = try? P256Signer(directory: root + "/" + name), signer.certificate == certificate {
                return signer
            }
        }
        return nil
    }

    /// Makes the key files now in the home the ones in force after a key swap: the identity networking uses, and
    /// the signer (one loaded before holds the old key; the new timeline's begin must carry the new certificate).
    private func useTheSwappedKey() throws {
        replica.signWith { [path] in try P256Signer(directory: path) }
        do {
            replaceIdentity(try Identity.load(directory: path))
        } catch {
            throw Self.wrap(error)
        }
    }

    /// The retired identity and statement to dial `peer` with while it has not learned the new Device ID; nil
    /// when it has (or was never to be told). A retired identity that cannot be read is nil too: the current one
    /// is used, and the peer refuses it until paired again.
    public func successionCredentials(for peer: String) -> SuccessionCredentials? {
        guard let retired = (try? store.successionPending())?[peer] else { return nil }
        let directory = retiredPath(retired)
        let file = directory + "/" + Self.successionFileName
        guard let identity = try? Identity.load(directory: directory),
            var bytes = (try? Data(contentsOf: URL(fileURLWithPath: file))).map(Array.init)
        else { return nil }
        let signatures = 2 * SuccessionStatement.signatureBytes
        if let earlier = Self.singlySigned(bytes) {
            // Written before the new key signed too: the statement is made again, naming this home's certificate
            // (the successor every pending statement names, since each `--new-key` signs them again) and signed by
            // both keys, both held here. Nothing of the old file's is signed by the new key.
            guard let current = try? self.identity,
                (try? Self.writeStatement(old: identity, new: current, directory: directory, now: earlier.issuedAt))
                    != nil,
                let rewritten = (try? Data(contentsOf: URL(fileURLWithPath: file))).map(Array.init)
            else { return nil }
            bytes = rewritten
        }
        guard bytes.count > signatures else { return nil }
        let split = bytes.count - signatures
        return SuccessionCredentials(
            identity: identity,
            statement: SuccessionStatement(
                statement: Array(bytes[..<split]),
                signature: Array(bytes[split..<(split + SuccessionStatement.signatureBytes)]),
                newSignature: Array(bytes[(split + SuccessionStatement.signatureBytes)...])))
    }

    /// The statement of a `succession.bin` in the format before the new key signed (statement ‖ old signature),
    /// or nil for any other content. The two formats cannot be confused: the bytes before the last 128 of a
    /// one-signature file end inside its new certificate, so they never decode as a canonical statement.
    static func singlySigned(_ bytes: [UInt8]) -> Succession? {
        let signature = SuccessionStatement.signatureBytes
        if bytes.count > 2 * signature, (try? Succession(decoding: Array(bytes.dropLast(2 * signature)))) != nil {
            return nil
        }
        guard bytes.count > signature else { return nil }
        return try? Succession(decoding: Array(bytes.dropLast(signature)))
    }

    /// Whether some paired device has still to learn this device's new Device ID.
    public var awaitsSuccession: Bool { !((try? store.successionPending()) ?? [:]).isEmpty }

    /// Checks a succession statement that arrived on a connection whose peer presented `connectionCertificate`
    /// and, if it holds, trusts the new Device ID under the old one's name (PROTOCOL.md §21). Returns nil when
    /// taken, else why not (one sentence); a refused statement changes nothing.
    public func acceptSuccession(
        _ statement: SuccessionStatement, connectionCertificate: [UInt8]?
    ) -> (accepted: (old: String, new: String, name: String)?, refusal: String?) {
        guard let connectionCertificate else { return (nil, "the connection presented no certificate") }
        let succession: Succession
        do {
            succession = try Succession.verify(
                statement: statement.statement, signature: statement.signature,
                newSignature: statement.newSignature, connectionCertificate: connectionCertificate)
        } catch {
            if case let .succession(problem) = error { return (nil, problem.description) }
            return (nil, error.description)
        }
        let (old, new) = (succession.oldDeviceID.description, succession.newDeviceID.description)
        if let mine = try? identity.deviceID.description, new == mine {
            return (nil, "it names this very device as the successor")
        }
        do {
            switch try store.acceptSuccession(old: old, new: new, now: Replica.now()) {
            case let .trusted(name):
                return ((old, new, name), nil)
            case .oldNotPaired:
                return (nil, "device \(old) is not paired here")
            case .newUnpairedHere:
                return (nil, "its new Device ID \(new) was unpaired here; only pairing that device again trusts it")
            }
        } catch {
            return (nil, "the store failed: \(error)")
        }
    }

    // MARK: Files

    private static func writeStatement(old: Identity, new: Identity, directory: String, now: Int64) throws {
        let (statement, signature, newSignature) = try Succession.sign(old: old, new: new, issuedAt: now)
        let path = directory + "/" + successionFileName
        let temporary = path + ".new"
        unlink(temporary)
        guard FileManager.default.createFile(
            atPath: temporary, contents: Data(statement + signature + newSignature),
            attributes: [.posixPermissions: 0o600])
        else {
            throw PlaitError.file(path: temporary, problem: "cannot write the succession statement")
        }
        try rename(temporary, to: path)
    }

    static func makeDirectory(_ path: String, mayExist: Bool) throws {
        if mkdir(path, 0o700) != 0 {
            let code = errno
            if code == EEXIST && mayExist { return }
            let reason = String(cString: strerror(code))
            throw PlaitError.file(path: path, problem: "cannot create the directory (\(reason))")
        }
    }

    static func rename(_ from: String, to: String) throws {
        guard Glibc.rename(from, to) == 0 else {
            let code = errno
            throw PlaitError.file(
                path: from, problem: "cannot move it to \(to) (\(String(cString: strerror(code))))")
        }
    }
}
