"""``distviz snapshot DIR``: a running traced job's processes, contexts, graphs and stacks.

The RPC test traces ``tests/programs/stuck_forward.py`` (worker2's remote function waits for
an event that never comes, so worker1 waits in the RPC it serves and worker0 in ``rpc_sync``
inside its context), snapshots it
while it is stuck, then stops it. The others need no torch.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from builders.traced import ROOT, _environment, programs_running, trace_command
from guards import HANG_GUARD_S, WAIT_GUARD_S

from distviz.limits import EXIT_HANG
from distviz.replay import replay
from distviz.trace import load
from distviz.tracing.shared import job_files
from distviz.tracing.snapshot import client as snapshot
from distviz.tracing.snapshot import listener as snapshot_listener


def _snapshot(folder: Path, *options: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distviz", "snapshot", str(folder), *options],
                          cwd=ROOT, capture_output=True, text=True, timeout=HANG_GUARD_S,
                          env={**os.environ, "NO_COLOR": "1"})


@pytest.mark.rpc
def test_a_job_stuck_in_a_forward_rpc_shows_every_stack_and_its_open_context(
        tmp_path: Path) -> None:
    marker = tmp_path / "stuck"
    env = {**_environment(tmp_path), "STUCK_MARKER": str(marker)}
    job = subprocess.Popen(trace_command(tmp_path, ["tests/programs/stuck_forward.py"]),
                           cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    out = tmp_path / "traces"
    try:
        deadline = time.monotonic() + WAIT_GUARD_S
        while not marker.exists() and job.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.exists(), "worker2 never reached wait_forever"
        got = _snapshot(out)
        assert got.returncode == 0, got.stdout + got.stderr
        text = got.stdout
        # every process, and the stuck frame of each: worker2's remote function, the calls of
        # worker0 and of worker1 (inside the RPC it serves)
        assert all(f"worker{k} (pid" in text for k in range(3)), text
        assert "in wait_forever" in text and "in rpc_sync" in text, text
        assert "forward open for" in text, text
        (folder,) = (out / job_files.SNAPSHOTS).iterdir()
        assert "wait_forever" in (folder / "worker2.stacks.txt").read_text()
        # the call each waits in, named from the wrapper's frame (it is noted only once it
        # returns); worker1's in the context it serves, which worker0 entered
        source = (ROOT / "tests/programs/stuck_forward.py").read_text().splitlines()
        sites = {name: f"tests/programs/stuck_forward.py:"
                       f"{1 + next(i for i, s in enumerate(source) if f'{name}, args' in s)}"
                 for name in ("relay", "wait_forever")}
        site = f"{sites['relay']} in run_worker"
        assert f"waiting for rpc_sync(relay) to worker1 at {site} (no answer yet)" in text, text
        worker1 = text[text.index("worker1 (pid"):text.index("worker2 (pid")]
        assert "serving an RPC of the context" in worker1, worker1
        assert (f"waiting for rpc_sync(wait_forever) to worker2 at {sites['wait_forever']} in "
                "relay") in worker1, worker1
        assert "entered on worker0: its graph is in worker0's part of the snapshot" in worker1
        # the open context's graph: every worker's part, replayed from the newest variable
        trace = load(folder / "worker0.ctx1.trace.json")
        assert {n.worker for n in trace.nodes} == {"worker0", "worker1", "worker2"}
        assert trace.passes[0].root_vars == ["h"]
        waited = [c for c in trace.rpc_calls if c.func in ("relay", "wait_forever")]
        assert [(c.func, c.caller, c.site) for c in waited] == [
            ("relay", "worker0", site), ("wait_forever", "worker1", f"{sites['wait_forever']} "
                                                                  "in relay")], waited
        assert replay(trace).outcome == "hang"     # `h` alone leaves relay's send unfed
        assert "if dist_autograd.backward ran now from `h`: FAST replay" in text, text
        assert f"the result of rpc_sync(relay) at {site}" in text, text
        shown = subprocess.run([sys.executable, "-m", "distviz", "replay", "--no-log",
                                str(folder / "worker0.ctx1.trace.json")], cwd=ROOT,
                               capture_output=True, text=True, timeout=HANG_GUARD_S)
        assert shown.returncode == EXIT_HANG and "hangs in pass 1" in shown.stdout, shown.stderr
        as_json = json.loads(_snapshot(out, "--json").stdout)
        assert sorted(p["worker"] for p in as_json["processes"]) == \
            ["worker0", "worker1", "worker2"]
    finally:
        job.send_signal(signal.SIGINT)
        job.communicate(timeout=HANG_GUARD_S)
    deadline = time.monotonic() + WAIT_GUARD_S
    while programs_running(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not programs_running(str(tmp_path)), "the traced program left processes behind"
    # the job has ended: the folder holds no running job any more
    after = _snapshot(out)
    assert after.returncode == 2 and after.stderr.count("\n") == 1, after.stderr
    assert f"{out}: no running job here" in after.stderr


def test_a_folder_without_a_job_or_that_does_not_exist_is_one_line(tmp_path: Path) -> None:
    for folder, words in ((tmp_path, "no running job here"),
                          (tmp_path / "missing", "no such folder")):
        got = _snapshot(folder)
        assert got.returncode == 2, got.stderr
        assert got.stderr == f"error: {folder}: {words}" + got.stderr.split(words, 1)[1]
        assert got.stderr.count("\n") == 1 and not got.stdout


def test_a_job_whose_runner_has_ended_is_not_running(tmp_path: Path) -> None:
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                           capture_output=True, text=True, check=True)
    job_files.announce(str(tmp_path), str(tmp_path), int(ended.stdout))
    with pytest.raises(snapshot.NoJob, match=r"has ended"):
        snapshot.take(tmp_path)


def test_a_session_too_deep_for_af_unix_gets_a_short_private_socket(tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    path, private = job_files.socket_path(str(deep), 12345)
    assert private is not None and path.startswith(private)
    assert len(os.fsencode(path)) <= job_files.SOCKET_PATH_MAX
    os.rmdir(private)
    short, none = job_files.socket_path("/tmp/s", 12345)
    assert (short, none) == ("/tmp/s/listeners/12345.sock", None)


def test_a_process_that_does_not_answer_is_named_and_the_others_are_reported(
        tmp_path: Path) -> None:
    # worker0: this process's real listener; worker1: a live process whose socket accepts
    # and never answers; a third entry of a process that has ended is stale and skipped
    session = tempfile.mkdtemp(prefix="dvz-test-")
    folder_seen: list[str] = []

    def answer(folder: str) -> snapshot.ProcessSnapshot:
        folder_seen.append(folder)
        return snapshot.ProcessSnapshot(pid=os.getpid(), worker="worker0", argv=["main.py"],
                                        contexts=[], threads=[snapshot.ThreadStack(
                                            "MainThread", ["main.py:3 in f"])],
                                        stacks_file=f"{folder}/worker0.stacks.txt")
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sleeper = subprocess.Popen(["sleep", str(WAIT_GUARD_S)])
    try:
        snapshot_listener.start(session, "worker0", answer)
        silent_path = os.path.join(session, job_files.LISTENERS, "silent.sock")
        silent.bind(silent_path)
        silent.listen(1)
        job_files.register(session, job_files.Listener(sleeper.pid, "worker1", silent_path))
        job_files.register(session, job_files.Listener(2**22 + 1, "gone", silent_path))  # > pid_max
        job_files.announce(str(tmp_path), session)
        snap = snapshot.take(tmp_path, timeout=3.0)
    finally:
        snapshot_listener.close()
        silent.close()
        sleeper.kill()
        sleeper.wait()
        shutil.rmtree(session, ignore_errors=True)
    assert [p.worker for p in snap.processes] == ["worker0"]
    assert folder_seen == [str(snap.folder.resolve())]
    assert [(s.listener.worker, s.why) for s in snap.silent] == \
        [("worker1", "did not answer within 3 s")]
    lines = snapshot.report_lines(snap, tmp_path)
    assert lines[-1] == f"worker1 (pid {sleeper.pid}) did not answer within 3 s"
    assert "    MainThread: main.py:3 in f" in lines
