"""Random distributed programs as values: what ``distviz fuzz`` generates, shrinks and writes.

A ``FuzzProgram`` is a small tree: the initiator's ``main`` block, whose statements are tensor ops
and RPC calls; a call to a Python function carries that function's body as a ``Block`` that
runs on the callee (and may call further, back into its caller too). ``to_yaml`` writes it as
an ordinary scenario file (every body becomes a ``def f<N>`` in ``code``), so a generated
program is something a user can run with ``distviz run`` and keep.

Every tensor is ``DIM x DIM``, so every op fits every value. ``problems`` checks what the
scenario validator cannot (a name is defined before it is used, a backward root and a
``fail_backward`` input surely require grad); ``features`` names what a program exercises.
Pure: no torch, no workers.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace

__all__ = ["BINARY", "BUILTINS", "CUSTOM", "Block", "DIM", "FEATURES", "Loss", "Op",
           "Pass", "FuzzProgram", "RpcStmt", "Stmt", "blocks", "calls", "features", "op_grad",
           "problems", "scan", "size", "to_yaml", "with_block"]

DIM = 2
UNARY = ("tanh", "sigmoid", "sin")
BINARY = ("add", "mul", "sub", "matmul")
BUILTINS = ("add", "mul", "matmul")
#: op kinds besides UNARY and BINARY: a random leaf that requires grad, a random leaf that does
#: not, a scaled copy, ``fail_backward``, a custom autograd Function
#: (``custom_function("SHAPE", x)``, ``Op.shape``), and (in called functions) constant leaves
#: with and without grad. Functions never draw random numbers: two functions running on one worker at
#: the same time would draw from its generator in whatever order their threads run, and the
#: run and its single-process reference would get different values (see docs/fuzz.md).
LEAF, CONST, SCALE, FAIL, CUSTOM = "leaf", "const", "scale", "fail", "custom"
REMOTE_LEAF, REMOTE_CONST = "remote_leaf", "remote_const"

FEATURES = ("rpc_sync", "rpc_async", "async_deferred", "remote", "to_here_twice", "nested",
            "callback", "self_call", "builtin", "multi_output", "unused_value", "no_grad",
            "leaf_no_grad", "remote_leaf", "ps_param", "shared_param", "multi_root",
            "retain_graph", "fail_backward", "custom_function", "remote_loss")


@dataclass(frozen=True)
class Op:
    """``out = torch.<fn>(args)``, a leaf (``fn`` is ``leaf``/``const``/``remote_leaf``),
    ``torch.mul(a, 0.5)`` (``scale``), ``fail_backward(a, ...)`` (``fail``) or
    ``custom_function("<shape>", a)`` (``custom``)."""

    out: str
    fn: str
    args: tuple[str, ...] = ()
    shape: str = ""     # custom: one of distviz.scenario.lang.CUSTOM_FUNCTIONS

    @property
    def outs(self) -> tuple[str, ...]:
        return (self.out,)


@dataclass(frozen=True)
class RpcStmt:
    """An RPC from the enclosing block to ``to``.

    ``style`` is ``sync`` (``rpc_sync``), ``async`` (``rpc_async(...).wait()``; with
    ``deferred`` the wait comes just before the first use) or ``remote`` (``rpc.remote`` then
    one ``to_here()`` per entry of ``fetches``). ``fetches`` holds the names each fetch binds,
    one per returned value. ``body`` is the called function (``None`` for a builtin RPC of
    ``torch.<builtin>``). ``no_grad`` wraps the call in ``with torch.no_grad():``.
    """

    ident: int
    to: str
    style: str
    args: tuple[str, ...]
    fetches: tuple[tuple[str, ...], ...]
    body: Block | None = None
    builtin: str = ""
    no_grad: bool = False
    deferred: bool = False

    @property
    def outs(self) -> tuple[str, ...]:
        return tuple(n for names in self.fetches for n in names)

    @property
    def func(self) -> str:
        return f"f{self.ident}" if self.body is not None else f"torch.{self.builtin}"


Stmt = Op | RpcStmt


@dataclass(frozen=True)
class Block:
    """Statements run on ``worker``: ``main`` (no params, no returns) or a function body."""

    worker: str
    params: tuple[str, ...]
    stmts: tuple[Stmt, ...]
    returns: tuple[str, ...] = ()


@dataclass(frozen=True)
class Loss:
    """``out = torch.stack([args...]).sum()`` at the end of ``main``: a backward root. With
    ``to``, the sum is a builtin RPC to that worker (``rpc.rpc_sync(to, torch.sum, ...)``), so
    the root is an RPC's result."""

    out: str
    args: tuple[str, ...]
    to: str = ""


