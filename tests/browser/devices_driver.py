#!/usr/bin/env python3
"""Drives the devices part of plait's page (pending devices, pairing) in a headless Chromium (PageDevicesTests).

Argument: one JSON object:
  devtools_port   the browser's DevTools port (127.0.0.1)
  login_url       what `plait gui` printed
  scenario        "trust" or "pair"
 for "trust":
  device          the Device ID of a device the test makes connect unpaired once this prints {"phase": "signed-in"}
  name            the name that device calls itself (markup): shown as text in the pending list, then (marked
                  unverified) in the paired devices
  item            an item text (with markup) that device holds: the test syncs it once this prints
                  {"phase": "trusted"}, and it must then show on the page, as text
 for "pair":
  refuse_address  HOST:PORT of a `plait pair --listen` to pair with and refuse on the page
  confirm_address HOST:PORT of a second one to pair with and confirm on the page
  peer_name       the name the second one gives itself (markup): shown as text, never parsed
  Then "Search nearby", which must fail saying why: the test's agent reaches no avahi-daemon.
 for "nearby" (the agent and this driver run in a network namespace with an avahi-daemon):
  peer_name       the name of the device the test puts in pairing mode (`plait pair`) once this prints
                  {"phase": "searching"}; it must be listed as text, picked with the keyboard, and confirmed once
                  this prints {"phase": "nearby-code", "code": …} and the test answered yes on that device
  answer          "confirm" (the default) or "refuse": what the page answers to the code

Prints JSON lines on stdout (phases the test waits for; the last line what was seen), and exits 0; or says what
failed on stderr and exits 1. Every wait is a poll for a condition with a deadline.
"""
import json
import sys
import time

from cdp import CDPError, Page
from page_driver import assert_nothing_injected, check, fail_showing_page, item_shown, js


def phase(name: str, **details):
    print(json.dumps(dict(phase=name, **details)), flush=True)


def sign_in(page: Page, login_url: str):
    page.navigate(login_url)
    page.wait_for(
        "document.documentElement.dataset.ready === '1' && location.search === '' && location.pathname === '/'",
        "the page to sign in with the code",
    )


def api_get(page: Page, path: str):
    """What the agent answers to GET `path`, read with the page's own session (what the page would see): its
    cookie, and the page key it keeps in localStorage."""
    return json.loads(
        page.evaluate(
            f"fetch({js(path)}, {{credentials: 'same-origin', "
            "headers: {'Plait-Page-Key': localStorage.getItem('plait-page-key') || ''}}).then(r => r.text())"
        )
    )


def click_and_answer_dialog(page: Page, selector: str, accept: bool) -> dict:
    """Clicks the button and answers the confirm() it opens; the dialog's type and message.

    The click is queued (setTimeout) so that Runtime.evaluate returns: a dialog blocks the page's script until
    Page.handleJavaScriptDialog answers it, and an evaluate that clicked directly would wait for that answer.
    """
    found = page.evaluate(
        f"(() => {{ const b = document.querySelector({js(selector)}); if (!b) return false;"
        " setTimeout(() => b.click(), 0); return true; })()"
    )
    check(found, f"no button {selector} on the page")
    dialog = page.wait_event("Page.javascriptDialogOpening")
    page.send("Page.handleJavaScriptDialog", accept=accept)
    return dialog


