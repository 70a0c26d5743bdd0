"""fairscale's own ``DistributedPipeline`` tests under distviz's pytest plugin.

``tests/thirdparty/fairscale_pipe/suite_multiprocess_pipe.py`` is fairscale 0.4.13's
``tests/experimental/nn/test_multiprocess_pipe.py``, changed only for CPU (its header lists the
changes): 12 tests run, one stays skipped by fairscale as flaky. Each spawns its own workers
with ``torch.multiprocessing`` and a file rendezvous; the backward is ``loss_rref.backward(cid)``
(``RRef.backward`` on the last stage's owner), and the default ``checkpoint="except_last"``
runs a local backward inside the distributed one. One pytest process plain and one under
``--distviz`` run side by side; the tests compare them test by test
(``bench/bench_pytorch_tests.table``, the same comparison as for PyTorch's own tests).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest
from builders.plain_and_traced import compare_plain_and_traced, outcomes

pytestmark = [
    pytest.mark.rpc,
    pytest.mark.skipif(importlib.util.find_spec("fairscale") is None,
                       reason="fairscale's pipeline tests need fairscale (the test extra)"),
]

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "tests" / "thirdparty" / "fairscale_pipe"
MODULE = "suite_multiprocess_pipe.py"
#: fairscale's 12 tests that run on CPU (``create_multiple_workers`` is skipped by fairscale).
RUN = 12
SKIPPED = [f"{MODULE.removesuffix('.py')}::test_create_multiple_workers[devices0]"]


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str, Path]:
    tmp = tmp_path_factory.mktemp("fairscale")
    result, out = compare_plain_and_traced(SUITE, ["-W", "ignore", MODULE], tmp,
                                           env={"TMPDIR": str(tmp)},  # fairscale's mkstemp files
                                           timeout=600)
    return result, out, tmp


def test_fairscales_tests_pass_plain_and_traced_with_the_same_results(
        compared: tuple[dict[str, Any], str, Path]) -> None:
    result, out, tmp = compared
    plain = outcomes(tmp / "plain.xml")
    assert result["tests"] == RUN + len(SKIPPED), out
    assert result["passed_plain"] == RUN and result["skipped_plain"] == len(SKIPPED), out
    assert sorted(t for t, o in plain.items() if o == "skipped") == SKIPPED, out
    assert result["results_changed"] == 0 and result["run_one_way_only"] == 0, \
        (result["changed"], out)
    assert result["exit_plain"] == result["exit_traced"] == 0, out


def test_fairscales_contexts_are_recorded_and_none_differs(
        compared: tuple[dict[str, Any], str, Path]) -> None:
    """Four tests run a backward (``backward``, ``update``, ``multi_input_multi_output_layers``,
    ``auto_graph_extract``; the last three twice): each context agrees with PyTorch, or is not
    compared and says why, and each is named by its test."""
    result, out, tmp = compared
    assert result["contexts"] >= 4 and result["contexts_without_test"] == 0, out
    assert result["tests_with_contexts"] == 4, out
    assert result["differs"] == 0, (result["differs_tests"], out)
    assert result["error"] == result["unfinished"] == 0, out
    assert result["agrees"] + result["not_compared"] == result["contexts"], out
    assert all(reason for reason in result["not_compared_reasons"]), out


def test_fairscales_optimizers_get_a_gradient_for_every_parameter(
        compared: tuple[dict[str, Any], str, Path]) -> None:
    """``update``, ``multi_input_multi_output_layers`` and ``auto_graph_extract`` step a
    ``DistributedOptimizer``: with the default checkpointing the context holds the last
    micro-batch's part of every parameter's gradient, so none is named as never getting one."""
    result, out, tmp = compared
    assert "of a DistributedOptimizer got no gradient" not in out, out