@dataclass(frozen=True)
class Pass:
    roots: tuple[str, ...]
    retain_graph: bool = False


@dataclass(frozen=True)
class FuzzProgram:
    """A whole scenario. ``ps`` holds the shared parameters ``ps_params`` (or is ``None``)."""

    name: str
    description: str
    seed: int
    workers: tuple[str, ...]
    ps: str | None
    ps_params: tuple[str, ...]
    main: Block
    losses: tuple[Loss, ...]
    passes: tuple[Pass, ...]


# -- walking the tree ---------------------------------------------------------------------------

Path = tuple[int, ...]   # statement indices from main down to a call's body


def blocks(program: FuzzProgram) -> Iterator[tuple[Path, Block, str | None]]:
    """Every block with its path and the worker that called it (``None`` for main), main first,
    then bodies in the order they appear (explicit stack, pre-order)."""
    stack: list[tuple[Path, Block, str | None]] = [((), program.main, None)]
    while stack:
        path, block, caller = stack.pop()
        yield path, block, caller
        inner = [(path + (i,), s.body, block.worker) for i, s in enumerate(block.stmts)
                 if isinstance(s, RpcStmt) and s.body is not None]
        stack.extend(reversed(inner))


def calls(program: FuzzProgram) -> Iterator[RpcStmt]:
    for _path, block, _caller in blocks(program):
        yield from (s for s in block.stmts if isinstance(s, RpcStmt))


def with_block(program: FuzzProgram, path: Path, new: Block) -> FuzzProgram:
    """``program`` with the block at ``path`` replaced by ``new``."""
    chain = [program.main]
    for i in path[:-1] if path else ():
        stmt = chain[-1].stmts[i]
        assert isinstance(stmt, RpcStmt) and stmt.body is not None
        chain.append(stmt.body)
    for depth in range(len(path) - 1, -1, -1):
        parent = chain[depth]
        call = parent.stmts[path[depth]]
        assert isinstance(call, RpcStmt)
        stmts = list(parent.stmts)
        stmts[path[depth]] = replace(call, body=new)
        new = replace(parent, stmts=tuple(stmts))
    return replace(program, main=new)


def size(program: FuzzProgram) -> int:
    """How big a program is, for the shrinker: every statement, value, pass, root and worker
    counts, and the harder call styles count more than ``rpc_sync``."""
    n = len(program.workers) + len(program.passes) + len(program.ps_params)
    n += sum(len(p.roots) for p in program.passes) + sum(len(x.args) for x in program.losses)
    n += sum(1 for x in program.losses if x.to)
    for _path, block, _caller in blocks(program):
        n += len(block.returns)
        for s in block.stmts:
            n += 2 + len(s.outs) + len(s.args) + int(isinstance(s, Op) and s.fn == CUSTOM)
            if isinstance(s, RpcStmt):
                n += {"sync": 0, "async": 1, "remote": 2}[s.style] + len(s.fetches)
                n += int(s.no_grad) + int(s.deferred)
    return n


# -- checks -------------------------------------------------------------------------------------

def op_grad(op: Op, grad: Mapping[str, bool]) -> bool:
    """Whether ``op``'s result surely requires grad, given its arguments' flags."""
    if op.fn in (LEAF, REMOTE_LEAF, FAIL):
        return True
    return op.fn not in (CONST, REMOTE_CONST) and any(grad.get(a, False) for a in op.args)


def scan(block: Block, ps: str | None, ps_params: tuple[str, ...],
         param_grads: tuple[bool, ...], out: list[str] | None = None,
         where: str = "main") -> tuple[dict[str, bool], tuple[bool, ...]]:
    """Walk ``block`` (and the bodies it calls); return its names -> surely-requires-grad and
    the flags of its returned values. Problems found on the way are appended to ``out``.

    A call under ``torch.no_grad()`` gives values that may or may not require grad (PyTorch
    decides); they count as not surely requiring grad, and so do its callee's arguments.
    """
    out = [] if out is None else out
    grad: dict[str, bool] = dict(zip(block.params, param_grads, strict=True))
    if block.worker == ps:
        grad.update((p, True) for p in ps_params)
    for s in block.stmts:
        for a in s.args:
            if a not in grad:
                out.append(f"{where}: {a} is used before it is defined")
        if isinstance(s, Op):
            if s.fn == FAIL and not grad.get(s.args[0], False):
                out.append(f"{where}: fail_backward({s.args[0]}) on a value that may not "
                           "require grad")
            grad[s.out] = op_grad(s, grad)
            continue
        if s.body is not None:
            inner = tuple(grad.get(a, False) and not s.no_grad for a in s.args)
            if s.body.worker != s.to or len(inner) != len(s.body.params):
                out.append(f"{where}: f{s.ident} does not match its call")
                inner = tuple(False for _ in s.body.params)
            _, rets = scan(s.body, ps, ps_params, inner, out, f"f{s.ident}")
        else:
            rets = (any(grad.get(a, False) for a in s.args),)
        if any(len(f) != len(rets) for f in s.fetches) or not s.fetches:
            out.append(f"{where}: {s.func} returns {len(rets)} values")
        for names in s.fetches:
            for n, g in zip(names, rets, strict=False):
                grad[n] = g and not s.no_grad
    for r in block.returns:
        if r not in grad or r in ps_params:
            out.append(f"{where}: returns {r}, which is not a value of its own")
    return grad, tuple(grad.get(r, False) for r in block.returns)


