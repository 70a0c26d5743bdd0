"""Gradients never applied, missing or all zeros, named live, and ``--strict``
(``distviz.tracing.hooks.applied``).

The programs under ``tests/programs/applied`` (real RPC) each make one mistake with local
``torch.optim`` optimizers after a distributed backward; a plain run of each is the truth: on
every owner it prints what ``dist_autograd.get_gradients(context_id)`` holds for each
parameter and the state of its ``.grad`` (``truth NAME: context=none|zero|value
grad=none|stale|fresh``). Under ``distviz trace`` each mistake is named live and in the notes,
at the program's line (found in the program's source here), with the parameters the truth
says; the program's own output is the plain run's; ``--strict`` exits with 9 where the
default keeps PyTorch's status (0); the program that copies the context's gradients gets no
note; and under ``pytest --distviz --distviz-strict`` the test whose optimizer never applies
its gradients fails, the correct one passes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from builders.traced import ROOT, Traced, _environment, run_traced
from guards import HANG_GUARD_S
from side_by_side import marked, side_by_side

from distviz.limits import EXIT_GRADIENT, EXIT_OK

FOLDER = Path("tests") / "programs" / "applied"
SUITE_TESTS = ("suite_applied.py::test_local_head_stepped_after_the_context",
               "suite_applied.py::test_local_head_with_the_gradients_copied")


def _plain(tmp: Path, argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *argv], cwd=ROOT, env=_environment(tmp),
                          capture_output=True, text=True, timeout=HANG_GUARD_S)


def _suite(tmp: Path) -> subprocess.CompletedProcess[str]:
    """``pytest --distviz=DIR --distviz-strict`` on ``suite_applied.py``, from its folder."""
    env = _environment(tmp)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(ROOT / FOLDER)])
    argv = [sys.executable, "-m", "pytest", "suite_applied.py", "-p", "no:cacheprovider",
            "-rA", f"--distviz={tmp / 'traces'}", "--distviz-strict"]
    return subprocess.run(argv, cwd=ROOT / FOLDER, env=env, capture_output=True, text=True,
                          timeout=HANG_GUARD_S)


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``"program.py mode"`` traced, ``"... --strict"`` traced with ``--strict``,
    ``"...:plain"`` plain, ``"suite"`` the pytest suite."""
    jobs: dict[str, Any] = {}
    for name in marked(request):
        tmp = tmp_path_factory.mktemp(name.replace(":", "-").replace(" ", "-"))
        args, _, how = name.partition(":")
        argv = args.split()
        options = [a for a in argv if a.startswith("--")]
        program = [str(FOLDER / argv[0]), *[a for a in argv[1:] if not a.startswith("--")]]
        if name == "suite":
            jobs[name] = partial(_suite, tmp)
        elif how == "plain":
            jobs[name] = partial(_plain, tmp, program)
        else:
            jobs[name] = partial(run_traced, tmp, program, *options)
    with side_by_side(jobs) as result:
        yield result


# -- the truth and the program's line -------------------------------------------------------------

def truth(stdout: str) -> list[tuple[str, str, str]]:
    """``(parameter, context, grad)`` per ``truth`` line, in the order printed."""
    out = []
    for line in stdout.splitlines():
        if line.startswith("truth "):
            name, _, rest = line[len("truth "):].partition(": ")
            ctx, grad = (part.split("=", 1)[1] for part in rest.split())
            out.append((name, ctx, grad))
    return out


def step_line(program: str, text: str, function: str, nth: int = 0) -> str:
    """``tests/programs/applied/P.py:N in FUNCTION`` for the ``nth`` line whose stripped text
    is ``text`` (read from the program's source, not written here)."""
    lines = (ROOT / FOLDER / program).read_text(encoding="utf-8").splitlines()
    found = [k + 1 for k, ln in enumerate(lines) if ln.strip() == text]
    assert len(found) > nth, (program, text, found)
    return f"{(FOLDER / program).as_posix()}:{found[nth]} in {function}"


def said(run: Traced, worker: str, start: str) -> list[str]:
    """The live lines of ``worker`` that start with ``start``."""
    prefix = f"distviz: {worker}: {start}"
    return [ln[len("distviz: "):] for ln in run.stderr.splitlines() if ln.startswith(prefix)]


