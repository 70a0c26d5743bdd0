"""Trace files and text to a ``Trace`` (``load``, ``loads``), with one-line ``TraceError``s that
name the file: a missing or unreadable file, an empty one, bad JSON, a scenario given instead
of a trace. JSON is read by orjson when it can (several times faster on big traces), by
``json`` otherwise; the cyclic garbage collector is paused while the many small objects of a
big trace are made. The object becomes a ``Trace`` in ``distviz.trace.trace.parse_trace``.
"""

from __future__ import annotations

import gc
import json
import os
import re
from pathlib import Path
from typing import Any

from distviz.errors import TraceError
from distviz.trace.trace import Trace, parse_trace

try:
    import orjson
except ImportError:  # pragma: no cover - a declared dependency; json is the fallback
    orjson = None  # type: ignore[assignment]


def load(path: str | os.PathLike[str]) -> Trace:
    """Load a trace file. Raises ``TraceError`` (one line, naming the file and key) when the file
    is missing, not JSON, of another schema version, or has missing or mistyped fields."""
    if orjson is not None:   # the bytes straight to orjson: no text is decoded on the way
        try:
            raw = Path(path).read_bytes()
        except OSError:
            raw = None   # read_trace_text says why
        if raw is not None:
            was_enabled = gc.isenabled()
            gc.disable()   # millions of small acyclic objects (see loads)
            try:
                obj = orjson.loads(raw)
                del raw
                return parse_trace(obj, str(Path(path)))
            except orjson.JSONDecodeError:
                pass   # json words the error (or reads NaN, integers beyond 64 bits)
            finally:
                if was_enabled:
                    gc.enable()
    return loads(read_trace_text(path), source=str(Path(path)))


def read_trace_text(path: str | os.PathLike[str]) -> str:
    """The text of a trace file; ``TraceError`` when it is missing or unreadable."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TraceError("no such trace file; run `distviz run SCENARIO -o FILE` to make one",
                         path=str(p)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TraceError(f"cannot read the trace: {exc}", path=str(p)) from None


def loads(text: str, source: str = "<trace>") -> Trace:
    """Parse trace JSON text; raises ``TraceError`` as ``load`` does.

    The cyclic garbage collector is paused while millions of small acyclic objects are made
    (otherwise it rescans them again and again: 2 to 3 times slower on a 1M-node trace).
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _loads(text, source)
    finally:
        if was_enabled:
            gc.enable()


def _loads(text: str, source: str) -> Trace:
    return parse_trace(parse_json(text, source), source)


def parse_json(text: str, source: str) -> Any:
    """The JSON value of a trace file's text; ``TraceError`` naming the problem (an empty
    file, a scenario given instead of a trace, bad JSON). Parsed by orjson (several times
    faster on big traces) when it can; ``json`` reads what orjson refuses (NaN, integers
    beyond 64 bits) and words the errors."""
    if orjson is not None:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        if not text.strip():
            raise TraceError("the file is empty; expected a distviz trace (JSON)",
                             path=source) from None
        not_a_trace(source, text)
        raise TraceError(f"not valid JSON at column {exc.colno}: {_json_problem(exc.msg)}; "
                         "the file is truncated or is not a distviz trace",
                         path=source, line=exc.lineno) from None
    except RecursionError:
        raise TraceError("JSON nested too deeply; not a distviz trace", path=source) from None
    return obj


def _json_problem(msg: str) -> str:
    """``json``'s message without its dangling ``at`` (the column says where), in lower case:
    ``Unterminated string starting at`` -> ``unterminated string``."""
    for tail in (" starting at", " at"):
        if msg.endswith(tail):
            msg = msg[: -len(tail)]
            break
    return msg[:1].lower() + msg[1:]


_SCENARIO_KEY = re.compile(r"^(workers|main|backward)[ \t]*:", re.MULTILINE)


def not_a_trace(source: str, text: str) -> None:
    """Raise ``TraceError`` when ``text`` (a file that is not JSON) is a scenario: it has the
    top-level keys of one (``workers:``, ``main:``, ``backward:`` at the start of a line)."""
    if _SCENARIO_KEY.search(text[:65536]):
        raise TraceError(f"this is a scenario, not a trace: run it with `distviz run {source}` "
                         "(that writes the trace)", path=source)