def problems(program: FuzzProgram) -> list[str]:
    """What makes ``program`` unrunnable (empty when it is fine): undefined names, roots or
    ``fail_backward`` inputs that may not require grad, duplicate names, unknown workers."""
    out: list[str] = []
    grad, _ = scan(program.main, program.ps, program.ps_params, (), out)
    for c in calls(program):
        if c.to not in program.workers:
            out.append(f"call {c.func} to unknown worker {c.to}")
    for x in program.losses:
        if x.to and x.to not in program.workers:
            out.append(f"{x.out} is summed on unknown worker {x.to}")
    seen: set[str] = set()
    for _path, block, _caller in blocks(program):
        for s in block.stmts:
            for n in s.outs:
                if n in seen:
                    out.append(f"{n} is assigned twice")
                seen.add(n)
    for loss in program.losses:
        if not loss.args or not any(grad.get(a, False) for a in loss.args):
            out.append(f"{loss.out} may not require grad")
        if any(a not in grad for a in loss.args):
            out.append(f"{loss.out} uses an undefined value")
        grad[loss.out] = True
    losses = {x.out for x in program.losses}
    if not program.passes:
        out.append("no backward pass")
    for p in program.passes:
        if not p.roots or len(set(p.roots)) != len(p.roots) or not set(p.roots) <= losses:
            out.append(f"bad pass roots {p.roots}")
    return out


def features(program: FuzzProgram) -> frozenset[str]:
    """The program features (``FEATURES``) that ``program`` exercises."""
    found: set[str] = set()
    used: set[str] = {a for x in program.losses for a in x.args}
    param_calls = 0
    for _path, block, caller in blocks(program):
        used.update(block.returns)
        uses_param = False
        for s in block.stmts:
            used.update(s.args)
            if isinstance(s, Op):
                found |= {CONST: {"leaf_no_grad"}, REMOTE_CONST: {"leaf_no_grad"},
                          FAIL: {"fail_backward"}, REMOTE_LEAF: {"remote_leaf"},
                          CUSTOM: {"custom_function"}}.get(s.fn, set())
                uses_param |= bool(set(s.args) & set(program.ps_params))
                continue
            found.add({"sync": "rpc_sync", "async": "rpc_async", "remote": "remote"}[s.style])
            found |= {f for f, on in (("async_deferred", s.deferred and s.style == "async"),
                                      ("to_here_twice", len(s.fetches) > 1),
                                      ("builtin", s.body is None), ("no_grad", s.no_grad),
                                      ("multi_output", len(s.fetches[0]) > 1),
                                      ("callback", s.to == caller),
                                      ("self_call", s.to == block.worker),
                                      ("nested", caller is not None)) if on}
            uses_param |= bool(set(s.args) & set(program.ps_params))
        if uses_param and block.worker == program.ps:
            found.add("ps_param")
            param_calls += 1
    if param_calls > 1:
        found.add("shared_param")
    all_outs = {n for _p, b, _c in blocks(program) for s in b.stmts for n in s.outs}
    if all_outs - used:
        found.add("unused_value")
    if len(program.losses) > 1 or any(len(p.roots) > 1 for p in program.passes):
        found.add("multi_root")
    if any(p.retain_graph for p in program.passes):
        found.add("retain_graph")
    if any(x.to for x in program.losses):
        found.add("remote_loss")
    return frozenset(found)


# -- writing the scenario file ------------------------------------------------------------------

def _call_expr(s: RpcStmt, kind: str) -> str:
    args = ", ".join(s.args) + ("," if len(s.args) == 1 else "")
    return f'rpc.{kind}("{s.to}", {s.func}, args=({args}))'


