"""The torch side of the scenario language: proxy, size cap, generators, budget, fault helpers.

Needs torch, not RPC: every check runs in this process (the crash helper in a subprocess).
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
from typing import Any

import pytest
import torch
from guards import HANG_GUARD_S

from distviz.limits import WorkerStatus
from distviz.runner.sandbox.base import (
    SandboxError,
    StepBudget,
    TorchFunction,
    TorchProxy,
    base_namespace,
    crash_backward,
    fail_backward,
    make_generator,
)
from distviz.runner.sandbox.custom_fns import custom_function
from distviz.scenario import lang, load_scenario_text


def proxy(max_numel: int = 1000, seed: int = 0) -> TorchProxy:
    return TorchProxy(torch.Generator().manual_seed(seed), max_numel)


def test_whitelist_names_exist_in_torch() -> None:
    for name in lang.TORCH_FUNCS | lang.TORCH_DTYPES | lang.TORCH_CONTEXTS:
        assert hasattr(torch, name), name
    for name in lang.TORCH_NN_FUNCTIONAL:
        assert hasattr(torch.nn.functional, name), name
    for name in lang.TORCH_LINALG:
        assert hasattr(torch.linalg, name), name
    matrix = torch.zeros(2, 2)
    for name in lang.TENSOR_METHODS | lang.TENSOR_ATTRIBUTES:
        assert hasattr(matrix, name), name


def test_non_creation_functions_are_the_real_torch_objects() -> None:
    p = proxy()
    assert p.add is torch.add
    assert p.matmul is torch.matmul
    assert p.nn.functional.relu is torch.nn.functional.relu
    assert p.linalg.multi_dot is torch.linalg.multi_dot
    assert p.float32 is torch.float32
    assert p.no_grad is torch.no_grad


def test_proxy_exposes_nothing_outside_the_whitelist() -> None:
    p = proxy()
    for name in ("load", "save", "hub", "jit", "ops", "distributed", "empty", "manual_seed"):
        with pytest.raises(AttributeError, match=f"torch.{name} is not available"):
            getattr(p, name)
    with pytest.raises(AttributeError, match="torch.nn.Linear"):
        p.nn.Linear  # noqa: B018
    with pytest.raises(AttributeError, match="read-only"):
        p.add = None


def test_size_cap_refuses_before_allocating() -> None:
    p = proxy(max_numel=1_000_000)
    with pytest.raises(SandboxError) as info:
        p.rand((100000, 100000))
    assert str(info.value) == ("torch.rand((100000, 100000)) would allocate 10,000,000,000 "
                               "elements; the cap is 1,000,000 (--max-numel)")
    for call in (lambda: p.zeros(2000, 2000), lambda: p.full((2000, 2000), 1.0),
                 lambda: p.eye(2000), lambda: p.arange(0, 2e6), lambda: p.randperm(2_000_000),
                 lambda: p.randint(0, 5, (2000, 2000)), lambda: p.linspace(0, 1, 2_000_000),
                 lambda: p.ones(size=(2000, 2000))):
        with pytest.raises(SandboxError, match="--max-numel"):
            call()
    assert p.zeros(1000, 1000).numel() == 1_000_000


def test_random_functions_use_the_worker_generator() -> None:
    a, b = proxy(seed=3), proxy(seed=3)
    torch.manual_seed(99)
    first = a.rand((2, 2))
    torch.rand(5)  # the global stream does not affect a worker's stream
    assert torch.equal(first, b.rand((2, 2)))
    assert torch.equal(a.randn(3), b.randn(3))
    assert torch.equal(a.rand_like(first), b.rand_like(first))


def test_initiator_generator_matches_manual_seed() -> None:
    torch.manual_seed(5)
    expected = torch.rand(3)
    assert torch.equal(proxy_from(make_generator(5, 0)).rand(3), expected)
    other = proxy_from(make_generator(5, 1)).rand(3)
    assert not torch.equal(other, expected)
    assert torch.equal(proxy_from(make_generator(5, 1)).rand(3), other)


def proxy_from(generator: torch.Generator) -> TorchProxy:
    return TorchProxy(generator, 1000)


def test_torch_functions_pickle_by_name() -> None:
    p = proxy()
    base_namespace(p, StepBudget(10), {})
    restored = pickle.loads(pickle.dumps(p.rand))
    assert isinstance(restored, TorchFunction)
    assert restored is p.rand
    assert pickle.loads(pickle.dumps(p.add)) is torch.add


def test_fail_backward_raises_in_backward_with_its_node_and_fault() -> None:
    x = torch.rand(3, requires_grad=True)
    y = fail_backward(x, "boom on purpose")
    assert torch.equal(y, x)
    assert y.grad_fn is not None
    assert y.grad_fn.name() == "FailBackwardBackward"
    fault = getattr(y.grad_fn, "distviz_fault", None)
    assert fault == {"kind": "fail", "message": "boom on purpose"}
    with pytest.raises(RuntimeError, match="boom on purpose"):
        y.sum().backward()


def test_fail_backward_needs_a_tensor_that_requires_grad() -> None:
    with pytest.raises(SandboxError, match="does not require grad"):
        fail_backward(torch.rand(2), "m")
    with torch.no_grad(), pytest.raises(SandboxError, match="does not require grad"):
        crash_backward(torch.rand(2, requires_grad=True))


@pytest.mark.parametrize(("shape", "node", "grad"), [
    ("scale", "ScaleBackward", lambda x: torch.full_like(x, 3.0)),
    ("split", "SplitBackward", lambda x: torch.full_like(x, 2.0)),
    ("nondiff", "NonDiffBackward", lambda x: torch.full_like(x, 4.0)),
    ("square", "SquareBackward", lambda x: 2 * x),
    ("zeros", "ZerosBackward", torch.zeros_like),
    ("none", "DroppedBackward", lambda x: None),
])
def test_custom_functions_are_what_the_language_says(shape: str, node: str, grad: Any) -> None:
    """Each shape of custom_function: its node, and the gradient PyTorch gives x (``None``:
    PyTorch stores none)."""
    assert set(lang.CUSTOM_FUNCTIONS) == {"scale", "split", "nondiff", "square", "zeros", "none"}
    x = torch.rand(2, 2, requires_grad=True)
    y = custom_function(shape, x)
    assert y.grad_fn is not None and y.grad_fn.name() == node
    assert hasattr(y.grad_fn, "_forward_cls")    # what the recorder marks "python"
    y.sum().backward()
    want = grad(x.detach())
    assert (x.grad is None) if want is None else torch.equal(x.grad, want)


def test_crash_backward_node_and_exit_status() -> None:
    y = crash_backward(torch.rand(2, requires_grad=True))
    assert y.grad_fn is not None
    assert y.grad_fn.name() == "CrashBackwardBackward"
    assert getattr(y.grad_fn, "distviz_fault", None) == {"kind": "crash"}
    script = textwrap.dedent("""
        import torch
        from distviz.runner.sandbox.base import crash_backward
        print("before", flush=True)
        crash_backward(torch.rand(2, requires_grad=True)).sum().backward()
        print("after")
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=HANG_GUARD_S)
    assert done.returncode == WorkerStatus.CRASHED
    assert done.stdout == "before\n"


