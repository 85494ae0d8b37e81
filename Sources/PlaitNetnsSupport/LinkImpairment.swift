import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A bad link, as `tc netem` makes one: a share of packets lost, a delay with jitter, a share sent out of order.
public struct LinkImpairment: Sendable, Equatable, CustomStringConvertible {
    /// Packets dropped, in percent (0–100).
    public var lossPercent: Int
    /// Every packet held this long, in milliseconds...
    public var delayMilliseconds: Int
    /// ...plus or minus up to this much.
    public var jitterMilliseconds: Int
    /// Packets sent at once, ahead of those held back, in percent (netem needs a delay for this to mean anything).
    public var reorderPercent: Int

    public init(
        lossPercent: Int = 0, delayMilliseconds: Int = 0, jitterMilliseconds: Int = 0, reorderPercent: Int = 0
    ) {
        self.lossPercent = lossPercent
        self.delayMilliseconds = delayMilliseconds
        self.jitterMilliseconds = jitterMilliseconds
        self.reorderPercent = reorderPercent
    }

    /// The arguments after `netem`.
    var netemArguments: [String] {
        var arguments = ["loss", "\(lossPercent)%", "delay", "\(delayMilliseconds)ms"]
        if jitterMilliseconds > 0 { arguments.append("\(jitterMilliseconds)ms") }
        if reorderPercent > 0 && delayMilliseconds > 0 { arguments += ["reorder", "\(reorderPercent)%"] }
        return arguments
    }

    public var description: String {
        "loss \(lossPercent)% delay \(delayMilliseconds)±\(jitterMilliseconds) ms reorder \(reorderPercent)%"
    }
}

extension NetnsLAN {
    /// Why `impair` cannot work on this machine (no `tc`, or a kernel without the netem queueing discipline),
    /// in one sentence; nil when it can. Checked once, on a veth pair in a namespace of its own.
    public static let netemSkipReason: String? = checkNetem()

    /// Puts `impairment` on `host`'s link in both directions, or takes it off (nil): on a LAN built with
    /// `.userspace` switching, in the switch; else with `tc qdisc replace … root netem` on the host's `eth0`
    /// and on its port of the bridge (check `netemSkipReason` first).
    public func impair(_ host: NetnsHost, _ impairment: LinkImpairment?) throws {
        if let userspaceSwitch {
            userspaceSwitch.setImpairment(impairment, port: host.index - 1)
            return
        }
        let tc = Self.findExecutable("tc") ?? "/usr/sbin/tc"
        for (namespace, device) in [(host.namespace, host.interface), (bridgeNamespace, "v\(host.index)")] {
            if let impairment {
                try Self.ip(
                    ["netns", "exec", namespace, tc, "qdisc", "replace", "dev", device, "root", "netem"]
                        + impairment.netemArguments)
            } else {
                // Deleting the root qdisc restores the default; there is none to delete when none was added.
                let shown = try Self.ip(["netns", "exec", namespace, tc, "qdisc", "show", "dev", device, "root"])
                if shown.contains("netem") {
                    try Self.ip(["netns", "exec", namespace, tc, "qdisc", "del", "dev", device, "root"])
                }
            }
        }
    }

    private static func checkNetem() -> String? {
        if let reason = skipReason { return reason }
        guard let tc = findExecutable("tc") else { return "`tc` is not installed (apt-get install iproute2)" }
        let name = "\(prefix)-\(getpid())-netemcheck"
        do {
            try ip(["netns", "add", name])
        } catch {
            return "network namespaces are not permitted here: \(error)"
        }
        defer { _ = try? ip(["netns", "delete", name]) }
        do {
            try ip(["-n", name, "link", "add", "a0", "type", "veth", "peer", "name", "b0"])
            try ip(["netns", "exec", name, tc, "qdisc", "add", "dev", "a0", "root", "netem", "delay", "1ms"])
        } catch {
            return "`tc qdisc add … netem` fails here (a kernel without CONFIG_NET_SCH_NETEM?): \(error)"
        }
        return nil
    }
}
