"""The session's shared files: one row per recorded context, events, trace file claims
(torch-free).

Every traced process appends to ``<session>/events.jsonl`` with one ``write`` per line
(``O_APPEND``), so lines from concurrent processes never interleave. Trace files are claimed
with ``O_EXCL`` in the session folder before they are written, so two processes never write the
same file, and the files of an earlier run in the same ``-o`` folder are replaced.
"""

from __future__ import annotations

import json
import os
import re
import threading
from dataclasses import dataclass, field, fields
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distviz.files import write_atomic
from distviz.limits import ExitCode
from distviz.outcome import Category, ContextOutcome, Outcome
from distviz.tracing.config import current_test
from distviz.words import plural

if TYPE_CHECKING:  # pragma: no cover - loaded with the first cut (distviz.tracing.hooks.cut_watch)
    from distviz.cuts import Cut, Explained

EVENTS = "events.jsonl"


class EventKind(StrEnum):
    """What one line of the event log says (its value is the log's JSON word); see ``Event``."""

    CONTEXT = "context"                # a recorded context, with its ``row``
    STOP = "stop"                      # a hang stops the program
    NOT_RECORDED = "not_recorded"      # a backward distviz could not record
    RPC_FAILED = "rpc_failed"          # ``init_rpc`` raised
    SCRIPTED = "scripted_backward"     # a backward a context ran from TorchScript
    TESTS = "tests"                    # a pytest run with distviz's plugin
    BACKWARDS = "backwards"            # one process's backward calls, with ``stats``
    LOCAL_BACKWARD = "local_backward"  # a local backward inside a dist autograd context
    GRADS_LEFT = "grads_left"   # a local backward inside a distributed one wrote parameters' .grad
    NO_GRADIENT = "no_gradient"  # parameters of an optimizer that never got a gradient
    NOT_APPLIED = "not_applied"  # a local optimizer's step over gradients left in a context
    ZERO_GRADIENT = "zero_gradient"  # parameters whose every context gradient was all zeros
    CUT_SEEN = "cut_seen"       # a cut of a parameter's path a process saw, with its ``cut``
    CUT = "cut"                 # parameters without a gradient and the cut that caused it


SCRIPTED = EventKind.SCRIPTED
LOCAL_BACKWARD = EventKind.LOCAL_BACKWARD
GRADS_LEFT = EventKind.GRADS_LEFT
NO_GRADIENT = EventKind.NO_GRADIENT
NOT_APPLIED = EventKind.NOT_APPLIED
ZERO_GRADIENT = EventKind.ZERO_GRADIENT
CUT_SEEN = EventKind.CUT_SEEN
CUT = EventKind.CUT
#: The events that are a sentence for the summary, as they were logged (a ``cut`` event with
#: no message names parameters no cut explains: no sentence).
NOTE_KINDS = (EventKind.NOT_RECORDED, LOCAL_BACKWARD, GRADS_LEFT, NO_GRADIENT, NOT_APPLIED,
              ZERO_GRADIENT, CUT)


def fails_strict(kind: EventKind) -> bool:
    """Whether an event of ``kind`` fails a run under ``--strict``: a missing gradient
    (``no_gradient``), an all-zero one (``zero_gradient``), one left in ``.grad``
    (``grads_left``, ``local_backward``) or one a local optimizer never applied
    (``not_applied``), or the cut that caused a missing gradient (``cut``, which comes with
    the ``no_gradient`` event that names the parameter). The one list ``distviz trace
    --strict`` and the pytest plugin read."""
    return kind in (NO_GRADIENT, ZERO_GRADIENT, GRADS_LEFT, LOCAL_BACKWARD, NOT_APPLIED, CUT)


class RealState(StrEnum):
    """What PyTorch's backward did, as a row says it: an ``outcome.RealOutcome`` word, or
    ``running`` while it runs (the value is ``index.json``'s word)."""

    COMPLETED = "completed"
    HANG = "hang"
    ERROR = "error"
    SKIPPED = "skipped"      # a predicted hang stopped it
    RUNNING = "running"


class VerdictStatus(StrEnum):
    """The verdict in a word (``distviz.judge.verdict.Verdict.status``), as a row carries it
    (the value is ``index.json``'s word)."""

    AGREES = "agrees"
    DIFFERS = "differs"
    NOT_COMPARED = "not compared"


