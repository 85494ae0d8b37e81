import Foundation
import PlaitCore
import PlaitDiscovery
import PlaitPairing
import PlaitStore
import PlaitTLS

/// One finding of `plait doctor`: what was checked, how it went, and what to do about it.
public struct DoctorCheck: Sendable {
    public enum Status: String, Sendable {
        case ok, warning, failed
    }

    public var name: String
    public var status: Status
    /// What was found, one sentence.
    public var detail: String
    /// What to do, when something is wrong.
    public var advice: String?

    public init(name: String, status: Status, detail: String, advice: String? = nil) {
        self.name = name
        self.status = status
        self.detail = detail
        self.advice = advice
    }
}

/// The checks of `plait doctor`. Each runs on its own, so one broken piece (a damaged key) does not hide
/// the state of the others; nothing is written to the home.
public enum Doctor {
    /// Identity, store, listen address, avahi-daemon and paired peers of the home at `path`. `peerTimeout`
    /// bounds each peer's connection attempt.
    public static func run(homePath path: String, config: Config, listen: PeerAddress, peerTimeout: Duration)
        -> [DoctorCheck]
    {
        var checks: [DoctorCheck] = []
        let identity = checkIdentity(path, into: &checks)
        let storeIsSound = checkStore(path, into: &checks)
        if storeIsSound { checks += checkDerivedState(storePath: path + "/" + Home.storeFileName) }
        checks.append(checkListen(listen, identity: identity, agentRunning: AgentLock.isHeld(home: path)))
        checks.append(checkAvahi(enabled: config.discoveryEnabled))
        if storeIsSound { checks += checkHistory(
            storePath: path + "/" + Home.storeFileName, own: identity?.deviceID,
            certificate: identity?.certificateDER)
        }
        if storeIsSound, let identity {
            checks += checkPeers(storePath: path + "/" + Home.storeFileName, identity: identity, timeout: peerTimeout)
        }
        return checks
    }

    static func checkIdentity(_ path: String, into checks: inout [DoctorCheck]) -> Identity? {
        let identity: Identity
        do {
            identity = try Identity.load(directory: path)
        } catch {
            if let retired = Home.interruptedKeySwap(at: path) {
                // Both keys are here (H6): the advice is not to give the identity up.
                checks.append(
                    DoctorCheck(
                        name: "certificate", status: .failed,
                        detail: "\(path) \(Home.interruptedKeySwapProblem(retired))",
                        advice: "run `plait rejoin`: it finishes the key swap (or undoes it, if no paired device was to "
                            + "be told yet) and goes on with a new timeline."))
                return nil
            }
            checks.append(
                DoctorCheck(
                    name: "certificate", status: .failed, detail: "\(error)",
                    advice: "restore key.pem and cert.pem from a backup of this home; failing that, `plait init` a new "
                        + "home and pair it again (the Device ID changes)."))
            return nil
        }
        if identity.isValidNow() {
            checks.append(
                DoctorCheck(
                    name: "certificate", status: .ok,
                    detail: "Device ID \(identity.deviceID); the key matches the certificate, valid until "
                        + "\(identity.notAfter)"))
        } else {
            checks.append(
                DoctorCheck(
                    name: "certificate", status: .warning,
                    detail: "the certificate is outside its validity period (until \(identity.notAfter)); peers pin "
                        + "the Device ID and do not check dates, so sync still works",
                    advice: "check the system clock."))
        }
        var status = stat()
        let keyPath = path + "/" + Identity.keyFileName
        if stat(keyPath, &status) == 0, status.st_mode & 0o077 != 0 {
            checks.append(
                DoctorCheck(
                    name: "key file", status: .warning,
                    detail: "\(keyPath) is readable by other users (mode \(String(status.st_mode & 0o777, radix: 8)))",
                    advice: "chmod 600 \(keyPath)"))
        }
        return identity
    }

