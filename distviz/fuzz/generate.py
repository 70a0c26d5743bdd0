"""Random, valid, seeded distributed programs (pure).

``generate(seed, index)`` builds the ``index``-th program of a fuzz run from ``random.Random``
seeded with the pair, so a program depends on nothing else (not on the other programs, not on
the machine). What it draws, with the rough rates that keep every feature common:

* 2-6 workers (``worker0`` is the initiator); sometimes a parameter-server worker whose
  ``init`` makes one or two shared parameters that functions running there use;
* in ``main``: leaves with and without ``requires_grad``, elementwise ops and ``matmul``, and
  RPCs; in each called function: ops on its arguments (and the shared parameters on the
  parameter server), constant leaves, and further RPCs, to other workers, back to the caller
  or (now and then) to the worker itself, down to depth 3;
* each RPC: ``rpc_sync``, ``rpc_async(...).wait()`` or ``rpc.remote`` with one to three
  ``to_here()``; sometimes a builtin (``torch.add``, ``torch.mul``, ``torch.matmul``);
  sometimes under ``torch.no_grad()``; functions return one to three values;
* one to three losses over most of the values nobody used yet (some stay unused: in FAST mode
  an unused RPC result hangs the backward, a valid outcome to predict), one backward pass over
  all losses or a few passes with ``retain_graph``; now and then a ``fail_backward``;
* about a third of the elementwise ops and scaled copies become custom autograd Functions
  (``custom_function("SHAPE", x)``, every shape of ``lang.CUSTOM_FUNCTIONS``), and about a
  third of the losses are summed on another worker by a builtin RPC (the root is then an
  RPC's result); both drawn from a generator of their own, so the rest of each program stays
  what it was. The shapes whose backward gives an undefined gradient or zeros (``none``,
  ``zeros``) come up more often than the others (``SHAPE_WEIGHTS``);
* in about half the programs with an RPC result of several outputs in ``main``, one output
  is left out of the losses while another stays used (from a generator of its own too): its
  slot gets zeros in FAST mode.

In about half the programs the waits and fetches are mostly deferred to the first use, so
several calls run at the same time. Whatever runs at the same time must not depend on thread
timing, so functions never draw random numbers (they would race for their worker's generator:
the values would change from run to run and differ from the single-process reference), and in
those programs functions make no leaves that require grad (a leaf made in a function is named
in the order its worker made it).

Arguments are drawn mostly from values nobody used yet, so programs are chains and joins
rather than unrelated statements. ``problems(program)`` is empty for every generated program.
"""

from __future__ import annotations

import random
from dataclasses import replace

from distviz import limits
from distviz.fuzz.program_tree import (
    BINARY,
    BUILTINS,
    CONST,
    CUSTOM,
    FAIL,
    LEAF,
    REMOTE_CONST,
    REMOTE_LEAF,
    SCALE,
    UNARY,
    Block,
    FuzzProgram,
    Loss,
    Op,
    Pass,
    RpcStmt,
    Stmt,
    blocks,
    features,
    op_grad,
    scan,
    with_block,
)
from distviz.scenario.lang import CUSTOM_FUNCTIONS

__all__ = ["MAX_DEPTH", "MAX_WORKERS", "MIN_WORKERS", "generate"]

MIN_WORKERS = limits.FUZZ_MIN_WORKERS
MAX_WORKERS = limits.FUZZ_MAX_WORKERS
MAX_DEPTH = limits.FUZZ_MAX_DEPTH      # main is depth 0; a function at MAX_DEPTH makes no RPC


