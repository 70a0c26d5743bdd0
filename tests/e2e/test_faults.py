"""Faults during a run: every one ends with a clear message, a documented exit code, the partial
trace saved, and no process or temporary file left behind (checked on the process tree)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
from conftest import ROOT, descendants, pid_alive, run_cached, wait_until
from guards import HANG_GUARD_S, WAIT_GUARD_S

pytestmark = pytest.mark.rpc

FAULTS = ROOT / "tests" / "fault_scenarios"
RUNTIME = ROOT / "tests" / "bad_scenarios" / "runtime"


def _expect(path: Path, key: str) -> str | None:
    for line in path.read_text().splitlines():
        m = re.match(rf"#\s*{key}:\s?(.*)$", line)
        if m:
            return m.group(1)
    return None


def _env(cwd: Path) -> dict[str, str]:
    tmp = cwd / "tmp"
    tmp.mkdir(exist_ok=True)
    return dict(os.environ, NO_COLOR="1", TMPDIR=str(tmp))


def _cli(*args: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "distviz", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=_env(cwd))


def _no_temp_left(cwd: Path) -> None:
    left = os.listdir(cwd / "tmp")
    assert not left, f"temporary files left behind: {left}"


# -- run-time errors in user programs -----------------------------------------------------------

@pytest.mark.parametrize("path", sorted(RUNTIME.glob("*.yaml")), ids=lambda p: p.stem)
def test_runtime_error_is_one_line_with_file_and_line(path: Path) -> None:
    from distviz.errors import DistvizError

    result = run_cached(str(path), hang_timeout=3.0)
    err = result.error
    assert isinstance(err, DistvizError), err
    text = err.one_line()
    assert "\n" not in text and "Traceback" not in text
    want = _expect(path, "expect-run")
    assert want is not None and want in text, text
    line = _expect(path, "expect-line")
    if line is not None:
        assert f"{path}:{line}" in text, text
    worker = _expect(path, "expect-worker")
    if worker is not None:
        assert worker in text
    assert err.exit_code in (2, 3)
    assert not any(pid_alive(p) for p in result.pids.values())
    assert result.tmpdir and not os.path.exists(result.tmpdir)


def test_forward_error_on_a_remote_worker_names_worker_file_and_line(tmp_path: Path) -> None:
    path = RUNTIME / "forward_op_error_remote.yaml"
    proc = _cli("run", str(path), "-o", str(tmp_path / "t.json"), cwd=tmp_path)
    assert proc.returncode == 3, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "worker1" in lines[0] and f"{path}:9" in lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout


# -- faults in the backward ----------------------------------------------------------------------

def test_fail_backward_on_a_remote_worker_reports_the_error_on_node_chain() -> None:
    from distviz.replay import replay

    result = run_cached("fail_backward", hang_timeout=5.0)
    real = result.trace.real
    assert real["outcome"] == "error"
    assert re.match(r"Error on Node 0: Error on Node 1: ", real["error"]), real["error"]
    rp = replay(result.trace)
    assert rp.outcome == "error"
    assert rp.error.message.split(": ", 2)[:2] == real["error"].split(": ", 2)[:2]
    assert not any(pid_alive(p) for p in result.pids.values())


def test_crash_backward_ends_with_the_dead_worker_named(tmp_path: Path) -> None:
    out = tmp_path / "crash.json"
    proc = _cli("run", str(FAULTS / "crash.yaml"), "-o", str(out), "--no-log", cwd=tmp_path)
    assert proc.returncode == 7, proc.stdout + proc.stderr
    assert "worker1 died during the backward pass (exit code 17: crash_backward)" in proc.stdout
    trace = json.loads(out.read_text())
    assert trace["real"]["outcome"] == "error"
    assert trace["real"]["deaths"][0]["worker"] == "worker1"
    _no_temp_left(tmp_path)


def test_fast_mode_hang_is_confirmed_and_torn_down() -> None:
    from distviz.replay import replay

    t0 = time.monotonic()
    result = run_cached("unused_result", hang_timeout=3.0)
    assert time.monotonic() - t0 < 3.0 + 30
    trace = result.trace
    assert trace.real["outcome"] == "hang"
    rp = replay(trace)
    assert rp.outcome == "hang"
    blocked = rp.hang.blocked_sends
    assert any(b.var == "unused" for b in blocked), blocked
    assert not any(pid_alive(p) for p in result.pids.values())
    assert result.tmpdir and not os.path.exists(result.tmpdir)


def test_predicted_hang_skips_the_real_backward_unless_confirmed(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    proc = _cli("run", str(ROOT / "scenarios" / "unused_result.yaml"), "-o", str(out),
                "--hang-timeout", "30", cwd=tmp_path)
    assert proc.returncode == 6     # (skipped: never waited for the 30 s time-out)
    data = json.loads(out.read_text())
    assert data["real"]["outcome"] == "skipped"
    assert "--confirm-hang" in data["real"]["reason"]


# -- run-time limits of the workers ----------------------------------------------------------------

def _run_watched(tmp_path: Path, *args: str, timeout: float = 120) -> tuple[int, str, float,
                                                                              list[int]]:
    """Run ``distviz run ARGS``; return its exit code, stderr, seconds taken and every process
    it started (read from the process tree while it runs)."""
    proc = subprocess.Popen([sys.executable, "-m", "distviz", "run", *args, "--no-log"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, env=_env(tmp_path))
    t0 = time.monotonic()
    seen: set[int] = set()
    try:
        while proc.poll() is None and time.monotonic() - t0 < timeout:
            seen.update(descendants(proc.pid))
            time.sleep(0.05)
        _, err = proc.communicate(timeout=5)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc.returncode, err, time.monotonic() - t0, sorted(seen)


def _no_process_left(kids: list[int]) -> None:
    assert kids, "no worker process was seen"
    wait_until(lambda: not [k for k in kids if pid_alive(k)], "processes left behind")


def test_recursion_across_workers_stops_within_seconds_naming_the_cycle(tmp_path: Path) -> None:
    # ping on worker1 calls pong on worker0, which calls ping again: without a nesting limit
    # the calls take every RPC thread and the run ends only at the forward time-out
    # (ended by the limit, not by the 60 s time-out: the message says which)
    code, err, _, kids = _run_watched(
        tmp_path, str(FAULTS / "ping_pong.yaml"), "-o", str(tmp_path / "t.json"),
        "--timeout", "60")
    assert code == 3, err
    assert "timed out" not in err, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert "ping on worker1 -> pong on worker0 -> ping on worker1" in err, err
    assert "more than 10 deep" in err and "--max-rpc-depth" in err, err
    _no_process_left(kids)
    _no_temp_left(tmp_path)


def test_the_rpc_depth_limit_is_an_option(tmp_path: Path) -> None:
    code, err, _, kids = _run_watched(
        tmp_path, str(FAULTS / "ping_pong.yaml"), "-o", str(tmp_path / "t.json"),
        "--max-rpc-depth", "3", "--timeout", "60")
    assert code == 3, err
    assert "more than 3 deep" in err, err
    _no_process_left(kids)


def test_a_huge_allocation_hits_the_memory_limit_not_the_machine(tmp_path: Path) -> None:
    # x.repeat(100000, 100000): 40 GB that no size cap sees; the default limit refuses it
    code, err, _, kids = _run_watched(
        tmp_path, str(FAULTS / "huge_repeat.yaml"), "-o", str(tmp_path / "t.json"))
    assert code == 3, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert f"{FAULTS / 'huge_repeat.yaml'}:6: worker1: out of memory" in err, err
    assert "asked for 37.3 GiB" in err and "may use 4 GiB" in err and "--max-memory" in err
    _no_process_left(kids)


def test_list_growth_hits_the_memory_limit(tmp_path: Path) -> None:
    # 2**28 items (2 GiB of pointers) is fine for the machine and beyond a 1 GiB limit
    code, err, _, kids = _run_watched(
        tmp_path, str(FAULTS / "list_growth.yaml"), "-o", str(tmp_path / "t.json"),
        "--max-memory", "1G")
    assert code == 3, err
    assert "worker1: out of memory" in err and "may use 1 GiB (raise the limit with " \
        "--max-memory)" in err, err
    _no_process_left(kids)


# -- signals from outside ------------------------------------------------------------------------

def _start(tmp_path: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "distviz", "run", *args, "-v"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, env=_env(tmp_path))


def _wait_for(proc: subprocess.Popen[str], marker: str, timeout: float = WAIT_GUARD_S) -> None:
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        if marker in line:
            return
    raise AssertionError(f"never saw {marker!r}; stderr: {''.join(seen)}")


def _workers_of(pid: int) -> list[int]:
    # the CLI's descendants: the fork server and, below it, the workers
    return descendants(pid)


def _fork_server_of(pid: int) -> int | None:
    for k in descendants(pid):
        try:
            if "multiprocessing.forkserver" in " ".join(psutil.Process(k).cmdline()):
                return k
        except psutil.Error:
            continue
    return None


@pytest.mark.parametrize("phase,marker", [
    ("start-up", "starting"), ("importing", "starting"), ("forward", "running the forward pass"),
    ("backward", "running the real dist_autograd.backward")])
def test_ctrl_c_tears_everything_down(tmp_path: Path, phase: str, marker: str) -> None:
    # "importing": Ctrl-C while the fork server imports torch, which it must not print a
    # traceback about
    args = [str(FAULTS / "slow_forward.yaml"), "-o", str(tmp_path / "t.json")]
    if phase == "backward":
        args = [str(ROOT / "scenarios" / "unused_result.yaml"), "--confirm-hang",
                "--hang-timeout", "20", "-o", str(tmp_path / "t.json")]
    else:
        args += ["--set", "rounds=40000"]
    proc = _start(tmp_path, *args)
    try:
        _wait_for(proc, marker)
        if phase == "importing":   # the fork server is there (and imports torch for seconds)
            wait_until(lambda: _fork_server_of(proc.pid) is not None, "no fork server started")
        kids = _workers_of(proc.pid)
        os.killpg(proc.pid, signal.SIGINT)  # what a terminal sends to the foreground group
        _, err = proc.communicate(timeout=HANG_GUARD_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, err
    assert "interrupted" in err.lower() and "Traceback" not in err
    wait_until(lambda: not [k for k in kids if pid_alive(k)], "processes left behind")
    _no_temp_left(tmp_path)
    # the partial trace is saved (atomically): the recorded graph when there is one
    saved = json.loads((tmp_path / "t.json").read_text())
    assert saved["real"]["outcome"] == "error" and "interrupted" in saved["real"]["error"]
    assert bool(saved["nodes"]) == (phase == "backward")


def test_worker_killed_from_outside_mid_run(tmp_path: Path) -> None:
    proc = _start(tmp_path, str(FAULTS / "slow_forward.yaml"), "--set", "rounds=40000",
                  "-o", str(tmp_path / "t.json"))
    try:
        _wait_for(proc, "running the forward pass")
        kids = _workers_of(proc.pid)
        grand = [k for k in kids if k not in (proc.pid,)]
        assert len(grand) >= 2
        victim = max(grand)  # the last worker started (worker1)
        os.kill(victim, signal.SIGKILL)
        out, err = proc.communicate(timeout=HANG_GUARD_S)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 3, err
    assert re.search(r"worker\d died during the forward pass \(signal SIGKILL\)", err), err
    assert "partial trace saved" in err
    assert json.loads((tmp_path / "t.json").read_text())["real"]["outcome"] == "error"
    assert "Traceback" not in err
    wait_until(lambda: not [k for k in kids if pid_alive(k)], "processes left behind")
    _no_temp_left(tmp_path)


# -- concurrency ---------------------------------------------------------------------------------

def test_four_runs_at_once_all_succeed(tmp_path: Path) -> None:
    procs = [subprocess.Popen([sys.executable, "-m", "distviz", "run",
                               str(ROOT / "scenarios" / "design_note.yaml"), "-o",
                               str(tmp_path / f"t{i}.json"), "--no-log"],
                              cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for i in range(4)]
    for p in procs:
        out, err = p.communicate(timeout=HANG_GUARD_S)
        assert p.returncode == 0, err
    for i in range(4):
        assert json.loads((tmp_path / f"t{i}.json").read_text())["real"]["outcome"] == "completed"


def test_twenty_runs_leave_no_processes_threads_or_descriptors() -> None:
    import threading

    from distviz.runner.supervisor.run import RunOptions, run_scenario
    from distviz.scenario import load_scenario

    sc = load_scenario(str(ROOT / "scenarios" / "design_note.yaml"))
    opts = RunOptions(keep_server=True, reference=False)
    run_scenario(sc, opts)  # warm: the fork server and its pipes exist from here on
    fds = len(os.listdir("/proc/self/fd"))
    threads = threading.active_count()
    kids = set(descendants(os.getpid()))
    for _ in range(20):
        r = run_scenario(sc, opts)
        assert r.error is None and r.trace is not None
        assert r.tmpdir and not os.path.exists(r.tmpdir)
    assert len(os.listdir("/proc/self/fd")) <= fds
    assert threading.active_count() <= threads
    assert set(descendants(os.getpid())) <= kids


# -- security ------------------------------------------------------------------------------------

def _listening_addresses(pid: int) -> list[str]:
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    out = []
    for table in ("tcp", "tcp6"):
        with open(f"/proc/{pid}/net/{table}", encoding="utf-8") as fh:
            for row in fh.read().splitlines()[1:]:
                cols = row.split()
                if cols[3] == "0A" and cols[9] in inodes:  # LISTEN
                    out.append(cols[1].split(":")[0])
    return out


def test_workers_listen_on_loopback_only(tmp_path: Path) -> None:
    proc = _start(tmp_path, str(FAULTS / "slow_forward.yaml"), "--set", "rounds=40000",
                  "-o", str(tmp_path / "t.json"))
    try:
        _wait_for(proc, "running the forward pass")
        addrs = []
        for k in _workers_of(proc.pid):
            try:
                addrs.extend(_listening_addresses(k))
            except OSError:
                pass
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        proc.communicate(timeout=HANG_GUARD_S)
    assert addrs, "no listening sockets found"
    loopback = {"0100007F", "00000000000000000000000001000000"}
    assert set(addrs) <= loopback, addrs


def test_unfetched_rref_hang_is_confirmed_and_named() -> None:
    from distviz.replay import replay

    result = run_cached(str(FAULTS / "remote_no_fetch.yaml"), hang_timeout=3.0)
    assert result.trace.real["outcome"] == "hang"
    rp = replay(result.trace)
    assert rp.outcome == "hang"
    reason = rp.hang.blocked_sends[0].reason
    assert "remote(double) at line 9" in reason and "`rref`" in reason and "to_here()" in reason


def test_many_workers_whose_messages_arrive_out_of_order() -> None:
    # With many workers the initiator can finish its whole run before the parent has read the
    # other workers' "ready" messages; the run must still end as soon as everyone exits.
    from distviz.runner.supervisor.run import RunOptions, run_scenario
    from distviz.scenario import load_scenario

    sc = load_scenario(str(FAULTS / "eight_workers.yaml"))
    for _ in range(3):
        result = run_scenario(sc, RunOptions(keep_server=True, forward_timeout=30.0,
                                             reference=False))
        assert result.error is None, result.error
        assert result.trace is not None and result.trace.real["outcome"] == "completed"
        # (a run that waited for the 30 s forward time-out would end with its error)
        assert not any(pid_alive(p) for p in result.pids.values())
