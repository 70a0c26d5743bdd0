"""Hand-built traces for replay tests: small, named scenarios with the graph PyTorch builds.

Each function returns a fresh ``Trace``; other test modules may import them. Node ids follow the
recorder's convention (``worker1/AddBackward0#4``, ``worker0/AccumulateGrad(t1)``). Message ids
are ``(sender << 48) | counter``; ``M(1, 0)`` is message ``1:0``. Sequence numbers mimic what
PyTorch records (internals §3.2): caller-side recvs of ``rpc_sync`` come from an agent thread
(small numbers), callee nodes from an RPC server thread.

Graph sketches use ``->`` for next edges (gradient flow), ``~>`` for a gradient message.
"""

from __future__ import annotations

from typing import Any

from distviz.trace import BackwardPass, Node, RpcCall, Trace, message_label

__all__ = [
    "M", "TraceBuilder", "design_note", "g1", "nested", "callback", "unused_rpc_result",
    "no_grad_rpc", "no_grad_loop", "leftover_sends", "multi_root", "fail_backward", "crash_backward",
    "two_passes", "stack_tie", "multi_output_unused", "missing_send", "remote_unused", "wide",
]

Edge = tuple[str, int] | str | None


def M(sender: int, counter: int) -> int:
    """Return the autograd message id ``(sender << 48) | counter``."""
    return (sender << 48) | counter


class TraceBuilder:
    """Build a ``Trace`` node by node; every add returns the node id."""

    def __init__(self, workers: int | list[str] = 2, initiator: str | None = None,
                 context_id: int = 0) -> None:
        self.workers = [f"worker{i}" for i in range(workers)] if isinstance(workers, int) \
            else list(workers)
        self.initiator = initiator or self.workers[0]
        self.context_id = context_id
        self.nodes: list[Node] = []
        self.passes: list[BackwardPass] = []
        self.rpc_calls: list[RpcCall] = []
        self._ids: set[str] = set()

    def _w(self, w: int | str) -> str:
        return self.workers[w] if isinstance(w, int) else w

    def _id(self, base: str) -> str:
        nid, k = base, 1
        while nid in self._ids:
            nid = f"{base}~{k}"
            k += 1
        self._ids.add(nid)
        return nid

    @staticmethod
    def _edges(nxt: list[Edge] | None) -> list[tuple[str, int] | None]:
        out: list[tuple[str, int] | None] = []
        for e in nxt or []:
            if e is None:
                out.append(None)
            elif isinstance(e, str):
                out.append((e, 0))
            else:
                out.append((e[0], e[1]))
        return out

    def op(self, w: int | str, name: str, seq: int, nxt: list[Edge] | None = None,
           **kw: Any) -> str:
        """Add an op node (``MulBackward0``)."""
        w = self._w(w)
        nid = self._id(f"{w}/{name}#{seq}")
        self.nodes.append(Node(id=nid, worker=w, name=name, kind="op", seq=seq,
                               next=self._edges(nxt), **kw))
        return nid

    def acc(self, w: int | str, var: str, shape: list[int] | None = None) -> str:
        """Add a leaf's AccumulateGrad."""
        w = self._w(w)
        nid = self._id(f"{w}/AccumulateGrad({var})")
        self.nodes.append(Node(id=nid, worker=w, name="torch::autograd::AccumulateGrad",
                               kind="accumulate_grad", seq=2**64 - 1, var=var,
                               shape=shape or [2, 2], dtype="float32"))
        return nid

    def send(self, w: int | str, msg_id: int, nxt: list[Edge], seq: int = 0,
             call: int | None = None, **kw: Any) -> str:
        """Add a SendRpcBackward for ``msg_id``."""
        w = self._w(w)
        nid = self._id(f"{w}/SendRpcBackward#{seq}")
        self.nodes.append(Node(id=nid, worker=w,
                               name="torch::distributed::autograd::SendRpcBackward",
                               kind="send", seq=seq, next=self._edges(nxt), msg_id=msg_id,
                               call=call, **kw))
        return nid

    def recv(self, w: int | str, msg_id: int, seq: int = 0, inputs: int = 1,
             vars: list[str] | None = None, call: int | None = None, **kw: Any) -> str:
        """Add a RecvRpcBackward for ``msg_id`` with ``inputs`` gradient slots."""
        w = self._w(w)
        nid = self._id(f"{w}/RecvRpcBackward#{seq}")
        self.nodes.append(Node(id=nid, worker=w,
                               name="torch::distributed::autograd::RecvRpcBackward",
                               kind="recv", seq=seq, msg_id=msg_id,
                               input_shapes=[[2, 2]] * inputs, vars=list(vars or []),
                               call=call, **kw))
        return nid

    def rpc(self, caller: int | str, callee: int | str, api: str, func: str,
            msg_ids: list[int], *, builtin: bool = False, grad_enabled: bool = True,
            line: int | None = None, result_var: str | None = None) -> int:
        """Record an RPC the program made; returns its index for ``call=``."""
        self.rpc_calls.append(RpcCall(caller=self._w(caller), callee=self._w(callee), api=api,
                                      func=func, builtin=builtin, grad_enabled=grad_enabled,
                                      line=line, result_var=result_var, msg_ids=list(msg_ids)))
        return len(self.rpc_calls) - 1

    def backward(self, roots: list[str], retain_graph: bool = False,
                 root_vars: list[str] | None = None) -> None:
        """Add a ``dist_autograd.backward(ctx, roots, retain_graph)`` pass."""
        self.passes.append(BackwardPass(roots=list(roots), retain_graph=retain_graph,
                                        root_vars=list(root_vars or [])))

    def node(self, nid: str) -> Node:
        """Return the node with id ``nid`` (to set ``fault``/``saved`` after building)."""
        return next(n for n in self.nodes if n.id == nid)

    def build(self) -> Trace:
        return Trace(workers=self.workers, initiator=self.initiator, context_id=self.context_id,
                     nodes=list(self.nodes), passes=list(self.passes),
                     rpc_calls=list(self.rpc_calls))


