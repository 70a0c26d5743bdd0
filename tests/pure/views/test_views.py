"""Views that fit the question: scopes (one worker, one RPC call, a neighbourhood), the RPC call
of every node, the worker summary, and the picture chosen by default: the most detailed view
that stays readable, checked with the real Graphviz (no downscale warning on a 15,000-node
graph; an explicit view too large for a bitmap is drawn shrunk and says so)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from builders.graphs import _node, design_trace
from typer.testing import CliRunner

from distviz.cli import app
from distviz.errors import UsageError
from distviz.render.dot.draw import build_dot
from distviz.render.pictures import choose_view, draw_picture, other_views
from distviz.replay import replay
from distviz.replay.graph import IndexedGraph
from distviz.replay.synthetic import synthetic_trace
from distviz.trace import ACCUMULATE_GRAD_SEQ, BackwardPass, Node, Trace
from distviz.views import ViewSpec, call_groups, resolve_node, select_scope, worker_summary

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not on PATH")


def _graph(trace: Trace) -> IndexedGraph:
    return IndexedGraph(trace)


# -- scopes -----------------------------------------------------------------------------------------

def test_worker_scope_holds_that_workers_nodes() -> None:
    tr = design_trace()
    scope = select_scope(_graph(tr), ViewSpec(worker="worker1"))
    assert scope.nodes == {n.id for n in tr.nodes if n.worker == "worker1"}
    assert scope.title == "worker worker1 (3 of 10 nodes)"


def test_rpc_call_scope_holds_both_ends_and_the_callees_work() -> None:
    tr = design_trace()
    scope = select_scope(_graph(tr), ViewSpec(rpc_call=0))
    assert scope.nodes is not None
    assert {"worker0/SendRpcBackward#0", "worker0/RecvRpcBackward#0", "worker1/SendRpcBackward#0",
            "worker1/RecvRpcBackward#0", "worker1/AddBackward0#1"} <= scope.nodes
    assert "worker0/SumBackward0#2" not in scope.nodes   # the caller's own ops are not the call's
    assert scope.title.startswith("RPC call 0: rpc_sync(torch.add) worker0 → worker1")


def test_focus_by_variable_takes_the_neighbourhood_both_ways() -> None:
    tr = design_trace()
    g = _graph(tr)
    assert resolve_node(g, "t4") == "worker0/AccumulateGrad(t4)"
    scope = select_scope(g, ViewSpec(focus="t4", depth=1))
    assert scope.nodes == {"worker0/AccumulateGrad(t4)", "worker0/MulBackward0#1"}
    deeper = select_scope(g, ViewSpec(focus="t4", depth=3))
    assert deeper.nodes is not None and "worker1/SendRpcBackward#0" in deeper.nodes  # via 1:0
    assert resolve_node(g, "AddBackward0#1") == "worker1/AddBackward0#1"


def test_a_deep_chain_neighbourhood_is_iterative() -> None:
    nodes = [_node(f"w0/MulBackward0#{i}", "op", i, [(f"w0/MulBackward0#{i + 1}", 0)])
             for i in range(20_000)]
    nodes.append(_node("w0/MulBackward0#20000", "op", 20_000))
    tr = Trace(workers=["w0"], initiator="w0", context_id=0, nodes=nodes,
               passes=[BackwardPass(roots=["w0/MulBackward0#0"])])
    scope = select_scope(_graph(tr), ViewSpec(focus="w0/MulBackward0#0", depth=15_000))
    assert scope.nodes is not None and len(scope.nodes) == 15_001


@pytest.mark.parametrize(("spec", "message"), [
    (ViewSpec(worker="wroker1"), "--worker wroker1: no such worker (did you mean 'worker1'?)"),
    (ViewSpec(rpc_call=7), "--rpc-call 7: the trace has only RPC call 0"),
    (ViewSpec(focus="t9"), "--focus t9: no node or variable of that name"),
    (ViewSpec(focus="t4", depth=-1), "--depth -1: expected 0 or more"),
    (ViewSpec(worker="worker1", rpc_call=0), "--worker cannot be used with --rpc-call"),
])
def test_bad_scopes_name_the_flag(spec: ViewSpec, message: str) -> None:
    with pytest.raises(UsageError) as err:
        select_scope(_graph(design_trace()), spec)
    assert str(err.value.message).startswith(message)


def test_an_unknown_focus_points_to_the_programs_variables_not_a_scenarios() -> None:
    with pytest.raises(UsageError) as err:
        resolve_node(_graph(design_trace()), "t9")
    assert err.value.message.endswith("or a variable of the program")


def test_a_name_for_several_nodes_is_refused_with_examples() -> None:
    tr = design_trace()
    tr.nodes[0].vars = ["h"]
    tr.nodes[1].vars = ["h"]
    with pytest.raises(UsageError, match=r"--focus h: names 2 nodes \(worker0/SumBackward0#2, "):
        resolve_node(_graph(tr), "h")


# -- RPC call groups and the summary ------------------------------------------------------------------

def test_every_node_belongs_to_the_rpc_call_above_it() -> None:
    tr = design_trace()
    grouping = call_groups(tr)
    key = {n.id: grouping.groups[grouping.of[i]].key for i, n in enumerate(tr.nodes)}
    assert {key[n.id] for n in tr.nodes if n.worker == "worker1"} == {"call0"}
    assert key["worker0/SumBackward0#2"] == "roots" and key["worker0/AccumulateGrad(t1)"] == "call0"


def test_worker_summary_counts_kinds_calls_and_message_bytes_each_way() -> None:
    summary = worker_summary(_graph(design_trace()), timing=False)
    w0, w1 = summary.workers
    assert (w0.worker, w0.initiator, w0.nodes, w0.sends, w0.recvs, w0.leaves) == \
        ("worker0", True, 7, 1, 1, 3)
    assert (w0.calls_made, w1.calls_served) == (1, 1)
    links = {(lk.sender, lk.receiver): (lk.messages, lk.bytes) for lk in summary.links}
    # worker0's recv sends one 3x3 float32 gradient; worker1's recv two
    assert links == {("worker0", "worker1"): (1, 36), ("worker1", "worker0"): (1, 72)}


# -- the picture that fits ----------------------------------------------------------------------------

def _wide_trace(leaves: int = 400) -> Trace:
    """One op with ``leaves`` leaves under it: one rank far wider than a bitmap can be."""
    nxt: list[tuple[str, int] | None] = [(f"w0/AccumulateGrad(x{k})", 0) for k in range(leaves)]
    nodes = [Node(id="w0/SumBackward0#1", worker="w0", name="SumBackward0", kind="op", seq=1,
                  next=nxt)]
    nodes += [Node(id=f"w0/AccumulateGrad(x{k})", worker="w0", name="AccumulateGrad",
                   kind="accumulate_grad", seq=ACCUMULATE_GRAD_SEQ, var=f"x{k}", shape=[2])
              for k in range(leaves)]
    return Trace(workers=["w0"], initiator="w0", context_id=0, nodes=nodes,
                 passes=[BackwardPass(roots=["w0/SumBackward0#1"], root_vars=["loss"])])


def test_without_graphviz_the_choice_goes_by_the_number_of_boxes() -> None:
    tr = synthetic_trace(15_000, 4, 0)
    choice = choose_view(tr, None, ViewSpec(), measure=False)
    assert choice.dot.detail == "summary" and choice.chosen_by_default
    assert any("every node: 1" in p for p in choice.passed_over)
    small = choose_view(design_trace(), None, ViewSpec(), measure=False)
    assert small.dot.detail == "full" and not small.passed_over
    hints = other_views(tr, choice)
    assert hints[0] == "--view calls|folded|full" and "--worker worker1" in hints


@pytest.mark.graphviz
@needs_dot
@pytest.mark.parametrize("fmt", ["png", "svg"])
def test_15k_node_default_picture_is_readable(fmt: str) -> None:
    tr = synthetic_trace(15_000, 4, 0)
    rp = replay(tr)
    pic = draw_picture(tr, rp, fmt, ViewSpec(), graph=rp.graph)
    assert pic.choice.dot.detail == "summary"
    assert pic.scaled is None and not [w for w in pic.warnings if "caling" in w]
    assert pic.choice.size_px is not None and max(pic.choice.size_px) <= 10_000
    assert pic.choice.sentence().startswith(f"the whole graph ({len(tr.nodes):,} nodes): the "
                                            "worker summary, 4 boxes")


@pytest.mark.graphviz
@needs_dot
def test_a_view_too_wide_to_read_is_passed_over_and_a_forced_one_says_it_shrank() -> None:
    tr = _wide_trace()
    choice = choose_view(tr, None, ViewSpec())
    assert choice.dot.detail != "full"
    assert re.search(r"every node: [\d,]+ x [\d,]+ px", "; ".join(choice.passed_over))
    pic = draw_picture(tr, None, "png", ViewSpec(detail="full"))
    assert pic.scaled is not None and pic.scaled < 1
    assert any("Graphviz:" in w and "caling" in w for w in pic.warnings)
    assert any("shrank it to" in w and "draw SVG instead" in w for w in pic.warnings)


def test_calls_detail_draws_one_box_per_rpc_call_on_each_worker() -> None:
    g = build_dot(design_trace(), detail="calls")
    assert g.detail == "calls" and g.drawn_nodes == 3   # the roots' group and call 0 twice
    assert "RPC call 0: torch.add" in g.source


def test_scoped_view_draws_the_rest_as_one_box_per_worker() -> None:
    tr = design_trace()
    scope = select_scope(_graph(tr), ViewSpec(worker="worker1"))
    g = build_dot(tr, scope=scope)
    assert g.drawn_nodes == 3 and "more nodes on worker0" in g.source
    assert "view: worker worker1 (3 of 10 nodes), every node" in g.source


# -- the command line ------------------------------------------------------------------------------

def _trace(tmp_path: Path) -> Path:
    path = tmp_path / "design_note.json"
    design_trace().save(path)
    return path


def test_export_dot_says_which_view_and_how_to_get_the_others(tmp_path: Path) -> None:
    tr = synthetic_trace(3_000, 4, 0)
    path = tmp_path / "big.json"
    tr.save(path)
    out = tmp_path / "big.dot"
    result = CliRunner().invoke(app, ["export", str(path), "-f", "dot", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "the whole graph (2,9" in result.output and ": the worker summary, " in result.output
    assert "other views: --view calls|folded|full, --worker worker1" in result.output
    assert out.read_text().startswith("digraph")


def test_export_focus_and_worker_views(tmp_path: Path) -> None:
    path = _trace(tmp_path)
    out = tmp_path / "f.dot"
    r = CliRunner().invoke(app, ["export", str(path), "-f", "dot", "-o", str(out), "--focus",
                                 "t4", "--depth", "1"])
    assert r.exit_code == 0, r.output
    assert "the nodes within 1 edge of t4" in out.read_text()
    r = CliRunner().invoke(app, ["export", str(path), "-f", "dot", "-o", str(out), "--view",
                                 "summary"])
    assert r.exit_code == 0 and "gradient message" in out.read_text()


@pytest.mark.parametrize(("args", "expected"), [
    (["--depth", "2"], "--depth needs --focus: it counts the edges around the focus node"),
    (["--view", "tiny"], "--view tiny: expected one of summary, calls, folded, full"),
    (["--view", "calls", "--full"], "--full cannot be used with --view calls; --full is "
                                    "--view full"),
    (["-f", "perfetto", "--worker", "worker1"], "--worker cannot be used with --format "
                                                "perfetto; it applies to pictures and the HTML "
                                                "viewer"),
    (["--rpc-call", "4"], "--rpc-call 4: the trace has only RPC call 0"),
    (["--view", "summary", "--worker", "worker1"], "--view summary shows every worker; it "
                                                   "cannot be used with --worker, --rpc-call "
                                                   "or --focus"),
])
def test_bad_view_flags_are_one_line_exit_2(tmp_path: Path, args: list[str],
                                            expected: str) -> None:
    out = tmp_path / "out.file"
    if "-f" not in args:
        args = ["-f", "dot", *args]
    result = CliRunner().invoke(app, ["export", str(_trace(tmp_path)), *args, "-o", str(out)])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert lines == [f"error: {expected}"]
    assert not out.exists()
