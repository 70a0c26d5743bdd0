"""Pictures a person can read: the view that fits, drawn by Graphviz, with what it said.

``draw_picture(trace, replay, fmt, spec)`` draws the view ``spec`` asks for. Without a detail
it picks the most detailed one that stays readable: it tries every node, then chains folded,
then one box per RPC call (and, for the whole graph, the worker summary last), skipping a try
with more than ``PICTURE_MAX_BOXES`` boxes and laying out the others to see whether they fit in
``PICTURE_MAX_PX`` pixels on a side at 100 % zoom, where the text is 10 pt. Nothing is written
here; the ``Picture`` says which view it is, why the more detailed ones were passed over, how to
get the others, and what Graphviz warned about (a bitmap too large for cairo is shrunk, and the
picture says by how much).
"""

from __future__ import annotations

from dataclasses import dataclass

from distviz.analyses.timing import Timing
from distviz.limits import BITMAP_MAX_PX, PICTURE_MAX_BOXES, PICTURE_MAX_PX
from distviz.render import graphviz_backend
from distviz.render.dot.collapse import plan_boxes
from distviz.render.dot.draw import DETAIL_WORDS, DotGraph, build_dot
from distviz.replay.graph import IndexedGraph
from distviz.replay.values import ReplayLike
from distviz.trace import Trace
from distviz.views.groups import rpc_call_title
from distviz.views.scope import select_scope
from distviz.views.view import DETAILS, Scope, ViewSpec

__all__ = ["Choice", "Picture", "choose_view", "draw_picture", "other_views"]

PX_PER_PT = 96 / 72   # Graphviz bitmaps are drawn at 96 dpi; its sizes are in points


@dataclass(frozen=True, slots=True)
class Choice:
    """The view a picture shows: its DOT, its laid-out size in pixels (when measured), and the
    more detailed views passed over, each with why (``every node: 15,434 boxes``)."""

    dot: DotGraph
    scope: Scope
    size_px: tuple[int, int] | None
    passed_over: tuple[str, ...]
    chosen_by_default: bool

    def sentence(self) -> str:
        """``the whole graph (15,434 nodes): the worker summary, 4 boxes, 900 x 300 px; ...``."""
        size = f", {self.size_px[0]:,} x {self.size_px[1]:,} px" if self.size_px else ""
        out = (f"{self.scope.title}: {DETAIL_WORDS[self.dot.detail]}, "
               f"{self.dot.drawn_nodes:,} boxes{size}")
        if self.passed_over:
            out += ("; the most detailed view that stays readable (" +
                    "; ".join(self.passed_over) + ")")
        return out


@dataclass(frozen=True, slots=True)
class Picture:
    """A drawn picture: the bytes, the view, and what Graphviz said (``warnings``; ``scaled``:
    the factor a bitmap was shrunk by, with a sentence about it in ``warnings``)."""

    data: bytes
    fmt: str
    choice: Choice
    warnings: tuple[str, ...]
    scaled: float | None = None


def _readable(size_pt: tuple[float, float] | None) -> tuple[bool, tuple[int, int] | None]:
    if size_pt is None:
        return True, None
    px = (round(size_pt[0] * PX_PER_PT), round(size_pt[1] * PX_PER_PT))
    return px[0] <= PICTURE_MAX_PX and px[1] <= PICTURE_MAX_PX, px


def _candidates(spec: ViewSpec, scope: Scope) -> list[str]:
    if spec.detail is not None:
        return [spec.detail]
    order = [d for d in reversed(DETAILS) if d != "summary"]
    if scope.kind == "all":
        order.append("summary")
    return order