    static func checkStore(_ path: String, into checks: inout [DoctorCheck]) -> Bool {
        let storePath = path + "/" + Home.storeFileName
        do {
            let inspection = try Store.inspect(at: storePath)
            if inspection.integrity == ["ok"] {
                checks.append(
                    DoctorCheck(
                        name: "store", status: .ok,
                        detail: "SQLite integrity_check ok; \(inspection.changes) changes stored, summary "
                            + (inspection.summary.isEmpty ? "(empty)" : inspection.summary.description)))
                return true
            }
            // Only an index disagreeing with its rows is healed in place: the rows are the data.
            let advice = Store.onlyIndexesDamaged(inspection.integrity)
                ? "only the store's indexes are damaged, its rows are sound: run `plait repair`, which rebuilds them "
                    + "from the rows."
                : "stop the agent, copy \(storePath) aside, and restore it from a backup or rebuild the home from a "
                    + "paired device (`plait init` a new home and sync)."
            checks.append(
                DoctorCheck(
                    name: "store", status: .failed,
                    detail: "SQLite integrity_check: " + inspection.integrity.prefix(5).joined(separator: "; "),
                    advice: advice))
        } catch {
            checks.append(
                DoctorCheck(name: "store", status: .failed, detail: "\(error)", advice: storeAdvice(error, storePath)))
        }
        return false
    }

    /// What to do about a store that cannot be inspected. A backup is named only when the file itself is damaged
    /// (not SQLite, or SQLite refuses it as corrupt): an unreadable, missing, busy or foreign file has its own
    /// remedy, and restoring over it would throw away a sound store.
    static func storeAdvice(_ error: any Error, _ storePath: String) -> String? {
        switch error as? StoreError {
        case .corrupt:
            return "restore \(storePath) from a backup; or move it aside (with its -wal and -shm files), `plait init` "
                + "again (the home keeps its identity), pair your other devices again and sync the data back."
        case .missing:
            return "`plait init` creates the store (a home that has its key.pem and cert.pem keeps them, and with "
                + "them its Device ID); then pair your other devices again here and sync the data back."
        case .missingDirectory:
            return "pass the right --home, or `plait init` to create a device there."
        case .permissionDenied:
            return "run plait as the home's owner, or fix the owner and mode of \(storePath) and its directory."
        case .notAPlaitStore:
            return "check --home and $PLAIT_HOME: this file was not made by plait."
        case .emptyStore:
            return "`plait init` makes the store again (the home keeps its key.pem, cert.pem and Device ID); then pair "
                + "your other devices again here and sync the data back, or restore the store from a backup."
        case .newerSchema:
            return "upgrade plait; this store is left as it is."
        case .busy:
            return "try again when the other plait process has finished writing."
        case .readOnlyFileSystem:
            return "remount the file system read-write to change the lists; reading them works."
        case .noSpace:
            return "free some space on the disk holding \(storePath)."
        default:
            return "check the disk and the file system, then run `plait doctor` again."
        }
    }

    /// The materialized state against a replay of the source, the baseline, the stored checkpoints (DESIGN §10),
    /// all through a read-only connection.
    static func checkDerivedState(storePath: String) -> [DoctorCheck] {
        let verification: DerivedStateVerification
        do {
            verification = try Store.verifyDerivedState(at: storePath)
        } catch {
            return [DoctorCheck(name: "materialized state", status: .failed, detail: "cannot be checked: \(error)")]
        }
        var checks: [DoctorCheck] = []
        // Not "nothing is lost": repair also sets aside changes whose hashes break their chains (the "hash chains"
        // check says whether any do), and what those made stops showing until good copies are pulled.
        let repairAdvice = "run `plait repair`: it rebuilds the materialized state from the stored changes, keeping "
            + "every sound one (see the hash chains check for damaged ones)."
        if let baseline = verification.baseline {
            if let problem = baseline.problem {
                checks.append(
                    DoctorCheck(
                        name: "baseline", status: .failed, detail: "the stored baseline is damaged: \(problem)",
                        advice: verification.baselineDamaged
                            ? "run `plait sync`: a paired device's baseline that folds as much replaces it (it is "
                                + "neither used nor sent meanwhile); failing that, stop the agent, copy \(storePath) "
                                + "aside, and sync a fresh home (`plait init`) from a paired device."
                            : "stop the agent, copy \(storePath) aside, and sync a fresh home (`plait init`) from a "
                                + "paired device."))
            } else {
                checks.append(
                    DoctorCheck(
                        name: "baseline", status: .ok,
                        detail: "decodes; covers \(baseline.summary), digest \(baseline.digest.hexString.prefix(16))"))
            }
        }
        let changes =
            "\(verification.changes) stored changes" + (verification.baseline == nil ? "" : " over the baseline")
        if verification.replayProblem != nil, verification.baseline?.problem != nil {
            checks.append(
                DoctorCheck(
                    name: "materialized state", status: .failed,
                    detail: "cannot be compared with a replay: the replay starts from the baseline, which is damaged "
                        + "(see the baseline check)"))
        } else if let problem = verification.replayProblem {
            checks.append(
                DoctorCheck(
                    name: "materialized state", status: .failed,
                    detail: "the stored changes do not replay: \(problem)",
                    advice: "the source itself is damaged: stop the agent, copy \(storePath) aside, and sync a fresh "
                        + "home (`plait init`) from a paired device."))
        } else if verification.materializedMatchesReplay {
            let digest = verification.replayedDigest?.hexString.prefix(16) ?? ""
            checks.append(
                DoctorCheck(
                    name: "materialized state", status: .ok,
                    detail: "equals a replay of the \(changes) (digest \(digest))"))
        } else {
            let why =
                verification.materializedProblem.map { "it does not load: \($0)" }
                ?? "digest \(verification.materializedDigest?.hexString.prefix(16) ?? "") against "
                + "\(verification.replayedDigest?.hexString.prefix(16) ?? "")"
            checks.append(
                DoctorCheck(
                    name: "materialized state", status: .failed,
                    detail: "the materialized state does not match a replay of the \(changes) (\(why)); "
                        + "run `plait repair`",
                    advice: repairAdvice))
        }
        if !verification.checkpointProblems.isEmpty {
            checks.append(
                DoctorCheck(
                    name: "checkpoints", status: .failed,
                    detail: "\(verification.checkpointProblems.count) of \(verification.checkpoints) stored "
                        + "checkpoints are damaged: "
                        + verification.checkpointProblems.prefix(3).joined(separator: "; "),
                    advice: repairAdvice))
        } else if verification.checkpoints > 0 {
            checks.append(
                DoctorCheck(
                    name: "checkpoints", status: .ok,
                    detail: "\(verification.checkpoints) stored checkpoints equal a replay at their changes"))
        }
        return checks
    }