class _Pool:
    """The values a block can use: ``grad`` maps every name in scope (shared parameters too)
    to whether it surely requires grad; ``values`` are those a statement may take as an
    argument or return, ``unused`` those nobody took yet."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.grad: dict[str, bool] = {}
        self.values: list[str] = []
        self.unused: list[str] = []

    def add(self, name: str, grad: bool) -> None:
        self.grad[name] = grad
        self.values.append(name)
        self.unused.append(name)

    def pick(self, need_grad: bool = False) -> str | None:
        """A value, mostly one nobody used yet; ``None`` when there is none that fits."""
        fresh = [n for n in self.unused if self.grad[n] or not need_grad]
        every = [n for n in self.values if self.grad[n] or not need_grad]
        if not every:
            return None
        name = self.rng.choice(fresh) if fresh and self.rng.random() < 0.75 else \
            self.rng.choice(every)
        if name in self.unused:
            self.unused.remove(name)
        return name

    def take(self, k: int) -> tuple[str, ...]:
        return tuple(n for n in (self.pick() for _ in range(k)) if n is not None)


class _Gen:
    def __init__(self, rng: random.Random, workers: tuple[str, ...], ps: str | None,
                 ps_params: tuple[str, ...], faults: int, tidy: bool, concurrent: bool) -> None:
        self.rng = rng
        self.tidy = tidy
        self.concurrent = concurrent
        self.workers = workers
        self.ps = ps
        self.ps_params = ps_params
        self.faults = faults
        self.counter = 0
        self.calls = 0

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def op(self, pool: _Pool, worker: str) -> Op | None:
        rng = self.rng
        if self.faults and rng.random() < 0.2:
            arg = pool.pick(need_grad=True)
            if arg is not None:
                self.faults -= 1
                return Op(self.fresh("v"), FAIL, (arg,))
        if worker == self.ps and self.ps_params and rng.random() < 0.6:
            x = pool.pick()
            if x is not None:
                fn = rng.choice(("matmul", "mul", "add"))
                return Op(self.fresh("v"), fn, (x, rng.choice(self.ps_params)))
        kind = rng.random()
        if kind < 0.4:
            x = pool.pick()
            return None if x is None else Op(self.fresh("v"), rng.choice(UNARY), (x,))
        if kind < 0.85:
            args = pool.take(2)
            if len(args) < 2:
                return None
            return Op(self.fresh("v"), rng.choice(BINARY), args)
        x = pool.pick()
        return None if x is None else Op(self.fresh("v"), SCALE, (x,))

    def leaf(self, in_main: bool) -> Op:
        if not in_main:
            grad = not self.concurrent and self.rng.random() < 0.5
            return Op(self.fresh("v"), REMOTE_LEAF if grad else REMOTE_CONST)
        return Op(self.fresh("v"), LEAF if self.rng.random() < 0.75 else CONST)

    def target(self, worker: str, caller: str | None) -> str:
        rng = self.rng
        if rng.random() < 0.05:
            return worker
        if caller is not None and rng.random() < 0.35:
            return caller
        if self.ps is not None and self.ps != worker and rng.random() < 0.4:
            return self.ps
        return rng.choice([w for w in self.workers if w != worker])

    def call(self, pool: _Pool, worker: str, caller: str | None, depth: int) -> RpcStmt | None:
        rng = self.rng
        self.calls += 1
        ident = self.calls
        to = self.target(worker, caller)
        style = rng.choices(("sync", "async", "remote"), (5, 3, 2))[0]
        deferred = self.concurrent and style != "sync" and rng.random() < 0.8
        n_fetch = rng.choices((1, 2, 3), (14, 5, 1))[0] if style == "remote" else 1
        no_grad = not deferred and style != "remote" and rng.random() < 0.06
        body: Block | None = None
        builtin = ""
        if rng.random() < 0.2:
            builtin = rng.choice(BUILTINS)
            args = pool.take(2)
            if len(args) < 2:
                return None
            n_out = 1
        else:
            args = pool.take(rng.choice((1, 1, 2)))
            if not args:
                return None
            params = tuple(self.fresh("a") for _ in args)
            grads = tuple(pool.grad[a] and not no_grad for a in args)
            body = self.block(to, tuple(zip(params, grads, strict=True)), worker, depth + 1,
                              rng.randint(1, 4 - depth))
            n_out = len(body.returns)
        fetches = tuple(tuple(self.fresh("v") for _ in range(n_out)) for _ in range(n_fetch))
        return RpcStmt(ident, to, style, args, fetches, body, builtin, no_grad, deferred)

    def block(self, worker: str, params: tuple[tuple[str, bool], ...], caller: str | None,
              depth: int, n_stmts: int) -> Block:
        """A block of ``n_stmts`` statements on ``worker`` (main when ``caller`` is None)."""
        rng = self.rng
        in_main = caller is None
        pool = _Pool(rng)
        for name, grad in params:
            pool.add(name, grad)
        if worker == self.ps:
            pool.grad.update((p, True) for p in self.ps_params)
        stmts: list[Stmt] = []
        if in_main:
            first = Op(self.fresh("v"), LEAF)
            stmts.append(first)
            pool.add(first.out, True)
        weights = (3, 4, 5) if in_main else (0.5, 4, 3)
        while len(stmts) < n_stmts:
            kind = rng.choices(("leaf", "op", "call"), weights)[0]
            stmt: Stmt | None
            if kind == "call" and depth < MAX_DEPTH:
                stmt = self.call(pool, worker, caller, depth)
            elif kind == "leaf":
                stmt = self.leaf(in_main)
            else:
                stmt = self.op(pool, worker)
            if stmt is None:
                continue
            stmts.append(stmt)
            self.record(pool, stmt)
        if in_main:
            return Block(worker, (), tuple(stmts))
        if self.tidy and pool.unused:
            returns = tuple(pool.unused)
        else:
            returns = pool.take(rng.choices((1, 2, 3), (13, 6, 1))[0]) or (params[0][0],)
        return Block(worker, tuple(p for p, _ in params), tuple(stmts), tuple(dict.fromkeys(
            returns)))

    def record(self, pool: _Pool, stmt: Stmt) -> None:
        """Add what ``stmt`` defines to ``pool`` with its requires-grad flag."""
        if isinstance(stmt, Op):
            pool.add(stmt.out, op_grad(stmt, pool.grad))
            return
        if stmt.body is not None:
            params = tuple(pool.grad[a] and not stmt.no_grad for a in stmt.args)
            _, rets = scan(stmt.body, self.ps, self.ps_params, params)
        else:
            rets = (any(pool.grad[a] for a in stmt.args),)
        for names in stmt.fetches:
            for n, g in zip(names, rets, strict=True):
                pool.add(n, g and not stmt.no_grad)


def _losses(rng: random.Random, pool: _Pool, gen: _Gen) -> tuple[Loss, ...]:
    """One to three losses over most of the values nobody used; each surely requires grad."""
    n = rng.choices((1, 2, 3), (13, 6, 1))[0]
    parts: list[list[str]] = [[] for _ in range(n)]
    for name in pool.unused:
        if gen.tidy or rng.random() < 0.85:
            parts[rng.randrange(n)].append(name)
    out = []
    for args in parts:
        if not any(pool.grad[a] for a in args):
            args.append(rng.choice([v for v in pool.values if pool.grad[v]]))
        out.append(Loss(gen.fresh("loss"), tuple(dict.fromkeys(args))))
    return tuple(out)


def _passes(rng: random.Random, losses: tuple[Loss, ...]) -> tuple[Pass, ...]:
    names = [x.out for x in losses]
    if rng.random() < 0.75:
        return (Pass(tuple(names)),)
    n = rng.choice((2, 2, 3))
    out = []
    for k in range(n):
        roots = tuple(r for r in names if rng.random() < 0.6) or (rng.choice(names),)
        last = k == n - 1
        out.append(Pass(roots, retain_graph=rng.random() < (0.2 if last else 0.93)))
    return tuple(out)


#: how often each custom Function's shape is drawn: the ones whose backward gives an undefined
#: gradient or zeros (``none``, ``zeros``) more often, so the fuzz meets what PyTorch does
#: with them (docs/scenario-language.md)
SHAPE_WEIGHTS: dict[str, int] = {"none": 3, "zeros": 2, "scale": 1, "split": 1, "nondiff": 1,
                                 "square": 1}


def _user_shapes(program: FuzzProgram, rng: random.Random) -> FuzzProgram:
    """``program`` with some unary ops and scaled copies (same argument, same result name)
    through a custom autograd Function of a random shape instead, and some losses summed on
    another worker (the backward's root is then an RPC's result)."""
    shapes = sorted(CUSTOM_FUNCTIONS)
    weights = [SHAPE_WEIGHTS[x] for x in shapes]
    for path, block, _caller in list(blocks(program)):
        stmts = tuple(Op(s.out, CUSTOM, s.args[:1], rng.choices(shapes, weights)[0])
                      if isinstance(s, Op) and (s.fn in UNARY or s.fn == SCALE)
                      and rng.random() < 0.35 else s for s in block.stmts)
        if stmts != block.stmts:
            program = with_block(program, path, replace(block, stmts=stmts))
    losses = tuple(replace(x, to=rng.choice(program.workers[1:])) if rng.random() < 0.3 else x
                   for x in program.losses)
    return replace(program, losses=losses)


def _partly_used(program: FuzzProgram, rng: random.Random) -> FuzzProgram:
    """``program`` with, now and then, one output of an RPC result in ``main`` left out of the
    losses while another output of the same fetch stays used: PyTorch sends zeros for it (its
    slot of the recv gets no gradient), often into a custom Function's backward."""
    grads = scan(program.main, program.ps, program.ps_params, ())[0]
    in_code = {a for _p, b, _c in blocks(program) for s in b.stmts for a in s.args}
    losses = program.losses
    for s in program.main.stmts:
        if not isinstance(s, RpcStmt) or rng.random() >= 0.5:
            continue
        for names in s.fetches:
            in_loss = [n for n in names if any(n in x.args for x in losses)]
            drop = [n for n in in_loss if n not in in_code]
            if len({n for n in names if n in in_code} | set(in_loss)) < 2 or not drop:
                continue
            gone = rng.choice(drop)
            kept = tuple(replace(x, args=tuple(a for a in x.args if a != gone)) for x in losses)
            if all(any(grads.get(a, False) for a in x.args) for x in kept):
                losses = kept
    return replace(program, losses=losses)


