"""Random, valid, seeded training programs (pure): scenarios in the training form.

``generate_training(seed, index)`` builds the ``index``-th training program of a fuzz run as
scenario text, from ``random.Random`` seeded with the pair (nothing else). What it draws:

* an ``nn.Module`` class of one to three ``nn.Linear`` layers with ``ReLU`` between them,
  sometimes behind an ``nn.Embedding`` (the input is then indices), with a
  ``parameter_rrefs`` method; the module lives on the parameter server ``ps``;
* one trainer that makes its module with ``rpc.remote("ps", Net)``, or two trainers whose
  modules ``ps`` made in its ``init`` (so both are made in a fixed order) and that get an RRef
  of theirs with ``rpc.remote("ps", net_of, args=(k,))``; sometimes a second module on a
  worker of its own (``extra``) after the first, and sometimes a local ``nn.Linear`` head on
  the trainer;
* 2-3 iterations, one ``dist_autograd.context()`` each: the forward through RRef method calls
  (``rref.rpc_sync().forward(x)``, ``rpc_async().forward(x).wait()`` or
  ``remote().forward(x).to_here()``) and local ops, a loss, ``dist_autograd.backward``,
  sometimes ``get_gradients`` on the trainer and on ``ps``, and a ``DistributedOptimizer``
  step (SGD) over every parameter;
* with one trainer, sometimes a plant in the last iteration: an RPC result the loss never
  uses (``planted_hang``: FAST mode's hang, which the run stops at) or ``fail_backward``
  (``planted_error``: the backward raises). Plants are drawn from a stream of their own, so
  the rest of a program is what it would be without one;
* in about two programs of five, a custom autograd Function (``custom_function("SHAPE", h)``,
  any shape of ``lang.CUSTOM_FUNCTIONS``, ``none`` and ``zeros`` most, by
  ``generate.SHAPE_WEIGHTS``) at the end of ``Net.forward`` on ``ps`` or after the trainer's
  first forward call, drawn from a stream of its own as well.

Two trainers never step the same parameter, and their modules on ``ps`` are made in its
``init``. Their ``extra`` modules are not: each trainer makes its own with ``rpc.remote("extra",
Extra)`` at about the same time, and which is made first (its initial weights, and the name
``extra.Extra#0``) is the order the two calls reached ``extra`` in, which no program fixes. The
run notes that order on ``extra`` and the reference follows it; where it is not known (the two
made at the same time) the values are not compared, and the reason says so
(``distviz.runner.supervisor.served_order``). Nothing else depends on thread timing.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from distviz.fuzz.generate import SHAPE_WEIGHTS
from distviz.scenario.lang import CUSTOM_FUNCTIONS

__all__ = ["TRAINING_FEATURES", "TrainingProgram", "generate_training", "is_training"]

#: what a training program may contain, in the order the fuzz summary counts them
TRAINING_FEATURES = ("training", "two_trainers", "embedding", "extra_module", "local_head",
                     "get_gradients", "rpc_async_forward", "remote_forward", "planted_hang",
                     "planted_error", "custom_function")

#: the lines a plant adds to the last iteration, before the loss (one trainer only)
_PLANTS = {
    "planted_hang": ["if i == iterations - 1:",
                     "    unused = net.rpc_sync().forward(x)"],
    "planted_error": ["if i == iterations - 1:",
                      '    h = fail_backward(h, "planted failure in the last iteration")'],
}

_CALLS = {"rpc_sync": "{r}.rpc_sync().forward({x})",
          "rpc_async": "{r}.rpc_async().forward({x}).wait()",
          "remote": "{r}.remote().forward({x}).to_here()"}


@dataclass(frozen=True)
class TrainingProgram:
    """A generated training program: its name, scenario text and features; ``iterations``
    and ``layers`` (of the first module) for the report."""

    name: str
    text: str
    features: tuple[str, ...]
    iterations: int
    layers: int


def is_training(seed: int, index: int, fraction: float) -> bool:
    """Whether the ``index``-th program of fuzz run ``seed`` is a training program, for a
    ``fraction`` (0..1) of training programs; depends only on the three arguments."""
    if fraction <= 0:
        return False
    return fraction >= 1 or random.Random(f"distviz-fuzz-training/{seed}/{index}").random() \
        < fraction


def _module(rng: random.Random, cls: str, d_in: int, d_out: int,
            embedding: int | None) -> tuple[list[str], int]:
    """The class ``cls`` (lines) from ``d_in`` features (or ``embedding`` indices) to
    ``d_out``; returns the lines (``forward`` on a line of its own, ``return self.seq(x)``)
    and the number of Linear layers."""
    layers: list[str] = []
    d = d_in
    if embedding is not None:
        layers.append(f"nn.Embedding({embedding}, {d_in})")
    n = rng.randint(1, 3)
    for i in range(n):
        nxt = d_out if i == n - 1 else rng.randint(2, 6)
        layers.append(f"nn.Linear({d}, {nxt})")
        if i < n - 1:
            layers.append("nn.ReLU()")
        d = nxt
    return [f"class {cls}(nn.Module):",
            "    def __init__(self):",
            "        super().__init__()",
            f"        self.seq = nn.Sequential({', '.join(layers)})",
            "",
            "    def forward(self, x):",
            "        return self.seq(x)",
            "",
            "    def parameter_rrefs(self):",
            "        return [RRef(p) for p in self.parameters()]",
            "", ""], n


def _loss(rng: random.Random, y: str, d_out: int) -> list[str]:
    kind = rng.choice(("square", "relu", "cross_entropy"))
    if kind == "cross_entropy" and d_out >= 2:
        return [f"labels = torch.randint(0, {d_out}, (batch,))",
                f"loss = F.cross_entropy({y}, labels)"]
    if kind == "relu":
        return [f"loss = torch.relu({y}).sum() + ({y} * {y}).mean()"]
    return [f"loss = ({y} * {y}).sum()"]


@dataclass
class _Plan:
    """What one training program is made of, drawn before its code is written."""

    two: bool                  # two trainers, two modules on ps
    extra: bool                # a second module on a worker of its own
    head: bool                 # a local nn.Linear head on the trainer
    embedding: int | None      # the first module starts with nn.Embedding(embedding, d_in)
    d_in: int
    d_body: int                # the features the modules give
    d_head: int | None         # the head's output features
    code: list[str]            # the module classes
    layers: int                # Linear layers of the first module
    feats: set[str]
    plant: str | None = None   # a key of _PLANTS, in the last iteration
    custom: str | None = None  # a custom Function's shape, after the trainer's first forward


def _plan(rng: random.Random) -> _Plan:
    """Draw the modules and where they live (the first draws of a program, in this order)."""
    two = rng.random() < 0.35
    extra = rng.random() < 0.35
    head = rng.random() < 0.4
    embedding = rng.choice((None, None, rng.randint(4, 9)))
    d_in, _d_mid = rng.randint(2, 6), rng.randint(2, 6)
    d_out = _d_mid if extra or head else rng.randint(1, 4)
    code, layers = _module(rng, "Net", d_in, d_out, embedding)
    d_body = d_out
    if extra:
        d_body = rng.randint(1, 4) if not head else rng.randint(2, 5)
        more, _ = _module(rng, "Extra", d_out, d_body, None)
        code += more
    d_head = rng.randint(1, 3) if head else None
    feats = {"training"} | {f for f, on in (
        ("two_trainers", two), ("embedding", embedding is not None), ("extra_module", extra),
        ("local_head", head)) if on}
    return _Plan(two, extra, head, embedding, d_in, d_body, d_head, code=code, layers=layers,
                 feats=feats)


def _train(rng: random.Random, plan: _Plan, wants_grads: bool) -> list[str]:
    """The trainer's ``train(k)``: its modules, optimizer and iterations."""
    body = ["def train(k):",
            '    net = rpc.remote("ps", net_of, args=(k,))' if plan.two
            else '    net = rpc.remote("ps", Net)',
            "    params = net.rpc_sync().parameter_rrefs()"]
    if plan.extra:
        body += ['    extra = rpc.remote("extra", Extra)',
                 "    params += extra.rpc_sync().parameter_rrefs()"]
    if plan.d_head is not None:
        body += [f"    head = nn.Linear({plan.d_body}, {plan.d_head})",
                 "    params += [RRef(p) for p in head.parameters()]"]
    lr = rng.choice((0.01, 0.05, 0.1))
    body += [f"    opt = DistributedOptimizer(optim.SGD, params, lr={lr})",
             "    for i in range(iterations):",
             "        with dist_autograd.context() as context_id:"]
    return body + ["            " + s for s in _iteration(rng, plan, wants_grads)]