def test_budget_tick_raises_after_max_steps() -> None:
    budget = StepBudget(3)
    assert budget.tick() and budget.tick() and budget.tick()
    with pytest.raises(SandboxError, match="more than 3 loop/function steps"):
        budget.tick()


def test_budget_range_refuses_more_than_the_budget() -> None:
    budget = StepBudget(100)
    assert list(budget.range(3)) == [0, 1, 2]
    with pytest.raises(SandboxError, match=r"range\(10\*\*30\)|range\(1000000000000000000"):
        budget.range(10**30)


def run(main: str, *, code: str = "", max_steps: int = 1000, max_numel: int = 1000,
        params: dict[str, int] | None = None) -> dict[str, object]:
    """Validate a one-worker scenario and run its code and main locally (no RPC)."""
    code_block = ("code: |\n" + textwrap.indent(code, "  ")) if code else ""
    text = (f"name: t\nworkers: [w0]\n{code_block}main: |\n" + textwrap.indent(main, "  ")
            + "backward: [out]\n")
    scenario = load_scenario_text(text, path="t.yaml")
    namespace = base_namespace(proxy(max_numel), StepBudget(max_steps), params or {})
    if scenario.code is not None:
        exec(scenario.code.compile(), namespace)
    exec(scenario.main.compile(), namespace)
    return namespace


def test_instrumented_program_runs_and_ticks() -> None:
    ns = run("out = 0\nfor i in range(10):\n    out = out + i * 2\n")
    assert ns["out"] == 90


def test_runaway_recursion_hits_the_budget_with_the_scenario_line() -> None:
    with pytest.raises(SandboxError) as info:
        run("out = f(3)\n", code="def f(n):\n    return f(n) + 1 if n > 0 else 0\n",
            max_steps=50)
    assert info.value.line == 4
    assert info.value.path == "t.yaml"


