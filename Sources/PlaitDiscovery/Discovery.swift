import CAvahi
import Foundation
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Publishes this device on the LAN and finds the other plait devices there, through avahi-daemon.
///
/// One Avahi client on Avahi's threaded poll. Avahi calls back on its own thread with its lock held;
/// the callbacks below are file-scope functions that find this object through `Unmanaged`, copy what
/// they are given into Swift values and hand events on through `events`. Every public method takes the
/// poll's lock, so none of them may be called from Avahi's thread — nothing of the caller's runs there.
///
/// A missing or restarting avahi-daemon is a state, not an error: the client is created with
/// `AVAHI_CLIENT_NO_FAIL`, waits for the daemon, and publishes and browses again whenever the daemon
/// comes (back) to running. The process never needs a restart for it.
public final class Discovery: @unchecked Sendable {
    /// The DNS-SD service type of plait's sync listener.
    public static let serviceType = "_plait._tcp"

    /// Events in the order they happened: state changes, this device's publication, and other devices
    /// found, updated and removed. One consumer; it finishes after `close()`.
    public let events: AsyncStream<DiscoveryEvent>

    private let continuation: AsyncStream<DiscoveryEvent>.Continuation
    private let logger: Logger
    /// `AvahiThreadedPoll *`, freed in deinit. Its lock guards every variable below.
    private let poll: OpaquePointer
    private let retryDelay: Duration
    private var pollRunning = false
    private var isClosed = false
    private var currentState = DiscoveryState.starting
    /// Whether `events` has had a state yet: the first one is always reported.
    private var stateReported = false
    /// `AvahiClient *`; nil while none could be created (no D-Bus) or after a failure.
    private var client: OpaquePointer?
    /// `AvahiEntryGroup *` holding this device's service while announced.
    private var group: OpaquePointer?
    /// The name under which the service is (being) published; differs from the announcement's after a
    /// collision.
    private var publishedName: String?
    /// `publishedName` once the group is established, nil otherwise.
    private var established: String?
    private var announcement: Announcement?
    private var wantsBrowsing = false
    /// `AvahiServiceBrowser *` while browsing.
    private var browser: OpaquePointer?
    /// `AvahiServiceResolver *` per browse result, kept open so Avahi reports TXT changes.
    private var resolvers: [BrowseKey: OpaquePointer] = [:]
    private var services: [String: TrackedService] = [:]
    /// `AvahiTimeout *` that retries what failed (a client that could not connect, a publication or a
    /// browser that failed).
    private var retryTimer: OpaquePointer?

    /// Starts Avahi's event loop and connects to avahi-daemon, or starts waiting for it. Publishes
    /// nothing and browses nothing until asked. `retryDelay` is how long to wait before trying again
    /// after a failure (a missing D-Bus, a refused publication).
    public init(logger: Logger, retryDelay: Duration = .seconds(5)) throws(DiscoveryError) {
        guard let poll = avahi_threaded_poll_new() else { throw .eventLoop(operation: "create a threaded poll") }
        (events, continuation) = AsyncStream.makeStream(of: DiscoveryEvent.self, bufferingPolicy: .unbounded)
        self.poll = poll
        self.logger = logger
        self.retryDelay = retryDelay
        // The client exists before the poll thread starts (its callback fires inside avahi_client_new),
        // so nothing needs the lock yet.
        connect()
        setState(currentState)
        // On failure deinit runs (the object is fully initialised): it frees the client and the poll.
        guard avahi_threaded_poll_start(poll) == 0 else { throw .eventLoop(operation: "start the poll thread") }
        pollRunning = true
    }

    deinit {
        close()
        avahi_threaded_poll_free(poll)
    }

    /// The current state (also reported as `.state` events).
    public var state: DiscoveryState { locked { currentState } }

    /// The instance name this device's service is published under, once Avahi established it.
    public var establishedName: String? { locked { established } }

    /// What avahi-daemon says about itself while discovery runs (`plait doctor` shows it); nil otherwise.
    public var daemon: DaemonInfo? {
        locked {
            guard clientRunning, let client else { return nil }
            return DaemonInfo(
                version: avahi_client_get_version_string(client).map { String(cString: $0) } ?? "avahi-daemon",
                hostName: avahi_client_get_host_name_fqdn(client).map { String(cString: $0) } ?? "")
        }
    }

