"""The parameters of a ``DistributedOptimizer`` that got no gradient in any backward of the run
(``distviz.tracing.hooks.optimizer``).

``tests/programs/optimizer_no_grad.py`` (a parameter server and a trainer, real RPC) runs under
``distviz trace``: a layer whose output is never used has its parameters named, by their module
paths on the owner, live, in the summary and in ``index.json``'s notes, with PyTorch's
TorchScript step (``SGD``) and its Python one (``ASGD``); a run where every parameter gets a
gradient, or one where a parameter gets one in its last step only, names none. The trained
values are the same plain and traced. The owner's count is a record per parameter, whatever the
number of steps (torch, no RPC).
"""

from __future__ import annotations

import gc
import subprocess
import sys
import tracemalloc
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from builders.traced import ROOT, Traced, _environment, run_traced
from guards import HANG_GUARD_S
from side_by_side import marked, side_by_side

PROGRAM = str(Path("tests") / "programs" / "optimizer_no_grad.py")
NAMED = ("ps: 2 parameters of a DistributedOptimizer got no gradient in any backward of the run "
         "(ps.extra.weight, ps.extra.bias): dist_autograd.get_gradients(context_id) on their "
         "owner held none for them in any of the 3 optimizer steps that asked")


def _plain(tmp: Path, args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, PROGRAM, *args], cwd=ROOT, env=_environment(tmp),
                          capture_output=True, text=True, timeout=HANG_GUARD_S)


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    jobs: dict[str, Any] = {}
    for name in marked(request):
        args, _, how = name.partition(":")
        tmp = tmp_path_factory.mktemp(name.replace(":", "-").replace(" ", "-"))
        argv = args.split()
        jobs[name] = partial(_plain, tmp, argv) if how == "plain" else \
            partial(run_traced, tmp, [PROGRAM, *argv])
    with side_by_side(jobs) as result:
        yield result


def _values(stdout: str) -> str:
    return next(ln for ln in stdout.splitlines() if ln.startswith("values: "))


def _said(run: Traced) -> list[str]:
    return [ln for ln in run.stderr.splitlines() if "of a DistributedOptimizer" in ln]


@pytest.mark.rpc
@pytest.mark.runs("unused 3 sgd", "unused 3 sgd:plain")
def test_a_layer_whose_output_is_unused_has_its_parameters_named(runs: Any) -> None:
    run, plain = runs("unused 3 sgd"), runs("unused 3 sgd:plain")
    assert plain.returncode == run.code == 0, run.stdout + run.stderr[-3000:]
    assert _values(run.stdout) == _values(plain.stdout)        # the program's own result
    assert _said(run) == [f"distviz: {NAMED}"], run.stderr
    assert NAMED in run.stdout.splitlines()                    # the summary
    assert run.index["notes"].count(NAMED) == 1


@pytest.mark.rpc
@pytest.mark.runs("unused 3 asgd")
def test_the_python_local_optimizer_is_watched_too(runs: Any) -> None:
    run = runs("unused 3 asgd")
    assert run.code == 0, run.stdout + run.stderr[-3000:]
    assert run.index["notes"].count(NAMED) == 1, run.index["notes"]


@pytest.mark.rpc
@pytest.mark.runs("all 3 sgd", "sometimes 3 sgd")
def test_no_parameter_is_named_when_each_gets_a_gradient_in_some_step(runs: Any) -> None:
    for name in ("all 3 sgd", "sometimes 3 sgd"):
        run = runs(name)
        assert run.code == 0, run.stdout + run.stderr[-3000:]
        assert not _said(run), run.stderr
        assert not [n for n in run.index["notes"] if "DistributedOptimizer" in n]


def _step(params: list[Any], grads: dict[Any, Any], times: int) -> set[bool]:
    from distviz.tracing.hooks import optimizer

    return {optimizer.mark(params, grads, "ps") for _ in range(times)}


def test_the_owners_count_is_one_record_per_parameter_whatever_the_steps() -> None:
    import torch

    from distviz.tracing.hooks import optimizer

    optimizer._forget()
    used, unused = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(3))
    grads = {used: torch.ones(2)}
    first = _step([used, unused], grads, 1)
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        later = _step([used, unused], grads, 10_000)
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename")
                if s.traceback[0].filename == optimizer.__file__)
    assert first == later == {False} and grown < 1024, grown
    assert len(optimizer._PARAMS) == 2
    rec = optimizer._PARAMS[id(unused)]
    assert (rec.seen, rec.steps, rec.name) == (False, 10_001, "a parameter of shape [3] on ps")
    assert optimizer._PARAMS[id(used)].seen
    assert _step([used], grads, 1) == {True}     # every parameter it holds has had one
    del unused     # a freed parameter that never got one is kept by name, not by record
    # naming read this frame's f_locals (a test file is the program's own code), and Python
    # 3.11 keeps that snapshot until it is read again
    sys._getframe().f_locals  # noqa: B018
    gc.collect()
    gone = dict(optimizer._GONE)
    assert len(optimizer._PARAMS) == 1, optimizer._PARAMS
    assert gone == {"a parameter of shape [3] on ps": 10_001}
    optimizer._forget()


def test_a_local_optimizer_is_asked_by_a_key_while_its_parameters_live() -> None:
    """Later asks name a local optimizer by a key for its parameters (a TorchScript optimizer's
    Python object is made anew each time its RRef is read); a freed parameter drops the key
    and the caller is told to send the RRef again."""
    import torch

    from distviz.tracing.hooks import optimizer

    optimizer._forget()
    a, b = torch.nn.Parameter(torch.ones(2)), torch.nn.Parameter(torch.ones(2))
    key = optimizer._key([a, b])
    assert optimizer._key([a, b]) == key and optimizer._key([a]) != key
    # no dist autograd context here: neither got a gradient, and the key is kept
    assert optimizer.check(key, 1) == (False, key)
    assert optimizer.check(key, 1) == (False, key)
    assert optimizer._PARAMS[id(a)].steps == 2
    del b
    sys._getframe().f_locals  # noqa: B018 - drop naming's snapshot of this frame's locals
    gc.collect()
    assert optimizer.check(key, 1) == (False, None)
    assert key not in optimizer._LOCALS
    optimizer._forget()
