"""Why a leaf gets, or does not get, a gradient: ``distviz why TRACE NAME`` (pure).

``why(trace, name)`` finds the leaf ``name`` names (its variable, ``ps.encoder.weight``, or its
node id) and answers from the graph and the replay:

* **reached**: the path a gradient takes from a root of a pass to the leaf's
  ``AccumulateGrad`` (every node, its worker, the replay step it ran, and each gradient message
  crossed with the RPC that made it), and the replay step where the gradient is accumulated
  into the context. Where a real run is recorded and PyTorch's context holds no gradient for
  the leaf, a Python backward on the path (a custom ``torch.autograd.Function``) returned
  ``None`` for it, or computed it itself with a local backward into ``.grad``.
* **reached, never accumulated**: the pass hangs or raises first (the replay's reason).
* **not reachable from the roots**: where the path breaks, walking up from the leaf: an RPC
  result the loss does not use (in the words of the hang's explanation, ``hang.starved_send``),
  an RPC made under ``torch.no_grad()``, or a tensor computed from the leaf that the loss does
  not use.
* **not in the graph**: a named tensor the recorder saw outside the graph
  (``trace.absent_leaves``): it does not require grad, or requires it and the forward never
  used it with grad enabled (not used, used through ``.detach()`` or under
  ``torch.no_grad()``; the graph cannot tell these apart).

Raises ``UsageError`` for a name the trace does not know, with the closest name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from distviz.analyses.cut_answers import RunCuts
from distviz.cuts import Cut, Explained
from distviz.errors import UsageError
from distviz.replay.graph import (
    OP,
    RECV,
    SEND,
    IndexedGraph,
    initial_dependencies,
    reachable_nodes,
)
from distviz.replay.hang import starved_send
from distviz.replay.result import Replay
from distviz.replay.result import replay as run_replay
from distviz.replay.rpc_calls import CallIndex
from distviz.trace import NodeKind, Trace, message_label
from distviz.trace.absent import AbsentLeaf
from distviz.words import plural, suggest

__all__ = ["WHY_KINDS", "Hop", "Why", "WhyKind", "call_phrase", "why"]

WhyKind = Literal["arrived", "python", "missing", "hang", "error", "unused_result",
                  "no_grad_rpc", "no_recv", "not_in_loss", "requires_grad_false",
                  "not_reached", "no_pass", "cut", "named"]

#: Every answer, the first one a gradient: ``arrived`` (accumulated into the context);
#: reached but none in PyTorch's context: ``python`` (a Python backward on the path), ``missing``;
#: reached, never accumulated: ``hang``, ``error``; not reachable from the roots:
#: ``unused_result``, ``no_grad_rpc``, ``no_recv``, ``not_in_loss``; not in the graph:
#: ``requires_grad_false``, ``not_reached``; ``no_pass``: the trace has no backward pass;
#: from the run's cuts (``index.json``): ``cut``, the program's line that cut its way to the
#: loss; ``named``: the run named it without a gradient, and no cut recorded explains it.
WHY_KINDS: tuple[WhyKind, ...] = (
    "arrived", "python", "missing", "hang", "error", "unused_result", "no_grad_rpc", "no_recv",
    "not_in_loss", "requires_grad_false", "not_reached", "no_pass", "cut", "named")
#: The trace's answers a cut of the run replaces: the way breaks, or no gradient arrives.
_CUT_REPLACES: tuple[WhyKind, ...] = (
    "hang", "unused_result", "no_grad_rpc", "no_recv", "not_in_loss", "requires_grad_false",
    "not_reached", "missing")


@dataclass(frozen=True, slots=True)
class Hop:
    """One node on a gradient's path, in the order the gradient flows.

    ``step``: the replay step the node ran (its ``AccumulateGrad``: the step the gradient was
    accumulated), ``None`` when it never ran. ``message``/``sender``/``call``: on a send, the
    gradient message that brings it its gradient from ``sender``'s recv and the RPC that made
    the pair (``rpc_sync(my_add) at line 11``). ``python``: a custom Function's node, where its
    backward is defined when known (else ``""``); ``None`` for other nodes."""

    node: str
    worker: str
    name: str
    step: int | None = None
    message: str | None = None
    sender: str | None = None
    call: str | None = None
    python: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "worker": self.worker, "name": self.name, "step": self.step,
                "message": self.message, "from": self.sender, "call": self.call,
                "python": self.python}


@dataclass(frozen=True, slots=True)
class Why:
    """The answer for one leaf: ``kind`` (``WHY_KINDS``), ``gets_gradient``, the one-line
    ``summary``, ``path`` (from a root when it is reached, else from where it breaks; empty for
    a tensor outside the graph), the ``pass_index`` and replay ``step`` of its accumulation,
    ``details`` (more sentences) and ``fixes``."""

    name: str
    leaf: str | None
    worker: str
    kind: WhyKind
    gets_gradient: bool
    summary: str
    path: tuple[Hop, ...] = ()
    pass_index: int | None = None
    step: int | None = None
    details: tuple[str, ...] = ()
    fixes: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "leaf": self.leaf, "worker": self.worker, "kind": self.kind,
                "gets_gradient": self.gets_gradient, "summary": self.summary,
                "pass": self.pass_index, "step": self.step,
                "path": [h.to_json() for h in self.path], "details": list(self.details),
                "fixes": list(self.fixes)}


def why(trace: Trace, name: str, made: Replay | None = None,
        cuts: RunCuts | None = None) -> Why:
    """Why the leaf ``name`` (a variable, or an ``AccumulateGrad`` node id) of ``trace`` gets a
    gradient or not. ``made``: a FAST-mode replay of ``trace`` already made (else one is made
    here). ``cuts``: the run's cuts (``index.json``): a parameter the run named without a
    gradient is answered with the cut that caused it, even where its worker's nodes are not
    in the trace. Raises ``UsageError`` when no leaf, no recorded tensor and no parameter the
    run named has that name."""
    run = cuts if cuts is not None else RunCuts()
    leaves = [n for n in trace.nodes_of_kind(NodeKind.ACCUMULATE_GRAD) if name in (n.var, n.id)]
    leaf = leaves[0].id if leaves else None
    named = run.explained_for(name)
    if named is not None and named.cut is not None:
        return _from_cut(name, named.cut, leaf, named.worker)
    if not leaves:
        absent = next((a for a in trace.absent_leaves if a.var == name), None)
        seen = run.seen_for(name)
        if seen is not None:
            return _from_cut(name, seen, None, absent.worker if absent else seen.worker)
        if absent is not None:
            return _absent(trace, absent)
        if named is not None:
            return _named(named)
        raise UsageError(_unknown(trace, name, run.names()))
    rp = made if made is not None and made.trace is trace else run_replay(trace)
    g = rp.graph
    answer = _Asked(trace, rp, g, g.index[leaves[0].id], name).answer()
    if answer.gets_gradient or answer.kind not in _CUT_REPLACES or not run.seen:
        return answer
    seen = run.seen_for(name, answer.worker, " ".join((answer.summary, *answer.details)),
                        trace.context_id)
    if seen is None:
        return answer
    return _from_cut(name, seen, leaf, answer.worker, answer.path, answer.pass_index)


def _from_cut(name: str, cut: Cut, leaf: str | None, worker: str,
              path: tuple[Hop, ...] = (), p: int | None = None) -> Why:
    """The answer of the cut that caused ``name``'s missing gradient."""
    return Why(name=name, leaf=leaf, worker=worker, kind="cut", gets_gradient=False,
               summary=f"{cut.what()}{cut.where()}", path=path, pass_index=p,
               details=(f"the cut is a {cut.kind.value} cut made on {cut.worker}",),
               fixes=(cut.fix(),))


