"""A traced process's own state (torch side, light): its settings, its contexts counted per
initiator, its worker name, and the contexts it recorded in full.

Every process of a traced program makes one ``Process`` when the hooks are installed (and a
forked child makes its own). It is what each ``dist_autograd.backward`` is decided on
(``distviz.tracing.hooks.dispatch``): the context's number here, whether ``--contexts`` selects it,
and whether ``--max-contexts`` leaves a slot for it. The recording machinery
(``distviz.tracing.recording.observe``: the trace model, the recorder, the observer) is not imported
here: a process whose backwards are all watched never loads it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import torch.distributed.rpc as rpc

from distviz import limits
from distviz.selection import ContextSelection
from distviz.tracing.config import TraceConfig
from distviz.tracing.shared.slots import claim_slot


@dataclass
class Process:
    """Per-process state: the settings, the per-initiator context count, this worker."""

    config: TraceConfig
    index: dict[int, int] = field(default_factory=dict)     # context id -> its number here
    counted: int = 0                                        # contexts numbered so far
    lock: threading.Lock = field(default_factory=threading.Lock)
    worker: str | None = None
    rank: int | None = None
    exhausted: bool = False
    # the contexts recorded in full, for their later passes: ``observe.Run``s (typed there:
    # this module is what a watched process loads instead of observe)
    runs: dict[int, Any] = field(default_factory=dict)
    ended: dict[int, str] = field(default_factory=dict)   # recorded contexts no longer followed
    unrecorded: set[str] = field(default_factory=set)     # why calls went unrecorded, logged
    spec: ContextSelection = field(init=False)            # --contexts, parsed once

    def __post_init__(self) -> None:
        self.spec = self.config.spec

    def number(self, context_id: int) -> tuple[int, bool]:
        """``(number of this context for this initiator, first backward on it)``."""
        with self.lock:
            k = self.index.get(context_id)
            if k is not None:
                return k, False
            self.counted += 1
            k = self.index[context_id] = self.counted
            if len(self.index) > limits.TRACE_RECENT_CONTEXTS:   # a long job: the recent ones
                del self.index[next(iter(self.index))]
            return k, True

    def may_record(self, context_id: int) -> bool:
        """Whether calls made in ``context_id`` may end up in a trace (the gate of
        ``callsites``): a context this process made is recorded only if it is the next one
        ``--contexts`` selects; a context from elsewhere may be recorded by its initiator."""
        if self.rank is None or (context_id >> 48) != self.rank or context_id in self.runs:
            return True
        if self.exhausted or context_id in self.index:   # its backward has started already
            return False
        return self.spec.selects(self.counted + 1)

    def records_later(self, k: int) -> bool:
        """Whether this process may record one of its contexts after its ``k``-th."""
        return not self.exhausted and self.spec.selects_after(k)

    def claim_slot(self) -> bool:
        """Count one recorded context against ``--max-contexts`` (over all processes)."""
        limit = self.config.max_contexts
        if limit is None:
            return True
        if self.exhausted:
            return False
        if claim_slot(self.config.session_dir or self.config.out_dir, limit):
            return True
        self.exhausted = True
        return False

    def me(self) -> str:
        if self.worker is None:
            info = rpc.get_worker_info()
            self.worker, self.rank = info.name, int(info.id)
        return self.worker


PROCESS: Process | None = None


def start(config: TraceConfig) -> Process:
    """Make this process's state (called when the hooks are installed, and after a fork)."""
    global PROCESS
    PROCESS = Process(config=config)
    return PROCESS