    /// Whether the agent could listen at `listen`; if something holds it, whether that is this home's agent.
    /// `agentRunning`: this home's agent holds its lock; the address free then means it listens elsewhere (`plait
    /// agent --listen`), which a new user read as "no agent runs".
    static func checkListen(_ listen: PeerAddress, identity: Identity?, agentRunning: Bool = false) -> DoctorCheck {
        let name = "listen address"
        guard let identity else {
            return DoctorCheck(name: name, status: .warning, detail: "not checked (no usable certificate)")
        }
        do {
            let context = try TLSContext(identity: identity, role: .server(acceptsPairing: false))
            let listener = try TLSListener(host: listen.host, port: listen.port, context: context)
            listener.close()
            if agentRunning {
                return DoctorCheck(
                    name: name, status: .ok,
                    detail: "this home's agent is running, not at \(listen): it was given another address (`plait "
                        + "agent --listen`); `plait doctor --listen HOST:PORT` checks that one")
            }
            return DoctorCheck(name: name, status: .ok, detail: "\(listen) is free for `plait agent`")
        } catch {
            // Taken: by this home's own agent (fine), or by something else.
            let own = identity.deviceID
            let host = listen.host == "0.0.0.0" ? "127.0.0.1" : (listen.host == "::" ? "::1" : listen.host)
            if let context = try? TLSContext(identity: identity, role: .client(offering: .sync)),
                let connection = try? TLSConnection.connect(
                    host: host, port: listen.port, context: context, trust: { $0 == own }, timeout: .seconds(2))
            {
                connection.close()
                return DoctorCheck(name: name, status: .ok, detail: "\(listen) is in use by this home's running agent")
            }
            return DoctorCheck(
                name: name, status: .failed, detail: "cannot listen at \(listen): \(error)",
                advice: "stop the program holding port \(listen.port) (`ss -ltnp`), or choose another address with "
                    + "agent.listen in the config or `plait agent --listen`.")
        }
    }

    /// How long the avahi-daemon check waits for an answer.
    public static let avahiTimeout: Duration = .seconds(3)