def _iteration(rng: random.Random, plan: _Plan, wants_grads: bool) -> list[str]:
    """One iteration's lines: forward through the modules, loss, backward, optimizer step."""
    steps = [f"x = torch.randint(0, {plan.embedding}, (batch,))" if plan.embedding is not None
             else f"x = torch.rand((batch, {plan.d_in}))"]
    style = rng.choice(tuple(_CALLS))
    plan.feats |= {"rpc_async_forward"} if style == "rpc_async" else set()
    plan.feats |= {"remote_forward"} if style == "remote" else set()
    steps.append("h = " + _CALLS[style].format(r="net", x="x"))
    if plan.custom is not None:
        steps.append(f'h = custom_function("{plan.custom}", h)')
    if rng.random() < 0.5:
        steps.append(f"h = {rng.choice(('torch.tanh(h)', 'h * 2.0', 'torch.sigmoid(h)'))}")
    if plan.extra:
        steps.append("h = " + _CALLS[rng.choice(tuple(_CALLS))].format(r="extra", x="h"))
    if plan.head:
        steps.append("h = head(h)")
    if plan.plant is not None:
        steps += _PLANTS[plan.plant]
    steps += _loss(rng, "h", plan.d_body if plan.d_head is None else plan.d_head)
    steps.append("dist_autograd.backward(context_id, [loss])")
    if wants_grads:
        steps += ["grads = dist_autograd.get_gradients(context_id)",
                  'on_ps = rpc.rpc_sync("ps", gradients_here, args=(context_id,))']
    return steps + ["opt.step(context_id)"]


