"""``distviz.record`` used by hand: called where there is no graph to record (after the
backward, after the context, with a forward pass made outside the context or in another one),
it raises ``RecordError`` saying what was expected, what it found and what to do."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from conftest import ROOT
from guards import HANG_GUARD_S

pytestmark = pytest.mark.rpc


@pytest.fixture(scope="module")
def misuses(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("record") / "misuses.json"
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "scripts" / "record_misuse.py"),
                           str(out)], capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found: dict[str, Any] = json.loads(out.read_text())
    return found


WHEN = ("call distviz.record inside `with dist_autograd.context() as context_id:`, after the "
        "forward pass and before dist_autograd.backward")


def test_record_inside_the_context_before_backward_works(misuses: dict[str, Any]) -> None:
    assert misuses["in_context"] is None


def test_record_after_backward_says_the_backward_already_ran(misuses: dict[str, Any]) -> None:
    assert misuses["after_backward"] == [
        "RecordError", "distviz.record: context 0 has already run its backward pass (worker0 "
        f"holds gradients for 2 tensors); {WHEN}"]


def test_record_after_the_context_says_it_ended(misuses: dict[str, Any]) -> None:
    assert misuses["after_the_context"] == [
        "RecordError", "distviz.record: there is no distributed autograd context 0 on worker0 "
        f"(a context ends with its with block); {WHEN}"]


def test_record_of_a_forward_outside_the_context_says_it_holds_no_rpc(
        misuses: dict[str, Any]) -> None:
    assert misuses["forward_outside"] == [
        "RecordError", "distviz.record: context 1 holds no RPC: the forward pass made none "
        "inside it (did it run outside the context?); run the forward pass and distviz.record "
        "inside `with dist_autograd.context() as context_id:`"]


def test_record_with_another_context_names_the_foreign_node(misuses: dict[str, Any]) -> None:
    kind, message = misuses["other_context"]
    assert kind == "RecordError"
    assert message.startswith("distviz.record: the roots' graph was built in another context: "
                              "worker0/RecvRpcBackward#")
    assert message.endswith("is not a message of context 3; pass the id of the context the "
                            "forward pass ran in")
