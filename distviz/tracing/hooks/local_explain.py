"""Why a local backward inside a dist autograd context, or nested in a distributed backward,
loses its gradients, in the program's terms (torch side; ``distviz.tracing.hooks.local_backward``
is the hook that calls it, and imports it at the first such backward).

* ``checked``, before PyTorch runs the call: a local backward inside a context is explained now
  (``explain_local``: the call's line, the RPC results the engine meets, the fix); for one
  nested in a distributed backward, the parameters it may write ``.grad`` of (``Before``).
* ``report_left``, after it: the parameters whose ``.grad`` it changed, named with the Function,
  its line and the context.

Each finding is said once per call site and process; the graph walk is iterative and stops after
``limits.TRACE_LOCAL_WALK`` nodes.
"""

from __future__ import annotations

import ast
import functools
import linecache
import os
import sysconfig
import types
from typing import Any

import torch
import torch.autograd.function as autograd_function
import torch.distributed.autograd as dist_autograd

from distviz.frames import display, outwards, own_frames
from distviz.limits import TRACE_LOCAL_WALK
from distviz.recorder import contexts
from distviz.recorder.contexts import context_or_none
from distviz.tracing import callsites
from distviz.tracing.shared import inflight, journal, live, naming, process
from distviz.tracing.snapshot import listener as snapshot_listener
from distviz.words import context_label, plural

#: How many RPCs or parameters a finding names before it says how many more there are.
NAMED = 3
_TORCH = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_HERE = os.path.dirname(os.path.abspath(__file__)) + os.sep
#: torch's own tests (``torch/testing``) call a local backward as a program does
_TORCH_TESTS = _TORCH + "testing" + os.sep
#: Python's standard library (``multiprocessing``'s ``run`` is no line of the program's)
_STDLIB = os.path.join(sysconfig.get_paths()["stdlib"], "")
_APPLY = autograd_function.BackwardCFunction.apply.__code__
_SAID: set[tuple[Any, ...]] = set()
os.register_at_fork(after_in_child=_SAID.clear)


def checked(t_outputs: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
             frame: types.FrameType | None) -> Before | None:
    """The slow path, before PyTorch runs the call (a context is open in this process, or the
    call is nested in a backward): explain a local backward in a context now; for one nested
    in a distributed backward, what ``report_left`` reads after it. ``frame``: the caller's."""
    ctx = callsites.current_context()
    if ctx is None and not distributed_running():
        return None
    accumulate = bool(kwargs.get("accumulate_grad", True))
    inputs = args[3] if len(args) > 3 else kwargs.get("inputs")
    if ctx is not None:
        explain_local(ctx, t_outputs, accumulate, bool(inputs), frame)
        return None
    return leaves_before(t_outputs, inputs, frame) if accumulate else None


def distributed_running() -> bool:
    """Whether a distributed backward runs in this process now (PyTorch's own count; none
    before RPC starts, when PyTorch refuses to count)."""
    try:
        info = dist_autograd._get_debug_info()
    except RuntimeError:    # distributed autograd not initialized: no RPC in this process
        return False
    return int(info.get("num_current_backward_passes", 0) or 0) > 0


# -- the graph ---------------------------------------------------------------------------------

class Walked:
    """What a local backward's graph holds: its RPC nodes (``RecvRpcBackward``), its leaves,
    whether the walk saw all of it, and whether it met ``target``. (A plain class: every traced
    process loads this module, and a dataclass costs a fraction of a millisecond to make.)"""

    __slots__ = ("recvs", "leaves", "complete", "found")

    def __init__(self) -> None:
        self.recvs: list[Any] = []
        self.leaves: list[torch.Tensor] = []
        self.complete = True
        self.found = False


def starts(t_outputs: Any) -> list[Any]:
    """The graph nodes a backward starts from (tensors' ``grad_fn``, ``GradientEdge`` nodes)."""
    outs = t_outputs if isinstance(t_outputs, (tuple, list)) else (t_outputs,)
    nodes = []
    for t in outs:
        node = t.grad_fn if isinstance(t, torch.Tensor) else getattr(t, "node", None)
        if node is not None:
            nodes.append(node)
    return nodes


def walk(roots: list[Any], limit: int = TRACE_LOCAL_WALK, target: Any = None) -> Walked:
    """The nodes reachable from ``roots``, each once, with an explicit stack, at most
    ``limit`` of them; the walk ends early when it meets ``target``."""
    out = Walked()
    seen: set[Any] = set()
    todo = list(roots)
    while todo:
        fn = todo.pop()
        if fn in seen:
            continue
        if len(seen) >= limit:
            out.complete = False
            break
        seen.add(fn)
        if target is not None and fn is target:
            out.found = True
            break
        if fn.name().endswith("RecvRpcBackward"):
            out.recvs.append(fn)
            continue
        variable = getattr(fn, "variable", None)
        if isinstance(variable, torch.Tensor):
            out.leaves.append(variable)
        todo.extend(nxt for nxt, _ in fn.next_functions if nxt is not None)
    return out


