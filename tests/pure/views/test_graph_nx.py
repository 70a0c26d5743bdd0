"""The trace as a networkx graph, and as GraphML and GEXF files (pure: no torch, no workers).

The real traces in ``tests/traces/`` were recorded from PyTorch runs, so what the graph says
ran is checked against what PyTorch ran (``real.events``)."""

from __future__ import annotations

import io
from pathlib import Path

import networkx as nx
import pytest
import replay_fixtures as fx
from guards import HANG_GUARD_S

import distviz
from distviz.replay import initial_dependencies, replay
from distviz.trace import Trace, has_seq
from distviz.views.graph_nx import file_graph, graph_file, trace_graph

TRACES = Path(__file__).resolve().parents[2] / "traces"


def _messages(trace: Trace) -> list[dict[str, object]]:
    return [p for p in trace.pairs() if p["send"] is not None and p["recv"] is not None]


@pytest.mark.parametrize("name", ["pipeline", "no_grad_rpc", "overwritten_result"])
def test_every_node_and_one_edge_per_gradient_message_in_a_dag(name: str) -> None:
    trace = distviz.load(TRACES / f"{name}.json")
    g = trace.to_networkx()
    assert isinstance(g, nx.DiGraph)
    assert list(g.nodes) == [n.id for n in trace.nodes]
    assert nx.is_directed_acyclic_graph(g)
    messages = [(u, v, d) for u, v, d in g.edges(data=True) if d["kind"] == "message"]
    pairs = _messages(trace)
    assert sorted((d["msg_id"], u, v) for u, v, d in messages) == sorted(
        (p["msg_id"], p["recv"], p["send"]) for p in pairs)
    gradient = {(u, v) for u, v, d in g.edges(data=True) if d["kind"] == "gradient"}
    assert gradient == {(n.id, e[0]) for n in trace.nodes for e in n.next if e is not None}


def test_nodes_carry_worker_name_sequence_nr_variable_shape_and_dependencies() -> None:
    trace = distviz.load(TRACES / "pipeline.json")
    g = trace.to_networkx()
    deps = initial_dependencies(trace, 0)
    for n in trace.nodes:
        a = g.nodes[n.id]
        assert (a["worker"], a["kind"], a["name"]) == (n.worker, n.kind, n.name)
        assert a["sequence_nr"] == (n.seq if has_seq(n.seq) else None)
        assert a["dependencies"] == deps.get(n.id)
        assert a["shape"] == (tuple(n.shape) if n.shape is not None else None)
        if n.kind == "accumulate_grad":
            assert a["var"] == n.var and a["sequence_nr"] is None
    assert g.graph["initiator"] == trace.initiator and g.graph["workers"] == tuple(trace.workers)


def test_the_nodes_that_ran_are_those_pytorch_ran() -> None:
    trace = distviz.load(TRACES / "pipeline.json")
    assert trace.real is not None
    g = trace.to_networkx(pass_index=0)
    ran = {n for n, a in g.nodes(data=True) if a["outcome"] == "ran"}
    assert ran == {ev["node"] for ev in trace.real["events"] if ev["pass"] == 0}
    rp = replay(trace)
    execute = {ev.node: ev.step for ev in rp.events if ev.action in ("execute", "accumulate")}
    assert {n: a["step"] for n, a in g.nodes(data=True) if a["step"] is not None} == execute
    assert g.graph["outcome"] == "completed" and g.graph["pass_index"] == 0


def test_paths_across_workers_follow_the_gradient_messages() -> None:
    #   worker0: SumBackward0 -> MulBackward0 -> RecvRpcBackward ==1:0==> worker1: Send -> Add ->
    #   RecvRpcBackward ==0:0==> worker0: SendRpcBackward -> AccumulateGrad(t1)
    trace = fx.design_note()
    g = trace.to_networkx()
    path = nx.shortest_path(g, trace.passes[0].roots[0], "worker0/AccumulateGrad(t1)")
    assert [g.nodes[n]["worker"] for n in path] == ["worker0"] * 3 + ["worker1"] * 3 + \
        ["worker0"] * 2
    hops = [g.edges[u, v]["label"] for u, v in zip(path, path[1:], strict=False)
            if g.edges[u, v]["kind"] == "message"]
    assert hops == ["1:0", "0:0"]


def test_a_hang_marks_its_blocked_send_and_the_nodes_that_never_run() -> None:
    trace = fx.unused_rpc_result()
    rp = replay(trace)
    assert rp.outcome == "hang" and rp.hang is not None
    g = trace.to_networkx(pass_index=0)
    blocked = {b.node for b in rp.hang.blocked_sends}
    assert blocked and {n for n, a in g.nodes(data=True) if a["outcome"] == "blocked"} == blocked
    assert g.graph["outcome"] == "hang"
    assert all(a["step"] is None for n, a in g.nodes(data=True) if a["outcome"] != "ran")