def _named(e: Explained) -> Why:
    """A parameter the run named without a gradient that no recorded cut explains."""
    return Why(name=e.names[0] if len(e.names) == 1 else ", ".join(e.names), leaf=None,
               worker=e.worker, kind="named", gets_gradient=False,
               summary=(f"the run named it on {e.worker} without a gradient (index.json), and "
                        "no cut distviz recorded explains it; its worker's nodes are not in "
                        "this trace's graph"),
               fixes=("trace the context whose RPCs reach it (distviz trace --contexts ...) "
                      "to see its path",))


def _unknown(trace: Trace, name: str, named: list[str] | None = None) -> str:
    vars_ = [n.var for n in trace.nodes_of_kind(NodeKind.ACCUMULATE_GRAD) if n.var]
    known = vars_ + [a.var for a in trace.absent_leaves] + (named or [])
    hint = suggest(name, known)
    if not hint and known:
        shown = sorted(set(known))
        hint = (f"; its named leaves are {', '.join(shown[:8])}"
                + (f" and {len(shown) - 8} more" if len(shown) > 8 else ""))
    return f"no leaf named '{name}' in the trace{hint}"


def call_phrase(trace: Trace, c: int | None) -> str | None:
    """``rpc_sync(my_add) at line 11`` (or at the program's call site), for call ``c``."""
    if c is None:
        return None
    rc = trace.rpc_calls[c]
    where = f" at {rc.site}" if rc.site else (f" at line {rc.line}" if rc.line is not None else "")
    return f"{rc.api}({rc.func}){where}"


