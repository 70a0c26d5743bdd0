"""Where the program dropped an RPC result the loss does not use, at the program's own line.

An RPC made inside a module's ``forward`` is made *through* a line of the function that calls
the backward (``outputs = model(inputs)`` in ``train``); distviz records that line's source for
each call of the initiator (``RpcCall.statement``), the backward's caller chain and where its
loss was built (``BackwardPass.site``, ``loss_site``, ``loss_statement``). Comparing the call's
chain with the backward's finds that line (``level``), and what the other calls made through it
did tells what the program did with the result:

* ``LEFT_OUT``: other results of the same line reach the loss, this one does not: a part of the
  line's output (a micro-batch) is left out of the loss, which is built at ``loss_site``;
* ``SECOND_FORWARD``: no result of the line reaches the loss, but the same calls made through
  another line do: the line runs the forward a second time in the training context (a
  validation pass);
* ``TO_NUMBER``: the line turns the result into a Python number (``.item()``, ``float(...)``);
* ``UNUSED_LINE``: no result of the line reaches the loss.

A call made right in that function (no frame inside it) whose line is unused or a second
forward gets no ``Drop``: its own site and variable say it. So does a call whose own function
assigns its result to a variable it never reads (the recorder then keeps no statement): the
result is dropped right there, not at the program's line.

``None`` where the trace has no such lines (a scenario; a call made on another worker, inside
the function it serves, has no line in the backward's function): the explanation then names the
call's own site and variable (``distviz.replay.hang``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from distviz.frames import ShownFrame, site_frames
from distviz.replay.events import ordinal
from distviz.replay.graph import RECV, IndexedGraph
from distviz.replay.rpc_calls import CallIndex
from distviz.trace import RpcCall, Trace

__all__ = ["Drop", "DropKind", "Lines"]

#: a statement that turns a tensor into a Python number (not a tensor method: `.float()`)
NUMBER = re.compile(r"\.(item|tolist|numpy)\(\)|(?<![\w.])(float|int|bool)\(")


class DropKind(StrEnum):
    LEFT_OUT = "left_out"
    SECOND_FORWARD = "second_forward"
    TO_NUMBER = "to_number"
    UNUSED_LINE = "unused_line"


@dataclass(frozen=True, slots=True)
class Drop:
    """What the program did, at its own line, with the result of one RPC the loss does not
    use."""

    kind: DropKind
    #: the call whose result is dropped (its index in ``trace.rpc_calls``)
    call: int
    #: the program's line the call was made through (``pipeline.py:128 in train``), its source
    site: str
    statement: str
    #: whether that statement assigns the call's own result variable (``t = rpc.rpc_sync(...)``,
    #: or ``out = model(x)`` whose ``forward`` returns the RPC's result, in a loop of that
    #: function: a result the program really overwrote)
    assigns_result: bool
    #: the call is the ``k``-th of ``n`` made with the same chain through that line
    k: int
    n: int
    #: where the loss was built and its source, when known
    loss_site: str | None
    loss_statement: str | None

    def which(self, rc: RpcCall) -> str:
        """``the 1st of 3 results of rpc_async(forward on an RRef) at pipeline.py:83 in
        forward``."""
        inner = site_frames(rc.site)
        at = f" at {inner[0][0]}:{inner[0][1]} in {inner[0][2]}" if inner else ""
        nth = f"the {ordinal(self.k)} of {self.n} results" if self.n > 1 else "the result"
        return f"{nth} of {rc.api}({rc.func}){at}"

    def line(self) -> str:
        """``` `outputs = model(inputs)` at pipeline.py:128 in train```."""
        return f"`{self.statement}` at {self.site}"

    def loss(self) -> str:
        """The loss and where it was built: ``the loss built at main.py:40 in train
        (`loss = ...`)``."""
        if self.loss_site is None:
            return "the loss"
        text = f" (`{self.loss_statement}`)" if self.loss_statement else ""
        return f"the loss built at {self.loss_site}{text}"

    def reason(self, rc: RpcCall) -> str:
        """Why the result never gets a gradient, at the program's line."""
        what = self.which(rc)
        if self.kind == DropKind.LEFT_OUT:
            return (f"{what}, made through {self.line()}, is left out of {self.loss()}, "
                    "while the line's other results are in it")
        if self.kind == DropKind.SECOND_FORWARD:
            return (f"{what}, made through {self.line()}, a second forward inside the training "
                    f"context, is not used by {self.loss()}")
        if self.kind == DropKind.TO_NUMBER:
            return (f"{what}, made through {self.line()}, is turned into a Python number there, "
                    f"so {self.loss()} never uses it")
        return f"{what}, made through {self.line()}, is not used by {self.loss()}"

    def fix(self) -> str:
        """The fix that fits what the program did."""
        if self.kind == DropKind.LEFT_OUT:
            where = f" at {self.loss_site}" if self.loss_site else ""
            return (f"include every result of `{self.statement}` (every micro-batch's output) "
                    f"in the loss{where}, so each one's gradient flows back")
        outside = (f"run `{self.statement}` outside the `with dist_autograd.context()` block "
                   "(after the backward; under torch.no_grad() if it needs no gradient): inside "
                   "the context its RPCs leave sends on the workers they call that FAST mode "
                   "waits for, even under torch.no_grad() (the callee's forward runs with grad "
                   "enabled)")
        if self.kind == DropKind.TO_NUMBER:
            return (f"keep the tensor, not a Python number, and use it in the loss if it should "
                    f"train; if only the number is wanted, {outside[0].lower()}{outside[1:]}")
        if self.kind == DropKind.SECOND_FORWARD:
            return outside
        return f"use the result of `{self.statement}` in the loss, or {outside}"


