#!/usr/bin/env python3
"""Drives plait's page in a headless Chromium that the Swift test started (PageBrowserTests).

Argument: one JSON object:
  devtools_port   the browser's DevTools port (127.0.0.1)
  login_url       what `plait gui` printed
  list            the title of a list the page must show, where it adds items
  peer_item       an item text with markup that a peer added (already synced here): must show as text
  peer_name       the peer's device name with markup: must show as text in the devices
  page_items      texts to add on the page, in that order (markup among them)
  done_item       one of page_items to mark done with the keyboard
  live_item       a text the test adds on the peer after it sees page_items there: must appear without a reload
  idle_seconds    at the end, how long to keep the page open and idle (the test measures the agent's CPU then,
                  between the line {"phase": "idle"} this prints and the driver's exit)

Prints JSON lines on stdout, the last one the measurements, and exits 0; or says what failed on stderr and exits 1.
Every wait is a poll for a condition with a deadline (the idle phase is the measured interval, not a wait).
"""
import http.server
import json
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

from cdp import CDPError, Page

# Set by injected markup if it ever runs; the page never defines it.
PWNED = "window.__plaitPwned"


def js(value) -> str:
    """A JavaScript literal for a Python string (JSON is valid JavaScript)."""
    return json.dumps(value)


def item_shown(text: str) -> str:
    """An expression: whether an item span's textContent is exactly `text` (the data, not parsed markup)."""
    return f"[...document.querySelectorAll('#lists .item .text')].some(n => n.textContent === {js(text)})"


def check(condition, message: str):
    if not condition:
        raise CDPError(message)


def injected_elements(page: Page):
    """Elements markup from the data would have created: any img, or any script but app.js; and the flag."""
    return page.evaluate(
        "JSON.stringify({images: document.querySelectorAll('img, svg, iframe, object').length, "
        "scripts: [...document.scripts].map(s => s.getAttribute('src')), "
        f"pwned: typeof {PWNED} === 'undefined' ? null : String({PWNED})}})"
    )


def assert_nothing_injected(page: Page, when: str):
    found = json.loads(injected_elements(page))
    check(found["images"] == 0, f"{when}: markup from the data created {found['images']} element(s)")
    check(found["scripts"] == ["/app.js"], f"{when}: the document's scripts are {found['scripts']}, not only app.js")
    check(found["pwned"] is None, f"{when}: injected script ran (window.__plaitPwned = {found['pwned']})")


def add_on_page(page: Page, list_title: str, text: str):
    """Types `text` into the list's "add an item" field and presses Enter, as a person would."""
    focused = page.evaluate(
        "(() => { const list = [...document.querySelectorAll('#lists .list')]"
        f".find(l => l.querySelector('.title') && l.querySelector('.title').textContent === {js(list_title)});"
        " if (!list) return false; const input = list.querySelector('.add-item input');"
        " input.focus(); return document.activeElement === input; })()"
    )
    check(focused, f"no add field for list {list_title!r} on the page")
    page.type_text(text)
    page.press_enter()