@dataclass(slots=True)
class ContextRow:
    """What the summary and ``index.json`` say about one recorded context.

    ``outcome`` is the final verdict (``completed``, ``hang``, ``error``, or ``unfinished``
    when the process ended during the real backward); ``predicted`` the replay's outcome;
    ``real`` what PyTorch's backward did (``skipped`` when a predicted hang stopped it,
    ``running`` while it runs), both for the context's last recorded pass; ``agreement`` is ``agrees``, ``differs`` or ``not compared``, ``agreement_text``,
    ``exit_code`` and ``category`` the verdict's (``distviz.judge.verdict``), never decided
    here; ``shape`` counts
    nodes by ``worker/name`` (for the difference with the previous context of the initiator);
    ``test`` the pytest node id of the test that made the context (the pytest plugin);
    ``watched`` a context the watch recorded (``distviz.tracing.watch.watcher``), not in full.
    """

    file: str
    initiator: str
    index: int
    context_id: int
    pid: int
    workers: list[str]
    nodes: int
    messages: int
    outcome: ContextOutcome
    predicted: Outcome
    real: RealState
    agreement: VerdictStatus
    agreement_text: str = ""
    exit_code: ExitCode = ExitCode.OK     # the verdict's (``Verdict.exit_code``)
    category: Category = Category.NOT_COMPARED   # the verdict's, as pytest counts it
    violations: int = 0
    explanation: str | None = None
    time: str | None = None   # where a completed real backward spent its time: the critical path
    passes: int = 1           # backward passes recorded in the context (``outcome``: the last's)
    shape: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    test: str | None = None
    watched: bool = False     # recorded by the watch after its deadline or error, not in full

    def to_json(self) -> dict[str, Any]:
        """Every field, as ``dataclasses.asdict`` gives them (its deep copy of the few plain
        lists and dicts here is made directly: a row is written once or twice per context)."""
        out: dict[str, Any] = {}
        for name in _ROW_FIELDS:
            value = getattr(self, name)
            out[name] = value.copy() if isinstance(value, (list, dict)) else value
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> ContextRow:
        """The row of a JSON object; ``ValueError`` for a word no enum of the row has."""
        row = cls(**{k: obj[k] for k in obj if k in cls.__dataclass_fields__})
        row.real, row.agreement = RealState(row.real), VerdictStatus(row.agreement)
        row.category = Category(row.category)
        row.exit_code = ExitCode.of(row.exit_code)
        return row


_ROW_FIELDS = tuple(f.name for f in fields(ContextRow))


@dataclass(slots=True)
class Event:
    """One line of the event log: ``kind`` is ``context`` (with ``row``), ``stop`` (a hang
    stops the program), ``not_recorded`` (a backward distviz could not record),
    ``rpc_failed`` (``init_rpc`` raised), ``scripted_backward`` (a context the program left
    had run a backward from TorchScript, which distviz cannot record), ``tests`` (the program
    is a pytest run with distviz's plugin: its exit status is pytest's), ``backwards`` (with
    ``stats``: one process's backward calls, ``distviz.tracing.shared.backward_stats``),
    ``local_backward`` (a local backward inside a distributed context) or ``grads_left`` (a
    local backward inside a distributed one put parameters' gradients in ``.grad``; both
    ``distviz.tracing.hooks.local_backward``) or ``no_gradient`` (parameters of a
    ``DistributedOptimizer``, or of a local optimizer, that got no gradient in any backward of
    the run, ``distviz.tracing.hooks.optimizer`` and ``distviz.tracing.hooks.applied``),
    ``not_applied`` (a local ``torch.optim`` optimizer's step over parameters whose gradients a
    distributed backward left in the context), ``zero_gradient`` (parameters whose every
    context gradient was all zeros; both ``distviz.tracing.hooks.applied``), ``cut_seen``
    (with ``cut``: a cut of a parameter's path a process saw) or ``cut`` (with ``explained``:
    parameters without a gradient and the cut that caused it; both
    ``distviz.tracing.hooks.cut_watch``). ``test``: the
    pytest node id of the test running when it was logged."""

    kind: EventKind
    pid: int
    message: str = ""
    worker: str | None = None
    row: ContextRow | None = None
    test: str | None = None
    stats: dict[str, Any] | None = None    # ``backwards``: a process's ``BackwardStats``
    cut: Cut | None = None                 # ``cut_seen``
    explained: Explained | None = None     # ``cut``

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "pid": self.pid, "message": self.message,
                               "worker": self.worker}
        if self.row is not None:
            out["row"] = self.row.to_json()
        if self.stats is not None:
            out["stats"] = self.stats
        if self.test is not None:
            out["test"] = self.test
        if self.cut is not None:
            out["cut"] = self.cut.to_json()
        if self.explained is not None:
            out["explained"] = self.explained.to_json()
        return out

    @classmethod
    def from_json(cls, obj: dict[str, Any]) -> Event:
        row = obj.get("row")
        test = obj.get("test")
        cut, explained = obj.get("cut"), obj.get("explained")
        if isinstance(cut, dict) or isinstance(explained, dict):
            from distviz.cuts import Cut, Explained
        return cls(kind=EventKind(str(obj.get("kind"))), pid=int(obj.get("pid", 0)),
                   message=str(obj.get("message") or ""), worker=obj.get("worker"),
                   row=ContextRow.from_json(row) if isinstance(row, dict) else None,
                   test=str(test) if test is not None else None,
                   stats=obj["stats"] if isinstance(obj.get("stats"), dict) else None,
                   cut=Cut.from_json(cut) if isinstance(cut, dict) else None,
                   explained=(Explained.from_json(explained) if isinstance(explained, dict)
                              else None))