    /// Publishes (or re-publishes) `announcement`: now if avahi-daemon runs, else as soon as it does. A new
    /// name or port re-registers the service; a new TXT record alone is an update (`updateTXT`).
    public func publish(_ announcement: Announcement) throws(DiscoveryError) {
        try Self.validate(announcement)
        try lockedThrowing { () throws(DiscoveryError) in
            guard !isClosed else { return }
            let previous = self.announcement
            self.announcement = announcement
            if let previous, previous.name == announcement.name, previous.port == announcement.port {
                if previous.txt != announcement.txt { try applyTXT() }
                return
            }
            publishedName = announcement.name
            resetGroup()
            try publishIfPossible()
        }
    }

    /// Replaces the TXT record of the published service (`sum` after a change, `pair=1` while pairing)
    /// without re-registering it. Peers see the new record about two seconds later (measured: their
    /// daemon's resolver takes it once the old record, flushed from its cache, expires a second after the
    /// announcement). Rate-limiting is the caller's. Does nothing before `publish`.
    public func updateTXT(_ txt: TXTRecord) throws(DiscoveryError) {
        try Self.validate(txt)
        try lockedThrowing { () throws(DiscoveryError) in
            guard !isClosed, announcement != nil, announcement?.txt != txt else { return }
            announcement?.txt = txt
            try applyTXT()
        }
    }

    /// Withdraws this device's service from the LAN (peers see it removed).
    public func unpublish() {
        locked {
            announcement = nil
            publishedName = nil
            resetGroup()
        }
    }

    /// Starts looking for other plait devices: `found`, `updated` and `removed` events follow, never
    /// about this object's own service.
    public func startBrowsing() {
        locked {
            guard !isClosed, !wantsBrowsing else { return }
            wantsBrowsing = true
            browseIfPossible()
        }
    }

    /// Stops looking; every device found so far is reported removed.
    public func stopBrowsing() {
        locked {
            wantsBrowsing = false
            tearDownBrowsing()
        }
    }

    /// Withdraws the service, stops browsing, stops Avahi's thread and disconnects; `events` finishes.
    /// Idempotent; also runs on deinit. Never call it from Avahi's thread (nothing of the caller's runs
    /// there).
    public func close() {
        let wasRunning: Bool = locked {
            guard !isClosed else { return false }
            isClosed = true
            return true
        }
        guard wasRunning else { return }
        // Stopping the poll takes its lock and joins its thread: after it, no callback runs.
        if pollRunning { avahi_threaded_poll_stop(poll) }
        pollRunning = false
        tearDown()
        setState(.closed)
        continuation.finish()
    }

    // MARK: - Calling in

    private func locked<T>(_ body: () -> T) -> T {
        if pollRunning { avahi_threaded_poll_lock(poll) }
        defer { if pollRunning { avahi_threaded_poll_unlock(poll) } }
        return body()
    }

    private func lockedThrowing<T>(_ body: () throws(DiscoveryError) -> T) throws(DiscoveryError) -> T {
        if pollRunning { avahi_threaded_poll_lock(poll) }
        defer { if pollRunning { avahi_threaded_poll_unlock(poll) } }
        return try body()
    }

    private var unmanagedSelf: UnsafeMutableRawPointer { Unmanaged.passUnretained(self).toOpaque() }

    // MARK: - The client (lock held, or the poll not running)

    private func connect() {
        logger.debug("connecting to avahi-daemon")
        var error: Int32 = 0
        let created = avahi_client_new(
            avahi_threaded_poll_get(poll), AVAHI_CLIENT_NO_FAIL, discoveryClientCallback, unmanagedSelf, &error)
        guard let created else {
            // No D-Bus system bus at all: NO_FAIL only covers a missing daemon.
            client = nil
            unavailable(
                "avahi-daemon cannot be reached over D-Bus (\(Self.message(error))); discovery is off, static peers "
                    + "still work")
            scheduleRetry()
            return
        }
        client = created
    }

