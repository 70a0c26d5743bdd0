"""``distviz why``: why a leaf gets a gradient or not, one test per answer, over traces recorded
from real runs (``tests/why_scenarios/``, recorded with ``distviz run tests/why_scenarios/NAME.yaml
-o tests/traces/NAME.json``) and hand-built ones (``replay_fixtures``). Pure: no torch."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest
from replay_fixtures import M, TraceBuilder, fail_backward
from typer.testing import CliRunner

from distviz.analyses.cut_answers import RunCuts
from distviz.analyses.why import WHY_KINDS, Why, why
from distviz.cli import app
from distviz.cuts import Cut, CutKind, Explained, RpcRef
from distviz.errors import TraceError, UsageError
from distviz.render.why_lines import why_lines
from distviz.trace import Trace, load, loads
from distviz.trace.absent import AbsentLeaf

TRACES = Path(__file__).parents[2] / "traces"
BROKEN = TRACES / "why_broken.json"      # tests/why_scenarios/why_broken.yaml: a hang
PYTHON = TRACES / "why_python.json"      # tests/why_scenarios/why_python.yaml: completed
GOLDEN = Path(__file__).parents[2] / "golden" / "why_unused_result.txt"


def text(answer: Why) -> str:
    return "\n".join(line.plain for line in why_lines(answer)) + "\n"


# -- reached -------------------------------------------------------------------------------------

def test_a_leaf_reached_across_two_messages_arrives_at_its_accumulate_step() -> None:
    answer = why(load(PYTHON), "t1")
    assert (answer.kind, answer.gets_gradient, answer.pass_index) == ("arrived", True, 0)
    assert answer.step == 39     # `distviz replay`: "39 worker0 accum ... gradient of t1"
    assert answer.path[0].node == "worker0/SumBackward0#4"        # the root
    assert answer.path[-1] == dataclasses.replace(answer.path[-1], node="worker0/AccumulateGrad(t1)",
                                                  step=39)
    crossed = [(h.message, h.sender, h.worker, h.call) for h in answer.path if h.message]
    assert crossed == [("1:1", "worker0", "worker1", "rpc_sync(my_add) at line 13"),
                       ("0:1", "worker1", "worker0", "rpc_sync(my_add) at line 13")]
    # its AccumulateGrad waits for both sends of worker0; the later one's step is the arrival
    assert answer.details == ("AccumulateGrad(t1) waits for 2 gradients in pass 1, from "
                              "SendRpcBackward (message 0:0) on worker0 (step 38), "
                              "SendRpcBackward (message 0:1) on worker0 (step 21)",)


def test_every_hop_of_the_path_ran_before_the_next() -> None:
    answer = why(load(PYTHON), "t2")
    steps = [h.step for h in answer.path]
    assert None not in steps and steps == sorted(steps)
    assert sum(1 for h in answer.path if h.message) == 4


def test_a_leaf_the_node_id_names_is_the_same_leaf() -> None:
    by_id = why(load(PYTHON), "worker0/AccumulateGrad(t1)")
    assert by_id.leaf == why(load(PYTHON), "t1").leaf == "worker0/AccumulateGrad(t1)"


def test_a_python_backward_that_returned_none_is_named() -> None:
    """PyTorch's context holds no gradient for ``c`` (the real run's ``get_gradients``): the
    replay reaches it, but ``DroppedBackward``'s Python backward returns None for it."""
    trace = load(PYTHON)
    assert trace.real is not None and "worker0/AccumulateGrad(c)" not in trace.real.gradients
    answer = why(trace, "c")
    assert (answer.kind, answer.gets_gradient) == ("python", False)
    assert [h.name for h in answer.path if h.python is not None] == ["DroppedBackward"]
    assert "returned None for this input" in answer.summary
    assert ".grad" in answer.summary


def test_a_gradient_missing_from_the_context_without_a_python_backward_is_missing() -> None:
    trace = load(PYTHON)
    assert trace.real is not None
    del trace.real.gradients["worker0/AccumulateGrad(t1)"]
    answer = why(trace, "t1")
    assert (answer.kind, answer.gets_gradient) == ("missing", False)


def test_a_zero_gradient_is_noted() -> None:
    trace = load(PYTHON)
    assert trace.real is not None
    trace.real.gradients["worker0/AccumulateGrad(t1)"]["zero"] = True
    answer = why(trace, "t1")
    assert answer.kind == "arrived"
    assert any("all zeros" in d for d in answer.details)


def test_a_reached_leaf_behind_a_blocked_send_waits_in_the_hang() -> None:
    answer = why(load(BROKEN), "t1")
    assert (answer.kind, answer.gets_gradient, answer.step) == ("hang", False, None)
    assert answer.path[-1].step is None
    assert ("waits for a gradient from worker0's SendRpcBackward for message 0:1, which never "
            "comes: the result of rpc_sync(my_mul) at line 19, assigned to `unused`, is not "
            "used by the loss (`loss`)") in answer.summary