def design_note() -> Trace:
    """PyTorch's distributed autograd design note example (``distributed_autograd.rst``).

    ::

        worker0: loss=SumBackward0#3 -> MulBackward0#2 -> { RecvRpcBackward#0 (msg 1:0),
                                                            AccumulateGrad(t4) }
                 SendRpcBackward#1 (msg 0:0) -> { AccumulateGrad(t1), AccumulateGrad(t2) }
        worker1: SendRpcBackward#2 (msg 1:0) -> AddBackward0#1 -> RecvRpcBackward#0 (msg 0:0) x2
    """
    b = TraceBuilder(2)
    t1, t2, t4 = b.acc(0, "t1"), b.acc(0, "t2"), b.acc(0, "t4")
    b.send(0, M(0, 0), [t1, t2], seq=1)
    recv2 = b.recv(0, M(1, 0), seq=0)
    mul = b.op(0, "MulBackward0", 2, [recv2, t4])
    loss = b.op(0, "SumBackward0", 3, [mul])
    recv1 = b.recv(1, M(0, 0), seq=0, inputs=2)
    add = b.op(1, "AddBackward0", 1, [(recv1, 0), (recv1, 1)])
    b.send(1, M(1, 0), [add], seq=2)
    b.backward([loss], root_vars=["loss"])
    return b.build()


def g1() -> Trace:
    """Internals §3.5 worked example G1 (2 workers, branching), with recorded sequence numbers."""
    b = TraceBuilder(2)
    t1, t2, t4 = b.acc(0, "t1"), b.acc(0, "t2"), b.acc(0, "t4")
    mul0 = b.op(0, "MulBackward0", 0, [t1])                 # a = t1 * 2
    exp1 = b.op(0, "ExpBackward0", 1, [t2])                 # b = t2.exp()
    b.send(0, M(0, 0), [mul0, exp1], seq=2)                 # c, d = rpc_sync(w1, f, (a, b))
    recv0 = b.recv(0, M(1, 0), seq=0, inputs=2)             # agent-thread recv
    mul3 = b.op(0, "MulBackward0", 3, [(recv0, 0), t4])     # c * t4
    cos4 = b.op(0, "CosBackward0", 4, [mul0])               # a.cos()
    add5 = b.op(0, "AddBackward0", 5, [mul3, cos4])         # e
    sum6 = b.op(0, "SumBackward0", 6, [add5])               # e.sum()
    sum7 = b.op(0, "SumBackward0", 7, [exp1])               # b.sum()
    add8 = b.op(0, "AddBackward0", 8, [sum6, sum7])
    mean9 = b.op(0, "MeanBackward0", 9, [(recv0, 1)])       # d.mean()
    add10 = b.op(0, "AddBackward0", 10, [add8, mean9])      # loss
    r = b.recv(1, M(0, 0), seq=0, inputs=2)                 # f on w1: x, y
    m1 = b.op(1, "MulBackward0", 1, [(r, 0), (r, 1)])       # x * y
    s2 = b.op(1, "SinBackward0", 2, [(r, 1)])               # y.sin()
    e3 = b.op(1, "ExpBackward0", 3, [(r, 0)])               # x.exp()
    a4 = b.op(1, "AddBackward0", 4, [m1, s2])               # c
    m5 = b.op(1, "MulBackward0", 5, [e3])                   # d = x.exp() * 3
    b.send(1, M(1, 0), [a4, m5], seq=6)
    b.backward([add10], root_vars=["loss"])
    return b.build()


