"""Local backwards inside distributed contexts (``distviz.tracing.hooks.local_backward``).

``tests/programs/local_backward.py`` runs under ``distviz trace`` once per mode (and ``rpc``
and ``grad`` plainly too, to compare with what PyTorch alone gives): ``loss.backward()`` over a
model behind an RRef (PyTorch's internal assert), ``torch.autograd.grad`` over the same graph,
a local model's backward inside a context (gradients in ``.grad``), and a custom Function that
runs a local backward during a distributed one (checkpointing). ``suite_local.py`` of
``tests/programs/pytest_suite/`` runs under ``pytest --distviz``; fairscale's
``DistributedPipeline`` (``tests/programs/fairscale_pipeline.py``, skipped without fairscale)
with and without checkpointing, plain and traced. The walk's tests need torch but no RPC.
"""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from builders.traced import ROOT, Traced, _environment, run_traced
from guards import HANG_GUARD_S
from side_by_side import marked, side_by_side

PROGRAM = str(Path("tests") / "programs" / "local_backward.py")


def _line(text: str) -> int:
    """The line of ``tests/programs/local_backward.py`` that starts with ``text``."""
    return next(k for k, ln in enumerate((ROOT / PROGRAM).read_text().splitlines(), 1)
                if ln.strip().startswith(text))


def _live(run: Traced) -> list[str]:
    return [ln for ln in run.stderr.splitlines() if ln.startswith("distviz: ")]


def _plain(tmp: Path, mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, PROGRAM, mode], cwd=ROOT, env=_environment(tmp),
                          capture_output=True, text=True, timeout=HANG_GUARD_S)


def _error(stderr: str) -> str:
    """The last ``RuntimeError: ...`` line of a traceback."""
    return [ln for ln in stderr.splitlines() if ln.startswith("RuntimeError:")][-1]


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    jobs: dict[str, Any] = {}
    for name in marked(request):
        mode, _, how = name.partition(":")
        tmp = tmp_path_factory.mktemp(name.replace(":", "-"))
        jobs[name] = partial(_plain, tmp, mode) if how == "plain" else \
            partial(run_traced, tmp, [PROGRAM, mode])
    with side_by_side(jobs) as result:
        yield result


# -- the walk (torch, no RPC) -------------------------------------------------------------------

def test_the_walk_is_iterative_bounded_and_finds_leaves() -> None:
    import torch

    from distviz.tracing.hooks import local_explain

    w = torch.ones(2, requires_grad=True)
    x = w
    for _ in range(20_000):      # deeper than any recursion limit
        x = x * 1.0
    walked = local_explain.walk(local_explain.starts((x.sum(),)))
    assert walked.complete and walked.recvs == [] and walked.leaves == [w]
    cut = local_explain.walk(local_explain.starts((x.sum(),)), limit=100)
    assert not cut.complete and cut.leaves == []


def test_outside_a_context_the_call_goes_straight_to_pytorch() -> None:
    import torch

    from distviz.tracing.hooks import local_backward
    from distviz.tracing.snapshot import listener as snapshot_listener

    seen: list[Any] = []

    def original(*args: Any, **kwargs: Any) -> str:
        seen.append((args, kwargs))
        return "pytorch's"

    assert not snapshot_listener.OPEN and torch._C._current_graph_task_id() == -1
    wrapped = local_backward.wrap(original)
    assert wrapped(("t",), None, accumulate_grad=True) == "pytorch's"
    assert seen == [((("t",), None), {"accumulate_grad": True})]