def choose_view(trace: Trace, replay: ReplayLike | None, spec: ViewSpec,
                step: int | None = None, graph: IndexedGraph | None = None,
                measure: bool = True, timing: Timing | None | bool = True) -> Choice:
    """Return the view to draw (see the module docstring). ``measure=False`` decides by the
    number of boxes alone (no Graphviz is run). ``graph`` and ``timing``: the run's analysis's
    (``distviz.judge.analysis``) when it is made; else the graph is the replay's (or built
    here, without a replay) and the timing is analysed here. Raises ``UsageError`` for a bad
    scope and ``RenderError`` when Graphviz fails while measuring."""
    g = graph if graph is not None else getattr(replay, "graph", None) or IndexedGraph(trace)
    scope = select_scope(g, spec)
    if spec.detail == "summary" and scope.kind != "all":
        from distviz.errors import UsageError
        raise UsageError("--view summary shows every worker; it cannot be used with --worker, "
                         "--rpc-call or --focus")
    tries = _candidates(spec, scope)
    passed: list[str] = []
    last_drawn = -1
    for k, detail in enumerate(tries):
        final = k == len(tries) - 1
        if not final:   # count the boxes first: building the DOT of a huge view is wasted
            plan = plan_boxes(trace, detail, PICTURE_MAX_BOXES, scope, g)
            drawn = sum(1 for b in plan.boxes.values() if b.kind != "ghost")
            if plan.detail != detail or drawn == last_drawn:
                continue   # folding changed nothing
            last_drawn = drawn
            if drawn > PICTURE_MAX_BOXES:
                passed.append(f"{DETAIL_WORDS[detail]}: {drawn:,} boxes")
                continue
        dg = build_dot(trace, replay, step, detail=detail, scope=scope, graph=g,
                       node_budget=PICTURE_MAX_BOXES, timing=timing)
        size = graphviz_backend.measure(dg.source) if measure else None
        ok, px = _readable(size)
        if ok or final:
            return Choice(dg, scope, px, tuple(passed), spec.detail is None)
        assert px is not None
        passed.append(f"{DETAIL_WORDS[detail]}: {px[0]:,} x {px[1]:,} px")
    raise AssertionError("the last candidate is always chosen")


def draw_picture(trace: Trace, replay: ReplayLike | None, fmt: str, spec: ViewSpec,
                 step: int | None = None, graph: IndexedGraph | None = None,
                 choice: Choice | None = None, timing: Timing | None | bool = True) -> Picture:
    """Draw the view as ``fmt`` (``svg``, ``png``, ``pdf`` or ``dot``: the DOT text itself).

    A bitmap larger than cairo draws (``BITMAP_MAX_PX``) is shrunk by Graphviz; the picture's
    warnings then say so with the size its text ends up at. Raises ``UsageError`` for a bad
    scope and ``RenderError`` when Graphviz fails. ``graph`` and ``timing`` as for
    ``choose_view``.
    """
    if choice is None:
        choice = choose_view(trace, replay, spec, step, graph,
                             measure=bool(graphviz_backend.available_backends()), timing=timing)
    if fmt == "dot":
        return Picture(choice.dot.source.encode("utf-8"), fmt, choice, ())
    done = graphviz_backend.render_checked(choice.dot.source, fmt)
    warnings = [f"Graphviz: {w}" for w in done.warnings]
    if done.scaled is not None:
        warnings.append(f"the picture is larger than a bitmap can be ({BITMAP_MAX_PX:,} px on a "
                        f"side), so Graphviz shrank it to {done.scaled:.0%}: its text is about "
                        f"{10 * done.scaled:.1f} pt; draw SVG instead, or a smaller view "
                        "(--worker, --rpc-call, --focus)")
    return Picture(done.data, fmt, choice, tuple(warnings), done.scaled)


def other_views(trace: Trace, choice: Choice) -> list[str]:
    """How to get the other views, with examples from this trace."""
    out = []
    details = [d for d in DETAILS if d != choice.dot.detail
               and (d != "summary" or choice.scope.kind == "all")]
    out.append("--view " + "|".join(details))
    others = [w for w in trace.workers if w != trace.initiator] or trace.workers
    out.append(f"--worker {others[0]}")
    if trace.rpc_calls:
        out.append(f"--rpc-call 0 ({rpc_call_title(trace.rpc_calls[0], 0)})")
    var = next((v for bp in trace.passes for v in bp.root_vars), None) or next(
        (n.var for n in trace.nodes if n.var), None)
    if var:
        out.append(f"--focus {var} --depth 2")
    out.append("-f html to explore every node")
    return out