# -- where the call was made -------------------------------------------------------------------

Frame = tuple[str, int, str]


def call_frame(frame: types.FrameType | None) -> Frame | None:
    """The innermost frame outside torch (but its tests), distviz and Python's standard
    library: the line that made the call (the program's, or a library's such as fairscale's)."""
    for f in outwards(frame):
        path = os.path.abspath(f.f_code.co_filename)
        if f.f_code.co_filename.startswith("<") or path.startswith(_HERE):
            continue
        if path.startswith(_TORCH) and not path.startswith(_TORCH_TESTS):
            continue
        if path.startswith(_STDLIB) and not ("site-packages" in path or "dist-packages" in path):
            continue
        return path, f.f_lineno or 0, f.f_code.co_name
    return None


def _display(path: str) -> str:
    """A file as people read it: a library's from its package (``fairscale/nn/...``)."""
    for marker in ("site-packages" + os.sep, "dist-packages" + os.sep):
        if marker in path:
            return path.split(marker, 1)[1]
    return display(path)


def where(call: Frame | None, frame: types.FrameType | None) -> str:
    """``train.py:26 in run``, or a library's line followed by the program's frames."""
    own = own_frames(frame, 2)
    parts = [f"{_display(p)}:{line} in {fn}" for p, line, fn in own]
    if call is not None and (not own or own[0] != call):
        parts.insert(0, f"{_display(call[0])}:{call[1]} in {call[2]}")
    return " <- ".join(parts) or "an unknown line"


def _written(call: Frame | None, accumulate: bool) -> str:
    """The call as the program wrote it (its source line), or the API's name."""
    text = linecache.getline(call[0], call[1]).strip() if call is not None else ""
    if text and ("backward" in text or "grad" in text) and len(text) <= 80:
        return text
    return "torch.autograd.backward" if accumulate else "torch.autograd.grad"


def _frame_of(frame: types.FrameType | None, call: Frame | None) -> types.FrameType | None:
    if call is None:
        return None
    return next((f for f in outwards(frame) if os.path.abspath(f.f_code.co_filename) == call[0]
                 and f.f_code.co_name == call[2]), None)


def root_name(t_outputs: Any, frame: types.FrameType | None) -> str:
    """The variable that holds the backward's first root in the calling frame (``loss``)."""
    outs = t_outputs if isinstance(t_outputs, (tuple, list)) else (t_outputs,)
    if frame is not None and outs:
        for name, value in frame.f_locals.items():
            if value is outs[0]:
                return name
    return "loss"


@functools.lru_cache(maxsize=256)
def _with_context(path: str, line: int) -> tuple[str, int, str] | None:
    """``(variable, line, path)`` of the ``with dist_autograd.context() as NAME`` around
    ``path:line``, the innermost one."""
    try:
        tree = ast.parse("".join(linecache.getlines(path)))
    except (SyntaxError, ValueError):
        return None
    best: tuple[str, int, str] | None = None
    for node in ast.walk(tree):
        if not isinstance(node, ast.With) or not node.lineno <= line <= (node.end_lineno or 0):
            continue
        for item in node.items:
            call = item.context_expr
            name = call.func.attr if isinstance(call, ast.Call) and \
                isinstance(call.func, ast.Attribute) else None
            if name == "context" and isinstance(item.optional_vars, ast.Name) and \
                    (best is None or node.lineno > best[1]):
                best = (item.optional_vars.id, node.lineno, path)
    return best


# -- a local backward inside a context ---------------------------------------------------------