def noted(run: Traced, line: str) -> None:
    """The live line is in the summary and in ``index.json``'s notes, once."""
    assert line in run.stdout.splitlines(), run.stdout[-3000:]
    assert run.index["notes"].count(line) == 1, run.index["notes"]


def _lines(stdout: str, prefix: str) -> list[str]:
    return [ln for ln in stdout.splitlines() if ln.startswith(prefix)]


def _names(params: list[str]) -> str:
    return ", ".join(params)


# -- never applied ------------------------------------------------------------------------------

@pytest.mark.rpc
@pytest.mark.runs("ps_local_sgd.py plain --strict", "ps_local_sgd.py plain:plain")
def test_a_parameter_servers_local_sgd_after_a_distributed_backward_is_named(runs: Any) -> None:
    run, plain = runs("ps_local_sgd.py plain --strict"), runs("ps_local_sgd.py plain:plain")
    assert plain.returncode == 0, plain.stderr[-3000:]
    got = truth(plain.stdout)
    # the truth: every gradient is in the context, none in .grad, the weights never change
    assert got and {(c, g) for _, c, g in got} == {("value", "none")}
    before, after = _lines(plain.stdout, "weights ")
    assert before.split(": ")[1] == after.split(": ")[1]
    assert truth(run.stdout) == got                       # the program's own, traced
    params = list(dict.fromkeys(n for n, _, _ in got))
    site = step_line("ps_local_sgd.py", "OPT.step()", "ps_step")
    lines = said(run, "ps", site)
    assert len(lines) == 1, run.stderr[-3000:]
    assert lines[0].startswith(f"ps: {site}: `OPT.step()` steps a local SGD over "
                               f"{len(params)} parameters whose gradient a distributed "
                               "backward left in context id "), lines
    assert f"({_names(params)}), but they have no .grad" in lines[0]
    assert "DistributedOptimizer" in lines[0] and "get_gradients" in lines[0]
    noted(run, lines[0])
    assert run.code == EXIT_GRADIENT == run.index["exit_code"], run.stdout[-2000:]
    assert run.stdout.splitlines()[-1].startswith(f"exit status {int(EXIT_GRADIENT)}: ")


@pytest.mark.rpc
@pytest.mark.runs("local_head.py stale", "local_head.py stale:plain")
def test_a_local_heads_stale_grad_is_named_and_the_default_keeps_pytorchs_status(
        runs: Any) -> None:
    run, plain = runs("local_head.py stale"), runs("local_head.py stale:plain")
    assert plain.returncode == 0, plain.stderr[-3000:]
    got = truth(plain.stdout)
    assert truth(run.stdout) == got and _lines(run.stdout, "weights ") == \
        _lines(plain.stdout, "weights ")
    # the truth: from the second step on, .grad is the warm-up's, the context holds values
    stale = [n for n, c, g in got if g == "stale" and c == "value"]
    assert stale and not [g for _, _, g in got[:2] if g == "stale"], got
    params = list(dict.fromkeys(n for n, _, _ in got))
    site = step_line("local_head.py", "opt.step()", "train", 0)
    lines = said(run, "trainer", site)
    assert len(lines) == 1, run.stderr[-3000:]
    assert "left in context 2 (id " in lines[0], lines      # the second step: first stale
    assert f"({_names(params)}), but their .grad is stale (unchanged since the previous step)" \
        in lines[0]
    noted(run, lines[0])
    assert run.code == plain.returncode == EXIT_OK            # the default: PyTorch's status


@pytest.mark.rpc
@pytest.mark.runs("local_head.py copy --strict")
def test_a_program_that_copies_the_contexts_gradients_gets_no_note(runs: Any) -> None:
    run = runs("local_head.py copy --strict")
    assert run.code == EXIT_OK, run.stdout[-3000:] + run.stderr[-3000:]
    before, after = _lines(run.stdout, "weights ")
    assert before.split(": ")[1] != after.split(": ")[1]      # it trains
    assert not [n for n in run.index["notes"] if "gradient" in n or ".grad" in n], \
        run.index["notes"]
    assert not [ln for ln in run.stderr.splitlines() if ln.startswith("distviz: trainer: ")
                or ln.startswith("distviz: ps: ")], run.stderr[-3000:]


# -- missing and zero gradients ------------------------------------------------------------------

