"""The pure parts of ``distviz trace``: options, the FAST-mode rules an observed order must
obey, the summary and its exit codes, file claims, traces with only some workers. No torch."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, get_args

import pytest
from replay_fixtures import M, TraceBuilder, design_note, nested, two_passes

from distviz.errors import UsageError
from distviz.judge import legality
from distviz.judge.findings import Status
from distviz.outcome import Category, RealOutcome
from distviz.replay import replay
from distviz.selection import ContextSelection
from distviz.torch_errors import FREED_MESSAGE
from distviz.trace import Trace, loads
from distviz.tracing.config import TraceConfig, check_options
from distviz.tracing.launcher import run_summary
from distviz.tracing.launcher.command import Finished, _descendants, _descendants_psutil
from distviz.tracing.launcher.launch import CommandNotExecutable, CommandNotFound, resolve
from distviz.tracing.recording import report
from distviz.tracing.shared import journal

# -- options -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "chosen"), [
    ("first", [1]), ("all", [1, 2, 3, 4, 5, 6, 7]), ("2,5", [2, 5]), ("5, 2", [2, 5]),
    ("every:3", [1, 4, 7])])
def test_contexts_select_per_initiator_from_one(text: str, chosen: list[int]) -> None:
    spec = ContextSelection.parse(text)
    assert [k for k in range(1, 8) if spec.selects(k)] == chosen
    assert ContextSelection.parse(spec.text()) == spec


@pytest.mark.parametrize(("text", "after"), [
    ("first", [False, False, False]), ("all", [True, True, True]), ("2,5", [True, True, False]),
    ("every:3", [True, True, True])])
def test_contexts_say_whether_a_later_one_may_be_recorded(text: str, after: list[bool]) -> None:
    spec = ContextSelection.parse(text)
    assert [spec.selects_after(k) for k in (1, 4, 5)] == after


@pytest.mark.parametrize("text", ["second", "0", "1,x", "every:0", "every:", "-1"])
def test_contexts_refuses_other_forms(text: str) -> None:
    with pytest.raises(UsageError, match=r"--contexts"):
        ContextSelection.parse(text)


def test_options_are_checked_and_the_config_travels_through_the_environment() -> None:
    with pytest.raises(UsageError, match="--max-contexts 0"):
        check_options("first", 0, "stop", 1.0, None)
    with pytest.raises(UsageError, match="--interop-threads 0"):
        check_options("first", None, "stop", 1.0, 0)
    cfg = TraceConfig(out_dir="t", contexts="every:2", max_contexts=3, on_hang="continue",
                      hang_timeout=2.5, interop_threads=1, session_dir="/s", parent_pid=7)
    assert TraceConfig.from_env(cfg.to_env()) == cfg
    assert TraceConfig.from_env("not json") is None


def test_a_missing_command_is_found_out_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(CommandNotFound, match="command not found"):
        resolve(["surely-no-such-command-anywhere"])
    with pytest.raises(CommandNotFound, match="no such file"):
        resolve([str(tmp_path / "missing.py")])
    (tmp_path / "plain.txt").write_text("x")
    with pytest.raises(CommandNotExecutable):
        resolve([str(tmp_path / "plain.txt")])
    assert resolve(["sh", "-c", "true"])[1:] == ["-c", "true"]


def test_the_descendants_left_behind_are_found_grandchildren_and_all() -> None:
    """What ``distviz trace`` stops at the end: every live process under the program, read
    from ``/proc``; a zombie is not one (only its exit status is left)."""
    shell = subprocess.Popen(["sh", "-c", "sleep 30 & (sleep 30 & wait) & exit 0 & wait"])
    try:
        deadline = time.monotonic() + 10
        while len(_descendants(shell.pid)) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        found = _descendants(shell.pid)
        assert len(found) >= 3, found   # two sleeps and the subshell between (and `exit 0`'s)
        names = [Path(f"/proc/{pid}/comm").read_text().strip() for pid in found]
        assert names.count("sleep") == 2, names
        assert sorted(found) == sorted(_descendants_psutil(shell.pid))
    finally:
        for pid in _descendants(shell.pid):
            os.kill(pid, signal.SIGKILL)
        shell.kill()
        shell.wait()
    assert _descendants(shell.pid) == []


# -- the FAST-mode rules of an observed order --------------------------------------------------

def observed(trace: Trace, runs: list[tuple[str, str]]) -> Trace:
    """``trace`` with a real run whose events are ``(thread, node id)`` in time order."""
    workers = {n.id: n.worker for n in trace.nodes}
    events = [{"pass": 0, "worker": workers[node], "node": node, "t_us": 10.0 * (k + 1),
               "dur_us": None, "thread": thread, "grad_shapes": None}
              for k, (thread, node) in enumerate(runs)]
    trace.real = {"outcome": "completed", "error": None, "events": events, "gradients": {},
                  "interop_threads": 2}
    return trace


def replayed_runs(trace: Trace) -> list[tuple[str, str]]:
    rp = replay(trace)
    return [(f"{w}-pool", nid) for w, ids in rp.order[0].items() for nid in ids]


def test_the_replays_own_order_obeys_every_rule() -> None:
    t = design_note()
    assert legality.check(observed(t, replayed_runs(t))) == []


def test_priority_a_ready_accumulate_grad_runs_first() -> None:
    t = design_note()
    runs = replayed_runs(t)
    order = [n for _, n in runs]
    acc, recv = order.index("worker0/AccumulateGrad(t4)"), order.index("worker0/RecvRpcBackward#0")
    runs[acc], runs[recv] = runs[recv], runs[acc]
    found = legality.check(observed(t, runs))
    assert [(v.rule, v.node) for v in found] == [("priority", "worker0/RecvRpcBackward#0")]
    assert "AccumulateGrad(t4)" in found[0].text


def test_call_a_node_runs_in_a_call_of_one_of_its_predecessors() -> None:
    t = design_note()
    runs = [("worker0-other" if n == "worker0/MulBackward0#2" else th, n)
            for th, n in replayed_runs(t)]
    rules = {(v.rule, v.node) for v in legality.check(observed(t, runs))}
    assert ("call", "worker0/MulBackward0#2") in rules


def _two_messages_into_one_leaf() -> Trace:
    """worker0's leaf x feeds two sends, whose gradients come back as two calls."""
    b = TraceBuilder(2)
    x = b.acc(0, "x")
    s0 = b.send(0, M(0, 0), [x], seq=0)
    s1 = b.send(0, M(0, 1), [x], seq=1)
    ra, rb = b.recv(0, M(1, 0), seq=2), b.recv(0, M(1, 1), seq=3)
    add = b.op(0, "AddBackward0", 4, [ra, rb])
    loss = b.op(0, "SumBackward0", 5, [add])
    for k, msg in enumerate((M(0, 0), M(0, 1))):
        r = b.recv(1, msg, seq=10 + k)
        b.send(1, M(1, k), [b.op(1, "TanhBackward0", 20 + k, [r])], seq=30 + k)
    b.backward([loss], root_vars=["loss"])
    trace = b.build()
    assert s0 and s1
    return trace