    /// Called by Avahi (inside `avahi_client_new` the first time) with the client pointer to use.
    fileprivate func clientChanged(_ client: OpaquePointer, _ state: AvahiClientState) {
        self.client = client
        switch state {
        case AVAHI_CLIENT_S_RUNNING:
            setState(.running)
            logger.info("avahi-daemon is running; discovery is on")
            publishIfPossibleLogging()
            browseIfPossible()
        case AVAHI_CLIENT_S_REGISTERING, AVAHI_CLIENT_S_COLLISION:
            // The daemon is (re)registering its host name: what was published is withdrawn, and goes
            // back when it runs again.
            resetGroup()
            setState(.starting)
        case AVAHI_CLIENT_CONNECTING:
            // NO_FAIL: the daemon is not there (yet); Avahi waits for it on D-Bus.
            dropDaemonObjects()
            unavailable("avahi-daemon is not running; discovery is off until it starts, static peers still work")
        default:
            // AVAHI_CLIENT_FAILURE: typically the daemon went away (AVAHI_ERR_DISCONNECTED). This client is
            // dead: a fresh one (NO_FAIL) waits for the daemon to come back. Not freed here, inside its
            // own callback, but from the retry timer.
            let error = avahi_client_errno(client)
            dropDaemonObjects()
            unavailable(
                "lost avahi-daemon (\(Self.message(error))); discovery is off until it is back, static peers "
                    + "still work")
            scheduleRetry(after: .zero)
        }
    }

    /// Frees what belonged to the daemon's previous life: the entry group, the browser and the resolvers
    /// (peers seen through it are reported removed). They are created again when the daemon runs.
    private func dropDaemonObjects() {
        if let group { avahi_entry_group_free(group) }
        group = nil
        established = nil
        // A fresh daemon may have the name free again.
        publishedName = announcement?.name
        tearDownBrowsing()
    }

    /// Withdraws the service (the group stays, empty, for the next publication).
    private func resetGroup() {
        if let group { avahi_entry_group_reset(group) }
        established = nil
    }

    private func setState(_ state: DiscoveryState) {
        guard state != currentState || !stateReported else { return }
        currentState = state
        stateReported = true
        continuation.yield(.state(state))
    }

    /// Reports the daemon unreachable, once: losing it and then waiting for it is one outage, told by the
    /// first warning.
    private func unavailable(_ warning: String) {
        if case .unavailable = currentState { return }
        logger.warning("\(warning)")
        setState(.unavailable(warning: warning))
    }

    // MARK: - Retrying (lock held)

    private func scheduleRetry(after delay: Duration? = nil) {
        guard !isClosed, let api = avahi_threaded_poll_get(poll) else { return }
        var when = timeval()
        let (seconds, attoseconds) = (delay ?? retryDelay).components
        avahi_elapse_time(&when, UInt32(seconds * 1000 + attoseconds / 1_000_000_000_000_000), 0)
        if let retryTimer {
            api.pointee.timeout_update(retryTimer, &when)
        } else {
            retryTimer = api.pointee.timeout_new(api, &when, discoveryRetryCallback, unmanagedSelf)
        }
    }

    fileprivate func retry() {
        guard !isClosed else { return }
        if client == nil || avahi_client_get_state(client) == AVAHI_CLIENT_FAILURE {
            if let client { avahi_client_free(client) }
            client = nil
            connect()
            return
        }
        publishIfPossibleLogging()
        browseIfPossible()
    }

    // MARK: - Publishing (lock held)

    private var clientRunning: Bool {
        guard let client else { return false }
        return avahi_client_get_state(client) == AVAHI_CLIENT_S_RUNNING
    }

    private func publishIfPossibleLogging() {
        do {
            try publishIfPossible()
        } catch {
            logger.warning("\(error)")
            scheduleRetry()
        }
    }

    /// Adds the service to the entry group and commits it, if the daemon runs and it is not there yet.
    private func publishIfPossible() throws(DiscoveryError) {
        guard let announcement, clientRunning, let client else { return }
        if group == nil {
            group = avahi_entry_group_new(client, discoveryEntryGroupCallback, unmanagedSelf)
            guard group != nil else { throw avahiError("create an entry group", client: client) }
        }
        guard let group, avahi_entry_group_is_empty(group) != 0 else { return }
        let name = publishedName ?? announcement.name
        publishedName = name
        let status = withStringList(announcement.txt) { list in
            avahi_entry_group_add_service_strlst(
                group, AvahiIfIndex(AVAHI_IF_UNSPEC), AvahiProtocol(AVAHI_PROTO_UNSPEC), AvahiPublishFlags(0), name,
                Self.serviceType, nil, nil, announcement.port, list)
        }
        if status == Int32(AVAHI_ERR_COLLISION) {
            // A service of this name is registered locally (another plait home on this host).
            renameAfterCollision()
            return
        }
        guard status == 0 else { throw avahiError("publish '\(name)'", code: status) }
        let committed = avahi_entry_group_commit(group)
        guard committed == 0 else { throw avahiError("publish '\(name)'", code: committed) }
        logger.debug("publishing \(Self.serviceType) as '\(name)' on port \(announcement.port)")
    }

