"""The fan-out (torch side): one call on every worker of a traced context, from a side thread.

``on_all(workers, me, fn, *args)`` runs ``fn(*args)`` on every worker (here for ``me``) over the
program's own RPC agent, its requests sent from this process's ``distviz-rpc`` thread, so that
no RPC joins the program's dist autograd context (the thread has none). Called from that
thread itself, it runs at once. ``in_background`` queues a round without waiting for it; ``settle`` waits for
every queued round (before RPC shuts down).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from distviz import limits
from distviz.recorder.side_thread import SideThread

#: The side thread the rounds go from; code checks its name (``distviz-rpc``) so that a round
#: started from a round does not wait for itself.
RPC_THREAD = SideThread("distviz-rpc")


def on_all(workers: list[str], me: str, fn: Callable[..., Any], *args: Any,
           timeout: float = limits.COLLECT_TIMEOUT) -> dict[str, Any]:
    """Run ``fn(*args)`` on every worker (here for ``me``); returns each worker's result, a
    failure as the exception it raised. A worker of this host is asked over its listener's
    socket from this thread (``local_calls``), any other over RPC from the side thread; ``fn``
    runs here for ``me`` while the others work, and this thread waits for their answers (no
    thread hand-off for the first kind, one for the second). ``fn`` must make no RPC of its
    own. (The observer loads at the first round: a process whose
    backwards are all watched and return in time never needs it.)"""
    from distviz.runner.observe_real import answers, send_to_workers
    from distviz.tracing.shared import local_calls

    start = local_calls.direct()
    sent: dict[str, Any] = {}
    for w in workers:
        call = start(w, fn, args, timeout) if w != me else None
        if call is not None:
            sent[w] = call
    far = [w for w in workers if w not in sent]
    if any(w != me for w in far):
        sent.update(RPC_THREAD.run(send_to_workers, far, me, fn, args, timeout))
    return answers(sent, me, fn, args)


def in_background(fn: Callable[..., Any], *args: Any) -> None:
    """Queue ``fn(*args)`` on the side thread and return at once."""
    pool = RPC_THREAD.pool()
    assert pool is not None
    pool.submit(fn, *args)


def settle() -> None:
    """Wait until the side thread has sent every RPC round it was given (called before RPC
    shuts down, so that none of distviz's rounds is still on its way then)."""
    RPC_THREAD.settle(limits.COLLECT_TIMEOUT)