def trust(page: Page, options: dict, results: dict):
    device = options["device"]
    card = f"#pending .device-card[data-device={js(device)}]"
    phase("signed-in")
    # The test makes the device connect now: the page learns of it from the event stream, without a reload.
    page.wait_for(f"document.querySelector({js(card)}) !== null", f"the pending device {device} to show", 30)
    check(page.evaluate("document.getElementById('no-pending').hidden"), "'No device is asking' shows beside one")
    claimed = [p["name"] for p in api_get(page, "/api/peers/pending")["pending"] if p["device"] == device]
    check(claimed, f"the agent does not list {device} as pending")
    shown = page.evaluate(f"document.querySelector({js(card + ' .name')}).textContent")
    check(claimed[0] == options["name"], f"the agent lists the pending device as {claimed[0]!r}, not by its name")
    check(shown == claimed[0], f"the pending device's name shows as {shown!r}, not as the text {claimed[0]!r}")
    results["pending_name"] = shown
    assert_nothing_injected(page, "with a pending device")

    # Trust asks first, naming the whole Device ID to compare with `plait id` there. Cancel trusts nothing.
    button = card + " button"
    label = page.evaluate(f"document.querySelector({js(button)}).textContent")
    check(label == "Trust", f"the pending device's button says {label!r}, not Trust")
    dialog = click_and_answer_dialog(page, button, accept=False)
    check(dialog.get("type") == "confirm", f"Trust opened a {dialog.get('type')} dialog, not a confirm")
    check(device in dialog.get("message", ""), f"the confirmation does not name the Device ID: {dialog}")
    results["confirm_message"] = dialog.get("message")
    # A dismissed confirm() returns before the click handler can post anything: this reads after it.
    peers = api_get(page, "/api/peers")["peers"]
    check(peers == [], f"cancelling the confirmation trusted something: {peers}")
    check(page.evaluate(f"document.querySelector({js(card)}) !== null"), "the device left the pending list")

    # Trust, confirmed: the device moves from pending to the paired devices, with no reload.
    click_and_answer_dialog(page, button, accept=True)
    paired = f"#devices .device-card[data-device={js(device)}]"
    page.wait_for(
        f"document.querySelector({js(card)}) === null && document.querySelector({js(paired)}) !== null"
        " && !document.getElementById('no-pending').hidden",
        f"{device} to move from the pending devices to the paired ones",
    )
    peers = [p["device"] for p in api_get(page, "/api/peers")["peers"]]
    check(peers == [device], f"after Trust the agent's paired devices are {peers}")
    # Its name is still only its own claim, and the paired device says so.
    unverified = options["name"] + " (unverified)"
    shown = page.evaluate(f"document.querySelector({js(paired + ' .name')}).textContent")
    check(shown == unverified, f"the trusted device's name shows as {shown!r}, not as the text {unverified!r}")
    assert_nothing_injected(page, "with the trusted device's name")
    check(page.evaluate("document.getElementById('problem').hidden"), "the page shows a problem after Trust")
    phase("trusted")

    # The test syncs the device now: its item reaches the page live.
    page.wait_for(item_shown(options["item"]), f"the trusted device's item {options['item']!r} to show", 30)
    check(page.evaluate("performance.getEntriesByType('navigation').length") == 1, "the page reloaded")
    assert_nothing_injected(page, "after the trusted device's item arrived")


def start_pairing(page: Page, address: str):
    """Types the address into the pairing form and presses Enter, as a person would."""
    focused = page.evaluate(
        "(() => { const input = document.querySelector('#pairing form.pair-address input');"
        " if (!input) return false; input.focus(); return document.activeElement === input; })()"
    )
    check(focused, "no field on the page to pair with a device by its address")
    page.type_text(address)
    page.press_enter()


def six_digits(code: str) -> bool:
    """Whether `code` is 6 digits, grouped by three as both sides show it ("927 062")."""
    digits = code.replace(" ", "")
    return len(digits) == 6 and digits.isdigit() and code in (digits, digits[:3] + " " + digits[3:])


def wait_for_code(page: Page) -> str:
    page.wait_for("document.querySelector('#pairing .pair-code') !== null", "the pairing code to show")
    return page.evaluate("document.querySelector('#pairing .pair-code').textContent")


def confirm_and_see_paired(page: Page, name: str):
    """Clicks Confirm beside the code, then waits for the page to say the devices are paired and to list `name`
    among the devices, as text."""
    confirmed = page.evaluate(
        "(() => { const b = [...document.querySelectorAll('#pairing button')].find(b => b.textContent === "
        "'Confirm'); if (!b || b.disabled) return false; b.click(); return true; })()"
    )
    check(confirmed, "no enabled Confirm button beside the code")
    page.wait_for("document.querySelector('#pairing [data-pairing-state=paired]') !== null",
                  "the page to say the devices are paired", 30)
    page.wait_for(
        "[...document.querySelectorAll('#devices .device-card .name')].some(n => n.textContent === "
        f"{js(name)})",
        f"the newly paired device {name!r} to show among the devices, as text",
    )


