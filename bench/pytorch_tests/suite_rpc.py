"""Every RPC test class PyTorch ships, from the torch wheel, generated the way PyTorch's
``test/distributed/rpc/test_tensorpipe_agent.py`` and ``test_faulty_agent.py`` generate them
(``rpc_utils.generate_tests``, spawned workers, CPU only; forked on request:
``generated``):

* ``GENERIC_TESTS`` and ``TENSORPIPE_TESTS`` on the TensorPipe agent (``TensorPipeRpcTest``,
  ``TensorPipeJitDistAutogradTest``, ``TensorPipeDdpComparisonTest``, ...);
* ``FAULTY_AGENT_TESTS`` on the faulty agent (``FaultyFaultyAgentRpcTest``, ...).

``bench/bench_pytorch_tests.py --suite rpc`` runs them plain and under ``pytest --distviz``;
``tests/e2e/test_pytest_plugin_pytorch.py`` runs a handful of them in CI.
"""

from generated import generate
from torch.testing._internal.distributed.rpc.faulty_rpc_agent_test_fixture import (
    FaultyRpcAgentTestFixture,
)
from torch.testing._internal.distributed.rpc.tensorpipe_rpc_agent_test_fixture import (
    TensorPipeRpcAgentTestFixture,
)
from torch.testing._internal.distributed.rpc_utils import (
    FAULTY_AGENT_TESTS,
    GENERIC_TESTS,
    TENSORPIPE_TESTS,
)

globals().update(generate(
    "TensorPipe", TensorPipeRpcAgentTestFixture, GENERIC_TESTS + TENSORPIPE_TESTS, __name__))
globals().update(generate(
    "Faulty", FaultyRpcAgentTestFixture, FAULTY_AGENT_TESTS, __name__))