class _Asked:
    """One question: the trace, its replay and the leaf (a node index)."""

    def __init__(self, trace: Trace, rp: Replay, g: IndexedGraph, leaf: int, name: str) -> None:
        self.trace, self.rp, self.g, self.leaf, self.name = trace, rp, g, leaf, name
        self.worker = g.workers[g.worker[leaf]]
        self.calls = CallIndex(trace, g)
        self.functions = trace.meta.functions or {}

    def answer(self) -> Why:
        g = self.g
        if not g.roots:
            return self._why("no_pass", False, "the trace has no backward pass, so nothing "
                             "computes a gradient")
        reached = [p for p in range(len(g.roots)) if reachable_nodes(g, g.roots[p])[self.leaf]]
        if not reached:
            return self._broken(0)
        steps = {p: self._steps(p) for p in reached}
        arrived = [p for p in reached if self.leaf in steps[p]]
        p = arrived[0] if arrived else reached[0]
        path = self._hops(_path_down(g, g.roots[p], self.leaf), steps[p])
        if arrived:
            return self._arrived(p, path, steps[p][self.leaf])
        if self.rp.error is not None and self.rp.error.pass_index == p:
            err = self.rp.error
            return self._why("error", False, f"pass {p + 1} raises before the gradient arrives: "
                             f"{err.worker} raised in {err.node or '?'}", path=path, p=p)
        hang = self.rp.hang
        reason = f": {hang.summary}" if hang is not None else ""
        if hang is not None:
            up = _walk_up(g, self.leaf)[0]
            mine = [b for b in hang.blocked_sends if g.index[b.node] in up]
            if mine:
                b = mine[0]
                reason = (f": its AccumulateGrad waits for a gradient from {b.worker}'s "
                          f"{g.disp(g.index[b.node])} for message {b.label}, which never comes: "
                          f"{b.reason}")
        return self._why("hang", False, f"the roots reach it, but pass {p + 1} hangs before "
                         f"its gradient arrives{reason}", path=path, p=p,
                         details=self._inputs(p, steps[p]),
                         fixes=hang.fixes if hang is not None else ())

    # -- reached --------------------------------------------------------------------------
    def _arrived(self, p: int, path: tuple[Hop, ...], step: int) -> Why:
        msgs = sum(1 for h in path if h.message is not None)
        via = f" across {plural(msgs, 'gradient message')}" if msgs else ""
        where = f"replay step {step}, pass {p + 1}"
        real = self._real_gradients()
        python = [h for h in path if h.python is not None]
        if self.g.ids[self.leaf] not in self.rp.accumulated:
            return self._undefined(p, path, step, via, real)
        if real is not None and self.g.ids[self.leaf] not in real:
            if python:
                fn = python[-1]
                site = f" ({fn.python})" if fn.python else ""
                return self._why(
                    "python", False,
                    f"the roots reach it{via} (the replay accumulates it at {where}), but "
                    f"PyTorch's context holds no gradient for it: the Python backward of "
                    f"{fn.name} on {fn.worker}{site} returned None for this input, or computed "
                    "its gradient itself with a local backward, which puts it in .grad, not "
                    "in the context", path=path, p=p, step=step,
                    fixes=(f"return a gradient (not None) for this input from {fn.name}'s "
                           "backward",
                           "don't run a local torch.autograd.backward inside a Function's "
                           "backward in a dist_autograd context: DistributedOptimizer reads "
                           "only the context's gradients"))
            return self._why("missing", False,
                             f"the roots reach it{via} (the replay accumulates it at {where}), "
                             "but PyTorch's context holds no gradient for it", path=path, p=p,
                             step=step)
        zero = real is not None and bool(real[self.g.ids[self.leaf]].get("zero"))
        details = [self._zero_source(python, path, p)] if zero else []
        if python and real is None:
            details.append("the path crosses a Python backward, whose values the replay "
                           "cannot know: it may return None for this input")
        return self._why("arrived", True,
                         f"it gets its gradient in pass {p + 1}{via}: accumulated into the "
                         f"context at {where}", path=path, p=p, step=step,
                         details=self._inputs(p, self._steps(p)) + tuple(details))

    def _zero_source(self, python: list[Hop], path: tuple[Hop, ...], p: int) -> str:
        """Where a leaf's all-zero gradient comes from: a known custom Function on its path
        that returns zeros or None, else the RPC output on its path the loss does not use
        (the output FAST mode sent zeros for, ``unused_output``)."""
        nodes, index = self.trace.nodes, self.g.index
        for h in reversed(python):
            custom = nodes[index[h.node]].custom
            if custom == "zeros":
                return (f"PyTorch's gradient is all zeros: the Python backward of {h.name} "
                        "returns zeros")
            if custom == "none":
                return (f"PyTorch's gradient is all zeros: the Python backward of {h.name} "
                        "returns None for it, which the next custom backward gets as zeros, "
                        "or an RPC sends on as zeros")
        unused = self.unused_output(path, p)
        if unused is not None:
            return f"PyTorch's gradient is all zeros: {unused}"
        return ("PyTorch's gradient is all zeros (FAST mode sends zeros for an RPC result "
                "the loss does not use)")

    def unused_output(self, path: tuple[Hop, ...], p: int) -> str | None:
        """``output 1 of rpc_sync(forward) to ps at main.py:20 in run (assigned to `out`) is
        not used by the loss: FAST mode sends zeros for it``: the RPC whose gradient message
        on ``path`` in pass ``p`` the replay sent with zeros in some slots, or ``None``."""
        zeros = {ev.message.label: ev.message.zero_slots for ev in self.rp.events
                 if ev.action == "send_gradient" and ev.pass_index == p
                 and ev.message is not None and ev.message.zero_slots}
        for h in path:
            slots = zeros.get(h.message) if h.message is not None else None
            if not slots:
                continue
            c = self.calls.call_of(self.g.index[h.node])
            rc = self.trace.rpc_calls[c] if c is not None else None
            which = (f"output {slots[0]}" if len(slots) == 1 else
                     "outputs " + ", ".join(str(k) for k in slots))
            if rc is None:
                return (f"{which} of the RPC behind message {h.message} is not used by "
                        f"{_loss(self.trace, p)}: FAST mode sends zeros for it")
            where = f" at {rc.site}" if rc.site else ""
            held = f" (assigned to `{rc.result_var}`)" if rc.result_var else ""
            parts = _tuple_names(rc.result_var)
            if len(slots) == 1 and parts is not None and slots[0] < len(parts):
                which += f" (`{parts[slots[0]]}`)"
            return (f"{which} of {rc.api}({rc.func}) to {rc.callee}{where}{held} is not used "
                    f"by {_loss(self.trace, p)}: FAST mode sends zeros for it")
        return None

    def _undefined(self, p: int, path: tuple[Hop, ...], step: int, via: str,
                   real: dict[str, dict[str, Any]] | None) -> Why:
        """The replay runs the leaf's AccumulateGrad with undefined gradients only: a custom
        Function it knows returns None on the way (``distviz.replay.undefined``)."""
        g, nodes = self.g, self.trace.nodes
        dropped = [h for h in path if h.python is not None
                   and nodes[g.index[h.node]].custom == "none"]
        fn = dropped[-1] if dropped else path[0]
        details = (("PyTorch's context holds no gradient for it either",)
                   if real is not None and g.ids[self.leaf] not in real else ())
        return self._why(
            "python", False,
            f"the roots reach it{via}, but the Python backward of {fn.name} on {fn.worker} "
            "returns None for it, and nothing on the way turns that into zeros: its "
            f"gradient is undefined, and its AccumulateGrad (replay step {step}, pass {p + 1}) "
            "puts nothing into the context", path=path, p=p, step=step, details=details,
            fixes=(f"return a gradient (not None) for this input from {fn.name}'s backward",))

    def _inputs(self, p: int, steps: dict[int, int]) -> tuple[str, ...]:
        """When the leaf waits for several gradients in pass ``p`` (FAST mode counts the edges
        from the roots and from every send): where each comes from, and the replay step it
        ran."""
        g = self.g
        feeds = _preds(g)[self.leaf]
        if len(feeds) < 2:
            return ()
        counted = initial_dependencies(g, p)   # what FAST mode makes each node wait for
        feeds = [x for x in feeds if g.ids[x] in counted]
        if len(feeds) < 2:
            return ()
        each = ", ".join(
            f"{g.disp(x)}{_msg(g, x)} on {g.workers[g.worker[x]]} "
            f"({'step ' + str(steps[x]) if x in steps else 'never runs'})" for x in feeds)
        return (f"{g.disp(self.leaf)} waits for {len(feeds)} gradients in pass {p + 1}, from "
                f"{each}",)

    def _real_gradients(self) -> dict[str, dict[str, Any]] | None:
        """PyTorch's context gradients by leaf id, when a real backward completed (or the
        watch recorded what ``get_gradients`` held)."""
        real = self.trace.real
        if real is not None and real.outcome == "completed":
            return real.gradients
        watched = (self.trace.meta.traced or {}).get("watched")
        if isinstance(watched, dict) and watched.get("state") == "returned" \
                and isinstance(watched.get("gradients"), dict):
            return dict(watched["gradients"])
        return None

    def _steps(self, p: int) -> dict[int, int]:
        """The replay step each node of pass ``p`` first ran (an execute or an accumulate)."""
        index = self.g.index
        out: dict[int, int] = {}
        for ev in self.rp.events:
            if ev.pass_index == p and ev.node is not None and ev.action in ("execute",
                                                                            "accumulate"):
                out.setdefault(index[ev.node], ev.step)
        return out

    # -- not reachable from the roots -----------------------------------------------------
    def _broken(self, p: int) -> Why:
        """The leaf the roots never reach: walk up from it to where every path starts."""
        g = self.g
        down, tops = _walk_up(g, self.leaf)
        breaks = [self._break(p, t, down) for t in tops]
        breaks.sort(key=lambda b: WHY_KINDS.index(b.kind))
        first = breaks[0]
        more = tuple(b.summary for b in breaks[1:])
        return Why(name=self.name, leaf=first.leaf, worker=first.worker, kind=first.kind,
                   gets_gradient=False, summary=first.summary, path=first.path, pass_index=p,
                   details=first.details + more, fixes=first.fixes)

    def _break(self, p: int, top: int, down: dict[int, int]) -> Why:
        g = self.g
        path = self._hops(_chain(down, top), {})
        loss = _loss(self.trace, p)
        kind = g.kind[top]
        if kind in (RECV, SEND):
            s = g.target_send(g.msg[top])[1] if kind == RECV else top
            b = starved_send(self.trace, g, s, p)
            what: WhyKind = {"unused": "unused_result", "no_grad": "no_grad_rpc"}.get(
                b.kind, "no_recv")   # type: ignore[assignment]
            fixes = _fixes_for(what, b.var)
            return self._why(what, False, f"the roots never reach it: {b.reason}", path=path,
                             p=p, fixes=fixes)
        if kind == OP:
            held = self.trace.nodes[top].vars
            which = (f"{', '.join(f'`{v}`' for v in held)} ({g.disp(top)} on "
                     f"{g.workers[g.worker[top]]})" if held else
                     f"a tensor computed by {g.disp(top)} on {g.workers[g.worker[top]]}")
            return self._why("not_in_loss", False,
                             f"the roots never reach it: it only feeds {which}, which "
                             f"{loss} does not use", path=path, p=p,
                             fixes=("use it in the loss, or pass that tensor to backward as "
                                    "another root",))
        return self._why("not_in_loss", False, f"the roots never reach it: nothing in {loss} "
                         "uses it", path=path, p=p)

    # -- values ---------------------------------------------------------------------------
    def _hops(self, chain: list[int], steps: dict[int, int]) -> tuple[Hop, ...]:
        g, trace = self.g, self.trace
        out: list[Hop] = []
        prev = -1
        for i in chain:
            message = sender = call = None
            if g.kind[i] == SEND and prev >= 0 and g.kind[prev] == RECV:
                message = message_label(g.msg[i])
                sender = g.workers[g.worker[prev]]
                call = call_phrase(trace, self.calls.call_of(i))
            python = None
            if g.kind[i] == OP and trace.nodes[i].python:
                python = self.functions.get(g.ids[i], "")
            out.append(Hop(node=g.ids[i], worker=g.workers[g.worker[i]], name=g.disp(i),
                           step=steps.get(i), message=message, sender=sender, call=call,
                           python=python))
            prev = i
        return tuple(out)

    def _why(self, kind: WhyKind, gets: bool, summary: str, *, path: tuple[Hop, ...] = (),
             p: int | None = None, step: int | None = None, details: tuple[str, ...] = (),
             fixes: tuple[str, ...] = ()) -> Why:
        return Why(name=self.name, leaf=self.g.ids[self.leaf], worker=self.worker, kind=kind,
                   gets_gradient=gets, summary=summary, path=path, pass_index=p, step=step,
                   details=details, fixes=fixes)


