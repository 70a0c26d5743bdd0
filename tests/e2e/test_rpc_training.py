"""Training scenarios on real workers: every recorded context's replay agrees with PyTorch's
real backward, the graph is PyTorch's own (an LSTM is one node per layer), get_gradients and
the optimizer steps are reported per worker, and the training equals the single-process
reference's. The runs are shared with ``test_rpc_agreement.py`` (``run_cached``)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, run_cached
from guards import HANG_GUARD_S

from distviz.analyses.concurrent import shared_workers
from distviz.judge.verdict import judge
from distviz.outcome import StopKind
from distviz.replay import replay

pytestmark = pytest.mark.rpc


def _agrees(trace: Any) -> Any:
    a = judge(trace, replay(trace)).agreement
    assert (a.outcome, a.executed, a.order) == (True, True, True), a.text
    assert a.exact is True
    return a


def test_rnn_tutorial_every_iteration_agrees_and_training_equals_the_reference() -> None:
    result = run_cached("rnn_tutorial")
    assert result.error is None and result.stopped is None, result.error
    rec = result.recording
    assert len(rec.contexts) == 50 and rec.training.contexts_total == 50
    for trace, it in zip(rec.contexts, rec.iterations, strict=True):
        a = _agrees(trace)
        assert a.gradients is True, trace.reference["comparison"]
        assert it.reference.ok is True and it.reference.loss_match is True
        assert {w: len(es) for w, es in it.gradients.items()} == {"ps": 3, "trainer": 16}
        assert len(it.steps) == 1 and len(it.steps[0].updates) == 19
    assert rec.training.ok is True and len(rec.training.final) == 19
    assert [it.index for it in rec.iterations] == list(range(1, 51))


def _local_rnn_graph() -> Counter[str]:
    """The node names of the tutorial's model run in one process with plain PyTorch (the loss
    and the LSTM's hidden state outputs, as the recording names both)."""
    import torch
    from torch import nn
    emb, drop, lstm, dec = nn.Embedding(7, 2), nn.Dropout(0.5), nn.LSTM(2, 3, 4, dropout=0.5), \
        nn.Linear(3, 7)
    data = torch.randint(0, 7, (5, 6))
    out, hidden = lstm(drop(emb(data)), (torch.randn(4, 6, 3), torch.randn(4, 6, 3)))
    loss = nn.CrossEntropyLoss()(dec(drop(out)), torch.randint(0, 6, (5, 7)))
    names: Counter[str] = Counter()
    seen: set[Any] = set()
    stack = [loss.grad_fn, hidden[0].grad_fn, hidden[1].grad_fn]
    while stack:
        fn = stack.pop()
        if fn is None or fn in seen:
            continue
        seen.add(fn)
        names[fn.name().rsplit("::", 1)[-1]] += 1
        stack.extend(nxt for nxt, _ in fn.next_functions)
    return names


def test_rnn_tutorial_graph_is_pytorchs_own() -> None:
    trace = run_cached("rnn_tutorial").recording.contexts[1]
    names = Counter(n.name.rsplit("::", 1)[-1] for n in trace.nodes)
    assert names["MkldnnRnnLayerBackward0"] == 4   # nn.LSTM(..., nlayers=4): one per layer
    rpc_nodes = Counter({k: names.pop(k) for k in ("SendRpcBackward", "RecvRpcBackward")})
    assert rpc_nodes == Counter({"SendRpcBackward": 3, "RecvRpcBackward": 3})
    assert names == _local_rnn_graph()


def test_two_trainers_meet_on_the_parameter_server() -> None:
    result = run_cached("ps_two_trainers")
    assert result.error is None, result.error
    rec = result.recording
    assert sorted((it.trainer, it.index) for it in rec.iterations) == [
        (t, i) for t in ("trainer1", "trainer2") for i in (1, 2, 3)]
    for trace, it in zip(rec.contexts, rec.iterations, strict=True):
        assert _agrees(trace).gradients is True
        # on ps, each context holds its own gradients for the shared layer and its head
        names = {e.name for e in it.gradients["ps"]}
        head = "ps.head1" if it.trainer == "trainer1" else "ps.head2"
        assert names == {"ps.features.weight", "ps.features.bias", f"{head}.weight",
                         f"{head}.bias"}
        assert {u.name for s in it.steps for u in s.updates} == {f"{head}.weight",
                                                               f"{head}.bias"}
    shared = shared_workers(rec.contexts, [it.label for it in rec.iterations],
                            [it.trainer for it in rec.iterations])
    assert [s.worker for s in shared] == ["ps"]
    assert len(shared[0].contexts) == 6 and shared[0].overlaps == 0
    assert rec.training.ok is True


