"""What a worker's threads run in Python while a watched backward is late: the custom autograd
``backward``s that PyTorch's engine is inside (torch side: read on every worker of the context
by the watch's recording, ``watch_late``).

PyTorch's engine calls a custom ``torch.autograd.Function``'s ``backward`` through a method of
``BackwardCFunction`` (``torch/autograd/function.py``), from one of its own threads or from the
thread that called the backward. A stack that holds a frame of one of those methods is inside
the backward: the first frame inwards that is not PyTorch's is the Function's ``backward``.
That code is the first suspect for a backward that is slow when FAST mode's rules do not make
it hang. A C++ operator holds no Python frame and is not seen; a ``backward`` that has returned
is gone from the stacks.
"""

from __future__ import annotations

import os
import sys
import threading
import types
from functools import cache
from typing import Any

from torch.autograd import function as autograd_function

from distviz.frames import display, is_own, outwards, site_text
from distviz.runner import observe_real
from distviz.tracing import callsites

#: The file of PyTorch's that calls a custom Function's ``backward`` (``BackwardCFunction``).
_ENGINE_FILE = os.path.join("torch", "autograd", "function.py")
#: Frames read per thread, at most.
MAX_DEPTH = 256


def fetch(context_id: int) -> dict[str, Any]:
    """On one worker: what the watch records of it (``observe_real.fetch_piece``: the
    gradients so far, summarized; the node references dropped) and the custom backwards its
    threads are in (``busy``)."""
    piece = observe_real.fetch_piece(context_id, True, True, False, True)
    piece["busy"] = running_backwards()
    return piece


def running_backwards() -> list[dict[str, str]]:
    """Each thread inside a custom Function's ``backward``: its name, the Function's
    ``backward`` (qualified: ``Checked.backward``) and where it is now, in the program's own
    frames where there are some (``late_hang.py:44 in backward``)."""
    names = {t.ident: t.name for t in threading.enumerate()}
    out: list[dict[str, str]] = []
    for ident, frame in sorted(sys._current_frames().items()):
        user = _backward_frame(frame)
        if user is None:
            continue
        code = user.f_code
        own = _own_inside(frame, user)
        where = site_text(own) or \
            f"{display(os.path.abspath(code.co_filename))}:{user.f_lineno} in " \
            f"{code.co_name}"
        out.append({"thread": names.get(ident, f"thread {ident}"),
                    "function": code.co_qualname, "where": where})
    return out


def _own_inside(frame: types.FrameType, user: types.FrameType, limit: int = 2
                ) -> list[callsites.Frame]:
    """The program's own frames from ``frame`` out to ``user`` (the ``backward``), innermost
    first: where the backward is now, not who called it."""
    out: list[callsites.Frame] = []
    for f in outwards(frame, None):
        if len(out) == limit:
            break
        if is_own(f.f_code.co_filename):
            out.append((os.path.abspath(f.f_code.co_filename), f.f_lineno or 0, f.f_code.co_name))
        if f is user:
            break
    return out


@cache
def _entries() -> frozenset[types.CodeType]:
    """The code of ``BackwardCFunction``'s methods: the engine's way into a custom
    ``backward``."""
    cls = getattr(autograd_function, "BackwardCFunction", None)
    return frozenset(v.__code__ for v in vars(cls).values()
                     if isinstance(v, types.FunctionType)) if cls is not None else frozenset()


def _backward_frame(frame: types.FrameType) -> types.FrameType | None:
    """The frame of the custom ``backward`` a thread is in (the innermost one, when a
    backward runs another), or ``None``."""
    entries = _entries()
    entry = next((f for f in outwards(frame, MAX_DEPTH) if f.f_code in entries), None)
    return None if entry is None else _program_side(frame, entry)


def _program_side(frame: types.FrameType, entry: types.FrameType) -> types.FrameType | None:
    """The outermost frame inside ``entry`` that is not in PyTorch's ``function.py``."""
    found: types.FrameType | None = None
    for f in outwards(frame, None):
        if f is entry:
            break
        if not f.f_code.co_filename.endswith(_ENGINE_FILE):
            found = f
    return found
