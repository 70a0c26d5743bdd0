"""The merge (torch side): per-worker pieces of a context -> one ``Trace``."""

from __future__ import annotations

from typing import Any

import torch

from distviz.trace import BackwardPass, Node, NodeKind, RpcCall, Trace
from distviz.trace.absent import parse_absent


def build_trace(workers: list[str], initiator: str, context_id: int,
                pieces: list[dict[str, Any]], passes: list[BackwardPass]) -> Trace:
    """Merge per-worker pieces into one Trace (nodes sorted by worker rank, walk order kept)."""
    rank = {w: i for i, w in enumerate(workers)}
    pieces = sorted(pieces, key=lambda p: rank[p["worker"]])
    nodes: list[Node] = []
    calls: list[RpcCall] = []
    known: dict[str, list[str]] = {}
    for p in pieces:
        known[p["worker"]] = [workers[k] for k in p["known"]]
        for c in p["calls"]:
            calls.append(RpcCall(**c))
        for n in p["nodes"]:
            nodes.append(Node(
                id=n["id"], worker=n["worker"], name=n["name"], kind=NodeKind(n["kind"]), seq=n["seq"],
                next=[(e[0], e[1]) if e is not None else None for e in n["next"]],
                msg_id=n.get("msg_id"), var=n.get("var"), shape=n.get("shape"),
                dtype=n.get("dtype"), input_shapes=n.get("input_shapes"),
                saved=bool(n.get("saved")), fault=n.get("fault"), vars=n.get("vars") or [],
                python=bool(n.get("python")), custom=n.get("custom")))
    call_of_msg: dict[int, int] = {}
    for i, c in enumerate(calls):
        for m in c.msg_ids:
            call_of_msg.setdefault(m, i)
    for node in nodes:
        if node.msg_id is not None and node.msg_id in call_of_msg:
            node.call = call_of_msg[node.msg_id]
    absent = parse_absent([a for p in pieces for a in p.get("absent") or []], workers,
                          "<recording>")
    return Trace(workers=workers, initiator=initiator, context_id=context_id, nodes=nodes,
                 passes=passes, rpc_calls=calls, known_workers=known,
                 torch_version=torch.__version__,
                 interop_threads=torch.get_num_interop_threads(), absent_leaves=absent)