def _tuple_names(var: str | None) -> list[str] | None:
    """``["main", "aux"]`` for a result assigned to ``(main, aux)`` or ``main, aux``."""
    if not var or "," not in var:
        return None
    parts = [v.strip() for v in var.strip().strip("()").split(",")]
    return parts if all(v.isidentifier() for v in parts) else None


def _msg(g: IndexedGraph, x: int) -> str:
    return f" (message {message_label(g.msg[x])})" if g.kind[x] == SEND else ""


def _loss(trace: Trace, p: int) -> str:
    root_vars = trace.passes[p].root_vars if p < len(trace.passes) else []
    return "the loss" + (f" ({', '.join(f'`{v}`' for v in root_vars)})" if root_vars else "")


def _fixes_for(kind: WhyKind, var: str | None) -> tuple[str, ...]:
    held = f"`{var}`" if var else "the RPC result"
    if kind == "unused_result":
        return (f"use {held} in the loss, so its gradient flows back",
                "move the RPC outside the dist_autograd context if its result needs no "
                "gradient")
    if kind == "no_grad_rpc":
        return ("make the RPC outside torch.no_grad() if its arguments need a gradient",)
    return ()


def _preds(g: IndexedGraph) -> list[list[int]]:
    """Each node's predecessors along the gradient's way: the nodes whose next edges point at
    it and, for a send, the recv that sends it its gradient message."""
    preds: list[list[int]] = [[] for _ in range(g.n)]
    nxt, at = g.next, g.next_at
    for x in range(g.n):
        for t in nxt[at[x]:at[x + 1]]:
            if t >= 0:
                preds[t].append(x)
        if g.kind[x] == RECV:
            s = g.target_send(g.msg[x])[1]
            if s >= 0:
                preds[s].append(x)
    return preds


