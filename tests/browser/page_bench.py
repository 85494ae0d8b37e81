#!/usr/bin/env python3
"""Measures the page in a headless Chromium that `plait bench --page-only` started (PageBench.swift).

Argument: one JSON object:
  devtools_port   the browser's DevTools port (127.0.0.1)
  login_url       what `plait gui` printed (signs the browser in once; the session cookie
                  and the page key in localStorage serve every load)
  page_url        the page's address without a code
  items           how many items the home holds: a load ends when the page shows all of them
  loads           first loads per run, each in a fresh tab with the browser's cache disabled
  runs            how many runs (loads, then an idle window)
  idle_seconds    per run, how long the last loaded tab stays open and idle while the agent's CPU is read
  agent_pid       the agent's process ID (its CPU time is read from /proc/PID/stat, fields 14 and 15)

A load is timed in the page's own clock (performance.now(): milliseconds since navigation start) by the mark the
page sets once it has drawn the lists (`plait-ready`, in app.js), with the navigation timing entry's
responseEnd, DOMContentLoaded and load event beside it.

Prints one JSON line on stdout: {"loads": [[ready, response_end, dom_content_loaded, load_event], ...] per run,
"idle_percent": [% of one core per run], "idle_seconds": [wall seconds per window]}; exits 0. Or says what
failed on stderr and exits 1.
"""
import json
import os
import sys
import time

from cdp import CDPError, Page


def cpu_ticks(pid: int) -> int:
    """User plus system CPU time of `pid` so far, in clock ticks."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        text = stat.read()
    fields = text[text.rindex(")") + 2 :].split(" ")
    return int(fields[11]) + int(fields[12])


def ready_expression(items: int) -> str:
    return (
        "document.documentElement.dataset.ready === '1' && "
        f"document.querySelectorAll('#lists .item').length >= {items}"
    )


def fresh_load(options) -> Page:
    """A new tab, no cache, the page loaded until its lists show; returns the tab (still open)."""
    page = Page(options["devtools_port"], timeout=30)
    page.send("Network.enable")
    page.send("Network.setCacheDisabled", cacheDisabled=True)
    page.navigate(options["page_url"])
    page.wait_for(ready_expression(options["items"]), "the page to show its lists", timeout=30)
    return page


def timing(page: Page):
    return json.loads(
        page.evaluate(
            "JSON.stringify((() => { const n = performance.getEntriesByType('navigation')[0];"
            " const r = performance.getEntriesByName('plait-ready')[0];"
            " return [r ? r.startTime : null, n.responseEnd, n.domContentLoadedEventEnd, n.loadEventEnd]; })())"
        )
    )


def main():
    options = json.loads(sys.argv[1])
    ticks_per_second = os.sysconf("SC_CLK_TCK")
    # Sign in once: the code is single-use; the cookie and the page key it gives stay in the browser's profile.
    login = Page(options["devtools_port"], timeout=30)
    login.navigate(options["login_url"])
    login.wait_for(ready_expression(options["items"]), "the signed-in page to show its lists", timeout=30)
    login.close()

    result = {"loads": [], "idle_percent": [], "idle_seconds": []}
    for _ in range(options["runs"]):
        loads = []
        page = None
        for index in range(options["loads"]):
            if page is not None:
                page.close()
            page = fresh_load(options)
            figures = timing(page)
            if figures[0] is None:
                raise CDPError("the page set no plait-ready mark")
            loads.append(figures)
        result["loads"].append(loads)
        # The last tab stays open with its event stream: the agent's CPU over the window.
        start = (time.monotonic(), cpu_ticks(options["agent_pid"]))
        time.sleep(options["idle_seconds"])  # the measured interval, not a wait for something
        end = (time.monotonic(), cpu_ticks(options["agent_pid"]))
        live = page.evaluate("(document.querySelector('#connection') || {}).textContent")
        page.close()
        wall = end[0] - start[0]
        result["idle_seconds"].append(wall)
        result["idle_percent"].append((end[1] - start[1]) / ticks_per_second / wall * 100)
        result.setdefault("connection", []).append(live)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    try:
        main()
    except (CDPError, OSError, ValueError, KeyError) as error:
        sys.stderr.write(f"page_bench: {error}\n")
        sys.exit(1)