    private func applyTXT() throws(DiscoveryError) {
        guard let announcement, let group, let name = publishedName, clientRunning,
            avahi_entry_group_is_empty(group) == 0
        else { return }
        let status = withStringList(announcement.txt) { list in
            avahi_entry_group_update_service_txt_strlst(
                group, AvahiIfIndex(AVAHI_IF_UNSPEC), AvahiProtocol(AVAHI_PROTO_UNSPEC), AvahiPublishFlags(0), name,
                Self.serviceType, nil, list)
        }
        guard status == 0 else { throw avahiError("update the TXT record of '\(name)'", code: status) }
    }

    /// Called by Avahi on its thread.
    fileprivate func groupChanged(_ group: OpaquePointer, _ state: AvahiEntryGroupState) {
        guard group == self.group else { return }
        switch state {
        case AVAHI_ENTRY_GROUP_ESTABLISHED:
            let name = publishedName ?? ""
            established = name
            logger.info("published this device on the LAN as '\(name)'")
            continuation.yield(.published(name: name))
        case AVAHI_ENTRY_GROUP_COLLISION:
            renameAfterCollision()
        case AVAHI_ENTRY_GROUP_FAILURE:
            let error = avahi_client_errno(avahi_entry_group_get_client(group))
            logger.warning("avahi-daemon withdrew this device's service (\(Self.message(error))); retrying")
            resetGroup()
            scheduleRetry()
        default:
            break
        }
    }

    /// Another device on the LAN already has the name: take Avahi's alternative (`laptop #2`) and publish again.
    private func renameAfterCollision() {
        guard group != nil, let current = publishedName else { return }
        guard let alternative = avahi_alternative_service_name(current) else { return }
        let name = String(cString: alternative)
        avahi_free(alternative)
        logger.info("another service on the LAN is called '\(current)'; publishing this device as '\(name)'")
        publishedName = name
        resetGroup()
        publishIfPossibleLogging()
    }

    // MARK: - Browsing (lock held)

    private func browseIfPossible() {
        guard wantsBrowsing, browser == nil, clientRunning, let client else { return }
        browser = avahi_service_browser_new(
            client, AvahiIfIndex(AVAHI_IF_UNSPEC), AvahiProtocol(AVAHI_PROTO_UNSPEC), Self.serviceType, nil,
            AvahiLookupFlags(0), discoveryBrowseCallback, unmanagedSelf)
        if browser == nil {
            logger.warning("\(avahiError("browse for \(Self.serviceType)", client: client)); retrying")
            scheduleRetry()
        }
    }

    /// Frees the browser and every resolver; every device found is reported removed.
    private func tearDownBrowsing() {
        for resolver in resolvers.values { avahi_service_resolver_free(resolver) }
        resolvers = [:]
        if let browser { avahi_service_browser_free(browser) }
        browser = nil
        for name in services.keys.sorted() where services[name]?.reported != nil {
            continuation.yield(.removed(name: name))
        }
        services = [:]
    }

    /// Called by Avahi on its thread; the strings die when it returns.
    fileprivate func browsed(
        _ browser: OpaquePointer, _ key: BrowseKey?, _ event: AvahiBrowserEvent, _ ownService: Bool
    ) {
        guard browser == self.browser else { return }
        switch event {
        case AVAHI_BROWSER_NEW:
            guard let key, !ownService, resolvers[key] == nil else { return }
            services[key.name, default: TrackedService(name: key.name)].browsed(key)
            // Resolve the address family the query came over (A over IPv4, AAAA over IPv6): both are
            // reported. The resolver stays open, so a new TXT record arrives as another FOUND.
            let resolver = avahi_service_resolver_new(
                avahi_service_browser_get_client(browser), key.interface, key.proto, key.name, key.type, key.domain,
                key.proto, AvahiLookupFlags(0), discoveryResolveCallback, unmanagedSelf)
            if let resolver {
                resolvers[key] = resolver
            } else {
                let error = avahiError("resolve '\(key.name)'", client: avahi_service_browser_get_client(browser))
                logger.debug("\(error)")
            }
        case AVAHI_BROWSER_REMOVE:
            guard let key else { return }
            if let resolver = resolvers.removeValue(forKey: key) { avahi_service_resolver_free(resolver) }
            guard var service = services[key.name] else { return }
            let event = service.lost(key)
            services[key.name] = service.keys.isEmpty ? nil : service
            if let event { continuation.yield(event) }
        case AVAHI_BROWSER_FAILURE:
            let error = avahi_client_errno(avahi_service_browser_get_client(browser))
            logger.warning("browsing for plait devices failed (\(Self.message(error))); retrying")
            tearDownBrowsing()
            scheduleRetry()
        default:
            break  // CACHE_EXHAUSTED, ALL_FOR_NOW: nothing to report.
        }
    }