def test_dependencies_a_node_waits_for_every_predecessor_in_other_calls() -> None:
    t = _two_messages_into_one_leaf()
    ids = {n.id for n in t.nodes}
    s0, s1 = sorted(i for i in ids if i.startswith("worker0/SendRpcBackward"))
    acc = "worker0/AccumulateGrad(x)"
    root = [("T0", "worker0/SumBackward0#5"), ("T0", "worker0/AddBackward0#4"),
            ("T0", "worker0/RecvRpcBackward#3"), ("T0", "worker0/RecvRpcBackward#2")]
    legal = root + [("T1", s0), ("T2", s1), ("T2", acc)]
    assert legality.check(observed(t, legal)) == []
    early = root + [("T1", s0), ("T1", acc), ("T2", s1)]
    found = legality.check(observed(t, early))
    assert [(v.rule, v.node) for v in found] == [("dependencies", acc)]
    twice = legal + [("T2", acc)]
    assert ("once", acc) in {(v.rule, v.node) for v in legality.check(observed(t, twice))}


# -- the verdict and the summary ---------------------------------------------------------------

def _row(initiator: str, k: int, shape: dict[str, int], outcome: str = "completed",
         agreement: str = "agrees", file: str | None = None, exit_code: int = 0
         ) -> journal.ContextRow:
    """A row as the verdict would fill it (``exit_code``: the verdict's)."""
    return journal.ContextRow(file=file or f"{initiator}.ctx{k}.trace.json", initiator=initiator,
                              index=k, context_id=k, pid=1, workers=[initiator, "ps"],
                              nodes=sum(shape.values()), messages=1, outcome=outcome,
                              predicted=outcome, real=outcome, agreement=agreement,
                              shape=shape, exit_code=exit_code)


