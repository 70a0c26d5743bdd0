"""Compare a replay with what PyTorch really did (``trace.real``), check by check.

These are the comparisons the one judge (``distviz.judge.verdict.judge``) calls: it alone
decides the status and writes the sentence (``matched_sentence`` and ``mismatch_parts`` are the
pieces it words them with).

The runner records, on every worker, the order in which node pre-hooks fired during the real
distributed backward (sends, recvs, ops and AccumulateGrads), the outcome and the gradients. With
one inter-op thread per worker (``interop_threads == 1``) the replay must predict each worker's
order exactly (internals §3.4-3.5). With more threads, calls on one worker overlap and the replay
is one legal schedule among several: a differing order is then reported but is not a bug, and
the text says so instead of claiming agreement is guaranteed.

``trace.real`` is a ``Real`` section; its events are read as ``RealEvent`` values
(``Real.observed()``).
"""

from __future__ import annotations

from typing import Any

from distviz.judge.findings import Agreement, OrderMismatch, SmartLeaf, SmartReport
from distviz.judge.opaque import python_behind
from distviz.outcome import RealOutcome
from distviz.replay.result import Replay, observed_arrival
from distviz.replay.result import replay as run_replay
from distviz.trace import Trace
from distviz.words import plural, word_for

__all__ = ["compare", "matched_sentence", "mismatch_parts", "real_interop",
           "smart_report"]

_WINDOW = 50   # mismatch lists longer than this are cut to a window around the difference


def _first_difference(a: list[str], b: list[str]) -> int:
    for k, (x, y) in enumerate(zip(a, b, strict=False)):
        if x != y:
            return k
    return min(len(a), len(b)) if len(a) != len(b) else -1


def _window(seq: list[str], k: int) -> tuple[list[str], int]:
    if len(seq) <= _WINDOW:
        return list(seq), 0
    start = max(0, k - 10)
    return seq[start:start + _WINDOW], start


def real_interop(trace: Trace) -> int | None:
    """The inter-op threads of the real run (``real.interop_threads``, else the trace's);
    ``None`` without a real run."""
    if trace.real is None:
        return None
    if "interop_threads" in trace.real:
        return trace.real.interop_threads
    return trace.interop_threads


def _by_rank(trace: Trace, workers: set[str]) -> tuple[str, ...]:
    return tuple(sorted(workers, key=lambda w: trace.workers.index(w)
                        if w in trace.workers else 1 << 30))


def _orders(trace: Trace, replay: Replay, real_outcome: RealOutcome
            ) -> tuple[bool, bool, list[OrderMismatch], int]:
    """Compare per pass, per worker orders: ``(order_ok, executed_ok, mismatches, compared)``."""
    observed: dict[tuple[int, str], list[str]] = {}
    for ev in trace.real.observed() if trace.real is not None else []:
        observed.setdefault((ev.pass_index, ev.worker), []).append(ev.node)
    expected: dict[tuple[int, str], list[str]] = {}
    for p, per in enumerate(replay.order):
        for w, ids in per.items():
            if ids:
                expected[(p, w)] = ids
    rank = {w: i for i, w in enumerate(trace.workers)}
    keys = sorted(set(observed) | set(expected), key=lambda k: (k[0], rank.get(k[1], 1 << 30), k[1]))
    mismatches: list[OrderMismatch] = []
    order_ok = executed_ok = True
    compared = 0
    for key in keys:
        exp = expected.get(key, [])
        obs = observed.get(key, [])
        if real_outcome == "error" or replay.outcome == "error":
            n = min(len(exp), len(obs))
            exp, obs = exp[:n], obs[:n]
        compared += len(exp)
        if sorted(exp) != sorted(obs):
            executed_ok = False
        if exp != obs:
            order_ok = False
            k = _first_difference(exp, obs)
            e_win, start = _window(exp, k)
            o_win, _ = _window(obs, k)
            mismatches.append(OrderMismatch(
                worker=key[1], pass_index=key[0], expected=tuple(e_win), observed=tuple(o_win),
                first_difference_index=k, window_start=start))
    return order_ok, executed_ok, mismatches, compared


