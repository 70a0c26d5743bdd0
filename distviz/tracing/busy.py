"""What a worker's threads run in Python while a watched backward is late: the custom autograd
``backward``s that PyTorch's engine is inside (torch side: read on every worker of the context
by the watch's recording, ``watch_late``).

PyTorch's engine calls a custom ``torch.autograd.Function``'s ``backward`` from one of its C++
threads, through ``BackwardCFunction.apply`` in ``torch/autograd/function.py``. Such a thread's
outermost Python frame is in that file, and the first frame inwards that is not is the
Function's ``backward``. A thread found there is running the program's code inside the backward:
when FAST mode's rules do not make the backward hang, that code is the first suspect for a slow
one. A C++ operator holds no Python frame and is not seen; a ``backward`` that has returned is
gone from the stacks.
"""

from __future__ import annotations

import os
import sys
import threading
import types
from typing import Any

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
        own = callsites.own_frames(frame, 2)
        where = callsites.site_text(own) or \
            f"{callsites.display(os.path.abspath(code.co_filename))}:{user.f_lineno} in " \
            f"{code.co_name}"
        out.append({"thread": names.get(ident, f"thread {ident}"),
                    "function": code.co_qualname, "where": where})
    return out


def _backward_frame(frame: types.FrameType) -> types.FrameType | None:
    """The frame of the custom ``backward`` a thread is in, when its outermost frame is
    PyTorch's ``BackwardCFunction``; else ``None``."""
    chain: list[types.FrameType] = []
    f: types.FrameType | None = frame
    while f is not None and len(chain) < MAX_DEPTH:
        chain.append(f)
        f = f.f_back
    if f is not None or not chain[-1].f_code.co_filename.endswith(_ENGINE_FILE):
        return None
    return next((g for g in reversed(chain)
                 if not g.f_code.co_filename.endswith(_ENGINE_FILE)), None)
