"""The program's frames: one walk out of a thread's stack, and one rule for which files are the
program's own (torch-free; a leaf module).

``outwards(frame)`` is the one walk up a stack (innermost first, ``f_back`` by ``f_back``, at
most ``MAX_WALK`` frames); ``is_own(filename)`` the one rule for "the program's own file": not
Python's (the standard library), not a library's (site-packages, dist-packages), not torch's,
not distviz's, not a ``<string>``. ``own_frames`` are the program's frames of a stack as
``(file, line, function)``; ``display`` and ``site_text`` how they are shown
(``rnn.py:19 in _remote_method <- main.py:55 in _run_trainer``).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import site
import sys
import sysconfig
import types
from collections.abc import Iterator

Frame = tuple[str, int, str]      # (absolute file, line, function)

#: the program's frames an RPC's call site keeps
MAX_FRAMES = 4
#: the longest walk up the stack for the program's own frames (pytest's own run ~60 deep)
MAX_WALK = 96

_OWN: dict[str, str] = {}      # code file -> its absolute path, or "" when not the program's
_NOT_OWN: tuple[str, ...] | None = None
_CWD = os.getcwd()


def outwards(frame: types.FrameType | None, limit: int | None = MAX_WALK
             ) -> Iterator[types.FrameType]:
    """The frames from ``frame`` outwards (``frame`` first, then its callers), at most
    ``limit`` of them (``None``: the whole stack)."""
    f = frame
    if limit is None:
        while f is not None:
            yield f
            f = f.f_back
        return
    for _ in range(limit):
        if f is None:
            return
        yield f
        f = f.f_back


def _torch_dir() -> str | None:
    """torch's package folder, without importing torch (the program has, where it matters)."""
    module = sys.modules.get("torch")
    origin = getattr(module, "__file__", None)
    if origin is None:
        try:
            spec = importlib.util.find_spec("torch")
        except (ImportError, ValueError):
            spec = None
        origin = spec.origin if spec is not None else None
    return os.path.dirname(os.path.abspath(origin)) if origin else None


def _library_dirs() -> tuple[str, ...]:
    dirs = {os.path.dirname(os.path.abspath(__file__))}   # distviz itself
    torch_dir = _torch_dir()
    if torch_dir is not None:
        dirs.add(torch_dir)
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        p = sysconfig.get_paths().get(key)
        if p:
            dirs.add(os.path.abspath(p))
    try:
        dirs.update(os.path.abspath(p) for p in site.getsitepackages())
    except AttributeError:  # pragma: no cover - virtualenv's old site module
        pass
    return tuple(sorted(d.rstrip(os.sep) + os.sep for d in dirs))


def own_path(filename: str) -> str:
    """The absolute path of a code file of the program's, "" for Python's, a library's,
    torch's or distviz's (kept per file)."""
    own = _OWN.get(filename)
    if own is None:
        global _NOT_OWN
        if _NOT_OWN is None:
            _NOT_OWN = _library_dirs()
        path = os.path.abspath(filename)
        mine = not filename.startswith("<") and not path.startswith(_NOT_OWN) and \
            "site-packages" not in path and "dist-packages" not in path
        own = _OWN[filename] = path if mine else ""
    return own


def is_own(filename: str) -> bool:
    """Whether a code file belongs to the program (not Python, a library, torch or distviz)."""
    return bool(own_path(filename))


def own_frames(frame: types.FrameType | None, limit: int = MAX_FRAMES) -> list[Frame]:
    """The program's own frames from ``frame`` outwards, innermost first (at most ``limit``,
    within ``MAX_WALK`` frames)."""
    out: list[Frame] = []
    known = _OWN
    f, left = frame, MAX_WALK
    while f is not None and left:     # not ``outwards``: a generator's resumes cost 2.5x this
        code = f.f_code               # loop in an RPC's path (caches cold after its C++)
        path = known.get(code.co_filename)
        if path is None:
            path = own_path(code.co_filename)
        if path:
            out.append((path, f.f_lineno or 0, code.co_name))
            if len(out) == limit:
                break
        f = f.f_back
        left -= 1
    return out


@functools.lru_cache(maxsize=1024)
def display(path: str) -> str:
    """A file as people read it: relative to the working folder when it is inside it (kept
    per file: every recorded call names the same few)."""
    rel = os.path.relpath(path, _CWD)
    return path if rel.startswith("..") else rel


def site_text(frames: list[Frame]) -> str | None:
    """``rnn.py:19 in _remote_method <- main.py:55 in _run_trainer`` (innermost first)."""
    if not frames:
        return None
    return " <- ".join(f"{display(f)}:{line} in {fn}" for f, line, fn in frames)


#: a frame as ``site_text`` shows it: ``(shown file, line, function)``
ShownFrame = tuple[str, int, str]


def site_frames(site: str | None) -> list[ShownFrame]:
    """The frames of a ``site_text`` string, innermost first (``[]`` for ``None``; a part
    that is not ``FILE:LINE in FUNCTION`` is left out)."""
    out: list[ShownFrame] = []
    for part in (site or "").split(" <- "):
        where, sep, fn = part.rpartition(" in ")
        path, colon, line = where.rpartition(":")
        if sep and colon and line.isdigit():
            out.append((path, int(line), fn))
    return out


def shown_path(shown: str) -> str:
    """The absolute path of a file as ``display`` showed it in this process."""
    return shown if os.path.isabs(shown) else os.path.join(_CWD, shown)
