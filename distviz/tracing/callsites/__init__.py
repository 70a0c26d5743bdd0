"""Where the program made each RPC inside a dist autograd context (torch side).

``distviz.tracing.hooks.patches`` wraps ``rpc.rpc_sync``, ``rpc.rpc_async``, ``rpc.remote`` (which
``rref.rpc_sync().method(...)``, ``rref.rpc_async()`` and ``rref.remote()`` go through) and
``RRef.to_here``. Each wrapped call made inside a context that may be recorded keeps: the
frames of the program's own files on the call stack (not torch's, not the standard library's,
not site-packages', not distviz's), innermost first; the message ids it created (new send
functions in the caller's context, and the ``RecvRpcBackward`` of the result when it arrives);
and grad mode. The recorder moves them into the trace's ``rpc_calls`` (``take``), where they
become ``site`` strings such as ``rnn.py:19 in _remote_method <- main.py:55 in _run_trainer``
and the variable the result was assigned to.

A module per job; this package re-exports the names the rest of distviz uses
(``callsites.drop(...)``):

* ``wrappers``: the wrappers themselves (``wrap_call``, ``wrap_to_here``);
* ``registry``: the calls kept per context (``Call``, ``log``, ``take``, ``quiet``, ``drop``);
* ``stacks``: the calls a thread is inside now (``waiting``, ``peek``: ``distviz snapshot``);
* ``messages``: the message ids behind a result (``recv_functions``, ``recv_ids``);
* ``labels``: a call's function as the program wrote it (``func_label``);
* ``source``: the program's source (``result_var``, ``def_line``);
* ``guess``: the Python API's first context, whose forward no wrapper saw
  (``guess_from_frames``).

The program's frames, the one rule for its own files and how a site is shown are
``distviz.frames`` (torch-free), their one address.
"""

from __future__ import annotations

from distviz.frames import MAX_FRAMES, MAX_WALK, Frame
from distviz.tracing.callsites.guess import arguments_sent, guess_from_frames
from distviz.tracing.callsites.labels import argument_hint, func_label
from distviz.tracing.callsites.messages import (
    current_context,
    recv_functions,
    recv_ids,
    recv_ids_by,
    result_functions,
)
from distviz.tracing.callsites.registry import (
    KEEP_CONTEXTS,
    Call,
    drop,
    has_calls,
    log,
    quiet,
    reset,
    take,
)
from distviz.tracing.callsites.source import def_line, result_var
from distviz.tracing.callsites.stacks import peek, waiting, waiting_contexts
from distviz.tracing.callsites.wrappers import wrap_call, wrap_to_here

__all__ = ["KEEP_CONTEXTS", "MAX_FRAMES", "MAX_WALK", "Call", "Frame", "argument_hint",
           "arguments_sent", "current_context", "def_line", "drop", "func_label",
           "guess_from_frames", "has_calls", "log", "peek", "quiet",
           "recv_functions", "recv_ids", "recv_ids_by", "reset", "result_functions",
           "result_var", "take", "waiting", "waiting_contexts", "wrap_call",
           "wrap_to_here"]
