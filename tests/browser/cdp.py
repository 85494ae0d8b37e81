"""A small Chrome DevTools Protocol client over websocket-client (PyPI), enough to drive one page.

Only loopback: the browser's DevTools endpoint is on 127.0.0.1, given by the test that started it.
"""
import json
import time
import urllib.request

import websocket  # websocket-client


class CDPError(Exception):
    """The browser answered a command with an error, or did not answer in time."""


class Page:
    """One page target: send commands, wait for events, evaluate JavaScript."""

    def __init__(self, devtools_port: int, timeout: float = 20.0):
        self.timeout = timeout
        base = f"http://127.0.0.1:{devtools_port}"
        # A fresh tab of our own rather than whatever the browser opened first.
        request = urllib.request.Request(base + "/json/new?about:blank", method="PUT")
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            target = json.load(answer)
        self.target_id = target["id"]
        self.socket = websocket.create_connection(
            target["webSocketDebuggerUrl"], timeout=timeout, suppress_origin=True
        )
        self.base = base
        self.next_id = 0
        self.events = []  # events received while waiting for an answer, oldest first

    def close(self):
        """Closes the tab (its event stream holds one of the browser's six connections to the agent's port)."""
        try:
            self.socket.close()
            with urllib.request.urlopen(f"{self.base}/json/close/{self.target_id}", timeout=5):
                pass
        except Exception:  # noqa: BLE001 - closing is best effort; the test kills the browser anyway
            pass

    def _receive(self, deadline: float) -> dict:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise CDPError("the browser did not answer in time")
        self.socket.settimeout(remaining)
        try:
            return json.loads(self.socket.recv())
        except websocket.WebSocketTimeoutException as error:
            raise CDPError("the browser did not answer in time") from error

    def send(self, method: str, **params):
        self.next_id += 1
        ident = self.next_id
        self.socket.send(json.dumps({"id": ident, "method": method, "params": params}))
        deadline = time.monotonic() + self.timeout
        while True:
            message = self._receive(deadline)
            if message.get("id") == ident:
                if "error" in message:
                    raise CDPError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def wait_event(self, method: str, timeout: float = None):
        """The first event named `method` since the last call (earlier ones are dropped)."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            while self.events:
                event = self.events.pop(0)
                if event["method"] == method:
                    return event.get("params", {})
            message = self._receive(deadline)
            if "method" in message:
                self.events.append(message)

    def evaluate(self, expression: str):
        """The JSON value of `expression` (awaited if it is a promise); a thrown exception becomes CDPError."""
        result = self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            text = details.get("exception", {}).get("description") or details.get("text")
            raise CDPError(f"evaluating {expression[:80]!r}: {text}")
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, what: str, timeout: float = None):
        """Evaluates `expression` every 20 ms until it is truthy; returns its value, or fails saying `what`."""
        deadline = time.monotonic() + (timeout or self.timeout)
        last_error = None
        while time.monotonic() < deadline:
            try:
                value = self.evaluate(expression)
                if value:
                    return value
            except CDPError as error:  # the page may be between two documents
                last_error = error
            time.sleep(0.02)
        raise CDPError(f"timed out waiting for {what}" + (f" (last error: {last_error})" if last_error else ""))

    def navigate(self, url: str):
        self.send("Page.enable")
        self.send("Page.navigate", url=url)

    def type_text(self, text: str):
        """Types `text` into the focused element as a keyboard would insert it."""
        self.send("Input.insertText", text=text)

    def press_enter(self):
        key = dict(key="Enter", code="Enter", windowsVirtualKeyCode=13, nativeVirtualKeyCode=13)
        self.send("Input.dispatchKeyEvent", type="keyDown", text="\r", **key)
        self.send("Input.dispatchKeyEvent", type="keyUp", **key)

    def press_tab(self, shift: bool = False):
        for kind in ("rawKeyDown", "keyUp"):
            self.send(
                "Input.dispatchKeyEvent",
                type=kind,
                key="Tab",
                code="Tab",
                windowsVirtualKeyCode=9,
                nativeVirtualKeyCode=9,
                modifiers=8 if shift else 0,
            )