def _lhs(names: tuple[str, ...]) -> str:
    return ", ".join(names)


def _op_line(s: Op) -> str:
    shape = f"({DIM}, {DIM})"
    if s.fn == LEAF:
        return f"{s.out} = torch.rand({shape}, requires_grad=True)"
    if s.fn == CONST:
        return f"{s.out} = torch.rand({shape})"
    if s.fn == REMOTE_LEAF:
        return f"{s.out} = torch.full({shape}, 0.5, requires_grad=True)"
    if s.fn == REMOTE_CONST:
        return f"{s.out} = torch.full({shape}, 0.25)"
    if s.fn == SCALE:
        return f"{s.out} = torch.mul({s.args[0]}, 0.5)"
    if s.fn == FAIL:
        return f'{s.out} = fail_backward({s.args[0]}, "fuzz fault at {s.out}")'
    if s.fn == CUSTOM:
        return f'{s.out} = custom_function("{s.shape}", {s.args[0]})'
    return f"{s.out} = torch.{s.fn}({', '.join(s.args)})"


def _block_lines(block: Block) -> list[str]:
    """The block's statements as program lines; deferred waits and fetches are placed just
    before the first statement that uses one of their values (or at the end)."""
    lines: list[str] = []
    pending: list[tuple[set[str], list[str]]] = []

    def flush(needed: set[str] | None) -> None:
        keep = []
        for names, text in pending:
            if needed is None or names & needed:
                lines.extend(text)
            else:
                keep.append((names, text))
        pending[:] = keep

    for s in block.stmts:
        flush(set(s.args))
        if isinstance(s, Op):
            lines.append(_op_line(s))
            continue
        if s.style == "remote":
            lines.append(f"rref{s.ident} = {_call_expr(s, 'remote')}")
            for names in s.fetches:
                text = [f"{_lhs(names)} = rref{s.ident}.to_here()"]
                if s.deferred:
                    pending.append((set(names), text))
                else:
                    lines.extend(text)
            continue
        if s.style == "async" and s.deferred:
            lines.append(f"fut{s.ident} = {_call_expr(s, 'rpc_async')}")
            pending.append((set(s.outs), [f"{_lhs(s.outs)} = fut{s.ident}.wait()"]))
            continue
        expr = _call_expr(s, "rpc_sync") if s.style == "sync" else \
            _call_expr(s, "rpc_async") + ".wait()"
        if s.no_grad:
            lines.extend(["with torch.no_grad():", f"    {_lhs(s.outs)} = {expr}"])
        else:
            lines.append(f"{_lhs(s.outs)} = {expr}")
    flush(None)
    return lines


def _indent(lines: list[str], n: int) -> str:
    return "".join(" " * n + ln + "\n" for ln in lines)


def to_yaml(program: FuzzProgram) -> str:
    """The scenario file text of ``program``."""
    out = [f"name: {program.name}", f"description: {_quote(program.description)}", "workers:"]
    for w in program.workers:
        if w == program.ps and program.ps_params:
            out.append(f"  {w}:")
            out.append("    init: |")
            init = [f"{p} = torch.rand(({DIM}, {DIM}), requires_grad=True)"
                    for p in program.ps_params]
            out.append(_indent(init, 6).rstrip("\n"))
        else:
            out.append(f"  {w}: {{}}")
    out.append(f"seed: {program.seed}")
    defs: list[str] = []
    for s in calls(program):
        if s.body is None:
            continue
        body = _block_lines(s.body) + [f"return {_lhs(s.body.returns)}"]
        defs.append(f"def f{s.ident}({', '.join(s.body.params)}):  # runs on {s.body.worker}")
        defs.extend("    " + ln for ln in body)
        defs.append("")
    if defs:
        out.append("code: |")
        out.append(_indent(defs[:-1], 2).rstrip("\n"))
    main = _block_lines(program.main)
    main += [_loss_line(x) for x in program.losses]
    out.append("main: |")
    out.append(_indent(main, 2).rstrip("\n"))
    out.append("backward:")
    for p in program.passes:
        retain = ", retain_graph: true" if p.retain_graph else ""
        out.append(f"  - {{roots: [{', '.join(p.roots)}]{retain}}}")
    return "\n".join(out) + "\n"


def _loss_line(x: Loss) -> str:
    stacked = f"torch.stack([{', '.join(x.args)}])"
    if x.to:
        return f'{x.out} = rpc.rpc_sync("{x.to}", torch.sum, args=({stacked},))'
    return f"{x.out} = {stacked}.sum()"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