    /// Whether avahi-daemon answers, so devices find each other by mDNS. Its absence is a warning, not a
    /// failure: known addresses and static peers (`agent.peers`, `--peer`) still sync, and pairing works with
    /// `--listen`/`--connect` or `--trust`.
    static func checkAvahi(enabled: Bool, timeout: Duration = avahiTimeout) -> DoctorCheck {
        let name = "avahi-daemon"
        guard enabled else {
            return DoctorCheck(
                name: name, status: .ok, detail: "not checked: discovery is off (discovery.enabled = false)")
        }
        let advice =
            "start avahi-daemon (`systemctl start avahi-daemon`), or use static peers: agent.peers in the config, "
            + "`plait sync --peer HOST:PORT`, and pair with `plait pair --listen`/`--connect` or `--trust`."
        let discovery: Discovery
        let inbox: Inbox<DiscoveryEvent>
        do {
            inbox = try Inbox()
            discovery = try Discovery.forCommand(retryDelay: .seconds(60))
        } catch {
            return DoctorCheck(name: name, status: .warning, detail: "\(error)", advice: advice)
        }
        defer { discovery.close() }
        let events = discovery.events
        Task.detached {
            for await event in events { inbox.post(event) }
        }
        let deadline = ContinuousClock.now + timeout
        var last = DiscoveryState.starting
        while ContinuousClock.now < deadline {
            inbox.wait(until: deadline)
            for case .state(let state) in inbox.take() {
                last = state
                switch state {
                case .running:
                    let daemon = discovery.daemon
                    let what = daemon.map { "\($0.version), host name \($0.hostName)" } ?? "running"
                    return DoctorCheck(
                        name: name, status: .ok,
                        detail: "running (\(what)): paired devices on the LAN are found by mDNS")
                case .unavailable(let warning):
                    return DoctorCheck(name: name, status: .warning, detail: warning, advice: advice)
                case .starting, .closed:
                    break
                }
            }
        }
        let detail =
            last == .starting
            ? "avahi-daemon answers but has not finished registering this host's name within \(timeout) (a name "
                + "conflict on the LAN?); discovery waits for it"
            : "avahi-daemon did not answer within \(timeout)"
        return DoctorCheck(
            name: name, status: .warning, detail: detail, advice: "check `journalctl -u avahi-daemon`; " + advice)
    }

    /// Each paired peer with a known address: reachable, the device it should be, and pairing this one.
    static func checkPeers(storePath: String, identity: Identity, timeout: Duration) -> [DoctorCheck] {
        let peers: [PeerRecord]
        do {
            peers = try Store.peers(readOnlyAt: storePath)
        } catch {
            return [DoctorCheck(name: "peers", status: .failed, detail: "cannot read the paired devices: \(error)")]
        }
        if peers.isEmpty {
            return [
                DoctorCheck(
                    name: "peers", status: .warning, detail: "no paired device",
                    advice: "pair with `plait pair` on both machines (or `plait pair --trust ID`).")
            ]
        }
        return peers.map { peer in
            let name = "peer \(peer.name)"
            guard let text = peer.address, let address = try? PeerAddress(parsing: text) else {
                return DoctorCheck(
                    name: name, status: .ok,
                    detail: "\(peer.deviceID): no known address (found by discovery, or it connects here)")
            }
            do {
                let context = try TLSContext(identity: identity, role: .client(offering: .sync))
                let connection = try TLSConnection.connect(
                    host: address.host, port: address.port, context: context,
                    trust: { $0.description == peer.deviceID }, timeout: timeout)
                defer { connection.close() }
                // Its agent sends Hello at once if it trusts this device; the refusal shows on the first read.
                _ = try connection.readExactly(1, timeout: timeout)
                return DoctorCheck(name: name, status: .ok, detail: "\(address) is reachable and this device is paired there")
            } catch let error as TLSError {
                return DoctorCheck(
                    name: name, status: .failed, detail: Home.explain(error, address: address),
                    advice: advice(for: error, peer: peer, identity: identity))
            } catch {
                return DoctorCheck(name: name, status: .failed, detail: "\(address): \(error)")
            }
        }
    }

    static func advice(for error: TLSError, peer: PeerRecord, identity: Identity) -> String {
        switch error {
        case .rejectedByPeer:
            return "on that device: plait pair --trust \(identity.deviceID)"
        case .peerNotTrusted:
            return "another device answers at that address now; re-pair, or give the peer's new address with "
                + "`plait pair --trust \(peer.deviceID) --address HOST:PORT`."
        case .closedDuringHandshake:
            return "the agent there closed the connection mid-handshake (overloaded, or restarting); try again shortly."
        case .alpnMismatch:
            return "install a plait that speaks protocol \(TLSApplicationProtocol.syncVersion) on \(peer.name), then "
                + "restart its agent."
        default:
            return "start `plait agent` on \(peer.name), and check the address and any firewall between the two."
        }
    }
}
