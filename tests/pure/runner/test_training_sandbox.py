"""The run-time side of the training names, in one process (torch, no RPC): the checks behind a
class's declared names, the legacy constructors and device queries, module parameter names,
and the single-process reference of a training run with several trainers."""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
from conftest import SCENARIOS

torch = pytest.importorskip("torch")

from distviz.runner.protocol import WorkerOptions  # noqa: E402
from distviz.runner.reference.local_training import run_training_reference  # noqa: E402
from distviz.runner.sandbox import modules  # noqa: E402
from distviz.runner.sandbox.base import SandboxError  # noqa: E402
from distviz.runner.sandbox.namespace import build_namespace  # noqa: E402
from distviz.runner.sandbox.rpc_proxy import LocalRpc, LocalWorld  # noqa: E402
from distviz.scenario import load_scenario, load_scenario_text  # noqa: E402

CODE = """\
class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.count = 0

    def forward(self, x):
        self.count = self.count + 1
        return self.lin(x)

def attribute_of(obj):
    return obj.lin

def set_on(obj):
    obj.poke(1)

class Poker(nn.Module):
    def poke(self, v):
        self.lin = v
"""


def _namespace(code: str = CODE, **extra: str) -> dict[str, Any]:
    text = ("name: t\nworkers: [w0]\ncode: |\n" + textwrap.indent(code, "  ")
            + "main: |\n  loss = torch.rand(3, requires_grad=True).sum()\nbackward: [loss]\n")
    sc = load_scenario_text(text, path="s.yaml")
    world = LocalWorld()
    ns = world.run("w0", build_namespace, sc, "w0", 0, LocalRpc(world), WorkerOptions(),
                   reference=True)
    world.namespaces["w0"] = ns
    return ns


def test_declared_names_work_on_the_scenarios_own_objects() -> None:
    ns = _namespace()
    enc = ns["Encoder"]()
    out = enc(torch.rand(4, 3))
    assert out.shape == (4, 2) and enc.count == 1
    assert ns["attribute_of"](enc) is enc.lin
    assert ns["Encoder"].forward is type(enc).forward


def test_declared_names_are_refused_on_anything_else() -> None:
    ns = _namespace()
    with pytest.raises(SandboxError, match=r"\.lin is only available on the scenario's own"):
        ns["attribute_of"](torch.rand(2))
    with pytest.raises(SandboxError, match="only available on the scenario's own"):
        ns["attribute_of"](torch.nn.Linear(2, 2))   # a torch module, not a scenario class


def test_self_attributes_are_set_only_on_the_scenarios_own_objects() -> None:
    ns = _namespace()
    poker = ns["Poker"]
    with pytest.raises(SandboxError, match="sets attributes only on objects of the scenario"):
        poker.poke(torch.nn.Linear(2, 2), 3)   # a method called on a foreign object
    p = poker()
    p.poke(5)
    assert p.lin == 5


def test_a_declared_attribute_never_reaches_torchs_own_members() -> None:
    ns = _namespace("class A(nn.Module):\n    def set(self):\n        self.apply = 1\n\n"
                    "def get(a):\n    return a.apply\n")
    with pytest.raises(SandboxError, match="has no attribute .apply yet"):
        ns["get"](ns["A"]())   # nn.Module.apply exists, but A never set it


def test_legacy_constructors_draw_from_the_workers_generator() -> None:
    a = _namespace()["torch"].LongTensor(5, 6)
    b = _namespace()["torch"].LongTensor(5, 6)
    assert a.dtype == torch.int64 and a.shape == (5, 6) and torch.equal(a, b)
    assert (a >= 0).all() and (a < 2**31).all()
    assert _namespace()["torch"].FloatTensor([1, 2]).tolist() == [1.0, 2.0]
    with pytest.raises(SandboxError, match="--max-numel"):
        _namespace()["torch"].LongTensor(100_000, 100_000)


def test_scenarios_run_on_cpu() -> None:
    t = _namespace()["torch"]
    assert t.accelerator.is_available() is False and t.cuda.is_available() is False
    assert t.accelerator.current_accelerator() is None