def test_a_reached_leaf_behind_a_node_that_raises_never_arrives() -> None:
    answer = why(fail_backward(), "t1")
    assert (answer.kind, answer.gets_gradient) == ("error", False)
    assert "worker2 raised in worker2/AddBackward0#1" in answer.summary


# -- not reachable from the roots ----------------------------------------------------------------

def test_a_leaf_behind_an_unused_rpc_result_is_explained_as_the_hang_is() -> None:
    trace = load(BROKEN)
    answer = why(trace, "w")
    assert (answer.kind, answer.gets_gradient) == ("unused_result", False)
    # the hang's own words for the same send (distviz replay's explanation)
    from distviz.replay import replay
    hang = replay(trace).hang
    assert hang is not None
    blocked = next(b for b in hang.blocked_sends if b.node == "worker0/SendRpcBackward#1")
    assert answer.summary == f"the roots never reach it: {blocked.reason}"
    assert answer.path[0].name == "RecvRpcBackward(unused)"
    assert all(h.step is None for h in answer.path)


def test_a_leaf_that_only_feeds_a_tensor_the_loss_leaves_out_names_that_tensor() -> None:
    answer = why(load(BROKEN), "aux")
    assert answer.kind == "not_in_loss"
    assert answer.summary == ("the roots never reach it: it only feeds `side` (MulBackward0 on "
                              "worker0), which the loss (`loss`) does not use")
    assert [h.name for h in answer.path] == ["MulBackward0", "AccumulateGrad(aux)"]


def _no_grad_param() -> Trace:
    """``ps.w`` on worker1 is used by ``my_udf``, called from worker0 under ``torch.no_grad()``:
    worker1 attaches the request's recv and a response send whose recv was never made.

    ::

        w0: SumBackward0 -> Recv(1:1) ~> w1: Send(1:1) -> AddBackward0 -> Recv(0:1) ~> w0: Send(0:1) -> t1
        w1: Send(1:0) [no recv: the no_grad call] -> MulBackward0 -> {Recv(0:0), ps.w}
    """
    b = TraceBuilder(2)
    t1, w = b.acc(0, "t1"), b.acc(1, "ps.w")
    b.rpc(0, 1, "rpc_sync", "my_udf", [], grad_enabled=False, line=9, result_var="x")
    c1 = b.rpc(0, 1, "rpc_sync", "my_add", [M(0, 1), M(1, 1)], line=10, result_var="z")
    b.send(0, M(0, 1), [t1], seq=0, call=c1)
    rz = b.recv(0, M(1, 1), seq=0, vars=["z"], call=c1)
    loss = b.op(0, "SumBackward0", 1, [rz])
    rx = b.recv(1, M(0, 0), seq=0)
    mul = b.op(1, "MulBackward0", 1, [rx, w])
    b.send(1, M(1, 0), [mul], seq=2)
    rz1 = b.recv(1, M(0, 1), seq=0, call=c1)
    add = b.op(1, "AddBackward0", 1, [rz1])
    b.send(1, M(1, 1), [add], seq=3, call=c1)
    b.backward([loss], root_vars=["loss"])
    return b.build()


def test_a_leaf_behind_an_rpc_made_under_no_grad_names_that_rpc() -> None:
    answer = why(_no_grad_param(), "ps.w")
    assert (answer.kind, answer.worker) == ("no_grad_rpc", "worker1")
    assert "rpc_sync(my_udf) at line 9 from worker0" in answer.summary
    assert "torch.no_grad()" in answer.summary
    assert answer.path[0].node == "worker1/SendRpcBackward#2"


def test_a_trace_without_a_backward_pass_says_so() -> None:
    trace = load(PYTHON)
    trace.passes = []
    assert why(trace, "t1").kind == "no_pass"


# -- not in the graph (the recorder's absent_leaves) ---------------------------------------------

def test_a_tensor_that_does_not_require_grad_is_named_from_the_recording() -> None:
    trace = load(BROKEN)
    assert AbsentLeaf(var="n", worker="worker0", why="requires_grad_false", shape=[3, 3],
                      dtype="float32") in trace.absent_leaves
    answer = why(trace, "n")
    assert (answer.kind, answer.leaf, answer.path) == ("requires_grad_false", None, ())
    assert "requires_grad=False" in answer.summary


@pytest.mark.parametrize("name", ["d", "g"])   # d.detach() in the loss; g * 2 under no_grad
def test_a_leaf_used_detached_or_under_no_grad_is_not_reached(name: str) -> None:
    answer = why(load(BROKEN), name)
    assert (answer.kind, answer.gets_gradient) == ("not_reached", False)
    assert ".detach()" in answer.summary and "torch.no_grad()" in answer.summary


def test_a_tensor_whose_grad_was_set_by_a_local_backward_says_get_gradients_misses_it() -> None:
    trace = load(BROKEN)
    trace.absent_leaves = [AbsentLeaf(var="head.weight", worker="worker0", why="not_reached",
                                      shape=[2], parameter=True, grad=True)]
    answer = why(trace, "head.weight")
    assert answer.summary.startswith("the parameter `head.weight` on worker0 requires grad")
    assert any("get_gradients(context_id)" in d for d in answer.details)


