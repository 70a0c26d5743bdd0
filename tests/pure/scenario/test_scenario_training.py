"""The scenario language for training: classes, the tutorials' names and helpers, contexts per
iteration, several trainers; what is instrumented for the run-time checks (pure, milliseconds).

The escapes these constructs could open are in ``tests/bad_scenarios/`` (each refused with its
one-line error)."""

from __future__ import annotations

import ast
import textwrap

import pytest
from conftest import SCENARIOS

from distviz.errors import ScenarioError, UsageError
from distviz.scenario import load_scenario, load_scenario_text
from distviz.selection import ContextSelection

TRAINING = ["rnn_tutorial", "ps_two_trainers", "module_shards", "seed_training",
            "get_gradients", "hogwild"]


@pytest.mark.parametrize("name", TRAINING)
def test_shipped_training_scenarios_load_in_the_training_form(name: str) -> None:
    sc = load_scenario(SCENARIOS / f"{name}.yaml")
    assert sc.training and not sc.passes
    assert sc.trainers and all(w in sc.mains for w in sc.trainers)
    assert sc.initiator == sc.trainers[0]


def test_rnn_tutorial_keeps_the_tutorials_own_code() -> None:
    sc = load_scenario(SCENARIOS / "rnn_tutorial.yaml")
    assert sc.trainers == ["trainer"] and sc.mains["trainer"].source.strip() == "_run_trainer()"
    assert set(sc.classes) == {"EmbeddingTable", "Decoder", "RNNModel"}
    assert sc.classes["RNNModel"].attributes == ("emb_table_rref", "rnn", "decoder_rref")
    assert sc.classes["RNNModel"].methods == ("__init__", "forward", "parameter_rrefs")
    assert {"_call_method", "_remote_method", "_parameter_rrefs", "_run_trainer"} <= set(
        sc.functions)
    source = sc.code.source if sc.code else ""
    for line in ("super(EmbeddingTable, self).__init__()",
                 "return method(rref.local_value(), *args, **kwargs)",
                 "args=[method, rref] + list(args),",
                 "emb = _remote_method(EmbeddingTable.forward, self.emb_table_rref, input)",
                 "data = torch.LongTensor(batch, nindices) % ntoken",
                 "yield data, target", "hidden[0].detach_()",
                 "with dist_autograd.context() as context_id:",
                 "dist_autograd.backward(context_id, [loss])", "opt.step(context_id)",
                 'print("Training epoch {}".format(epoch))',
                 "if torch.accelerator.is_available():"):
        assert line in source


def _training(code: str, main: str = "train()") -> str:
    return ("name: t\nworkers:\n  ps: {}\n  trainer:\n    main: |\n"
            + textwrap.indent(textwrap.dedent(main).rstrip("\n") + "\n", "      ")
            + "code: |\n" + textwrap.indent(textwrap.dedent(code), "  "))


ACCEPTED = {
    "super_zero_argument": """
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.lin = nn.Linear(2, 2)

            def forward(self, x):
                return self.lin(x)
        """,
    "subclass_of_a_scenario_class": """
        class Base(nn.Module):
            def __init__(self):
                super().__init__()
                self.scale = 2.0

        class Net(Base):
            def forward(self, x):
                return x * self.scale
        """,
    "methods_as_values_and_star_kwargs": """
        class Net(nn.Module):
            def forward(self, x, k=1):
                return x * k

        def call(method, rref, *args, **kwargs):
            return method(rref.local_value(), *args, **kwargs)

        def use(rref):
            return rpc.rpc_sync(rref.owner(), call, args=[Net.forward, rref], kwargs={"k": 2})
        """,
    "rref_method_proxies_and_remote_module": """
        class Net(nn.Module):
            def forward(self, x):
                return x

            def parameter_rrefs(self):
                return [RRef(p) for p in self.parameters()]

        def use(x):
            rref = rpc.remote("ps", Net)
            a = rref.rpc_sync().forward(x)
            b = rref.remote().forward(x).to_here()
            c = rref.rpc_async().forward(x).wait()
            params = rref.rpc_sync().parameter_rrefs()
            remote = RemoteModule("ps/cpu", nn.Linear, args=(2, 2))
            return a, b, c, params, remote.remote_parameters(), rpc.RRef(x).owner_name()
        """,
    "generators_closures_and_loops_over_calls": """
        class Stack(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([nn.Linear(2, 2), nn.Linear(2, 2)])

        def batches(n):
            def one():
                return torch.LongTensor(2, 3) % 5
            for _ in range(n):
                yield one(), torch.randint(0, 3, (2,))

        def use(model, d):
            total = 0
            for x, y in batches(3):
                total = total + x.sum()
            for name, p in model.named_parameters():
                total = total + p.sum()
            for k, v in d.items():
                total = total + v
            for layer in model.layers:
                total = total + 1
            return total
        """,
    "nn_init_optim_and_devices": """
        def make():
            lin = nn.Linear(3, 3)
            nn.init.uniform_(lin.weight, -0.1, 0.1)
            nn.init.zeros_(lin.bias)
            opt = optim.SGD(lin.parameters(), lr=0.1)
            device = torch.accelerator.current_accelerator()
            if torch.accelerator.is_available() or torch.cuda.is_available():
                lin = lin.to(device)
            x = F.relu(torch.nn.functional.linear(torch.rand(3), lin.weight.data))
            return lin, opt, x.cpu().detach_(), "{} and {name:>8}".format(1, name="x")
        """,
    "input_as_a_parameter_name": """
        def forward(input):
            return input * 2
        """,
}


