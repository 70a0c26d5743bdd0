"""The parent <-> worker protocol: what a worker is started with and the messages on its pipe.

Pure (no torch): the parent imports it. A worker process is started with a ``WorkerSpec``,
which carries the validated ``Scenario`` value itself (multiprocessing pickles process
arguments), so a worker never re-reads or re-checks the scenario file. After that, parent
and worker talk only through JSON messages on a pipe (never pickle): one frozen dataclass per
message type, tagged with its ``kind``.

Worker -> parent: ``Ready`` (RPC is up), ``ForwardDone``, ``TraceRecorded`` (the trace),
``Result`` (the real backward and the reference), ``Exited`` (clean end), ``WorkerFailed``.
Parent -> initiator: ``Backward`` (whether to run the real backward).

The training form (no ``backward:`` key) has its own: each trainer sends ``ContextDone`` for
every recorded context as it closes and ``TrainerDone`` when its main returns; the parent then
sends ``Finish`` to every worker, which answers ``FinalState`` (its parameters) before it shuts
RPC down. The reference then runs in a process of its own (``ReferenceSpec`` in,
``ReferenceDone`` out).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from distviz import limits
from distviz.scenario import Scenario

__all__ = [
    "Backward", "ContextDone", "Exited", "FinalState", "Finish", "ForwardDone", "PipeMessage",
    "Ready", "TraceRecorded", "ReferenceDone", "ReferenceSpec", "Result", "TrainerDone", "WorkerFailed",
    "WorkerOptions", "WorkerSpec", "recv", "send",
]


@dataclass(frozen=True)
class WorkerOptions:
    """The run options every worker needs (times in seconds)."""

    hang_timeout: float = limits.HANG_TIMEOUT
    rpc_timeout: float = limits.RPC_TIMEOUT
    rpc_threads: int = limits.RPC_THREADS
    max_numel: int = limits.DEFAULT_MAX_NUMEL
    max_steps: int = limits.DEFAULT_MAX_STEPS
    max_rpc_depth: int = limits.DEFAULT_MAX_RPC_DEPTH
    max_memory: int = limits.DEFAULT_MAX_MEMORY
    reference: bool = True
    observe: bool = True
    # slow the real backward down on purpose (``--inject-delay``): {"recv_s": seconds,
    # "slow": {worker: factor}}; see ``distviz.recorder.hooks.install_hooks``
    inject: dict[str, Any] = field(default_factory=dict)
    confirm_hang: bool = False
    contexts: str = "all"


@dataclass(frozen=True)
class WorkerSpec:
    """What one worker process is started with."""

    rank: int
    workers: list[str]
    scenario: Scenario
    init_method: str
    interop_threads: int
    options: WorkerOptions = field(default_factory=WorkerOptions)

    @property
    def worker(self) -> str:
        """This worker's name."""
        return self.workers[self.rank]


@dataclass(frozen=True)
class ReferenceSpec:
    """What the reference process of a training run is started with: the scenario, the
    options, and the order the real run's trainers went in: ``(trainer, number)`` of each
    trainer's contexts, calls and optimizer steps (``collate.interleaving``)."""

    scenario: Scenario
    options: WorkerOptions
    schedule: list[tuple[str, int]]


@dataclass(frozen=True)
class PipeMessage:
    """Base of every message; ``kind`` names the type on the wire."""

    kind: ClassVar[str] = ""


@dataclass(frozen=True)
class Ready(PipeMessage):
    """The worker ran its ``init`` and joined RPC."""

    kind: ClassVar[str] = "ready"
    rank: int
    worker: str


@dataclass(frozen=True)
class Exited(PipeMessage):
    """The worker shut RPC down and is about to exit cleanly."""

    kind: ClassVar[str] = "exited"
    rank: int


@dataclass(frozen=True)
class WorkerFailed(PipeMessage):
    """Something raised in the worker; it exits right after (``limits.WorkerStatus.REPORTED_ERROR``).

    ``error`` is the exception type (``RootError`` and ``SandboxError`` are the scenario's
    fault), ``worker`` the worker where it was raised (the innermost of a chain of RPCs),
    ``phase`` what the worker was doing, ``line`` the scenario line when known.
    """

    kind: ClassVar[str] = "error"
    rank: int
    worker: str
    phase: str
    error: str
    message: str
    line: int | None = None
    detail: str = ""


