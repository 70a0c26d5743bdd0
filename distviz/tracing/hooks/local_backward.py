"""Local backwards where a distributed one was meant: the hook (torch side).

``install`` wraps PyTorch's ``_engine_run_backward`` (in ``torch.autograd`` and
``torch.autograd.graph``), the one function under ``loss.backward()``,
``torch.autograd.backward`` and ``torch.autograd.grad``. Every local backward of a traced
process passes through it; the wrapper reads a dictionary's size and one thread-local integer,
and goes straight on to PyTorch unless

* some thread of the process is inside ``with dist_autograd.context()``
  (``snapshot_listener.OPEN``) and this one is (``explain_local``): a local backward inside a
  distributed context. Over a graph that holds RPC nodes, PyTorch's local engine stops at the
  first ``RecvRpcBackward`` with ``graphTask_ INTERNAL ASSERT FAILED`` (context.cpp): distviz
  says first which line made the call, which RPC's result the engine meets (its call site and
  variable, ``callsites``) and the fix, ``dist_autograd.backward(context_id, [loss])``. Over a
  graph without RPC nodes the backward runs as without a context: its gradients go to ``.grad``
  (``torch.autograd.grad``: to the caller), never into the context;
* the call is nested in a backward while a distributed backward runs in this process
  (``report_left``): a custom Function's backward that runs a local backward, as fairscale's
  checkpointing does (``Checkpoint.backward``). The parameters whose ``.grad`` it changed are
  named, with the Function, its line and the context when this process can tell it:
  ``get_gradients`` does not hold those gradients and ``DistributedOptimizer`` will not apply
  them.

Each finding is said live and logged for the summary (``journal.LOCAL_BACKWARD``,
``journal.GRADS_LEFT``) once per call site and process; the graph walk is iterative and stops
after ``limits.TRACE_LOCAL_WALK`` nodes. The program's call then goes to PyTorch exactly as it
was made: what it returns, raises and prints is PyTorch's own.

The explanation is ``distviz.tracing.hooks.local_explain``, imported at the first local backward
met inside a context or a distributed backward: a process that runs none (every watched
training) loads only this hook.
"""

from __future__ import annotations

import functools
import sys
import types
from collections.abc import Callable
from typing import Any

import torch
import torch.autograd.graph as autograd_graph

from distviz.tracing.shared import live
from distviz.tracing.snapshot import listener as snapshot_listener


def install() -> None:
    """Wrap PyTorch's ``_engine_run_backward`` in ``torch.autograd`` and
    ``torch.autograd.graph`` with ``wrap`` (once per process; ``torch.compiler``, which
    swaps it for a while, puts back what it found)."""
    original = getattr(autograd_graph, "_engine_run_backward", None)
    if original is None or getattr(original, "_distviz_local", False):
        return      # a torch without it (tests/pure/runner/test_torch_internals.py pins it) or done
    wrapped = wrap(original)
    autograd_graph._engine_run_backward = wrapped
    torch.autograd._engine_run_backward = wrapped


def wrap(original: Callable[..., Any]) -> Callable[..., Any]:
    """``original`` as a traced process calls it (see the module docstring)."""
    opened = snapshot_listener.OPEN
    graph_task = torch._C._current_graph_task_id

    @functools.wraps(original)
    def _engine_run_backward(t_outputs: Any, *args: Any, **kwargs: Any) -> Any:
        if not opened and graph_task() == -1:   # no context entered, not inside a backward
            return original(t_outputs, *args, **kwargs)
        from distviz.tracing.hooks import local_explain

        before = _guarded(local_explain.checked, t_outputs, args, kwargs, _caller())
        result = original(t_outputs, *args, **kwargs)   # the program's traceback: one frame
        if before is not None:
            _guarded(local_explain.report_left, before)
        return result
    _engine_run_backward._distviz_local = True    # type: ignore[attr-defined]
    return _engine_run_backward


def _caller() -> types.FrameType | None:
    """The frame that called the wrapper (``torch.autograd.backward`` or ``grad``), if any."""
    return sys._getframe(1).f_back


def _guarded(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)``; a failure of distviz's own is said and never reaches the program."""
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - the program's backward goes on regardless
        live.say(f"could not explain a local backward: {type(exc).__name__}: {exc}")
        return None
