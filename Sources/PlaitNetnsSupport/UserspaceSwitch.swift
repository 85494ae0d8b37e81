import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The LAN's switch as a thread of this process, for kernels without netem (`CONFIG_NET_SCH_NETEM` unset,
/// as on the machines this project is built on): each host's `eth0` is a TAP device whose frames this
/// switch reads and hands to every other port (a hub: a host's kernel drops unicast frames for another
/// address), applying the loss, delay, jitter and reordering set for the sending and the receiving port,
/// as netem would on each side's interface. A host's link cut (`ip link set eth0 down`) works as with the
/// bridge: the TAP device stops sending and refuses what is written to it.
final class UserspaceSwitch: @unchecked Sendable {
    private let lock = NSLock()
    private var ports: [Int32] = []
    private var impairments: [LinkImpairment?] = []
    /// Frames held back, by when they are due.
    private var held: [(due: UInt64, port: Int, frame: [UInt8])] = []
    private var wake: [Int32] = [-1, -1]
    private var stopped = false
    private var thread: Thread?
    private let finished = DispatchSemaphore(value: 0)
    private var random = SystemRandomNumberGenerator()

    /// Creates a TAP device named `interface` inside `namespace` (a name under /run/netns) and returns its port.
    func addPort(namespace: String, interface: String) throws -> Int {
        let descriptor = try Self.openTAP(named: interface, in: namespace)
        return lock.withLock {
            ports.append(descriptor)
            impairments.append(nil)
            return ports.count - 1
        }
    }

    func setImpairment(_ impairment: LinkImpairment?, port: Int) {
        lock.withLock { impairments[port] = impairment }
    }

