"""Backwards started by ``RRef.backward(context_id)`` (``distviz.tracing.hooks.rref``).

``tests/programs/rref_backward.py`` runs plainly and under ``distviz trace``: the ``errors``
mode's outcomes (returned, or the exception's type and message, and the gradients in the
context) must be the same both ways, from a non-owner and from the owner; its first context on
each initiator is recorded and agrees. The ``late`` mode's hang through ``RRef.backward`` (the
``head`` worker leaves ``extra`` out of the loss at step 3) must be explained live by the
watch on the owner, and stopped with exit 6. ``tests/programs/pytest_suite/suite_rref.py``
runs under ``pytest --distviz``; the ``api`` mode calls ``distviz.backward(context_id,
loss_rref)`` in a plain run. ``tests/programs/scripted_backward.py`` hangs in a backward called
from TorchScript, which is said at its deadline. The argument and frame tests need torch but
no RPC.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from builders.traced import ROOT, Traced, _environment, finish, run_traced, trace_command
from guards import HANG_GUARD_S
from side_by_side import marked, side_by_side

PROGRAM = str(Path("tests") / "programs" / "rref_backward.py")
SCRIPTED = Path("tests") / "programs" / "scripted_backward.py"


def _line(text: str, program: str = PROGRAM) -> int:
    """The line of ``program`` that starts with ``text``."""
    return next(k for k, ln in enumerate((ROOT / program).read_text().splitlines(), 1)
                if ln.strip().startswith(text))


def _plain(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, PROGRAM, *args], cwd=ROOT, env=_environment(tmp),
                          capture_output=True, text=True, timeout=HANG_GUARD_S)


def _timed(tmp: Path, *args: str) -> tuple[Traced, float]:
    t0 = time.monotonic()
    run = run_traced(tmp, [PROGRAM, *args[:2]], *args[2:])
    return run, time.monotonic() - t0


def _api(tmp: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    return _plain(tmp, "api", str(tmp)), tmp


def _outcomes(stdout: str) -> list[str]:
    return [ln for ln in stdout.splitlines() if ln.startswith(("non-owner ", "owner "))]


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    jobs: dict[str, Any] = {}
    for name in marked(request):
        tmp = tmp_path_factory.mktemp(name)
        jobs[name] = {"errors-plain": partial(_plain, tmp, "errors"),
                      "errors": partial(run_traced, tmp, [PROGRAM, "errors"]),
                      "late": partial(_timed, tmp, "late", "3", "--hang-timeout", "3"),
                      "api": partial(_api, tmp),
                      "owner": partial(run_traced, tmp, [PROGRAM, "owner"]),
                      "api-hang": partial(_plain, tmp, "api-hang", str(tmp)),
                      "plugin": partial(_plugin, tmp),
                      "scripted": partial(_scripted_hang, tmp)}[name]
    with side_by_side(jobs) as result:
        yield result


# -- arguments and frames (torch, no RPC) -------------------------------------------------------

def test_only_a_context_id_and_a_bool_are_routed_the_rest_goes_to_pytorch() -> None:
    from distviz.tracing.hooks.rref import Args, parse

    assert parse((5,), {}) == Args(5, False)
    assert parse((5, True), {}) == Args(5, True)
    assert parse((), {"dist_autograd_ctx_id": 5, "retain_graph": True}) == Args(5, True)
    for args, kwargs in [((), {}), ((-1,), {}), ((5.0,), {}), ((True,), {}), ((5, 1), {}),
                         ((5,), {"dist_autograd_ctx_id": 6}), ((5,), {"retain": True}),
                         ((5, False, 1), {})]:
        assert parse(args, kwargs) is None, (args, kwargs)


def test_the_owner_sees_the_caller_s_line_and_its_variable_for_the_rref() -> None:
    import torch

    from distviz.frames import own_frames
    from distviz.tracing.hooks.rref import CallerSite, rref_variable, stand_in
    from distviz.tracing.shared import naming

    handle = object()
    frame = sys._getframe()
    assert rref_variable(frame, handle) == "handle"
    here = own_frames(frame)
    assert here[0][0] == str(Path(__file__).resolve())
    value = torch.ones(1, requires_grad=True) * 2
    site = CallerSite(here, "loss_rref")
    remote = stand_in(site, value)
    assert own_frames(remote) == here    # the caller's file, line and function
    assert [name for name, v in naming.frame_names(remote) if v is value] == ["loss_rref"]
    assert stand_in(CallerSite([], None), value) is None


# -- real RPC -----------------------------------------------------------------------------------

@pytest.mark.rpc
@pytest.mark.runs("errors-plain", "errors")
def test_the_program_sees_what_pytorch_gives_it_from_a_non_owner_and_the_owner(
        runs: Any) -> None:
    plain, run = runs("errors-plain"), runs("errors")
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert run.code == 7, run.stdout + run.stderr[-3000:]     # a backward raised
    expected = _outcomes(plain.stdout)
    assert len(expected) == 12 and _outcomes(run.stdout) == expected
    said = dict(ln.split(": ", 1) for ln in expected)
    # the cases PyTorch refuses, measured plain (the message without PyTorch's C++ backtrace)
    assert said["non-owner refuse"].startswith(
        "raised builtins.RuntimeError: 'Error on Node 2: Refuse.backward refuses this batch'")
    assert said["non-owner no-grad"].startswith(
        "raised builtins.RuntimeError: 'requires_grad not set on root'")
    assert said["non-owner list"].startswith("raised builtins.RuntimeError: 'RRef should "
                                             "contain a tensor for .backward()'")
    assert said["non-owner raise"] == said["non-owner list"]
    assert said["non-owner other context"].startswith(
        "raised builtins.RuntimeError: 'Could not find autograd context with id: ")
    assert "User RRefs require 'dist_autograd_ctx_id' to be specified" in \
        said["non-owner no context id"]
    assert said["non-owner ok"] == said["owner ok"] == "returned None; gradients [[8.0, 8.0]]"


def _frames(stdout: str) -> dict[str, list[str]]:
    """Each raised exception's traceback as the program printed it: ``file:line in name``."""
    return {label: frames.split(" < ") for label, frames in
            (ln[len("frames "):].split(": ", 1) for ln in stdout.splitlines()
             if ln.startswith("frames "))}