def nested(fault: dict[str, Any] | None = None) -> Trace:
    """Nested RPCs worker0 -> worker1 -> worker2 (``my_py_nested_call``), internals §1.9.

    ::

        w0: SumBackward0#2 -> Recv(1:1) ~> w1: Send(1:1) -> MulBackward0#2 -> Recv(2:0)
            ~> w2: Send(2:0) -> AddBackward0#1 [fault] -> Recv(1:0) x2
            ~> w1: Send(1:0) -> Recv(0:0) x2 ~> w0: Send(0:0) -> t1, t2
    """
    b = TraceBuilder(3)
    t1, t2 = b.acc(0, "t1"), b.acc(0, "t2")
    c0 = b.rpc(0, 1, "rpc_sync", "my_py_nested_call", [M(0, 0), M(1, 1)], line=5,
               result_var="ret")
    c1 = b.rpc(1, 2, "rpc_sync", "my_py_add", [M(1, 0), M(2, 0)], line=11, result_var="y")
    b.send(0, M(0, 0), [t1, t2], seq=0, call=c0)
    r11 = b.recv(0, M(1, 1), seq=0, vars=["ret"], call=c0)
    loss = b.op(0, "SumBackward0", 2, [r11])
    r00 = b.recv(1, M(0, 0), seq=0, inputs=2, call=c0)
    b.send(1, M(1, 0), [(r00, 0), (r00, 1)], seq=1, call=c1)
    r20 = b.recv(1, M(2, 0), seq=0, vars=["y"], call=c1)
    mul = b.op(1, "MulBackward0", 2, [r20])
    b.send(1, M(1, 1), [mul], seq=3, call=c0)
    r10 = b.recv(2, M(1, 0), seq=0, inputs=2, call=c1)
    add = b.op(2, "AddBackward0", 1, [(r10, 0), (r10, 1)], fault=fault)
    b.send(2, M(2, 0), [add], seq=2, call=c1)
    b.backward([loss], root_vars=["loss"])
    return b.build()


def fail_backward() -> Trace:
    """``nested`` with ``AddBackward0`` on worker2 raising ``boom``."""
    return nested({"kind": "fail", "message": "boom"})


def crash_backward() -> Trace:
    """``nested`` with worker2 dying while it runs ``AddBackward0``."""
    return nested({"kind": "crash"})


def callback() -> Trace:
    """worker0 -> worker1 -> worker0 (``test_graph_for_py_nested_call_itself``): the nested RPC
    calls back into the initiator, so worker0 receives gradients mid-pass.

    ::

        w0: Sum#1 -> Recv(1:1) ~> w1: Send(1:1) -> Recv(0:1) ~> w0: Send(0:1) -> Add#0 -> Recv(1:0)x2
            ~> w1: Send(1:0) -> Recv(0:0) x2 ~> w0: Send(0:0) -> t1, t2
    """
    b = TraceBuilder(2)
    t1, t2 = b.acc(0, "t1"), b.acc(0, "t2")
    b.send(0, M(0, 0), [t1, t2], seq=0)
    r10 = b.recv(0, M(1, 0), seq=0, inputs=2)
    add = b.op(0, "AddBackward0", 1, [(r10, 0), (r10, 1)])
    b.send(0, M(0, 1), [add], seq=2)
    r11 = b.recv(0, M(1, 1), seq=1)
    loss = b.op(0, "SumBackward0", 3, [r11])
    r00 = b.recv(1, M(0, 0), seq=0, inputs=2)
    b.send(1, M(1, 0), [(r00, 0), (r00, 1)], seq=1)
    r01 = b.recv(1, M(0, 1), seq=0)
    b.send(1, M(1, 1), [r01], seq=2)
    b.backward([loss])
    return b.build()