    func start() throws {
        guard pipe(&wake) == 0 else { throw NetnsError.command(arguments: ["pipe"], status: errno, output: "") }
        for descriptor in ports + wake { _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK) }
        let thread = Thread { [self] in
            run()
            finished.signal()
        }
        thread.name = "NetnsLAN userspace switch"
        self.thread = thread
        thread.start()
    }

    /// Stops the thread and closes every port (which deletes the TAP devices). Idempotent.
    func stop() {
        let running = lock.withLock { () -> Bool in
            defer { stopped = true }
            return !stopped && thread != nil
        }
        if running {
            var byte: UInt8 = 1
            _ = write(wake[1], &byte, 1)
            finished.wait()
        }
        lock.withLock {
            for descriptor in ports + wake where descriptor >= 0 { close(descriptor) }
            ports = []
            wake = [-1, -1]
        }
    }

    private static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    private func run() {
        var buffer = [UInt8](repeating: 0, count: 65_536)
        let (descriptors, wakeRead) = lock.withLock { (ports, wake[0]) }
        var polled = (descriptors + [wakeRead]).map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        while !lock.withLock({ stopped }) {
            let timeout = lock.withLock { () -> Int32 in
                guard let due = held.first?.due else { return 1_000 }
                let now = Self.now()
                return due <= now ? 0 : Int32(min(1_000, (due - now) / 1_000_000 + 1))
            }
            _ = poll(&polled, nfds_t(polled.count), timeout)
            for (port, entry) in polled.enumerated() where port < descriptors.count && entry.revents != 0 {
                while true {
                    let count = buffer.withUnsafeMutableBytes { read(entry.fd, $0.baseAddress, $0.count) }
                    if count <= 0 { break }
                    forward(Array(buffer[0..<count]), from: port, ports: descriptors)
                }
            }
            deliverDue(ports: descriptors)
        }
    }

    private func forward(_ frame: [UInt8], from source: Int, ports descriptors: [Int32]) {
        let now = Self.now()
        var immediate: [Int] = []
        lock.withLock {
            for target in descriptors.indices where target != source {
                var delay: UInt64 = 0
                var dropped = false
                for impairment in [impairments[source], impairments[target]].compactMap({ $0 }) {
                    if Int.random(in: 0..<100, using: &random) < impairment.lossPercent { dropped = true }
                    // netem's reorder: that share goes at once, the rest waits its delay (± jitter).
                    if Int.random(in: 0..<100, using: &random) < impairment.reorderPercent { continue }
                    let jitter = impairment.jitterMilliseconds
                    let spread = Int.random(in: -jitter...jitter, using: &random)
                    let milliseconds = max(0, impairment.delayMilliseconds + spread)
                    delay += UInt64(milliseconds) * 1_000_000
                }
                if dropped { continue }
                if delay == 0 {
                    immediate.append(target)
                } else {
                    let due = now + delay
                    let place = held.firstIndex { $0.due > due } ?? held.count
                    held.insert((due, target, frame), at: place)
                }
            }
        }
        // A port whose link is down refuses the write (EIO): the frame is lost, as on a cut cable.
        for target in immediate { _ = frame.withUnsafeBytes { write(descriptors[target], $0.baseAddress, $0.count) } }
    }

    private func deliverDue(ports descriptors: [Int32]) {
        let now = Self.now()
        let due = lock.withLock { () -> [(due: UInt64, port: Int, frame: [UInt8])] in
            let count = held.prefix { $0.due <= now }.count
            defer { held.removeFirst(count) }
            return Array(held.prefix(count))
        }
        for entry in due {
            _ = entry.frame.withUnsafeBytes { write(descriptors[entry.port], $0.baseAddress, $0.count) }
        }
    }

    private typealias SetNamespace = @convention(c) (Int32, Int32) -> Int32

    /// glibc's `setns`, which Swift's Glibc module does not declare.
    private static let setNamespace: SetNamespace? = {
        guard let symbol = dlsym(nil, "setns") else { return nil }
        return unsafeBitCast(symbol, to: SetNamespace.self)
    }()

    /// Opens a TAP device created inside `namespace`: a thread of its own enters the namespace (network
    /// namespaces are per thread) and opens `/dev/net/tun` there, so the device never exists in the root
    /// namespace; the descriptor works from any thread afterwards.
    private static func openTAP(named interface: String, in namespace: String) throws -> Int32 {
        final class Outcome: @unchecked Sendable {
            var result: Result<Int32, NetnsError> = .failure(.command(arguments: ["tap"], status: -1, output: ""))
        }
        let outcome = Outcome()
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            defer { done.signal() }
            func failure(_ step: String) -> Result<Int32, NetnsError> {
                .failure(
                    .command(
                        arguments: ["tap", interface, namespace], status: errno,
                        output: "\(step): \(String(cString: strerror(errno)))"))
            }
            let namespaceFD = open("/run/netns/" + namespace, O_RDONLY | O_CLOEXEC)
            guard namespaceFD >= 0 else { return outcome.result = failure("open /run/netns/\(namespace)") }
            defer { close(namespaceFD) }
            guard let setNamespace, setNamespace(namespaceFD, 0x4000_0000 /* CLONE_NEWNET */) == 0 else {
                return outcome.result = failure("setns")
            }
            let descriptor = open("/dev/net/tun", O_RDWR | O_CLOEXEC)
            guard descriptor >= 0 else { return outcome.result = failure("open /dev/net/tun") }
            // struct ifreq: the name (16 bytes), then the flags: IFF_TAP | IFF_NO_PI.
            var request = [UInt8](repeating: 0, count: 40)
            for (offset, byte) in interface.utf8.prefix(15).enumerated() { request[offset] = byte }
            request[16] = 0x02
            request[17] = 0x10
            let tunSetIff: UInt = 0x4004_54CA
            guard request.withUnsafeMutableBytes({ ioctl(descriptor, tunSetIff, $0.baseAddress!) }) == 0 else {
                let failed = failure("TUNSETIFF")
                close(descriptor)
                return outcome.result = failed
            }
            outcome.result = .success(descriptor)
        }
        thread.start()
        done.wait()
        return try outcome.result.get()
    }
}