@pytest.mark.rpc
@pytest.mark.runs("errors-plain", "errors")
def test_a_routed_error_s_traceback_holds_one_frame_of_distviz_s_and_none_below_it(
        runs: Any) -> None:
    """Plain, PyTorch's C++ method raises: the traceback ends at the program's line (or
    ``rpc.RRef``'s Python method in torch that calls it). Traced,
    the routed method's own frame is the one left (a Python function always adds its own),
    then nothing: not the owner's recording, the watch or PyTorch's backward under them."""
    plain, traced = _frames(runs("errors-plain").stdout), _frames(runs("errors").stdout)
    line = _line("result = fn(*args)")
    errors = [label for label in plain if label.startswith(("non-owner", "owner"))]
    assert {"non-owner refuse", "non-owner no-grad", "owner refuse", "owner no-grad",
            "owner other context"} <= set(errors), plain
    for label in errors:
        # the program's line, then (for ``rpc.RRef``, a Python class) torch's ``method``
        assert plain[label][0] == f"rref_backward.py:{line} in outcome", (label, plain)
        assert all(f.startswith("api.py:") for f in plain[label][1:]), (label, plain)
        assert traced[label][:-1] == plain[label], (label, traced)
        assert traced[label][-1].startswith("rref.py:") and \
            traced[label][-1].endswith(" in backward"), (label, traced)


@pytest.mark.rpc
@pytest.mark.runs("errors")
def test_a_refused_rref_backward_is_named_as_such_in_the_notes(runs: Any) -> None:
    notes = runs("errors").index["notes"]
    assert any(n.startswith("head: RRef.backward(") and "was called outside a dist_autograd "
               "context (PyTorch: Could not find autograd context with id: " in n
               for n in notes), notes
    assert "trainer: an RRef.backward call was not recorded: PyTorch rejected its value " \
        "(RuntimeError: Could not find autograd context with id: " in "\n".join(notes), notes
    assert any("an RRef.backward call was not recorded: PyTorch rejected its value "
               "(RuntimeError: requires_grad not set on root" in n for n in notes), notes
    assert not [n for n in notes if "dist_autograd.backward" in n], notes


