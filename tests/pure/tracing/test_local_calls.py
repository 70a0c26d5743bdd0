"""distviz's own calls to a worker of this host over its listener's socket
(``distviz.tracing.shared.local_calls``, served by ``distviz.tracing.snapshot.listener``).

Real processes, no torch: each listener is a Python process of its own that starts the listener
a traced process starts when its RPC starts, registered in a session folder under a worker name.
"""

from __future__ import annotations

import json
import operator
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import wait_until

from distviz.tracing.shared import local_calls

ROOT = Path(__file__).resolve().parents[3]

_LISTEN = """
import sys
from distviz.tracing.snapshot import listener
listener.start(sys.argv[1], sys.argv[2], lambda folder: None)
print("listening", flush=True)
sys.stdin.read()
"""


@pytest.fixture(autouse=True)
def _fresh_peers() -> Iterator[None]:
    """Each test reads the session's listener files anew."""
    local_calls._PEERS.clear()
    local_calls._SCANNED.clear()
    yield
    local_calls._PEERS.clear()
    local_calls._SCANNED.clear()


@pytest.fixture
def listen(tmp_path: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Start a listening process named ``worker`` in the session ``tmp_path / "session"``
    (its command line after ``prefix``)."""
    started: list[subprocess.Popen[str]] = []

    def start(worker: str, *prefix: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen([*prefix, sys.executable, "-c", _LISTEN, str(tmp_path / "session"),
                                 worker], cwd=ROOT, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        started.append(proc)
        assert proc.stdout is not None and proc.stdout.readline().strip() == "listening"
        return proc
    yield start
    for proc in started:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)


def _call(session: Path, worker: str, fn: Callable[..., object], *args: object) -> object:
    call = local_calls.start(str(session), worker, fn, args, 10.0)
    assert call is not None, f"{worker} was not found listening"
    return call.wait()


def test_a_call_runs_in_the_listening_process_and_gives_its_value(
        tmp_path: Path, listen: Callable[[str], subprocess.Popen[str]]) -> None:
    proc = listen("ps")
    session = tmp_path / "session"
    assert _call(session, "ps", operator.add, 2, 3) == 5
    assert _call(session, "ps", os.getpid) == proc.pid != os.getpid()
    big = list(range(300_000))      # more than one read of the socket each way
    assert _call(session, "ps", sorted, big) == big


def test_what_the_function_raises_is_raised_here_with_its_type_and_text(
        tmp_path: Path, listen: Callable[[str], subprocess.Popen[str]]) -> None:
    listen("ps")
    session = tmp_path / "session"
    with pytest.raises(ValueError, match="invalid literal for int"):
        _call(session, "ps", int, "x")
    with pytest.raises(RuntimeError, match=r"^JSONDecodeError: Expecting"):
        _call(session, "ps", json.loads, "{")     # not a builtin type: a RuntimeError
    assert _call(session, "ps", operator.add, 1, 1) == 2    # the listener serves on


def test_a_worker_with_no_one_live_listener_is_asked_over_rpc_instead(
        tmp_path: Path, listen: Callable[[str], subprocess.Popen[str]]) -> None:
    session = tmp_path / "session"
    assert local_calls.start(str(session), "ps", operator.add, (1, 2), 5.0) is None  # no session
    listen("ps")
    listen("twin")
    listen("twin")
    gone = listen("gone")
    assert gone.stdin is not None
    gone.stdin.close()
    gone.wait(timeout=30)
    local_calls._SCANNED.clear()
    assert local_calls.start(str(session), "twin", operator.add, (1, 2), 5.0) is None
    assert local_calls.start(str(session), "nobody", operator.add, (1, 2), 5.0) is None
    assert local_calls.start(str(session), "gone", operator.add, (1, 2), 5.0) is None
    assert local_calls.start(None, "ps", operator.add, (1, 2), 5.0) is None
    assert _call(session, "ps", operator.add, 1, 2) == 3


def test_a_listener_that_stops_answering_is_a_time_out_not_a_hang(
        tmp_path: Path, listen: Callable[[str], subprocess.Popen[str]]) -> None:
    proc = listen("ps")
    call = local_calls.start(str(tmp_path / "session"), "ps", time.sleep, (3600,), 0.5)
    assert call is not None
    started = time.monotonic()
    with pytest.raises(TimeoutError, match="ps did not answer distviz's call within 0.5 s"):
        call.wait()
    assert time.monotonic() - started < 10
    proc.kill()
    wait_until(lambda: proc.poll() is not None, "the listener to be killed")


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="needs root and util-linux's unshare for a network namespace")
def test_a_worker_in_another_network_namespace_is_asked_over_rpc(
        tmp_path: Path, listen: Callable[..., subprocess.Popen[str]]) -> None:
    # its socket would answer (one file system), but the program reaches it as another host
    listen("elsewhere", "unshare", "--net")
    listen("here")
    session = str(tmp_path / "session")
    assert local_calls.start(session, "elsewhere", operator.add, (1, 2), 5.0) is None
    call = local_calls.start(session, "here", operator.add, (1, 2), 5.0)
    assert call is not None and call.wait() == 3
