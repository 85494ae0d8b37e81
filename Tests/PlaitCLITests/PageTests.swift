import Foundation
import PlaitAPI
import Testing

/// The repository checkout these tests were built from (the page's source files live in `page/`).
enum Repository {
    static let root: String = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    static func read(_ relativePath: String) throws -> String {
        try String(contentsOfFile: root + "/" + relativePath, encoding: .utf8)
    }
}

/// The page's files as written: the rules that keep data from becoming HTML or script hold in the source.
@Suite struct PageSourceTests {
    /// Ways JavaScript turns a string into markup or code. The page inserts data only as text (DESIGN §12).
    static let forbiddenInScript = [
        "innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "createContextualFragment", "DOMParser",
        "srcdoc", "eval(", "new Function", "javascript:",
    ]

    @Test func theScriptNeverParsesDataAsHTMLOrCode() throws {
        let script = try Repository.read("page/app.js")
        // The header comment names the forbidden calls to forbid them; the code after it must not use them.
        let code = script.components(separatedBy: "\n").filter { !$0.trimmingCharacters(in: .whitespaces)
            .hasPrefix("//") }.joined(separator: "\n")
        let used = Self.forbiddenInScript.filter { code.contains($0) }
        #expect(used.isEmpty, "page/app.js uses \(used)")
        // A string timer is an eval.
        #expect(code.range(of: #"setTimeout\(\s*["'`]"#, options: .regularExpression) == nil)
    }

    @Test func theHTMLHasNoInlineScriptStyleOrHandlerAndNothingFromElsewhere() throws {
        let html = try Repository.read("page/index.html")
        let scripts = html.components(separatedBy: "<script").dropFirst()
        #expect(scripts.count == 1, "one script, app.js")
        for tag in scripts {
            #expect(tag.hasPrefix(#" src="/app.js" defer></script>"#), "an inline or foreign script: \(tag)")
        }
        #expect(!html.contains("<style"), "inline style (the CSP forbids it)")
        #expect(html.range(of: #"\sstyle\s*="#, options: .regularExpression) == nil, "a style attribute")
        #expect(html.range(of: #"\son[a-z]+\s*="#, options: .regularExpression) == nil, "an inline event handler")
        for page in [html, try Repository.read("page/app.css"), try Repository.read("page/app.js")] {
            #expect(page.range(of: #"(https?:)?//[a-z0-9.-]+\.[a-z]{2,}/"#, options: .regularExpression) == nil,
                "a file loads something from another site (no CDN)")
        }
    }
}

/// The page as the agent serves it: the same bytes as page/, with their types and the security headers.
@Suite(.serialized) struct PageServingTests {
    @Test func theAgentServesThePageFilesWithTheirTypesAndTheSecurityHeaders() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            let api = try APIAgent(sandbox: sandbox, home: sandbox.home)
            defer { #expect(api.agent.stop() == 0, "the agent exits cleanly: \(api.agent.log)") }
            let files = [
                ("/", "page/index.html", "text/html; charset=utf-8"),
                ("/app.js", "page/app.js", "text/javascript; charset=utf-8"),
                ("/app.css", "page/app.css", "text/css; charset=utf-8"),
            ]
            for (path, file, type) in files {
                // No credential: the page itself is open (it holds no data), what it reads needs the session.
                let answer = try api.client.send("GET", path)
                #expect(answer.status == 200, "GET \(path): \(answer.status) \(answer.text)")
                #expect(answer.header("Content-Type") == type, "GET \(path): \(answer.headers)")
                // Served from the binary and equal to the file: PageAssets.swift is not stale.
                let stale = "GET \(path) differs from \(file): run scripts/gen-page-assets"
                #expect(answer.text == (try Repository.read(file)), "\(stale)")
                let policy = answer.header("Content-Security-Policy") ?? ""
                #expect(policy.contains("default-src 'self'"), "\(policy)")
                #expect(policy.contains("frame-ancestors 'none'"), "\(policy)")
                #expect(!policy.contains("unsafe-inline") && !policy.contains("unsafe-eval"), "\(policy)")
                #expect(answer.header("X-Content-Type-Options") == "nosniff")
                #expect(answer.header("Referrer-Policy") == "no-referrer")
                #expect(answer.header("Access-Control-Allow-Origin") == nil, "no CORS")
            }
            // Another name for 127.0.0.1 (DNS rebinding) gets no page either.
            let foreign = try api.client.send("GET", "/", headers: [("Host", "evil.example:\(api.client.port)")])
            #expect(foreign.status == 403, "\(foreign.status) \(foreign.text)")
        }
    }

    @Test func openingThePageWithALoginCodeDoesNotSpendIt() throws {
        try withSandbox { sandbox in
            try sandbox.initialize()
            let api = try APIAgent(sandbox: sandbox, home: sandbox.home)
            defer { #expect(api.agent.stop() == 0, "the agent exits cleanly: \(api.agent.log)") }
            let code = try api.loginCode(sandbox)
            // GET changes nothing: the page loads (twice), and the code is still good for the page's POST.
            for _ in 0..<2 {
                let page = try api.client.send("GET", "/?code=\(code)")
                #expect(page.status == 200 && page.text.contains("/app.js"), "\(page.status)")
                #expect(page.header("Set-Cookie") == nil, "GET / set a cookie: \(page.headers)")
            }
            let session = try api.redeem(code)
            #expect(session.status == 200, "\(session.status) \(session.text)")
            #expect(session.header("Set-Cookie")?.contains("HttpOnly") == true, "\(session.headers)")
            #expect(PageSession(session) != nil, "no page key: \(session.text)")
        }
    }
}
