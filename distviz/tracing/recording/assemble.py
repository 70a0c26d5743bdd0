"""Assembling a traced context's trace (torch side): every worker's piece, named and merged.

``record_trace`` gathers the whole distributed graph of a context (``recorder.gather``, over the
program's own RPC agent) with ``record_piece`` on each worker: its part of the graph with its
module parameter names, the call sites of the RPCs it made, the program's own autograd
Functions, and distviz's hooks on its nodes, ready for the real backward. The program's
variable names come from its frames (``naming``). The merged trace keeps only the workers
that took part.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

import torch.distributed.rpc as rpc

from distviz.frames import display, is_own
from distviz.recorder import contexts, hooks
from distviz.recorder.gather import gather
from distviz.recorder.merge import build_trace
from distviz.recorder.piece import record_local, root_ids, root_nrs
from distviz.trace import BackwardPass, Trace
from distviz.tracing import callsites
from distviz.tracing.callsites import program
from distviz.tracing.shared import local_calls, naming


def record_piece(context_id: int, roots: Any, names: Any, inspect_saved: bool) -> dict[str, Any]:
    """Record this worker's part of ``context_id`` with its parameter names and call sites,
    and put distviz's hooks on its nodes (``recorder.gather`` calls it here and, over RPC, on
    every other worker)."""
    piece = piece_here(context_id, roots, names, inspect_saved)
    hooks.install_hooks(context_id, concurrent=True)   # ready for the backward: no extra round
    return piece


def piece_here(context_id: int, roots: Any, names: Any, inspect_saved: bool) -> dict[str, Any]:
    """This worker's part of ``context_id`` with its parameter names and call sites, without
    hooks (``record_piece`` adds them; the watch records a running backward's graph so)."""
    worker = rpc.get_worker_info().name
    contexts.sweep()    # the node references of contexts PyTorch has released here
    for call in callsites.take(context_id):
        contexts.log_call(context_id, call)
    naming.ensure()
    named = naming.parameter_names(worker) + list(names)
    piece = record_local(context_id, roots, named, inspect_saved)
    piece["code"] = _function_sites(context_id)
    return piece


def _function_sites(context_id: int) -> dict[str, str]:
    """Where the program's own autograd Functions in this piece define ``backward``
    (``faults.py:33 in Checked.backward``), by node id."""
    out: dict[str, str] = {}
    for nid, fn in contexts.nodes_of(context_id).items():
        cls = getattr(fn, "_forward_cls", None)
        code = getattr(getattr(cls, "backward", None), "__code__", None)
        if cls is not None and code is not None and is_own(code.co_filename):
            out[nid] = (f"{display(code.co_filename)}:"
                        f"{callsites.def_line(code)} in {cls.__qualname__}.backward")
    return out


def record_trace(context_id: int, roots: list[Any], retain: bool, frame: types.FrameType | None,
            names: list[tuple[Any, Any]] | None = None,
            earlier: list[BackwardPass] | None = None,
            record_fn: Callable[..., dict[str, Any]] | None = None,
            timeout: float | None = None) -> Trace:
    """The trace of ``context_id`` with only the workers that took part; ``names`` (the
    API's) come before the variables of the program's frames. ``earlier``: the passes the
    context already ran (recorded again, every node keeps its id), before this one.
    ``record_fn`` records one worker (default ``record_piece``; the watch's, ``piece_here``,
    puts no hooks on a running backward's graph and leaves saved tensors alone); ``timeout``
    how long each worker may take to answer (``recorder.gather.NoAnswer``). Workers of this
    host are asked over their listener's socket (``local_calls``), the others over RPC."""
    named: list[tuple[Any, Any]] = list(names or []) + list(
        naming.in_graph(naming.frame_names(frame), roots))
    me = rpc.get_worker_info().name
    workers, pieces = gather(context_id, roots, named, inspect_saved=record_fn is None,
                             record_fn=record_fn or record_piece, timeout=timeout,
                             direct=local_calls.direct())
    passes = [BackwardPass(roots=list(p.roots), retain_graph=p.retain_graph,
                           root_vars=list(p.root_vars), root_nrs=list(p.root_nrs),
                           site=p.site, loss_site=p.loss_site, loss_statement=p.loss_statement)
              for p in earlier or []]
    lines = program.pass_lines(frame, roots)
    passes.append(BackwardPass(roots=root_ids(context_id, roots), retain_graph=retain,
                               root_vars=naming.root_names(roots, named),
                               root_nrs=root_nrs(roots), site=lines.site,
                               loss_site=lines.loss_site, loss_statement=lines.loss_statement))
    trace = build_trace(workers, me, context_id, pieces, passes)
    for call in trace.rpc_calls:
        if call.caller == me and call.site is not None:
            call.statement = program.call_statement(call.site, lines.functions,
                                                    call.result_var)
    code = {k: v for p in pieces for k, v in (p.get("code") or {}).items()}
    if code:
        trace.meta["functions"] = dict(sorted(code.items()))
    present = {p["worker"] for p in pieces}
    rank_of = {w: i for i, w in enumerate(workers)}
    trace.workers = [w for w in workers if w in present]
    ranks = [rank_of[w] for w in trace.workers]
    trace.ranks = None if ranks == list(range(len(ranks))) else ranks
    return trace

