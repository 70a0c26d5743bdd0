"""distviz: record, replay and visualize PyTorch distributed autograd.

This module is the Python API (``record``, ``backward``, ``name``, ``load``). It imports no
torch: the recorder and the tracing hooks load only when a function that needs them is called,
so ``distviz.load`` and the whole replay and render side run without torch.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from distviz import lend
from distviz.errors import RecordError
from distviz.limits import TRACE_HANG_TIMEOUT

__version__ = "0.1.0"
__all__ = ["HangPredicted", "RecordError", "Trace", "backward", "load", "name", "record",
           "__version__"]

if TYPE_CHECKING:  # pragma: no cover
    import networkx as nx
    import torch

    from distviz.outcome import Mode
    from distviz.trace import Trace, load
    from distviz.tracing.shared.stop import HangPredicted


def record(context_id: int, roots: Any, names: Any = None, *, observe: bool = False,
           path: str | os.PathLike[str] | None = None) -> Trace:
    """Record the distributed autograd graph of ``context_id`` on every worker that took part.

    Call it on the initiator, inside ``dist_autograd.context()``, after the forward pass and
    before ``dist_autograd.backward``. ``roots`` is a tensor or a list of scalar tensors (the
    roots you will call backward on); ``names`` maps variable names to tensors (``{"w": w}``) or
    tensors to names, to label leaves. Other workers are reached over RPC and must be able to
    ``import distviz``. Returns a ``Trace``. Raises ``distviz.RecordError`` (what was
    expected, what was found, what to do) when the context does not exist here (it ended with
    its ``with`` block), when its backward pass has already run, or when the roots' graph was
    not built in it (the forward pass ran outside the context, or in another one).

    With ``observe=True`` leaves are also named from the modules that own them on every worker
    (``named_parameters()``) and roots from your variables, and the next
    ``dist_autograd.backward(context_id, ...)`` is observed: hooks on every node of every
    worker, ``get_gradients`` from every worker, the comparison with the replay. It fills the
    returned trace's ``real`` when that backward returns (and saves it to ``path``, if given);
    when the replay predicts a hang that backward raises ``distviz.HangPredicted`` instead of
    hanging.
    """
    if observe:
        import sys

        from distviz.tracing.backward_api import record as _observed
        return _observed(context_id, roots, names, path=path, frame=sys._getframe(1))
    from distviz.recorder.record_api import record as _record

    trace = _record(context_id, roots, names)
    if path is not None:
        trace.save(path)
    return trace


def backward(context_id: int, roots: Any, retain_graph: bool = False, *, names: Any = None,
             path: str | os.PathLike[str] | None = None, out_dir: str = "distviz-traces",
             hang_timeout: float = TRACE_HANG_TIMEOUT) -> Trace:
    """A drop-in ``dist_autograd.backward`` that records, observes and saves.

    Records the whole graph of ``context_id`` on every worker (leaves named from the modules
    that own them, roots from your variables, RPC call sites from your files), replays FAST
    mode on it, then runs PyTorch's backward with hooks on every worker and compares. Saves
    the trace to ``path`` (default ``<out_dir>/<worker>.ctx<N>.trace.json``) and returns it.
    Raises what PyTorch's backward raises (after saving), and ``distviz.HangPredicted`` (a
    ``RuntimeError``, with the explanation) instead of running a backward the replay predicts
    to hang; a real backward that does not return within ``hang_timeout`` seconds is saved as
    hung and left running. Under ``distviz trace`` its options apply instead.

    ``roots`` may be an RRef whose value is the loss (in place of
    ``loss_rref.backward(context_id)``): the backward runs on its owner, which writes the
    trace and returns it.
    """
    import sys

    from distviz.tracing.backward_api import backward as _backward
    return _backward(context_id, roots, retain_graph, names=names, path=path,
                     out_dir=out_dir, hang_timeout=hang_timeout, frame=sys._getframe(1))


class _TraceViews:
    """``distviz.trace.TraceViews``: the networkx graph and Jupyter's display of a trace, from
    the replay and render side, each imported on first use (loading a trace stays fast)."""

    def networkx(self, trace: Trace, pass_index: int | None, mode: Mode) -> nx.DiGraph:
        from distviz.views.graph_nx import to_networkx
        return to_networkx(trace, pass_index, mode)

    def html(self, trace: Trace) -> str:
        from distviz.render.notebook import trace_html
        return trace_html(trace)

    def svg(self, trace: Trace) -> str | None:
        from distviz.render.notebook import trace_svg
        return trace_svg(trace)

    def recording_html(self, recording: Any) -> str:
        from distviz.render.notebook import recording_html
        return recording_html(recording)


lend.VIEWS[:] = [_TraceViews()]


def __getattr__(attr: str) -> Any:
    if attr in ("Trace", "load"):   # every process ``distviz trace`` starts imports this
        import distviz.trace  # package: the trace module only when asked for

        return getattr(distviz.trace, attr)
    if attr == "HangPredicted":   # the tracing side: imported only when asked for
        from distviz.tracing.shared.stop import HangPredicted
        return HangPredicted
    raise AttributeError(f"module 'distviz' has no attribute {attr!r}")


def name(tensor: torch.Tensor, label: str) -> torch.Tensor:
    """Name a tensor on this worker (``distviz.name(w, "ps.w")``) so traces recorded by
    ``record`` on the initiator show its leaf under that name; returns the tensor."""
    from distviz.recorder.names import name as _name

    return _name(tensor, label)
