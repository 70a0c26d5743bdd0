"""Every shipped scenario: the replay agrees with PyTorch's real backward (outcome, the set of
nodes run and each worker's order) and the distributed gradients equal the single-process
reference."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import ROOT, SCENARIOS, run_cached

from distviz.judge.verdict import judge
from distviz.replay import replay

pytestmark = pytest.mark.rpc

ALL = sorted(p.stem for p in SCENARIOS.glob("*.yaml"))
HANGS = {"unused_result", "no_grad_rpc", "overwritten_result"}
ERRORS = {"fail_backward"}
#: Trainers sharing parameters without a lock: where their steps overlapped, the order the
#: shared parameters were read and updated in is not known, and the gradients are not compared.
INTERLEAVED = {"hogwild"}


@pytest.mark.parametrize("name", ALL)
def test_replay_agrees_with_pytorch(name: str) -> None:
    options = {"hang_timeout": 3.0} if name in HANGS else {}
    result = run_cached(name, **options)
    assert result.error is None, result.error
    trace = result.trace
    rp = replay(trace)
    a = judge(trace, rp).agreement
    expected = "hang" if name in HANGS else "error" if name in ERRORS else "completed"
    assert rp.outcome == expected
    assert trace.real["outcome"] == expected
    assert (a.outcome, a.executed, a.order) == (True, True, True), a.text
    assert a.exact is True
    if expected == "completed" and name in INTERLEAVED and not trace.reference["comparable"]:
        assert a.gradients is None, a.text
        assert "ran at the same time" in trace.reference["error"], trace.reference["error"]
    elif expected == "completed":
        assert a.gradients is True, trace.reference["comparison"]
        assert a.leaves is True
        assert a.text.startswith("replay matches PyTorch on all")


def test_multi_output_unused_output_gets_zeros_in_both() -> None:
    trace = run_cached("multi_output").trace
    rows = {r["var"]: r for r in trace.reference["comparison"]}
    zero = [v for v, r in rows.items() if r["status"] == "zero_unused"]
    assert zero, rows
    rp = replay(trace)
    for v in zero:
        leaf = rows[v]["leaf"]
        assert rp.accumulated[leaf].zero is True
        assert trace.real["gradients"][leaf]["zero"] is True


def test_retain_graph_passes_accumulate_twice() -> None:
    trace = run_cached("retain_graph").trace
    rp = replay(trace)
    assert len(trace.passes) == 2 and rp.passes_run == 2
    assert all(acc.count == 2 for acc in rp.accumulated.values())
    assert trace.real["passes_run"] == 2


def test_more_interop_threads_is_not_claimed_exact() -> None:
    result = run_cached("design_note", interop_threads=2)
    v = judge(result.trace, replay(result.trace))
    order = v.check("order")
    assert v.agreement.exact is False and order is not None
    assert order.status == "not compared", order    # the rules decide, not the order
    assert v.holds("legality") is True, v.text


def test_pipeline_scaled_down_agrees_even_when_messages_race() -> None:
    result = run_cached("pipeline", {"micro": "8", "depth": "2"})
    a = judge(result.trace, replay(result.trace)).agreement
    assert (a.outcome, a.executed, a.order, a.gradients) == (True, True, True, True), \
        a.text
    assert Path(result.trace.scenario["path"]).name == "pipeline.yaml"


# -- scenarios taken from PyTorch's own dist_autograd_test.py ------------------------------------

PYTORCH = ROOT / "tests" / "pytorch_scenarios"
PT_ERRORS = {"engine_error_chain", "python_udf_error_nested"}


@pytest.mark.parametrize("name", sorted(p.stem for p in PYTORCH.glob("*.yaml")))
def test_pytorch_test_suite_scenarios_agree(name: str) -> None:
    result = run_cached(str(PYTORCH / f"{name}.yaml"), hang_timeout=5.0)
    assert result.error is None, result.error
    trace = result.trace
    rp = replay(trace)
    a = judge(trace, rp).agreement
    assert (a.outcome, a.executed, a.order) == (True, True, True), a.text
    if name in PT_ERRORS:
        assert rp.outcome == "error" and trace.real["outcome"] == "error"
        # PyTorch's tests match "Error on Node [0-9]+: Simulate error on backward pass"
        assert re.search(r"Error on Node [0-9]+: Simulate error on backward pass",
                         trace.real["error"])
        assert re.search(r"Error on Node [0-9]+: Simulate error on backward pass",
                         rp.error.message)
    else:
        assert rp.outcome == "completed"
        assert a.gradients is True and a.leaves is True, trace.reference["comparison"]


def test_rpc_to_self_puts_both_ends_on_one_worker() -> None:
    # test_backward_simple_self: worker0 holds 2 sends and 2 recvs
    trace = run_cached(str(PYTORCH / "backward_simple_self.yaml")).trace
    w0 = [n for n in trace.nodes if n.worker == "worker0"]
    assert sum(n.kind == "send" for n in w0) == 2 and sum(n.kind == "recv" for n in w0) == 2
    assert not [n for n in trace.nodes if n.worker == "worker1"]


def test_error_chain_prefixes_follow_the_first_message_chain() -> None:
    # test_backward_python_udf_error: worker0 -> worker1 -> worker2 fails on worker2
    trace = run_cached(str(PYTORCH / "python_udf_error_nested.yaml"), hang_timeout=5.0).trace
    assert trace.real["error"].startswith("Error on Node 0: Error on Node 1: Error on Node 2: ")
    assert replay(trace).error.message.startswith(
        "Error on Node 0: Error on Node 1: Error on Node 2: ")


def test_leaves_made_inside_rpc_functions_get_stable_names() -> None:
    trace = run_cached(str(PYTORCH / "backward_rref.yaml")).trace
    leaves = {n.var for n in trace.nodes if n.kind == "accumulate_grad"}
    assert leaves == {"t2", "worker1.ones#0"}


def test_sparse_gradients_are_compared_in_their_dense_form() -> None:
    # test_embedding_bag_with_no_grad_tensors: EmbeddingBag(sparse=True) on worker1, two passes
    trace = run_cached(str(PYTORCH / "embedding_bag_no_grad_tensors.yaml")).trace
    grads = trace.real["gradients"]
    weight = "worker1/AccumulateGrad(worker1.EmbeddingBag#0.weight)"
    assert grads[weight]["layout"] == "sparse_coo" and grads[weight]["zero"] is False
    assert "layout" not in grads["worker0/AccumulateGrad(per_sample_weights)"]
    rows = {r["var"]: r for r in trace.reference["comparison"]}
    assert rows["worker1.EmbeddingBag#0.weight"]["status"] == "match"
    assert rows["worker1.EmbeddingBag#0.weight"]["max_abs_diff"] is not None


def test_a_sparse_leaf_made_inside_an_rpc_function_is_named_and_compared() -> None:
    # test_backward_rref_nested_sparse: worker2 builds the sparse leaf behind an RRef
    trace = run_cached(str(PYTORCH / "backward_rref_nested_sparse.yaml")).trace
    rows = {r["var"]: r["status"] for r in trace.reference["comparison"]}
    assert rows == {"t2": "match", "worker2.sparse_coo_tensor#0": "match"}