@dataclass(frozen=True)
class ForwardDone(PipeMessage):
    """``main`` returned on the initiator after ``seconds``."""

    kind: ClassVar[str] = "forward_done"
    seconds: float


@dataclass(frozen=True)
class TraceRecorded(PipeMessage):
    """The recorded graph (``Trace.to_json()``); the initiator now waits for ``Backward``."""

    kind: ClassVar[str] = "recorded"
    trace: dict[str, Any]


@dataclass(frozen=True)
class Backward(PipeMessage):
    """Parent -> initiator: run the real backward (``run``) or skip it."""

    kind: ClassVar[str] = "backward"
    run: bool


@dataclass(frozen=True)
class Result(PipeMessage):
    """The trace's ``real`` and ``reference`` sections; ``graceful``: every worker still
    answers, so a clean RPC shutdown is possible."""

    kind: ClassVar[str] = "result"
    real: dict[str, Any] | None
    reference: dict[str, Any] | None
    graceful: bool


@dataclass(frozen=True)
class ContextDone(PipeMessage):
    """A recorded context closed on a trainer: ``trace`` (``Trace.to_json()`` with its
    ``real`` section), ``info`` (the iteration: loss, gradients per worker, optimizer steps,
    times) and ``values`` (gradient values by leaf id, for the reference; not saved)."""

    kind: ClassVar[str] = "context"
    worker: str
    index: int
    trace: dict[str, Any]
    info: dict[str, Any]
    values: dict[str, Any]


@dataclass(frozen=True)
class TrainerDone(PipeMessage):
    """A trainer's main ended: ``windows`` are ``[context number, enter ns, exit ns]``;
    ``error`` is set when it ended by an exception (``stop``: distviz stopped it, and why: a
    ``StopKind`` value, never read from ``error``'s words); ``points`` are the main's contexts, calls
    and optimizer steps as ``[kind, start ns, end ns]`` (``TrainingSession.point``)."""

    kind: ClassVar[str] = "trainer_done"
    worker: str
    contexts: int
    windows: list[list[int]]
    error: str | None = None
    stop: str | None = None
    points: list[list[Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Finish(PipeMessage):
    """Parent -> worker (training form): every trainer is done; report and shut down."""

    kind: ClassVar[str] = "finish"


@dataclass(frozen=True)
class FinalState(PipeMessage):
    """A worker's parameters after training, by name (summaries, and values when small), and
    the calls it served for the trainers that changed its state (``served``: ``[trainer,
    function, start ns, end ns]``, ``distviz.runner.sandbox.served``)."""

    kind: ClassVar[str] = "final_state"
    worker: str
    params: dict[str, Any]
    served: list[list[Any]] = field(default_factory=list)


@dataclass(frozen=True)
class ReferenceDone(PipeMessage):
    """The single-process reference of a training run (``distviz.runner.reference.local_training``)."""

    kind: ClassVar[str] = "reference_done"
    result: dict[str, Any]


_TYPES: dict[str, type[PipeMessage]] = {
    cls.kind: cls for cls in (Ready, Exited, WorkerFailed, ForwardDone, TraceRecorded, Backward,
                              Result, ContextDone, TrainerDone, Finish, FinalState,
                              ReferenceDone)}


def encode(msg: PipeMessage) -> bytes:
    """The JSON bytes of ``msg`` (its fields plus ``"type"``)."""
    body = {f.name: getattr(msg, f.name) for f in fields(msg)}
    body["type"] = msg.kind
    return json.dumps(body, separators=(",", ":")).encode("utf-8")


def decode(data: bytes) -> PipeMessage:
    """The message in ``data``; raises ``ValueError`` for an unknown type or bad fields."""
    body = dict(json.loads(data.decode("utf-8")))
    cls = _TYPES.get(str(body.pop("type", "")))
    if cls is None:
        raise ValueError(f"unknown message {data[:80]!r}")
    return cls(**body)


def send(conn: Any, msg: PipeMessage) -> None:
    """Send one message on a ``multiprocessing`` connection."""
    conn.send_bytes(encode(msg))


def recv(conn: Any) -> PipeMessage:
    """Receive one message; raises ``EOFError``/``OSError`` when the other side is gone."""
    return decode(conn.recv_bytes())
