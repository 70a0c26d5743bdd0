"""The session's events folded once (torch-free): what the summary of ``distviz trace`` and
the pytest plugin both read of them.

``fold(events)`` keeps the last row logged for each trace file (with ``--on-hang continue`` a
context is logged when the hang is predicted and again when PyTorch's backward is seen to
hang), ordered by initiator, context number and file, and the notes: each sentence the
processes logged (``not_recorded``, a failed ``init_rpc``, a local backward, a stop for a hang),
in the order logged, then the count of backwards run from TorchScript, each with the test it
came from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from distviz.tracing.shared.journal import (
    NOTE_KINDS,
    SCRIPTED,
    ContextRow,
    Event,
    EventKind,
    scripted_notes,
)

#: the event of a program stopped for a hang (``distviz.tracing.shared.stop``)
STOP = EventKind.STOP


class Note(NamedTuple):
    """One sentence about the run, the test it was logged in, and its event's kind."""

    test: str | None
    text: str
    kind: EventKind


@dataclass(slots=True)
class Folded:
    """The rows (the last of each trace file, by initiator, context number and file) and the
    notes of a session's events."""

    rows: list[ContextRow] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)


def fold(events: list[Event]) -> Folded:
    """The rows and notes of ``events`` (see the module docstring)."""
    last: dict[str, ContextRow] = {}
    out = Folded()
    for ev in events:
        who = f"{ev.worker}: " if ev.worker else ""
        if ev.kind == EventKind.CONTEXT and ev.row is not None:
            last[ev.row.file] = ev.row
        elif ev.kind == EventKind.RPC_FAILED:
            out.notes.append(Note(ev.test, f"{who}rpc.init_rpc failed: {ev.message}", ev.kind))
        elif ev.kind in NOTE_KINDS and ev.message:
            out.notes.append(Note(ev.test, f"{who}{ev.message}", ev.kind))
        elif ev.kind == STOP:
            out.notes.append(Note(ev.test, f"distviz stopped the program: {ev.message} "
                                  "(--on-hang stop)", ev.kind))
    out.notes.extend(Note(test, note, SCRIPTED) for test, note in scripted_notes(events))
    out.rows = sorted(last.values(), key=lambda r: (r.initiator, r.index, r.file))
    return out