def unused_rpc_result() -> Trace:
    """``test_backward_unused_send_function``: ``unused = rpc_sync(w1, torch.add, (t1, t2))`` at
    line 7 is never used; ``loss = (t1 * t2).sum()``. FAST mode hangs on worker0's send."""
    b = TraceBuilder(2)
    t1, t2 = b.acc(0, "t1"), b.acc(0, "t2")
    c = b.rpc(0, 1, "rpc_sync", "torch.add", [M(0, 0), M(1, 0)], builtin=True, line=7,
              result_var="unused")
    b.send(0, M(0, 0), [t1, t2], seq=0, call=c)
    b.recv(0, M(1, 0), seq=0, vars=["unused"], call=c)
    mul = b.op(0, "MulBackward0", 1, [t1, t2])
    loss = b.op(0, "SumBackward0", 2, [mul])
    r = b.recv(1, M(0, 0), seq=0, inputs=2, call=c)
    add = b.op(1, "AddBackward0", 1, [(r, 0), (r, 1)])
    b.send(1, M(1, 0), [add], seq=2, call=c)
    b.backward([loss], root_vars=["loss"])
    return b.build()


def remote_unused() -> Trace:
    """The unused send is on a remote worker (internals §4.1 remote_unused): worker1's UDF makes
    a nested RPC to worker2 at line 12 and ignores the result ``tmp``; worker1 never finishes,
    so it never answers worker0's first message."""
    b = TraceBuilder(3)
    t1 = b.acc(0, "t1")
    c0 = b.rpc(0, 1, "rpc_sync", "udf", [M(0, 0), M(1, 1)], line=4, result_var="y")
    c1 = b.rpc(1, 2, "rpc_sync", "torch.mul", [M(1, 0), M(2, 0)], builtin=True, line=12,
               result_var="tmp")
    b.send(0, M(0, 0), [t1], seq=0, call=c0)
    ry = b.recv(0, M(1, 1), seq=0, vars=["y"], call=c0)
    loss = b.op(0, "SumBackward0", 1, [ry])
    r00 = b.recv(1, M(0, 0), seq=0, call=c0)
    b.send(1, M(1, 0), [r00], seq=1, call=c1)
    b.recv(1, M(2, 0), seq=0, vars=["tmp"], call=c1)
    cos = b.op(1, "CosBackward0", 2, [r00])
    b.send(1, M(1, 1), [cos], seq=3, call=c0)
    r10 = b.recv(2, M(1, 0), seq=0, call=c1)
    mul = b.op(2, "MulBackward0", 1, [r10])
    b.send(2, M(2, 0), [mul], seq=2, call=c1)
    b.backward([loss], root_vars=["loss"])
    return b.build()


def no_grad_rpc() -> Trace:
    """A Python-UDF RPC made under ``torch.no_grad()`` (internals §1.7, EXP e8): the caller
    attaches neither send nor recv, the callee attaches a recv and a response send (1:0). A later
    RPC to the same worker (``z = rpc_sync(w1, my_add, (t1, t2))``) initializes worker1 in the
    backward, and its orphan send blocks it forever. As the recorder sees it: the no_grad call
    created no message id on the caller (``msg_ids`` empty), so no node names that call."""
    b = TraceBuilder(2)
    t1, t2 = b.acc(0, "t1"), b.acc(0, "t2")
    b.rpc(0, 1, "rpc_sync", "my_udf", [], grad_enabled=False, line=9, result_var="x")
    c1 = b.rpc(0, 1, "rpc_sync", "my_add", [M(0, 1), M(1, 1)], line=10, result_var="z")
    b.send(0, M(0, 1), [t1, t2], seq=0, call=c1)
    rz = b.recv(0, M(1, 1), seq=0, vars=["z"], call=c1)
    loss = b.op(0, "SumBackward0", 1, [rz])
    rx = b.recv(1, M(0, 0), seq=0, inputs=2)
    mulx = b.op(1, "MulBackward0", 1, [(rx, 0), (rx, 1)])
    b.send(1, M(1, 0), [mulx], seq=2)
    rz1 = b.recv(1, M(0, 1), seq=0, inputs=2, call=c1)
    addz = b.op(1, "AddBackward0", 1, [(rz1, 0), (rz1, 1)])
    b.send(1, M(1, 1), [addz], seq=2, call=c1)
    b.backward([loss], root_vars=["loss"])
    return b.build()


