"""A recording of several contexts (trace ``schema_version`` 2) and the reader of both versions.

A training scenario opens one context per iteration, on one or several trainers; each
recorded context is one ``Trace`` (the graph, its passes, the real backward, the reference
gradients) plus its ``Iteration`` (loss, gradients per worker, optimizer steps). A
``Recording`` holds them with what they share (scenario, workers, torch version) and the
run-level ``TrainingSummary``. ``load_recording`` reads version 2 files and version 1 files
(one context, no training); ``Recording.save`` writes version 2, one node per line as in
version 1. ``docs/trace-format.md`` documents both.
"""

from __future__ import annotations

import gc
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distviz.errors import TraceError
from distviz.files import write_atomic
from distviz.outcome import Mode
from distviz.trace import (
    SCHEMA_VERSION,
    Trace,
    parse_json,
    parse_trace,
    read_trace_text,
)
from distviz.trace.iteration import Iteration, TrainingSummary
from distviz.trace.sections import Meta, ScenarioInfo, SectionT
from distviz.words import context_label

if TYPE_CHECKING:  # pragma: no cover
    import networkx as nx

__all__ = ["RECORDING_VERSION", "Recording", "load_recording", "loads_recording"]

#: The schema version of a recording of several contexts.
RECORDING_VERSION = 2

#: Keys a version 2 file keeps once at the top; every context shares them.
_SHARED = ("scenario", "torch_version", "interop_threads", "workers", "meta")


@dataclass
class Recording:
    """Several recorded contexts of one run, in the order they were recorded.

    ``contexts[i]`` is a complete ``Trace`` (the replay and the pictures take it as it is) and
    ``iterations[i]`` what that context did in training (``None`` for a version 1 file).
    """

    contexts: list[Trace]
    iterations: list[Iteration | None]
    workers: list[str]
    scenario: ScenarioInfo | None = None
    torch_version: str | None = None
    interop_threads: int | None = 1
    meta: Meta = field(default_factory=Meta)
    training: TrainingSummary | None = None
    version: int = RECORDING_VERSION

    @classmethod
    def single(cls, trace: Trace) -> Recording:
        """A recording of one context (what a version 1 file holds)."""
        return cls(contexts=[trace], iterations=[None], workers=list(trace.workers),
                   scenario=trace.scenario, torch_version=trace.torch_version,
                   interop_threads=trace.interop_threads, meta=trace.meta, version=SCHEMA_VERSION)

    @property
    def single_trace(self) -> Trace | None:
        """The one trace of a recording of one context without training (a plain scenario's
        run, a version 1 file), shown and reported as a trace; ``None`` for any other."""
        if len(self.contexts) == 1 and self.training is None:
            return self.contexts[0]
        return None

    def __repr__(self) -> str:
        """A line, not every context's graph."""
        return f"<Recording: {len(self.contexts)} contexts on {len(self.workers)} workers>"

    def pick(self, number: int | None) -> Trace:
        """The context numbered ``number`` (from 1, in recording order); ``None``: the first.

        Raises ``TraceError`` naming the range when there is no such context."""
        if not self.contexts:
            raise TraceError("the recording holds no context")
        index = 1 if number is None else number
        if not 1 <= index <= len(self.contexts):
            held = (f"contexts 1 to {len(self.contexts)}" if len(self.contexts) > 1
                    else "only context 1")
            raise TraceError(f"the recording holds {held}", key=f"--context {index}")
        return self.contexts[index - 1]

    def __post_init__(self) -> None:
        if len(self.contexts) > 1 or any(it is not None for it in self.iterations):
            for i, trace in enumerate(self.contexts):   # the numbers --context N counts
                trace.number = i + 1

    def label(self, index: int) -> str:
        """``context 3 (trainer 3, id 562949953421314)``: a context's number, its trainer's
        context number and PyTorch's context id (``distviz.words.context_label``)."""
        it = self.iterations[index] if index < len(self.iterations) else None
        trace = self.contexts[index] if index < len(self.contexts) else None
        return context_label(index + 1, trace.context_id if trace is not None else None,
                             f"{it.trainer} {it.index}" if it is not None else None)

    # -- as a networkx graph, and in Jupyter ----------------------------------------------------
    def to_networkx(self, context: int | None = None, pass_index: int | None = None,
                    mode: Mode = Mode.FAST) -> nx.DiGraph:
        """``Trace.to_networkx`` of the context numbered ``context`` (from 1; default the
        first). Raises ``TraceError`` when there is no such context."""
        return self.pick(context).to_networkx(pass_index, mode)

    def _repr_html_(self) -> str:
        """Jupyter's display: a table of the contexts and the step viewer of the first."""
        from distviz.trace import lent_views
        return lent_views().recording_html(self)

    def _repr_svg_(self) -> str | None:
        """Jupyter's display without JavaScript: the first context's picture."""
        return self.pick(None)._repr_svg_()

    # -- JSON ---------------------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        """The version 2 object (contexts without the shared keys)."""
        contexts = []
        for trace, it in zip(self.contexts, self.iterations, strict=True):
            obj = trace.to_json()
            for key in ("schema_version", "format", *_SHARED):
                obj.pop(key, None)
            obj["iteration"] = it.to_json() if it is not None else None
            contexts.append(obj)
        return {"schema_version": RECORDING_VERSION, "format": "distviz-trace",
                "scenario": self.scenario.to_json() if self.scenario is not None else None,
                "torch_version": self.torch_version,
                "interop_threads": self.interop_threads, "workers": self.workers,
                "training": self.training.to_json() if self.training else None,
                "meta": self.meta.to_json(), "contexts": contexts}

    def dumps(self) -> str:
        """The JSON text: shared keys on the first line, then per context its keys on one line
        and its nodes one per line, so two recordings diff node by node."""
        obj = self.to_json()
        contexts = obj.pop("contexts")
        head = json.dumps(obj, separators=(",", ":"))
        parts = []
        for c in contexts:
            nodes = c.pop("nodes")
            body = ",\n".join(json.dumps(n, separators=(",", ":")) for n in nodes)
            parts.append(json.dumps(c, separators=(",", ":"))[:-1] + ',"nodes":[\n' + body
                         + "\n]}")
        return head[:-1] + ',"contexts":[\n' + ",\n".join(parts) + "\n]}\n"

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the recording atomically; a single context without training is written as a
        version 1 trace, as before."""
        trace = self.single_trace
        if self.version == SCHEMA_VERSION and trace is not None:
            return trace.save(path)
        return write_atomic(Path(path), self.dumps())


def load_recording(path: str | os.PathLike[str]) -> Recording:
    """Read a trace file of either version. Raises ``TraceError`` (one line, naming the file
    and key) as ``distviz.trace.load`` does."""
    return loads_recording(read_trace_text(path), source=str(Path(path)))


def loads_recording(text: str, source: str = "<trace>") -> Recording:
    """Parse trace JSON text of either version (see ``load_recording``)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return from_json(parse_json(text, source), source)
    finally:
        if was_enabled:
            gc.enable()