@pytest.mark.rpc
@pytest.mark.runs("owner")
def test_a_process_whose_backwards_were_all_recorded_is_named_by_its_worker(
        runs: Any) -> None:
    run = runs("owner")
    assert run.code == 0, run.stdout + run.stderr[-3000:]
    assert run.row("trainer", 1)["agreement"] == "agrees"     # recorded in full, not watched
    assert list(run.index["backwards"]) == ["trainer"], run.index["backwards"]
    assert any(ln.startswith("trainer: 1 backward call: median") for ln in
               run.stdout.splitlines()), run.stdout
    assert " pid " not in run.stdout.replace("(pid", "")


@pytest.mark.rpc
@pytest.mark.runs("api-hang")
def test_under_the_python_api_a_routed_predicted_hang_raises_what_dist_autograd_does(
        runs: Any) -> None:
    proc = runs("api-hang")
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = dict(ln.split(": ", 1) for ln in proc.stdout.splitlines() if ln.startswith("hang "))
    kind = "raised distviz.tracing.shared.stop.HangPredicted: "
    assert said["hang dist_autograd.backward"].startswith(kind), said
    assert said["hang RRef.backward"].startswith(kind), said
    line = _line("extra = rpc.rpc_sync(to=")
    assert f"the result of rpc_sync(get_extra) at {PROGRAM}:{line} in armed_loss, " \
        "assigned to `extra`, is not used by the loss (`loss`)" in said["hang RRef.backward"]


@pytest.mark.rpc
@pytest.mark.runs("errors")
def test_an_rref_backward_is_recorded_on_the_owner_and_agrees(runs: Any) -> None:
    run = runs("errors")
    # from the trainer (not the owner): head is the initiator; from the owner: the trainer
    head, trainer = run.context("head", 1), run.context("trainer", 1)
    assert head.workers == ["trainer", "body", "head"] and head.initiator == "head"
    assert head.passes[0].root_vars == ["loss_rref"]     # the caller's variable for the RRef
    assert trainer.initiator == "trainer" and trainer.passes[0].root_vars == ["loss_rref"]
    for initiator in ("head", "trainer"):
        row = run.row(initiator, 1)
        assert row["outcome"] == "completed" and row["agreement"] == "agrees", row
    # a backward that raised on the owner is watched there, and said
    assert run.row("head", 2)["outcome"] == "error"
    assert any("head context 2: the backward raised: Error on Node 2: Refuse.backward "
               "refuses this batch" in ln for ln in run.stderr.splitlines())


@pytest.mark.rpc
@pytest.mark.runs("late")
def test_a_late_hang_through_rref_backward_is_explained_live_and_stopped(runs: Any) -> None:
    run, seconds = runs("late")
    assert run.code == 6, run.stdout + run.stderr[-3000:]
    live = [ln for ln in run.stderr.splitlines() if ln.startswith("distviz: ")]
    assert any("head context 3: PyTorch's backward has not returned after 3 s" in ln and
               "predicts that it hangs (watched)" in ln for ln in live), run.stderr
    line = _line("extra = rpc.rpc_sync(")
    assert any(f"rpc_sync(get_extra) at tests/programs/rref_backward.py:{line} in head_loss, "
               "assigned to `extra`, is not used by the loss (`loss_rref`)" in ln
               for ln in live), live
    assert "step 2 done" in run.stdout and "step 3 done" not in run.stdout
    # long before PyTorch's own RPC time-out (60 s); ``finish`` checked every worker is gone
    assert "ran for more than set timeout" not in run.stderr and seconds < 55
    # context 1 recorded in full, context 2 watched (returned in time: nothing written)
    assert sorted(run.traces) == ["head.ctx1.trace.json", "head.ctx3.trace.json"]
    row = run.row("head", 3)
    assert row["watched"] and row["outcome"] == "hang" and row["agreement"] == "agrees"
    assert run.row("head", 1)["agreement"] == "agrees"


SUITE = ROOT / "tests" / "programs" / "pytest_suite"


def _plugin(tmp: Path) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp / "out"
    proc = subprocess.run([sys.executable, "-m", "pytest", "suite_rref.py", "-p",
                           "no:cacheprovider", f"--distviz={out}"], cwd=SUITE,
                          env=_environment(tmp), capture_output=True, text=True,
                          timeout=HANG_GUARD_S)
    return proc, out


