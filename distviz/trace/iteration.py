"""Training in a trace: which contexts to record, what each iteration did, and how the run
compares with the single-process reference (pure: no torch).

A scenario in the training form opens one ``dist_autograd`` context per iteration. For each
recorded context the runner keeps an ``Iteration``: the trainer and its context number, the
loss, what ``get_gradients`` holds on each worker (by parameter name) and each optimizer step
with how far every parameter moved. The single-process reference runs the same training; its
per-iteration losses and updates and its final parameters are compared here, value by value,
with ``compare_values``. ``TrainingSummary`` is the run-level part: trainers, the order their
contexts started in, and the final parameters' comparison.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from distviz.trace.sections import RowStatus, row_status

__all__ = [
    "GradientEntry", "Iteration", "IterationCheck", "OptimizerStep",
    "Difference", "ParamUpdate", "TrainingSummary", "ValueCheck", "compare_values", "difference",
    "tolerance", "within_tolerance",
]


@dataclass(frozen=True)
class GradientEntry:
    """One tensor ``get_gradients`` returned on a worker, by name (summary only)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    norm: float
    total: float
    zero: bool

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> GradientEntry:
        return cls(name=str(obj["name"]), shape=tuple(int(s) for s in obj.get("shape", [])),
                   dtype=str(obj.get("dtype", "")), norm=float(obj.get("norm", 0.0)),
                   total=float(obj.get("sum", 0.0)), zero=bool(obj.get("zero", False)))

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype,
                "norm": self.norm, "sum": self.total, "zero": self.zero}


@dataclass(frozen=True)
class ParamUpdate:
    """How far one parameter moved in one optimizer step (the norm of the change)."""

    worker: str
    name: str
    norm: float

    def to_json(self) -> dict[str, Any]:
        return {"worker": self.worker, "name": self.name, "norm": self.norm}


@dataclass(frozen=True)
class OptimizerStep:
    """One ``DistributedOptimizer.step(context_id)``: the optimizer class and the updates."""

    optimizer: str
    updates: tuple[ParamUpdate, ...]

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> OptimizerStep:
        return cls(optimizer=str(obj.get("optimizer", "")), updates=tuple(
            ParamUpdate(worker=str(u["worker"]), name=str(u["name"]), norm=float(u["norm"]))
            for u in obj.get("updates", [])))

    def to_json(self) -> dict[str, Any]:
        return {"optimizer": self.optimizer, "updates": [u.to_json() for u in self.updates]}