def no_grad_loop() -> Trace:
    """``with torch.no_grad(): for i in range(2): x = rpc_sync(w1, my_udf, (t1,))`` between two
    recorded RPCs: each no_grad call consumed one message id on worker0 (0:1, 0:2) that the
    recorder never saw; worker1 holds a request recv and an orphan response send for each.

    ::

        worker0: a = rpc_sync(w1, f, t1)   0:0 / 1:0   (line 4)
                 x = rpc_sync(w1, g, t1)   0:1 / 1:1   (line 6, no_grad, iteration 1)
                 x = rpc_sync(w1, g, t1)   0:2 / 1:2   (line 6, no_grad, iteration 2)
                 z = rpc_sync(w1, f, t1)   0:3 / 1:3   (line 7)
                 loss = (a + z).sum()
    """
    b = TraceBuilder(2)
    t1 = b.acc(0, "t1")
    ca = b.rpc(0, 1, "rpc_sync", "f", [M(0, 0), M(1, 0)], line=4, result_var="a")
    b.rpc(0, 1, "rpc_sync", "g", [], grad_enabled=False, line=6, result_var="x")
    b.rpc(0, 1, "rpc_sync", "g", [], grad_enabled=False, line=6, result_var="x")
    cz = b.rpc(0, 1, "rpc_sync", "f", [M(0, 3), M(1, 3)], line=7, result_var="z")
    b.send(0, M(0, 0), [t1], seq=0, call=ca)
    b.send(0, M(0, 3), [t1], seq=1, call=cz)
    ra = b.recv(0, M(1, 0), seq=0, vars=["a"], call=ca)
    rz = b.recv(0, M(1, 3), seq=1, vars=["z"], call=cz)
    add = b.op(0, "AddBackward0", 2, [ra, rz])
    loss = b.op(0, "SumBackward0", 3, [add])
    for k, call in ((0, ca), (1, None), (2, None), (3, cz)):
        r = b.recv(1, M(0, k), seq=0, call=call)
        op = b.op(1, "MulBackward0", 1, [r])
        b.send(1, M(1, k), [op], seq=2, call=call)
    b.backward([loss], root_vars=["loss"])
    return b.build()


def leftover_sends() -> Trace:
    """Two forwards in one context; backward only on the second (``r2.sum()``): the sends of the
    first forward (``r1``, line 6) still count in FAST mode, so the pass hangs."""
    b = TraceBuilder(2)
    t1, t2 = b.acc(0, "t1"), b.acc(0, "t2")
    c0 = b.rpc(0, 1, "rpc_sync", "torch.add", [M(0, 0), M(1, 0)], builtin=True, line=6,
               result_var="r1")
    c1 = b.rpc(0, 1, "rpc_sync", "torch.add", [M(0, 1), M(1, 1)], builtin=True, line=6,
               result_var="r2")
    b.send(0, M(0, 0), [t1, t2], seq=0, call=c0)
    b.recv(0, M(1, 0), seq=0, vars=["r1"], call=c0)
    b.send(0, M(0, 1), [t1, t2], seq=1, call=c1)
    r2 = b.recv(0, M(1, 1), seq=1, vars=["r2"], call=c1)
    loss = b.op(0, "SumBackward0", 2, [r2])
    for k, c in ((0, c0), (1, c1)):
        r = b.recv(1, M(0, k), seq=0, inputs=2, call=c)
        a = b.op(1, "AddBackward0", 1, [(r, 0), (r, 1)])
        b.send(1, M(1, k), [a], seq=2, call=c)
    b.backward([loss], root_vars=["loss"])
    return b.build()