def _plant(rng: random.Random) -> str | None:
    """A plant for the last iteration, or none (most programs)."""
    r = rng.random()
    return "planted_hang" if r < 0.15 else "planted_error" if r < 0.27 else None


def _custom(plan: _Plan, rng: random.Random) -> None:
    """Now and then a custom Function: at the end of ``Net.forward`` (on ps) or after the
    trainer's first forward call."""
    if rng.random() >= 0.4:
        return
    shapes = sorted(CUSTOM_FUNCTIONS)
    shape = rng.choices(shapes, [SHAPE_WEIGHTS[x] for x in shapes])[0]
    plan.feats.add("custom_function")
    if rng.random() < 0.5:
        plan.custom = shape
        return
    k = plan.code.index("        return self.seq(x)")    # Net's forward comes first
    plan.code[k] = f'        return custom_function("{shape}", self.seq(x))'


def _workers_yaml(plan: _Plan) -> list[str]:
    """The scenario's ``workers:`` section: ps (with both modules when two trainers), the
    trainers, and ``extra``."""
    trainers = ("trainer1", "trainer2") if plan.two else ("trainer1",)
    lines = ["workers:"]
    if plan.two:
        lines += ["  ps:", "    init: |", "      net1 = Net()", "      net2 = Net()"]
    else:
        lines.append("  ps: {}")
    for k, t in enumerate(trainers):
        lines += [f"  {t}:", "    main: |", f"      train({k + 1})"]
    if plan.extra:
        lines.append("  extra: {}")
    return lines


def generate_training(seed: int, index: int) -> TrainingProgram:
    """The ``index``-th training program of the fuzz run ``seed``. Deterministic: the same
    arguments give the same program."""
    rng = random.Random(f"distviz-fuzz-training/{seed}/{index}/program")
    plan = _plan(rng)
    plan.plant = None if plan.two else _plant(random.Random(
        f"distviz-fuzz-training/{seed}/{index}/plant"))
    if plan.plant is not None:
        plan.feats.add(plan.plant)
    _custom(plan, random.Random(f"distviz-fuzz-training/{seed}/{index}/custom"))
    code = list(plan.code)
    if plan.two:
        code += ["def net_of(k):", "    return net1 if k == 1 else net2", "", ""]
    wants_grads = rng.random() < 0.5
    if wants_grads:
        plan.feats.add("get_gradients")
        code += ["def gradients_here(context_id):",
                 "    return len(dist_autograd.get_gradients(context_id))", "", ""]
    code += _train(rng, plan, wants_grads)
    iterations = rng.randint(2, 3)
    name = f"fuzz-training-{seed}-{index}"
    lines = [f"name: {name}", "description: >",
             f"  generated by distviz fuzz --training (seed {seed}, program {index}); "
             f"features: {', '.join(sorted(plan.feats))}",
             *_workers_yaml(plan),
             "params:", f"  iterations: {iterations}", f"  batch: {rng.randint(2, 4)}",
             f"seed: {rng.randrange(1 << 31)}", "code: |"]
    lines += [f"  {s}" if s else "" for s in code]
    return TrainingProgram(name=name, text="\n".join(lines) + "\n",
                           features=tuple(f for f in TRAINING_FEATURES if f in plan.feats),
                           iterations=iterations, layers=plan.layers)
