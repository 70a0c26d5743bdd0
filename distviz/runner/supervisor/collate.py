"""A run's messages -> a ``Recording`` (pure: the parent imports it).

Every recorded context carries the scenario section ``scenario_info`` makes, the one context of
a plain scenario's run as each context of a training run.

The trainers send each recorded context as it closes (``ContextDone``: the trace with its
real backward, the iteration, the gradient values), every worker its final parameters
(``FinalState``) and the reference process its own run (``ReferenceDone``). ``collate`` puts
them together: each context gets its trace's ``reference`` section (gradients by leaf, as in a
single-context run) and its ``Iteration`` (with the reference's loss and updates compared),
and the recording gets the ``TrainingSummary`` (schedule, overlap, final parameters).

Several trainers that update parameters another one's contexts use (Hogwild training on a
parameter server) give values that depend on the order they read and updated them in. The
reference goes in the order the real run's trainers went in (``interleaving``); where that
order is not known, the values are not compared, and the reason says why. So do trainers whose
calls change another worker's state (random numbers drawn, modules made there): the reference
goes in the order the callee ran them in (``served_order``), and where that is not known, the
values are not compared either.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from distviz.runner.supervisor.served_order import CalleeOrder, callee_order
from distviz.trace import NodeKind, Trace
from distviz.trace.contexts_file import Recording
from distviz.trace.iteration import (
    Iteration,
    IterationCheck,
    TrainingSummary,
    ValueCheck,
    compare_values,
)
from distviz.trace.sections import ROW_OK, Reference, RowStatus, ScenarioInfo

if TYPE_CHECKING:  # pragma: no cover
    from distviz.scenario import Scenario

__all__ = ["Interleaving", "TrainingRun", "collate", "interleaving", "scenario_info", "schedule",
           "shared_updates"]


def scenario_info(scenario: Scenario) -> ScenarioInfo:
    """The ``scenario`` section of a run's traces: name, description, path, parameters (after
    ``--set``) and seed, each written even when empty."""
    return ScenarioInfo(name=scenario.name, description=scenario.description,
                        path=scenario.path, params=dict(scenario.params), seed=scenario.seed,
                        order=("name", "description", "path", "params", "seed"))


@dataclass
class TrainingRun:
    """What the parent received during a training run, as plain JSON values."""

    trainers: list[str]
    contexts: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = field(
        default_factory=list)        # (trace JSON, iteration info, gradient values by leaf id)
    windows: dict[str, list[list[int]]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    final: dict[str, dict[str, Any]] = field(default_factory=dict)  # worker -> name -> entry
    reference: dict[str, Any] | None = None
    #: trainer -> its main's contexts, calls and optimizer steps: [kind, start ns, end ns]
    points: dict[str, list[list[Any]]] = field(default_factory=dict)
    #: worker -> the calls it served for the trainers that changed its state:
    #: [trainer, function, start ns, end ns] (``distviz.runner.sandbox.served``)
    served: dict[str, list[list[Any]]] = field(default_factory=dict)


def schedule(windows: Mapping[str, Sequence[Sequence[int]]]) -> tuple[list[tuple[str, int]],
                                                                    bool]:
    """The contexts of every trainer in the order they opened, and whether contexts of
    different trainers were open at the same time."""
    spans = sorted((enter, exit_, trainer, index) for trainer, ws in windows.items()
                   for index, enter, exit_ in ws)
    overlapped = False
    latest: dict[str, int] = {}
    for enter, exit_, trainer, _ in spans:
        if any(t != trainer and end > enter for t, end in latest.items()):
            overlapped = True
        latest[trainer] = max(latest.get(trainer, 0), exit_)
    return [(trainer, index) for _, _, trainer, index in spans], overlapped


class Interleaving(NamedTuple):
    """The order the trainers went in: ``(trainer, number)`` of each one's contexts, calls and
    optimizer steps (numbered from 1 per trainer) by start time (a call that changed another
    worker's state by the time that worker began it: ``served_order``), and ``clash``: why that
    order does not tell in which order shared parameters were read and updated (``None``: it
    does); ``state``: the order the callees' state was changed in (``CalleeOrder``)."""

    order: list[tuple[str, int]]
    clash: str | None
    state: CalleeOrder = CalleeOrder({}, (), None)


_KIND = {"rpc": "call to another worker", "step": "optimizer step"}


def interleaving(points: Mapping[str, Sequence[Sequence[Any]]],
                 served: Mapping[str, Sequence[Sequence[Any]]] | None = None) -> Interleaving:
    """The trainers' points (``TrainingSession.point``: ``[kind, start ns, end ns]``, end
    ``-1`` while open) in one order. A call reads parameters on its callee and a step updates
    them somewhere between its start and its end, so two of different trainers are ordered
    when one ended before the other began; an optimizer step under way while another trainer's
    call or step was (a context opening reads nothing) leaves the order unknown. A call that
    changed its callee's state (``served``: each worker's ``[trainer, function, start ns, end
    ns]``) takes its place by the time the callee began it (``served_order.callee_order``)."""
    state = callee_order(points, served or {})
    spans: list[tuple[int, int, str, int, str, int]] = []   # start, end, trainer, n, kind, ctx
    keys: dict[tuple[str, int], int] = {}
    for trainer, ps in points.items():
        ctx = 0
        for n, (kind, start, end) in enumerate(ps, 1):
            ctx += kind == "context"
            spans.append((int(start), int(end) if int(end) >= 0 else 2 ** 62, str(trainer), n,
                          str(kind), ctx))
            keys[(str(trainer), n)] = state.keys.get((str(trainer), n), int(start))
    order = [(t, n) for _k, t, n in sorted((k, t, n) for (t, n), k in keys.items())]
    state = state._replace(clash=state.clash or _out_of_turn(order, state))
    spans.sort(key=lambda s: (s[0], s[2], s[3]))
    latest: dict[str, tuple[int, str, int]] = {}          # trainer -> end, kind, ctx
    latest_step: dict[str, tuple[int, int]] = {}          # trainer -> end, ctx
    clash: str | None = None
    for start, end, trainer, _n, kind, ctx in spans:
        if kind == "context" or clash is not None:
            continue
        for other, (o_end, o_ctx) in latest_step.items():
            if other != trainer and o_end > start:
                clash = _clash_text(other, "step", o_ctx, trainer, kind, ctx)
        for other, (o_end, o_kind, o_ctx) in latest.items():
            if clash is None and kind == "step" and other != trainer and o_end > start:
                clash = _clash_text(trainer, "step", ctx, other, o_kind, o_ctx)
        if end > latest.get(trainer, (0, "", 0))[0]:
            latest[trainer] = (end, kind, ctx)
        if kind == "step" and end > latest_step.get(trainer, (0, 0))[0]:
            latest_step[trainer] = (end, ctx)
    return Interleaving(order, clash, state)


def _out_of_turn(order: Sequence[tuple[str, int]], state: CalleeOrder) -> str | None:
    """Why ``order`` cannot be followed: a trainer's points out of its own order (a call that
    reached its callee only after the trainer's next point began)."""
    last: dict[str, int] = {}
    for trainer, n in order:
        if n < last.get(trainer, 0):
            return (f"{trainer}'s call changed the state of {', '.join(state.callees)} after its "
                    "main's next call or step had begun, so the order the reference would "
                    "follow is not known")
        last[trainer] = n
    return None


def _clash_text(a: str, a_kind: str, a_ctx: int, b: str, b_kind: str, b_ctx: int) -> str:
    def where(ctx: int) -> str:
        return f" (its context {ctx})" if ctx else ""
    return (f"{a}'s {_KIND[a_kind]}{where(a_ctx)} and {b}'s {_KIND[b_kind]}{where(b_ctx)} ran "
            "at the same time, so the order the shared parameters were read and updated in "
            "is not known")


def shared_updates(run: TrainingRun) -> list[str]:
    """Parameters one trainer's optimizer steps update while another trainer's contexts use
    them (as leaves of their graphs): their values depend on the order the trainers went in
    (each trainer may update them too, as in Hogwild training). With not every context
    recorded this cannot be known, and every stepped parameter counts."""
    updated: dict[str, set[str]] = {}
    used: dict[str, set[str]] = {}
    for trace_json, info, _ in run.contexts:
        trainer = str(info["trainer"])
        for step in info.get("steps", []):
            for u in step.get("updates", []):
                updated.setdefault(str(u["name"]), set()).add(trainer)
        for node in trace_json.get("nodes", []):
            if node.get("kind") == NodeKind.ACCUMULATE_GRAD and node.get("var"):
                used.setdefault(str(node["var"]), set()).add(trainer)
    if len(run.contexts) < sum(run.counts.values()):
        return sorted(updated)
    return sorted(name for name, by in updated.items()
                  if any(used.get(name, set()) - {t} for t in by))


def _order_unknown(run: TrainingRun, conflicts: Sequence[str]) -> str | None:
    """Why the reference did not go in the real run's order where that matters (shared
    updates, a worker whose state two trainers' calls changed), or ``None``: it read and
    updated the shared parameters, and changed each such worker's state, in the same order."""
    if len(run.trainers) < 2:
        return None
    inter = interleaving(run.points, run.served)
    callees = inter.state.callees
    if not conflicts and not callees:
        return None
    shared = (f"trainers updated parameters the others' contexts use ({', '.join(conflicts)})"
              if conflicts else f"trainers' calls changed the state of {', '.join(callees)}")
    if any(not run.points.get(t) for t in run.trainers):
        return f"{shared} and the order the trainers went in was not recorded"
    if conflicts and inter.clash is not None:
        return f"{shared} and {inter.clash}"
    if inter.state.clash is not None:
        return inter.state.clash
    ref_points: Mapping[str, Any] = (run.reference or {}).get("points", {})
    for t in run.trainers:
        real = [str(p[0]) for p in run.points[t]]
        mirrored = [str(k) for k in ref_points.get(t, [])]
        if mirrored != real:
            return (f"{shared} and {t} made {len(real)} context openings, calls and steps in the "
                    f"real run and {len(mirrored)} in the reference, which could not follow its "
                    "order")
    return None


def collate(run: TrainingRun, scenario: ScenarioInfo | None) -> Recording:
    """The recording of a training run (see the module docstring); every context shares the
    ``scenario`` section (``scenario_info``)."""
    order, overlapped = schedule(run.windows)
    conflicts = shared_updates(run) if len(run.trainers) > 1 else []
    interleaved = _order_unknown(run, conflicts)
    ref = run.reference or {}
    ref_contexts = {(c["trainer"], int(c["index"])): c for c in ref.get("contexts", [])}
    t0 = min((int(info["enter_ns"]) for _, info, _ in run.contexts), default=0)
    traces: list[Trace] = []
    iterations: list[Iteration | None] = []
    for trace_json, info, values in run.contexts:
        trace = Trace.from_json(trace_json, source="<trainer>")
        trace.scenario = scenario
        key = (str(info["trainer"]), int(info["index"]))
        want = ref_contexts.get(key)
        reason = _not_comparable(trace, ref, want, interleaved)
        trace.reference = Reference.from_json(_gradients_section(trace, values, want, reason))
        iteration = dict(info, enter_us=(int(info["enter_ns"]) - t0) / 1000.0,
                         exit_us=(int(info["exit_ns"]) - t0) / 1000.0, reference=None)
        it = Iteration.from_json(iteration)
        iterations.append(_with_check(it, want, reason))
        traces.append(trace)
    traces, iterations = _in_order(traces, iterations)
    workers = traces[0].workers if traces else []
    summary = TrainingSummary(
        trainers=tuple(run.trainers), schedule=tuple(order), overlapped=overlapped,
        shared_updates=tuple(conflicts), contexts_total=sum(run.counts.values()),
        reference_outcome=ref.get("outcome") if run.reference is not None else None,
        reference_error=ref.get("error"),
        final=tuple(_final_checks(run.final, ref, interleaved)))
    first = traces[0] if traces else None
    return Recording(contexts=traces, iterations=iterations, workers=list(workers),
                     scenario=scenario,
                     torch_version=first.torch_version if first else None,
                     interop_threads=first.interop_threads if first else 1, training=summary)


def _in_order(traces: list[Trace], iterations: list[Iteration | None]
              ) -> tuple[list[Trace], list[Iteration | None]]:
    """Contexts in the order they opened (trainers send them as they close)."""
    pairs = sorted(zip(traces, iterations, strict=True),
                   key=lambda p: (p[1].enter_us if p[1] else 0.0))
    return [p[0] for p in pairs], [p[1] for p in pairs]


def _not_comparable(trace: Trace, ref: Mapping[str, Any], want: Mapping[str, Any] | None,
                    interleaved: str | None) -> str | None:
    if not ref:
        return "no reference run"
    if ref.get("outcome") != "completed":
        return f"the reference run failed: {ref.get('error')}"
    if interleaved:
        return interleaved
    if want is None:
        return "the reference has no such context"
    if trace.real is None or trace.real.outcome != "completed":
        return "the real backward did not complete"
    return None


def _gradients_section(trace: Trace, values: Mapping[str, Any], want: Mapping[str, Any] | None,
                       reason: str | None) -> dict[str, Any]:
    """The trace's ``reference`` section: each leaf's gradient against the reference's."""
    rows: list[dict[str, Any]] = []
    ref_grads: Mapping[str, Any] = (want or {}).get("gradients", {})
    real_grads: Any = trace.real.gradients if trace.real is not None else {}
    ok = reason is None
    for n in trace.nodes:
        if n.kind != NodeKind.ACCUMULATE_GRAD or not n.var:
            continue
        row: dict[str, Any] = {"var": n.var, "leaf": n.id, "worker": n.worker}
        expected = ref_grads.get(n.var)
        summary = real_grads.get(n.id)
        if reason is not None:
            row["status"] = RowStatus.NOT_COMPARED
        elif expected is None and summary is None:
            row["status"] = RowStatus.NO_GRADIENT
        elif expected is None:
            row["status"] = RowStatus.ZERO_UNUSED if summary.get("zero") else RowStatus.EXTRA
        elif summary is None:
            row["status"] = RowStatus.MISSING
        else:
            check = compare_values(n.var, n.worker, values.get(n.id), expected.get("all"),
                                   str(expected.get("dtype", "")))
            row.update(status=check.status, max_abs_diff=check.max_abs_diff,
                       tolerance=check.tolerance)
        if expected is not None:
            row["reference"] = {k: v for k, v in expected.items() if k != "all"}
        if row["status"] not in ROW_OK:
            ok = False
        rows.append(row)
    comparable = reason is None
    return {"outcome": "completed" if want else "error", "error": reason,
            "comparable": comparable, "ok": bool(ok) if comparable else None,
            "comparison": rows,
            "gradients": {k: {kk: vv for kk, vv in v.items() if kk != "all"}
                          for k, v in sorted(ref_grads.items())}}


def _with_check(it: Iteration, want: Mapping[str, Any] | None, reason: str | None) -> Iteration:
    """The iteration with its loss and updates compared with the reference's."""
    if reason is not None or want is None:
        check = IterationCheck(comparable=False, reason=reason)
    else:
        loss = tuple(float(x) for x in want.get("loss", []))
        loss_match = len(loss) == len(it.loss) and all(
            abs(a - b) <= 1e-6 + 1e-4 * abs(b) for a, b in zip(it.loss, loss, strict=True))
        ref_updates = {(u["name"]): float(u["norm"]) for step in want.get("steps", [])
                       for u in step.get("updates", [])}
        rows = []
        for step in it.steps:
            for u in step.updates:
                expected = ref_updates.get(u.name)
                if expected is None:
                    rows.append(ValueCheck(u.name, u.worker, RowStatus.EXTRA))
                    continue
                rows.append(compare_values(u.name, u.worker, [u.norm], [expected], "float32"))
        check = IterationCheck(comparable=True, loss=loss, loss_match=loss_match,
                               updates=tuple(rows))
    return Iteration(trainer=it.trainer, index=it.index, context_id=it.context_id, loss=it.loss,
                     gradients=it.gradients, steps=it.steps, enter_us=it.enter_us,
                     exit_us=it.exit_us, reference=check)


def _final_checks(final: Mapping[str, Mapping[str, Any]], ref: Mapping[str, Any],
                  interleaved: str | None) -> list[ValueCheck]:
    """Each parameter after training against the reference's."""
    want: Mapping[str, Any] = ref.get("final", {}) if ref else {}
    rows: list[ValueCheck] = []
    for worker in sorted(final):
        for name, entry in final[worker].items():
            expected = want.get(name)
            if not ref or ref.get("outcome") != "completed":
                rows.append(ValueCheck(name, worker, RowStatus.NOT_COMPARED, reason="no reference"))
            elif interleaved:
                rows.append(ValueCheck(name, worker, RowStatus.NOT_COMPARED, reason=interleaved))
            elif expected is None:
                rows.append(ValueCheck(name, worker, RowStatus.EXTRA))
            else:
                rows.append(compare_values(name, worker, entry.get("all"), expected.get("all"),
                                           str(entry.get("dtype", ""))))
    seen = {r.name for r in rows}
    for name, entry in want.items():
        if name not in seen and ref.get("outcome") == "completed" and not interleaved:
            rows.append(ValueCheck(name, str(entry.get("worker", "")), RowStatus.MISSING))
    return rows