def generate(seed: int, index: int, min_workers: int = MIN_WORKERS,
             max_workers: int = MAX_WORKERS) -> FuzzProgram:
    """The ``index``-th program of the fuzz run ``seed``, with ``min_workers`` to
    ``max_workers`` workers. Deterministic: the same arguments give the same program.

    Raises ``ValueError`` when the worker range is not within 2..``limits.MAX_WORKERS`` or
    is empty.
    """
    if not 2 <= min_workers <= max_workers <= limits.MAX_WORKERS:
        raise ValueError(f"workers {min_workers}-{max_workers}: expected 2 <= min <= max <= "
                         f"{limits.MAX_WORKERS}")
    rng = random.Random(f"distviz-fuzz/{seed}/{index}")
    workers = tuple(f"worker{i}" for i in range(rng.randint(min_workers, max_workers)))
    ps: str | None = None
    ps_params: tuple[str, ...] = ()
    if rng.random() < 0.4:
        ps = rng.choice(workers[1:])
        ps_params = ("p0", "p1")[:rng.choice((1, 2))]
    gen = _Gen(rng, workers, ps, ps_params, faults=int(rng.random() < 0.12),
               tidy=rng.random() < 0.6, concurrent=rng.random() < 0.5)
    main = gen.block(workers[0], (), None, 0, rng.randint(3, 9))
    pool = _Pool(rng)
    for name, grad in scan(main, ps, ps_params, ())[0].items():
        pool.add(name, grad)
    used = {a for s in main.stmts for a in s.args}
    pool.unused = [n for n in pool.values if n not in used]
    losses = _losses(rng, pool, gen)
    passes = _passes(rng, losses)
    program = FuzzProgram(name=f"fuzz-{seed}-{index}", description="", seed=rng.randrange(1 << 31),
                      workers=workers, ps=ps, ps_params=ps_params, main=main, losses=losses,
                      passes=passes)
    program = _user_shapes(program, random.Random(f"distviz-fuzz/{seed}/{index}/custom"))
    program = _partly_used(program, random.Random(f"distviz-fuzz/{seed}/{index}/partly"))
    found = ", ".join(sorted(features(program))) or "none"
    return replace(program, description=f"generated by distviz fuzz --seed {seed} (program "
                                        f"{index}); features: {found}")
