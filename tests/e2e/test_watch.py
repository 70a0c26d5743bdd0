"""distviz's watch of every backward not recorded in full (``distviz.tracing.watch.watcher``).

Real programs (``tests/programs/late_hang.py``, ``tests/programs/pytest_suite/suite_watch.py``)
run once per session under ``distviz trace`` with the default options but a short
``--hang-timeout``; the tests read what they left. The pure tests check the statistics every
backward feeds (fixed memory) and the options.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import replay_fixtures as F
from builders.traced import ROOT, Traced, _environment, programs_running, run_traced

from distviz import limits
from distviz.errors import UsageError
from distviz.judge.watched import answered_sends, slow_text
from distviz.replay import replay
from distviz.selection import ContextSelection
from distviz.trace import Trace, load
from distviz.tracing.config import check_options
from distviz.tracing.launcher import backward_counts
from distviz.tracing.shared import inflight
from distviz.tracing.shared.backward_stats import BUCKETS, TOP, BackwardStats
from distviz.tracing.shared.journal import Event
from distviz.tracing.watch.entry import Budget

PROGRAM = str(Path("tests") / "programs" / "late_hang.py")
SUITE = ROOT / "tests" / "programs" / "pytest_suite"


# -- pure ---------------------------------------------------------------------------------------


def _watched(t: Trace, *leaves: str) -> Trace:
    """``t`` as the watch records it, with a gradient so far on ``leaves``."""
    t.meta = {"traced": {"watched": {"gradients": {f"worker0/AccumulateGrad({v})": {"shape": [2]}
                                                   for v in leaves}}}}
    return t


def test_a_leaf_only_one_send_reaches_proves_that_send_and_the_ones_behind_it_ran() -> None:
    # design note: worker0's send (msg 0:0) alone reaches t1; worker1's recv of that message
    # is reached only by worker1's send (msg 1:0): both got their gradient
    t = _watched(F.design_note(), "t1")
    sends = sorted(n.id for n in t.nodes if n.kind == "send")
    assert answered_sends(t) == sends
    assert "sends that may still wait: none" in slow_text(t, 2.0)
    # t4 hangs off the root alone: it proves nothing about any send
    t = _watched(F.design_note(), "t4")
    assert answered_sends(t) == []
    assert "sends whose gradient arrived (a leaf only they reach has one): none" in \
        slow_text(t, 2.0)


def test_a_leaf_two_origins_reach_proves_nothing_and_several_passes_cannot_tell() -> None:
    # the unused RPC result: t1 is reached from the root and from the send
    t = _watched(F.unused_rpc_result(), "t1", "t2")
    assert answered_sends(t) == []
    assert ("sends that may still wait: rpc_sync(torch.add)'s arguments from worker0; "
            "rpc_sync(torch.add)'s result from worker1") in slow_text(t, 2.0)
    t = _watched(F.two_passes(retain_first=True), "t1")
    assert answered_sends(t) is None
    assert "cannot tell which got theirs" in slow_text(t, 2.0)


def test_a_slow_backward_names_the_custom_backwards_the_workers_are_in() -> None:
    t = _watched(F.design_note(), "t1")
    assert "a worker is slow or a message is lost" in slow_text(t, 2.0)
    busy = [{"thread": "thread 7", "function": f"Slow{k}.backward",
             "where": f"model.py:{k} in backward"} for k in range(4)]
    assert t.meta.traced is not None
    t.meta.traced["watched"]["busy"] = {"worker1": busy[:1], "worker0": busy[1:]}
    text = slow_text(t, 2.0)
    assert ("the program's own backward code is still running: worker0 is in Slow1.backward "
            "at model.py:1 in backward; worker0 is in Slow2.backward at model.py:2 in backward; "
            "worker0 is in Slow3.backward at model.py:3 in backward (and 1 more); workers: ") \
        in text
    assert "a worker is slow" not in text

def test_statistics_stay_the_same_size_whatever_the_number_of_steps() -> None:
    stats = BackwardStats(worker="trainer")
    for step in range(1, 20001):
        stats.add(step, 0.002 + (0.5 if step == 15000 else 0.0) + (step % 7) * 1e-4,
                  "boom" if step in (3, 9000) else None)
    assert stats.calls == 20000 and stats.raised == 2
    assert len(stats.hist) == BUCKETS and len(stats.slowest) <= TOP
    assert sorted(stats.slowest, reverse=True)[0][1] == 15000
    median = stats.quantile(0.5)
    assert median is not None and 0.002 <= median <= 0.0027
    summary = BackwardStats.from_json(json.loads(json.dumps(stats.to_json()))).summary()
    assert summary["calls"] == 20000 and summary["slowest"][0]["step"] == 15000
    assert summary["errors"] == [{"step": 3, "error": "boom"}, {"step": 9000, "error": "boom"}]
    other = BackwardStats(worker="trainer")
    other.add(1, 2.0)
    stats.merge(other)
    assert stats.calls == 20001 and stats.max_s == 2.0


def test_contexts_none_selects_nothing_and_bad_hang_timeouts_are_refused() -> None:
    spec = ContextSelection.parse("none")
    assert not spec.selects(1) and not spec.selects_after(0) and spec.text() == "none"
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(UsageError, match="--hang-timeout"):
            check_options("first", None, "stop", bad, None)


def test_the_backward_in_flight_is_readable_after_its_process_is_gone(tmp_path: Path) -> None:
    slot = inflight.open_slot(str(tmp_path), "trainer")
    assert slot is not None
    assert inflight.read(str(tmp_path)) == []      # named, with nothing in flight
    since = time.monotonic() - 2.0
    slot.set(40000, 7, since)
    (stuck,) = inflight.read(str(tmp_path))
    assert (stuck.pid, stuck.worker, stuck.step, stuck.context_id) == \
        (os.getpid(), "trainer", 40000, 7)
    assert abs(stuck.started - (time.time() - 2.0)) < 0.5     # on the wall clock
    slot.clear()
    assert inflight.read(str(tmp_path)) == []
    assert inflight.open_slot(None, "trainer") is None


def test_one_table_holds_every_backward_in_flight_and_its_slot_the_oldest_watched(
        tmp_path: Path) -> None:
    from distviz.tracing.watch.entry import WatchEntry

    table = inflight.Table()
    table.slot = inflight.open_slot(str(tmp_path), "trainer")
    recorded = inflight.InFlight(5, 1, [], False, 1.0, 11)
    first = WatchEntry(6, 2, [], False, 2.0, 12, None, 9.0)
    second = WatchEntry(7, 3, [], True, 3.0, 13, None, 10.0)
    tokens = [table.enter(e) for e in (recorded, first, second)]
    assert table.by_context() == {5: recorded, 6: first, 7: second}   # what a snapshot reads

    def stuck() -> list[tuple[int, int]]:
        return [(s.step, s.context_id) for s in inflight.read(str(tmp_path))]

    assert stuck() == [(2, 6)]       # the recorded backward is not the watch's
    table.leave(tokens[1])
    assert stuck() == [(3, 7)]
    table.leave(tokens[2])
    assert stuck() == []
    table.leave(tokens[0])
    assert table.by_context() == {}


def test_the_summary_counts_every_backward_per_initiator() -> None:
    a, b = BackwardStats(worker="trainer"), BackwardStats(worker="trainer")
    for step in range(1, 101):
        (a if step % 2 else b).add(step, 0.01, "lost" if step == 50 else None)
    b.add(101, 3.0)
    events = [Event(kind="backwards", pid=1, stats=a.to_json()),
              Event(kind="backwards", pid=2, stats=b.to_json()),
              Event(kind="backwards", pid=3, stats={"calls": "broken"})]
    lines = backward_counts.backward_lines(events)
    assert lines[0].startswith("trainer: 101 backward calls: median 10") and \
        "max 3 s; slowest by step: 101 (3 s)" in lines[0]
    assert lines[1] == "trainer: 1 backward raised (step 50: lost)"
    assert backward_counts.backwards_json(events)["trainer"]["calls"] == 101


def test_the_backwards_that_raised_are_said_once_per_error_with_their_steps() -> None:
    stats = BackwardStats(worker="w0")
    for step, text in [(2, "bad"), (2, "bad"), (2, "bad"), (3, "bad"), (4, "worse"), (5, "bad"),
                       (6, "bad")]:
        stats.add(step, 0.01, text)
    lines = backward_counts.backward_lines([Event(kind="backwards", pid=1,
                                                  stats=stats.to_json())])
    assert lines[1] == ("w0: 7 backwards raised (the first: steps 2 (3 times), 3: bad; "
                        "step 4: worse)")


def test_a_process_writes_few_traces_of_slow_or_raised_backwards_and_says_so_once() -> None:
    budget = Budget()
    most = limits.TRACE_WATCHED_WRITES
    assert budget.take(None, raised_in=11) == "write"
    assert budget.take(None, raised_in=11) == "quiet"      # the same context raised again
    assert [budget.take(None) for _ in range(most - 1)] == ["write"] * (most - 1)
    assert budget.take(None, raised_in=12) == "say"
    assert budget.take(None) == "quiet" and budget.take(None, raised_in=13) == "quiet"
    assert len(budget.raised_in) == 1
    # under the pytest plugin each test starts afresh
    assert budget.take("test_b.py::test_x", raised_in=11) == "write"


def test_contexts_none_is_for_trace_only() -> None:
    proc = subprocess.run([sys.executable, "-m", "distviz", "run", "design-note", "--contexts",
                           "none"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stderr.strip().startswith("error: --contexts none:")
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("value", ["0", "-2", "soon", "nan"])
def test_a_bad_hang_timeout_is_one_line_and_exit_2(value: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "distviz", "trace", "--hang-timeout", value,
                           "--", "true"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--hang-timeout" in lines[0], proc.stderr


# -- real programs ------------------------------------------------------------------------------

_RUNS: dict[str, tuple[Traced, float]] = {}


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory) -> Any:
    def get(mode: str, *options: str) -> tuple[Traced, float]:
        if mode not in _RUNS:
            t0 = time.monotonic()
            run = run_traced(tmp_path_factory.mktemp(mode), [PROGRAM, mode], *options)
            _RUNS[mode] = (run, time.monotonic() - t0)
        return _RUNS[mode]
    return get


@pytest.mark.rpc
def test_a_late_data_dependent_hang_is_explained_live_and_stopped(watched: Any) -> None:
    run, seconds = watched("late", "--hang-timeout", "2")
    assert run.code == 6, run.stdout + run.stderr[-3000:]
    # explained live, with the call site and the variable the loss leaves out
    live = [ln for ln in run.stderr.splitlines() if ln.startswith("distviz: ")]
    assert any("worker0 context 7: PyTorch's backward has not returned after 2 s" in ln and
               "predicts that it hangs" in ln for ln in live), run.stderr
    line = next(k for k, text in enumerate((ROOT / PROGRAM).read_text().splitlines(), 1)
                if text.strip().startswith("remote = rpc.rpc_sync("))
    assert any(f"rpc_sync(scale) at tests/programs/late_hang.py:{line} in train" in ln and
               "assigned to `remote`, is not used by the loss (`loss`)" in ln for ln in live)
    assert "step 6 done" in run.stdout and "step 7 done" not in run.stdout
    # stopped long before PyTorch's own RPC time-out (60 s) would have said anything
    assert "ran for more than set timeout" not in run.stderr and seconds < 55
    # contexts 2-6 returned in time: nothing written for them
    assert sorted(run.traces) == ["worker0.ctx1.trace.json", "worker0.ctx7.trace.json"]
    row = run.row("worker0", 7)
    assert row["watched"] and row["outcome"] == "hang" and row["agreement"] == "agrees"
    trace = run.context("worker0", 7)
    assert trace.meta.traced is not None and trace.meta.traced["watched"]["state"] == "hang"
    assert trace.real is None          # no hooks ran: no per-node order
    assert replay(load(run.out / "worker0.ctx7.trace.json")).outcome == "hang"
    replayed = subprocess.run([sys.executable, "-m", "distviz", "replay",
                               str(run.out / "worker0.ctx7.trace.json")], cwd=ROOT,
                              capture_output=True, text=True, timeout=300)
    assert "assigned to `remote`, is not used by the loss" in replayed.stdout
    # every backward counted, the stopped one's process included
    assert run.index["backwards"]["worker0"]["calls"] == 6


@pytest.mark.rpc
def test_a_slow_backward_is_slow_not_a_hang(watched: Any) -> None:
    run, _ = watched("slow", "--hang-timeout", "1")
    assert run.code == 0, run.stdout + run.stderr[-3000:]
    steps = [ln for ln in run.stdout.splitlines() if ln.startswith("step ")]
    assert steps == [f"step {k} done" for k in range(1, 11)]
    live = "\n".join(ln for ln in run.stderr.splitlines() if ln.startswith("distviz: "))
    assert "worker0 context 3: PyTorch's backward has not returned after 1 s, and the graph " \
           "does not hang in FAST mode" in live
    sleep = next(k for k, text in enumerate((ROOT / PROGRAM).read_text().splitlines(), 1)
                 if "time.sleep(" in text)
    assert ("the program's own backward code is still running: worker0 is in Checked.backward "
            f"at tests/programs/late_hang.py:{sleep} in backward; workers: worker0, worker1") \
        in live
    assert "worker0 context 3: PyTorch's backward returned after" in live
    assert "slow, not a hang" in live
    row = run.row("worker0", 3)
    assert row["watched"] and row["outcome"] == "completed"
    assert row["agreement"] == "not compared" and "differs" not in json.dumps(run.index)
    assert sorted(run.traces) == ["worker0.ctx1.trace.json", "worker0.ctx3.trace.json"]
    counted = run.index["backwards"]["worker0"]
    assert counted["calls"] == 10 and counted["slowest"][0]["step"] == 3
    assert counted["max_s"] >= 2.5 and counted["median_s"] < 1


@pytest.mark.rpc
def test_a_backward_that_raises_while_watched_keeps_pytorchs_error(watched: Any) -> None:
    run, _ = watched("raise", "--hang-timeout", "5")
    assert run.code == 1
    assert run.stderr.rstrip().splitlines()[-1] == \
        "RuntimeError: Error on Node 0: a bad batch reached Checked.backward"
    row = run.row("worker0", 4)
    assert row["watched"] and row["outcome"] == "error"
    assert "the replay of its graph completes" in row["explanation"]
    assert run.index["backwards"]["worker0"]["raised"] == 1


@pytest.mark.rpc
def test_backwards_that_raise_at_every_step_write_a_few_traces_and_are_all_counted(
        watched: Any) -> None:
    run, _ = watched("raises", "--hang-timeout", "5")
    raised = [ln for ln in run.stdout.splitlines() if ln.endswith(" raised")]
    assert raised == [f"step {k} raised" for k in range(2, 10)]
    assert "step 10 done" in run.stdout       # the program caught them and went on
    # contexts 2 to 6 are written; then the budget of 5 is spent
    most = limits.TRACE_WATCHED_WRITES
    assert sorted(run.traces) == [f"worker0.ctx{k}.trace.json" for k in range(1, most + 2)]
    assert all(run.row("worker0", k)["outcome"] == "error" for k in range(2, most + 2))
    note = (f"worker0: {most} traces of watched backwards that were slow or raised are "
            "written; later ones are counted in the summary, not recorded")
    assert sum(note in ln for ln in run.stderr.splitlines()) == 1    # live, once
    assert sum(note in ln for ln in run.stdout.splitlines()) == 1    # and in the summary
    assert ("worker0: 8 backwards raised (the first: steps 2, 3, 4, 5, 6: Error on Node 0: "
            "a bad batch reached Checked.backward)") in run.stdout
    counted = run.index["backwards"]["worker0"]
    assert counted["calls"] == 10 and counted["raised"] == 8


@pytest.mark.rpc
def test_the_third_backward_of_a_test_hangs_and_is_reported_under_its_test(
        tmp_path: Path) -> None:
    out = tmp_path / "traces"
    env = dict(os.environ, TP_SOCKET_IFNAME="lo", GLOO_SOCKET_IFNAME="lo", NO_COLOR="1",
               PYTHONPATH=os.pathsep.join([str(ROOT), *filter(None, [os.environ.get(
                   "PYTHONPATH")])]), SUITE_MARKER=str(tmp_path))
    proc = subprocess.run([sys.executable, "-m", "pytest", "suite_watch.py", "-p",
                           "no:cacheprovider", f"--distviz={out}",
                           "--distviz-hang-timeout=1"], cwd=SUITE, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr     # the test's own result
    index = json.loads((out / "index.json").read_text())
    rows = [c for c in index["contexts"] if c["watched"]]
    assert [(r["test"], r["context"], r["outcome"]) for r in rows] == [
        ("suite_watch.py::test_third_backward_hangs", 3, "hang")]
    assert "assigned to `remote`, is not used by the loss" in rows[0]["explanation"]
    deadline = time.monotonic() + 10     # multiprocessing's resource tracker leaves last
    while programs_running(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not programs_running(str(tmp_path))


@pytest.mark.rpc
def test_a_worker_killed_during_a_watched_backward_ends_the_program_as_without_distviz(
        watched: Any, tmp_path: Path) -> None:
    run, _ = watched("kill", "--hang-timeout", "30")
    plain = subprocess.run([sys.executable, PROGRAM, "kill"], cwd=ROOT,
                           env=_environment(tmp_path), capture_output=True, text=True,
                           timeout=600)
    assert run.code == plain.returncode == 1
    last = plain.stderr.rstrip().splitlines()[-1]
    assert last.endswith("process 1 terminated with signal SIGKILL"), plain.stderr[-2000:]
    assert run.stderr.rstrip().splitlines()[-1] == last
    assert "worker0 context 5 (id 4) was in flight when its process ended" in " ".join(
        run.index["notes"])


@pytest.mark.rpc
def test_a_worker_that_stops_answering_is_named_well_before_pytorchs_time_out(
        watched: Any) -> None:
    run, seconds = watched("stop", "--hang-timeout", "2")
    assert run.code == 0, run.stdout + run.stderr[-3000:]
    assert [ln for ln in run.stdout.splitlines() if ln.startswith("step ")] == \
        [f"step {k} done" for k in range(1, 11)]
    live = [ln for ln in run.stderr.splitlines() if ln.startswith("distviz: ")]
    silent = (f"worker0 context 5: PyTorch's backward has not returned after 2 s, and worker1 "
              f"does not answer: distviz's recording of the graph got no reply from worker1 "
              f"within {limits.LATE_RECORD_TIMEOUT:g} s")
    assert any(ln.startswith(f"distviz: {silent}") for ln in live), run.stderr
    assert "not called a hang" in run.stderr and "stopping the program" not in run.stderr
    assert any("worker0 context 5: PyTorch's backward returned after" in ln and
               "after worker1 did not answer at the deadline: slow, not a hang" in ln
               for ln in live), run.stderr
    # nothing written for a context whose graph could not be recorded; the summary keeps it
    assert sorted(run.traces) == ["worker0.ctx1.trace.json"]
    noted = silent.replace("worker0 context", "worker0: context", 1)
    assert any(note.startswith(noted) for note in run.index["notes"]), run.index["notes"]
    assert run.index["backwards"]["worker0"]["slowest"][0]["step"] == 5
    assert seconds < 60


#: What only a context recorded in full, or a backward past its deadline, needs: the trace model,
#: the recorder's gather and hooks, the observer, the recording, the replay.
RECORDING = ("distviz.trace", "distviz.replay", "distviz.runner", "distviz.recorder.gather",
             "distviz.recorder.hooks", "distviz.tracing.recording.observe", "distviz.tracing.recording.assemble",
             "distviz.tracing.watch.late", "distviz.tracing.snapshot.take",
             # what explains a local backward in a context (the program runs none)
             "distviz.tracing.hooks.local_explain",
             # the cuts of a parameter's path: a process that records no context loads none
             "distviz.tracing.hooks.cut_watch", "distviz.tracing.hooks.cut_sites",
             "distviz.tracing.hooks.cut_rpc",
             "distviz.cuts", "distviz.analyses.cut_answers")


@pytest.mark.rpc
def test_a_process_whose_backwards_are_all_watched_never_loads_the_recording(
        tmp_path: Path) -> None:
    """``--contexts none``, every backward back in time: what each traced process loaded at
    its exit, read by a ``sitecustomize`` of the test's own that distviz's bootstrap chains
    to (so it runs in the command and in each process ``mp.spawn`` starts). Each process writes
    its report to a file of its own: the two workers leave ``rpc.shutdown`` at the same moment,
    and lines they printed on the one standard error came out cut into each other under load
    (``LOADEDLOADED 17541 ...``), which lost both workers' reports."""
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "sitecustomize.py").write_text(
        "import atexit, json, os, sys\n"
        f"HEAVY = {RECORDING!r}\n"
        "def _report():\n"
        "    heavy = sorted(m for m in sys.modules\n"
        "                   if m in HEAVY or m.startswith(tuple(h + '.' for h in HEAVY)))\n"
        "    hooked = 'distviz.tracing.hooks.patches' in sys.modules\n"
        "    kept = len(sys.modules['distviz.tracing.callsites.registry']._CALLS) if hooked else 0\n"
        "    ours = sum(m.split('.')[0] == 'distviz' for m in sys.modules)\n"
        "    with open(os.path.join(os.path.dirname(__file__), f'loaded.{os.getpid()}'), 'w') as f:\n"
        "        f.write(json.dumps([hooked, kept, heavy, 'torch' in sys.modules, ours]))\n"
        "atexit.register(_report)\n", encoding="utf-8")
    env = _environment(tmp_path)
    env["PYTHONPATH"] = f"{ROOT}{os.pathsep}{probe}"
    proc = subprocess.run([sys.executable, "-m", "distviz", "trace", "-o", str(tmp_path / "out"),
                           "--contexts", "none", "--", sys.executable, PROGRAM, "fine", "4"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert [ln for ln in proc.stdout.splitlines() if ln.startswith("step ")] == \
        [f"step {k} done" for k in range(1, 5)]
    loaded = {int(p.suffix[1:]): json.loads(p.read_text(encoding="utf-8"))
              for p in probe.glob("loaded.*")}
    hooked = [heavy for torch_hooked, _, heavy, _, _ in loaded.values() if torch_hooked]
    assert hooked == [[]] * 3, loaded     # the command and the two workers it spawns
    # a process that never imports torch (multiprocessing's resource tracker, which mp.spawn
    # starts) loads nothing of distviz; each that does is hooked
    bare = [ours for _, _, _, torch_loaded, ours in loaded.values() if not torch_loaded]
    assert bare and bare == [0] * len(bare), loaded
    assert all(hooked for hooked, _, _, torch_loaded, _ in loaded.values() if torch_loaded), loaded
    # no call site is kept past its context, not even those of the RPC after each backward
    assert [kept for _, kept, _, _, _ in loaded.values()] == [0] * len(loaded), loaded
    index = json.loads((tmp_path / "out" / "index.json").read_text(encoding="utf-8"))
    assert index["backwards"]["worker0"]["calls"] == 4 and index["contexts"] == []


@pytest.mark.rpc
def test_the_late_hang_is_explained_under_torchrun_too(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    run = run_traced(tmp_path, ["-m", "torch.distributed.run", "--nproc-per-node", "2",
                                "--master-addr", "127.0.0.1", "--master-port", str(port),
                                PROGRAM, "late"], "--hang-timeout", "2")
    assert run.code == 6, run.stdout + run.stderr[-3000:]
    assert "assigned to `remote`, is not used by the loss (`loss`)" in run.stderr
    assert run.row("worker0", 7)["watched"]


#: One process, RPC to itself: the call-site wrappers as ``patches.install_callsites`` puts
#: them, around PyTorch's own ``rpc_sync``, in a real dist autograd context.
_QUIET_PROGRAM = """
import os, sys, torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
from distviz.tracing import callsites
os.environ.setdefault("TP_SOCKET_IFNAME", "lo")
rpc.init_rpc("w0", rank=0, world_size=1, rpc_backend_options=rpc.TensorPipeRpcBackendOptions(
    init_method="file://" + sys.argv[1]))
call = callsites.wrap_call("rpc_sync", rpc.rpc_sync, None)
x = torch.ones(2, requires_grad=True)
with dist_autograd.context() as cid:
    y = call("w0", torch.mul, args=(x, 2))          # the forward: noted
    dist_autograd.backward(cid, [y.sum()])
    callsites.quiet(cid)                             # as the watch does when it returns
    call("w0", torch.add, args=(x, 1))               # an optimizer's step: not noted
    kept = callsites.peek(cid)
    print("KEPT", [(c.func, c.site is not None, len(c.msg_ids)) for c in kept])
callsites.drop(cid)                                  # as leaving the context does
print("LEFT", callsites.has_calls(cid), cid in callsites.registry.QUIET)
rpc.shutdown()
"""


@pytest.mark.rpc
def test_a_watched_context_notes_its_forward_calls_and_none_after_its_backward(
        tmp_path: Path) -> None:
    script = tmp_path / "quiet.py"
    script.write_text(_QUIET_PROGRAM, encoding="utf-8")
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "rdv")], cwd=ROOT,
                          env=_environment(tmp_path), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = {ln.split(" ", 1)[0]: ln.split(" ", 1)[1] for ln in proc.stdout.splitlines()
             if ln.startswith(("KEPT ", "LEFT "))}
    # the forward call: named, with its site, its argument's send and its result's recv
    assert lines["KEPT"] == "[('torch.mul', True, 2)]", proc.stdout
    assert lines["LEFT"] == "False False", proc.stdout


def test_the_threads_inside_a_custom_backward_are_named_and_not_those_in_its_forward() -> None:
    import threading

    import torch

    from distviz.tracing.watch import busy

    started, release = threading.Event(), threading.Event()

    class Held(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
            started.set()
            release.wait(10)
            return x * 2

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
            started.set()
            release.wait(10)    # the line the report names
            return grad * 2

    x = torch.ones(2, requires_grad=True)
    out: list[torch.Tensor] = []

    def forward() -> None:
        out.append(Held.apply(x))

    def backward() -> None:
        out[0].sum().backward()

    for step, expected in ((forward, []), (backward, ["Held.backward"])):
        started.clear()
        release.clear()
        thread = threading.Thread(target=step, name=f"held-{step.__name__}")
        thread.start()
        assert started.wait(10)
        found = busy.running_backwards()
        release.set()
        thread.join(10)
        assert [b["function"] for b in found] == \
            [f"test_the_threads_inside_a_custom_backward_are_named_and_not_those_in_its_forward."
             f"<locals>.{e}" for e in expected]
        if expected:
            line = next(k for k, text in enumerate(Path(__file__).read_text().splitlines(), 1)
                        if "# the line the report names" in text)
            assert found[0]["thread"] == "held-backward"
            assert found[0]["where"].endswith(f"test_watch.py:{line} in backward")
    assert x.grad is not None and x.grad.tolist() == [2.0, 2.0]


def test_an_rpc_async_result_is_named_by_the_variable_its_future_is_waited_into(
        tmp_path: Path) -> None:
    from distviz.tracing.callsites import result_var

    source = tmp_path / "model.py"
    source.write_text(
        "def middle(x):\n"
        "    fut = rpc.rpc_async('c', f, args=(x,))\n"         # 2: waited into `extra`
        "    other = fut\n"
        "    extra = fut.wait()\n"
        "    fut2 = rpc.rpc_async('c', f, args=(x,))\n"        # 5: never waited here
        "    return extra, fut2\n"
        "\n"
        "def inline(x):\n"
        "    y = rpc.rpc_async('c', f, args=(x,)).wait()\n"    # 9: the statement's own target
        "    fut = 1\n"
        "    return y\n"
        "\n"
        "def helper(x):\n"
        "    return rpc.rpc_async('c', f, args=(x,))\n"        # 14: returned to the caller
        "\n"
        "def caller(x):\n"
        "    pending = helper(x)\n"                            # 17
        "    value = pending.wait()\n")
    path = str(source)
    assert result_var([(path, 2, "middle")], "rpc_async") == "extra"
    assert result_var([(path, 2, "middle")], "rpc_sync") == "fut"
    assert result_var([(path, 5, "middle")], "rpc_async") == "fut2"
    assert result_var([(path, 9, "inline")], "rpc_async") == "y"
    assert result_var([(path, 14, "helper"), (path, 17, "caller")], "rpc_async") == "value"


def test_a_backward_that_returns_while_its_graph_is_recorded_is_slow_not_unrecorded(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    """The race a real run hits rarely: PyTorch's backward returns during the deadline's
    recording and releases its context, so the recording fails. Nothing may say that the
    backward "has not returned"; its return says it was slow."""
    from distviz.tracing.config import TraceConfig
    from distviz.tracing.watch import late as watch_late
    from distviz.tracing.watch.entry import WatchEntry
    from distviz.tracing.watch.watcher import Watch

    watch = Watch(TraceConfig(out_dir="unused", hang_timeout=2.0))
    watch.stats.worker = "worker0"
    entry = WatchEntry(context_id=7, step=3, roots=[], retain_graph=False, since=0.0, thread=0,
                    frame=None, deadline=2.0)

    def record_as_it_returns(*_: Any) -> Any:
        entry.returned = True
        raise RuntimeError("Could not find autograd context with id: 7")
    monkeypatch.setattr(watch_late, "_record", record_as_it_returns)
    watch_late.deadline(watch, entry)
    watch_late.returned(watch, entry, 2.4)
    said = capfd.readouterr().err
    assert "has not returned" not in said, said
    assert said == ("distviz: worker0 context 3: PyTorch's backward returned after 2.4 s, later "
                    "than --hang-timeout (2 s): slow, not a hang\n"), said