def test_module_parameters_are_named_after_the_outermost_module() -> None:
    ns = _namespace()
    modules.use_scope("reference")
    world = LocalWorld()
    try:
        outer = world.run("w0", ns["Encoder"])
        names = dict((label, p) for p, label in modules.names("w0"))
        assert names["w0.Encoder#0.lin.weight"] is outer.lin.weight
        labelled = modules.names("w0", {id(outer): "w0.model"})
        assert ("w0.model.lin.bias", outer.lin.bias) in [(n, p) for p, n in labelled]
    finally:
        modules.use_scope("run")


def _points(*turns: tuple[str, int]) -> list[tuple[str, int]]:
    """``(trainer, how many points)`` turns as the ``(trainer, number)`` order of points."""
    seen: dict[str, int] = {}
    out = []
    for trainer, k in turns:
        for _ in range(k):
            seen[trainer] = seen.get(trainer, 0) + 1
            out.append((trainer, seen[trainer]))
    return out


def test_reference_runs_several_trainers_in_the_real_runs_order() -> None:
    sc = load_scenario(SCENARIOS / "ps_two_trainers.yaml", {"iterations": "2"})
    # each trainer: a call (its head's RRefs), then per context: opening, call, step
    order = _points(("trainer2", 4), ("trainer1", 4), ("trainer1", 3), ("trainer2", 3))
    result = run_training_reference(sc, WorkerOptions(), order)
    assert result["outcome"] == "completed", result["error"]
    assert [(c["trainer"], c["index"]) for c in result["contexts"]] == [
        ("trainer2", 1), ("trainer1", 1), ("trainer1", 2), ("trainer2", 2)]
    assert result["points"] == {t: ["rpc", *["context", "rpc", "step"] * 2]
                                for t in ("trainer1", "trainer2")}
    # each context keeps its own gradients of the shared layer on ps
    for c in result["contexts"]:
        assert {"ps.features.weight", "ps.features.bias"} <= set(c["gradients"])
    heads = {name for c in result["contexts"] for step in c["steps"] for name in
             (u["name"] for u in step["updates"])}
    assert heads == {"ps.head1.weight", "ps.head1.bias", "ps.head2.weight", "ps.head2.bias"}
    assert set(result["final"]) == {"ps.features.weight", "ps.features.bias", "ps.head1.weight",
                                    "ps.head1.bias", "ps.head2.weight", "ps.head2.bias"}


def _hogwild(order: list[tuple[str, int]], iterations: int = 1) -> dict[str, Any]:
    sc = load_scenario(SCENARIOS / "hogwild.yaml", {"iterations": str(iterations)})
    result = run_training_reference(sc, WorkerOptions(), order)
    assert result["outcome"] == "completed", result["error"]
    return result


def test_hogwild_reference_reads_and_updates_the_shared_layer_in_the_given_order() -> None:
    """Two trainers step one shared ``nn.Linear``: a trainer's forward reads the weights as
    the other's steps left them at that point of the order. Each trainer's points: a call
    (the RRefs), the context, the forward call, the step."""
    one_by_one = _hogwild(_points(("trainer1", 4), ("trainer2", 4)))
    raced = _hogwild(_points(*[(t, 1) for _ in range(4) for t in ("trainer1", "trainer2")]))
    second_first = _hogwild(_points(("trainer2", 4), ("trainer1", 4)))
    start = _hogwild(_points(("trainer1", 1), ("trainer2", 1)), iterations=0)
    loss = {name: {c["trainer"]: c["loss"][0] for c in r["contexts"]} for name, r in
            [("one_by_one", one_by_one), ("raced", raced), ("second_first", second_first)]}
    # trainer1 reads the initial weights in all three orders; trainer2 only when it reads
    # them before trainer1's step (raced: both forwards come before both steps)
    assert loss["one_by_one"]["trainer1"] == loss["raced"]["trainer1"]
    assert loss["raced"]["trainer2"] == loss["second_first"]["trainer2"]
    assert loss["one_by_one"]["trainer2"] != loss["raced"]["trainer2"]
    # SGD: each parameter ends at its start minus lr times both contexts' gradients
    for result in (one_by_one, raced):
        for name in ("ps.model.weight", "ps.model.bias"):
            grads = [torch.tensor(c["gradients"][name]["all"]) for c in result["contexts"]]
            want = torch.tensor(start["final"][name]["all"]) - 0.05 * (grads[0] + grads[1])
            got = torch.tensor(result["final"][name]["all"])
            assert torch.allclose(got, want, atol=1e-6), name


