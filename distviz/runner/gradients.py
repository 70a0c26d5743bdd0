"""Gradients in the trace: the JSON summary of a gradient tensor, and the comparison of the
distributed gradients with the single-process reference (torch side)."""

from __future__ import annotations

from typing import Any

import torch

from distviz.trace import Trace

__all__ = ["MAX_VALUES", "compare", "dense", "summarize", "tensor_values"]

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
        zero = not bool(d.any())
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


def compare(ref: dict[str, Any], real_grads: dict[str, torch.Tensor], trace: Trace,
            real: dict[str, Any] | None) -> dict[str, Any]:
    """Compare distributed gradients (by leaf node id) with the reference (by variable name).

    Returns the trace's ``reference`` section: per leaf ``status`` is ``match``, ``mismatch``,
    ``zero_unused`` (distributed autograd gives zeros where the reference has no gradient: an
    unused RPC output), ``missing`` (no distributed gradient) or ``extra``.

    Tolerance: the two runs sum the same terms in different orders, so values are compared
    relative to the gradient's scale: ``|a - b| <= atol + rtol * max|b|`` with ``rtol`` 1e-4
    (float32) or 1e-9 (float64).
    """
    rows: list[dict[str, Any]] = []
    leaves = [n for n in trace.nodes if n.kind == "accumulate_grad" and n.var]
    comparable = real is not None and real.get("outcome") == "completed"
    ok = comparable and ref["outcome"] == "completed"
    for n in leaves:
        want = ref["grads"].get(n.var)
        got = real_grads.get(n.id)
        want = None if want is None else dense(want)
        got = None if got is None else dense(got)
        row: dict[str, Any] = {"var": n.var, "leaf": n.id, "worker": n.worker}
        if want is None:
            row["status"] = "no_gradient" if got is None else \
                "zero_unused" if bool((got == 0).all()) else "extra"
        elif got is None:
            row["status"] = "missing"
        else:
            same_shape = list(want.shape) == list(got.shape)
            diff = float((want.double() - got.double()).abs().max()) if same_shape else None
            row["max_abs_diff"] = diff
            rtol = 1e-9 if want.dtype == torch.float64 else 1e-4
            scale = float(want.double().abs().max()) if want.numel() else 0.0
            row["tolerance"] = 1e-6 + rtol * scale
            row["status"] = "match" if diff is not None and diff <= row["tolerance"] \
                else "mismatch"
        if want is not None:
            row["reference"] = summarize(want)
        if row["status"] not in ("match", "zero_unused", "no_gradient"):
            ok = False
        rows.append(row)
    return {"outcome": ref["outcome"], "error": ref["error"], "comparable": comparable,
            "ok": bool(ok) if comparable else None, "comparison": rows,
            "gradients": {k: summarize(v) for k, v in sorted(ref["grads"].items())
                          if v is not None}}
