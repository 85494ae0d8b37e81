import Foundation
import HTTPTypes
import Logging
import NIOCore
import NIOHTTPTypes
import PlaitOutput

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `struct ucred` as `SO_PEERCRED` fills it (pid, uid, gid: three 32-bit fields), declared here because Glibc
/// exposes `ucred` only under `_GNU_SOURCE`.
struct PeerCredentials: Sendable, Equatable {
    var pid: Int32 = 0
    var uid: UInt32 = 0
    var gid: UInt32 = 0
}

/// The device and inode of a directory: how the agent tells its own home from another path naming it (a
/// symbolic link, a relative path) and from a copy of it.
struct DirectoryIdentity: Sendable, Equatable {
    var device: UInt64
    var inode: UInt64

    init?(path: String) {
        var status = stat()
        guard stat(path, &status) == 0 else { return nil }
        device = UInt64(status.st_dev)
        inode = UInt64(status.st_ino)
    }
}

/// The first handler after HTTP decoding on a Unix-socket connection. It lets a connection through only when:
/// - the kernel says the peer (`SO_PEERCRED`: its uid at connect time, which it cannot forge) is the agent's
///   own user or root. The socket is 0600 in a private directory too; this is the check that does not depend on
///   file modes (a home made group-writable, a socket path reached another way);
/// - the first request's `Plait-Home` header, when sent (the CLI sends its home's path), names the directory this
///   agent serves. Under `$XDG_RUNTIME_DIR` the socket is named by Device ID, which a copied home shares: a
///   command on one copy must never edit the other.
/// A refused request gets one JSON error (403, or 421 for another home) and the connection is closed; nothing
/// it sent reaches the router.
final class UnixSocketPeerCheck: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundOut = HTTPResponsePart

    /// The request header naming the home the client means (percent-encoded path).
    static let homeHeader = HTTPField.Name("Plait-Home")!

    private let agentUID: UInt32
    private let home: String
    private let homeIdentity: DirectoryIdentity?
    private let logger: Logger
    private var decided = false
    private var refusal: (status: HTTPResponse.Status, message: String)?

    init(agentUID: UInt32 = geteuid(), home: String, homeIdentity: DirectoryIdentity?, logger: Logger) {
        self.agentUID = agentUID
        self.home = home
        self.homeIdentity = homeIdentity
        self.logger = logger
    }

    /// Whether a peer of `uid` may use the socket: the agent's user, or root (who could read the home anyway).
    static func admits(uid: UInt32, agentUID: UInt32) -> Bool { uid == agentUID || uid == 0 }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let part = unwrapInboundIn(data)
        let first = !decided
        if first, case let .head(head) = part { decide(context: context, head: head) }
        guard let refusal else {
            context.fireChannelRead(data)
            // Admitted: the handler has nothing more to do on this connection.
            if first { context.pipeline.syncOperations.removeHandler(context: context, promise: nil) }
            return
        }
        // Answer the first request's head; drop everything else the peer sends until the connection is closed.
        guard first else { return }
        struct Failure: Encodable { let error: String }
        let text = (try? JSONStreamEncoder.text(Failure(error: refusal.message))) ?? "{}\n"
        var body = context.channel.allocator.buffer(capacity: text.utf8.count)
        body.writeString(text)
        let head = HTTPResponse(
            status: refusal.status,
            headerFields: [
                .contentType: "application/json", .contentLength: "\(body.readableBytes)", .connection: "close",
            ])
        context.write(wrapOutboundOut(.head(head)), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        let channel = context.channel
        context.writeAndFlush(wrapOutboundOut(.end(nil))).whenComplete { _ in channel.close(promise: nil) }
    }

    /// Decides on the first request's head. Anything but a clear answer admitting the peer refuses it.
    private func decide(context: ChannelHandlerContext, head: HTTPRequest) {
        decided = true
        var credentials: PeerCredentials?
        if let provider = context.channel as? SocketOptionProvider {
            // On the channel's event loop the option is read at once and the future is already complete.
            let future: EventLoopFuture<PeerCredentials> = provider.unsafeGetSocketOption(
                level: SocketOptionLevel(SOL_SOCKET), name: SocketOptionName(SO_PEERCRED))
            future.whenSuccess { credentials = $0 }
        }
        guard let peer = credentials, Self.admits(uid: peer.uid, agentUID: agentUID) else {
            let uid = credentials.map { "uid \($0.uid)" } ?? "a peer whose uid could not be read"
            refusal = (
                .forbidden,
                "this socket serves only uid \(agentUID) (the agent's user) and root; \(uid) was refused. "
                    + "Run plait as the user who runs `plait agent`."
            )
            let text = "local API: refused a connection on the Unix socket from \(uid) (pid \(credentials?.pid ?? 0)); "
                + "only uid \(agentUID) and root may use it"
            logger.warning("\(text)")
            return
        }
        if let meant = head.headerFields[Self.homeHeader].map({ $0.removingPercentEncoding ?? $0 }),
            DirectoryIdentity(path: meant) == nil || DirectoryIdentity(path: meant) != homeIdentity
        {
            refusal = (
                .misdirectedRequest,
                "this agent serves \(home), not \(meant); run the command on \(home), or start an agent on \(meant)."
            )
        }
    }
}
