"""A hang named at the program's own line (``distviz.replay.dropped`` through
``distviz.replay.hang``), on traces ``distviz trace`` wrote of ``tests/programs/hangs/pipeline.py``
(a pipeline of two shards behind RRefs; ``hang_skip_first.json``: micro-batch 0 left out of the
loss; ``hang_validate.json``: a validation forward inside the training context;
``hang_item.json``: a second forward turned into a number with ``.item()``;
``hang_validate_no_grad.json``: the validation forward under ``torch.no_grad()``, still inside
the context, which PyTorch's own backward hangs on too), and on traces built
by hand for a result really overwritten at the program's level."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import replay_fixtures as F
from builders.hang import _hang

from distviz.analyses.why import why
from distviz.replay import IndexedGraph
from distviz.replay.dropped import NUMBER, DropKind, Lines
from distviz.replay.graph import reachable_nodes
from distviz.replay.rpc_calls import CallIndex
from distviz.replay.values import Hang
from distviz.trace import Trace, load

TRACES = Path(__file__).parents[2] / "traces"
PROGRAM = "tests/programs/hangs/pipeline.py"
FORWARD = f"rpc_async(forward on an RRef) at {PROGRAM}:85 in forward"
LOSS = (f"the loss built at {PROGRAM}:133 in train (`loss = sum(loss_fn(outputs[i], targets[i]) "
        "for i in range(first, len(outputs)))`)")


def _words(hang: Hang) -> list[str]:
    return [hang.summary, *hang.chain, *hang.fixes]


def _no_inner_blame(hang: Hang) -> None:
    """Nothing blames the shards' own ``x = x_rref.to_here()``."""
    for text in _words(hang):
        assert "overwrit" not in text and "`x`" not in text, text
        assert ":60 in forward" not in text and ":43 in forward" not in text, text


def test_a_micro_batch_left_out_of_the_loss_is_named_at_the_loss() -> None:
    hang = _hang(load(TRACES / "hang_skip_first.json"))
    assert hang.summary == (
        f"worker2's SendRpcBackward never gets a gradient: the 1st of 3 results of {FORWARD}, "
        f"made through `outputs = model(inputs)` at {PROGRAM}:131 in train, is left out of "
        f"{LOSS}, while the line's other results are in it (1 more such send)")
    assert hang.fixes[0] == (
        "include every result of `outputs = model(inputs)` (every micro-batch's output) in the "
        f"loss at {PROGRAM}:133 in train, so each one's gradient flows back")
    _no_inner_blame(hang)


def test_the_send_that_only_waits_behind_it_names_the_same_cause() -> None:
    hang = _hang(load(TRACES / "hang_skip_first.json"))
    by_worker = {b.worker: b for b in hang.blocked_sends}
    assert set(by_worker) == {"worker1", "worker2"}
    # worker1's send feeds worker2's to_here, which only feeds the unused micro-batch
    assert by_worker["worker1"].reason == by_worker["worker2"].reason
    assert by_worker["worker1"].call == by_worker["worker2"].call


def test_a_validation_forward_inside_the_context_is_named_at_its_line() -> None:
    hang = _hang(load(TRACES / "hang_validate.json"))
    assert hang.summary == (
        f"worker2's SendRpcBackward never gets a gradient: the 1st of 2 results of {FORWARD}, "
        f"made through `val_outputs = model(val_inputs)` at {PROGRAM}:135 in train, a second "
        f"forward inside the training context, is not used by {LOSS} (3 more such sends)")
    assert hang.fixes[0].startswith(
        "run `val_outputs = model(val_inputs)` outside the `with dist_autograd.context()` block "
        "(after the backward; under torch.no_grad() if it needs no gradient)")
    assert "even under torch.no_grad()" in hang.fixes[0]
    assert len(hang.fixes) == 2 and "--mode smart" in hang.fixes[1]    # said once
    _no_inner_blame(hang)


