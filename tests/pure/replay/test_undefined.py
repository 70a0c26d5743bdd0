"""Undefined gradients in the replay (``distviz.replay.undefined``): a Python backward's
``None``, materialized zeros, a recv sending an undefined gradient as zeros, a captured
AccumulateGrad that gets nothing. Pure, over hand-built traces (milliseconds); the same shapes
against PyTorch are in ``tests/e2e/test_undefined_rpc.py``."""

from __future__ import annotations

import json
from typing import Any

import pytest
import replay_fixtures as F
from replay_fixtures import M, TraceBuilder

from distviz.judge.verdict import judge
from distviz.replay import replay
from distviz.replay.undefined import PYTHON_BACKWARDS, GradState, PythonBackward, Returns
from distviz.scenario.lang import CUSTOM_FUNCTIONS
from distviz.trace import Trace, loads
from distviz.trace.compact import decode_nodes, encode_nodes

_CLASS = {"scale": "ScaleBackward", "split": "SplitBackward", "nondiff": "NonDiffBackward",
          "square": "SquareBackward", "zeros": "ZerosBackward", "none": "DroppedBackward"}


def _custom(b: TraceBuilder, w: int, shape: str | None, seq: int, nxt: list[Any],
            class_name: str | None = None) -> str:
    """A custom Function's node; ``shape`` is the scenario language's (None: a traced
    program's own Function, which the replay does not know)."""
    return b.op(w, class_name or _CLASS[shape or "none"], seq, nxt, python=True, custom=shape)


def _leaves(t: Trace) -> dict[str, bool]:
    """``{leaf var: all zeros}`` for every leaf that gets a gradient in the replay."""
    return {acc.var or nid: acc.zero for nid, acc in replay(t).accumulated.items()}


def _real(t: Trace, grads: dict[str, bool]) -> dict[str, Any]:
    """A real run with the replay's order and the leaf gradients ``{var: zero}``."""
    r = replay(t)
    events = [{"pass": p, "worker": w, "node": nid, "t_us": float(k), "dur_us": 0.5,
               "thread": "PTThreadPool", "grad_shapes": []}
              for p, per in enumerate(r.order) for w, ids in per.items()
              for k, nid in enumerate(ids)]
    ids = {n.var: n.id for n in t.nodes if n.kind == "accumulate_grad"}
    return {"outcome": "completed", "error": None, "events": events, "interop_threads": 1,
            "gradients": {ids[v]: {"shape": [2, 2], "zero": z} for v, z in grads.items()}}


def local(shape: str | None, between: str | None = None) -> Trace:
    """``loss = custom_function(shape, y).sum()`` on one worker, ``y`` the leaf ``x`` itself or
    ``between`` of it (``MulBackward0``: a C++ backward; ``scale``: a known Python one); ``w``
    is a second leaf the loss uses directly."""
    b = TraceBuilder(1)
    x, w = b.acc(0, "x"), b.acc(0, "w")
    y = x
    if between == "MulBackward0":
        y = b.op(0, "MulBackward0", 1, [x])
    elif between is not None:
        y = _custom(b, 0, between, 1, [x])
    c = _custom(b, 0, shape, 2, [y])
    add = b.op(0, "AddBackward0", 3, [c, w])
    loss = b.op(0, "SumBackward0", 4, [add])
    b.backward([loss], root_vars=["loss"])
    return b.build()


def across(shape: str | None, to: int = 1) -> Trace:
    """Issue 45's program: ``v24 = rpc_sync(to, f5, (v1,))`` where ``f5`` returns
    ``custom_function(shape, a)``; ``loss = v24.sum()`` on worker0. ``to=0``: the call goes to
    worker0 itself (the program the fuzz found)."""
    b = TraceBuilder(2)
    v1 = b.acc(0, "v1")
    c = b.rpc(0, to, "rpc_sync", "f5", [M(0, 0), M(to, 1)], line=3, result_var="v24")
    b.send(0, M(0, 0), [v1], seq=0, call=c)
    r_back = b.recv(0, M(to, 1), seq=1 if to == 0 else 0, vars=["v24"], call=c)
    loss = b.op(0, "SumBackward0", 5, [r_back])
    r = b.recv(to, M(0, 0), seq=2 if to == 0 else 0, call=c)
    fn = _custom(b, to, shape, 3, [r])
    b.send(to, M(to, 1), [fn], seq=4, call=c)
    b.backward([loss], root_vars=["loss"])
    return b.build()