@pytest.mark.rpc
@pytest.mark.runs("pipeline_detach.py detach", "pipeline_detach.py detach:plain")
def test_a_shard_that_detaches_its_output_has_its_parameters_named(runs: Any) -> None:
    run, plain = runs("pipeline_detach.py detach"), runs("pipeline_detach.py detach:plain")
    assert plain.returncode == run.code == 0, run.stderr[-3000:]
    got = truth(plain.stdout)
    assert truth(run.stdout) == got
    missing = list(dict.fromkeys(n for n, c, _ in got if c == "none"))
    reached = {n for n, c, _ in got if c != "none"}
    # the truth: shard1's parameters are in no context, shard2's are
    assert missing and all(n.startswith("shard1.") for n in missing), got
    assert reached and not reached & set(missing)
    lines = said(run, "shard1", "")
    assert lines == [f"shard1: {len(missing)} parameters of a local optimizer got no gradient "
                     f"in any distributed backward ({_names(missing)}): "
                     "dist_autograd.get_gradients(context_id) on their owner held none for "
                     f"them in any of the {len(got) // 4} steps that asked, so the optimizer "
                     "never changes them: nothing the loss uses depends on them with grad "
                     "enabled (an output used through .detach() or under torch.no_grad(), or "
                     "not used)"], run.stderr[-3000:]
    noted(run, lines[0])
    assert not said(run, "shard2", ""), run.stderr[-3000:]
    # the recorded context (the first) says it too, with distviz why's answer, on its own
    recorded = said(run, "master", "context 1: ")
    assert recorded == [
        f"master: context 1: {len(missing)} parameters on shard1 got no gradient "
        f"({_names(missing)}): the parameter `{missing[0]}` on shard1 requires grad, but no "
        "node of the context's graph accumulates into it: the forward did not use it with grad "
        "enabled (it was not used, used through .detach(), or used under torch.no_grad()). "
        "Fix: use it in the forward inside the dist_autograd context, with grad enabled and "
        "without .detach()"], run.stderr[-3000:]
    noted(run, recorded[0])


@pytest.mark.rpc
@pytest.mark.runs("zero_unused.py unused", "zero_unused.py unused:plain")
def test_an_rpc_result_left_out_of_the_loss_has_its_zero_gradients_named(runs: Any) -> None:
    run, plain = runs("zero_unused.py unused"), runs("zero_unused.py unused:plain")
    assert plain.returncode == run.code == 0, run.stderr[-3000:]
    got = truth(plain.stdout)
    assert truth(run.stdout) == got
    zeros = list(dict.fromkeys(n for n, c, _ in got if c == "zero"))
    assert zeros and all(".aux." in n for n in zeros), got     # the truth
    call = step_line("zero_unused.py", 'main, aux = rpc.rpc_sync("ps", forward, args=(x,))',
                     "train")
    lines = said(run, "trainer", "context 1: ")
    assert len(lines) == 1, run.stderr[-3000:]
    named, _, rest = lines[0][len("trainer: context 1: "):].partition(" got ")
    assert sorted(named.split(", ")) == sorted(zeros), lines     # in the graph's order
    assert rest.startswith("all-zero gradients in the context: output 1 (`aux`) of "
                           f"rpc_sync(forward) to ps at {call}"), lines
    assert lines[0].endswith(" is not used by the loss (`loss`): FAST mode sends zeros for it. "
                             "Fix: use that result in the loss, or leave it out of what the "
                             "RPC returns if it needs no gradient"), lines
    noted(run, lines[0])
    # the PS copies the context's gradients before each step: nothing else to say
    assert not said(run, "ps", ""), run.stderr[-3000:]


# -- the pytest plugin ---------------------------------------------------------------------------

@pytest.mark.rpc
@pytest.mark.runs("suite")
def test_the_plugin_fails_under_strict_the_test_whose_gradients_are_never_applied(
        runs: Any) -> None:
    proc = runs("suite")
    out = proc.stdout + proc.stderr
    after, copied = SUITE_TESTS
    assert proc.returncode == 1, out[-4000:]
    assert f"FAILED {after}" in out and f"PASSED {copied}" in out, out[-4000:]
    # the step after the ``with`` block, shown from the suite's folder (pytest's working one)
    site = step_line("local_head.py", "opt.step()", "train", 1).replace(
        f"{FOLDER.as_posix()}/", "")
    assert "distviz --distviz-strict: 1 gradient note in this test's run:" in out
    assert f"  trainer: {site}" in out, out[-4000:]