def _walk_up(g: IndexedGraph, leaf: int) -> tuple[dict[int, int], list[int]]:
    """Walk up from ``leaf`` (an explicit queue): ``(down, tops)``, ``down[x]`` the node one
    step nearer the leaf from ``x``, ``tops`` the nodes reached that nothing feeds, in the
    order found."""
    preds = _preds(g)
    down: dict[int, int] = {leaf: -1}
    order = [leaf]
    k = 0
    while k < len(order):
        x = order[k]
        k += 1
        for y in preds[x]:
            if y not in down:
                down[y] = x
                order.append(y)
    return down, [x for x in order if not preds[x]]


def _chain(down: dict[int, int], top: int) -> list[int]:
    out = [top]
    while down[out[-1]] >= 0:
        out.append(down[out[-1]])
    return out


def _path_down(g: IndexedGraph, roots: list[int], leaf: int) -> list[int]:
    """A shortest path from a root to ``leaf`` along next edges and gradient messages (recv to
    send), breadth-first."""
    parent: dict[int, int] = {r: -1 for r in roots}
    order = list(roots)
    k = 0
    nxt, at = g.next, g.next_at
    while k < len(order) and leaf not in parent:
        x = order[k]
        k += 1
        out = [t for t in nxt[at[x]:at[x + 1]] if t >= 0]
        if g.kind[x] == RECV:
            out.append(g.target_send(g.msg[x])[1])
        for t in out:
            if t >= 0 and t not in parent:
                parent[t] = x
                order.append(t)
    path = [leaf]
    while parent[path[-1]] >= 0:
        path.append(parent[path[-1]])
    return path[::-1]