def multi_root() -> Trace:
    """``backward(ctx, [r1, r2])`` (``test_backward_multiple_roots``): ``r1`` is an RPC result's
    sum, ``r2 = (t1 * t2).sum()``; t1 and t2 get one combined gradient each."""
    b = TraceBuilder(2)
    t1, t2 = b.acc(0, "t1"), b.acc(0, "t2")
    b.send(0, M(0, 0), [t1, t2], seq=0)
    rr = b.recv(0, M(1, 0), seq=0)
    r1 = b.op(0, "SumBackward0", 2, [rr])
    mul = b.op(0, "MulBackward0", 1, [t1, t2])
    r2 = b.op(0, "SumBackward0", 3, [mul])
    r = b.recv(1, M(0, 0), seq=0, inputs=2)
    add = b.op(1, "AddBackward0", 1, [(r, 0), (r, 1)])
    b.send(1, M(1, 0), [add], seq=2)
    b.backward([r1, r2], root_vars=["r1", "r2"])
    return b.build()


def two_passes(retain_first: bool, saved_on: str = "worker1") -> Trace:
    """The design note run twice in one context. ``MulBackward0`` (worker0) or ``AddBackward0``
    (worker1) holds saved tensors; the first pass uses ``retain_graph=retain_first``."""
    t = design_note()
    for n in t.nodes:
        if n.worker == saved_on and n.name in ("MulBackward0", "AddBackward0"):
            n.saved = True
    first = t.passes[0]
    first.retain_graph = retain_first
    t.passes.append(BackwardPass(roots=list(first.roots), retain_graph=False,
                                 root_vars=list(first.root_vars)))
    return t


def stack_tie(n: int = 6) -> Trace:
    """``torch.stack([t0..t{n-1}]).sum()``: ``StackBackward0`` readies n AccumulateGrads at once
    (equal priority); libstdc++ pops 6 of them as t0, t2, t5, t4, t1, t3 (internals §3.1)."""
    b = TraceBuilder(1)
    leaves = [b.acc(0, f"t{k}") for k in range(n)]
    stack = b.op(0, "StackBackward0", 0, list(leaves))
    loss = b.op(0, "SumBackward0", 1, [stack])
    b.backward([loss], root_vars=["loss"])
    return b.build()


def multi_output_unused() -> Trace:
    """``a, b = rpc_sync(w1, two_mm, (x,))`` returns ``(x@W1, x@W2)``; only ``a`` is used. The
    recv sends zeros for slot 1, so W2 gets a zero gradient that does appear (internals §2.6)."""
    b = TraceBuilder(2)
    x = b.acc(0, "x")
    c = b.rpc(0, 1, "rpc_sync", "two_mm", [M(0, 0), M(1, 0)], line=3, result_var="a, b")
    b.send(0, M(0, 0), [x], seq=0, call=c)
    r = b.recv(0, M(1, 0), seq=0, inputs=2, vars=["a", "b"], call=c)
    loss = b.op(0, "SumBackward0", 1, [(r, 0)])
    rx = b.recv(1, M(0, 0), seq=0, call=c)
    w1, w2 = b.acc(1, "W1"), b.acc(1, "W2")
    mm1 = b.op(1, "MmBackward0", 1, [rx, w1])
    mm2 = b.op(1, "MmBackward0", 2, [rx, w2])
    b.send(1, M(1, 0), [mm1, mm2], seq=3, call=c)
    b.backward([loss], root_vars=["loss"])
    return b.build()


def rpc_result_root(output_nr: int) -> Trace:
    """``a, b = rpc_sync(w1, two_sums, (x,))`` returns ``((x@W1).sum(), (x@W2).sum())`` and the
    backward's root is one of them itself (``output_nr``: 0 is ``a``, 1 is ``b``): the root is
    the recv, and the GraphRoot's ones go into that output only; the other gets zeros.

        worker0:  x ─► send ═══► worker1: recv ─► Mm(W1) ─┐
                                                 Mm(W2) ─┴─► send ═══► worker0: recv (root)
    """
    b = TraceBuilder(2)
    x = b.acc(0, "x")
    c = b.rpc(0, 1, "rpc_sync", "two_sums", [M(0, 0), M(1, 0)], line=3, result_var="a, b")
    b.send(0, M(0, 0), [x], seq=0, call=c)
    r = b.recv(0, M(1, 0), seq=0, inputs=2, vars=["a", "b"], call=c)
    rx = b.recv(1, M(0, 0), seq=0, call=c)
    w1, w2 = b.acc(1, "W1"), b.acc(1, "W2")
    mm1 = b.op(1, "MmBackward0", 1, [rx, w1])
    mm2 = b.op(1, "MmBackward0", 2, [rx, w2])
    b.send(1, M(1, 0), [mm1, mm2], seq=3, call=c)
    b.backward([r], root_vars=["ab"[output_nr]])
    t = b.build()
    t.passes[0].root_nrs = [output_nr]
    return t