@pytest.mark.parametrize("name", sorted(ACCEPTED))
def test_tutorial_constructs_are_accepted(name: str) -> None:
    text = _training(ACCEPTED[name], main="""\
        with dist_autograd.context() as context_id:
            loss = torch.rand(3, requires_grad=True).sum()
            dist_autograd.backward(context_id, [loss])
            grads = dist_autograd.get_gradients(context_id)
        """)
    load_scenario_text(text, path="s.yaml")


def test_training_form_needs_a_backward_call() -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(_training("def train():\n    pass\n"), path="s.yaml")
    assert "missing required key 'backward'" in str(info.value)
    assert "dist_autograd.backward(context_id, [loss])" in str(info.value)


def test_worker_mains_only_without_a_backward_key() -> None:
    text = ("name: t\nworkers:\n  a: {}\n  b: {main: 'x = 1'}\nmain: |\n  loss = torch.rand(3, "
            "requires_grad=True).sum()\nbackward: [loss]\n")
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(text, path="s.yaml")
    assert "workers.b.main" in str(info.value) and "without a backward: key" in str(info.value)


def test_top_level_main_and_first_workers_main_conflict() -> None:
    text = ("name: t\nworkers:\n  a: {main: 'x = 1'}\n  b: {}\nmain: |\n  x = 2\n")
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(text, path="s.yaml")
    assert "workers.a.main" in str(info.value) and "give only one" in str(info.value)


def test_several_trainers_in_worker_order() -> None:
    sc = load_scenario(SCENARIOS / "ps_two_trainers.yaml")
    assert sc.trainers == ["trainer1", "trainer2"] and sc.initiator == "trainer1"
    assert sc.worker_state["ps"] == ["features", "head1", "head2"]


def _instrumented(code: str) -> str:
    sc = load_scenario_text(_training(code, main="""\
        with dist_autograd.context() as context_id:
            loss = torch.rand(3, requires_grad=True).sum()
            dist_autograd.backward(context_id, [loss])
        """), path="s.yaml")
    assert sc.code is not None
    return ast.unparse(sc.code.tree)


def test_declared_names_are_checked_at_run_time_and_fixed_names_are_not() -> None:
    text = _instrumented("""
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.encoder = nn.Linear(2, 2)

            def forward(self, x):
                return self.encoder(x).sum() + self.encoder.weight.sum()
        """)
    assert "_dv_self(self).encoder = nn.Linear(2, 2)" in text
    assert "_dv_attr(self, 'encoder')(x).sum()" in text
    assert "_dv_attr(self, 'encoder').weight.sum()" in text   # weight, sum: fixed names
    assert "super().__init__()" in text and "_dv_attr(super()" not in text
    assert "_dv_class(Net, ('__init__', 'forward'), ('encoder',))" in text


def test_context_selection_forms() -> None:
    assert [k for k in range(1, 8) if ContextSelection.parse("every:3").selects(k)] == [1, 4, 7]
    assert [k for k in range(1, 5) if ContextSelection.parse("2,4").selects(k)] == [2, 4]
    assert ContextSelection.parse("first").selects(1) and not ContextSelection.parse(
        "first").selects(2)
    assert ContextSelection.parse(" ALL ").text() == "all"
    for bad in ("every:0", "x", "0", "1,,2"):
        with pytest.raises(UsageError):
            ContextSelection.parse(bad)
