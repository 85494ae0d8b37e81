#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// Non-blocking TCP sockets and poll(2), for the blocking-with-timeout conveniences. Linux only
// (SOCK_NONBLOCK), like the rest of plait.

/// A point in time after which a blocking convenience gives up; `nil` timeout means never.
struct Deadline {
    /// The timeout as given, for error messages.
    let timeout: Duration?
    private let instant: ContinuousClock.Instant?

    init(_ timeout: Duration?) {
        self.timeout = timeout
        instant = timeout.map { ContinuousClock.now + $0 }
    }

    /// Milliseconds left for poll(2), rounded up; -1 (wait forever) without a timeout.
    var pollMilliseconds: Int32 {
        guard let instant else { return -1 }
        let left = ContinuousClock.now.duration(to: instant)
        guard left > .zero else { return 0 }
        let (seconds, attoseconds) = left.components
        let attosecondsPerMillisecond: Int64 = 1_000_000_000_000_000
        let milliseconds = seconds * 1000 + (attoseconds + attosecondsPerMillisecond - 1) / attosecondsPerMillisecond
        return Int32(clamping: milliseconds)
    }

    func timedOut(_ operation: String) -> TLSError {
        .timeout(operation: operation, after: timeout ?? .zero)
    }
}

func errnoText(_ code: Int32) -> String {
    String(cString: strerror(code))
}

func closeSocket(_ descriptor: Int32) {
    // Linux closes the descriptor even when close(2) fails with EINTR: never retry.
    _ = close(descriptor)
}

/// Waits until `descriptor` is ready for `events` (POLLIN, POLLOUT), has an error or hung up.
func waitUntilReady(_ descriptor: Int32, for events: Int32, deadline: Deadline, operation: String) throws {
    while true {
        var entry = pollfd(fd: descriptor, events: Int16(events), revents: 0)
        let count = poll(&entry, 1, deadline.pollMilliseconds)
        if count > 0 { return }
        if count == 0 { throw deadline.timedOut(operation) }
        let code = errno
        if code == EINTR { continue }
        throw TLSError.socket(operation: "wait for a socket", reason: errnoText(code))
    }
}

/// `host:port`, with brackets around an IPv6 address.
func addressText(_ host: String, _ port: UInt16) -> String {
    host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
}

/// One result of getaddrinfo, copied out of the list before it is freed.
struct SocketAddress {
    let family: Int32
    let bytes: [UInt8]

    func withSockaddr<T>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
        bytes.withUnsafeBytes { raw in
            body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), socklen_t(raw.count))
        }
    }

    /// The TCP addresses of `host` (a name or a numeric IPv4 or IPv6 address) at `port`.
    static func resolve(host: String, port: UInt16, passive: Bool) throws -> [SocketAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0 else {
            let reason = status == EAI_SYSTEM ? errnoText(errno) : String(cString: gai_strerror(status))
            throw TLSError.socket(operation: "resolve \(host)", reason: reason)
        }
        defer { freeaddrinfo(list) }
        var addresses: [SocketAddress] = []
        var entry = list
        while let current = entry {
            if let address = current.pointee.ai_addr {
                let bytes = Array(UnsafeRawBufferPointer(start: address, count: Int(current.pointee.ai_addrlen)))
                addresses.append(SocketAddress(family: current.pointee.ai_family, bytes: bytes))
            }
            entry = current.pointee.ai_next
        }
        return addresses
    }
}

/// A non-blocking, close-on-exec TCP socket.
private func makeSocket(family: Int32, operation: String) throws -> Int32 {
    let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
    let descriptor = socket(family, type, 0)
    guard descriptor >= 0 else {
        throw TLSError.socket(operation: operation, reason: errnoText(errno))
    }
    return descriptor
}

/// Small messages (Notify, Ping) go out at once rather than waiting for Nagle's algorithm.
func setNoDelay(_ descriptor: Int32) {
    var on: Int32 = 1
    _ = setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
}

/// Makes `descriptor` non-blocking (a descriptor handed over from elsewhere may not be).
func setNonBlocking(_ descriptor: Int32) throws {
    let flags = fcntl(descriptor, F_GETFL)
    guard flags >= 0, flags & O_NONBLOCK != 0 || fcntl(descriptor, F_SETFL, flags | O_NONBLOCK) == 0 else {
        throw TLSError.socket(operation: "make a socket non-blocking", reason: errnoText(errno))
    }
}

