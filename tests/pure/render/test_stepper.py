"""The interactive step-through: key handling, the screen, and a real terminal through tmux."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from builders.pane import REPO, Pane, keys
from builders.terminal import design_note_trace, replay_of
from guards import HANG_GUARD_S
from rich.console import Console

from distviz.render.stepper import Stepper, decode_key, split_keys, step_through
from distviz.replay.values import ReplayEvent, ReplayState, WorkerState
from distviz.trace import Trace


@dataclass
class ScriptedReplay:
    """A test double with fixed events and states (no simulation): enough to drive the keys."""

    events: list[ReplayEvent]
    outcome: str = "completed"
    hang: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    calls: list[int] = field(default_factory=list)

    def state_at(self, step: int) -> ReplayState:
        self.calls.append(step)
        done = step == len(self.events) - 1
        return ReplayState(step=step, pass_index=0,
                           workers={"worker0": WorkerState(initialized=step >= 0, done=done),
                                    "worker1": WorkerState(initialized=step >= 2, done=done)},
                           event=self.events[step] if step >= 0 else None)


def scripted() -> tuple[Trace, ScriptedReplay]:
    actions = [("pass_start", "worker0"), ("compute_dependencies", "worker0"),
               ("execute", "worker0"), ("send_gradient", "worker0"),
               ("receive_gradient", "worker1"), ("execute", "worker1"),
               ("send_gradient", "worker1"), ("receive_gradient", "worker0"),
               ("worker_done", "worker1"), ("pass_end", "worker0")]
    events = [ReplayEvent(step=i, pass_index=0, action=a, worker=w, text=f"event {i}: {w} {a}")
              for i, (a, w) in enumerate(actions)]
    return design_note_trace(), ScriptedReplay(events)


# -- key handling ---------------------------------------------------------------------------

def test_next_previous_and_arrows() -> None:
    trace, rep = scripted()
    s = Stepper(trace, rep)
    assert s.step == 0
    for k in ("n", "n", "n", "p"):
        s.handle(k)
    assert s.step == 2
    for k in ("right", "space", "enter", "left"):
        s.handle(k)
    assert s.step == 4


def test_previous_stops_before_the_first_event() -> None:
    trace, rep = scripted()
    s = Stepper(trace, rep)
    s.handle("p")
    s.handle("p")
    assert s.step == -1 and "before the first event" in s.message


def test_goto_end_and_home() -> None:
    trace, rep = scripted()
    s = Stepper(trace, rep)
    for k in ("g", "7", "enter"):
        s.handle(k)
    assert s.step == 7
    for k in ("g", "1", "2", "backspace", "enter"):   # typed 12, erased the 2
        s.handle(k)
    assert s.step == 1
    s.handle("G")
    assert s.step == 9
    s.handle("home")
    assert s.step == 0
    s.handle("e")
    s.handle("0")
    assert s.step == 0


def test_goto_past_the_end_stops_at_the_last_step() -> None:
    trace, rep = scripted()
    s = Stepper(trace, rep)
    for k in ("g", "9", "9", "enter"):
        s.handle(k)
    assert s.step == 9 and "past the end" in s.message


def test_goto_escape_cancels() -> None:
    trace, rep = scripted()
    s = Stepper(trace, rep)
    for k in ("g", "5", "esc"):
        assert s.handle(k)
    assert s.step == 0 and s.typed is None


def test_worker_focus_and_jump() -> None:
    trace, rep = scripted()
    s = Stepper(trace, rep)
    assert s.focus == "worker0"
    s.handle(">")
    assert s.focus == "worker1"
    s.handle("w")
    assert s.step == 4
    s.handle("w")
    assert s.step == 5
    s.handle("<")
    s.handle("w")
    assert s.step == 7
    s.handle(">")
    s.handle("w")
    s.handle("w")
    assert s.step == 8 and s.message == "no later event on worker1"


def test_next_message_event() -> None:
    trace, rep = scripted()
    s = Stepper(trace, rep)
    steps = []
    for _ in range(5):
        s.handle("m")
        steps.append(s.step)
    assert steps == [3, 4, 6, 7, 7]


def test_quit_keys() -> None:
    trace, rep = scripted()
    for k in ("q", "esc", "ctrl-c", "ctrl-d"):
        assert Stepper(trace, rep).handle(k) is False


def test_help_toggles_and_lists_keys() -> None:
    trace, rep = scripted()
    s = Stepper(trace, rep)
    s.handle("?")
    console = Console(color_system=None, width=100, record=True, file=io.StringIO())
    console.print(s.frame())
    out = console.export_text()
    assert "go to step N" in out and "next message event" in out
    s.handle("?")
    assert not s.help


def test_decode_key_escape_sequences() -> None:
    assert decode_key("\x1b[C") == "right"
    assert decode_key("\x1b[D") == "left"
    assert decode_key("\x1bOH") == "home"
    assert decode_key("\x1b[4~") == "end"
    assert decode_key("\x1b") == "esc"
    assert decode_key("\r") == "enter"
    assert decode_key(" ") == "space"
    assert decode_key("\x03") == "ctrl-c"
    assert decode_key("G") == "G"


def test_split_keys_handles_several_keys_in_one_read() -> None:
    keys, rest = split_keys(b"\x1b[C\x1b[Dn g12\r")
    assert [decode_key(k) for k in keys] == ["right", "left", "n", "space", "g", "1", "2",
                                             "enter"]
    assert rest == b""


def test_split_keys_keeps_incomplete_sequences() -> None:
    assert split_keys(b"n\x1b") == (["n"], b"\x1b")
    assert split_keys(b"\x1b[1") == ([], b"\x1b[1")
    assert split_keys("é".encode()[:1]) == ([], "é".encode()[:1])
    keys, rest = split_keys(b"\x1bOHq")
    assert [decode_key(k) for k in keys] == ["home", "q"] and rest == b""


def test_step_through_with_scripted_keys_prints_where_it_stopped() -> None:
    trace, rep = scripted()
    buf = io.StringIO()
    console = Console(file=buf, width=100, color_system=None)
    step_through(trace, rep, console, read_key=keys("n", "n", "p", "G", "p"))
    assert "stopped at step 8/9 · outcome: completed" in buf.getvalue()
    assert "\x1b" not in buf.getvalue()


def test_stepping_back_asks_the_replay_for_that_state() -> None:
    trace, rep = scripted()
    s = Stepper(trace, rep)
    for k in ("n", "n", "p"):
        s.handle(k)
        s.frame()
    assert rep.calls[-1] == 1


# -- a real terminal: tmux ------------------------------------------------------------------


def _body(screen: str) -> str:
    """The screen without the footer (feedback line and keys), trailing blanks stripped."""
    lines = [line.rstrip() for line in screen.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines[:-3])


@pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")
def test_tmux_step_through_forward_back_goto_end(tmp_path: Path) -> None:
    trace = design_note_trace()
    rep = replay_of(trace)
    last = len(rep.events) - 1
    path = tmp_path / "design_note.json"
    trace.save(path)
    pane = Pane(f"{sys.executable} -m distviz.render.stepper {path}; sleep 30")
    try:
        pane.wait_for(rf"\bstep 0/{last} ")
        pane.send("n", "n")
        at_two = pane.wait_for(rf"\bstep 2/{last} ")
        pane.send("n")
        pane.wait_for(rf"\bstep 3/{last} ")
        pane.send("p")
        back_at_two = pane.wait_for(rf"\bstep 2/{last} ")
        assert _body(back_at_two) == _body(at_two)          # stepping back: same state shown
        pane.send("Right", "Right")
        pane.wait_for(rf"\bstep 4/{last} ")
        pane.send("Left")
        pane.wait_for(rf"\bstep 3/{last} ")
        pane.send("g", "1")
        pane.wait_for(r"go to step: 1")
        pane.send("Enter")
        screen = pane.wait_for(rf"\bstep 1/{last} ")
        assert "worker0" in screen and "worker1" in screen
        step = next(ev.step for ev in rep.events
                    if ev.action == "compute_dependencies" and ev.worker == "worker1")
        pane.send("g", *str(step), "Enter")
        screen = pane.wait_for(rf"\bstep {step}/{last} ")
        assert "AddBackward0#1 (1)" in screen and "RecvRpcBackward#0 (2)" in screen
        pane.send("G")
        screen = pane.wait_for(rf"\bstep {last}/{last} ")
        assert "done" in screen and "t4" in screen
        pane.send("q")
        pane.wait_for(rf"stopped at step {last}/{last} · outcome: completed")
    finally:
        pane.close()


def test_main_prints_the_log_when_not_a_terminal(tmp_path: Path) -> None:
    trace = design_note_trace()
    path = tmp_path / "t.json"
    trace.save(path)
    out = subprocess.run([sys.executable, "-m", "distviz.render.stepper", str(path)],
                         capture_output=True, text=True, cwd=REPO,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=HANG_GUARD_S)
    assert out.returncode == 0, out.stderr
    assert "\x1b" not in out.stdout
    assert "outcome: completed" in out.stdout
    assert re.search(r"^\s+0 worker0  pass ", out.stdout, re.M)


def test_quitting_before_the_first_event_says_so_as_the_header_does() -> None:
    trace, rep = scripted()
    buf = io.StringIO()
    console = Console(file=buf, width=100, color_system=None)
    step_through(trace, rep, console, read_key=keys("p"))
    out = buf.getvalue()
    assert "stopped before the first event (step -/9) · outcome: completed" in out
    assert "step -1/" not in out