class Lines:
    """The program's lines of a trace's calls (see the module docstring), built once per
    diagnosis: ``drop_of`` asks it for each unused result."""

    def __init__(self, trace: Trace, g: IndexedGraph, reach: bytearray, pass_index: int,
                 calls: CallIndex) -> None:
        self.trace = trace
        p = trace.passes[pass_index]
        self.loss_site, self.loss_statement = p.loss_site, p.loss_statement
        functions = {(shown, fn) for shown, _line, fn in site_frames(p.site)}
        #: per call: (level frame, frames inside it) when it was made through such a line
        self.level: dict[int, tuple[ShownFrame, tuple[ShownFrame, ...]]] = {}
        if functions:
            for k, rc in enumerate(trace.rpc_calls):
                if rc.caller != trace.initiator or rc.statement is None:
                    continue
                frames = site_frames(rc.site)
                at = next((i for i, (shown, _line, fn) in enumerate(frames)
                           if (shown, fn) in functions), None)
                if at is not None:
                    self.level[k] = (frames[at], tuple(frames[:at]))
        #: the calls one of whose results, on their caller, the roots reach
        self.used: set[int] = set()
        for r, kind in enumerate(g.kind):
            c = calls.call_of(r) if kind == RECV and reach[r] else None
            if c is not None and \
                    g.workers[g.worker[r]] == trace.rpc_calls[c].caller:
                self.used.add(c)

    def _same(self, c: int, k: int) -> bool:
        a, b = self.trace.rpc_calls[c], self.trace.rpc_calls[k]
        return (a.api, a.func, a.callee) == (b.api, b.func, b.callee)

    def drop_of(self, c: int) -> Drop | None:
        """What the program did with call ``c``'s result at its own line (``None``: no line)."""
        here = self.level.get(c)
        if here is None:
            return None
        frame, inner = here
        rc = self.trace.rpc_calls[c]
        statement = rc.statement or ""
        line = [k for k, (f, _i) in self.level.items() if f == frame]
        twins = [k for k in line if self.level[k][1] == inner and self._same(c, k)]
        if NUMBER.search(statement):
            kind = DropKind.TO_NUMBER
        elif any(k in self.used for k in line):
            kind = DropKind.LEFT_OUT
        elif any(k in self.used and self.level[k][1] == inner and self._same(c, k)
                 for k in self.level if self.level[k][0] != frame):
            kind = DropKind.SECOND_FORWARD
        else:
            kind = DropKind.UNUSED_LINE
        var = rc.result_var
        if not inner and kind in (DropKind.UNUSED_LINE, DropKind.SECOND_FORWARD):
            return None     # made right in that function: its own site and variable say it
        # the line assigns the variable the call's result went to (followed through returns):
        # the program's own variable, overwritten when a later call of the line assigns it
        assigns = bool(var) and re.match(rf"{re.escape(var or '')}\s*(:[^=]*)?=[^=]",
                                         statement) is not None
        return Drop(kind=kind, call=c, site=f"{frame[0]}:{frame[1]} in {frame[2]}",
                    statement=statement, assigns_result=assigns, k=twins.index(c) + 1,
                    n=len(twins), loss_site=self.loss_site, loss_statement=self.loss_statement)

