"""One autograd node of a trace (``distviz.trace.Node``, re-exported there).

Its own module so that the compact layout (``distviz.trace.compact``), which ``distviz.trace``
reads and writes with, can build nodes without importing ``distviz.trace``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final

__all__ = ["KINDS", "Node", "NodeKind"]


class NodeKind(StrEnum):
    """What a node is (its value is the trace's JSON word): an operation's backward, the
    ``SendRpcBackward`` or ``RecvRpcBackward`` of an RPC, or a leaf's ``AccumulateGrad``."""

    OP = "op"
    SEND = "send"
    RECV = "recv"
    ACCUMULATE_GRAD = "accumulate_grad"


KINDS: Final[tuple[NodeKind, ...]] = tuple(NodeKind)
#: a JSON word to its kind, for the loaders
KIND_OF_WORD: Final[dict[str, NodeKind]] = {k.value: k for k in NodeKind}


@dataclass(slots=True)
class Node:
    """One autograd node on one worker.

    ``next`` holds the node's next edges in PyTorch's order: ``(target id, input_nr)`` or ``None``
    for an edge without a function (an input that did not require grad).
    """

    id: str
    worker: str
    name: str
    kind: NodeKind
    seq: int
    next: list[tuple[str, int] | None] = field(default_factory=list)
    msg_id: int | None = None          # send / recv: the autograd message id of the pair
    var: str | None = None             # accumulate_grad: scenario variable name (``t1``, ``ps.w``)
    shape: list[int] | None = None     # accumulate_grad: leaf shape
    dtype: str | None = None           # accumulate_grad: leaf dtype
    input_shapes: list[list[int]] | None = None  # shapes of the gradients the node receives
                                                 # (for a recv: the gradients it sends)
    saved: bool = False                # holds saved tensors (freed by a pass without retain_graph)
    fault: dict[str, Any] | None = None  # {"kind": "fail", "message": ...} or {"kind": "crash"}
    vars: list[str] = field(default_factory=list)  # scenario variables whose grad_fn is this node
    call: int | None = None            # send / recv: index into Trace.rpc_calls, when known
    python: bool = False               # a custom autograd Function's node: its backward is
                                       # Python code, whose values the replay cannot know
    custom: str | None = None          # python: the scenario language's custom Function
                                       # (``none``, ``zeros``, ...), whose backward it knows

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "worker": self.worker, "name": self.name,
                               "kind": self.kind, "seq": self.seq,
                               "next": [list(e) if e is not None else None for e in self.next]}
        if self.msg_id is not None:
            out["msg_id"] = self.msg_id
        if self.var is not None:
            out["var"] = self.var
        if self.shape is not None:
            out["shape"] = self.shape
        if self.dtype is not None:
            out["dtype"] = self.dtype
        if self.input_shapes is not None:
            out["input_shapes"] = self.input_shapes
        if self.saved:
            out["saved"] = True
        if self.fault is not None:
            out["fault"] = self.fault
        if self.vars:
            out["vars"] = self.vars
        if self.call is not None:
            out["call"] = self.call
        if self.python:
            out["python"] = True
        if self.custom is not None:
            out["custom"] = self.custom
        return out