    /// Called by Avahi on its thread with what it resolved, already copied.
    fileprivate func resolved(_ resolver: OpaquePointer, _ key: BrowseKey, _ resolution: Resolution?) {
        guard resolvers[key] == resolver else { return }
        guard let resolution else {
            // A timeout: the resolver stays open and reports FOUND if the records show up later.
            logger.debug("could not resolve '\(key.name)' yet")
            return
        }
        guard var service = services[key.name] else { return }
        let event = service.resolved(key, resolution)
        services[key.name] = service
        if let event { continuation.yield(event) }
    }

    // MARK: - Tearing down (poll stopped)

    private func tearDown() {
        for resolver in resolvers.values { avahi_service_resolver_free(resolver) }
        resolvers = [:]
        if let browser { avahi_service_browser_free(browser) }
        browser = nil
        if let group { avahi_entry_group_free(group) }
        group = nil
        if let client { avahi_client_free(client) }
        client = nil
        // The retry timer is freed with the poll.
    }

    // MARK: - Helpers

    private static func validate(_ announcement: Announcement) throws(DiscoveryError) {
        let bytes = announcement.name.utf8.count
        guard bytes > 0, bytes <= Announcement.maximumNameBytes else {
            throw .invalidAnnouncement(
                reason: "the device name must be 1 to \(Announcement.maximumNameBytes) bytes of UTF-8, not \(bytes)")
        }
        guard announcement.port != 0 else { throw .invalidAnnouncement(reason: "the port is 0") }
        try validate(announcement.txt)
    }

    private static func validate(_ txt: TXTRecord) throws(DiscoveryError) {
        for (key, value) in txt.entries where key.utf8.count + 1 + value.utf8.count > 255 {
            throw .invalidAnnouncement(reason: "the TXT entry '\(key)' is longer than 255 bytes")
        }
    }

    /// Runs `body` with `txt` as an `AvahiStringList` (nil for none), freed afterwards.
    private func withStringList(_ txt: TXTRecord, _ body: (UnsafeMutablePointer<AvahiStringList>?) -> Int32) -> Int32 {
        var list: UnsafeMutablePointer<AvahiStringList>?
        // avahi_string_list_add_pair prepends: add in reverse to publish in order.
        for (key, value) in txt.entries.reversed() { list = avahi_string_list_add_pair(list, key, value) }
        defer { avahi_string_list_free(list) }
        return body(list)
    }

    private func avahiError(_ operation: String, client: OpaquePointer?) -> DiscoveryError {
        avahiError(operation, code: client.map { avahi_client_errno($0) } ?? Int32(AVAHI_ERR_FAILURE))
    }

    private func avahiError(_ operation: String, code: Int32) -> DiscoveryError {
        .avahi(operation: operation, code: code, message: Self.message(code))
    }

    static func message(_ code: Int32) -> String {
        avahi_strerror(code).map { String(cString: $0) } ?? "error \(code)"
    }
}

// MARK: - Callbacks: file-scope functions, capturing nothing, finding the object through Unmanaged.

private func discovery(_ userdata: UnsafeMutableRawPointer?) -> Discovery? {
    userdata.map { Unmanaged<Discovery>.fromOpaque($0).takeUnretainedValue() }
}

private func discoveryClientCallback(
    _ client: OpaquePointer?, _ state: AvahiClientState, _ userdata: UnsafeMutableRawPointer?
) {
    guard let client else { return }
    discovery(userdata)?.clientChanged(client, state)
}