def missing_send() -> Trace:
    """A recv whose message has no send anywhere (a broken or partial trace): worker1 rejects
    the gradient with ``Could not find send function for autograd message id: N``."""
    b = TraceBuilder(2)
    t1 = b.acc(0, "t1")
    r = b.recv(0, M(1, 5), seq=0)
    mul = b.op(0, "MulBackward0", 1, [r, t1])
    loss = b.op(0, "SumBackward0", 2, [mul])
    b.backward([loss])
    return b.build()


def labels(trace: Trace) -> dict[str, str]:
    """Return ``{node id: message label}`` for the trace's sends and recvs (test helper)."""
    return {n.id: message_label(n.msg_id) for n in trace.nodes if n.msg_id is not None}


def fanout() -> Trace:
    """``rpc_async`` of ``x`` to worker1..3, results stacked and summed on worker0: worker0's three
    sends get their gradients from three different workers, whose messages race."""
    b = TraceBuilder(4)
    x = b.acc(0, "x", [4, 4])
    recvs = []
    for k in (1, 2, 3):
        b.send(0, M(0, k - 1), [x], seq=k - 1)
        recvs.append(b.recv(0, M(k, 0), seq=0))
    stack = b.op(0, "StackBackward0", 3, recvs)
    loss = b.op(0, "SumBackward0", 4, [stack])
    for k in (1, 2, 3):
        r = b.recv(k, M(0, k - 1), seq=0)
        tanh = b.op(k, "TanhBackward0", 2, [(r, 0)])
        b.send(k, M(k, 0), [tanh], seq=3)
    b.backward([loss], root_vars=["loss"])
    return b.build()


def wide(n: int = 12) -> Trace:
    """Nodes with many next edges, each kind of queue after them: ``CatBackward0`` feeds ``n``
    ops that wait for worker0's send too, and one recv that becomes ready into an empty queue
    (the other recv ran first); the send then makes all ``n`` ready at once. On worker1 a send
    with ``n`` next edges runs first, none becomes ready; later ``TanhBackward0`` makes them all
    ready while a recv waits in the queue.

    ::

        worker0: loss -> CatBackward0 -> { MulBackward0 x n -> AccumulateGrad(a0..), recv 1:0 }
                 SendRpcBackward (0:0) -> MulBackward0 x n
                 loss -> recv 1:1
        worker1: SendRpcBackward (1:0) -> { TanhBackward0 -> AddBackward0 x n, recv 0:0 }
                 SendRpcBackward (1:1) -> AddBackward0 x n -> AccumulateGrad(h0..)
    """
    b = TraceBuilder(2)
    muls = [b.op(0, "MulBackward0", 10 + k, [b.acc(0, f"a{k}")]) for k in range(n)]
    b.send(0, M(0, 0), list(muls), seq=1)
    recv_a = b.recv(0, M(1, 0), seq=2)
    recv_b = b.recv(0, M(1, 1), seq=301)
    cat = b.op(0, "CatBackward0", 200, [*muls, recv_a])
    loss = b.op(0, "SumBackward0", 300, [cat, recv_b])
    adds = [b.op(1, "AddBackward0", 20 + k, [b.acc(1, f"h{k}")]) for k in range(n)]
    tanh = b.op(1, "TanhBackward0", 6, list(adds))
    back = b.recv(1, M(0, 0), seq=5)
    b.send(1, M(1, 0), [tanh, back], seq=7)
    b.send(1, M(1, 1), list(adds), seq=8)
    b.backward([loss], root_vars=["loss"])
    return b.build()