# -- the rules ------------------------------------------------------------------------------------

def test_every_custom_function_of_the_scenario_language_has_a_model() -> None:
    assert set(PYTHON_BACKWARDS) == set(CUSTOM_FUNCTIONS)


@pytest.mark.parametrize(("backward", "got", "out"), [
    (PythonBackward(True, Returns.LINEAR), GradState.VALUE, GradState.VALUE),
    (PythonBackward(True, Returns.LINEAR), GradState.ZERO, GradState.ZERO),
    (PythonBackward(True, Returns.LINEAR), GradState.UNDEFINED, GradState.ZERO),   # materialized
    (PythonBackward(True, Returns.ZEROS), GradState.VALUE, GradState.ZERO),
    (PythonBackward(False, Returns.NONE), GradState.VALUE, GradState.UNDEFINED),
])
def test_a_python_backward_maps_what_it_got(backward: PythonBackward, got: GradState,
                                            out: GradState) -> None:
    assert backward.out(got) == out


def test_a_none_leaves_the_leaf_on_its_worker_without_a_gradient() -> None:
    """PyNode::apply: a returned None is undefined; the captured AccumulateGrad accumulates
    nothing, so x is not in get_gradients (w, used directly, is)."""
    t = local("none")
    assert _leaves(t) == {"w": False}
    rp = replay(t)
    acc = next(e for e in rp.events if e.action == "accumulate" and "(x)" in (e.node or ""))
    assert "undefined (a Python backward returned None)" in acc.text
    assert acc.detail["undefined"] is True


def test_an_undefined_gradient_through_a_cpp_backward_stays_undefined() -> None:
    """Functions.cpp: no defined incoming gradient, undefined outputs."""
    assert _leaves(local("none", between="MulBackward0")) == {"w": False}


def test_an_undefined_gradient_reaching_a_custom_backward_comes_in_as_zeros() -> None:
    """PyNode::apply materializes an undefined incoming gradient as zeros: Scale's backward
    returns zeros, so x gets an all-zero gradient, not none."""
    assert _leaves(local("none", between="scale")) == {"x": True, "w": False}


@pytest.mark.parametrize(("shape", "x"), [("zeros", True), ("scale", False), ("square", False),
                                          ("split", False), ("nondiff", False)])
def test_each_known_shape_decides_the_leaf_behind_it(shape: str, x: bool) -> None:
    assert _leaves(local(shape)) == {"x": x, "w": False}


def test_a_value_beside_an_undefined_gradient_is_a_value() -> None:
    """InputBuffer::add skips an undefined gradient: x gets w's path's values."""
    b = TraceBuilder(1)
    x = b.acc(0, "x")
    c = _custom(b, 0, "none", 1, [x])
    mul = b.op(0, "MulBackward0", 2, [x])
    add = b.op(0, "AddBackward0", 3, [c, mul])
    loss = b.op(0, "SumBackward0", 4, [add])
    b.backward([loss])
    assert _leaves(b.build()) == {"x": False}


@pytest.mark.parametrize("to", [0, 1])
def test_a_none_sent_across_an_rpc_arrives_as_zeros(to: int) -> None:
    """RecvRpcBackward::apply sends an undefined gradient as zeros: v1 gets all zeros (issue
    45's program, to the worker itself or to another)."""
    t = across("none", to)
    assert _leaves(t) == {"v1": True}
    msg = [m for m in replay(t).events if m.action == "send_gradient"]
    assert len(msg) == 2