@pytest.mark.rpc
@pytest.mark.runs("plugin")
def test_under_the_pytest_plugin_each_rref_backward_is_recorded_on_its_owner(
        runs: Any) -> None:
    proc, out = runs("plugin")
    assert proc.returncode == 0, proc.stdout + proc.stderr     # pytest's own status
    assert "2 passed" in proc.stdout
    index = json.loads((out / "index.json").read_text(encoding="utf-8"))
    rows = sorted((c["test"].split("::")[1], c["initiator"], c["context"], c["outcome"],
                   c["agreement"]) for c in index["contexts"])
    assert rows == [("test_rref_backward_from_another_worker", "head", 1, "completed", "agrees"),
                    ("test_rref_backward_on_the_owner", "trainer", 1, "completed", "agrees")]


@pytest.mark.rpc
@pytest.mark.runs("api")
def test_the_python_api_runs_an_rref_backward_on_its_owner(runs: Any) -> None:
    from distviz.trace import load

    proc, folder = runs("api")
    assert proc.returncode == 0, proc.stderr[-3000:]
    said = [ln for ln in proc.stdout.splitlines() if ln.startswith("api ")]
    assert said == [
        "api non-owner: initiator head, workers ['trainer', 'body', 'head'], roots "
        "['loss_rref'], real completed, on disk completed, gradients [[8.0, 8.0]]",
        "api owner: initiator trainer, workers ['trainer', 'body'], roots ['loss_rref'], "
        "real completed, on disk completed, gradients [[8.0, 8.0]]"]
    for where in ("non-owner", "owner"):     # written by the owner, where the caller said
        traced = load(folder / f"{where}.json").meta.traced or {}
        assert traced["agreement"].startswith("replay matches PyTorch on all"), traced


# -- a backward called from TorchScript ---------------------------------------------------------

@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_a_scripted_function_is_watched_when_its_graph_runs_a_distributed_backward() -> None:
    import torch
    import torch.distributed.autograd as dist_autograd

    from distviz.tracing.hooks.scripted import late_text, runs_backward

    @torch.jit.script
    def step(context_id: int, loss: torch.Tensor) -> None:
        dist_autograd.backward(context_id, [loss])

    @torch.jit.script
    def outer(context_id: int, loss: torch.Tensor) -> None:
        step(context_id, loss)

    @torch.jit.script
    def double(x: torch.Tensor) -> torch.Tensor:
        return x * 2

    assert runs_backward(step) and runs_backward(outer) and not runs_backward(double)
    assert late_text("__torch__.step", "train.py:9 in run", 3.0).startswith(
        "the scripted function __torch__.step called at train.py:9 in run, which runs "
        "dist_autograd.backward in TorchScript, has not returned after 3 s; distviz cannot "
        "record a backward called from TorchScript")


def _scripted_hang(tmp: Path) -> Traced:
    program = [str(SCRIPTED), "hang"]
    err = tmp / "stderr.txt"
    with err.open("w") as sink:
        proc = subprocess.Popen(trace_command(tmp, program, "--hang-timeout", "1"),
                                cwd=ROOT, env=_environment(tmp), stdout=subprocess.PIPE,
                                stderr=sink, text=True)
        deadline = time.monotonic() + HANG_GUARD_S
        while time.monotonic() < deadline and proc.poll() is None and \
                "has not returned after 1 s" not in err.read_text():
            time.sleep(0.3)
        proc.send_signal(signal.SIGINT)     # PyTorch's backward never returns: stop it
        stdout, _ = proc.communicate(timeout=HANG_GUARD_S)
    return finish(tmp, proc, stdout, err.read_text())


@pytest.mark.rpc
@pytest.mark.runs("scripted")
def test_a_hang_in_a_scripted_backward_is_said_at_its_deadline(runs: Any) -> None:
    run = runs("scripted")
    assert run.code == 130, run.stdout + run.stderr[-3000:]
    line = _line("scripted_backward(context_id, loss)", str(SCRIPTED))
    said = (f"worker0: the scripted function __torch__.__mp_main__.scripted_backward called at "
            f"tests/programs/scripted_backward.py:{line} in run_worker, which runs "
            "dist_autograd.backward in TorchScript, has not returned after 1 s")
    assert f"distviz: {said}" in run.stderr, run.stderr
    assert any(said in note for note in run.index["notes"]), run.index["notes"]
