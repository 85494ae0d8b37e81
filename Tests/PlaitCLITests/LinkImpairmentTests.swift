import Foundation
import PlaitNetnsSupport
import Testing

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The chaos test's faults do what they say: datagrams between two test hosts are lost, delayed and reordered
/// as `NetnsLAN.impair` asks, and stop entirely while a link is down — through whichever switching this
/// machine offers (netem on the kernel bridge, or the userspace switch).
///
/// The sockets belong to the hosts' namespaces: each is opened by a thread that entered that namespace
/// (`setns` works per thread), then used from here. Datagrams carry their sequence number and send time.
@Suite(
    "Link impairment on a LAN of namespaces", .serialized,
    .disabled(if: chaosSkipReason != nil, Comment(rawValue: chaosSkipReason ?? "")))
struct LinkImpairmentTests {
    static var switchings: [NetnsLAN.Switching] {
        NetnsLAN.netemSkipReason == nil ? [.kernelBridge, .userspace] : [.userspace]
    }

    @Test(arguments: switchings)
    func lossDelayReorderAndCutsHappenAsAsked(switching: NetnsLAN.Switching) throws {
        let lan = try NetnsLAN(hosts: 2, avahi: false, switching: switching)
        defer { lan.tearDown() }
        let receiver = try UDPSocket(in: lan.hosts[1].namespace, port: 9_999)
        let sender = try UDPSocket(in: lan.hosts[0].namespace, port: 0)

        // Clean: everything arrives, in order, within milliseconds (the first datagrams also settle ARP).
        _ = sender.burst(count: 20, to: lan.hosts[1].ipv4, port: 9_999, receiver: receiver)
        let clean = sender.burst(count: 200, to: lan.hosts[1].ipv4, port: 9_999, receiver: receiver)
        #expect(clean.received == 200 && clean.inversions == 0, "\(clean)")
        #expect(clean.medianMilliseconds < 30, "\(clean)")

        try lan.impair(lan.hosts[0], LinkImpairment(lossPercent: 30, delayMilliseconds: 60))
        let lossy = sender.burst(count: 400, to: lan.hosts[1].ipv4, port: 9_999, receiver: receiver)
        #expect((200...340).contains(lossy.received), "about 70% arrive: \(lossy)")
        #expect(lossy.minimumMilliseconds >= 55, "each held 60 ms: \(lossy)")

        try lan.impair(
            lan.hosts[0], LinkImpairment(delayMilliseconds: 40, jitterMilliseconds: 30, reorderPercent: 30))
        let shuffled = sender.burst(count: 300, to: lan.hosts[1].ipv4, port: 9_999, receiver: receiver)
        #expect(shuffled.received == 300, "no loss asked: \(shuffled)")
        #expect(shuffled.inversions > 10, "out of order: \(shuffled)")

        try lan.impair(lan.hosts[0], nil)
        let healed = sender.burst(count: 200, to: lan.hosts[1].ipv4, port: 9_999, receiver: receiver)
        #expect(healed.received == 200 && healed.inversions == 0 && healed.medianMilliseconds < 30, "\(healed)")

        try lan.setLink(of: lan.hosts[1], up: false)
        let cut = sender.burst(count: 100, to: lan.hosts[1].ipv4, port: 9_999, receiver: receiver)
        #expect(cut.received == 0, "\(cut)")
        try lan.setLink(of: lan.hosts[1], up: true)
        print("link impairment (\(switching)): clean \(clean); 30% loss + 60 ms \(lossy); "
            + "40±30 ms, 30% reorder \(shuffled); link down \(cut)")
    }
}

/// A UDP socket opened inside a test host's network namespace.
final class UDPSocket {
    let descriptor: Int32

    struct Burst: CustomStringConvertible {
        var sent: Int
        var received: Int
        /// Pairs of received datagrams in the wrong order (a later one before an earlier one), adjacent pairs.
        var inversions: Int
        var minimumMilliseconds: Double
        var medianMilliseconds: Double

        var description: String {
            String(
                format: "%d of %d arrived, %d inversions, latency min %.1f ms median %.1f ms", received, sent,
                inversions, minimumMilliseconds, medianMilliseconds)
        }
    }

    private typealias SetNamespace = @convention(c) (Int32, Int32) -> Int32

    init(in namespace: String, port: UInt16) throws {
        final class Opened: @unchecked Sendable { var descriptor: Int32 = -1; var error = "" }
        let opened = Opened()
        let done = DispatchSemaphore(value: 0)
        // Network namespaces are per thread: this one enters the host's and opens the socket there.
        let thread = Thread {
            defer { done.signal() }
            let namespaceFD = open("/run/netns/" + namespace, O_RDONLY)
            guard namespaceFD >= 0, let symbol = dlsym(nil, "setns") else { return opened.error = "no namespace" }
            defer { close(namespaceFD) }
            guard unsafeBitCast(symbol, to: SetNamespace.self)(namespaceFD, 0x4000_0000) == 0 else {
                return opened.error = "setns: \(String(cString: strerror(errno)))"
            }
            let descriptor = socket(AF_INET, Int32(SOCK_DGRAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = port.bigEndian
            let bound = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard descriptor >= 0, bound == 0 else {
                return opened.error = "socket: \(String(cString: strerror(errno)))"
            }
            opened.descriptor = descriptor
        }
        thread.start()
        done.wait()
        guard opened.descriptor >= 0 else {
            throw CLITestFailure("cannot open a UDP socket in \(namespace): \(opened.error)")
        }
        descriptor = opened.descriptor
    }

    deinit { close(descriptor) }

    /// Sends `count` datagrams a millisecond apart to `host:port`, collecting what `receiver` gets meanwhile
    /// (so a datagram's latency is not time spent in the socket's buffer) and afterwards, until nothing more
    /// arrives for half a second.
    func burst(count: Int, to host: String, port: UInt16, receiver: UDPSocket) -> Burst {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        inet_pton(AF_INET, host, &address.sin_addr)
        let run = UInt64.random(in: 0...UInt64(UInt32.max))
        var order: [UInt64] = []
        var latencies: [Double] = []
        var polled = [pollfd(fd: receiver.descriptor, events: Int16(POLLIN), revents: 0)]
        func collect(waiting milliseconds: Int32) {
            var buffer = [UInt64](repeating: 0, count: 3)
            while poll(&polled, 1, milliseconds) > 0 {
                let read = buffer.withUnsafeMutableBytes { recv(receiver.descriptor, $0.baseAddress, $0.count, 0) }
                // Stragglers of an earlier burst carry another run number.
                guard read == 24, buffer[0] == run else { continue }
                order.append(buffer[1])
                latencies.append(Double(DispatchTime.now().uptimeNanoseconds - buffer[2]) / 1e6)
            }
        }
        let length = socklen_t(MemoryLayout<sockaddr_in>.size)
        for seq in 0..<count {
            var payload: [UInt64] = [run, UInt64(seq), DispatchTime.now().uptimeNanoseconds]
            _ = withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { target in
                    payload.withUnsafeMutableBytes { sendto(descriptor, $0.baseAddress, $0.count, 0, target, length) }
                }
            }
            collect(waiting: 0)
            usleep(1_000)
        }
        collect(waiting: 500)
        latencies.sort()
        return Burst(
            sent: count, received: order.count,
            inversions: zip(order, order.dropFirst()).filter { $0 > $1 }.count,
            minimumMilliseconds: latencies.first ?? 0,
            medianMilliseconds: latencies.isEmpty ? 0 : latencies[latencies.count / 2])
    }
}