@dataclass(frozen=True)
class ValueCheck:
    """One value compared with the reference: ``status`` is ``match``, ``mismatch``,
    ``missing`` (not in the distributed run), ``extra`` (not in the reference) or
    ``not_compared`` (with ``reason``)."""

    name: str
    worker: str
    status: RowStatus
    max_abs_diff: float | None = None
    tolerance: float | None = None
    reason: str | None = None

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ValueCheck:
        return cls(name=str(obj["name"]), worker=str(obj.get("worker", "")),
                   status=row_status(obj["status"]), max_abs_diff=obj.get("max_abs_diff"),
                   tolerance=obj.get("tolerance"), reason=obj.get("reason"))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "worker": self.worker, "status": self.status}
        for key in ("max_abs_diff", "tolerance", "reason"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        return out


@dataclass(frozen=True)
class IterationCheck:
    """An iteration against the reference: its loss and its parameter updates."""

    comparable: bool
    reason: str | None = None
    loss: tuple[float, ...] = ()
    loss_match: bool | None = None
    updates: tuple[ValueCheck, ...] = ()

    @property
    def ok(self) -> bool | None:
        if not self.comparable:
            return None
        return bool(self.loss_match is not False
                    and all(u.status in (RowStatus.MATCH, RowStatus.NOT_COMPARED)
                            for u in self.updates))

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> IterationCheck:
        return cls(comparable=bool(obj.get("comparable")), reason=obj.get("reason"),
                   loss=tuple(float(x) for x in obj.get("loss", [])),
                   loss_match=obj.get("loss_match"),
                   updates=tuple(ValueCheck.from_json(u) for u in obj.get("updates", [])))

    def to_json(self) -> dict[str, Any]:
        return {"comparable": self.comparable, "reason": self.reason, "loss": list(self.loss),
                "loss_match": self.loss_match, "updates": [u.to_json() for u in self.updates]}


@dataclass(frozen=True)
class Iteration:
    """What one recorded context did (see the module docstring). ``enter_us``/``exit_us`` are
    microseconds since the run's first recorded context opened."""

    trainer: str
    index: int
    context_id: int
    loss: tuple[float, ...] = ()
    gradients: dict[str, tuple[GradientEntry, ...]] = field(default_factory=dict)
    steps: tuple[OptimizerStep, ...] = ()
    enter_us: float = 0.0
    exit_us: float = 0.0
    reference: IterationCheck | None = None

    @property
    def label(self) -> str:
        """``trainer 3`` (the trainer and its context number)."""
        return f"{self.trainer} {self.index}"

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Iteration:
        grads = {str(w): tuple(GradientEntry.from_json(e) for e in entries)
                 for w, entries in (obj.get("gradients") or {}).items()}
        ref = obj.get("reference")
        return cls(trainer=str(obj["trainer"]), index=int(obj["index"]),
                   context_id=int(obj.get("context_id", 0)),
                   loss=tuple(float(x) for x in obj.get("loss", [])), gradients=grads,
                   steps=tuple(OptimizerStep.from_json(s) for s in obj.get("steps", [])),
                   enter_us=float(obj.get("enter_us", 0.0)),
                   exit_us=float(obj.get("exit_us", 0.0)),
                   reference=IterationCheck.from_json(ref) if ref else None)

    def to_json(self) -> dict[str, Any]:
        return {"trainer": self.trainer, "index": self.index, "context_id": self.context_id,
                "loss": list(self.loss),
                "gradients": {w: [e.to_json() for e in es] for w, es in self.gradients.items()},
                "steps": [s.to_json() for s in self.steps], "enter_us": self.enter_us,
                "exit_us": self.exit_us,
                "reference": self.reference.to_json() if self.reference else None}


@dataclass(frozen=True)
class TrainingSummary:
    """The run-level part of a training recording.

    ``schedule`` lists ``(trainer, context number)`` in the order the contexts opened;
    ``overlapped`` says whether contexts of different trainers were open at the same time;
    ``shared_updates`` lists the parameters one trainer's steps updated while another's
    contexts used them. The reference runs the contexts one at a time, in that order, so with
    shared updates the values depend on the interleaving and are not compared. ``final``
    compares each parameter after training.
    """

    trainers: tuple[str, ...]
    schedule: tuple[tuple[str, int], ...] = ()
    overlapped: bool = False
    shared_updates: tuple[str, ...] = ()
    contexts_total: int = 0
    reference_outcome: str | None = None
    reference_error: str | None = None
    final: tuple[ValueCheck, ...] = ()

    @property
    def ok(self) -> bool | None:
        """Whether every final parameter equals the reference (``None``: not compared)."""
        compared = [c for c in self.final if c.status != RowStatus.NOT_COMPARED]
        if self.reference_outcome != "completed" or not compared:
            return None
        return all(c.status == RowStatus.MATCH for c in compared)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> TrainingSummary:
        return cls(trainers=tuple(str(t) for t in obj.get("trainers", [])),
                   schedule=tuple((str(t), int(i)) for t, i in obj.get("schedule", [])),
                   overlapped=bool(obj.get("overlapped")),
                   shared_updates=tuple(str(n) for n in obj.get("shared_updates", [])),
                   contexts_total=int(obj.get("contexts_total", 0)),
                   reference_outcome=obj.get("reference_outcome"),
                   reference_error=obj.get("reference_error"),
                   final=tuple(ValueCheck.from_json(c) for c in obj.get("final", [])))

    def to_json(self) -> dict[str, Any]:
        return {"trainers": list(self.trainers), "schedule": [list(s) for s in self.schedule],
                "overlapped": self.overlapped, "shared_updates": list(self.shared_updates),
                "contexts_total": self.contexts_total,
                "reference_outcome": self.reference_outcome,
                "reference_error": self.reference_error,
                "final": [c.to_json() for c in self.final]}


# -- the one tolerance rule: a distributed value against the reference's ----------------------

class Difference(NamedTuple):
    """How two tensors differ, value by value: the largest ``|a - b|`` where neither is NaN
    (equal infinities differ by 0), the reference's scale (its largest finite ``|b|``), and
    whether a NaN stands where the other side has none (``nan_apart``)."""

    max_abs_diff: float
    scale: float
    nan_apart: bool


def tolerance(scale: float, dtype: str) -> float:
    """The allowed difference: the two runs add the same terms in different orders, so it is
    relative to the reference's scale (``1e-6 + rtol * scale``, ``rtol`` 1e-4 for float32,
    1e-9 for float64)."""
    rtol = 1e-9 if dtype == "float64" else 1e-4
    return 1e-6 + rtol * scale


def within_tolerance(d: Difference, dtype: str, scale: float | None = None
                     ) -> tuple[bool, float]:
    """``(equal, tolerance)``: the one rule for a value against the reference, for gradients
    (``runner/gradients.py``, ``runner/collate.py``), losses, updates and final parameters.
    A NaN where the reference has one agrees (the same computation gave it); a NaN on one side
    only differs; otherwise the largest difference is within ``tolerance`` of the reference's
    scale (``scale`` given: that one)."""
    tol = tolerance(d.scale if scale is None else scale, dtype)
    return (not d.nan_apart and d.max_abs_diff <= tol), tol


def difference(got: Sequence[float], want: Sequence[float]) -> Difference:
    """The ``Difference`` of two flattened tensors of the same length (``runner/gradients.py``
    computes the same three numbers on tensors)."""
    diff = 0.0
    nan_apart = False
    for a, b in zip(got, want, strict=True):
        a_nan, b_nan = math.isnan(a), math.isnan(b)
        if a_nan or b_nan:
            nan_apart = nan_apart or a_nan != b_nan
        elif a != b:
            diff = max(diff, abs(a - b))
    scale = max((abs(b) for b in want if math.isfinite(b)), default=0.0)
    return Difference(diff, scale, nan_apart)


def compare_values(name: str, worker: str, got: Sequence[float] | None,
                   want: Sequence[float] | None, dtype: str,
                   scale: float | None = None) -> ValueCheck:
    """Compare two flattened tensors value by value (``within_tolerance``); a side without
    values (too large to send) is ``not_compared``."""
    if got is None or want is None:
        return ValueCheck(name, worker, RowStatus.NOT_COMPARED,
                          reason="values too large to compare")
    if len(got) != len(want):
        return ValueCheck(name, worker, RowStatus.MISMATCH,
                          reason=f"{len(got)} values vs {len(want)}")
    d = difference(got, want)
    ok, tol = within_tolerance(d, dtype, scale)
    return ValueCheck(name, worker, RowStatus.MATCH if ok else RowStatus.MISMATCH,
                      max_abs_diff=d.max_abs_diff, tolerance=tol)
