"""A real terminal pane (tmux) driving the step-through viewer."""

from __future__ import annotations

import os
import re
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from guards import WAIT_GUARD_S

REPO = Path(__file__).resolve().parents[2]


def keys(*names: str) -> Callable[[], str]:
    it: Iterator[str] = iter(names)
    return lambda: next(it, "q")


class Pane:
    """A tmux session running one command in a fixed-size pane, on a tmux server of its own.

    A private server (``tmux -L``) matters: a session added to an already running server takes
    that server's environment, so the command could import another checkout's distviz.
    """

    def __init__(self, command: str, width: int = 120, height: int = 50) -> None:
        self.name = f"distviz-test-{uuid.uuid4().hex[:8]}"
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        env.pop("NO_COLOR", None)
        subprocess.run([*self._tmux, "new-session", "-d", "-s", self.name, "-x", str(width),
                        "-y", str(height), command], check=True, env=env, cwd=REPO)

    @property
    def _tmux(self) -> list[str]:
        return ["tmux", "-L", self.name]

    def send(self, *keys: str) -> None:
        subprocess.run([*self._tmux, "send-keys", "-t", self.name, *keys], check=True)

    def screen(self) -> str:
        return subprocess.run([*self._tmux, "capture-pane", "-p", "-t", self.name],
                              capture_output=True, text=True, check=True).stdout

    def wait_for(self, pattern: str, timeout: float = WAIT_GUARD_S) -> str:
        """The screen once ``pattern`` is on it and two captures in a row are the same: the
        line that matches may be drawn before the rest of the screen is."""
        deadline = time.monotonic() + timeout
        text, before = "", None
        while time.monotonic() < deadline:
            text = self.screen()
            if text == before and re.search(pattern, text):
                return text
            before = text
            time.sleep(0.05)
        raise AssertionError(f"{pattern!r} never appeared; screen:\n{text}")

    def close(self) -> None:
        subprocess.run([*self._tmux, "kill-server"], capture_output=True)
