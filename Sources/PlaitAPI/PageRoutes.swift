// The page (DESIGN §12): GET /, /app.js and /app.css, from the strings scripts/gen-page-assets compiled in
// (PageAssets.swift; why strings and not a resource bundle: see that script).
//
// The page is open to every client that passes the Host rule: it holds no data (it reads everything through
// /api with its session) and GET / changes nothing — the login code in `/?code=` is traded by the page's own
// POST /api/session. APIGuard adds the security headers to these answers as to every other (the CSP's
// `default-src 'self'` is what makes the page's one rule hold: no inline script, no script from elsewhere).
import Hummingbird

extension APIRoutes {
    /// The three files of the page, with their types. `no-cache`: a browser revalidates, so a newer binary's
    /// page is what it runs after the agent is upgraded.
    static func addPageRoutes(to router: Router<APIRequestContext>, context: APIContext) {
        for file in PageFile.all {
            router.get(RouterPath(file.path)) { _, _ in file.response() }
        }
    }
}

/// One file of the page, encoded once.
struct PageFile: Sendable {
    let path: String
    let contentType: String
    let body: ByteBuffer

    static let all: [PageFile] = [
        PageFile(path: "/", contentType: "text/html; charset=utf-8", text: PageAssets.html),
        PageFile(path: "/app.js", contentType: "text/javascript; charset=utf-8", text: PageAssets.script),
        PageFile(path: "/app.css", contentType: "text/css; charset=utf-8", text: PageAssets.css),
    ]

    init(path: String, contentType: String, text: String) {
        self.path = path
        self.contentType = contentType
        self.body = ByteBuffer(string: text)
    }

    func response() -> Response {
        Response(
            status: .ok,
            headers: [.contentType: contentType, .cacheControl: "no-cache"],
            body: ResponseBody(byteBuffer: body))
    }
}
