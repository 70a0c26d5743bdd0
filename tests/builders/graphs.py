"""Small traces built by hand (PyTorch's design-note graph, a hang) and the replay and
analysis the renderers take of them."""

from __future__ import annotations

import struct
import zlib
from typing import Any

from distviz.trace import ACCUMULATE_GRAD_SEQ, BackwardPass, Node, RpcCall, Trace

M = 1 << 48


HOSTILE = 'a"b<script>&\\x'


def _node(nid: str, kind: str, seq: int, nxt: list[tuple[str, int] | None] | None = None,
          **kw: Any) -> Node:
    worker, rest = nid.split("/", 1)
    name = {"op": rest.split("#")[0], "send": "torch::distributed::autograd::SendRpcBackward",
            "recv": "torch::distributed::autograd::RecvRpcBackward",
            "accumulate_grad": "torch::autograd::AccumulateGrad"}[kind]
    return Node(id=nid, worker=worker, name=name, kind=kind, seq=seq, next=nxt or [], **kw)


def design_trace(t4: str = "t4") -> Trace:
    """PyTorch's design-note graph: ``t3 = rpc_sync(worker1, torch.add, (t1, t2))``,
    ``loss = (t3 * t4).sum()``; ``t4`` may be renamed (a hostile name)."""
    leaf4 = f"worker0/AccumulateGrad({t4})"
    nodes = [
        _node("worker0/SumBackward0#2", "op", 2, [("worker0/MulBackward0#1", 0)]),
        _node("worker0/MulBackward0#1", "op", 1, [("worker0/RecvRpcBackward#0", 0), (leaf4, 0)]),
        _node("worker0/RecvRpcBackward#0", "recv", 0, msg_id=M | 0, call=0, input_shapes=[[3, 3]]),
        _node(leaf4, "accumulate_grad", ACCUMULATE_GRAD_SEQ, var=t4, shape=[3, 3]),
        _node("worker0/SendRpcBackward#0", "send", 0, [("worker0/AccumulateGrad(t1)", 0),
                                                       ("worker0/AccumulateGrad(t2)", 0)],
              msg_id=0, call=0),
        _node("worker0/AccumulateGrad(t1)", "accumulate_grad", ACCUMULATE_GRAD_SEQ, var="t1",
              shape=[3, 3]),
        _node("worker0/AccumulateGrad(t2)", "accumulate_grad", ACCUMULATE_GRAD_SEQ, var="t2",
              shape=[3, 3]),
        _node("worker1/SendRpcBackward#0", "send", 0, [("worker1/AddBackward0#1", 0)],
              msg_id=M | 0, call=0),
        _node("worker1/AddBackward0#1", "op", 1, [("worker1/RecvRpcBackward#0", 0),
                                                  ("worker1/RecvRpcBackward#0", 1)]),
        _node("worker1/RecvRpcBackward#0", "recv", 0, msg_id=0, call=0,
              input_shapes=[[3, 3], [3, 3]]),
    ]
    return Trace(workers=["worker0", "worker1"], initiator="worker0", context_id=0, nodes=nodes,
                 passes=[BackwardPass(roots=["worker0/SumBackward0#2"])],
                 rpc_calls=[RpcCall("worker0", "worker1", "rpc_sync", "torch.add", True, True,
                                    msg_ids=[0, M])])


def hang_trace() -> Trace:
    """The design note plus an unused RPC result: worker0's send 0:1 never gets a gradient."""
    tr = design_trace()
    tr.nodes.append(_node("worker0/SendRpcBackward#3", "send", 3,
                          [("worker0/AccumulateGrad(t1)", 0)], msg_id=1, call=1))
    tr.nodes.append(_node("worker1/RecvRpcBackward#2", "recv", 2, msg_id=1, call=1))
    tr.nodes.append(_node("worker1/SendRpcBackward#3", "send", 3,
                          [("worker1/RecvRpcBackward#2", 0)], msg_id=M | 1, call=1))
    tr.nodes.append(_node("worker0/RecvRpcBackward#4", "recv", 4, msg_id=M | 1, call=1))
    tr.rpc_calls.append(RpcCall("worker0", "worker1", "rpc_sync", "f", False, True,
                                msg_ids=[1, M | 1]))
    return tr


def replay_of(trace: Trace) -> Any:
    """The real replay engine (tests needing it are skipped until it exists)."""
    from distviz.replay import replay
    return replay(trace)


def judged(trace: Trace, rp: Any) -> Any:
    """The analysis renderers take (``distviz.judge.analysis``) of ``trace`` with the replay
    ``rp``: its verdict and timing made as every command makes them."""
    from distviz.judge.analysis import analysis_from
    from distviz.judge.verdict import judge
    return analysis_from(trace, rp, judge(trace, rp))


def _png_pixels_vary(png: bytes) -> bool:
    """Decode an 8-bit PNG (pure Python) and tell whether its pixels are not all the same."""
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, width, height, ctype = 8, b"", 0, 0, 0
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos:pos + 4])
        kind, data = png[pos + 4:pos + 8], png[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, _, ctype = struct.unpack(">IIBB", data[:10])
        elif kind == b"IDAT":
            idat += data
        pos += 12 + length
    raw = zlib.decompress(idat)
    bpp = {2: 3, 6: 4, 0: 1, 4: 2}.get(ctype, 4)
    stride = width * bpp + 1
    rows = {raw[i * stride + 1:(i + 1) * stride] for i in range(0, height, max(1, height // 50))}
    return len(rows) > 1 and width > 50 and height > 50
