"""N1: networkx for the views' reachability, against distviz's own walks, on a big trace.

    python bench/bench_nx.py --nodes 100000 [--repeat 5] [--json]

On ``synthetic_trace(nodes)`` (not timed), each repeat alternates the two sides so that machine
noise hits both, and reports medians (CPU seconds of this one-threaded process) and ratios
networkx / distviz (above 1: networkx is slower):

* ``focus``: the neighbourhood ``--focus NODE --depth 2`` shows
  (``distviz.views.scope.neighbourhood``: flat lists, predecessors built per call) against the
  same walk on a ``networkx.DiGraph`` (built from the same ``IndexedGraph`` in the call, as a
  view would have to; ``focus_walk`` without the build);
* ``reach``: what the roots reach across workers (``distviz.replay.graph.reachable_nodes``,
  the hang diagnosis's walk) against ``networkx.descendants`` on the graph with its message
  edges (``reach_walk`` without the build);
* ``to_networkx_s``: ``Trace.to_networkx()`` of the whole trace, ``graphml_s``: writing it as
  GraphML (``distviz.views.graph_nx.graph_file``).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import networkx as nx
from common import emit

from distviz.replay.graph import ACC, IndexedGraph, reachable_nodes
from distviz.replay.synthetic import synthetic_trace
from distviz.views.graph_nx import graph_file
from distviz.views.scope import HUB_DEGREE, neighbourhood


def nx_graph(g: IndexedGraph, messages: bool) -> nx.DiGraph:
    """The trace's next edges (and recv -> send message edges) as a DiGraph of node indices."""
    out = nx.DiGraph()
    out.add_nodes_from(range(g.n))
    out.add_edges_from((i, t) for i in range(g.n) for t in g.targets[i] if t >= 0)
    if messages:
        out.add_edges_from((r, g.send_by_msg[m]) for m, r in g.recv_by_msg.items()
                           if m in g.send_by_msg)
    return out


def nx_neighbourhood(g: IndexedGraph, G: nx.DiGraph, center: int, depth: int) -> list[int]:
    """``neighbourhood`` on a DiGraph: the same walk (either direction, recv <-> send, leaves and
    hubs shown but not walked through) with ``networkx.generic_bfs_edges``."""
    pair: dict[int, int] = {}
    for m, r in g.recv_by_msg.items():
        s = g.send_by_msg.get(m, -1)
        if s >= 0:
            pair[r], pair[s] = s, r

    def near(x: int) -> list[int]:
        out = [*G.successors(x), *G.predecessors(x)]
        if x in pair:
            out.append(pair[x])
        if x != center and (g.kind[x] == ACC or len(out) > HUB_DEGREE):
            return []
        return out

    return [center, *(v for _u, v in nx.generic_bfs_edges(G, center, near, depth_limit=depth))]


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """``fn()`` and the CPU seconds it took (one thread: on a busy machine the wall time
    counts the other processes' turns too)."""
    t0 = time.process_time()
    out = fn()
    return time.process_time() - t0, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    trace = synthetic_trace(args.nodes, args.workers, 0)
    g = IndexedGraph(trace)
    roots = g.roots[0]
    center = g.n // 2
    t: dict[str, list[float]] = {k: [] for k in (
        "focus_distviz", "focus_nx", "focus_walk_nx", "reach_distviz", "reach_nx",
        "reach_walk_nx", "to_networkx", "graphml")}
    for _ in range(max(1, args.repeat)):
        dt, ours = timed(lambda: neighbourhood(g, center, 2))
        t["focus_distviz"].append(dt)
        dt, G = timed(lambda: nx_graph(g, messages=False))
        dw, theirs = timed(lambda G=G: nx_neighbourhood(g, G, center, 2))
        t["focus_nx"].append(dt + dw)
        t["focus_walk_nx"].append(dw)
        assert set(ours) == set(theirs), "the two walks disagree"
        dt, seen = timed(lambda: reachable_nodes(g, roots))
        t["reach_distviz"].append(dt)
        dt, GM = timed(lambda: nx_graph(g, messages=True))
        dw, reached = timed(lambda GM=GM: set().union(*(nx.descendants(GM, r) for r in roots),
                                                       roots))
        t["reach_nx"].append(dt + dw)
        t["reach_walk_nx"].append(dw)
        assert reached == {i for i in range(g.n) if seen[i]}, "the two walks disagree"
        dt, whole = timed(trace.to_networkx)
        t["to_networkx"].append(dt)
        dt, _ = timed(lambda whole=whole: graph_file(whole, "graphml"))
        t["graphml"].append(dt)
    med = {k: statistics.median(v) for k, v in t.items()}
    out: dict[str, object] = {"nodes": g.n, **{f"{k}_s": v for k, v in med.items()}}
    out["focus_ratio"] = med["focus_nx"] / med["focus_distviz"]
    out["focus_walk_ratio"] = med["focus_walk_nx"] / med["focus_distviz"]
    out["reach_ratio"] = med["reach_nx"] / med["reach_distviz"]
    out["reach_walk_ratio"] = med["reach_walk_nx"] / med["reach_distviz"]
    emit(out, args.json)


if __name__ == "__main__":
    main()
