"""Synthetic pipeline-parallel traces for benchmarks and scale tests.

``synthetic_trace(n_nodes, n_workers, seed)`` builds a graph shaped like pipeline-parallel
training under distributed autograd: each microbatch enters on worker0, runs a few layers on each
stage (worker), is sent to the next stage by RPC, and comes back from the last stage to worker0,
where the microbatch losses are summed into one root. Every stage holds its layers' weights as
``AccumulateGrad`` leaves shared by all microbatches (so their dependency counts are large), and
a few layers add skip connections. Sequence numbers follow PyTorch's thread-local counters:
callee nodes come from one of several RPC server threads (so ties occur), and the results
come back to worker0 through ``to_here()`` on the user thread. The replay completes in FAST mode (no unused sends).

The result is deterministic for a given ``(n_nodes, n_workers, seed)`` and has about
``n_nodes`` nodes (never fewer than one microbatch needs).
"""

from __future__ import annotations

import random

from distviz.trace import ACCUMULATE_GRAD_SEQ, BackwardPass, Node, NodeKind, Trace
from distviz.trace.sections import Meta

__all__ = ["synthetic_trace"]

_OPS = ("AddmmBackward0", "ReluBackward0", "MulBackward0", "GeluBackward0", "AddBackward0")


class _Pipeline:
    """Builds the nodes: stages' weights, then one microbatch at a time."""

    def __init__(self, n_workers: int, rng: random.Random) -> None:
        self.rng = rng
        self.workers = [f"worker{k}" for k in range(n_workers)]
        self.layers = [rng.randint(3, 8) for _ in range(n_workers)]
        self.nodes: list[Node] = []
        self.msg_counter = [0] * n_workers
        self.user_seq = [0]                                    # worker0's user thread
        self.server_seq = [[0] * 4 for _ in range(n_workers)]  # 4 RPC server threads per worker
        self.weights: list[list[str]] = []   # one AccumulateGrad per layer per stage, shared
        for w, wn in enumerate(self.workers):
            ws = []
            for k in range(self.layers[w]):
                nid = f"{wn}/AccumulateGrad(s{w}.w{k})"
                self.nodes.append(Node(
                    id=nid, worker=wn, name="torch::autograd::AccumulateGrad",
                    kind=NodeKind.ACCUMULATE_GRAD, seq=ACCUMULATE_GRAD_SEQ, var=f"s{w}.w{k}",
                    shape=[64, 64], dtype="float32"))
                ws.append(nid)
            self.weights.append(ws)

    def microbatch(self, b: int) -> str | None:
        """Add microbatch ``b`` through every stage; return the grad_fn that reaches the loss."""
        n_workers = len(self.workers)
        prev: str | None = None         # grad_fn of the activation on the current worker
        prev_recv: str | None = None
        for w in range(n_workers):
            ctr, t = (self.user_seq, 0) if w == 0 else (self.server_seq[w], b % 4)
            if w > 0:
                assert prev_recv is not None
                prev = prev_recv
            prev = self._layers(b, w, ctr, t, prev)
            if n_workers == 1:
                break
            prev_recv = self._send(b, w, ctr, t, prev)
        return prev_recv if n_workers > 1 else prev

    def _layers(self, b: int, w: int, ctr: list[int], t: int, prev: str | None) -> str | None:
        wn = self.workers[w]
        first_op: str | None = None
        for k in range(self.layers[w]):
            name = _OPS[(k + b) % len(_OPS)]
            ctr[t] += 1
            s = ctr[t]
            nid = f"{wn}/{name}#{s}~b{b}"
            nxt: list[tuple[str, int] | None] = [(self.weights[w][k], 0)]
            nxt.insert(0, (prev, 0) if prev is not None else None)
            if first_op is not None and k >= 2 and self.rng.random() < 0.2:
                nxt.append((first_op, 0))           # skip connection
            self.nodes.append(Node(id=nid, worker=wn, name=name, kind=NodeKind.OP, seq=s, next=nxt,
                                   saved=True))
            first_op = first_op or nid
            prev = nid
        return prev

    def _send(self, b: int, w: int, ctr: list[int], t: int, prev: str | None) -> str:
        """Send the activation to the next stage (worker0 after the last); return the recv."""
        dst = (w + 1) % len(self.workers)
        m = (w << 48) | self.msg_counter[w]
        self.msg_counter[w] += 1
        ctr[t] += 1
        s = ctr[t]
        wn, dn = self.workers[w], self.workers[dst]
        self.nodes.append(Node(id=f"{wn}/SendRpcBackward#{s}~b{b}", worker=wn,
                               name="torch::distributed::autograd::SendRpcBackward",
                               kind=NodeKind.SEND, seq=s, next=[(prev, 0)] if prev is not None else [], msg_id=m))
        if dst == 0:
            # the result comes back through to_here() on the user thread: forward order
            self.user_seq[0] += 1
            rs = self.user_seq[0]
        else:
            self.server_seq[dst][b % 4] += 1
            rs = self.server_seq[dst][b % 4]
        recv_id = f"{dn}/RecvRpcBackward#{rs}~b{b}"
        self.nodes.append(Node(id=recv_id, worker=dn,
                               name="torch::distributed::autograd::RecvRpcBackward",
                               kind=NodeKind.RECV, seq=rs, msg_id=m, input_shapes=[[32, 64]]))
        return recv_id

    def loss(self, b: int, src: str | None, total: str | None) -> str:
        """The microbatch loss on worker0, added to the running total: loss = l0 + l1 + ..."""
        self.user_seq[0] += 1
        lid = f"worker0/MseLossBackward0#{self.user_seq[0]}~b{b}"
        self.nodes.append(Node(id=lid, worker="worker0", name="MseLossBackward0", kind=NodeKind.OP,
                               seq=self.user_seq[0], next=[(src, 0)] if src is not None else []))
        if total is None:
            return lid
        self.user_seq[0] += 1
        aid = f"worker0/AddBackward0#{self.user_seq[0]}~b{b}"
        self.nodes.append(Node(id=aid, worker="worker0", name="AddBackward0", kind=NodeKind.OP,
                               seq=self.user_seq[0], next=[(total, 0), (lid, 0)]))
        return aid


def synthetic_trace(n_nodes: int, n_workers: int = 8, seed: int = 0) -> Trace:
    """Return a pipeline-like ``Trace`` with about ``n_nodes`` nodes on ``n_workers`` workers.

    Raises ``ValueError`` when ``n_nodes < 1`` or ``n_workers < 1``.
    """
    if n_nodes < 1 or n_workers < 1:
        raise ValueError(f"need n_nodes >= 1 and n_workers >= 1, got {n_nodes}, {n_workers}")
    pipe = _Pipeline(n_workers, random.Random(seed))
    per_mb = sum(pipe.layers) + 2 * n_workers + 2
    n_mb = max(1, (n_nodes - len(pipe.nodes)) // per_mb)
    total: str | None = None
    for b in range(n_mb):
        total = pipe.loss(b, pipe.microbatch(b), total)
    assert total is not None
    return Trace(workers=pipe.workers, initiator="worker0", context_id=0, nodes=pipe.nodes,
                 passes=[BackwardPass(roots=[total], root_vars=["loss"])],
                 meta=Meta(extra={"synthetic": {
                     "n_nodes": n_nodes, "n_workers": n_workers, "seed": seed,
                     "microbatches": n_mb, "layers": pipe.layers}}))