def test_size_cap_reports_the_scenario_line() -> None:
    with pytest.raises(SandboxError) as info:
        run("a = 1\nout = torch.zeros((100, 100))\n", max_numel=1000)
    assert info.value.line == 5


def test_huge_repeat_and_power_are_refused() -> None:
    with pytest.raises(SandboxError, match="too large"):
        run("out = 'ab' * 100000000\n")
    with pytest.raises(SandboxError, match="too large an integer"):
        run("out = 2 ** 10000000\n")
    with pytest.raises(SandboxError, match="too large"):
        run("out = [1, 2]\nout *= 100000000\n")


def test_tensor_arithmetic_is_unchanged_by_the_guards() -> None:
    ns = run("x = torch.ones(2, requires_grad=True)\nout = (x * 3) ** 2\nout *= 2\n")
    out = ns["out"]
    assert isinstance(out, torch.Tensor)
    assert out.tolist() == [18.0, 18.0]


def test_namespace_builtins_are_only_the_whitelist() -> None:
    ns = base_namespace(proxy(), StepBudget(10), {"micro": 4})
    builtins_ = ns["__builtins__"]
    assert isinstance(builtins_, dict)
    assert set(builtins_) == set(lang.BUILTINS)
    assert ns["micro"] == 4
    with pytest.raises(NameError):
        exec("open('x')", ns)


# -- RPC nesting (the chain each call of a scenario function carries) ---------------------------

def test_the_depth_message_names_the_cycle_of_functions_and_workers() -> None:
    from distviz.runner.sandbox.rpc_proxy import _depth_message

    frames = [("main", "worker0"), ("ping", "worker1"), ("pong", "worker0"), ("ping", "worker1")]
    text = _depth_message(frames, 2)
    assert text.startswith("RPC calls nest more than 2 deep: the calls ping on worker1 -> pong "
                           "on worker0 -> ping on worker1 repeat without end"), text
    assert text.endswith("(raise the limit with --max-rpc-depth)")
    chain = _depth_message([("main", "w0"), ("a", "w1"), ("b", "w2")], 1)
    assert "the chain main on w0 -> a on w1 -> b on w2" in chain


def test_a_nested_call_runs_with_its_chain_and_gives_the_thread_back() -> None:
    from distviz.runner.sandbox.rpc_proxy import _chain, run_nested

    frames = [("main", "worker0"), ("f", "worker1")]
    assert run_nested(frames, lambda a, b=0: (_chain(), a + b), 1, b=2) == (frames, 3)
    assert _chain() == []


def test_a_depth_error_crossing_many_hops_keeps_only_the_innermost() -> None:
    from distviz.runner.sandbox.rpc_proxy import RpcDepthError, run_nested

    inner = "On WorkerInfo(id=0, name=worker0):\nRpcDepthError('RPC calls nest ...')\n"
    wrapped = f"On WorkerInfo(id=1, name=worker1):\nRpcDepthError('{inner}')\n{inner}"

    def raises(text: str) -> None:
        raise RpcDepthError(text)
    with pytest.raises(RpcDepthError) as info:
        run_nested([("main", "worker0")], raises, wrapped)
    assert str(info.value) == inner
    with pytest.raises(RpcDepthError) as info:
        run_nested([("main", "worker0")], raises, "RPC calls nest ...")
    assert str(info.value) == "RPC calls nest ..."


class _Context:
    def _context_id(self) -> int:
        return 7


class _InContext:
    ctx = _Context()


def test_recording_waits_for_the_reply_to_each_call_nobody_waited_for() -> None:
    """An ``rpc.remote`` whose RRef is never fetched: before the context is recorded, its
    reply (the callee read the request and holds its recv) is waited for; a call that already
    replied is forgotten at once."""
    import threading

    from distviz.runner.sandbox import rpc_proxy

    answered: torch.futures.Future[int] = torch.futures.Future()
    rpc_proxy._expect_reply(_InContext(), answered)  # type: ignore[arg-type]
    answered.set_result(1)
    assert 7 not in rpc_proxy._REPLIES
    late: torch.futures.Future[int] = torch.futures.Future()
    rpc_proxy._expect_reply(_InContext(), late)  # type: ignore[arg-type]
    order: list[str] = []
    waiter = threading.Thread(target=lambda: (rpc_proxy.wait_replies(7), order.append("waited")))
    waiter.start()
    order.append("replied")
    late.set_result(2)
    waiter.join()
    assert order == ["replied", "waited"] and 7 not in rpc_proxy._REPLIES
