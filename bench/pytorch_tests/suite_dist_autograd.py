"""PyTorch's own distributed autograd and optimizer tests, from the torch wheel, generated the
way PyTorch's ``test/distributed/rpc/test_tensorpipe_agent.py`` and ``test_faulty_agent.py``
generate them (``rpc_utils.generate_tests``, spawned workers, CPU only; forked on request:
``generated``):

* ``TensorPipeDistAutogradTest``, ``TensorPipeDistOptimizerTest`` and
  ``TensorPipeTensorPipeAgentDistAutogradTest`` on the TensorPipe agent;
* ``FaultyFaultyAgentDistAutogradTest`` on the faulty agent.

``bench/bench_pytorch_tests.py`` runs them plain and under ``pytest --distviz``;
``tests/e2e/test_pytest_plugin_pytorch.py`` runs a handful of them in CI.
"""

from generated import generate
from torch.testing._internal.distributed.rpc.dist_autograd_test import (
    DistAutogradTest,
    FaultyAgentDistAutogradTest,
    TensorPipeAgentDistAutogradTest,
)
from torch.testing._internal.distributed.rpc.dist_optimizer_test import DistOptimizerTest
from torch.testing._internal.distributed.rpc.faulty_rpc_agent_test_fixture import (
    FaultyRpcAgentTestFixture,
)
from torch.testing._internal.distributed.rpc.tensorpipe_rpc_agent_test_fixture import (
    TensorPipeRpcAgentTestFixture,
)

globals().update(generate(
    "TensorPipe", TensorPipeRpcAgentTestFixture,
    [DistAutogradTest, DistOptimizerTest, TensorPipeAgentDistAutogradTest], __name__))
globals().update(generate(
    "Faulty", FaultyRpcAgentTestFixture, [FaultyAgentDistAutogradTest], __name__))
