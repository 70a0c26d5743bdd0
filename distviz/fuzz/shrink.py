"""Shrink a program while it still shows a problem (pure).

``shrink(program, still_fails)`` tries smaller programs one at a time, each one step smaller
than the current one: a backward pass, a root or a loss term dropped; a statement dropped (its
values replaced by one of its arguments, or by the value defined just before it); a returned
value dropped; a call replaced by a call its function makes (sent straight from the caller);
a call made simpler (``rpc.remote`` or ``rpc_async`` made ``rpc_sync``, one ``to_here``
fewer, no ``torch.no_grad``, sent to a worker that is already busy elsewhere).
Workers, shared parameters and losses that nothing uses any more are dropped with each step.
The first smaller program that ``still_fails`` becomes the current one, and the search starts
again from it; it ends when no smaller program fails, or after ``max_tries`` calls of
``still_fails`` (each one is a real run in ``distviz fuzz``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

from distviz.fuzz.program_tree import (
    CUSTOM,
    SCALE,
    Block,
    FuzzProgram,
    Op,
    Pass,
    Path,
    RpcStmt,
    Stmt,
    blocks,
    calls,
    problems,
    size,
    with_block,
)

__all__ = ["ShrinkResult", "candidates", "shrink", "tidy"]


@dataclass(frozen=True)
class ShrinkResult:
    """The smallest failing program found, how many were tried and how many were smaller."""

    program: FuzzProgram
    tries: int
    steps: int


def _rename(names: tuple[str, ...], mapping: dict[str, str]) -> tuple[str, ...]:
    return tuple(mapping.get(n, n) for n in names)


def _rename_stmt(s: Stmt, mapping: dict[str, str]) -> Stmt:
    return replace(s, args=_rename(s.args, mapping))


def _substituted(program: FuzzProgram, path: Path, block: Block, stmts: list[Stmt], start: int,
                 mapping: dict[str, str]) -> FuzzProgram:
    """``block`` with ``stmts``, where the statements from ``start`` on and the block's
    returns (and main's losses) read ``mapping[name]`` instead of ``name``."""
    stmts = stmts[:start] + [_rename_stmt(s, mapping) for s in stmts[start:]]
    new = replace(block, stmts=tuple(stmts), returns=_rename(block.returns, mapping))
    out = with_block(program, path, new)
    if not path:
        out = replace(out, losses=tuple(replace(x, args=tuple(dict.fromkeys(
            _rename(x.args, mapping)))) for x in out.losses))
    return out


def _stand_ins(program: FuzzProgram, block: Block, i: int) -> list[str]:
    """Values to use instead of statement ``i``'s results: each of its own arguments, else the
    last value defined before it in ``block``."""
    own = [a for a in dict.fromkeys(block.stmts[i].args) if a not in program.ps_params]
    if own:
        return own
    if i:
        return [block.stmts[i - 1].outs[0]]
    return list(block.params[:1])


def _drop_stmt(program: FuzzProgram, path: Path, block: Block, i: int) -> Iterator[FuzzProgram]:
    """``block`` without statement ``i``, once per stand-in for the values it defined."""
    s = block.stmts[i]
    later = {a for t in block.stmts[i + 1:] for a in t.args} | set(block.returns)
    if not path:
        later |= {a for x in program.losses for a in x.args}
    stmts = list(block.stmts)
    del stmts[i]
    if not later & set(s.outs):
        yield _substituted(program, path, block, stmts, i, {})
        return
    for sub in _stand_ins(program, block, i):
        yield _substituted(program, path, block, stmts, i, {o: sub for o in s.outs})


def _with_call(program: FuzzProgram, path: Path, block: Block, i: int, call: RpcStmt,
               mapping: dict[str, str]) -> FuzzProgram:
    stmts = list(block.stmts)
    stmts[i] = call
    return _substituted(program, path, block, stmts, i + 1, mapping)


def _simpler_calls(program: FuzzProgram, path: Path, block: Block, i: int,
                   caller: str | None) -> Iterator[FuzzProgram]:
    """Statement ``i`` (a call) made simpler in each way that applies."""
    s = block.stmts[i]
    assert isinstance(s, RpcStmt)
    first = s.fetches[0]
    later = {n: first[k] for f in s.fetches[1:] for k, n in enumerate(f)}
    if s.style != "sync":
        yield _with_call(program, path, block, i, replace(s, style="sync", fetches=(first,),
                                                          deferred=False), later)
    if len(s.fetches) > 1:
        last = {n: first[k] for k, n in enumerate(s.fetches[-1])}
        yield _with_call(program, path, block, i, replace(s, fetches=s.fetches[:-1]), last)
    if s.deferred:
        yield _with_call(program, path, block, i, replace(s, deferred=False), {})
    if s.no_grad:
        yield _with_call(program, path, block, i, replace(s, no_grad=False), {})
    if s.body is not None and len(s.body.returns) > 1:
        for j in range(len(s.body.returns)):
            keep = 0 if j else 1
            body = replace(s.body, returns=s.body.returns[:j] + s.body.returns[j + 1:])
            fetches = tuple(f[:j] + f[j + 1:] for f in s.fetches)
            mapping = {f[j]: f[keep] for f in s.fetches}
            yield _with_call(program, path, block, i, replace(s, body=body, fetches=fetches),
                             mapping)
    busy = [w for w in program.workers if any(c.to == w for c in calls(program))]
    for w in busy:
        if w == s.to or (w == program.ps) != (s.to == program.ps):
            continue
        moved = replace(s.body, worker=w) if s.body is not None else None
        yield _with_call(program, path, block, i, replace(s, to=w, body=moved), {})


def _hoisted(program: FuzzProgram, path: Path, block: Block, i: int) -> Iterator[FuzzProgram]:
    """Statement ``i`` (a call) replaced by one of the calls its function makes, at any depth,
    sent straight from ``block``: arguments that come from the call's own arguments keep
    them, others become its first argument; the values it returns are cut or repeated to the
    number the replaced call returned."""
    s = block.stmts[i]
    assert isinstance(s, RpcStmt) and s.body is not None
    stack: list[tuple[Block, dict[str, str]]] = [
        (s.body, dict(zip(s.body.params, s.args, strict=True)))]
    while stack:
        body, scope = stack.pop()
        for d in body.stmts:
            if not isinstance(d, RpcStmt):
                continue
            args = tuple(scope.get(a, s.args[0]) for a in d.args)
            if d.body is not None:
                stack.append((d.body, dict(zip(d.body.params, args, strict=True))))
            arity = len(s.fetches[0])
            inner = d.body
            if inner is not None and len(inner.returns) > arity:
                inner = replace(inner, returns=inner.returns[:arity])
            width = len(inner.returns) if inner is not None else 1
            mapping = {f[k]: f[0] for f in s.fetches for k in range(width, arity)}
            hoisted = replace(d, args=args, body=inner, style=s.style, deferred=s.deferred,
                              no_grad=s.no_grad, fetches=tuple(f[:width] for f in s.fetches))
            yield _with_call(program, path, block, i, hoisted, mapping)


def tidy(program: FuzzProgram) -> FuzzProgram:
    """Drop losses no pass uses, workers nobody calls and shared parameters nobody reads."""
    roots = {r for p in program.passes for r in p.roots}
    losses = tuple(x for x in program.losses if x.out in roots)
    busy = {program.main.worker} | {c.to for c in calls(program)} | {
        x.to for x in losses if x.to}
    read = {a for _p, b, _c in blocks(program) if b.worker == program.ps
            for s in b.stmts for a in s.args}
    ps_params = tuple(p for p in program.ps_params if p in read)
    ps = program.ps if program.ps in busy and ps_params else None
    return replace(program, losses=losses, workers=tuple(w for w in program.workers if w in busy),
                   ps=ps, ps_params=ps_params if ps else ())


def candidates(program: FuzzProgram) -> Iterator[FuzzProgram]:
    """Programs one step smaller than ``program`` (see the module docstring), biggest steps
    first; some may be invalid (``problems``), none is tidied yet."""
    if len(program.passes) > 1:
        for k in range(len(program.passes)):
            yield replace(program, passes=program.passes[:k] + program.passes[k + 1:])
    for k, p in enumerate(program.passes):
        for r in p.roots if len(p.roots) > 1 else ():
            passes = list(program.passes)
            passes[k] = Pass(tuple(x for x in p.roots if x != r), p.retain_graph)
            yield replace(program, passes=tuple(passes))
        if p.retain_graph:
            passes = list(program.passes)
            passes[k] = Pass(p.roots, False)
            yield replace(program, passes=tuple(passes))
    found = list(blocks(program))
    for path, block, _caller in found:
        for i in reversed(range(len(block.stmts))):
            yield from _drop_stmt(program, path, block, i)
    for k, x in enumerate(program.losses):
        for a in x.args if len(x.args) > 1 else ():
            losses = list(program.losses)
            losses[k] = replace(x, args=tuple(b for b in x.args if b != a))
            yield replace(program, losses=tuple(losses))
        if x.to:    # summed on the initiator instead of over RPC
            losses = list(program.losses)
            losses[k] = replace(x, to="")
            yield replace(program, losses=tuple(losses))
    for path, block, _caller in found:   # a custom Function back to a plain scaled copy
        for i, s in enumerate(block.stmts):
            if isinstance(s, Op) and s.fn == CUSTOM:
                stmts = list(block.stmts)
                stmts[i] = Op(s.out, SCALE, s.args)
                yield with_block(program, path, replace(block, stmts=tuple(stmts)))
    for path, block, caller in found:
        for i, s in enumerate(block.stmts):
            if isinstance(s, RpcStmt):
                if s.body is not None:
                    yield from _hoisted(program, path, block, i)
                yield from _simpler_calls(program, path, block, i, caller)


def shrink(program: FuzzProgram, still_fails: Callable[[FuzzProgram], bool], max_tries: int = 200,
           on_try: Callable[[FuzzProgram, bool], None] | None = None) -> ShrinkResult:
    """The smallest program found that ``still_fails``, starting from ``program`` (which is
    assumed to fail). ``on_try(candidate, failed)`` is told about every try."""
    current = program
    tries = steps = 0
    progress = True
    while progress and tries < max_tries:
        progress = False
        limit = size(current)
        for cand in candidates(current):
            cand = tidy(cand)
            if size(cand) >= limit or problems(cand):
                continue
            tries += 1
            failed = still_fails(cand)
            if on_try is not None:
                on_try(cand, failed)
            if failed:
                current = cand
                steps += 1
                progress = True
                break
            if tries >= max_tries:
                break
    return ShrinkResult(current, tries, steps)