def test_a_result_turned_into_a_number_is_named_at_that_line() -> None:
    hang = _hang(load(TRACES / "hang_item.json"))
    assert ("made through `print(f\"loss {loss_fn(torch.cat(model(inputs)), labels).item():.4f}\")` "
            f"at {PROGRAM}:140 in train, is turned into a Python number there") in hang.summary
    assert hang.fixes[0].startswith("keep the tensor, not a Python number")
    _no_inner_blame(hang)


def test_a_validation_forward_under_no_grad_in_the_context_names_its_caller_and_line() -> None:
    hang = _hang(load(TRACES / "hang_validate_no_grad.json"))
    assert hang.summary == (
        "worker2's SendRpcBackward never gets a gradient: the 1st of 2 RPCs "
        f"{FORWARD.replace(' at ', ' at ', 1)} from master, made through "
        f"`val_outputs = model(val_inputs)` at {PROGRAM}:138 in train, was made under "
        "torch.no_grad(), so master attached no RecvRpcBackward for its result and nothing "
        "will ever send a gradient (1 more such send)")
    assert hang.fixes[0] == (
        "run `val_outputs = model(val_inputs)` outside the `with dist_autograd.context()` block "
        "(after the backward): torch.no_grad() inside the context does not help, since the "
        "callee's forward runs with grad enabled and leaves a send that FAST mode waits for")
    _no_inner_blame(hang)


@pytest.mark.parametrize("name, kind", [("hang_skip_first", DropKind.LEFT_OUT),
                                        ("hang_validate", DropKind.SECOND_FORWARD),
                                        ("hang_item", DropKind.TO_NUMBER)])
def test_each_unused_call_of_the_initiator_has_its_kind(name: str, kind: DropKind) -> None:
    trace = load(TRACES / f"{name}.json")
    g = IndexedGraph(trace)
    reach = reachable_nodes(g, g.roots[0])
    lines = Lines(trace, g, reach, 0, CallIndex(trace, g))
    unused = [c for c in lines.level if c not in lines.used
              and trace.rpc_calls[c].api == "rpc_async"]
    assert unused
    assert {d.kind for c in unused if (d := lines.drop_of(c)) is not None} == {kind}
    # the callees' calls (inside the shards' forward) have no line in the backward's function
    assert all(trace.rpc_calls[c].caller == "master" for c in lines.level)


def _reversed_callee_calls(trace: Trace) -> Trace:
    """The same run as if the callees' threads had served the micro-batches in the opposite
    order: their calls listed the other way round."""
    order = list(range(len(trace.rpc_calls)))
    mine = [k for k, c in enumerate(trace.rpc_calls) if c.caller != trace.initiator]
    for k, j in zip(mine, reversed(mine), strict=True):
        order[k] = j
    new_of = {old: new for new, old in enumerate(order)}
    nodes = [replace(n, call=new_of[n.call]) if n.call is not None else n for n in trace.nodes]
    return replace(trace, nodes=nodes, rpc_calls=[trace.rpc_calls[k] for k in order])


@pytest.mark.parametrize("name", ["hang_skip_first", "hang_validate", "hang_item",
                                  "hang_validate_no_grad"])
def test_the_words_do_not_depend_on_the_order_threads_ran_in(name: str) -> None:
    trace = load(TRACES / f"{name}.json")
    assert _words(_hang(_reversed_callee_calls(trace))) == _words(_hang(trace))


# -- a result really overwritten at the program's level, and one that only looks so ------------