def compare(trace: Trace, replay: Replay) -> Agreement:
    """Return how ``replay`` agrees with ``trace.real`` (and the reference gradients).

    ``fifo_order`` says whether the replay's own FIFO arrival order of gradient messages equals
    PyTorch's, ``arrival_differs`` lists the workers where messages from different workers
    arrived in another order than the FIFO prediction, ``exact`` whether the real run used one
    inter-op thread.

    With one inter-op thread each worker runs its calls one at a time in arrival order, so a
    worker's order is fixed by the arrival order of its gradient messages and the engine's
    rules. Several messages in flight to one worker race on its RPC agent threads (even
    messages from one sender; the first one holds the context while it computes dependencies),
    so their launch order is not knowable from the graph; when the FIFO guess got it wrong, the
    replay is run again with the observed arrival order and ``order`` says whether the engine
    model then reproduces every worker's order exactly.
    """
    real = trace.real
    interop = real_interop(trace)
    exact = interop == 1
    if real is None or real.outcome == "skipped":
        return Agreement(outcome=None, order=None, executed=None, gradients=None, leaves=None,
                         fifo_order=None, arrival_differs=(), exact=exact, mismatches=())
    real_outcome = real.outcome
    fifo_ok, executed_ok, mismatches, compared = _orders(trace, replay, real_outcome)
    order_ok = fifo_ok
    arrival_differs: tuple[str, ...] = ()
    if not fifo_ok:
        again = run_replay(trace, replay.mode, arrival=observed_arrival(trace),
                           graph=replay.graph)
        order_ok, executed_ok2, mismatches2, _ = _orders(trace, again, real_outcome)
        if order_ok:
            arrival_differs = _by_rank(trace, {m.worker for m in mismatches})
            mismatches = []
            executed_ok = executed_ok2
        else:
            mismatches = mismatches2
    leaves_ok: bool | None = None
    if real_outcome == "completed" and replay.outcome == "completed" and "gradients" in real:
        real_leaves = set(real.gradients)
        predicted = set(replay.accumulated)
        # a leaf behind a custom Function may get no gradient (its backward returned None):
        # not proven either way, the zeros check says so
        leaves_ok = real_leaves == predicted - set(python_behind(trace, predicted - real_leaves))
    grads_ok: bool | None = None
    ref = trace.reference
    if ref is not None and ref.comparable:
        grads_ok = bool(ref.ok)
    return Agreement(
        outcome=real_outcome == replay.outcome, order=order_ok, executed=executed_ok,
        gradients=grads_ok, leaves=leaves_ok, fifo_order=fifo_ok,
        arrival_differs=arrival_differs, exact=exact, mismatches=tuple(mismatches),
        nodes_compared=compared)


def matched_sentence(trace: Trace, replay: Replay, a: Agreement) -> str:
    """``replay matches PyTorch on all N workers (K nodes, M messages)``, with how the
    messages arrived and the gradients when they say more."""
    workers = _by_rank(trace, {w for per in replay.order for w, ids in per.items() if ids})
    on = "its one worker" if len(workers) == 1 else f"all {len(workers)} workers"
    text = (f"replay matches PyTorch on {on} ({plural(a.nodes_compared, 'node')}, "
            f"{plural(replay.messages, 'message')})")
    if a.arrival_differs:
        text += (f"; gradient messages reached {', '.join(a.arrival_differs)} in another "
                 "order than the replay's FIFO guess (messages in flight to one worker race "
                 "on its RPC agent threads), and with the observed arrival order every "
                 "worker's order is exact")
    if a.gradients:
        text += "; gradients equal the single-process reference"
    return text


def mismatch_parts(a: Agreement) -> list[str]:
    """Where the first worker order differs, and how many more do (empty when none)."""
    if not a.mismatches:
        return []
    m = a.mismatches[0]
    k = m.first_difference_index
    exp_at, obs_at = m.at(k)
    parts = [f"on {m.worker} in pass {m.pass_index + 1} the order differs at position "
             f"{k}: the replay runs {exp_at}, PyTorch ran {obs_at}"]
    if len(a.mismatches) > 1:
        more = len(a.mismatches) - 1
        parts.append(f"{plural(more, 'more worker order')} {word_for(more, 'differs', 'differ')}")
    return parts


def smart_report(trace: Trace, smart: Replay, fast: Replay) -> SmartReport:
    """SMART mode has no PyTorch to check against: compare it with FAST and with the
    single-process reference gradients instead (``SmartReport``; each leaf's
    ``would_receive`` is the reference's summary: shape, sum, norm, values)."""
    ref_grads = trace.reference.gradients if trace.reference is not None else None
    leaves: dict[str, SmartLeaf] = {}
    for nid, acc in sorted(smart.accumulated.items()):
        name = acc.var or nid
        summary = ref_grads.get(name) if isinstance(ref_grads, dict) else None
        # SMART skips only sends outside the roots' lineage, so a leaf it reaches gets the
        # mathematically correct gradient: the single-process reference's
        would: dict[str, Any] | None = (
            {k: summary[k] for k in ("shape", "sum", "norm", "values") if k in summary}
            if isinstance(summary, dict) else None)
        leaves[name] = SmartLeaf(worker=acc.worker, zero=acc.zero, node=nid, would_receive=would)
    ref_leaves: tuple[str, ...] | None = None
    same: bool | None = None
    if isinstance(ref_grads, dict):
        ref_leaves = tuple(sorted(ref_grads))
        named = {k for k, v in leaves.items() if not v.zero and "/" not in k}
        same = named == set(ref_leaves)
    excluded = tuple(s for per in smart.excluded for s in per)
    parts = [f"FAST mode {fast.outcome}", f"SMART mode {smart.outcome}"]
    if excluded:
        parts.append(f"SMART leaves out {plural(len(excluded), 'send')} "
                     f"outside the roots' lineage ({', '.join(excluded[:3])}"
                     f"{', …' if len(excluded) > 3 else ''})")
    got = ", ".join(
        f"{k} (sum {v.would_receive['sum']:.4g})"
        if v.would_receive is not None and "sum" in v.would_receive else k
        for k, v in sorted(leaves.items()) if not v.zero) or "none"
    parts.append(f"leaves that receive a gradient: {got}")
    if same is True:
        parts.append("the same leaves get gradients in the single-process reference")
    elif same is False:
        parts.append(f"the single-process reference gives gradients to: "
                     f"{', '.join(ref_leaves or []) or 'none'}")
    return SmartReport(fast_outcome=fast.outcome, smart_outcome=smart.outcome,
                       excluded=excluded, leaves=leaves, reference_leaves=ref_leaves,
                       same_leaves=same, text="; ".join(parts))