def test_the_backward_form_reference_names_module_parameters_as_the_recorder_does() -> None:
    from distviz.runner.reference.plain import run_reference
    text = textwrap.dedent("""\
        name: t
        workers:
          worker0: {}
          worker1: {init: "net = Net()"}
        code: |
          class Net(nn.Module):
              def __init__(self):
                  super().__init__()
                  self.lin = nn.Linear(3, 2)

              def forward(self, x):
                  return self.lin(x)

          def run_net(x):
              return net(x)
        main: |
          x = torch.rand((4, 3), requires_grad=True)
          loss = rpc.rpc_sync("worker1", run_net, args=(x,)).sum()
        backward: [loss]
        """)
    ref = run_reference(load_scenario_text(text, path="s.yaml"), WorkerOptions())
    assert ref["outcome"] == "completed", ref["error"]
    assert set(ref["grads"]) == {"x", "worker1.net.lin.weight", "worker1.net.lin.bias"}


def test_the_reference_in_the_order_extra_made_the_modules_in_gives_pytorchs_losses() -> None:
    """The saved run of the fuzz's ``fuzz-training-1206-7`` (``tests/runs/
    fuzz_training_1206_7_order.json``): in the order the trainers' calls began (trainer2's
    ``rpc.remote("extra", Extra)`` first) the reference gives the losses it gave that run; with
    trainer1's module made first, as ``extra`` made them, it gives PyTorch's real losses."""
    import json

    from distviz.fuzz.training_program import generate_training
    from distviz.runner.supervisor.collate import interleaving

    saved = json.loads((SCENARIOS.parent / "tests" / "runs"
                        / "fuzz_training_1206_7_order.json").read_text())
    sc = load_scenario_text(generate_training(1206, 7).text, "fuzz-training-1206-7.yaml")
    began = interleaving(saved["points"]).order
    assert began.index(("trainer2", 3)) < began.index(("trainer1", 3))
    made = [p for p in began if p != ("trainer1", 3)]
    made.insert(made.index(("trainer2", 3)), ("trainer1", 3))
    for order, want in ((began, saved["reference_loss"]), (made, saved["real_loss"])):
        result = run_training_reference(sc, WorkerOptions(), order)
        assert result["outcome"] == "completed", result["error"]
        loss = {f"{c['trainer']} {c['index']}": c["loss"][0] for c in result["contexts"]}
        assert loss == pytest.approx(want, rel=1e-6, abs=1e-9)


def test_a_worker_notes_the_trainers_calls_that_drew_numbers_or_made_a_module() -> None:
    from distviz.runner.sandbox import served

    def call(frames: list[tuple[str, str]], fn: Any) -> None:
        note = served.begin(frames)
        fn()
        served.end(note)

    served.watch(["trainer1", "trainer2"])
    try:
        call([("main", "trainer1"), ("forward", "ps")], lambda: torch.ones(2) * 2)  # reads
        call([("main", "trainer2"), ("draw", "ps")], lambda: torch.rand(2))
        call([("main", "trainer1"), ("f", "ps"), ("Extra", "extra")],
             lambda: torch.nn.Linear(2, 2))
        call([("main", "ps"), ("draw", "extra")], lambda: torch.rand(2))   # not a trainer's
        taken = served.taken()
        assert [(t, f) for t, f, _s, _e in taken] == [("trainer2", "draw"), ("trainer1", "Extra")]
        assert all(s <= e for _t, _f, s, e in taken)
        served.watch(["trainer1"])             # one trainer: its calls go in its own order
        call([("main", "trainer1"), ("draw", "ps")], lambda: torch.rand(2))
        assert served.taken() == []
    finally:
        served.watch([])


def test_a_worker_notes_draws_from_the_scenarios_generator_and_named_leaves() -> None:
    from distviz.runner.sandbox import served

    gen = torch.Generator().manual_seed(1)
    made: list[Any] = []
    frames = [("main", "trainer1"), ("f", "ps")]
    served.watch(["trainer1", "trainer2"], gen, made)
    try:
        note = served.begin(frames)
        torch.rand(2, generator=gen)             # the scenario's torch.rand
        served.end(note)
        note = served.begin(frames)
        made.append((torch.ones(1), "ps.full#0"))   # a leaf named in the order it was made
        served.end(note)
        note = served.begin(frames)
        served.end(note)
        assert len(served.taken()) == 2
    finally:
        served.watch([])
