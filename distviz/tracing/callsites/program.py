"""The program's own line of an RPC (torch side, at record time): the frame of its call site in
the function that called the backward, and where that backward's loss was built.

An RPC made inside a module's ``forward`` keeps its caller chain (``forward <- train``); the
backward keeps its own (``train``). The innermost frame of the call's chain whose function is
also on the backward's chain is where the program holds the call's result next to its loss:
``outputs = model(inputs)`` or ``val = model(val_x)`` in ``train``. The replay side reads these
lines (``distviz.replay.dropped``) to say where a result the loss does not use was dropped.
"""

from __future__ import annotations

import functools
import types
from typing import Any, NamedTuple

from distviz.frames import (
    Frame,
    display,
    outwards,
    own_frames,
    own_path,
    shown_path,
    site_frames,
    site_text,
)
from distviz.tracing.callsites.source import assigned_before, is_read, statement_text

#: the program's frames the backward's own chain keeps
BACKWARD_FRAMES = 6


class PassLines(NamedTuple):
    """A backward's own lines: its caller chain and where its loss was built."""

    #: the functions of the backward's chain, as ``(shown file, function)``
    functions: tuple[tuple[str, str], ...]
    site: str | None
    loss_site: str | None
    loss_statement: str | None


def pass_lines(frame: types.FrameType | None, roots: list[Any]) -> PassLines:
    """The lines of the backward called from ``frame`` with ``roots`` (none when its source
    cannot be read: they are words only, never a reason not to record)."""
    try:
        frames, site = backward_site(frame)
        loss = loss_line(frame, roots[0]) if roots else (None, None)
    except Exception:  # noqa: BLE001 - a frame or a source distviz cannot read
        return PassLines((), None, None, None)
    return PassLines(functions_of(frames), site, *loss)


def call_statement(site: str | None, functions: tuple[tuple[str, str], ...],
                   result_var: str | None) -> str | None:
    """``level_statement`` for the backward whose ``PassLines.functions`` are ``functions``,
    ``None`` when the source cannot be read (cached: a loop's calls share a site)."""
    try:
        return _level_statement(site, functions, result_var)
    except Exception:  # noqa: BLE001 - a source distviz cannot read: words only
        return None


def backward_site(frame: types.FrameType | None) -> tuple[list[Frame], str | None]:
    """The program's frames at its backward call (innermost first) and their ``site_text``."""
    frames = own_frames(frame, BACKWARD_FRAMES)
    return frames, site_text(frames)


def loss_line(frame: types.FrameType | None, root: Any) -> tuple[str | None, str | None]:
    """``(site, statement)`` of the line that built ``root``: the last assignment of the
    variable holding it in the innermost of the program's frames where it is a local variable
    and no parameter (``loss = sum(...)``); else the line that passed it as an expression: the
    backward's own (``dist_autograd.backward(cid, [out.sum()])``), or that of the caller of
    the program's helper whose parameter holds it. ``frame`` may be a stand-in for a caller's
    frame (an RRef's owner, ``distviz.tracing.hooks.rref``), whose locals are not read."""
    passed: tuple[str | None, str | None] = (None, None)
    frames = 0
    for f in outwards(frame):
        path = own_path(f.f_code.co_filename)
        if not path:
            continue
        frames += 1
        if frames > BACKWARD_FRAMES:
            break
        now, fn = f.f_lineno or 0, f.f_code.co_name
        if passed[0] is None:
            passed = (f"{display(path)}:{now} in {fn}", statement_text(path, now))
        if not isinstance(f, types.FrameType):
            continue    # a stand-in for a caller's frame on an RRef's owner: no code to read
        name, parameter = _holder(f, root)
        line = assigned_before(f.f_code, name, now) if name is not None else None
        if line is not None:
            return f"{display(path)}:{line} in {fn}", statement_text(path, line)
        if parameter:
            passed = (None, None)     # its caller passed it: that caller's line built it
    return passed


def _holder(f: types.FrameType, value: Any) -> tuple[str | None, bool]:
    """``(name, parameter)``: the local variable of ``f`` that holds ``value`` and is not a
    parameter, and whether a parameter holds it."""
    code = f.f_code
    params = set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    held = [name for name, v in list(f.f_locals.items()) if v is value]
    return next((n for n in held if n not in params), None), any(n in params for n in held)


def level_statement(site: str | None, backward: list[Frame], result_var: str | None = None
                    ) -> str | None:
    """The source of the statement, in a function on the backward's chain ``backward``, through
    which a call made at ``site`` was made (``val = model(val_x)``); ``None`` when the call's
    chain never passes through such a function, or when the function that made the call
    assigns its result to ``result_var`` and never reads it (the result is dropped there, at
    the call's own site)."""
    return _level_statement(site, functions_of(backward), result_var)


def functions_of(backward: list[Frame]) -> tuple[tuple[str, str], ...]:
    """The functions of a chain of frames, as ``(shown file, function)``."""
    return tuple(sorted({(display(path), fn) for path, _line, fn in backward}))


@functools.lru_cache(maxsize=1024)
def _level_statement(site: str | None, functions: tuple[tuple[str, str], ...],
                     result_var: str | None) -> str | None:
    """``level_statement`` (a loop's calls share a site: read once)."""
    frames = site_frames(site)
    if result_var and frames and \
            not is_read(shown_path(frames[0][0]), frames[0][1], result_var.split(".")[0]):
        return None
    for shown, line, fn in frames:
        if (shown, fn) in functions:
            return statement_text(shown_path(shown), line)
    return None
    for shown, line, fn in frames:
        if (shown, fn) in functions:
            return statement_text(shown_path(shown), line)
    return None
