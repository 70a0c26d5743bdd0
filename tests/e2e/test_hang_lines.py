"""FAST-mode hangs named at the program's own line (``distviz.replay.dropped``), on a real
pipeline of two shards behind RRefs (``tests/programs/hangs/pipeline.py``) under
``distviz trace``.

Micro-batch 0 left out of the loss is named at the line that builds the loss; a validation
forward inside the training context at the line of that forward, with the fix that works in
FAST mode (outside the context: the same forward under ``torch.no_grad()`` inside it hangs too,
which PyTorch's own backward shows here); the same program gives the same words on two runs;
nothing blames the shards' own ``x = x_rref.to_here()``; the validation forward moved after the
backward completes and agrees. The hanging runs that let PyTorch's backward run
(``--on-hang continue``) end through the program's own watchdog (``WATCHDOG_S``): PyTorch's
truth is that ``dist_autograd.backward`` does not return.
"""

from __future__ import annotations

import subprocess
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from builders.traced import ROOT, Traced, _environment, finish, run_traced, trace_command
from guards import HANG_GUARD_S
from side_by_side import marked, side_by_side

PROGRAM = str(Path("tests") / "programs" / "hangs" / "pipeline.py")
WATCHDOG_S = "8"


def _line(text: str, nth: int = 1) -> int:
    """The line of the program whose code starts with ``text`` (its ``nth`` such line)."""
    found = [k for k, ln in enumerate((ROOT / PROGRAM).read_text().splitlines(), 1)
             if ln.strip().startswith(text)]
    return found[nth - 1]


def _at(line: int, function: str = "train") -> str:
    return f"{PROGRAM}:{line} in {function}"


def _real(tmp: Path, mode: str) -> Traced:
    """``distviz trace --on-hang continue``: PyTorch's backward runs; the program's watchdog
    ends it."""
    env = {**_environment(tmp), "WATCHDOG_S": WATCHDOG_S}
    proc = subprocess.run(trace_command(tmp, [PROGRAM, mode], "--on-hang", "continue",
                                        "--hang-timeout", "2"),
                          cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=HANG_GUARD_S)
    return finish(tmp, proc, proc.stdout, proc.stderr)


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    jobs: dict[str, Any] = {}
    for name in marked(request):
        mode, _, how = name.partition(":")
        tmp = tmp_path_factory.mktemp(name.replace(":", "-"))
        jobs[name] = partial(_real, tmp, mode) if how == "real" else \
            partial(run_traced, tmp, [PROGRAM, mode])
    with side_by_side(jobs) as result:
        yield result


def _words(run: Traced) -> list[str]:
    """The live explanation, without the lines that name the run's own files."""
    return [ln for ln in run.stderr.splitlines() if ln.startswith("distviz: ")
            and not ln.startswith(("distviz: tracing ", "distviz: trace: ",
                                   "distviz: --on-hang "))
            and "PyTorch's backward has not returned" not in ln
            and "the program keeps running" not in ln and "stopping the program" not in ln]


def _no_inner_blame(text: str) -> None:
    assert "overwrit" not in text and "`x`" not in text, text
    assert f"{PROGRAM}:{_line('x = x_rref.to_here()')} in forward," not in text, text


@pytest.mark.rpc
@pytest.mark.runs("skip-first", "skip-first:real")
def test_a_micro_batch_left_out_is_named_at_the_loss_the_same_on_two_runs(runs: Any) -> None:
    run, again = runs("skip-first"), runs("skip-first:real")
    assert run.code == 6, run.stdout + run.stderr[-3000:]
    text = "\n".join(_words(run))
    assert (f"the 1st of 3 results of rpc_async(forward on an RRef) at "
            f"{PROGRAM}:{_line('z_fut = ')} in forward, made through `outputs = model(inputs)` "
            f"at {_at(_line('outputs = model(inputs)'))}, is left out of the loss built at "
            f"{_at(_line('loss = sum('))} (`loss = sum(loss_fn(outputs[i], targets[i]) for i "
            "in range(first, len(outputs)))`)") in text, text
    assert ("include every result of `outputs = model(inputs)` (every micro-batch's output) in "
            f"the loss at {_at(_line('loss = sum('))}") in text, text
    _no_inner_blame(text)
    assert _words(again) == _words(run)          # the same words on two runs
    # PyTorch's truth: its backward did not return, until the program's watchdog ended it
    t = again.context("master", 1)
    assert t.real is not None and t.real["outcome"] == "hang"
    assert f"backward did not return after {WATCHDOG_S} s" in again.stdout
    assert "step 0 gradients" not in again.stdout


@pytest.mark.rpc
@pytest.mark.runs("validate", "validate-no-grad:real")
def test_a_validation_forward_in_the_context_is_named_at_its_line(runs: Any) -> None:
    run = runs("validate")
    assert run.code == 6, run.stdout + run.stderr[-3000:]
    text = "\n".join(_words(run))
    assert (f"made through `val_outputs = model(val_inputs)` at "
            f"{_at(_line('val_outputs = model(val_inputs)'))}, a second forward inside the "
            "training context, is not used by the loss built at "
            f"{_at(_line('loss = sum('))}") in text, text
    assert ("fixes: run `val_outputs = model(val_inputs)` outside the `with "
            "dist_autograd.context()` block (after the backward; under torch.no_grad() if it "
            "needs no gradient)") in text, text
    _no_inner_blame(text)
    assert run.index["contexts"][0]["explanation"] == next(
        ln for ln in run.stdout.splitlines() if ln.startswith("master context 1: ")
    ).removeprefix("master context 1: ")
    # the fix says torch.no_grad() inside the context is no fix: PyTorch hangs on that too
    no_grad = runs("validate-no-grad:real")
    t = no_grad.context("master", 1)
    assert t.real is not None and t.real["outcome"] == "hang"
    assert f"backward did not return after {WATCHDOG_S} s" in no_grad.stdout
    said = "\n".join(_words(no_grad))
    assert (f"from master, made through `val_outputs = model(val_inputs)` at "
            f"{_at(_line('val_outputs = model(val_inputs)', 2))}, was made under "
            "torch.no_grad()") in said, said
    assert "torch.no_grad() inside the context does not help" in said, said


@pytest.mark.rpc
@pytest.mark.runs("validate-after")
def test_the_validation_forward_after_the_backward_completes_and_agrees(runs: Any) -> None:
    run = runs("validate-after")
    assert run.code == 0, run.stdout + run.stderr[-3000:]
    assert run.row("master", 1)["outcome"] == "completed"
    assert run.row("master", 1)["agreement"] == "agrees"
    assert "step 0 validation" in run.stdout and "step 0 gradients" in run.stdout
    assert not [ln for ln in _words(run) if "gradient" in ln or "hang" in ln], run.stderr