def from_json(obj: Any, source: str = "<trace>") -> Recording:
    """A ``Recording`` from parsed JSON of either version."""
    if isinstance(obj, dict) and obj.get("schema_version") == RECORDING_VERSION:
        return _parse_v2(obj, source)
    return Recording.single(parse_trace(obj, source))


def _section(cls: type[SectionT], obj: dict[str, Any], source: str) -> SectionT | None:
    value = obj.get(cls.KIND)
    if value is not None and not isinstance(value, dict):
        raise TraceError(f"expected an object or null, found {type(value).__name__}",
                         path=source, key=cls.KIND)
    return cls.from_json(value, source) if value is not None else None


def _parse_v2(obj: dict[str, Any], source: str) -> Recording:
    raw = obj.get("contexts")
    if not isinstance(raw, list):
        raise TraceError("expected a list of contexts", path=source, key="contexts")
    shared = {k: obj.get(k) for k in _SHARED}
    contexts: list[Trace] = []
    iterations: list[Iteration | None] = []
    for i, c in enumerate(raw):
        if not isinstance(c, dict):
            raise TraceError("expected an object", path=source, key=f"contexts[{i}]")
        one = dict(c, schema_version=SCHEMA_VERSION, **shared)
        try:
            contexts.append(parse_trace(one, f"{source} contexts[{i}]"))
            it = c.get("iteration")
            iterations.append(Iteration.from_json(it) if isinstance(it, dict) else None)
        except (KeyError, TypeError, ValueError) as exc:
            raise TraceError(f"bad iteration: {exc}", path=source,
                             key=f"contexts[{i}].iteration") from None
    training = obj.get("training")
    try:
        summary = TrainingSummary.from_json(training) if isinstance(training, dict) else None
    except (KeyError, TypeError, ValueError) as exc:
        raise TraceError(f"bad training summary: {exc}", path=source, key="training") from None
    workers = obj.get("workers")
    if not isinstance(workers, list):
        raise TraceError("expected a list of worker names", path=source, key="workers")
    return Recording(contexts=contexts, iterations=iterations, workers=[str(w) for w in workers],
                     scenario=_section(ScenarioInfo, obj, source),
                     torch_version=obj.get("torch_version"),
                     interop_threads=obj.get("interop_threads", 1),
                     meta=_section(Meta, obj, source) or Meta(),
                     training=summary)