def test_a_root_on_one_output_of_an_rpc_result_behind_a_none() -> None:
    """``a, b = rpc_sync(w1, two_sums, (x,))`` with the root ``a`` itself, and ``a`` made by
    a Dropped node: the recv's slot for ``a`` gets ones, the callee's send passes them to
    Dropped, whose None reaches W1 as nothing; ``b``'s slot is zeros, so W2 gets zeros; x,
    behind the callee's recv, gets zeros (both of its gradients are sent as zeros)."""
    b = TraceBuilder(2)
    x = b.acc(0, "x")
    c = b.rpc(0, 1, "rpc_sync", "two_sums", [M(0, 0), M(1, 0)], line=3, result_var="a, b")
    b.send(0, M(0, 0), [x], seq=0, call=c)
    r = b.recv(0, M(1, 0), seq=0, inputs=2, vars=["a", "b"], call=c)
    rx = b.recv(1, M(0, 0), seq=0, call=c)
    w1, w2 = b.acc(1, "W1"), b.acc(1, "W2")
    mm1 = b.op(1, "MmBackward0", 1, [rx, w1])
    dropped = _custom(b, 1, "none", 3, [mm1])
    mm2 = b.op(1, "MmBackward0", 2, [rx, w2])
    b.send(1, M(1, 0), [dropped, mm2], seq=4, call=c)
    b.backward([r], root_vars=["a"])
    t = b.build()
    t.passes[0].root_nrs = [0]
    assert _leaves(t) == {"x": True, "W2": True}


# -- the verdict compares what it now predicts ---------------------------------------------------

def test_issue_45_agrees_instead_of_not_compared() -> None:
    """PyTorch gives v1 all zeros where the single-process reference has none: the replay now
    predicts those zeros, so the zeros check agrees (it said "not compared" before)."""
    t = across("none", to=0)
    t.real = _real(t, {"v1": True})
    t.reference = {"comparable": True, "ok": True, "comparison": [
        {"var": "v1", "leaf": "worker0/AccumulateGrad(v1)", "worker": "worker0",
         "status": "zero_unused"}]}
    v = judge(t, replay(t))
    assert (v.check("zeros").status, v.check("leaves").status) == ("agrees", "agrees"), v.text
    assert v.status == "agrees"


def test_a_gradient_where_a_none_predicts_none_differs() -> None:
    """A known None: PyTorch storing a gradient for x would be a proven difference."""
    t = local("none")
    t.real = _real(t, {"x": False, "w": False})
    assert judge(t, replay(t)).differences == ("leaves",)


def test_zeros_where_a_none_across_an_rpc_predicts_zeros_but_pytorch_has_values_differ() -> None:
    t = across("none")
    t.real = _real(t, {"v1": False})
    assert "zeros" in judge(t, replay(t)).differences


def test_a_traced_programs_own_function_stays_not_compared() -> None:
    """The same graph with a Function the replay does not know (no ``custom``): no gradient
    for x is not a proven difference, as before."""
    t = local(None, between=None)
    t.real = _real(t, {"w": False})
    v = judge(t, replay(t))
    assert v.check("leaves").status == "agrees" and v.check("zeros").status == "not compared"
    assert v.status == "agrees"


# -- the trace carries the shape -------------------------------------------------------------------

def test_the_custom_field_round_trips_in_both_layouts() -> None:
    t = local("none", between="scale")
    text = json.dumps(t.to_json())
    back = loads(text)
    assert [n.custom for n in back.nodes if n.python] == ["scale", "none"]
    cols = decode_nodes(encode_nodes(t.nodes, t.workers), t.workers, "t.json")[0]
    assert [cols[i].custom for i in range(len(cols)) if cols[i].python] == ["scale", "none"]
    old = F.design_note()   # a trace without the field loads as before
    assert all(n.custom is None for n in loads(json.dumps(old.to_json())).nodes)


# -- why ------------------------------------------------------------------------------------------

def test_why_names_the_none_that_leaves_a_leaf_without_a_gradient() -> None:
    from distviz.analyses.why import why
    w = why(local("none", between="MulBackward0"), "x")
    assert (w.kind, w.gets_gradient) == ("python", False)
    assert "DroppedBackward on worker0 returns None for it" in w.summary
    assert "puts nothing into the context" in w.summary


def test_why_says_where_an_all_zero_gradient_comes_from() -> None:
    from distviz.analyses.why import why
    t = local("none", between="scale")
    t.real = _real(t, {"x": True, "w": False})
    w = why(t, "x")
    assert w.gets_gradient and any("DroppedBackward returns None for it" in d
                                   for d in w.details), w.details
    t = local("zeros")
    t.real = _real(t, {"x": True, "w": False})
    assert any("ZerosBackward returns zeros" in d for d in why(t, "x").details)
