"""``distviz.torch_errors``: each PyTorch text it reads, classified from its words alone (the
texts are torch 2.13's, as ``tests/e2e/test_torch_errors_rpc.py`` makes them happen)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from distviz import torch_errors
from distviz.torch_errors import FREED_MESSAGE, ErrorKind, classify

LOCATION = ("\nException raised from retrieveContext at /pytorch/torch/csrc/distributed/autograd/"
            "context/container.cpp:287 (most recent call first):\nframe #0: c10::Error::Error("
            "c10::SourceLocation, std::string) + 0x9d (0x7f89acb98b8d in libc10.so)\n")


def _remote(worker: int, name: str, inner: str, kind: str = "RuntimeError") -> str:
    """PyTorch's text of an error raised on ``name``: the hop, the error's repr, its traceback."""
    return (f"On WorkerInfo(id={worker}, name={name}):\n{kind}({inner!r})\nTraceback (most "
            "recent call last):\n  File \"/lib/torch/distributed/rpc/internal.py\", line 209, "
            "in _run_function\n    result = python_udf.func(*python_udf.args)\n  File "
            f"\"/home/me/train.py\", line 45, in step\n    raise {kind}('x')\n{kind}: x\n\n\nAt:"
            "\n  /lib/torch/distributed/rpc/internal.py(236): _handle_exception\n")


def test_a_missing_context_names_its_id_with_or_without_the_cpp_location() -> None:
    for text in ("Could not find autograd context with id: 123456",
                 "Could not find autograd context with id: 123456" + LOCATION):
        error = classify(RuntimeError(text))
        assert (error.kind, error.context_id, error.type_name, error.worker) == (
            ErrorKind.NO_CONTEXT, 123456, "RuntimeError", None)
        assert error.message == "Could not find autograd context with id: 123456"


def test_a_missing_context_on_another_worker_names_the_worker() -> None:
    text = _remote(1, "trainer1", "Could not find autograd context with id: 562949953421312"
                   + LOCATION)
    error = classify(RuntimeError(text))
    assert (error.kind, error.context_id, error.worker) == (
        ErrorKind.NO_CONTEXT, 562949953421312, "trainer1")


def test_no_current_context() -> None:
    error = classify(RuntimeError(
        "Current thread doesn't have a valid autograd context. Please wrap your code using: "
        "`with torch.distributed.autograd.context() as context_id` to generate a valid context"))
    assert error.kind is ErrorKind.NO_CURRENT_CONTEXT and error.context_id is None


def test_an_rpc_time_out_is_a_time_out_and_counts_as_a_gone_worker() -> None:
    error = classify("RPCErr:1:RPC ran for more than set timeout (200 ms) and will now be "
                     "marked with an error")
    assert error.kind is ErrorKind.RPC_TIMEOUT and error.worker_gone


@pytest.mark.parametrize("text", [
    "EOF: end of file (this error originated at tensorpipe/transport/uv/connection_impl.cc:132)",
    "pipe closed (this error originated at tensorpipe/core/pipe_impl.cc:356)",
    "ECONNRESET: Connection reset by peer",
    "RPCErr:0:some unknown failure",
])
def test_a_broken_connection_says_the_worker_is_gone(text: str) -> None:
    error = classify(RuntimeError(text))
    assert error.kind is ErrorKind.WORKER_GONE and error.worker_gone


def test_the_allocators_words_give_the_bytes_asked_for() -> None:
    error = classify(RuntimeError(
        "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate "
        "memory: you tried to allocate 1125899906842624 bytes. Error code 12 (Cannot allocate "
        "memory)"))
    assert (error.kind, error.requested_bytes, error.python_memory_error) == (
        ErrorKind.OUT_OF_MEMORY, 1125899906842624, False)


def test_pythons_memory_error_is_out_of_memory_without_bytes() -> None:
    error = classify(MemoryError())
    assert (error.kind, error.requested_bytes, error.python_memory_error, error.message) == (
        ErrorKind.OUT_OF_MEMORY, None, True, "MemoryError")
    remote = classify(RuntimeError(_remote(2, "ps", "", "MemoryError")))
    assert (remote.kind, remote.type_name, remote.worker) == (
        ErrorKind.OUT_OF_MEMORY, "MemoryError", "ps")


def test_freed_tensors_through_the_hops_of_a_distributed_backward() -> None:
    text = "Error on Node 0: Error on Node 1: " + FREED_MESSAGE + LOCATION
    error = classify(RuntimeError(text))
    assert (error.kind, error.nodes) == (ErrorKind.FREED, (0, 1))
    assert classify(FREED_MESSAGE).kind is ErrorKind.FREED
    assert torch_errors.shorten_freed("x; " + FREED_MESSAGE) == (
        "x; Trying to backward through the graph a second time (...)")


def test_the_replays_own_errors_read_back_as_pytorchs() -> None:
    sent = torch_errors.on_node(2, torch_errors.no_send_function(281474976710657))
    assert sent == ("Error on Node 2: Could not find send function for autograd message id: "
                    "281474976710657")
    error = classify(sent)
    assert (error.kind, error.message_id, error.nodes) == (
        ErrorKind.NO_SEND_FUNCTION, 281474976710657, (2,))


def test_a_chain_of_remote_errors_is_read_to_its_innermost_error() -> None:
    inner = _remote(0, "worker0", "raised on the callee", "ValueError")
    text = "ValueError: " + _remote(1, "worker1", "ValueError: " + inner, "ValueError")
    error = classify(ValueError(text))
    assert (error.kind, error.type_name, error.message, error.worker) == (
        ErrorKind.OTHER, "ValueError", "raised on the callee", "worker0")
    hop = torch_errors.innermost_hop(text)
    assert hop is not None and hop.startswith("On WorkerInfo(id=0, name=worker0):")
    assert torch_errors.innermost_hop(inner) is None     # one hop, at the start
    assert ("/home/me/train.py", 45, "step") in torch_errors.remote_frames(text)


def test_the_program_s_own_error_is_other_with_its_first_line() -> None:
    error = classify(KeyError("weight"))
    assert (error.kind, error.type_name, error.message, error.worker, error.nodes) == (
        ErrorKind.OTHER, "KeyError", "'weight'", None, ())
    assert not error.worker_gone


def test_the_cpp_location_and_error_nodes() -> None:
    assert torch_errors.without_location("bad Exception raised from f at x.cpp:1") == "bad"
    assert torch_errors.error_nodes("Error on Node 3: Error on Node 0: boom") == [3, 0]


#: Pieces of PyTorch's texts that only ``distviz.torch_errors`` may hold.
TEXTS = (torch_errors.NO_CONTEXT_TEXT.strip(), torch_errors.NO_CURRENT_CONTEXT_TEXT,
         torch_errors.RPC_TIMEOUT_TEXT, torch_errors.NO_SEND_FUNCTION_TEXT.strip(),
         torch_errors.FREED_TEXT, torch_errors.CPP_LOCATION.strip(), torch_errors.REMOTE_HOP,
         torch_errors.ERROR_ON_NODE.strip(), "can't allocate memory", "Connection reset",
         "pipe closed")


def _code_strings(tree: ast.AST) -> list[tuple[int, str]]:
    """The string constants of a module that are not docstrings."""
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}
    return [(node.lineno, node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and id(node) not in docs]


def test_no_other_module_holds_pytorchs_texts() -> None:
    root = Path(torch_errors.__file__).parent
    found = [f"{path.relative_to(root)}:{line}: {text!r}"
             for path in sorted(root.rglob("*.py")) if path.name != "torch_errors.py"
             for line, value in _code_strings(ast.parse(path.read_text(encoding="utf-8")))
             for text in TEXTS if text in value]
    assert found == []
    planted = ast.parse('"""Could not find autograd context."""\nx = "Error on Node 1: boom"')
    assert [v for _, v in _code_strings(planted)] == ["Error on Node 1: boom"]
