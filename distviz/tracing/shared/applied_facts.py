"""What one local optimizer step finds about the gradients a distributed backward left in its
context, and the notes it gives (torch-free; ``distviz.tracing.hooks.applied`` reads the
tensors).

A parameter's ``.grad`` is told by a ``GradKey``: the identity and version of the ``.grad``
tensor (``None`` when there is none; the hook keeps the tensor weakly between steps, so a
freed one, whose address a new tensor may reuse, is ``GONE``). A step whose context holds a
gradient for a parameter does not apply it when ``.grad`` is ``None``, or has the key it had
after the optimizer's previous step (nothing wrote it since). ``Tally`` counts, per parameter, the steps that asked
and whether a context ever held a gradient for it. (A gradient that is all zeros is said
from the recorded context's trace, with the RPC output that caused it:
``distviz.tracing.recording.report.zero_notes``, ``distviz why``'s fact.)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from distviz.words import plural

GradKey = tuple[int, int] | None
#: The key of a ``.grad`` tensor freed since it was kept: equal to no tensor's.
GONE: GradKey = (-1, -1)
#: How many parameters a note names before it says how many more there are.
NAMED = 8


def grad_key(t: Any) -> GradKey:
    """``(id(t.grad), t.grad._version)``, or ``None`` without a ``.grad``."""
    g = t.grad
    return None if g is None else (id(g), int(g._version))


class Held(NamedTuple):
    """A context holds a gradient for a parameter: the context's id."""

    context: int


class Step(NamedTuple):
    """What one step found: the parameters (ids) whose context gradient it does not apply,
    in the optimizer's order, how many of them have no ``.grad`` at all, and the context."""

    not_applied: list[int]
    none_count: int
    context: int | None


def judge(params: list[tuple[int, GradKey]], held: dict[int, Held],
          before: dict[int, GradKey] | None) -> Step:
    """``params``: each parameter's id and ``.grad`` key now; ``held``: what live contexts hold
    by parameter id; ``before``: the keys after the optimizer's previous step (``None``: its
    first step)."""
    out: list[int] = []
    nones = 0
    context: int | None = None
    for pid, key in params:
        h = held.get(pid)
        if h is None:
            continue
        if key is None:
            nones += 1
        elif before is None or before.get(pid, ()) != key:
            continue        # written since the last step (or the first step: cannot tell)
        out.append(pid)
        context = h.context if context is None else context
    return Step(out, nones, context)


def shown(names: list[str], named: int = NAMED) -> str:
    """``a, b, c`` or ``a, ..., h, 3 more``."""
    return ", ".join(names[:named]) + (f", {len(names) - named} more" if len(names) > named
                                       else "")


def not_applied_text(site: str | None, written: str | None, optimizer: str,
                     names: list[str], nones: int, count: int, context: str) -> str:
    """The note for a step that does not apply a context's gradients: ``site`` the program's
    line, ``written`` the call as written, ``nones`` how many of the ``count`` parameters
    have no ``.grad`` (the rest a stale one)."""
    one = count == 1
    call = f"`{written}`" if written else f"{optimizer}.step()"
    where = f"{site}: " if site else ""
    if nones == count:
        state = "it has no .grad" if one else "they have no .grad"
    elif nones == 0:
        state = ("its .grad is stale" if one else "their .grad is stale") + \
            " (unchanged since the previous step)"
    else:
        state = f"{nones} have no .grad and {count - nones} a stale one"
    its = "its" if one else "their"
    return (f"{where}{call} steps a local {optimizer} over {plural(count, 'parameter')} whose "
            f"gradient a distributed backward left in {context} ({shown(names)}), but "
            f"{state}: dist_autograd.backward never fills .grad, so this step never applies "
            f"{its} gradient. Fix: step a torch.distributed.optim.DistributedOptimizer with "
            "the context (opt.step(context_id)), or copy the context's gradients into .grad "
            "before the step (for p, g in dist_autograd.get_gradients(context_id).items(): "
            "p.grad = g)")


class _Rec:
    """One parameter's tally: its name, the steps that asked, whether a context held a
    gradient for it."""

    __slots__ = ("name", "asked", "seen")

    def __init__(self, name: str) -> None:
        self.name, self.asked, self.seen = name, 0, False


class Tally:
    """Per parameter id, over the steps of the run (see the module docstring)."""

    def __init__(self) -> None:
        self.recs: dict[int, _Rec] = {}

    def clear(self) -> None:
        self.recs.clear()

    def count(self, held: dict[int, Held], params: Iterable[int], bare: bool,
              namer: Callable[[list[int]], list[str]]) -> None:
        """One step over ``params`` (ids): counted when a live context holds gradients for some
        of them, or when one is alive and none of them has a ``.grad`` (``bare``: the program
        copied what the context held, nothing); a step over parameters that a local backward
        gave a ``.grad``, with no context gradient for any, is a local training's."""
        ids = list(params)
        if not bare and not any(pid in held for pid in ids):
            return
        fresh = [pid for pid in ids if pid not in self.recs]
        for pid, name in zip(fresh, namer(fresh) if fresh else [], strict=True):
            self.recs[pid] = _Rec(name)
        for pid in ids:
            rec = self.recs[pid]
            rec.asked += 1
            rec.seen = rec.seen or pid in held

    def finding(self) -> str | None:
        """The note for the parameters that steps asked about and no context ever held a
        gradient for, or ``None``."""
        missing = [r for r in self.recs.values() if r.asked and not r.seen]
        if not missing:
            return None
        steps = max(r.asked for r in missing)
        one = len(missing) == 1
        it = "it" if one else "them"
        return (f"{plural(len(missing), 'parameter')} of a local optimizer got no gradient in "
                f"any distributed backward ({shown([r.name for r in missing])}): "
                f"dist_autograd.get_gradients(context_id) on {'its' if one else 'their'} "
                f"owner held none for {it} in "
                + ("the only step that asked" if steps == 1 else f"any of the {steps} steps "
                   "that asked") + f", so the optimizer never changes {it}: nothing the loss "
                f"uses depends on {it} with grad enabled (an output used through .detach() or "
                "under torch.no_grad(), or not used)")
