"""The Python API's first context: the RPCs whose forward ran before the wrappers were
installed, found in the program's source and its frames' variables (torch side)."""

from __future__ import annotations

import os
import types

import torch.distributed.autograd as dist_autograd

from distviz.frames import MAX_FRAMES, is_own, outwards, own_frames
from distviz.recorder.walk import reachable
from distviz.tracing.callsites.messages import current_context, recv_ids, recv_ids_by
from distviz.tracing.callsites.registry import Call, log
from distviz.tracing.callsites.source import rpc_assignments


def guess_from_frames(context_id: int, frame: types.FrameType | None, me: str,
                      workers: dict[int, str]) -> int:
    """Keep, as calls of ``context_id``, the RPCs whose results the program's own frames
    still hold, found in their source (``side = rpc.rpc_sync("worker1", mult, ...)``): the
    Python API's first ``distviz.backward`` in a process comes after a forward pass that no
    wrapper saw, and this gives its RPC results the same call sites and variables as
    ``distviz trace`` does; the callee names the messages of the call's arguments
    (``arguments_sent``). ``workers`` names ranks. Returns how many calls it kept."""
    ctx = current_context()
    if ctx is None:
        return 0
    by_fn = recv_ids(ctx)
    me_rank = next((rank for rank, name in workers.items() if name == me), -1)
    kept = frames = 0
    seen: set[int] = set()
    for f in outwards(frame, None):
        if frames == MAX_FRAMES:
            break
        code = f.f_code
        if is_own(code.co_filename):
            frames += 1
            path = os.path.abspath(code.co_filename)
            outer = own_frames(f.f_back, MAX_FRAMES - 1)
            for var, (line, api, func) in sorted(rpc_assignments(code, f.f_lineno).items()):
                mids = [m for m in recv_ids_by(by_fn, f.f_locals.get(var)) if m not in seen]
                if not mids:
                    continue
                seen.update(mids)
                callee = workers.get(mids[0] >> 48, "?")
                sent = _arguments_of(callee, context_id, mids, me_rank) if callee != "?" else []
                log(context_id, Call(api, callee, func, None, True,
                                     [(path, line, code.co_name), *outer],
                                     sorted(set(mids) | set(sent)), caller=me))
                kept += 1
    return kept


def _arguments_of(callee: str, context_id: int, results: list[int], caller_rank: int
                  ) -> list[int]:
    """The argument messages of the call whose results came in ``results``, asked of
    ``callee`` (PyTorch's own ``rpc_sync``: a call of distviz's is no call of the program);
    none when it cannot tell."""
    import torch.distributed.rpc as rpc
    call = getattr(rpc.rpc_sync, "__wrapped__", rpc.rpc_sync)
    try:
        return [int(m) for m in call(callee, arguments_sent,
                                     args=(context_id, list(results), caller_rank))]
    except Exception:  # noqa: BLE001 - the call site is still named without them
        return []


def arguments_sent(context_id: int, results: list[int], caller_rank: int) -> list[int]:
    """On the callee: the messages from ``caller_rank`` whose ``RecvRpcBackward`` the sends of
    ``results`` reach in this worker's graph of ``context_id`` (the call's arguments; the walk
    stops at every recv, so a nested call's results are not taken)."""
    ctx = dist_autograd._retrieve_context(context_id)
    sends = ctx._send_functions()
    recv_id = recv_ids(ctx)
    reached = reachable([sends[m] for m in results if m in sends],
                        follow=lambda fn: fn not in recv_id, depth_first=True)
    return sorted({mid for fn in reached if (mid := recv_id.get(fn)) is not None
                   and mid >> 48 == caller_rank})