def _absent(trace: Trace, a: AbsentLeaf) -> Why:
    """A named tensor outside the graph (``trace.absent_leaves``)."""
    what = "parameter" if a.parameter else "tensor"
    grad = ("its .grad already held a gradient when the graph was recorded: a local backward "
            "(loss.backward(), torch.autograd.backward) put it there, and "
            "dist_autograd.get_gradients(context_id) and DistributedOptimizer do not see it",)
    if a.why == "requires_grad_false":
        return Why(name=a.var, leaf=None, worker=a.worker, kind="requires_grad_false",
                   gets_gradient=False,
                   summary=(f"the {what} `{a.var}` on {a.worker} does not require grad "
                            "(requires_grad=False), so autograd records nothing for it and no "
                            "gradient is computed for it"),
                   details=("a tensor made by .detach() or under torch.no_grad() is such a "
                            "tensor too",) + (grad if a.grad else ()),
                   fixes=(f"create it with requires_grad=True, or call "
                          f"{a.var.rsplit('.', 1)[-1]}.requires_grad_() before the forward, if "
                          "it should train",))
    no_grad = [call_phrase(trace, k) for k, rc in enumerate(trace.rpc_calls)
               if not rc.grad_enabled]
    details = tuple(f"{p} was made under torch.no_grad(): a tensor passed in it gets no "
                    "gradient" for p in no_grad if p) + (grad if a.grad else ())
    return Why(name=a.var, leaf=None, worker=a.worker, kind="not_reached", gets_gradient=False,
               summary=(f"the {what} `{a.var}` on {a.worker} requires grad, but no node of the "
                        "context's graph accumulates into it: the forward did not use it with "
                        "grad enabled (it was not used, used through .detach(), or used under "
                        "torch.no_grad())"),
               details=details,
               fixes=("use it in the forward inside the dist_autograd context, with grad "
                      "enabled and without .detach()",))

