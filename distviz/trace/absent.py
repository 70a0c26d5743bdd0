"""Named tensors the recorder saw that are not leaves of the recorded graph (the trace's
optional ``absent_leaves``).

A parameter whose ``requires_grad`` is ``False``, or one the forward never used with grad
enabled (not used at all, used through ``.detach()`` or under ``torch.no_grad()``), has no
``AccumulateGrad`` node in the context's graph, so the graph alone cannot say it exists. The
recorder knows the names it gives leaves (the program's variables, module parameters) and
writes those it found nowhere in the graph, with what it can tell of each, so that
``distviz why`` can answer for them. Older traces lack the key: it reads as empty.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from distviz.errors import TraceError
from distviz.trace.node_json import need

__all__ = ["ABSENT_REASONS", "AbsentLeaf", "parse_absent"]

AbsentReason = Literal["requires_grad_false", "not_reached"]

#: ``requires_grad_false``: the tensor does not require grad, so no gradient is computed for
#: it; ``not_reached``: it requires grad, yet no node of the context's graph on its worker
#: accumulates into it.
ABSENT_REASONS: tuple[AbsentReason, ...] = ("requires_grad_false", "not_reached")


@dataclass(frozen=True, slots=True)
class AbsentLeaf:
    """One named tensor of ``worker`` that is no leaf of the graph, and why (``ABSENT_REASONS``)."""

    var: str
    worker: str
    why: AbsentReason
    shape: list[int] = field(default_factory=list)
    dtype: str | None = None
    parameter: bool = False      # an ``nn.Parameter``
    grad: bool = False           # its ``.grad`` held a tensor when the graph was recorded

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"var": self.var, "worker": self.worker, "why": self.why,
                               "shape": self.shape}
        if self.dtype is not None:
            out["dtype"] = self.dtype
        if self.parameter:
            out["parameter"] = True
        if self.grad:
            out["grad"] = True
        return out


def parse_absent(raw: Any, workers: list[str], source: str) -> list[AbsentLeaf]:
    """The ``absent_leaves`` of a trace object (``None`` or absent: none). Raises
    ``TraceError`` naming the key of a malformed entry."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise TraceError(f"expected a list, found {type(raw).__name__}", path=source,
                         key="absent_leaves")
    out: list[AbsentLeaf] = []
    for i, entry in enumerate(raw):
        where = f"absent_leaves[{i}]."
        if not isinstance(entry, dict):
            raise TraceError("expected an object", path=source, key=f"absent_leaves[{i}]")
        worker = need(entry, "worker", str, source, where)
        if worker not in workers:
            raise TraceError(f"unknown worker {worker!r}", path=source, key=where + "worker")
        why = need(entry, "why", str, source, where)
        if why not in ABSENT_REASONS:
            raise TraceError(f"expected one of {', '.join(ABSENT_REASONS)}, found {why!r}",
                             path=source, key=where + "why")
        shape = need(entry, "shape", list, source, where, optional=True) or []
        out.append(AbsentLeaf(
            var=need(entry, "var", str, source, where), worker=worker,
            why="requires_grad_false" if why == "requires_grad_false" else "not_reached",
            shape=[int(s) for s in shape],
            dtype=need(entry, "dtype", str, source, where, optional=True),
            parameter=bool(entry.get("parameter")), grad=bool(entry.get("grad"))))
    return out