private func discoveryEntryGroupCallback(
    _ group: OpaquePointer?, _ state: AvahiEntryGroupState, _ userdata: UnsafeMutableRawPointer?
) {
    guard let group else { return }
    discovery(userdata)?.groupChanged(group, state)
}

private func discoveryRetryCallback(_ timeout: OpaquePointer?, _ userdata: UnsafeMutableRawPointer?) {
    discovery(userdata)?.retry()
}

private func discoveryBrowseCallback(
    _ browser: OpaquePointer?, _ interface: AvahiIfIndex, _ proto: AvahiProtocol, _ event: AvahiBrowserEvent,
    _ name: UnsafePointer<CChar>?, _ type: UnsafePointer<CChar>?, _ domain: UnsafePointer<CChar>?,
    _ flags: AvahiLookupResultFlags, _ userdata: UnsafeMutableRawPointer?
) {
    guard let browser else { return }
    var key: BrowseKey?
    if let name, let type, let domain {
        key = BrowseKey(
            interface: interface, proto: proto, name: String(cString: name), type: String(cString: type),
            domain: String(cString: domain))
    }
    // OUR_OWN: published by this very client. Avahi sets it on NEW only, which is where it matters.
    let own = flags.rawValue & AVAHI_LOOKUP_RESULT_OUR_OWN.rawValue != 0
    discovery(userdata)?.browsed(browser, key, event, own)
}

private func discoveryResolveCallback(
    _ resolver: OpaquePointer?, _ interface: AvahiIfIndex, _ proto: AvahiProtocol, _ event: AvahiResolverEvent,
    _ name: UnsafePointer<CChar>?, _ type: UnsafePointer<CChar>?, _ domain: UnsafePointer<CChar>?,
    _ hostName: UnsafePointer<CChar>?, _ address: UnsafePointer<AvahiAddress>?, _ port: UInt16,
    _ txt: UnsafeMutablePointer<AvahiStringList>?, _ flags: AvahiLookupResultFlags,
    _ userdata: UnsafeMutableRawPointer?
) {
    guard let resolver, let name, let type, let domain else { return }
    let key = BrowseKey(
        interface: interface, proto: proto, name: String(cString: name), type: String(cString: type),
        domain: String(cString: domain))
    var resolution: Resolution?
    if event == AVAHI_RESOLVER_FOUND {
        resolution = Resolution(
            host: hostName.map { String(cString: $0) } ?? "", address: address.flatMap { text(of: $0, interface) },
            port: port, txt: dictionary(of: txt))
    }
    discovery(userdata)?.resolved(resolver, key, resolution)
}

/// An address as text; a link-local IPv6 address gets its zone (`%eth0`), without which it is useless.
private func text(of address: UnsafePointer<AvahiAddress>, _ interface: AvahiIfIndex) -> String? {
    var buffer = [CChar](repeating: 0, count: Int(AVAHI_ADDRESS_STR_MAX) + 1)
    guard avahi_address_snprint(&buffer, buffer.count, address) != nil else { return nil }
    var text = string(buffer)
    if address.pointee.proto == AvahiProtocol(AVAHI_PROTO_INET6), text.lowercased().hasPrefix("fe80:"), interface >= 0 {
        var name = [CChar](repeating: 0, count: Int(IF_NAMESIZE) + 1)
        if if_indextoname(UInt32(interface), &name) != nil { text += "%" + string(name) }
    }
    return text
}

/// The text of a NUL-terminated C string held in an array.
private func string(_ buffer: [CChar]) -> String {
    String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// A TXT record as key → value; the first of duplicate keys wins (RFC 6763 §6.4), a bare key maps to "".
private func dictionary(of list: UnsafeMutablePointer<AvahiStringList>?) -> [String: String] {
    var entries: [String: String] = [:]
    var current = list
    while let entry = current {
        var key: UnsafeMutablePointer<CChar>?
        var value: UnsafeMutablePointer<CChar>?
        var size = 0
        if avahi_string_list_get_pair(entry, &key, &value, &size) == 0, let key {
            let name = String(cString: key)
            let bytes = value.map { UnsafeRawBufferPointer(start: $0, count: size) }
            if entries[name] == nil { entries[name] = bytes.map { String(decoding: $0, as: UTF8.self) } ?? "" }
            avahi_free(key)
            if let value { avahi_free(value) }
        }
        current = entry.pointee.next
    }
    return entries
}