def test_each_context_is_compared_with_the_previous_one_of_its_initiator() -> None:
    a = {"t/MulBackward0": 2, "ps/AddBackward0": 1}
    events = [journal.Event(kind="context", pid=1, row=r) for r in (
        _row("t2", 1, a), _row("t1", 1, a), _row("t1", 2, a),
        _row("t1", 3, {"t/MulBackward0": 3, "ps/AddBackward0": 1}),
        _row("t1", 3, {"t/MulBackward0": 3}, outcome="hang", exit_code=6))]   # later rows win
    found = run_summary.entries(events)
    assert [(e.row.initiator, e.row.index, e.change) for e in found] == [
        ("t1", 1, "first recorded"), ("t1", 2, "same shape"),
        ("t1", 3, "same node count (-1 ps/AddBackward0, +1 t/MulBackward0)"),
        ("t2", 1, "first recorded")]
    assert run_summary.contexts_code(found) == 6


def test_the_index_and_the_summary_say_how_many_passes_each_context_had() -> None:
    row = _row("t1", 1, {"t/MulBackward0": 1})
    row.passes = 3
    found = run_summary.entries([journal.Event(kind="context", pid=1, row=row)])
    assert run_summary.index_json(found, ["python", "x.py"], 0, [])["contexts"][0]["passes"] == 3
    header = run_summary.table(found).columns
    assert [c.header for c in header][:6] == ["initiator", "ctx", "workers", "nodes", "msgs",
                                              "passes"]


@pytest.mark.parametrize("saved_on", ["worker0", "worker1"])
def test_a_pass_through_freed_saved_tensors_names_the_pass_that_freed_them(
        saved_on: str) -> None:
    t = two_passes(retain_first=False, saved_on=saved_on)
    t.meta["traced"] = {"backward_sites": ["main.py:7 in train", "main.py:9 in train"]}
    rp = replay(t)
    assert rp.outcome == "error" and rp.error is not None and rp.error.pass_index == 1
    node = {"worker0": "MulBackward0", "worker1": "AddBackward0"}[saved_on]
    assert report.freed_text(t, rp) == (
        f"pass 2 (main.py:9 in train) goes through the graph a second time: {node} on "
        f"{saved_on} needs its saved tensors, but pass 1 freed them: it ran without "
        "retain_graph=True; fix: pass retain_graph=True to the backward at main.py:7 in train")
    kept = two_passes(retain_first=True, saved_on=saved_on)
    assert replay(kept).outcome == "completed" and report.freed_text(kept, replay(kept)) is None


def test_an_error_whose_words_are_pytorchs_freed_tensors_words_is_not_called_freed() -> None:
    """Only the replay's own freed-tensors step is explained as one, never a node's error that
    happens to say the same words."""
    t = nested(fault={"message": FREED_MESSAGE})
    rp = replay(t)
    assert rp.outcome == "error" and rp.error is not None and rp.error.origin == FREED_MESSAGE
    assert not rp.error.freed and report.freed_text(t, rp) is None


def _finished(returncode: int = 0, **kw: Any) -> Finished:
    base: dict[str, Any] = {"stopped_for_hang": False, "interrupted": False, "leftovers": 0}
    return Finished(returncode=returncode, **{**base, **kw})


def test_exit_status_the_programs_own_when_it_fails_else_the_verdict() -> None:
    ok = [run_summary.Entry(_row("t", 1, {}), "first recorded")]
    differs = [run_summary.Entry(_row("t", 1, {}, agreement="differs", exit_code=8),
                             "first recorded")]
    error = [run_summary.Entry(_row("t", 1, {}, outcome="error", exit_code=7), "first recorded")]
    assert run_summary.exit_code(_finished(), ok) == 0
    assert run_summary.exit_code(_finished(), differs) == 8
    assert run_summary.exit_code(_finished(), error) == 7
    assert run_summary.exit_code(_finished(3), ok) == 3
    assert run_summary.exit_code(_finished(-9), ok) == 137
    assert run_summary.exit_code(_finished(-15, stopped_for_hang=True), ok) == 6
    assert run_summary.exit_code(_finished(-2, interrupted=True), ok) == 130
    assert run_summary.exit_code(_finished(-15, interrupted=True), ok) == 130   # we stopped it
    assert run_summary.exit_code(_finished(-15, interrupted=True, terminated=True), ok) == 143
    notes = run_summary.notes(_finished(-9, leftovers=2), [])
    assert "the program was killed by signal 9; distviz exits with the same status" in notes
    assert "the program left 2 processes running; distviz stopped them" in notes


