"""Each missing gradient named with the cut that caused it, at the program's line
(``distviz.tracing.hooks.cut_watch``, ``docs/messages/cuts.md``).

``tests/programs/cuts/train.py`` (a trainer with a local head, a parameter server behind an
RRef with an embedding table, and a pipeline shard behind an RRef; real RPC) runs under
``distviz trace`` once per group of mistakes that cut different parameters (three groups hold
the eight PyTorch's backward survives), once per mistake that hangs it, and once without a
mistake. The truth is a plain run of the same program that reads
``dist_autograd.get_gradients`` on each owner (one plain run for every group and each of its
mistakes alone, ``all``; one each for the two that hang, with a short RPC time-out). A
mistake's line is the one the program marks ``# cut: MISTAKE``, read from its source here.
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

from distviz.analyses.cut_answers import RunCuts
from distviz.analyses.why import why
from distviz.trace import load

PROGRAM = str(Path("tests") / "programs" / "cuts" / "train.py")
#: the mistakes PyTorch's backward survives, and the cut kind distviz must name for each
SURVIVED = {"no_grad": "no_grad", "tolist": "tolist", "data": "data",
            "requires_grad": "requires_grad_false", "parameter": "parameter_sent",
            "outside": "outside_context", "unused_layer": "never_used",
            "argument": "parameter_arg"}
#: the program's groups of them (``GROUPS`` there): one traced run each
GROUPS = ("no_grad,data,unused_layer", "tolist,requires_grad", "parameter,outside,argument")
#: the mistakes that leave an RPC's send without a gradient (PyTorch's backward hangs)
HANGS = {"item": ("item", "trainer"), "detach": ("detach", "shard")}
WORDS = {"no_grad": "torch.no_grad()", "tolist": ".tolist()", "data": ".data",
         "requires_grad_false": "requires_grad_(False)", "parameter_sent": "nn.Parameter",
         "parameter_arg": "passed to an RPC as an argument",
         "outside_context": "outside any dist_autograd context",
         "never_used": "never called in forward", "item": ".item()", "detach": ".detach()"}


def _lines() -> dict[str, int]:
    """The line of each mistake: the one marked ``# cut: MISTAKE`` in the program."""
    out = {}
    text = (ROOT / PROGRAM).read_text(encoding="utf-8")
    for n, line in enumerate(text.splitlines(), 1):
        if "# cut: " in line:
            out[line.rsplit("# cut: ", 1)[1].strip()] = n
    return out


LINES = _lines()


def _plain(tmp: Path, mistake: str) -> subprocess.CompletedProcess[str]:
    env = _environment(tmp)
    env["CUTS_RPC_TIMEOUT"] = "10"      # the hanging ones end with PyTorch's RPC time-out
    return subprocess.run([sys.executable, PROGRAM, mistake], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=HANG_GUARD_S)


@pytest.fixture(scope="module")
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Any:
    jobs: dict[str, Any] = {}
    for name in marked(request):
        mistake, _, how = name.partition(":")
        tmp = tmp_path_factory.mktemp(name.replace(":", "-"))
        jobs[name] = partial(_plain, tmp, mistake) if how == "plain" else \
            partial(run_traced, tmp, [PROGRAM, mistake])
    with side_by_side(jobs) as result:
        yield result


def _truth(plain: subprocess.CompletedProcess[str], mistake: str) -> set[str]:
    """What the plain run's owners said got no gradient for ``mistake``."""
    assert plain.returncode == 0, plain.stderr[-3000:]
    line = next(ln for ln in plain.stdout.splitlines() if ln.startswith(f"{mistake}: "))
    names = line.split("no gradient: ", 1)[1]
    return set() if names == "-" else set(names.split(", "))


def _explained(run: Traced) -> list[dict[str, Any]]:
    return [e for e in run.index["cuts"]["explained"] if e["cut"] is not None]


def _at(line: int) -> str:
    return f"{PROGRAM}:{line}"


@pytest.mark.rpc
@pytest.mark.runs("all:plain", *GROUPS)
@pytest.mark.parametrize("group", GROUPS)
def test_each_missing_gradient_is_named_with_its_cut_and_line(runs: Any, group: str) -> None:
    run, truth = runs(group), _truth(runs("all:plain"), group)
    assert run.code == 0, run.stdout + run.stderr[-3000:]
    explained = _explained(run)
    assert {n for e in explained for n in e["names"]} == truth, explained
    assert not [e for e in run.index["cuts"]["explained"] if e["cut"] is None]
    for mistake in group.split(","):
        alone = _truth(runs("all:plain"), mistake)
        assert alone, f"the plain run must show {mistake}"
        kind, line = SURVIVED[mistake], LINES[mistake]
        mine = [e for e in explained if e["cut"]["kind"] == kind]
        # the parameters the mistake alone leaves without a gradient, and no others
        assert {n for e in mine for n in e["names"]} == alone, (mistake, explained)
        for e in mine:
            cut = e["cut"]
            assert (Path(cut["file"]).name, cut["line"]) == ("train.py", line), cut
            assert _at(line) in e["text"] and WORDS[kind] in e["text"]
            said = f"{e['worker']}: {e['text']}"
            assert f"distviz: {said}" in run.stderr.splitlines(), run.stderr[-3000:]  # live
            assert said in run.index["notes"]                                      # index.json
            assert said in run.stdout.splitlines()                                 # the summary
    # the program's own output is PyTorch's: the traced run printed the same truth
    assert f"no gradient: {', '.join(sorted(truth))}" in run.stdout