def test_the_node_that_raised_is_marked() -> None:
    trace = fx.fail_backward()
    rp = replay(trace)
    assert rp.error is not None
    g = trace.to_networkx(pass_index=0)
    assert [n for n, a in g.nodes(data=True) if a["outcome"] == "raised"] == [rp.error.node]
    assert g.graph["outcome"] == "error"


def test_a_pass_the_trace_does_not_have_is_an_index_error() -> None:
    with pytest.raises(IndexError, match="passes 0 to 0"):
        fx.design_note().to_networkx(pass_index=3)


def test_the_second_pass_has_its_own_counts() -> None:
    trace = fx.two_passes(retain_first=True)
    g = trace.to_networkx(pass_index=1)
    assert {n: a["dependencies"] for n, a in g.nodes(data=True)
            if a["dependencies"] is not None} == initial_dependencies(trace, 1)
    assert g.graph["pass_index"] == 1


def test_graphml_reads_back_with_the_same_nodes_and_edges() -> None:
    trace = distviz.load(TRACES / "pipeline.json")
    g = trace_graph(trace, replay(trace))
    back = nx.read_graphml(io.BytesIO(graph_file(g, "graphml")))
    assert list(back.nodes) == list(g.nodes)
    assert set(back.edges) == set(g.edges)
    flat = file_graph(g)
    for n in list(g.nodes)[:20]:
        assert back.nodes[n] == flat.nodes[n]
    leaf = next(n.id for n in trace.nodes if n.kind == "accumulate_grad" and n.shape)
    assert back.nodes[leaf]["shape"] == "x".join(map(str, g.nodes[leaf]["shape"]))
    assert back.nodes[leaf]["sequence_nr"] == -1


def test_gexf_reads_back_with_the_same_nodes() -> None:
    trace = fx.design_note()
    back = nx.read_gexf(io.BytesIO(graph_file(trace.to_networkx(), "gexf")))
    assert set(back.nodes) == {n.id for n in trace.nodes}
    assert back.number_of_edges() == trace.to_networkx().number_of_edges()


def test_names_that_look_like_markup_survive_the_file() -> None:
    trace = fx.design_note()
    nodes = list(trace.nodes)
    leaf = next(n for n in nodes if n.kind == "accumulate_grad")
    leaf.var = 'a"b<script>&\\x'
    trace.nodes = nodes
    back = nx.read_graphml(io.BytesIO(graph_file(trace.to_networkx(), "graphml")))
    assert back.nodes[leaf.id]["var"] == 'a"b<script>&\\x'


def test_a_recording_gives_the_graph_of_the_context_asked_for() -> None:
    from distviz.trace.contexts_file import Recording
    rec = Recording.single(fx.design_note())
    assert set(rec.to_networkx(1).nodes) == {n.id for n in fx.design_note().nodes}


# -- distviz export --format graphml / gexf ----------------------------------------------------

@pytest.mark.parametrize("fmt", ["graphml", "gexf"])
def test_export_writes_a_file_networkx_reads_back_with_the_same_nodes(tmp_path: Path,
                                                                      fmt: str) -> None:
    from typer.testing import CliRunner

    from distviz.cli import app
    trace = fx.unused_rpc_result()
    path = tmp_path / "t.json"
    trace.save(path)
    result = CliRunner().invoke(app, ["export", str(path), "--format", fmt])
    assert result.exit_code == 0, result.output
    out = tmp_path / f"t.{fmt}"
    assert result.output.strip() == f"wrote {out}"
    back = nx.read_graphml(out) if fmt == "graphml" else nx.read_gexf(out)
    assert set(back.nodes) == {n.id for n in trace.nodes}
    rp = replay(trace)
    assert rp.hang is not None
    blocked = {n for n, a in back.nodes(data=True) if a["outcome"] == "blocked"}
    assert blocked == {b.node for b in rp.hang.blocked_sends}


def test_export_graphml_refuses_view_flags(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from distviz.cli import app
    path = tmp_path / "t.json"
    fx.design_note().save(path)
    result = CliRunner().invoke(app, ["export", str(path), "-f", "graphml", "--worker",
                                      "worker1"])
    assert result.exit_code == 2
    assert "--worker cannot be used with --format graphml" in result.output


def test_bench_nx_runs_on_a_small_trace_and_both_walks_agree() -> None:
    import json
    import subprocess
    import sys
    bench = Path(__file__).resolve().parents[3] / "bench" / "bench_nx.py"
    proc = subprocess.run([sys.executable, str(bench), "--nodes", "2000", "--repeat", "1",
                           "--json"], capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-2000:]   # it asserts that the walks agree
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["nodes"] > 1500 and out["focus_ratio"] > 0 and out["reach_ratio"] > 0