/// Opens a TCP connection to `host:port`, trying each address in turn until one answers.
/// Returns a connected non-blocking socket, owned by the caller.
func connectTCP(host: String, port: UInt16, deadline: Deadline) throws -> Int32 {
    let address = addressText(host, port)
    var lastFailure: TLSError = .refused(address: address, reason: "no address found")
    for candidate in try SocketAddress.resolve(host: host, port: port, passive: false) {
        let descriptor = try makeSocket(family: candidate.family, operation: "create a socket")
        do {
            let status = candidate.withSockaddr { connect(descriptor, $0, $1) }
            if status != 0 {
                let code = errno
                guard code == EINPROGRESS || code == EINTR else {
                    throw TLSError.refused(address: address, reason: errnoText(code))
                }
                try waitUntilReady(descriptor, for: POLLOUT, deadline: deadline, operation: "connecting to \(address)")
                var error: Int32 = 0
                var length = socklen_t(MemoryLayout<Int32>.size)
                guard getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &error, &length) == 0 else {
                    throw TLSError.socket(operation: "connect to \(address)", reason: errnoText(errno))
                }
                guard error == 0 else {
                    throw TLSError.refused(address: address, reason: errnoText(error))
                }
            }
            setNoDelay(descriptor)
            return descriptor
        } catch let failure as TLSError {
            closeSocket(descriptor)
            if case .timeout = failure { throw failure }
            lastFailure = failure
        }
    }
    throw lastFailure
}

/// A listening socket bound to `host:port` (port 0: any free port). Returns the socket, owned by
/// the caller, and the port it is bound to.
func listenTCP(host: String, port: UInt16, backlog: Int32) throws -> (descriptor: Int32, port: UInt16) {
    let address = addressText(host, port)
    guard let candidate = try SocketAddress.resolve(host: host, port: port, passive: true).first else {
        throw TLSError.socket(operation: "resolve \(host)", reason: "no address found")
    }
    let descriptor = try makeSocket(family: candidate.family, operation: "create a socket")
    do {
        var on: Int32 = 1
        _ = setsockopt(descriptor, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        guard candidate.withSockaddr({ bind(descriptor, $0, $1) }) == 0 else {
            throw TLSError.socket(operation: "listen on \(address)", reason: errnoText(errno))
        }
        guard listen(descriptor, backlog) == 0 else {
            throw TLSError.socket(operation: "listen on \(address)", reason: errnoText(errno))
        }
        return (descriptor, try boundPort(descriptor))
    } catch {
        closeSocket(descriptor)
        throw error
    }
}

/// The local port a socket is bound to (what port 0 became).
func boundPort(_ descriptor: Int32) throws -> UInt16 {
    var storage = sockaddr_storage()
    var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
    let status = withUnsafeMutablePointer(to: &storage) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
    }
    guard status == 0 else {
        throw TLSError.socket(operation: "read the bound port", reason: errnoText(errno))
    }
    return withUnsafePointer(to: &storage) { pointer in
        switch Int32(pointer.pointee.ss_family) {
        case AF_INET:
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                UInt16(bigEndian: $0.pointee.sin_port)
            }
        case AF_INET6:
            return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                UInt16(bigEndian: $0.pointee.sin6_port)
            }
        default:
            return 0
        }
    }
}

/// Accepts one pending connection without waiting: a non-blocking socket owned by the caller, or
/// nil if none is pending.
func acceptTCP(_ listener: Int32) throws -> Int32? {
    while true {
        // accept4 is not in Swift's Glibc module: set the flags afterwards.
        let descriptor = accept(listener, nil, nil)
        if descriptor >= 0 {
            guard fcntl(descriptor, F_SETFD, FD_CLOEXEC) == 0 else {
                let code = errno
                closeSocket(descriptor)
                throw TLSError.socket(operation: "accept a connection", reason: errnoText(code))
            }
            do {
                try setNonBlocking(descriptor)
            } catch {
                closeSocket(descriptor)
                throw error
            }
            setNoDelay(descriptor)
            return descriptor
        }
        let code = errno
        switch code {
        case EAGAIN, EWOULDBLOCK:
            return nil
        case EINTR, ECONNABORTED, EPROTO:
            continue  // the client gave up before we got to it: look at the next one
        default:
            throw TLSError.socket(operation: "accept a connection", reason: errnoText(code))
        }
    }
}
