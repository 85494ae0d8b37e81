import ArgumentParser
import Foundation
import PlaitAPI
import PlaitOutput
import PlaitSync

extension Plait {
    struct Gui: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "gui",
            abstract: "Print the address of the web page with a login code, or the API token for scripts.",
            discussion: """
                The running agent (`plait agent`) serves the page and the API on api.listen (127.0.0.1:7480 by \
                default). The URL printed holds a code that logs one browser in, once, within 60 seconds; the \
                page then keeps its session (a cookie and a key only that page reads) for 7 days, across agent \
                restarts. --token prints the long-lived API token instead, for scripts: send it as \
                `Authorization: Bearer TOKEN` (keep it as private as the home).

                Other machines: with api.listen on a non-loopback address (e.g. 192.168.1.5:7480) the agent \
                serves the API only once a password is set, and then over HTTPS with a certificate of its own \
                (made in <home>/gui/ on first use; not the device's sync identity). --set-password reads the \
                password from standard input (asking twice, without echo, on a terminal; never from the command \
                line, where other users could see it) and stores only a scrypt hash of it in \
                <home>/api-password; a running agent takes the new one at the next login. Setting or clearing \
                the password signs out every page (it deletes <home>/api-sessions, which ends them in a running \
                agent too; deleting that file by hand does the same). There `plait gui` \
                prints an https:// URL with a login code (single-use, 60 s, as on loopback; without the agent's \
                socket, the address alone, for the password) and the certificate's SHA-256 fingerprint: check \
                that the browser shows the same before accepting the certificate. Wrong passwords are answered \
                ever more slowly.
                """)

        @OptionGroup var global: GlobalOptions

        @Flag(help: "Print the API token (from <home>/api-token) instead of a login URL.")
        var token = false

        @Flag(help: "Set the password other machines log in with (api.password), read from standard input.")
        var setPassword = false

        @Flag(help: "Remove the password: the agent then serves the API on loopback addresses only.")
        var clearPassword = false

        func validate() throws {
            if [token, setPassword, clearPassword].filter({ $0 }).count > 1 {
                throw ValidationError("--token, --set-password and --clear-password go one at a time.")
            }
        }

        func run() throws {
            let home = try global.openHome()
            if token {
                print(try APIAuth.ensureToken(homePath: home.path))
                return
            }
            if setPassword {
                try APIPassword.set(try Self.readPassword(), homePath: home.path)
                print("password set (only its scrypt hash is stored, in \(home.path)/\(APIPassword.fileName))")
                print(try Self.endSessions(homePath: home.path))
                return
            }
            if clearPassword {
                try APIPassword.clear(homePath: home.path)
                print("password removed; a non-loopback api.listen is refused from the next agent start")
                print(try Self.endSessions(homePath: home.path))
                return
            }
            // The agent's Unix socket needs no token (the kernel vouches for the caller, DESIGN §12): a token
            // file replaced since the agent started, or unreadable, does not matter there.
            if let minted = try global.throughAgent({ try $0.loginCode() }) {
                print(minted.url)
                // Over HTTPS (beyond loopback) the browser first warns of a certificate it does not know: the
                // fingerprint tells this agent's from an impostor's, which would otherwise receive the code.
                if minted.url.hasPrefix("https://"),
                    let fingerprint = try GUICertificate.existingFingerprint(homePath: home.path)
                {
                    print("certificate SHA-256 fingerprint: \(fingerprint)")
                    print(
                        "accept the certificate only if the browser shows this fingerprint; the code works once, "
                            + "within \(Self.codeSeconds) s (or log in with the password set by "
                            + "`plait gui --set-password`)")
                }
                return
            }
            // No socket (its path too long with no XDG_RUNTIME_DIR, or set off): TCP with the API token.
            let noAgent = PlaitError.usage(
                "no agent serves the API of \(home.path): start `plait agent` (with api.listen set), then run "
                    + "`plait gui` again.")
            // api.addr is written by a running agent and removed when it stops; after a crash or SIGKILL it
            // stays, naming a port anyone may have bound since. The token goes only to an address a live agent of
            // this home wrote (a hostile tester's server on the stale port received it).
            guard AgentLock.isHeld(home: home.path), let client = LoopbackClient(addressFileOf: home.path) else {
                throw noAgent
            }
            if !Config.isLoopback(host: client.host) {
                // Served over HTTPS to other machines: the page asks for the password; the fingerprint lets the
                // user tell this agent's certificate from an impostor's.
                guard let fingerprint = try GUICertificate.existingFingerprint(homePath: home.path) else {
                    throw noAgent
                }
                print("https://\(client.authority)/")
                print("certificate SHA-256 fingerprint: \(fingerprint)")
                print("log in with the password set by `plait gui --set-password`")
                return
            }
            let secret = try APIAuth.ensureToken(homePath: home.path)
            let reply: LoopbackClient.Reply
            do {
                reply = try client.send(
                    "POST", "/api/login-codes", headers: [("Authorization", "Bearer \(secret)")], json: [:])
            } catch LoopbackClient.Failure.connect {
                throw noAgent
            }
            guard reply.status == 200,
                let answer = try? JSONDecoder().decode(LoginCodeOutput.self, from: Data(reply.body))
            else {
                throw PlaitError.usage(
                    "the agent refused a login code (\(reply.status): \(reply.errorMessage ?? reply.text)); "
                        + "restart `plait agent` and try again.")
            }
            print(answer.url)
        }

        /// How long a login code is valid, in whole seconds, as the agent mints it.
        static let codeSeconds = APIAuth.defaultCodeLifetime.components.seconds

        /// The new password: on a terminal typed twice without echo, otherwise the first line of standard input.
        /// Ends every page session (a new password is what one sets after a suspected leak): deletes the sessions
        /// file, and the agent, which holds the sessions, ends them all at the next request (`APIAuth`).
        static func endSessions(homePath: String) throws -> String {
            let path = homePath + "/" + APIAuth.sessionsFileName
            guard unlink(path) == 0 || errno == ENOENT else {
                throw PlaitError.file(
                    path: path, problem: "cannot be removed (\(String(cString: strerror(errno)))), so pages signed in "
                        + "stay signed in; remove it by hand")
            }
            return "every page signed in to this device's agent is signed out (sign in again with `plait gui`, "
                + "and with the new password if one is set)"
        }

        static func readPassword() throws -> String {
            guard isatty(STDIN_FILENO) != 0 else {
                guard let line = readLine(strippingNewline: true) else {
                    throw PlaitError.usage("no password on standard input; pipe one line, or run this on a terminal.")
                }
                return line.hasSuffix("\r") ? String(line.dropLast()) : line
            }
            let first = try prompt("New password: ")
            // An empty first answer is refused by the length check; asking again would only repeat it.
            if first.isEmpty { return first }
            guard try prompt("Repeat it: ") == first else {
                throw PlaitError.usage("the two passwords differ; run `plait gui --set-password` again.")
            }
            return first
        }

        /// One line from the terminal with echo off (restored even when reading fails).
        private static func prompt(_ text: String) throws -> String {
            FileHandle.standardError.write(Data(text.utf8))
            var saved = termios()
            let echoOff = tcgetattr(STDIN_FILENO, &saved) == 0
            if echoOff {
                var quiet = saved
                quiet.c_lflag &= ~tcflag_t(ECHO)
                tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet)
            }
            defer {
                if echoOff { tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved) }
                FileHandle.standardError.write(Data("\n".utf8))
            }
            guard let line = readLine(strippingNewline: true) else {
                throw PlaitError.usage("no password typed; run `plait gui --set-password` again.")
            }
            return line
        }
    }
}
