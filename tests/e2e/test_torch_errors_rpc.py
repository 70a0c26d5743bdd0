"""``distviz.torch_errors`` against the installed torch: each error whose text distviz reads,
made to happen for real in three RPC workers (``tests/scripts/torch_errors.py``, one run for
every test here), then classified."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT
from guards import HANG_GUARD_S

from distviz.torch_errors import FREED_MESSAGE, ErrorKind, TorchError, classify

pytestmark = pytest.mark.rpc

#: The context id the script asks for (``NO_SUCH_CONTEXT`` there).
NO_SUCH_CONTEXT = 123456


@pytest.fixture(scope="module")
def raised(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    out = tmp_path_factory.mktemp("torch_errors") / "errors.json"
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "scripts" / "torch_errors.py"),
                           str(out)], capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    found = json.loads(out.read_text())
    missing = sorted(k for k, v in found.items() if v is None)
    assert missing == [], f"PyTorch raised nothing for {missing}"
    return {k: (v[0], v[1]) for k, v in found.items()}


def _classify(raised: dict[str, tuple[str, str]], case: str) -> TorchError:
    type_name, text = raised[case]
    cls = {"RuntimeError": RuntimeError, "ValueError": ValueError}.get(type_name)
    assert cls is not None, f"{case}: PyTorch raised {type_name}: {text[:200]}"
    return classify(cls(text))


def test_a_context_no_worker_has(raised: dict[str, tuple[str, str]]) -> None:
    for case in ("no_context", "no_context_gradients"):
        error = _classify(raised, case)
        assert (error.kind, error.context_id) == (ErrorKind.NO_CONTEXT, NO_SUCH_CONTEXT), case
        assert error.message == f"Could not find autograd context with id: {NO_SUCH_CONTEXT}"


def test_no_context_on_this_thread(raised: dict[str, tuple[str, str]]) -> None:
    assert _classify(raised, "no_current_context").kind is ErrorKind.NO_CURRENT_CONTEXT


def test_an_rpc_past_its_time_out(raised: dict[str, tuple[str, str]]) -> None:
    error = _classify(raised, "rpc_timeout")
    assert error.kind is ErrorKind.RPC_TIMEOUT and error.worker_gone


def test_a_call_to_a_worker_that_is_gone(raised: dict[str, tuple[str, str]]) -> None:
    error = _classify(raised, "worker_gone")
    assert error.kind is ErrorKind.WORKER_GONE and error.worker_gone


def test_a_remote_error_names_its_worker_and_its_own_type(
        raised: dict[str, tuple[str, str]]) -> None:
    one = _classify(raised, "remote")
    two = _classify(raised, "remote_two_hops")
    assert (one.kind, one.type_name, one.message, one.worker) == (
        ErrorKind.OTHER, "ValueError", "raised on the callee", "worker1")
    assert (two.kind, two.type_name, two.message, two.worker) == (
        ErrorKind.OTHER, "ValueError", "raised on the callee", "worker0")


def test_freed_saved_tensors_locally_and_across_workers(
        raised: dict[str, tuple[str, str]]) -> None:
    local = _classify(raised, "freed")
    remote = _classify(raised, "freed_distributed")
    assert (local.kind, local.nodes) == (ErrorKind.FREED, ())
    assert (remote.kind, remote.nodes) == (ErrorKind.FREED, (0, 1))
    # the replay raises PyTorch's own words
    assert raised["freed"][1] == FREED_MESSAGE


def test_a_backward_that_raises_on_another_worker_names_the_nodes(
        raised: dict[str, tuple[str, str]]) -> None:
    error = _classify(raised, "error_on_node")
    assert (error.kind, error.nodes) == (ErrorKind.OTHER, (0, 1))
    assert error.message.endswith("the backward of Fails raised")


def test_the_allocator_out_of_memory(raised: dict[str, tuple[str, str]]) -> None:
    error = _classify(raised, "out_of_memory")
    assert (error.kind, error.requested_bytes) == (ErrorKind.OUT_OF_MEMORY, 1 << 50)