def explain_local(ctx: Any, t_outputs: Any, accumulate: bool, inputs: bool,
                  frame: types.FrameType | None) -> None:
    """Say what a local backward in the context ``ctx`` does (once per call site).
    ``accumulate``: a ``backward`` (into ``.grad``), not ``torch.autograd.grad``. A
    ``backward`` without ``inputs`` runs every node it reaches, the RPC nodes too;
    ``torch.autograd.grad`` and ``inputs=`` run only the nodes on a path to their inputs, and
    an RPC node is on none (it has no inputs in this process)."""
    every_node = accumulate and not inputs
    proc = process.PROCESS
    call = call_frame(frame)
    key = ("local", call)
    if proc is None or key in _SAID:
        return
    _SAID.add(key)
    cid = int(ctx._context_id())
    walked = walk(starts(t_outputs))
    holder = _frame_of(frame, call)
    entered = next((found for path, line, _ in own_frames(frame)
                    if (found := _with_context(path, line)) is not None), None)
    var = entered[0] if entered else "context_id"
    k = proc.index.get(cid)
    label = context_label(k, cid) if k is not None else f"context id {cid}"
    if entered is not None:
        label += f", entered at {_display(entered[2])}:{entered[1]}"
    head = (f"{where(call, frame)}: `{_written(call, accumulate)}` runs PyTorch's local "
            f"autograd engine inside a dist_autograd context ({label})")
    fix = f"dist_autograd.backward({var}, [{root_name(t_outputs, holder)}])"
    nodes = plural(len(walked.recvs), "RPC node")
    if walked.recvs and every_node:
        text = (f"{head} over a graph that holds {nodes}: it meets "
                f"{rpc_phrases(ctx, cid, walked.recvs)}, which only a distributed backward "
                "can run (PyTorch stops there: graphTask_ INTERNAL ASSERT FAILED, "
                f"context.cpp). Fix: {fix} runs the backward across the workers and leaves "
                f"the gradients in the context (dist_autograd.get_gradients({var}))")
    elif walked.recvs:
        text = (f"{head} over a graph that holds {nodes} ({rpc_phrases(ctx, cid, walked.recvs)})"
                ": the local engine stops at them, no gradient crosses to the workers the "
                "results came from, and an input reached only through an RPC gets none "
                "(PyTorch: \"appears to not have been used in the graph\"). Fix: "
                f"{fix}, then dist_autograd.get_gradients({var})")
    else:
        searched = "" if walked.complete else f" in its first {TRACE_LOCAL_WALK:,} nodes"
        if accumulate:
            goes = (f"its gradients go to .grad of {leaf_phrase(walked.leaves, proc, holder)} "
                    "as without a context")
        else:
            goes = "torch.autograd.grad returns its gradients to the caller"
        text = (f"{head}; its graph holds no RPC node{searched}, so {goes}: "
                f"dist_autograd.get_gradients({var}) will not hold them and "
                f"DistributedOptimizer.step({var}) will not apply them. For a distributed "
                f"backward: {fix}")
    _tell(proc, journal.LOCAL_BACKWARD, text)


def rpc_phrases(ctx: Any, cid: int, recvs: list[Any]) -> str:
    """``the RecvRpcBackward of rpc_sync(f) to worker1 at main.py:20 in run, assigned to
    `out``` for the RPC node the engine meets first (the highest sequence number), and how
    many more."""
    recv_id = callsites.recv_ids(ctx)
    calls = callsites.peek(cid)
    ordered = sorted(recvs, key=lambda fn: -fn._sequence_nr())
    phrases: list[str] = []
    for fn in ordered[:NAMED]:
        mid = recv_id.get(fn)
        rc = next((c for c in calls if mid is not None and mid in c.msg_ids), None)
        if rc is None:
            what = f"message {mid >> 48}:{mid & 0xFFFFFFFFFFFF}" if mid is not None else "an RPC"
            phrases.append(f"the RecvRpcBackward of {what}")
            continue
        site = f" at {rc.site}" if rc.site else ""
        held = f", assigned to `{rc.result_var}`" if rc.result_var else ""
        phrases.append(f"the RecvRpcBackward of {rc.api}({rc.func}) to {rc.callee}{site}{held}")
    more = len(ordered) - NAMED
    first, rest = phrases[0], phrases[1:]
    tail = f" (then {'; '.join(rest)}" + (f"; and {more} more" if more > 0 else "") + ")" \
        if rest else ""
    return first + tail


def leaf_phrase(leaves: list[torch.Tensor], proc: process.Process,
                frame: types.FrameType | None) -> str:
    """``3 leaves (worker0.linear.weight, worker0.linear.bias, x)``."""
    names = _names(leaves, proc, frame)
    shown = ", ".join(names[:NAMED]) + (f", {len(names) - NAMED} more" if len(names) > NAMED
                                         else "")
    return plural(len(leaves), "leaf", "leaves") + (f" ({shown})" if shown else "")


def _names(leaves: list[torch.Tensor], proc: process.Process,
           frame: types.FrameType | None) -> list[str]:
    """The leaves' names: their module parameter paths, else the program's variables, else
    their shapes."""
    worker = proc.worker or "?"
    params = {id(p): name for p, name in naming.parameter_names(worker, frame)}
    local = {id(v): k for k, v in (frame.f_locals.items() if frame is not None else ())
             if isinstance(v, torch.Tensor)}
    return [params.get(id(t)) or local.get(id(t)) or f"a tensor of shape {list(t.shape)}"
            for t in leaves]


# -- gradients that leave a distributed backward -----------------------------------------------