def pair(page: Page, options: dict, results: dict):
    # 1. A pairing refused on the page: nothing is trusted, and the page offers to pair again.
    start_pairing(page, options["refuse_address"])
    code = wait_for_code(page)
    check(six_digits(code), f"the pairing code on the page is {code!r}, not 6 digits")
    page.wait_for(
        "(() => { const b = [...document.querySelectorAll('#pairing button')].find(b => b.textContent === "
        "'Confirm'); return b && !b.disabled; })()",
        "the Confirm button to be enabled once the code shows",
    )
    phase("refuse-code", code=code)
    results["refused_code"] = code
    refused = page.evaluate(
        "(() => { const b = [...document.querySelectorAll('#pairing button')].find(b => b.textContent === "
        "'Refuse'); if (!b) return false; b.click(); return true; })()"
    )
    check(refused, "no Refuse button beside the code")
    page.wait_for("document.querySelector('#pairing [data-pairing-state=refused]') !== null",
                  "the page to say the pairing was refused", 30)
    check(page.evaluate("document.querySelector('#pairing .pair-code') === null"), "the refused code still shows")
    peers = api_get(page, "/api/peers")["peers"]
    check(peers == [], f"a refused pairing trusted {peers}")
    check(page.evaluate("document.querySelector('#devices .device-card') === null"), "a device shows as paired")
    phase("refused")

    # Once the attempt ended the page stops asking the agent about it (an idle page costs the agent nothing).
    # This is a measurement over a fixed window, not a wait for anything.
    # Requests are counted by when they started: one already in flight when the window opens (it completes, and
    # is listed, inside it on a loaded machine) is not polling after the end (CI, 2026-11-25).
    since = page.evaluate("performance.now()")
    time.sleep(2.5)
    polled = page.evaluate("performance.getEntriesByType('resource').filter(e => /\\/api\\/pairing$/"
                           f".test(e.name) && e.startTime > {since}).length")
    check(polled == 0, f"the page kept polling /api/pairing after the pairing ended ({polled} in 2.5 s)")

    # 2. A second pairing, confirmed on the page (the other side typed y): both paired, shown without a reload.
    start_pairing(page, options["confirm_address"])
    code = wait_for_code(page)
    check(six_digits(code), f"the second pairing code is {code!r}, not 6 digits")
    results["confirmed_code"] = code
    name = options["peer_name"]
    page.wait_for(
        "[...document.querySelectorAll('#pairing .name')].some(n => n.textContent === " f"{js(name)})",
        f"the other device's name {name!r} shown as text beside the code",
    )
    assert_nothing_injected(page, "with the other device's name beside the code")
    phase("confirm-code", code=code)
    confirm_and_see_paired(page, name)
    check(page.evaluate("performance.getEntriesByType('navigation').length") == 1, "the page reloaded")
    check(page.evaluate("document.getElementById('problem').hidden"), "the page shows a problem after pairing")
    assert_nothing_injected(page, "after pairing with a device whose name has markup")
    # The form is back for the next device.
    check(page.evaluate("document.querySelector('#pairing form.pair-address input') !== null"),
          "after a pairing the page offers no way to pair another device")

    # 3. Searching nearby where no avahi-daemon answers (the test's agent has no D-Bus): the page says why,
    #    and the form is back.
    searched = page.evaluate(
        "(() => { const b = [...document.querySelectorAll('#pairing button')].find(b => b.textContent === "
        "'Search nearby'); if (!b) return false; b.click(); return true; })()"
    )
    check(searched, "no Search nearby button")
    page.wait_for("document.querySelector('#pairing [data-pairing-state=failed]') !== null",
                  "the page to say that searching failed", 30)
    said = page.evaluate("document.getElementById('pairing').innerText")
    check("avahi-daemon" in said, f"the failed search does not say why: {said!r}")
    check(page.evaluate("document.querySelector('#pairing form.pair-address input') !== null"),
          "after a failed search the page offers no way to pair")
    peers = [p["device"] for p in api_get(page, "/api/peers")["peers"]]
    check(len(peers) == 1, f"a failed search changed the paired devices: {peers}")


