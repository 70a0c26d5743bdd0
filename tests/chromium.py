"""Drive a real headless Chromium over the DevTools protocol on a pipe (no extra package).

``Chromium()`` starts ``chromium --headless --remote-debugging-pipe`` (fd 3: commands in, fd 4:
answers out, each JSON message ended by a NUL byte), attaches to its page, and offers what the
tests and ``bench/bench_viewer.py`` need: ``goto(url)``, ``eval(js)``, ``key(k)``,
``screenshot()``, ``wait_for(js)``, and the page's uncaught exceptions (``errors()``). Nothing
listens on a network port. ``close()`` (or ``with``) ends the browser.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import pytest
from guards import WAIT_GUARD_S

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

#: Marks a test that needs Chromium (skipped without one).
needs_chromium = pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")


def browser_fixture(width: int = 1400, height: int = 900) -> Any:
    """A module-scoped ``browser`` fixture: one headless Chromium (``width`` x ``height``) for
    the tests of a module (``browser = browser_fixture()``); skips without Chromium."""
    @pytest.fixture(scope="module")
    def browser() -> Iterator[Chromium]:
        if CHROMIUM is None:
            pytest.skip("chromium not installed")
        with Chromium(width, height) as c:
            yield c
    return browser


class Chromium:
    """One headless Chromium with one page (``width`` x ``height`` CSS pixels)."""

    def __init__(self, width: int = 1400, height: int = 900) -> None:
        if CHROMIUM is None:
            raise RuntimeError("chromium is not on PATH")
        self.profile = tempfile.mkdtemp(prefix="distviz-chromium-")
        to_r, to_w = os.pipe()      # we write commands -> the browser reads fd 3
        from_r, from_w = os.pipe()  # the browser writes fd 4 -> we read
        # park the child's ends above the low numbers, so dup2 onto 3 and 4 cannot clobber them
        hi_r = fcntl.fcntl(to_r, fcntl.F_DUPFD, 100)
        hi_w = fcntl.fcntl(from_w, fcntl.F_DUPFD, 100)
        os.close(to_r)
        os.close(from_w)

        def child_fds() -> None:
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--hide-scrollbars", f"--user-data-dir={self.profile}", "--remote-debugging-pipe",
             f"--window-size={width},{height}", "about:blank"],
            preexec_fn=child_fds, close_fds=False, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(hi_r)
        os.close(hi_w)
        self.wfd, self.rfd = to_w, from_r
        self.buf = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []
        try:
            targets = self.call("Target.getTargets")["targetInfos"]
            page = next(t for t in targets if t["type"] == "page")
            self.session = self.call("Target.attachToTarget", targetId=page["targetId"],
                                     flatten=True)["sessionId"]
            self.call("Page.enable", session=True)
            self.call("Runtime.enable", session=True)
        except BaseException:
            self.close()
            raise

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the protocol ----------------------------------------------------------------------------
    def _read(self, timeout: float) -> dict[str, Any]:
        end = time.monotonic() + timeout
        while b"\0" not in self.buf:
            left = end - time.monotonic()
            if left <= 0 or not select.select([self.rfd], [], [], left)[0]:
                raise TimeoutError("chromium did not answer in time")
            chunk = os.read(self.rfd, 1 << 20)
            if not chunk:
                raise EOFError("chromium closed the pipe")
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        out: dict[str, Any] = json.loads(raw)
        return out

    def call(self, method: str, session: bool = False, timeout: float = 60,
             **params: Any) -> dict[str, Any]:
        """Send one command and return its result (events that arrive meanwhile are kept)."""
        self.next_id += 1
        msg: dict[str, Any] = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = self.session
        os.write(self.wfd, json.dumps(msg).encode() + b"\0")
        while True:
            m = self._read(timeout)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError(f"{method}: {m['error']}")
                result: dict[str, Any] = m.get("result", {})
                return result
            self.events.append(m)

    def _wait_event(self, method: str, timeout: float) -> dict[str, Any]:
        for k, m in enumerate(self.events):
            if m.get("method") == method:
                return self.events.pop(k)
        end = time.monotonic() + timeout
        while True:
            m = self._read(max(0.01, end - time.monotonic()))
            if m.get("method") == method:
                return m
            self.events.append(m)

    # -- what tests use --------------------------------------------------------------------------
    def goto(self, url: str, timeout: float = 60) -> float:
        """Open ``url`` and wait for its load event; return the seconds it took."""
        t0 = time.perf_counter()
        self.events = [m for m in self.events if m.get("method") != "Page.loadEventFired"]
        self.call("Page.navigate", session=True, url=url)
        self._wait_event("Page.loadEventFired", timeout)
        return time.perf_counter() - t0

    def eval(self, expr: str, timeout: float = 60) -> Any:
        """Evaluate ``expr`` in the page (promises are awaited) and return its JSON value."""
        r = self.call("Runtime.evaluate", session=True, timeout=timeout, expression=expr,
                      awaitPromise=True, returnByValue=True)
        if "exceptionDetails" in r:
            raise RuntimeError(json.dumps(r["exceptionDetails"])[:2000])
        return r["result"].get("value")

    def wait_for(self, expr: str, timeout: float = WAIT_GUARD_S) -> Any:
        """Poll ``expr`` until it is truthy; return its value. Raises ``TimeoutError``."""
        end = time.monotonic() + timeout
        while True:
            v = self.eval(expr)
            if v:
                return v
            if time.monotonic() > end:
                raise TimeoutError(f"{expr} stayed false")
            time.sleep(0.05)

    def key(self, key: str) -> None:
        """Press and release ``key`` (a DOM key value: ``n``, ``ArrowRight``, ``Enter``)."""
        for kind in ("keyDown", "keyUp"):
            self.call("Input.dispatchKeyEvent", session=True, type=kind, key=key,
                      text=key if len(key) == 1 and kind == "keyDown" else "")

    def type_text(self, text: str) -> None:
        """Type ``text`` into the focused element."""
        self.call("Input.insertText", session=True, text=text)

    def screenshot(self) -> bytes:
        """The page as PNG bytes."""
        data = self.call("Page.captureScreenshot", session=True, format="png")["data"]
        return base64.b64decode(data)

    def errors(self) -> list[str]:
        """Uncaught exceptions the page has thrown so far."""
        return [json.dumps(m["params"])[:1000] for m in self.events
                if m.get("method") == "Runtime.exceptionThrown"]

    def close(self) -> None:
        """End the browser (politely, then by force) and remove its profile."""
        try:
            self.call("Browser.close", timeout=5)
        except Exception:  # noqa: BLE001 - already gone or not answering: killed below
            pass
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (getattr(self, "wfd", -1), getattr(self, "rfd", -1)):
            if fd >= 0:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.wfd = self.rfd = -1
        shutil.rmtree(self.profile, ignore_errors=True)