def scripted_notes(events: list[Event]) -> list[tuple[str | None, str]]:
    """``(test, "worker0: 2 backward calls from TorchScript, not recorded ...")``, one per
    worker and test that logged ``scripted_backward`` events, in the order they came."""
    counts: dict[tuple[str | None, str | None], int] = {}
    for ev in events:
        if ev.kind == SCRIPTED:
            counts[ev.test, ev.worker] = counts.get((ev.test, ev.worker), 0) + 1
    return [(test, f"{worker + ': ' if worker else ''}{plural(n, 'backward call')} from "
             "TorchScript, not recorded (a scripted dist_autograd.backward runs PyTorch's op "
             "directly; counted once per context)") for (test, worker), n in counts.items()]


def append(session_dir: str | None, event: Event) -> None:
    """Append one event to the session's log (no-op without a session); the event and its
    row are tagged with the test running now (``DISTVIZ_TEST``), if any."""
    if not session_dir:
        return
    test = current_test()
    if test is not None:
        event.test = event.test or test
        if event.row is not None and event.row.test is None:
            event.row.test = test
    data = (json.dumps(event.to_json(), separators=(",", ":")) + "\n").encode("utf-8")
    _LOG.write(os.path.join(session_dir, EVENTS), data)


class _Log:
    """The session log this process appends to, open (``O_APPEND``: every line lands whole and
    in order among the other processes'): a step's rows cost no ``open``. One at a time: a
    process that moves to another session (the pytest plugin's runs) closes the one before; a
    forked child starts with none (its copy of its parent's descriptor is left alone)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.path = ""
        self.fd = -1

    def write(self, path: str, data: bytes) -> None:
        with self.lock:
            if self.path != path:
                if self.fd >= 0:
                    os.close(self.fd)
                self.path, self.fd = "", -1     # a failed open below leaves none
                self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC,
                                  0o600)
                self.path = path
            os.write(self.fd, data)


_LOG = _Log()


def _new_log_in_child() -> None:
    """A forked child's own ``_Log``: a lock another thread held at the fork would never be
    released in it."""
    global _LOG
    _LOG = _Log()


os.register_at_fork(after_in_child=_new_log_in_child)


def read(session_dir: str) -> list[Event]:
    """Every event logged so far, in order; a torn last line (a killed writer) is skipped."""
    path = os.path.join(session_dir, EVENTS)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError:
        return []
    out: list[Event] = []
    for line in text.splitlines():
        try:
            out.append(Event.from_json(json.loads(line)))
        except (ValueError, TypeError):
            continue
    return out


_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def write_trace(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` as every output file is written (``files.write_atomic``): a
    regular file is replaced atomically, so a reader, or a process killed half-way, never sees
    half a trace; ``/dev/null``, a FIFO or ``-`` are written into, never replaced (a program's
    ``distviz.backward(..., path=os.devnull)`` once replaced the machine's ``/dev/null`` with a
    file). No ``fsync``: a traced program writes one or two traces per recorded context and must
    not wait for the disk each time; the kernel keeps what a killed process wrote."""
    write_atomic(path, text, sync=False)


def trace_stem(initiator: str, index: int, test: str | None = None) -> str:
    """The name of a context's trace file without ``.trace.json``: ``<initiator>.ctx<index>``,
    after the test's node id in a pytest run (``tests_test_x.py_test_y.worker0.ctx1``)."""
    stem = f"{_UNSAFE.sub('_', initiator) or 'worker'}.ctx{index}"
    if test:
        stem = f"{_UNSAFE.sub('_', test).strip('_.')[-_MAX_TEST_STEM:]}.{stem}"
    return stem


_MAX_TEST_STEM = 120


def claim(out_dir: str, session_dir: str | None, initiator: str, index: int) -> Path:
    """Return a trace path no other process will write: ``<out>/<initiator>.ctx<index>.trace.json``
    (after the test's node id in a pytest run, ``trace_stem``), or ``...-<n>`` when that name
    is taken.

    In a session the claim is a file in the session folder, so a run replaces the files an
    earlier run left in the same ``-o`` folder; without one (the Python API) the trace file
    itself is created exclusively, so nothing already there is replaced.
    """
    stem = trace_stem(initiator, index, current_test())
    folder = Path(out_dir)
    folder.mkdir(parents=True, exist_ok=True)
    claims = Path(session_dir) / "claims" if session_dir else folder
    claims.mkdir(parents=True, exist_ok=True)
    n = 0
    while True:
        name = f"{stem}.trace.json" if n == 0 else f"{stem}-{n}.trace.json"
        try:
            os.close(os.open(claims / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
        except FileExistsError:
            n += 1
            continue
        return folder / name
