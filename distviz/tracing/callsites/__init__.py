"""Where the program made each RPC inside a dist autograd context: file, line, function and the variable of its result.

Torch side; kept per context while it may be recorded, so explanations name the program's
own lines rather than PyTorch's.
"""

from __future__ import annotations

from distviz.frames import MAX_FRAMES, MAX_WALK, Frame, display, is_own, own_frames, site_text
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
           "arguments_sent", "current_context", "def_line", "display", "drop", "func_label",
           "guess_from_frames", "has_calls", "is_own", "log", "own_frames", "peek", "quiet",
           "recv_functions", "recv_ids", "recv_ids_by", "reset", "result_functions",
           "result_var", "site_text", "take", "waiting", "waiting_contexts", "wrap_call",
           "wrap_to_here"]
