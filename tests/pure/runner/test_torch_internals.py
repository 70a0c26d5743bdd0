"""What distviz reaches inside PyTorch exists, and means what distviz reads it as, on the torch
installed here (``tests/torch_matrix.sh VERSION`` runs this file on other releases).

The recorder and the hooks read a node's ``_sequence_nr()``, its ``_input_metadata`` (the shapes
of the gradients it receives; absent in 2.4.1, ``torch_compat`` handles it), an ``AccumulateGrad``'s ``variable``, put pre- and post-hooks on
nodes, tag events with ``torch._C._current_graph_task_id()``; the recorder and the RPC proxy read
a distributed autograd context's send and recv functions; ``distviz trace`` wraps
``torch._C._distributed_autograd.backward``; the training form uses ``DistributedOptimizer``
and ``RemoteModule``. Needs torch, no RPC workers.
"""

from __future__ import annotations

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
from torch._C._distributed_autograd import DistAutogradContext

from distviz.recorder.torch_compat import input_shapes
from distviz.runner.supervisor.torch_range import installed_torch, range_problem, release_of


def test_the_imported_torch_is_the_installed_one_and_in_the_range() -> None:
    found = installed_torch()
    assert found is not None
    # PyPI's builds say 2.4.1 in their metadata and 2.4.1+cu121 in torch.__version__
    assert found.split("+")[0] == torch.__version__.split("+")[0]
    assert range_problem(torch.__version__) is None


def test_nodes_give_sequence_numbers_input_shapes_and_the_leaf() -> None:
    x = torch.ones(2, 3, requires_grad=True)
    y = (x * 2).sum()
    mul = y.grad_fn.next_functions[0][0]
    acc = mul.next_functions[0][0]
    assert (y.grad_fn.name(), mul.name(), acc.name()) == (
        "SumBackward0", "MulBackward0", "torch::autograd::AccumulateGrad")
    assert mul._sequence_nr() < y.grad_fn._sequence_nr()
    assert acc.variable is x
    if not hasattr(mul, "_input_metadata"):  # 2.4.1 has none; 2.11.0 on have it
        assert release_of(torch.__version__) < (2, 11)
        assert input_shapes(mul) is None
        return
    assert [list(m.shape) for m in y.grad_fn._input_metadata] == [[]]
    assert (input_shapes(y.grad_fn), input_shapes(mul)) == ([[]], [[2, 3]])


def test_hooks_run_in_order_and_see_the_running_graph_task() -> None:
    x = torch.ones(2, requires_grad=True)
    y = (x * 3).sum()
    seen: list[tuple[str, int]] = []
    task = torch._C._current_graph_task_id
    for fn in (y.grad_fn, y.grad_fn.next_functions[0][0]):
        name = fn.name()
        fn.register_prehook(lambda grads, n=name: seen.append((f"pre {n}", task())))
        fn.register_hook(lambda gi, go, n=name: seen.append((f"post {n}", task())))
    assert task() == -1
    y.backward()
    assert [s for s, _ in seen] == ["pre SumBackward0", "post SumBackward0",
                                    "pre MulBackward0", "post MulBackward0"]
    assert len({t for _, t in seen}) == 1 and seen[0][1] >= 0


def test_the_distributed_internals_distviz_reads_exist() -> None:
    for method in ("_send_functions", "_recv_functions", "_known_worker_ids", "_context_id"):
        assert callable(getattr(DistAutogradContext, method)), method
    assert callable(dist_autograd._retrieve_context)
    assert callable(dist_autograd._current_context)
    assert callable(rpc._get_current_rpc_agent)
    assert torch._C._distributed_autograd.backward is dist_autograd.backward
    from torch.distributed.nn import RemoteModule
    from torch.distributed.optim import DistributedOptimizer
    from torch.distributed.rpc.rref_proxy import RRefProxy
    assert callable(DistributedOptimizer.step) and RemoteModule and RRefProxy
    assert callable(dist_autograd._get_debug_info)    # its keys: tests/e2e/test_local_backward.py


def test_the_local_engine_entry_distviz_wraps_is_the_one_backward_and_grad_call() -> None:
    import inspect

    import torch.autograd.graph as autograd_graph
    from torch.autograd.function import BackwardCFunction

    # loss.backward(), torch.autograd.backward and torch.autograd.grad all call
    # torch.autograd._engine_run_backward (tracing/hooks/local_backward.py wraps it there)
    assert torch.autograd._engine_run_backward is autograd_graph._engine_run_backward
    assert "_engine_run_backward(" in inspect.getsource(torch.autograd.backward)
    assert "_engine_run_backward(" in inspect.getsource(torch.autograd.grad)
    assert "accumulate_grad" in inspect.getsource(torch.autograd.grad)
    assert torch._C._current_graph_task_id() == -1
    assert "self" in BackwardCFunction.apply.__code__.co_varnames