def _loop_trace(site: str, statement: str) -> Trace:
    """Two calls made through one line of ``train`` in a loop; the loss uses the last only."""
    b = F.TraceBuilder(2)
    t1 = b.acc(0, "t1")
    calls = [b.rpc(0, 1, "rpc_sync", "f", [F.M(0, k), F.M(1, k)], result_var="t3")
             for k in range(2)]
    for k, c in enumerate(calls):
        b.send(0, F.M(0, k), [t1], seq=k, call=c)
    b.recv(0, F.M(1, 0), seq=0, call=calls[0])
    r1 = b.recv(0, F.M(1, 1), seq=1, vars=["t3"], call=calls[1])
    loss = b.op(0, "SumBackward0", 2, [r1])
    for k, c in enumerate(calls):
        r = b.recv(1, F.M(0, k), seq=0, call=c)
        b.send(1, F.M(1, k), [b.op(1, "MulBackward0", 1, [r])], seq=2, call=c)
    b.backward([loss], root_vars=["loss"])
    trace = b.build()
    for c in trace.rpc_calls:
        c.site, c.statement = site, statement
    trace.passes[0].site = "main.py:12 in train"
    trace.passes[0].loss_site, trace.passes[0].loss_statement = "main.py:11 in train", \
        "loss = t3.sum()"
    return trace


def test_a_result_overwritten_in_the_programs_own_loop_is_still_said_so() -> None:
    hang = _hang(_loop_trace("main.py:9 in train", "t3 = rpc.rpc_sync('worker1', f, args=(t1,))"))
    assert "was overwritten by the 2nd" in hang.summary, hang.summary
    assert hang.fixes[0].startswith("keep every result of the RPC instead of overwriting `t3`")


def test_a_variable_inside_a_function_called_in_a_loop_is_not_blamed() -> None:
    hang = _hang(_loop_trace("model.py:4 in forward <- main.py:9 in train", "outs = model(x)"))
    assert "overwrit" not in " ".join(_words(hang))
    assert "made through `outs = model(x)` at main.py:9 in train" in hang.summary, hang.summary
    assert "left out of the loss built at main.py:11 in train (`loss = t3.sum()`)" in hang.summary


def test_an_rpc_made_right_in_the_backwards_function_keeps_its_own_site_and_variable() -> None:
    trace = _loop_trace("main.py:9 in train", "t3 = rpc.rpc_sync('worker1', f, args=(t1,))")
    trace.rpc_calls = trace.rpc_calls[:1] + [replace(trace.rpc_calls[1], site="main.py:10 in "
                                                     "train", statement="t4 = rpc.rpc_sync()")]
    trace.rpc_calls[0].result_var = "t2"     # not overwritten: an unused result of its own
    hang = _hang(trace)
    assert "made through" not in hang.summary, hang.summary
    assert "the result of rpc_sync(f) at main.py:9 in train, assigned to `t2`, is not used by " \
        "the loss (`loss`)" in hang.summary, hang.summary


@pytest.mark.parametrize("statement, number", [
    ("acc = (model(x).argmax(1) == y).float().mean().item()", True),
    ("print(float(model(x).sum()))", True), ("xs = model(x).tolist()", True),
    ("h = model(x).float().relu()", False), ("n = model(x).int()", False)])
def test_a_python_number_is_told_from_a_tensor_method(statement: str, number: bool) -> None:
    assert bool(NUMBER.search(statement)) is number


def test_why_a_shards_parameter_gets_no_gradient_names_the_programs_line() -> None:
    answer = why(load(TRACES / "hang_skip_first.json"), "worker2.fc.weight")
    text = " ".join([answer.summary, *answer.details, *answer.fixes])
    assert f"made through `outputs = model(inputs)` at {PROGRAM}:131 in train, is left out of " \
        f"{LOSS}" in text, text
    assert answer.fixes[0].startswith("include every result of `outputs = model(inputs)`")
    assert "overwrit" not in text and "`x`" not in text


def test_a_result_returned_by_forward_and_overwritten_in_the_programs_loop_is_said_so() -> None:
    trace = _loop_trace("model.py:4 in forward <- main.py:9 in train", "t3 = model(x)")
    hang = _hang(trace)     # forward returns the RPC's result: `t3` is the program's variable
    assert "was overwritten by the 2nd" in hang.summary, hang.summary