def test_hogwild_trainers_sharing_a_layer_end_with_exit_0(tmp_path: Path) -> None:
    """Two trainers step one shared ``nn.Linear`` on ps, each with its own optimizer: the
    reference goes in the order the real run's trainers read and updated it, so the values
    match; or, where two of them overlapped in time, the reason says that the order is not
    known. Never a false alarm (exit 8)."""
    out = subprocess.run([sys.executable, "-m", "distviz", "run", "hogwild", "-o",
                          str(tmp_path / "h.json")], capture_output=True, text=True,
                         cwd=tmp_path, timeout=HANG_GUARD_S)
    assert out.returncode == 0, out.stdout + out.stderr
    final = re.search(r"^final parameters: (.*)$", out.stdout, re.M)
    assert final is not None, out.stdout
    assert final.group(1).startswith("2/2 equal") or re.fullmatch(
        r"not compared \(trainers updated parameters the others' contexts use "
        r"\(ps\.model\.bias, ps\.model\.weight\) and .* is not known\)", final.group(1)), \
        final.group(1)


def test_get_gradients_returns_each_workers_own_leaves() -> None:
    it = run_cached("get_gradients").recording.iterations[0]
    assert {w: sorted(e.name for e in es) for w, es in it.gradients.items()} == {
        "worker0": ["t1", "t2", "t4"], "worker1": ["worker1.w"]}


def test_a_predicted_hang_stops_the_training_at_that_context() -> None:
    result = run_cached(str(ROOT / "tests" / "fault_scenarios" / "training_hang.yaml"))
    assert result.stopped and result.stopped.kind is StopKind.PREDICTED_HANG
    assert "replay predicts that this backward hangs" in result.stopped.words
    rec = result.recording
    assert [it.index for it in rec.iterations] == [1, 2]
    assert rec.contexts[0].real["outcome"] == "completed"
    assert rec.contexts[1].real["outcome"] == "skipped"
    assert replay(rec.contexts[1]).outcome == "hang"


def test_modules_built_back_to_back_by_rpc_remote_start_as_in_the_reference() -> None:
    """Two ``rpc.remote`` builds on one worker, each drawing from its random generator: built
    at the same time they would interleave their draws (a different start on every run); one
    at a time they start as the single-process reference does, and the step equals its."""
    result = run_cached(str(ROOT / "tests" / "fault_scenarios" / "racing_builds.yaml"))
    assert result.error is None and result.stopped is None, result.error
    rec = result.recording
    assert len(rec.contexts) == 1
    assert rec.contexts[0].reference["ok"] is True, rec.contexts[0].reference["comparison"]
    assert rec.training.ok is True
    assert sorted(f.name for f in rec.training.final) == [
        "ps.Noisy#0.lin.bias", "ps.Noisy#0.lin.weight", "ps.Noisy#1.lin.bias",
        "ps.Noisy#1.lin.weight"]
    assert all(f.status == "match" for f in rec.training.final)


def test_distributed_optimizer_steps_tensors_a_module_holds_and_skips_a_none_grad() -> None:
    """dist_optimizer_test.py's none-grads test: the modules hold plain tensors, not
    Parameters; the second needs no grad, so the optimizer leaves it. The first is named,
    stepped and compared with the reference."""
    result = run_cached(str(ROOT / "tests" / "pytorch_scenarios" / "training" /
                            "dist_optim_none_grads.yaml"))
    assert result.error is None and result.stopped is None, result.error
    rec = result.recording
    it = rec.iterations[0]
    assert [e.name for e in it.gradients["worker1"]] == ["worker1.MyModule#0.w"]
    assert "worker2" not in it.gradients      # its module's tensor needs no grad
    assert [u.name for s in it.steps for u in s.updates if u.worker == "worker1"] == [
        "worker1.MyModule#0.w"]
    assert [(f.name, f.status) for f in rec.training.final] == [("worker1.MyModule#0.w", "match")]
    assert rec.training.ok is True
