"""Compare a replay with what PyTorch really did (``trace.real``).

The runner records, on every worker, the order in which node pre-hooks fired during the real
distributed backward (sends, recvs, ops and AccumulateGrads), the outcome and the gradients. With
one inter-op thread per worker (``interop_threads == 1``) the replay must predict each worker's
order exactly (internals §3.4-3.5). With more threads, calls on one worker overlap and the replay
is one legal schedule among several: a differing order is then reported but is not a bug, and
the text says so instead of claiming agreement is guaranteed.

``trace.real`` format: ``{"outcome": "completed"|"hang"|"error"|"skipped", "error": str|None,
"events": [{"pass", "worker", "node", "t_us", "dur_us", "thread", "grad_shapes"}, ...],
"gradients": {...}, "interop_threads": int}``.
"""

from __future__ import annotations

from typing import Any

from distviz.replay.fast import Replay
from distviz.trace import Trace

__all__ = ["compare"]

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


def _leaf_keys(gradients: Any) -> dict[str, set[str]] | None:
    """Per worker, the names the real run reported gradients for (variable or node id)."""
    if not isinstance(gradients, dict):
        return None
    out: dict[str, set[str]] = {}
    for w, entries in gradients.items():
        if isinstance(entries, dict):
            out[str(w)] = {str(k) for k in entries}
        elif isinstance(entries, list):
            names: set[str] = set()
            for e in entries:
                if isinstance(e, dict):
                    names.add(str(e.get("var") or e.get("node") or e.get("name")))
                else:
                    names.add(str(e))
            out[str(w)] = names
    return out


def compare(trace: Trace, replay: Replay) -> dict[str, Any]:
    """Return how ``replay`` agrees with ``trace.real``.

    Keys: ``outcome``, ``order``, ``executed``, ``gradients`` (each ``True``/``False``, or
    ``None`` when there is nothing to compare), ``exact`` (the real run used one inter-op thread,
    so the order must match), ``status`` (``skipped``, ``match`` or ``mismatch``),
    ``mismatches`` (``worker``, ``pass``, ``expected``: replay order, ``observed``: real order,
    ``first_difference_index``; long lists are cut to a window starting at ``window_start``) and
    ``text``: one sentence. When the real run hung or failed, only what ran before is compared
    (for an error, each worker's common prefix). Never raises on a malformed ``real``: unknown
    parts compare as ``None``.
    """
    real = trace.real
    interop = None
    if isinstance(real, dict):
        interop = real.get("interop_threads", trace.interop_threads)
    exact = interop == 1
    base: dict[str, Any] = {"outcome": None, "order": None, "executed": None,
                            "gradients": None, "exact": exact, "mismatches": [],
                            "status": "skipped"}
    if not isinstance(real, dict) or real.get("outcome") in (None, "skipped"):
        base["text"] = "no real run recorded for this trace; nothing to compare"
        return base
    real_outcome = str(real.get("outcome"))
    outcome_ok = real_outcome == replay.outcome

    # -- per pass, per worker orders --------------------------------------------------------------
    observed: dict[tuple[int, str], list[str]] = {}
    for ev in real.get("events") or []:
        if not isinstance(ev, dict) or "node" not in ev:
            continue
        key = (int(ev.get("pass", 0)), str(ev.get("worker")))
        observed.setdefault(key, []).append(str(ev["node"]))
    expected: dict[tuple[int, str], list[str]] = {}
    for p, per in enumerate(replay.order):
        for w, ids in per.items():
            if ids:
                expected[(p, w)] = ids
    keys = sorted(set(observed) | set(expected), key=lambda k: (k[0], trace.workers.index(k[1])
                                                                if k[1] in trace.workers else 1 << 30,
                                                                k[1]))
    mismatches: list[dict[str, Any]] = []
    order_ok = True
    executed_ok = True
    nodes_compared = 0
    for key in keys:
        exp = expected.get(key, [])
        obs = observed.get(key, [])
        if real_outcome == "error" or replay.outcome == "error":
            n = min(len(exp), len(obs))
            exp_c, obs_c = exp[:n], obs[:n]
        else:
            exp_c, obs_c = exp, obs
        nodes_compared += len(exp_c)
        if sorted(exp_c) != sorted(obs_c):
            executed_ok = False
        if exp_c != obs_c:
            order_ok = False
            k = _first_difference(exp_c, obs_c)
            e_win, start = _window(exp_c, k)
            o_win, _ = _window(obs_c, k)
            mismatches.append({"worker": key[1], "pass": key[0], "expected": e_win,
                               "observed": o_win, "first_difference_index": k,
                               "window_start": start})

    # -- gradients: which leaves got one, per worker -------------------------------------------------
    grads_ok: bool | None = None
    real_leaves = _leaf_keys(real.get("gradients"))
    if real_leaves is not None:
        mine: dict[str, set[str]] = {}
        for nid, acc in replay.accumulated.items():
            mine.setdefault(acc["worker"], set()).add(acc["var"] or nid)
        grads_ok = all(real_leaves.get(w, set()) == mine.get(w, set())
                       for w in sorted(set(real_leaves) | set(mine)))

    counts = replay.counts()
    workers = sorted({k[1] for k in keys}, key=lambda w: trace.workers.index(w)
                     if w in trace.workers else 1 << 30)
    if outcome_ok and order_ok and executed_ok and grads_ok is not False:
        status = "match"
        text = (f"replay matches PyTorch on all {len(workers)} workers ({nodes_compared} nodes, "
                f"{counts['messages']} messages)")
        if not exact:
            text += (f"; the real run used {interop} inter-op threads, so this order is one "
                     "legal schedule and agreement is not guaranteed by nature")
    else:
        status = "mismatch"
        parts: list[str] = []
        if not outcome_ok:
            parts.append(f"PyTorch's outcome was {real_outcome}, the replay's {replay.outcome}")
        if mismatches:
            m = mismatches[0]
            k = m["first_difference_index"]
            exp_at = m["expected"][k - m["window_start"]] if 0 <= k - m["window_start"] < len(
                m["expected"]) else "nothing"
            obs_at = m["observed"][k - m["window_start"]] if 0 <= k - m["window_start"] < len(
                m["observed"]) else "nothing"
            parts.append(f"on {m['worker']} in pass {m['pass']} the order differs at position "
                         f"{k}: the replay runs {exp_at}, PyTorch ran {obs_at}")
            if len(mismatches) > 1:
                parts.append(f"{len(mismatches) - 1} more worker order"
                             f"{'s differ' if len(mismatches) > 2 else ' differs'}")
        if grads_ok is False:
            parts.append("the set of leaves with gradients differs")
        text = "replay differs from PyTorch: " + "; ".join(parts)
        if not exact:
            text += (f" (the real run used {interop} inter-op threads: calls on one worker "
                     "overlap, so order differences are expected and not a replay bug)")
    return {"outcome": outcome_ok, "order": order_ok, "executed": executed_ok,
            "gradients": grads_ok, "exact": exact, "mismatches": mismatches, "status": status,
            "text": text}
