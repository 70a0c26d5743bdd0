"""Interactive step-through of a FAST-mode replay in the terminal (rich ``Live``, single keys).

This and the CLI are the only modules that print or read keys. The screen is
``render_state`` (``distviz.render.terminal``) plus a footer that lists the keys. Stepping back
asks the replay for the state at that step (``Replay.state_at``), so every screen shows the
correct state whichever way it was reached.

Keys (pdb/pudb habits; the footer shows them):

==============================  =========================================================
``n`` ``→`` Space Enter          next event
``p`` ``←``                      previous event
``<`` ``>``                      choose the worker in focus (marked ``▶``)
``w``                            next event on the worker in focus
``m``                            next message event (send or receive a gradient)
``g`` digits Enter               go to step N (Esc cancels, Backspace edits)
``G`` ``e`` End                  run to the end
``0`` Home                       first event
``?``                            help on/off
``q`` Esc Ctrl-C Ctrl-D          quit
==============================  =========================================================

Run ``python -m distviz.render.stepper TRACE.json`` to step through a saved trace without the
CLI (it prints the log instead when stdout is not a terminal).
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
from collections.abc import Callable, Iterator
from typing import IO, Any

from rich.console import Console, Group, RenderableType
from rich.layout import Layout
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from distviz.judge.findings import Agreement
from distviz.limits import ExitCode
from distviz.outcome import Mode
from distviz.render.terminal import render_log, render_state
from distviz.replay.values import ReplayLike
from distviz.trace import Trace
from distviz.words import NOTATION

__all__ = ["KEYS", "Stepper", "decode_key", "split_keys", "step_through", "terminal_keys"]

#: (keys, action) pairs shown in the help screen, in order.
KEYS: list[tuple[str, str]] = [
    ("n  →  Space  Enter", "next event"),
    ("p  ←", "previous event"),
    ("<  >", "choose the worker in focus (▶)"),
    ("w", "next event on the worker in focus"),
    ("m", "next message event (send / receive a gradient)"),
    ("g N Enter", "go to step N (Esc cancels)"),
    ("G  e  End", "run to the end"),
    ("0  Home", "first event"),
    ("?", "help on / off"),
    ("q  Esc  Ctrl-C", "quit"),
]
_FOOTER = ("n/→ next  p/← back  </> focus  w next on focus  m next message  g N⏎ go to  "
           "G end  ? help  q quit")
_MESSAGE_ACTIONS = ("send_gradient", "receive_gradient")


class Stepper:
    """The step-through state machine, without any terminal: feed it key names, read frames.

    Key names are those ``decode_key`` returns: single characters (``"n"``, ``"G"``, ``"3"``),
    and ``"right"``, ``"left"``, ``"up"``, ``"down"``, ``"home"``, ``"end"``, ``"enter"``,
    ``"space"``, ``"backspace"``, ``"esc"``, ``"ctrl-c"``, ``"ctrl-d"``.
    """

    def __init__(self, trace: Trace, replay: ReplayLike,
                 agreement: Agreement | None = None) -> None:
        self.trace = trace
        self.replay = replay
        self.agreement = agreement
        self.last = len(replay.events) - 1
        self.step = 0 if self.last >= 0 else -1
        self.focus = trace.initiator
        self.typed: str | None = None   # digits typed after ``g``; None when not typing
        self.message = ""               # one-line feedback (``no later event on worker1``)
        self.help = False

    # -- keys -------------------------------------------------------------------------------
    def handle(self, key: str) -> bool:
        """Apply one key; return False when the key quits."""
        self.message = ""
        if self.typed is not None:
            if key.isdigit() and len(key) == 1:
                self.typed += key
                return True
            if key == "backspace":
                self.typed = self.typed[:-1]
                return True
            if key == "enter":
                self._goto(self.typed)
                self.typed = None
                return True
            self.typed = None
            if key == "esc":
                self.message = "go to cancelled"
                return True
        if key in ("q", "esc", "ctrl-c", "ctrl-d"):
            return False
        if key in ("n", "right", "space", "enter", "down"):
            if self.step < self.last:
                self.step += 1
            else:
                self.message = f"at the last step ({self.replay.outcome})"
        elif key in ("p", "left", "up"):
            if self.step > -1:
                self.step -= 1
            else:
                self.message = "already before the first event"
        elif key in ("G", "e", "end"):
            self.step = self.last
        elif key in ("0", "home"):
            self.step = 0 if self.last >= 0 else -1
        elif key in ("<", ">"):
            workers = self.trace.workers
            i = workers.index(self.focus) if self.focus in workers else 0
            self.focus = workers[(i + (1 if key == ">" else -1)) % len(workers)]
            self.message = f"focus on {self.focus}; w jumps to its next event"
        elif key == "w":
            self._jump(lambda ev: ev.worker == self.focus, f"event on {self.focus}")
        elif key == "m":
            self._jump(lambda ev: ev.action in _MESSAGE_ACTIONS, "message event")
        elif key == "g":
            self.typed = ""
        elif key == "?":
            self.help = not self.help
        else:
            self.message = f"unknown key {key!r}; press ? for help"
        return True

    def _jump(self, match: Callable[[Any], bool], what: str) -> None:
        events = self.replay.events
        for i in range(self.step + 1, self.last + 1):
            if match(events[i]):
                self.step = i
                return
        self.message = f"no later {what}"

    def _goto(self, typed: str) -> None:
        if not typed:
            self.message = "go to: type a step number, then Enter"
            return
        n = int(typed)
        if n > self.last:
            self.message = f"step {n} is past the end (last step {self.last})"
            n = self.last
        self.step = n

    # -- screen -----------------------------------------------------------------------------
    def footer(self) -> Text:
        """Return the two footer lines: the prompt or feedback, then the keys."""
        line = Text()
        if self.typed is not None:
            line.append(f"go to step: {self.typed}▏", style="bold reverse")
            line.append("  (Enter to go, Esc to cancel)", style="dim")
        elif self.message:
            line.append(self.message, style="yellow")
        line.append("\n")
        line.append(_FOOTER, style="dim")
        return line

    def body(self) -> RenderableType:
        """Return the main view: the state after the current step, or the help screen."""
        if self.help:
            table = Table.grid(padding=(0, 2))
            table.add_column(style="bold", no_wrap=True)
            table.add_column()
            for keys, action in KEYS:
                table.add_row(keys, action)
            notation = Table.grid(padding=(0, 2))
            notation.add_column(style="bold", no_wrap=True)
            notation.add_column()
            for shown, meaning in NOTATION:
                notation.add_row(shown, meaning)
            return Group(Panel(table, title="keys", title_align="left"),
                         Panel(notation, title="notation", title_align="left"))
        max_items = 8 if len(self.trace.workers) <= 4 else 4
        return render_state(self.trace, self.replay, self.step, focus=self.focus,
                            max_items=max_items)

    def frame(self, full_screen: bool = False) -> RenderableType:
        """Return the whole screen. ``full_screen`` pins the footer to the bottom (Layout)."""
        if not full_screen:
            return Group(self.body(), self.footer())
        layout = Layout()
        layout.split_column(Layout(self.body(), name="body"),
                            Layout(self.footer(), name="footer", size=3))
        return layout


# -- raw keys --------------------------------------------------------------------------------

_ESCAPES = {
    "[A": "up", "[B": "down", "[C": "right", "[D": "left",
    "OA": "up", "OB": "down", "OC": "right", "OD": "left",
    "[H": "home", "OH": "home", "[1~": "home", "[7~": "home",
    "[F": "end", "OF": "end", "[4~": "end", "[8~": "end",
}
_CONTROL = {"\r": "enter", "\n": "enter", " ": "space", "\x03": "ctrl-c", "\x04": "ctrl-d",
            "\x7f": "backspace", "\x08": "backspace", "\x1b": "esc"}


def decode_key(data: str) -> str:
    """Return the key name for what one key press wrote (``"\\x1b[C"`` -> ``"right"``).

    Unknown escape sequences give ``"esc"``; printable characters are returned as they are.
    """
    if data.startswith("\x1b") and len(data) > 1:
        return _ESCAPES.get(data[1:], "esc")
    if data in _CONTROL:
        return _CONTROL[data]
    return data[:1] if data else "esc"


def split_keys(data: bytes) -> tuple[list[str], bytes]:
    """Split bytes read from a terminal into one string per key press.

    Returns ``(keys, rest)``: ``rest`` is an incomplete escape sequence or UTF-8 character at
    the end, to be completed by the next read. ``ESC [ params final`` and ``ESC O x`` are one key
    each; several keys arriving in one read (fast typing, ``tmux send-keys Right Right``) are
    split correctly. A lone ``ESC`` at the very end is left in ``rest`` (it may be the start of a
    sequence; the caller decides after a short wait).
    """
    keys: list[str] = []
    i = 0
    n = len(data)
    while i < n:
        b = data[i]
        if b == 0x1B:
            if i + 1 >= n:
                break                                    # maybe the start of a sequence
            nxt = data[i + 1]
            if nxt == ord("["):
                j = i + 2
                while j < n and not (0x40 <= data[j] <= 0x7E):
                    j += 1
                if j >= n:
                    break                                # incomplete CSI sequence
                keys.append(data[i:j + 1].decode("ascii", errors="replace"))
                i = j + 1
            elif nxt == ord("O"):
                if i + 2 >= n:
                    break
                keys.append(data[i:i + 3].decode("ascii", errors="replace"))
                i += 3
            else:
                keys.append("\x1b")                      # Esc (or Alt+key: Esc, then the key)
                i += 1
            continue
        size = 1 if b < 0xC0 else 2 if b < 0xE0 else 3 if b < 0xF0 else 4
        if i + size > n:
            break                                        # incomplete UTF-8 character
        keys.append(data[i:i + size].decode("utf-8", errors="replace"))
        i += size
    return keys, data[i:]


@contextlib.contextmanager
def terminal_keys(stream: IO[str] | None = None) -> Iterator[Callable[[], str]]:
    """Put the terminal in cbreak mode and yield a function that reads one key name.

    Reads from ``stream`` when given, else ``/dev/tty`` (else stdin). The terminal mode is
    restored on exit, whatever happens. An Escape alone is told from an arrow's escape sequence
    by waiting 50 ms for the rest. Raises ``OSError`` when there is no terminal to read from.
    """
    import termios
    import tty

    opened: IO[str] | None = None
    if stream is None:
        try:
            opened = open("/dev/tty", encoding="utf-8", errors="replace")  # noqa: SIM115
            stream = opened
        except OSError:
            stream = sys.stdin
    fd = stream.fileno()
    saved = termios.tcgetattr(fd)
    pending: list[str] = []
    buf = b""

    def read() -> str:
        nonlocal buf
        try:
            while not pending:
                chunk = os.read(fd, 64)
                if not chunk:
                    return "ctrl-d"
                buf += chunk
                keys, buf = split_keys(buf)
                pending.extend(keys)
                # a trailing ESC (or partial sequence) with nothing more coming is Esc itself
                while buf and not select.select([fd], [], [], 0.05)[0]:
                    if buf[:1] == b"\x1b":
                        pending.append("\x1b")
                        buf = buf[1:]
                        keys, buf = split_keys(buf)
                        pending.extend(keys)
                    else:
                        break
        except KeyboardInterrupt:
            return "ctrl-c"
        return decode_key(pending.pop(0))

    try:
        tty.setcbreak(fd)
        yield read
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        if opened is not None:
            opened.close()


def step_through(trace: Trace, replay: ReplayLike, console: Console,
                 read_key: Callable[[], str] | None = None,
                 agreement: Agreement | None = None) -> None:
    """Step through ``replay`` interactively until the user quits.

    Shows ``render_state`` for the current step with a key footer in a rich ``Live`` (full
    screen when ``console`` is a terminal) and redraws after each key. ``read_key`` returns one
    key name per call (see ``Stepper``); by default keys are read raw from ``/dev/tty``. After
    quitting it prints one line with the step it stopped at, the outcome and, when given, the
    agreement with the real run. Returns normally on ``q``/Esc/Ctrl-C; raises ``OSError`` when
    it must read keys and there is no terminal.
    """
    stepper = Stepper(trace, replay, agreement)
    full = console.is_terminal

    def loop(read: Callable[[], str]) -> None:
        with Live(stepper.frame(full), console=console, screen=full, auto_refresh=False,
                  redirect_stdout=False, redirect_stderr=False, transient=False) as live:
            while True:
                try:
                    key = read()
                except KeyboardInterrupt:
                    key = "ctrl-c"
                if not stepper.handle(key):
                    break
                live.update(stepper.frame(full), refresh=True)

    try:
        if read_key is not None:
            loop(read_key)
        else:
            with terminal_keys() as read:
                loop(read)
    except KeyboardInterrupt:
        pass
    where = (f"at step {stepper.step}/{stepper.last}" if stepper.step >= 0
             else f"before the first event (step -/{stepper.last})")
    end = Text(f"stopped {where} · outcome: {replay.outcome}")
    if agreement is not None and agreement.text:
        end.append(f" · {agreement.text}")
    console.print(end)


def main(argv: list[str] | None = None) -> ExitCode:
    """``python -m distviz.render.stepper TRACE.json``: replay a saved trace and step through it
    (or print the log when stdout is not a terminal). Returns the exit status."""
    from distviz.errors import DistvizError
    from distviz.limits import EXIT_BAD_INPUT, EXIT_OK
    from distviz.trace import load

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] in ("-h", "--help"):
        print("usage: python -m distviz.render.stepper TRACE.json", file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        trace = load(args[0])
    except DistvizError as exc:
        print(f"error: {exc.one_line()}", file=sys.stderr)
        return exc.exit_code
    from distviz.judge.verdict import judge
    from distviz.replay import replay as run_replay

    result = run_replay(trace, mode=Mode.FAST)
    agreement = judge(trace, result).agreement if trace.real is not None else None
    console = Console(markup=False)
    if not console.is_terminal:
        for line in render_log(trace, result, agreement=agreement):  # one line per event
            console.print(line, soft_wrap=True)
        return EXIT_OK
    step_through(trace, result, console, agreement=agreement)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
