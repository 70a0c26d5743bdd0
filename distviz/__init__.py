"""distviz: record, replay and visualize PyTorch distributed autograd.

The pure side (``distviz.trace``, ``distviz.replay``, ``distviz.render``) never imports torch;
``distviz.recorder`` (imported lazily by ``record`` and ``name``) and ``distviz.runner`` do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from distviz.trace import Trace, load

__version__ = "0.1.0"
__all__ = ["Trace", "load", "name", "record", "__version__"]

if TYPE_CHECKING:  # pragma: no cover
    import torch


def record(context_id: int, roots: Any, names: Any = None) -> Trace:
    """Record the distributed autograd graph of ``context_id`` on every worker that took part.

    Call it on the initiator, inside ``dist_autograd.context()``, after the forward pass and
    before ``dist_autograd.backward``. ``roots`` is a tensor or a list of scalar tensors (the
    roots you will call backward on); ``names`` maps variable names to tensors (``{"w": w}``) or
    tensors to names, to label leaves. Other workers are reached over RPC and must be able to
    ``import distviz``. Returns a ``Trace``. Raises ``distviz.errors.RecordError`` (what was
    expected, what was found, what to do) when the context does not exist here (it ended with
    its ``with`` block), when its backward pass has already run, or when the roots' graph was
    not built in it (the forward pass ran outside the context, or in another one).
    """
    from distviz.recorder import record as _record

    return _record(context_id, roots, names)


def name(tensor: torch.Tensor, label: str) -> torch.Tensor:
    """Name a tensor on this worker (``distviz.name(w, "ps.w")``) so traces recorded by
    ``record`` on the initiator show its leaf under that name; returns the tensor."""
    from distviz.recorder import name as _name

    return _name(tensor, label)
