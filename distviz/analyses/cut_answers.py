"""``distviz why`` for a parameter a run named without a gradient, from the cuts of that run
(pure).

``distviz trace`` writes the cuts of the run into ``index.json`` (``cuts.explained``: each
parameter without a gradient and the cut that caused it; ``cuts.seen``: every cut the
processes logged, ``distviz.cuts``). ``RunCuts.read`` reads them from the
``index.json`` beside a trace file; ``explained_for`` and ``seen_for`` find the cut of one
parameter: by its name, or, for a trace answer that breaks at an RPC result, by the RPC.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distviz.cuts import Cut, Explained, first_frame

__all__ = ["INDEX", "RunCuts"]

#: The index file ``distviz trace`` writes beside its traces.
INDEX = "index.json"


@dataclass(frozen=True, slots=True)
class RunCuts:
    """The cuts of one run: ``explained`` (parameters without a gradient, each with its cut
    or none) and ``seen`` (every cut logged)."""

    explained: tuple[Explained, ...] = ()
    seen: tuple[Cut, ...] = field(default_factory=tuple)

    @classmethod
    def from_json(cls, obj: Any) -> RunCuts:
        """The cuts of ``index.json``'s ``cuts`` object (anything else: none)."""
        if not isinstance(obj, dict):
            return cls()
        explained, seen = [], []
        for e in obj.get("explained") or []:
            try:
                explained.append(Explained.from_json(e))
            except (ValueError, TypeError, AttributeError):
                continue
        for c in obj.get("seen") or []:
            try:
                seen.append(Cut.from_json(c))
            except (ValueError, TypeError, AttributeError):
                continue
        return cls(tuple(explained), tuple(seen))

    @classmethod
    def read(cls, trace_file: Path) -> RunCuts:
        """The cuts in the ``index.json`` beside ``trace_file`` (none when it is missing or
        unreadable: an older run, or a trace written by ``distviz run``)."""
        try:
            obj = json.loads((trace_file.parent / INDEX).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return cls()
        return cls.from_json(obj.get("cuts") if isinstance(obj, dict) else None)

    def explained_for(self, name: str) -> Explained | None:
        """The entry that names ``name`` (with its cut, or ``None`` when no cut explains it)."""
        found = [e for e in self.explained if name in e.names]
        with_cut = [e for e in found if e.cut is not None]
        best = with_cut or found
        return best[0] if best else None

    def seen_for(self, name: str, worker: str | None = None, site: str | None = None,
                 context_id: int | None = None) -> Cut | None:
        """A cut logged of ``name`` (its leaves); else, for a trace answer of ``worker`` that
        breaks at an RPC (``site``: its words), a cut on another worker of a result of that
        RPC, or one of the trace's context (``context_id``) on another worker of a tensor that
        came from an RPC's arguments (a pipeline stage that cut its input's path)."""
        own = [c for c in self.seen if name in c.leaves]
        if own:
            return own[0]
        if worker is None or not site:
            return None
        for c in self.seen:
            for r in c.behind:
                if r.callee == worker and r.site and first_frame(r.site) in site:
                    return c
        return next((c for c in self.seen if c.upstream and c.worker != worker
                     and context_id is not None and c.context_id == context_id), None)

    def names(self) -> list[str]:
        """Every parameter the run named without a gradient."""
        return [n for e in self.explained for n in e.names]
