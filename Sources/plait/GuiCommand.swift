import ArgumentParser
import Foundation
import PlaitAPI
import PlaitOutput
import PlaitSync

extension Plait {
    struct Gui: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print the address of the web page with a login code, or the API token for scripts.",
            discussion: """
                The running agent (`plait agent`) serves the page and the API on api.listen (127.0.0.1:7480 by \
                default). The URL printed holds a code that logs one browser in, once, within 60 seconds; the \
                page then keeps a session cookie until the agent stops. --token prints the long-lived API token \
                instead, for scripts: send it as `Authorization: Bearer TOKEN` (keep it as private as the home).
                """)

        @OptionGroup var global: GlobalOptions

        @Flag(help: "Print the API token (from <home>/api-token) instead of a login URL.")
        var token = false

        func run() throws {
            let home = try global.openHome()
            if token {
                print(try APIAuth.ensureToken(homePath: home.path))
                return
            }
            let noAgent = PlaitError.usage(
                "no agent serves the API of \(home.path): start `plait agent` (with api.listen set), then run "
                    + "`plait gui` again.")
            guard let client = LoopbackClient(addressFileOf: home.path) else { throw noAgent }
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
    }
}