@pytest.mark.rpc
@pytest.mark.runs("all:plain", *GROUPS)
def test_why_answers_for_every_parameter_the_run_names(runs: Any) -> None:
    for group in GROUPS:
        run = runs(group)
        trace_file = run.out / "trainer.ctx1.trace.json"
        cuts = RunCuts.read(trace_file)
        trace = load(str(trace_file))
        for mistake in group.split(","):
            kind = SURVIVED[mistake]
            for name in _truth(runs("all:plain"), mistake):
                answer = why(trace, name, cuts=cuts)
                assert (answer.kind, answer.gets_gradient) == ("cut", False), (mistake, answer)
                assert _at(LINES[mistake]) in answer.summary + " ".join(answer.fixes), answer
                assert WORDS[kind] in answer.summary


@pytest.mark.rpc
@pytest.mark.runs("parameter,outside")
def test_why_on_the_command_line_answers_for_a_worker_outside_the_trace(runs: Any) -> None:
    """The forward RPC made before the context: no node of the trace is ``ps.emb.weight``'s."""
    run = runs("parameter,outside")
    trace_file = run.out / "trainer.ctx1.trace.json"
    nodes = json.loads(trace_file.read_text(encoding="utf-8"))["nodes"]
    assert not [n for n in nodes if n.get("var") == "ps.emb.weight"]
    proc = subprocess.run([sys.executable, "-m", "distviz", "why", str(trace_file),
                           "ps.emb.weight"], cwd=ROOT, env=_environment(run.out),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "ps.emb.weight on ps (not in the graph): gets no gradient" in proc.stdout
    assert "was made outside any dist_autograd context" in proc.stdout
    assert _at(LINES["outside"]) in proc.stdout
    assert "inside `with dist_autograd.context()`" in proc.stdout


@pytest.mark.rpc
@pytest.mark.runs("item", "detach", "item:plain", "detach:plain")
@pytest.mark.parametrize("mistake", list(HANGS))
def test_a_hang_that_comes_from_a_cut_is_named_at_its_line(runs: Any, mistake: str) -> None:
    run, plain = runs(mistake), runs(f"{mistake}:plain")
    assert plain.returncode != 0 and "RPC ran for more than set timeout" in plain.stderr, \
        plain.stderr[-2000:]                  # PyTorch's backward hangs: the truth
    assert run.code == 6, run.stdout + run.stderr[-3000:]
    kind, worker = HANGS[mistake]
    notes = [n for n in run.index["notes"] if "the hang comes from a cut" in n]
    assert len(notes) == 1, run.index["notes"]
    assert f"a cut on {worker}: " in notes[0] and WORDS[kind] in notes[0]
    assert _at(LINES[mistake]) in notes[0]
    assert notes[0] in run.stdout.splitlines()
    seen = run.index["cuts"]["seen"]
    assert [(c["kind"], c["worker"], c["line"]) for c in seen] == \
        [(kind, worker, LINES[mistake])], seen


@pytest.mark.rpc
@pytest.mark.runs("item")
def test_why_names_the_cut_of_an_rpc_result_not_the_unused_result(runs: Any) -> None:
    run = runs("item")
    trace_file = run.out / "trainer.ctx1.trace.json"
    answer = why(load(str(trace_file)), "ps.gain", cuts=RunCuts.read(trace_file))
    assert answer.kind == "cut" and ".item()" in answer.summary, answer
    assert any("keep the tensor, not .item()" in f for f in answer.fixes), answer.fixes


@pytest.mark.rpc
@pytest.mark.runs("none", "all:plain")
def test_a_correct_program_gets_no_cut(runs: Any) -> None:
    run = runs("none")
    assert _truth(runs("all:plain"), "none") == set()
    assert run.code == 0, run.stdout + run.stderr[-3000:]
    assert "got no gradient" not in run.stderr and "got no gradient" not in run.stdout
    assert run.index["cuts"] == {"explained": [], "seen": []}
    assert "no gradient: -" in run.stdout


def test_a_tensor_that_goes_on_into_the_loss_is_no_cut() -> None:
    """The watch on one thread, without RPC: what it keeps as cuts when its context ends."""
    import torch

    from distviz.tracing.hooks import cut_watch
    from distviz.tracing.shared import naming

    naming.install()        # names the parameters of the modules made from now on
    lin, head = torch.nn.Linear(4, 4), torch.nn.Linear(4, 1)
    x = torch.randn(2, 4)
    cut_watch.start(5, None)
    try:
        h = lin(x)
        loss = head(h).sum()
        logged = h.sum().item()         # h goes on into the loss
        before = loss.item()            # the loss is the backward's root
        with torch.no_grad():
            probe = head(h)             # h and head are used with grad too
        lost = lin(x).detach()          # a cut: its tensor goes nowhere else
        value = lin(x).tanh().sum().item()   # a cut
        cut_watch.consume([loss])
    finally:
        cut_watch.stop()
    kept = [(p.kind.value, p.continued) for p in cut_watch._PENDING]
    leaves = [p for p in cut_watch._PENDING if p.node is None]
    cut_watch._PENDING.clear()
    cut_watch._NODES.clear()
    del logged, before, probe, lost, value
    assert [k for k in kept if not k[1]] == [("no_grad", False), ("no_grad", False),
                                              ("detach", False), ("item", False)], kept
    # the two left under no_grad are head's parameters, used with grad in the same context:
    # the log drops them (``flush``)
    ids = [i for p in leaves for i, _ in p.leaves]
    assert sorted(ids) == sorted(id(p) for p in head.parameters())
    assert set(ids) <= cut_watch._SEEN[5]