class Before:
    """The parameters a nested local backward may write ``.grad`` of and their ``.grad``
    before it ran, the custom Function whose backward runs it, and where it was called."""

    __slots__ = ("grads", "function", "frame", "where")

    def __init__(self, grads: list[tuple[torch.Tensor, Any]], function: Any,
                 frame: types.FrameType | None, where: str) -> None:
        self.grads, self.function, self.frame, self.where = grads, function, frame, where


def _grad_key(t: torch.Tensor) -> Any:
    g = t.grad
    return None if g is None else (id(g), g._version)


def leaves_before(t_outputs: Any, inputs: Any, frame: types.FrameType | None
                  ) -> Before | None:
    """What ``report_left`` needs, for a local backward nested in a distributed one (once per
    Function and call site)."""
    fn_node = _running_function(frame)
    call = call_frame(frame)
    key = ("left", None if fn_node is None else type(fn_node).__name__, call)
    if key in _SAID:
        return None
    walked = walk(starts(t_outputs))
    leaves = walked.leaves
    if inputs:
        chosen = {id(t) for t in (inputs if isinstance(inputs, (tuple, list)) else (inputs,))}
        leaves = [t for t in leaves if id(t) in chosen]
    params = [t for t in leaves if isinstance(t, torch.nn.Parameter)]
    _SAID.add(key)      # walked once per Function and line, whatever it found
    if not params:
        return None
    return Before([(t, _grad_key(t)) for t in params], fn_node, frame, where(call, frame))


def _running_function(frame: types.FrameType | None) -> Any:
    """The custom Function node whose backward runs this call (``BackwardCFunction.apply``'s
    ``self`` on the stack)."""
    return next((f.f_locals.get("self") for f in outwards(frame) if f.f_code is _APPLY), None)


def report_left(before: Before) -> None:
    """Name the parameters whose ``.grad`` the nested backward changed."""
    proc = process.PROCESS
    changed = [t for t, was in before.grads if t.grad is not None and _grad_key(t) != was]
    if proc is None or not changed:
        return
    node = before.function
    function = node.name() if node is not None else "a custom Function"
    names = _names(changed, proc, before.frame)
    shown = ", ".join(names[:NAMED]) + (f", {len(names) - NAMED} more" if len(names) > NAMED
                                         else "")
    one = len(changed) == 1
    text = (f"during the distributed backward of {context_phrase(node)}, {function}'s backward "
            f"ran a local torch.autograd.backward at {before.where}: "
            f"{plural(len(changed), 'parameter')} got {'its' if one else 'their'} gradient in "
            f".grad, not in the context ({shown}): dist_autograd.get_gradients(context_id) "
            f"does not hold {'it' if one else 'them'} and DistributedOptimizer.step(context_id) "
            f"will not apply {'it' if one else 'them'}")
    _tell(proc, journal.GRADS_LEFT, text)


def context_phrase(node: Any) -> str:
    """Which context's backward runs the Function ``node``: one whose recording on this worker
    holds the node (with the node's id in its trace), one this process started
    (``inflight.TABLE``), or one whose graph here reaches the node."""
    proc = process.PROCESS
    for cid in contexts.recorded_contexts():
        rec = contexts.record_of(cid)
        if rec is not None and node is not None and node in rec.ids:
            k = proc.index.get(cid) if proc is not None else None
            label = context_label(k, cid) if k else f"context id {cid} of {_initiator(cid)}"
            return f"{label} (the Function is {rec.ids[node]} in its trace)"
    running = inflight.TABLE.by_context()
    candidates = set(running) | set(snapshot_listener.OPEN)
    for cid in sorted(candidates):
        ctx = context_or_none(cid)
        if ctx is None:
            continue
        roots = list(ctx._send_functions().values())
        entry = running.get(cid)
        if entry is not None:
            roots.extend(starts(list(entry.roots)))
        if len(candidates) == 1 or (node is not None and walk(roots, target=node).found):
            k = entry.step if entry is not None else (proc.index.get(cid) if proc else None)
            return context_label(k, cid) if k else f"context id {cid} of {_initiator(cid)}"
    return "a context another worker started"


def _initiator(context_id: int) -> str:
    """The name of the worker that made ``context_id`` (its rank is the id's top 16 bits)."""
    import torch.distributed.rpc as rpc
    rank = context_id >> 48
    try:
        infos = rpc._get_current_rpc_agent().get_worker_infos()
    except Exception:  # noqa: BLE001 - the agent is gone
        infos = []
    return next((str(w.name) for w in infos if int(w.id) == rank), f"rank {rank}")


def _tell(proc: process.Process, kind: journal.EventKind, text: str) -> None:
    """Say ``text`` now and log it for the summary."""
    who = f"{proc.worker}: " if proc.worker else ""
    live.say(who + text)
    journal.append(proc.config.session_dir, journal.Event(
        kind=kind, pid=os.getpid(), worker=proc.worker, message=text))