class OtherServer:
    """A server of another local user on another port of 127.0.0.1, which the signed-in user visits: it records the
    Cookie headers the browser sends it (browsers send a host's cookies to every port of it)."""

    def __init__(self):
        received = self.cookies = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                received.append(self.headers.get("Cookie") or "")
                body = b"<!doctype html><title>another server</title><p>another server"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def agent_status(base: str, path: str, headers: dict) -> int:
    """The status the agent answers to GET `path` with `headers`, sent from this process (not the browser)."""
    request = urllib.request.Request(base + path, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status
    except urllib.error.HTTPError as error:
        return error.code


def fail_showing_page(page, driver, error):
    """Says on stderr what failed and what the page showed then (its first 3,000 characters), and exits 1."""
    sys.stderr.write(f"{driver}: {error}\n")
    try:
        body = page.evaluate("document.body ? document.body.innerText.slice(0, 3000) : ''")
        sys.stderr.write("the page showed:\n" + str(body) + "\n")
    except CDPError:
        pass
    sys.exit(1)


def main():
    options = json.loads(sys.argv[1])
    page = Page(options["devtools_port"])
    results = {}
    try:
        # A phone-sized window: the page must be readable there (no sideways scrolling).
        page.send(
            "Emulation.setDeviceMetricsOverride", width=390, height=844, deviceScaleFactor=2, mobile=True
        )

        # 1. The login URL: the page trades the code for a cookie and reloads at "/" with the lists.
        started = time.monotonic()
        page.navigate(options["login_url"])
        page.wait_for(
            "document.documentElement.dataset.ready === '1' && location.search === '' && location.pathname === '/'",
            "the page to sign in with the code and show the lists",
        )
        results["login_to_lists_ms"] = round((time.monotonic() - started) * 1000, 1)
        timing = json.loads(
            page.evaluate(
                "JSON.stringify({ready: performance.getEntriesByName('plait-ready')[0].startTime, "
                "nav: performance.getEntriesByType('navigation')[0].toJSON()})"
            )
        )
        results["first_load_ready_ms"] = round(timing["ready"], 1)
        results["first_load_response_end_ms"] = round(timing["nav"]["responseEnd"], 1)
        results["first_load_dom_content_loaded_ms"] = round(timing["nav"]["domContentLoadedEventEnd"], 1)
        href = page.evaluate("location.href")
        check("code=" not in href, f"the login code stayed in the address bar: {href}")
        # The session: an HttpOnly cookie no script reads, and the page key in localStorage. The event stream is
        # an EventSource with the key in its query ("Live"; "Live (polling)" would mean the stream was refused).
        check(page.evaluate("!!localStorage.getItem('plait-page-key')"), "the page kept no page key")
        check("plait-session" not in page.evaluate("document.cookie"), "a script can read the session cookie")
        page.wait_for(
            "document.getElementById('connection').textContent === 'Live'", "the event stream to open with the key"
        )
        cookie_only = page.evaluate("fetch('/api/show', {credentials: 'same-origin'}).then(r => r.status)")
        check(cookie_only == 401, f"a fetch with the cookie and without the page key got {cookie_only}, not 401")
        history = page.evaluate("history.length")
        results["history_length"] = history

        # 2. The lists, and a peer's item with markup shown as its text.
        titles = page.evaluate("[...document.querySelectorAll('#lists .list .title')].map(n => n.textContent)")
        check(options["list"] in titles, f"the page shows lists {titles}, not {options['list']!r}")
        peer_item = options["peer_item"]
        check(page.evaluate(item_shown(peer_item)), f"the peer's item {peer_item!r} is not shown as text")
        assert_nothing_injected(page, "after loading a peer's item with markup")

        # 3. The peer's device name with markup, shown as text, and its state.
        page.wait_for(
            "[...document.querySelectorAll('#devices .name')].some(n => n.textContent === "
            f"{js(options['peer_name'])})",
            f"the peer's device name {options['peer_name']!r} shown as text",
        )
        results["peer_state"] = page.evaluate("document.querySelector('#devices .state').textContent")
        assert_nothing_injected(page, "after showing a peer's name with markup")

        # 4. Items added on the page, with the keyboard; they come back through the agent and the event stream.
        for text in options["page_items"]:
            added = time.monotonic()
            add_on_page(page, options["list"], text)
            page.wait_for(item_shown(text), f"the item {text!r} added on the page to show")
            results.setdefault("add_to_shown_ms", []).append(round((time.monotonic() - added) * 1000, 1))
        field_empty = page.evaluate(
            "[...document.querySelectorAll('#lists .add-item input')].every(i => i.value === '')"
        )
        check(field_empty, "the add field kept the text after the item was added")
        assert_nothing_injected(page, "after adding items with markup on the page")
        exact = page.evaluate(
            "[...document.querySelectorAll('#lists .item .text')].map(n => n.textContent)"
        )
        for text in options["page_items"]:
            check(exact.count(text) == 1, f"{text!r} shows {exact.count(text)} times among {exact}")

        # 5. Keyboard: Tab from the add field reaches a real button, with a visible focus ring; Enter on an
        #    item's Done button marks it done.
        page.evaluate("document.querySelector('#lists .add-item input').focus()")
        page.press_tab()
        focus = json.loads(
            page.evaluate(
                "JSON.stringify({tag: document.activeElement.tagName, visible: document.activeElement"
                ".matches(':focus-visible'), outline: getComputedStyle(document.activeElement).outlineStyle})"
            )
        )
        check(focus["tag"] == "BUTTON", f"Tab from the add field went to {focus['tag']}, not a button")
        check(focus["visible"] and focus["outline"] != "none", f"the keyboard focus is not visible: {focus}")
        done = options["done_item"]
        focused = page.evaluate(
            "(() => { const item = [...document.querySelectorAll('#lists .pending .item')]"
            f".find(li => li.querySelector('.text').textContent === {js(done)});"
            " if (!item) return false; const b = item.querySelector('button'); b.focus();"
            " return document.activeElement === b && b.textContent === 'Done'; })()"
        )
        check(focused, f"no Done button to focus for {done!r}")
        page.press_enter()
        page.wait_for(
            "[...document.querySelectorAll('#lists .item.done .text')]"
            f".some(n => n.textContent === {js(done)})",
            f"{done!r} to show as done",
        )

        # 6. Readable on a phone: nothing wider than the window.
        widths = json.loads(
            page.evaluate(
                "JSON.stringify({scroll: document.documentElement.scrollWidth, "
                "client: document.documentElement.clientWidth})"
            )
        )
        check(widths["scroll"] <= widths["client"], f"the page scrolls sideways on a phone: {widths}")

        # 7. Live: the test adds an item on the peer once our items arrived there; it appears here unasked.
        live_wait = time.monotonic()
        live = options["live_item"]
        page.wait_for(item_shown(live), f"the peer's item {live!r} to arrive live", 60)
        results["live_item_wait_ms"] = round((time.monotonic() - live_wait) * 1000, 1)
        navigations = page.evaluate("performance.getEntriesByType('navigation').length")
        check(navigations == 1, "the page reloaded instead of updating live")
        assert_nothing_injected(page, "at the end")

        # 8. A second load with the session cookie (what a bookmark costs).
        started = time.monotonic()
        page.send("Page.reload", ignoreCache=True)
        page.wait_for(
            "document.documentElement.dataset.ready === '1' && performance.getEntriesByName('plait-ready').length",
            "the page to load again with its session",
        )
        results["reload_to_lists_ms"] = round((time.monotonic() - started) * 1000, 1)
        results["reload_ready_ms"] = round(
            page.evaluate("performance.getEntriesByName('plait-ready')[0].startTime"), 1
        )

        # 9. The finding this guards against: another local user's server on another port of 127.0.0.1, visited
        #    in another tab, receives the session cookie but not the page key (localStorage is per origin, and
        #    the port is part of the origin); replaying the cookie to the agent from its own process gets 401.
        other = OtherServer()
        try:
            tab = Page(options["devtools_port"])
            try:
                tab.navigate(f"http://127.0.0.1:{other.port}/")
                tab.wait_for(
                    f"location.port === '{other.port}' && document.readyState === 'complete'",
                    "the other server's page to load",
                )
                stored_there = tab.evaluate("localStorage.getItem('plait-page-key')")
            finally:
                tab.close()
        finally:
            other.stop()
        check(stored_there is None, f"the page key is readable on another port: {stored_there!r}")
        pairs = [p.strip() for c in other.cookies for p in c.split(";") if p.strip().startswith("plait-session-")]
        check(pairs, f"the browser sent no session cookie to the other port (received {other.cookies}), "
              "so this step reproduces nothing")
        login = urllib.parse.urlsplit(options["login_url"])
        base = f"{login.scheme}://{login.netloc}"
        leaked = agent_status(base, "/api/show", {"Cookie": pairs[0]})
        check(leaked == 401, f"the cookie the other server received was accepted alone: {leaked}")
        key = page.evaluate("localStorage.getItem('plait-page-key')")
        with_key = agent_status(base, "/api/show", {"Cookie": pairs[0], "Plait-Page-Key": key})
        check(with_key == 200, f"the cookie with the page's key got {with_key}, not 200")
        results["leaked_cookie_alone"] = leaked

        # 10. Idle with the page open (its event stream connected): the test reads the agent's CPU meanwhile.
        # "Live": the event stream (or long-poll); "Refreshing every 3 s": the agent has no event endpoint.
        following = "/^(Live|Refreshing)/.test(document.getElementById('connection').textContent)"
        page.wait_for(following, "the page to follow the agent again after the reload")
        results["updates_by"] = page.evaluate("document.getElementById('connection').textContent")
        print(json.dumps({"phase": "idle"}), flush=True)
        time.sleep(float(options.get("idle_seconds", 0)))
        check(page.evaluate(following), "after the idle time the page no longer follows the agent")
        assert_nothing_injected(page, "after the idle time")
    except CDPError as error:
        fail_showing_page(page, "page driver", error)
    finally:
        page.close()
    print(json.dumps(results))


if __name__ == "__main__":
    main()
