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
import json
import sys
import time

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

        # 9. Idle with the page open (its event stream connected): the test reads the agent's CPU meanwhile.
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
