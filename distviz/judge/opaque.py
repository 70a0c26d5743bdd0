"""Which gradients pass through a Python backward (pure, torch-free).

The replay knows an all-zero gradient only from the graph: an unused output of an RPC's result
sends zeros, and every node FAST mode runs passes zeros on as zeros (a C++ backward is linear
in its gradient). A custom autograd Function (``torch.autograd.Function``, recorded with
``"python": true``) breaks that: its backward is the program's Python code, which may return
zeros for a gradient that is not zero (``torch.zeros_like(g)``), something for zeros (a
constant), or ``None`` (PyTorch then stores no gradient for a leaf behind it on the same worker,
and an RPC sends zeros in its place). So a zero or a missing gradient the replay predicts for a
node behind such a node is not proven, and the verdict says "not compared" instead of
"differs".

The scenario language's own custom Functions (a node with ``"custom"``) are not opaque: what
their backward returns is known, and the replay models it (``distviz.replay.undefined``).

``python_behind(trace, ids)`` walks backward's direction from every Python node the replay does
not know (its next edges, and from a recv to the send of its message on the other worker) with
a queue, and returns the nodes of ``ids`` it reaches, each with the Python node it found first.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from distviz.replay.undefined import known_python
from distviz.trace import NodeKind, Trace

__all__ = ["python_behind"]


def python_behind(trace: Trace, ids: Iterable[str]) -> dict[str, str]:
    """Return ``{node id: Python node's name}`` for each node of ``ids`` that the backward of a
    custom Function the replay does not know feeds, directly or through other nodes and RPCs (a
    Python node feeds itself). Empty when the trace has no such node."""
    wanted = set(ids)
    if not wanted:
        return {}
    nodes = {n.id: n for n in trace.nodes}
    source: dict[str, str] = {}
    queue: deque[str] = deque()
    for n in nodes.values():
        if n.python and known_python(n) is None:
            source[n.id] = n.name
            queue.append(n.id)
    if not queue:
        return {}
    send_of = {p["msg_id"]: p["send"] for p in trace.pairs() if p["send"] is not None}
    while queue:
        node = nodes[queue.popleft()]
        targets = [e[0] for e in node.next if e is not None]
        if node.kind == NodeKind.RECV and node.msg_id in send_of:
            targets.append(send_of[node.msg_id])
        for t in targets:
            if t not in source:
                source[t] = source[node.id]
                queue.append(t)
    return {nid: source[nid] for nid in sorted(wanted) if nid in source}