# -- the run's cuts (index.json) -----------------------------------------------------------------

MUL = RpcRef("rpc_sync", "my_mul", "worker0", "line 19")


def test_a_cut_of_the_rpc_where_the_way_breaks_answers_with_its_line() -> None:
    item = Cut(CutKind.ITEM, "worker1", "prog.py:19 in main", behind=(MUL,))
    answer = why(load(BROKEN), "w", cuts=RunCuts(seen=(item,)))
    assert (answer.kind, answer.gets_gradient, answer.leaf) == ("cut", False,
                                                                "worker0/AccumulateGrad(w)")
    assert answer.summary.startswith("the tensor computed from it was turned into Python values "
                                     "with .item() at prog.py:19 in main")
    assert answer.fixes == ("keep the tensor, not .item(), at prog.py:19, and compute the loss "
                            "from it (call .item() only for logging)",)
    # a cut of another RPC, or none, leaves the trace's own answer
    other = dataclasses.replace(item, behind=(dataclasses.replace(MUL, site="line 20"),))
    assert why(load(BROKEN), "w", cuts=RunCuts(seen=(other,))).kind == "unused_result"


def test_a_cut_never_replaces_a_gradient_that_arrives() -> None:
    detach = Cut(CutKind.DETACH, "worker0", "prog.py:7 in f", leaves=("t1",))
    answer = why(load(PYTHON), "t1",
                 cuts=RunCuts((Explained(("t1",), "worker0", None),), (detach,)))
    assert (answer.kind, answer.gets_gradient) == ("arrived", True)


def test_a_parameter_the_run_named_is_answered_even_outside_the_trace() -> None:
    outside = Cut(CutKind.OUTSIDE_CONTEXT, "trainer", "train.py:40 in train",
                  behind=(RpcRef("rpc_sync", "embed on an RRef", "ps", "train.py:40 in train"),))
    run = RunCuts((Explained(("ps.emb.weight",), "ps", outside),
                   Explained(("ps.fc.weight",), "ps", None)), (outside,))
    answer = why(load(BROKEN), "ps.emb.weight", cuts=run)
    assert (answer.kind, answer.leaf, answer.worker) == ("cut", None, "ps")
    assert "was made outside any dist_autograd context" in answer.summary
    assert "ps.emb.weight on ps (not in the graph): gets no gradient" in text(answer)
    named = why(load(BROKEN), "ps.fc.weight", cuts=run)
    assert (named.kind, named.gets_gradient, named.worker) == ("named", False, "ps")
    assert "no cut distviz recorded explains it" in named.summary
    with pytest.raises(UsageError, match="ps.fc.weight"):     # the closest name
        why(load(BROKEN), "ps.fc.weigth", cuts=run)


def test_every_answer_is_tested() -> None:
    tested = {"arrived", "python", "missing", "hang", "error", "unused_result", "no_grad_rpc",
              "not_in_loss", "requires_grad_false", "not_reached", "no_pass", "cut", "named"}
    assert tested | {"no_recv"} == set(WHY_KINDS)


# -- the trace field ------------------------------------------------------------------------------

def test_absent_leaves_round_trip_and_older_traces_have_none() -> None:
    trace = load(BROKEN)
    again = loads(trace.dumps())
    assert again.absent_leaves == trace.absent_leaves and len(again.absent_leaves) == 4
    older = load(TRACES / "pipeline.json")
    assert older.absent_leaves == []
    assert "absent_leaves" not in older.to_json()


def test_a_malformed_absent_leaf_names_its_key() -> None:
    obj = json.loads(BROKEN.read_text())
    obj["absent_leaves"][1]["why"] = "lost"
    with pytest.raises(TraceError, match=r"absent_leaves\[1\]\.why"):
        loads(json.dumps(obj))


# -- unknown names, the text, the command -------------------------------------------------------

def test_an_unknown_name_suggests_the_closest() -> None:
    with pytest.raises(UsageError, match=r"no leaf named 'w1' in the trace \(did you mean 'w'\?\)"):
        why(load(BROKEN), "w1")


def test_golden_text_of_an_unused_rpc_result() -> None:
    out = text(why(load(BROKEN), "w"))
    if os.environ.get("DISTVIZ_UPDATE_GOLDEN"):
        GOLDEN.write_text(out, encoding="utf-8")
    assert out == GOLDEN.read_text(encoding="utf-8")


def test_the_command_prints_the_answer_and_json() -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["why", str(BROKEN), "w"])
    assert res.exit_code == 0, res.output
    assert res.output == text(why(load(BROKEN), "w"))
    res = runner.invoke(app, ["why", str(PYTHON), "t1", "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    assert (report["kind"], report["step"], report["gets_gradient"]) == ("arrived", 39, True)


def test_the_command_refuses_an_unknown_name_in_one_line_with_exit_2() -> None:
    res = CliRunner().invoke(app, ["why", str(BROKEN), "auxx"])
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [
        "error: no leaf named 'auxx' in the trace (did you mean 'aux'?)"]
