"""Gradients in the trace: the JSON summary of a gradient tensor, and the comparison of the
distributed gradients with the single-process reference (torch side)."""

from __future__ import annotations

from typing import Any

import torch

from distviz.trace import NodeKind, Trace
from distviz.trace.iteration import Difference, tolerance, within_tolerance
from distviz.trace.sections import ROW_OK, RowStatus

__all__ = ["MAX_VALUES", "compare", "dense", "difference", "summarize", "tensor_values"]

#: Most elements of one worker's tensors sent to the parent with their values (the rest are
#: compared by their summaries).
MAX_VALUES = 200_000


def dense(t: torch.Tensor) -> torch.Tensor:
    """``t`` as a strided tensor: a sparse gradient (``nn.EmbeddingBag(sparse=True)``,
    ``nn.Embedding(sparse=True)``) has no ``==``, ``abs`` or ``flatten``; its dense form has."""
    return t if t.layout == torch.strided else t.to_dense()


def tensor_values(t: torch.Tensor, budget: list[int]) -> list[float] | None:
    """The values of ``t`` as floats, while ``budget[0]`` elements are left (then ``None``)."""
    if t.numel() > budget[0]:
        return None
    budget[0] -= t.numel()
    return [float(x) for x in dense(t.detach()).double().flatten().tolist()]


def summarize(g: torch.Tensor) -> dict[str, Any]:
    """A JSON summary of one gradient tensor (small tensors keep their values); a sparse one
    is summarized by its dense form and says its ``layout``. Sums and norms accumulate in
    float64; a real floating tensor is read where it lies (no float64 copy of it is made: a
    traced program summarizes every gradient of every recorded context)."""
    d = dense(g.detach())
    if d.is_floating_point():
        total = float(d.sum(dtype=torch.float64))
        norm = float(torch.linalg.vector_norm(d, dtype=torch.float64))
        zero = norm == 0.0 and not bool(d.any())    # a non-zero norm needs no third pass
    else:
        d = (d.real if d.is_complex() else d).to(torch.float64)   # as before, without a warning
        total, norm, zero = float(d.sum()), float(d.norm()), bool((d == 0).all())
    out: dict[str, Any] = {"shape": [int(s) for s in g.shape],
                           "dtype": str(g.dtype).replace("torch.", ""),
                           "sum": total, "norm": norm, "zero": zero}
    if g.layout != torch.strided:
        out["layout"] = str(g.layout).replace("torch.", "")
    if g.numel() <= 16:
        out["values"] = [float(x) for x in d.flatten()]
    return out


def difference(got: torch.Tensor, want: torch.Tensor) -> Difference:
    """``distviz.trace.iteration.difference`` of two tensors of one shape, computed by torch
    (a gradient may hold millions of values): the largest ``|a - b|`` where neither is NaN
    (equal infinities differ by 0), the reference's largest finite ``|b|``, and whether a NaN
    stands on one side only."""
    a, b = got.double().flatten(), want.double().flatten()
    a_nan, b_nan = a.isnan(), b.isnan()
    both = ~(a_nan | b_nan)
    gaps = torch.where(a == b, torch.zeros_like(a), (a - b).abs())[both]
    return Difference(max_abs_diff=float(gaps.max()) if gaps.numel() else 0.0,
                      scale=_scale(b), nan_apart=bool((a_nan != b_nan).any()))


def _scale(b: torch.Tensor) -> float:
    """The reference's scale: its largest finite ``|b|`` (0 for none)."""
    finite = b[b.isfinite()].abs()
    return float(finite.max()) if finite.numel() else 0.0


def compare(ref: dict[str, Any], real_grads: dict[str, torch.Tensor], trace: Trace,
            real: dict[str, Any] | None) -> dict[str, Any]:
    """Compare distributed gradients (by leaf node id) with the reference (by variable name).

    Returns the trace's ``reference`` section: per leaf ``status`` is ``match``, ``mismatch``,
    ``zero_unused`` (distributed autograd gives zeros where the reference has no gradient: an
    unused RPC output), ``missing`` (no distributed gradient) or ``extra``.

    Tolerance: the one rule, ``distviz.trace.iteration.within_tolerance`` (relative to the
    gradient's scale; a NaN where the reference has one agrees, on one side only differs).
    """
    rows: list[dict[str, Any]] = []
    leaves = [n for n in trace.nodes if n.kind == NodeKind.ACCUMULATE_GRAD and n.var]
    comparable = real is not None and real.get("outcome") == "completed"
    ok = comparable and ref["outcome"] == "completed"
    for n in leaves:
        want = ref["grads"].get(n.var)
        got = real_grads.get(n.id)
        want = None if want is None else dense(want)
        got = None if got is None else dense(got)
        row: dict[str, Any] = {"var": n.var, "leaf": n.id, "worker": n.worker}
        if want is None:
            row["status"] = RowStatus.NO_GRADIENT if got is None else \
                RowStatus.ZERO_UNUSED if bool((got == 0).all()) else RowStatus.EXTRA
        elif got is None:
            row["status"] = RowStatus.MISSING
        else:
            dtype = str(want.dtype).replace("torch.", "")
            row["max_abs_diff"] = None
            same, tol = False, tolerance(_scale(want.double().flatten()), dtype)
            if list(want.shape) == list(got.shape):
                d = difference(got, want)
                row["max_abs_diff"] = d.max_abs_diff
                same, tol = within_tolerance(d, dtype)
            row["tolerance"] = tol
            row["status"] = RowStatus.MATCH if same else RowStatus.MISMATCH
        if want is not None:
            row["reference"] = summarize(want)
        if row["status"] not in ROW_OK:
            ok = False
        rows.append(row)
    return {"outcome": ref["outcome"], "error": ref["error"], "comparable": comparable,
            "ok": bool(ok) if comparable else None, "comparison": rows,
            "gradients": {k: summarize(v) for k, v in sorted(ref["grads"].items())
                          if v is not None}}