def nearby(page: Page, options: dict, results: dict):
    # "Search nearby", by keyboard: focus the button, press Enter.
    focused = page.evaluate(
        "(() => { const b = [...document.querySelectorAll('#pairing button')].find(b => b.textContent === "
        "'Search nearby'); if (!b) return false; b.focus(); return document.activeElement === b; })()"
    )
    check(focused, "no Search nearby button to focus")
    page.press_enter()
    page.wait_for("document.querySelector('#pairing [data-pairing-state=searching]') !== null",
                  "the page to say it is searching")
    phase("searching")
    # The device the test put in pairing mode is listed, its name as text, with a button of its own.
    name = options["peer_name"]
    card = ("[...document.querySelectorAll('#pairing .found-devices .device-card')].find(c => "
            f"c.querySelector('.name').textContent === {js(name)})")
    page.wait_for(f"{card} !== undefined", f"{name!r} to be listed among the devices found, as text", 30)
    assert_nothing_injected(page, "with a device found nearby whose name has markup")
    check(page.evaluate("document.querySelector('#pairing .pair-code') === null"), "a code shows before any pick")
    check(page.evaluate("document.querySelector('#pairing [data-pairing-state=searching]') !== null"),
          "the page went ahead without a pick")
    label = page.evaluate(f"{card}.querySelector('button').getAttribute('aria-label')")
    check(label == "Pair with " + name, f"the pick button is labelled {label!r}")
    # Picked by keyboard: focus its button, press Enter.
    focused = page.evaluate(
        f"(() => {{ const b = {card}.querySelector('button'); b.focus(); return document.activeElement === b; }})()"
    )
    check(focused, "the pick button cannot take the focus")
    page.press_enter()
    code = wait_for_code(page)
    check(six_digits(code), f"the pairing code on the page is {code!r}, not 6 digits")
    page.wait_for(
        "[...document.querySelectorAll('#pairing .name')].some(n => n.textContent === " f"{js(name)})",
        f"the picked device's name {name!r} shown as text beside the code",
    )
    phase("nearby-code", code=code)
    results["code"] = code
    if options.get("answer", "confirm") == "refuse":
        refused = page.evaluate(
            "(() => { const b = [...document.querySelectorAll('#pairing button')].find(b => b.textContent === "
            "'Refuse'); if (!b || b.disabled) return false; b.click(); return true; })()"
        )
        check(refused, "no enabled Refuse button beside the code")
        page.wait_for("document.querySelector('#pairing [data-pairing-state=refused]') !== null",
                      "the page to say the pairing was refused", 30)
        check(page.evaluate("document.querySelector('#pairing .pair-code') === null"), "the refused code still shows")
        check(api_get(page, "/api/peers")["peers"] == [], "a refused pairing trusted a device")
        check(page.evaluate("[...document.querySelectorAll('#pairing button')].some(b => b.textContent === "
                            "'Search nearby')"), "after a refusal the page offers no new search")
        assert_nothing_injected(page, "after refusing a device found nearby")
        return
    confirm_and_see_paired(page, name)
    assert_nothing_injected(page, "after pairing with a device found nearby")


def main():
    options = json.loads(sys.argv[1])
    page = Page(options["devtools_port"])
    results = {}
    try:
        started = time.monotonic()
        sign_in(page, options["login_url"])
        if options["scenario"] == "trust":
            trust(page, options, results)
        elif options["scenario"] == "pair":
            pair(page, options, results)
        elif options["scenario"] == "nearby":
            nearby(page, options, results)
        else:
            raise CDPError(f"unknown scenario {options['scenario']!r}")
        results["driver_ms"] = round((time.monotonic() - started) * 1000, 1)
    except CDPError as error:
        fail_showing_page(page, "devices driver", error)
    finally:
        page.close()
    print(json.dumps(results))


if __name__ == "__main__":
    main()
