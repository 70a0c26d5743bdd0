"""The trace's sections as values: ``real``, ``reference``, ``scenario`` and ``meta`` (pure).

On disk each section is a JSON object (``docs/trace-format.md``), and stays exactly that:
``from_json`` checks the type of every key distviz reads (a malformed section is a
``TraceError`` naming the key, never a silent default), keeps every other key as it came
(``extra``: keys written by newer or older versions, and free-form ones), and ``to_json`` writes
the same object back, keys in the order they came. A key set in code after loading is written
after them; one never set (its default) is not written, so a section round-trips unchanged.

The big lists inside ``real`` (``events``: one object per node execution) stay JSON objects:
they are read a few times per trace and a 100,000-node trace must load fast.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, MutableMapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, Final, NamedTuple, TypeVar

from distviz.errors import TraceError
from distviz.outcome import RealOutcome

__all__ = ["ROW_OK", "Meta", "Real", "RealEvent", "Reference", "ReferenceRow", "RowStatus",
           "ScenarioInfo", "Section", "SectionT", "row_status"]

S = TypeVar("S", bound="Section")
SectionT = TypeVar("SectionT", bound="Section")

#: the JSON types each annotation accepts (``None`` is always accepted for an optional key)
_TYPES: dict[str, tuple[type, ...]] = {
    "str": (str,), "int": (int,), "float": (int, float), "bool": (bool,),
    "list": (list,), "dict": (dict,), "Any": (object,), "RealOutcome": (str,)}
_NAMES = {"str": "a string", "RealOutcome": "a string", "int": "an integer", "float": "a number", "bool": "true or false",
          "list": "a list", "dict": "an object", "Any": "a value"}


def _base(annotation: str) -> tuple[str, bool]:
    """``("int", True)`` for ``int | None``; ``("list", False)`` for ``list[dict[str, Any]]``."""
    parts = [p.strip() for p in annotation.split("|")]
    optional = "None" in parts
    head = next(p for p in parts if p != "None").split("[", 1)[0]
    return head, optional


@dataclass(eq=False)
class Section(MutableMapping[str, Any]):
    """A JSON object with typed keys; see the module docstring."""

    extra: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    order: tuple[str, ...] = field(default=(), repr=False, compare=False)

    KIND: ClassVar[str] = "section"

    @classmethod
    def _keys(cls) -> list[dataclasses.Field[Any]]:
        return [f for f in dataclasses.fields(cls) if f.name not in ("extra", "order")]

    @classmethod
    def from_json(cls: type[S], obj: dict[str, Any], source: str | None = None) -> S:
        """The section in ``obj``. Raises ``TraceError`` (naming ``source`` and the key) when a
        key distviz reads has another JSON type."""
        values: dict[str, Any] = {}
        known = {f.name: f for f in cls._keys()}
        for name, f in known.items():
            if name not in obj:
                continue
            value = obj[name]
            head, optional = _base(str(f.type))
            if value is None and optional:
                values[name] = None
                continue
            wanted = _TYPES.get(head, (object,))
            if not isinstance(value, wanted) or (head in ("int", "float")
                                                  and isinstance(value, bool)):
                raise TraceError(f"expected {_NAMES.get(head, head)}"
                                 f"{' or null' if optional else ''}, found "
                                 f"{type(value).__name__}", path=source,
                                 key=f"{cls.KIND}.{name}")
            values[name] = value
        extra = {k: v for k, v in obj.items() if k not in known}
        section = cls(**values, extra=extra, order=tuple(obj))
        section.check(source)
        return section

    def check(self, source: str | None) -> None:
        """Raise ``TraceError`` for what the key types alone do not say (none here)."""

    def to_json(self) -> dict[str, Any]:
        """The JSON object: the keys it was read with, in their order, then any set since."""
        known = {f.name: f for f in self._keys()}
        out: dict[str, Any] = {}
        for k in self.order:
            if k in known:
                out[k] = getattr(self, k)
            elif k in self.extra:
                out[k] = self.extra[k]
        for name, f in known.items():
            if name in out:
                continue
            value = getattr(self, name)
            default = f.default_factory() if f.default_factory is not dataclasses.MISSING \
                else f.default
            if value != default:
                out[name] = value
        for k, v in self.extra.items():
            out.setdefault(k, v)
        return out

    # -- the JSON object's reads and writes (``MutableMapping``), for code written against the
    # -- plain object; distviz's own code reads the fields
    def __getitem__(self, key: str) -> Any:
        return self.to_json()[key]

    def __setitem__(self, key: str, value: Any) -> None:
        if any(f.name == key for f in self._keys()):
            setattr(self, key, value)
        else:
            self.extra[key] = value
        if key not in self.order:
            self.order = (*self.order, key)

    def __delitem__(self, key: str) -> None:
        if key not in self.to_json():
            raise KeyError(key)
        f = next((f for f in self._keys() if f.name == key), None)
        if f is not None:
            setattr(self, key, f.default_factory() if f.default_factory is not dataclasses.MISSING
                    else f.default)
        self.extra.pop(key, None)
        self.order = tuple(k for k in self.order if k != key)

    def __iter__(self) -> Iterator[str]:
        return iter(self.to_json())

    def __len__(self) -> int:
        return len(self.to_json())


_EVENT_KEYS: tuple[tuple[str, type, str], ...] = (
    ("node", str, "a string"), ("worker", str, "a string"), ("pass", int, "an integer"))


@dataclass(slots=True)
class RealEvent:
    """One node execution PyTorch's real backward ran (``real.events[i]``, read as a value):
    the pass it ran in (``pass`` in the JSON), the worker, the node's id, its start and
    duration in microseconds (``None``: not measured), the thread and the gradients' shapes.
    The runner makes them (``runner/observe_real.py``); the trace keeps their JSON objects."""

    pass_index: int
    worker: str
    node: str
    t_us: float | None = None
    dur_us: float | None = None
    thread: str | None = None
    grad_shapes: list[Any] = field(default_factory=list)

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> RealEvent:
        return cls(pass_index=int(obj.get("pass", 0)), worker=str(obj.get("worker")),
                   node=str(obj.get("node")), t_us=obj.get("t_us"), dur_us=obj.get("dur_us"),
                   thread=obj.get("thread"), grad_shapes=list(obj.get("grad_shapes") or []))

    def to_json(self) -> dict[str, Any]:
        return {"pass": self.pass_index, "worker": self.worker, "node": self.node,
                "t_us": self.t_us, "dur_us": self.dur_us, "thread": self.thread,
                "grad_shapes": self.grad_shapes}


@dataclass
class Real(Section):
    """What PyTorch's real distributed backward did (``docs/trace-format.md``, real).

    ``outcome`` is ``completed``, ``hang``, ``error`` or ``skipped``; ``after_hang`` what PyTorch
    raised once a hang had been observed (its RPC time-out), absent otherwise; ``events`` one
    JSON object per node execution; ``gradients`` ``get_gradients`` by leaf node id.
    """

    outcome: RealOutcome = "skipped"
    error: str | None = None
    reason: str | None = None
    after_hang: str | None = None
    passes_run: int | None = None
    pass_seconds: list[float] | None = None
    pass_start_us: list[float] | None = None
    interop_threads: int | None = None
    durations: str | None = None
    events: list[dict[str, Any]] = field(default_factory=list)
    gradients: dict[str, dict[str, Any]] = field(default_factory=dict)
    unreachable: list[dict[str, str]] = field(default_factory=list)
    deaths: list[dict[str, Any]] = field(default_factory=list)
    hang_timeout_s: float | None = None
    clock: dict[str, Any] | None = None
    injected: dict[str, Any] | None = None

    KIND: ClassVar[str] = "real"

    @classmethod
    def skipped(cls, reason: str | None) -> Real:
        """The section of a real backward that was not run, and why (``reason``): the one
        place it is made, for ``run``, a training run and ``distviz trace``."""
        return cls.from_json({"outcome": "skipped", "error": None, "reason": reason,
                              "events": [], "gradients": {}})

    def observed(self) -> list[RealEvent]:
        """The events as values (``events`` keeps the JSON objects as written), those naming a
        node (``check`` made sure each is an object)."""
        return [RealEvent.from_json(ev) for ev in self.events if "node" in ev]

    def check(self, source: str | None) -> None:
        """Each event is an object with a string ``node`` and ``worker`` and an integer
        ``pass``, as the comparison and the timing analysis read them."""
        for i, ev in enumerate(self.events):
            if not isinstance(ev, dict):
                raise TraceError(f"expected an object, found {type(ev).__name__}", path=source,
                                 key=f"real.events[{i}]")
            for key, typ, what in _EVENT_KEYS:
                value = ev.get(key)
                if value is not None and (not isinstance(value, typ) or (
                        typ is int and isinstance(value, bool))):
                    raise TraceError(f"expected {what}, found {type(value).__name__}",
                                     path=source, key=f"real.events[{i}].{key}")


class RowStatus(StrEnum):
    """How one value compares with the reference (its value is the trace's JSON word): a
    reference row's (``ReferenceRow.status``) and a training's parameter's
    (``distviz.trace.iteration.ValueCheck.status``, which never has ``zero_unused`` or
    ``no_gradient``)."""

    MATCH = "match"
    MISMATCH = "mismatch"
    ZERO_UNUSED = "zero_unused"     # zeros where the reference has none: an unused RPC output
    NO_GRADIENT = "no_gradient"     # no gradient on either side
    MISSING = "missing"             # not in the distributed run
    EXTRA = "extra"                 # not in the reference
    NOT_COMPARED = "not_compared"   # values too large to send, or no reference


_STATUS_OF_WORD: Final[dict[str, RowStatus]] = {s.value: s for s in RowStatus}


def row_status(word: object) -> RowStatus:
    """The ``RowStatus`` of a JSON word; ``ValueError`` naming the word and the ones expected
    for any other (the loaders turn it into a ``TraceError`` naming the file and the key)."""
    status = _STATUS_OF_WORD.get(word) if isinstance(word, str) else None
    if status is None:
        raise ValueError(f"unknown status {word!r} (expected one of {', '.join(RowStatus)})")
    return status


#: a reference row's statuses that are no difference: equal, zeros from an unused RPC output
#: (as FAST mode gives), no gradient on either side, not compared (values too large to send)
ROW_OK: Final = (RowStatus.MATCH, RowStatus.ZERO_UNUSED, RowStatus.NO_GRADIENT,
                 RowStatus.NOT_COMPARED)


class ReferenceRow(NamedTuple):
    """One leaf of the reference comparison (``reference.comparison[i]``, read as a value):
    ``status`` is ``match``, ``mismatch``, ``zero_unused``, ``no_gradient``, ``missing``,
    ``extra`` or ``not_compared``; ``ok`` says whether it is no difference (``ROW_OK``), for
    every reader and both writers (``runner/gradients.py``, ``runner/collate.py``)."""

    var: str
    leaf: str
    worker: str
    status: RowStatus
    max_abs_diff: float | None = None
    tolerance: float | None = None

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> ReferenceRow:
        return cls(var=str(obj.get("var")), leaf=str(obj.get("leaf")),
                   worker=str(obj.get("worker")), status=row_status(obj.get("status")),
                   max_abs_diff=obj.get("max_abs_diff"), tolerance=obj.get("tolerance"))

    @property
    def ok(self) -> bool:
        return self.status in ROW_OK


@dataclass
class Reference(Section):
    """The single-process reference gradients and the comparison with the distributed ones
    (``docs/trace-format.md``, reference): ``comparison`` has one row per leaf (``var``,
    ``leaf``, ``worker``, ``status``, ...)."""

    outcome: str | None = None
    error: str | None = None
    comparable: bool | None = None
    ok: bool | None = None
    comparison: list[dict[str, Any]] = field(default_factory=list)
    gradients: dict[str, dict[str, Any]] = field(default_factory=dict)

    KIND: ClassVar[str] = "reference"

    def check(self, source: str | None) -> None:
        """Each comparison row is an object whose ``status`` is a ``RowStatus`` word."""
        for i, row in enumerate(self.comparison):
            if not isinstance(row, dict):
                raise TraceError(f"expected an object, found {type(row).__name__}", path=source,
                                 key=f"reference.comparison[{i}]")
            try:
                row_status(row.get("status"))
            except ValueError as exc:
                raise TraceError(str(exc), path=source,
                                 key=f"reference.comparison[{i}].status") from None

    @property
    def rows(self) -> list[ReferenceRow]:
        """The comparison as values (``comparison`` keeps the JSON objects as written)."""
        return [ReferenceRow.from_json(r) for r in self.comparison if isinstance(r, dict)]

    def row(self, leaf: str) -> ReferenceRow | None:
        """The comparison row of the leaf node ``leaf``, if any."""
        return next((r for r in self.rows if r.leaf == leaf), None)


@dataclass
class ScenarioInfo(Section):
    """The scenario that made the trace: ``name``, ``description``, ``path`` (as given on the
    command line), ``params`` (after ``--set``) and ``seed``."""

    name: str | None = None
    description: str | None = None
    path: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    seed: int | None = None

    KIND: ClassVar[str] = "scenario"


@dataclass
class Meta(Section):
    """Run information: ``distviz_version``, ``python``, ``timings_s`` and ``mode`` from
    ``distviz run``; ``traced`` and ``functions`` for traces of the user's own program
    (``distviz trace``). Other keys are free-form and kept."""

    distviz_version: str | None = None
    python: str | None = None
    timings_s: dict[str, float] | None = None
    mode: str | None = None
    traced: dict[str, Any] | None = None
    functions: dict[str, str] | None = None

    KIND: ClassVar[str] = "meta"