def test_a_failure_of_distviz_s_own_never_reaches_the_program(
        monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    from distviz.tracing import callsites
    from distviz.tracing.hooks import local_backward
    from distviz.tracing.snapshot import listener as snapshot_listener

    def broken() -> None:
        raise ValueError("a bug of distviz's")

    monkeypatch.setitem(snapshot_listener.OPEN, 1, None)    # some thread is in a context
    monkeypatch.setattr(callsites, "current_context", broken)
    wrapped = local_backward.wrap(lambda *args, **kwargs: "pytorch's")
    assert wrapped(("t",), None) == "pytorch's"
    assert "could not explain a local backward: ValueError: a bug of distviz's" in \
        capfd.readouterr().err     # said on the real standard error


def test_a_backward_nested_in_a_local_one_without_rpc_is_pytorch_s_alone() -> None:
    import torch
    import torch.autograd.graph as autograd_graph

    from distviz.tracing.hooks import local_backward, local_explain

    class Nested(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, x: Any) -> Any:
            return x * 2

        @staticmethod
        def backward(ctx: Any, grad: Any) -> Any:
            inner = torch.ones(2, requires_grad=True)
            with torch.enable_grad():
                torch.autograd.backward((inner * 3).sum())
            seen.append(inner.grad)
            return grad * 2

    seen: list[Any] = []
    original = autograd_graph._engine_run_backward
    wrapped = local_backward.wrap(original)
    autograd_graph._engine_run_backward = torch.autograd._engine_run_backward = wrapped
    try:
        x = torch.ones(2, requires_grad=True)
        Nested.apply(x).sum().backward()     # no RPC started: PyTorch counts no dist backward
    finally:
        autograd_graph._engine_run_backward = torch.autograd._engine_run_backward = original
    assert not local_explain.distributed_running()
    assert x.grad is not None and x.grad.tolist() == [2.0, 2.0]
    assert seen[0].tolist() == [3.0, 3.0]


# -- real programs ------------------------------------------------------------------------------


@pytest.mark.rpc
@pytest.mark.runs("rpc", "rpc:plain")
def test_loss_backward_over_an_rref_model_is_explained_with_the_rpc_and_the_fix(
        runs: Any) -> None:
    run, plain = runs("rpc"), runs("rpc:plain")
    # the program's own failure, status and words are PyTorch's
    assert plain.returncode == run.code == 1, run.stderr[-3000:]
    assert "graphTask_ INTERNAL ASSERT FAILED" in _error(plain.stderr)
    assert _error(run.stderr) == _error(plain.stderr)
    said = [ln for ln in _live(run) if "runs PyTorch's local autograd engine" in ln]
    assert len(said) == 1, run.stderr
    where = f"tests/programs/local_backward.py:{_line('loss.backward()')} in train"
    site = f"tests/programs/local_backward.py:{_line('out = model.rpc_sync()')} in train"
    assert said[0].startswith(f"distviz: worker0: {where} <- ")
    assert "`loss.backward()`" in said[0]
    assert (f"it meets the RecvRpcBackward of rpc_sync(forward on an RRef) to worker1 at {site}"
            in said[0]) and "assigned to `out`" in said[0]
    assert "Fix: dist_autograd.backward(context_id, [loss])" in said[0]
    # said before PyTorch's traceback, and again in the summary and index.json
    assert run.stderr.index(said[0]) < run.stderr.index("INTERNAL ASSERT FAILED")
    assert said[0][len("distviz: "):] in run.stdout
    assert said[0][len("distviz: "):] in run.index["notes"]


@pytest.mark.rpc
@pytest.mark.runs("grad", "grad:plain")
def test_autograd_grad_over_an_rpc_result_says_the_engine_stops_at_its_node(runs: Any) -> None:
    run, plain = runs("grad"), runs("grad:plain")
    assert plain.returncode == run.code == 1, run.stderr[-3000:]
    assert _error(run.stderr) == _error(plain.stderr)
    assert "appears to not have been used in the graph" in _error(plain.stderr)
    said = [ln for ln in _live(run) if "runs PyTorch's local autograd engine" in ln]
    assert len(said) == 1 and "`torch.autograd.grad(loss, [x])`" in said[0], run.stderr
    assert "holds 1 RPC node (the RecvRpcBackward of rpc_sync(forward on an RRef)" in said[0]
    assert "the local engine stops at them" in said[0] and "it meets" not in said[0]


@pytest.mark.rpc
@pytest.mark.runs("local")
def test_a_local_backward_inside_a_context_is_said_to_fill_dot_grad(runs: Any) -> None:
    run = runs("local")
    assert run.code == 0, run.stdout + run.stderr[-3000:]
    assert "in the context: 0, .grad set: True" in run.stdout   # PyTorch's own behaviour
    said = [ln for ln in _live(run) if "runs PyTorch's local autograd engine" in ln]
    assert len(said) == 1, run.stderr
    assert "its graph holds no RPC node, so its gradients go to .grad of 3 leaves" in said[0]
    assert "worker0.linear.weight" in said[0] and "worker0.linear.bias" in said[0]
    assert ("dist_autograd.get_gradients(context_id) will not hold them and "
            "DistributedOptimizer.step(context_id) will not apply them") in said[0]


@pytest.mark.rpc
@pytest.mark.runs("nested")
def test_a_local_backward_inside_a_distributed_one_names_the_parameters_it_fills(
        runs: Any) -> None:
    run = runs("nested")
    assert run.code == 0, run.stdout + run.stderr[-3000:]
    # PyTorch's behaviour, which distviz explains: the layer's gradients are in .grad only
    assert "worker1 parameters (in the context, .grad set): [(False, True), (False, True)]" \
        in run.stdout
    said = [ln for ln in _live(run) if "got their gradient in .grad" in ln]
    assert len(said) == 1, run.stderr
    line = _line("torch.autograd.backward(out, grad)")
    # the context, told on worker1 by its recording there (the first context is recorded)
    assert said[0].startswith("distviz: worker1: during the distributed backward of context "
                              "id 0 of worker0 (the Function is worker1/RecomputedBackward#")
    trace = next(iter(run.traces.values()))
    node = said[0].split("(the Function is ")[1].split(" ")[0]
    assert node in {n.id for n in trace.nodes}
    assert (f"RecomputedBackward's backward ran a local torch.autograd.backward at "
            f"tests/programs/local_backward.py:{line} in backward") in said[0]
    assert "2 parameters" in said[0] and "(worker1.layer.weight, worker1.layer.bias)" in said[0]
    assert "DistributedOptimizer.step(context_id) will not apply them" in said[0]
    note = said[0][len("distviz: worker1: "):]
    assert f"worker1: {note}" in run.index["notes"]
    # the distributed backward itself is recorded and checked as before
    assert [c["agreement"] for c in run.index["contexts"]] == ["agrees"]


# -- fairscale's checkpointed pipeline ------------------------------------------------------------

FAIRSCALE = str(Path("tests") / "programs" / "fairscale_pipeline.py")


def _table(stdout: str) -> list[str]:
    return [ln for ln in stdout.splitlines() if ln.startswith("checkpoint=")]


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Any:
    pytest.importorskip("fairscale")
    jobs = {"plain": partial(subprocess.run, [sys.executable, FAIRSCALE], cwd=ROOT,
                             env=_environment(tmp_path_factory.mktemp("fs-plain")),
                             capture_output=True, text=True, timeout=HANG_GUARD_S),
            "traced": partial(run_traced, tmp_path_factory.mktemp("fs-traced"), [FAIRSCALE])}
    with side_by_side(jobs) as result:
        yield result("plain"), result("traced")


@pytest.mark.rpc
def test_fairscale_checkpointing_leaves_the_gradient_in_dot_grad_and_distviz_says_so(
        pipeline: Any) -> None:
    plain, run = pipeline
    assert plain.returncode == 0 == run.code, plain.stderr[-3000:] + run.stderr[-3000:]
    table = _table(plain.stdout)
    assert len(table) == 3 * 5 and _table(run.stdout) == table     # results unchanged
    rows = {mode: [ln for ln in table if ln.startswith(f"checkpoint={mode} param")]
            for mode in ("never", "except_last", "always")}
    # without checkpointing the context holds the whole gradient, .grad nothing
    assert all(".grad none" in ln and "context==local True" in ln for ln in rows["never"])
    # with it, the micro-batches it recomputes put their part in .grad: the context holds
    # only the last micro-batch's part ("except_last") or nothing ("always")
    assert all("context==local False" in ln and "context+.grad==local True" in ln
               for ln in rows["except_last"] + rows["always"])
    assert all("context none" in ln for ln in rows["always"])
    assert all("context==last micro-batch's part True" in ln for ln in rows["except_last"])
    assert "checkpoint=never step changed 4 of 4" in table
    assert "checkpoint=always step changed 0 of 4" in table
    # distviz names the parameters, the Function and fairscale's line on each stage's worker
    notes = [n for n in run.index["notes"] if "got their gradient in .grad" in n]
    assert sorted(n.split(":")[0] for n in notes) == ["worker1", "worker2"], run.index["notes"]
    for n in notes:
        worker = n.split(":")[0]
        assert "CheckpointBackward's backward ran a local torch.autograd.backward at " \
            "fairscale/nn/pipe/checkpoint.py:" in n
        assert f"2 parameters got their gradient in .grad, not in the context ({worker}." in n
        assert "DistributedOptimizer.step(context_id) will not apply them" in n
    # "always": the optimizer's parameters of that pipeline (the third one built) never got a
    # gradient, on each stage's owner; those of the other two pipelines did
    assert sorted(n for n in run.index["notes"] if "of a DistributedOptimizer" in n) == [
        f"{w}: 2 parameters of a DistributedOptimizer got no gradient in any backward of the "
        f"run ({w}.Linear[2].weight, {w}.Linear[2].bias): dist_autograd.get_gradients("
        "context_id) on their owner held none for them in the only optimizer step that asked"
        for w in ("worker1", "worker2")], run.index["notes"]


# -- under the pytest plugin --------------------------------------------------------------------

SUITE = ROOT / "tests" / "programs" / "pytest_suite"


@pytest.mark.rpc
def test_the_pytest_plugin_says_it_in_each_test_s_section(tmp_path: Path) -> None:
    out = tmp_path / "out"
    env = _environment(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "pytest", "suite_local.py", "-p",
                           "no:cacheprovider", "-rA", f"--distviz={out}"], cwd=SUITE, env=env,
                          capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stdout + proc.stderr     # pytest's own status
    assert "2 passed" in proc.stdout
    sections = proc.stdout.split("_ test_local_backward_")
    over, without = (next(s for s in sections if s.startswith(name))
                     for name in ("over_an_rpc_result", "without_rpc"))
    assert "note: worker0: suite_local.py:" in over and "it meets the RecvRpcBackward of " \
        "rpc_sync(scale) to worker1" in over and "assigned to `y`" in over
    assert "so its gradients go to .grad of 1 leaf (w)" in without
    index = json.loads((out / "index.json").read_text(encoding="utf-8"))
    assert len(index["notes"]) == 2 and index["contexts"] == []