def test_a_backward_outside_a_context_is_said_in_words() -> None:
    text = report.not_recorded(7, RuntimeError("Could not find autograd context with id: 7"))
    assert text.startswith("dist_autograd.backward(7, ...) was called outside a dist_autograd "
                           "context (PyTorch: Could not find autograd context with id: 7)")


def test_the_programs_own_frame_is_found_in_a_remote_traceback() -> None:
    text = ('Traceback (most recent call last):\n'
            '  File "/usr/lib/python3.11/site-packages/torch/autograd/function.py", line 3, '
            'in apply\n  File "/home/me/proj/model.py", line 42, in backward\n'
            '    raise ValueError("x")\n')
    assert report.program_site(text) == "/home/me/proj/model.py:42 in backward"
    assert report.program_site("no frames") is None


# -- files -------------------------------------------------------------------------------------

def test_claims_never_give_one_file_to_two_processes(tmp_path: Path) -> None:
    session = tmp_path / "session"
    session.mkdir()
    got: list[Path] = []
    lock = threading.Lock()

    def claim() -> None:
        p = journal.claim(str(tmp_path / "out"), str(session), "trainer/1", 3)
        with lock:
            got.append(p)
    threads = [threading.Thread(target=claim) for _ in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    names = sorted(p.name for p in got)
    assert len(set(names)) == 8
    assert names[0] == "trainer_1.ctx3-1.trace.json" and "trainer_1.ctx3.trace.json" in names
    # without a session (the Python API) a file already there is never replaced
    (tmp_path / "api").mkdir()
    (tmp_path / "api" / "w.ctx1.trace.json").write_text("mine")
    assert journal.claim(str(tmp_path / "api"), None, "w", 1).name == "w.ctx1-1.trace.json"


def test_the_event_log_skips_a_torn_last_line(tmp_path: Path) -> None:
    journal.append(str(tmp_path), journal.Event(kind="context", pid=3, row=_row("t", 1, {})))
    journal.append(str(tmp_path), journal.Event(kind="stop", pid=3, message="t context 1 hangs"))
    with open(tmp_path / journal.EVENTS, "a", encoding="utf-8") as fh:
        fh.write('{"kind": "cont')
    events = journal.read(str(tmp_path))
    assert [e.kind for e in events] == ["context", "stop"]
    assert events[0].row == _row("t", 1, {})


def test_the_event_log_is_kept_open_for_one_session_at_a_time(tmp_path: Path) -> None:
    """A process appends to its session's log through one descriptor (no ``open`` per row);
    moving to another session closes it; a session whose folder is gone raises, and the next
    row of a live one still lands; a forked child appends through its own, even when the log's
    lock was held at the fork."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()

    def stop(pid: int) -> journal.Event:
        return journal.Event(kind=journal.EventKind.STOP, pid=pid, message=f"m{pid}")

    journal.append(str(a), stop(-1))
    open_fds = len(os.listdir("/proc/self/fd"))
    for k in range(40):
        journal.append(str(a if k % 2 else b), stop(k))
    assert len(os.listdir("/proc/self/fd")) == open_fds
    assert [e.pid for e in journal.read(str(a))] == [-1, *range(1, 40, 2)]
    assert [e.pid for e in journal.read(str(b))] == list(range(0, 40, 2))
    with pytest.raises(FileNotFoundError):
        journal.append(str(tmp_path / "gone"), stop(98))
    journal.append(str(a), stop(99))
    held, done = threading.Event(), threading.Event()

    def hold() -> None:     # another thread holds the log's lock at the fork
        with journal._LOG.lock:
            held.set()
            done.wait(10)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(10)
    child = os.fork()
    done.set()
    holder.join()
    if child == 0:  # pragma: no cover - the child's exit status is the assertion
        try:
            signal.alarm(10)
            journal.append(str(a), stop(100))
        finally:
            os._exit(0 if journal.read(str(a))[-1].pid == 100 else 1)
    assert os.waitpid(child, 0)[1] == 0
    journal.append(str(a), stop(101))
    assert [e.pid for e in journal.read(str(a))][-3:] == [99, 100, 101]
    assert "m98" not in (tmp_path / "a" / journal.EVENTS).read_text() + \
        (tmp_path / "b" / journal.EVENTS).read_text()


def test_the_event_log_holds_words_and_reads_them_as_members(tmp_path: Path) -> None:
    """The log's JSON holds the same words as before; they read back as ``EventKind``,
    ``RealState``, ``VerdictStatus`` and ``Category``; a line with a word none of them has (a
    writer of another version) is skipped like a torn one."""
    row = journal.ContextRow(file="t.ctx1.trace.json", initiator="t", index=1, context_id=1,
                             pid=3, workers=["t"], nodes=1, messages=0, outcome="hang",
                             predicted="hang", real=journal.RealState.SKIPPED,
                             agreement=journal.VerdictStatus.NOT_COMPARED,
                             category=Category.HANG_PREDICTED)
    journal.append(str(tmp_path), journal.Event(kind=journal.EventKind.CONTEXT, pid=3, row=row))
    line = (tmp_path / journal.EVENTS).read_text()
    assert '"kind":"context"' in line and '"real":"skipped"' in line
    assert '"agreement":"not compared"' in line and '"category":"hang predicted"' in line
    with open(tmp_path / journal.EVENTS, "a", encoding="utf-8") as fh:
        fh.write('{"kind": "context_v9", "pid": 3}\n')
        fh.write(line.replace('"real":"skipped"', '"real":"skipping"'))
        fh.write('{"kind": "stop", "pid": 3, "message": "m"}\n')
    events = journal.read(str(tmp_path))
    assert [e.kind for e in events] == [journal.EventKind.CONTEXT, journal.EventKind.STOP]
    got = events[0].row
    assert got == row and got is not None
    assert (type(got.real), type(got.agreement), type(got.category)) == (
        journal.RealState, journal.VerdictStatus, Category)


def test_the_rows_words_are_the_verdicts_and_pytorchs_words() -> None:
    """A row's enums hold the words the judge and the trace use, so nothing is translated
    between them: the verdict's ``Status``, ``RealOutcome`` (and ``running``), the pytest
    categories."""
    assert {s.value for s in journal.VerdictStatus} == set(get_args(Status))
    assert {s.value for s in journal.RealState} == {*get_args(RealOutcome), "running"}
    assert journal.NOTE_KINDS == (journal.EventKind.NOT_RECORDED, journal.EventKind.LOCAL_BACKWARD,
                                  journal.EventKind.GRADS_LEFT, journal.EventKind.NO_GRADIENT,
                                  journal.EventKind.NOT_APPLIED, journal.EventKind.ZERO_GRADIENT,
                                  journal.EventKind.CUT)


# -- traces with only the workers of their context ------------------------------------------------

def test_a_trace_of_some_workers_routes_messages_by_rpc_rank() -> None:
    """Ranks 0 and 2 took part; rank 1 (another trainer) did not and is not in the trace."""
    b = TraceBuilder(["trainer", "ps"])
    t1 = b.acc(0, "t1")
    b.send(0, M(0, 0), [t1], seq=1)
    recv = b.recv(0, M(2, 0), seq=0)
    loss = b.op(0, "SumBackward0", 3, [recv])
    r = b.recv(1, M(0, 0), seq=0)
    b.send(1, M(2, 0), [b.op(1, "MulBackward0", 1, [r])], seq=2)
    b.backward([loss], root_vars=["loss"])
    trace = b.build()
    trace.ranks = [0, 2]
    again = loads(trace.dumps())
    assert again.ranks == [0, 2] and again.worker_index() == {0: 0, 2: 1}
    rp = replay(again)
    assert rp.outcome == "completed"
    assert set(rp.accumulated) == {"trainer/AccumulateGrad(t1)"}
    assert any("to ps (message 2:0)" in e.text for e in rp.events)
    bad = trace.to_json()
    bad["ranks"] = [0, 0]
    with pytest.raises(Exception, match="ranks"):
        Trace.from_json(bad)
