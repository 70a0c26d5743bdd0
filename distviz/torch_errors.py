"""PyTorch's error texts, read in one place (torch-free, a leaf module).

PyTorch says what went wrong only in words: a context that does not exist, an RPC past its
time-out, a worker that is gone, memory it could not allocate, saved tensors a pass freed. Every
decision distviz takes on such an error asks ``classify``, which holds each text once and returns
a ``TorchError``: its ``ErrorKind`` and the parts the text carries (the worker a remote error
came from, a context id, the nodes an error crossed, the bytes asked for). The replay writes the
errors PyTorch's engine would raise with the same texts (``FREED_MESSAGE``, ``no_send_function``).
``tests/e2e/test_torch_errors_rpc.py`` makes each error happen in real RPC workers of the
installed torch and checks its kind here.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any, NamedTuple


class ErrorKind(StrEnum):
    """What a PyTorch error says happened."""

    #: ``Could not find autograd context with id: N``: no such context on that worker (it
    #: ended, or the forward's messages have not reached it yet).
    NO_CONTEXT = "no context"
    #: ``Current thread doesn't have a valid autograd context``: called outside any context.
    NO_CURRENT_CONTEXT = "no current context"
    #: ``RPC ran for more than set timeout (N ms)``: an RPC's future timed out.
    RPC_TIMEOUT = "rpc timeout"
    #: The connection to a worker broke (TensorPipe's ``EOF``, ``pipe closed``, a reset, the
    #: agent shutting down): the worker is gone.
    WORKER_GONE = "worker gone"
    #: The allocator could not allocate (``can't allocate memory``, ``MemoryError``).
    OUT_OF_MEMORY = "out of memory"
    #: ``Trying to backward through the graph a second time``: a pass met saved tensors that
    #: an earlier pass without ``retain_graph=True`` freed.
    FREED = "freed"
    #: ``Could not find send function for autograd message id: N``.
    NO_SEND_FUNCTION = "no send function"
    #: Any other error: the program's own, or a text distviz does not read.
    OTHER = "other"


class TorchError(NamedTuple):
    """One PyTorch error, read: the innermost error of a chain of remote calls."""

    kind: ErrorKind
    #: The innermost exception's class name (a remote error's own, not the wrapper's).
    type_name: str
    #: Its first line, without PyTorch's remote wrapping and the ``RuntimeError: `` prefix.
    message: str
    #: The worker the innermost remote error came from (``None``: raised here).
    worker: str | None = None
    #: The context id the text names (``NO_CONTEXT``).
    context_id: int | None = None
    #: The autograd message id the text names (``NO_SEND_FUNCTION``).
    message_id: int | None = None
    #: The worker ids of the ``Error on Node N:`` prefixes, outermost first: the workers the
    #: error crossed in a distributed backward.
    nodes: tuple[int, ...] = ()
    #: The bytes an allocation asked for (``OUT_OF_MEMORY``, when the text says).
    requested_bytes: int | None = None

    @property
    def worker_gone(self) -> bool:
        """Whether the error says a worker is gone or did not answer in time: its graph cannot
        be recorded any more."""
        return self.kind in (ErrorKind.WORKER_GONE, ErrorKind.RPC_TIMEOUT)

    @property
    def python_memory_error(self) -> bool:
        """Whether Python's ``MemoryError`` was raised (not the allocator's words)."""
        return self.type_name == "MemoryError" or bool(_MEMORY_ERROR.search(self.message))


# -- the texts, each once ------------------------------------------------------------------------

NO_CONTEXT_TEXT = "Could not find autograd context with id: "
NO_CURRENT_CONTEXT_TEXT = "Current thread doesn't have a valid autograd context"
RPC_TIMEOUT_TEXT = "ran for more than set timeout"
NO_SEND_FUNCTION_TEXT = "Could not find send function for autograd message id: "
FREED_TEXT = "Trying to backward through the graph a second time"
#: PyTorch's whole message when a pass meets freed saved tensors (the replay raises it).
FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors after "
    "they have already been freed). Saved intermediate values of the graph are freed when you "
    "call .backward() or autograd.grad(). Specify retain_graph=True if you need to backward "
    "through the graph a second time or if you need to access saved tensors after calling "
    "backward.")
#: The prefix each hop of a distributed backward's error gets, before the worker's rank.
ERROR_ON_NODE = "Error on Node "
#: Where PyTorch appends the C++ source of an error (on the first line in some releases).
CPP_LOCATION = " Exception raised from "
#: How PyTorch wraps an error raised on another worker, once per hop.
REMOTE_HOP = "On WorkerInfo("
#: Texts that say the connection to a worker broke (TensorPipe's, the RPC agent's).
_GONE = ("RPCErr", "Connection reset", "connection closed", "Connection closed", "shutdown",
         "EOF", "Broken pipe", "pipe closed", "Failed to respond", "unreachable")

class _Pattern:
    """A regular expression compiled at its first use: every process that loads distviz
    (each traced process of a program) imports this module, and most never read an error."""

    __slots__ = ("_compiled", "_flags", "_text")

    def __init__(self, text: str, flags: int = 0) -> None:
        self._text, self._flags = text, flags
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:   # ``search``, ``findall``, ``sub``...
        if self._compiled is None:
            self._compiled = re.compile(self._text, self._flags)
        return getattr(self._compiled, name)


_REMOTE = _Pattern(r"On WorkerInfo\(id=(\d+), name=([^)]*)\):\n(.*)", re.S)
_ORIGIN = _Pattern(r"On WorkerInfo\(id=\d+, name=([^)]*)\):")
_REPR = _Pattern(r"^(\w+)\((['\"])(.*)\2\)$", re.S)
_TYPE_PREFIX = _Pattern(r"^(\w+Error): ")
_NODE = _Pattern(r"Error on Node (\d+)")
_NODE_PREFIX = _Pattern(r"^(?:Error on Node \d+: )+")
_NUMBER = _Pattern(r"-?\d+")
_NO_MEMORY = _Pattern(r"can't allocate memory|Cannot allocate memory|std::bad_alloc|"
                      r"out of memory", re.I)
_ASKED = _Pattern(r"tried to allocate (\d+) bytes")
_MEMORY_ERROR = _Pattern(r"\bMemoryError\b")
_FRAME = _Pattern(r'File "([^"]+)", line (\d+), in (\S+)')
_FREED_TAIL = _Pattern(r"(" + FREED_TEXT + r") \(or directly.*?calling backward\.")


def no_send_function(message_id: int) -> str:
    """PyTorch's error when a backward message names a send function its context lacks."""
    return f"{NO_SEND_FUNCTION_TEXT}{message_id}"


def on_node(rank: int, text: str) -> str:
    """``text`` as it reaches the next worker of a distributed backward: PyTorch prefixes each
    hop with the rank of the worker the error passed."""
    return f"{ERROR_ON_NODE}{rank}: {text}"


def classify(error: BaseException | str) -> TorchError:
    """What ``error`` (an exception, or its text) says happened, and the parts its text holds."""
    text = str(error)
    type_name = type(error).__name__ if isinstance(error, BaseException) else "RuntimeError"
    type_name, message = _innermost(text, type_name)
    origins = _ORIGIN.findall(text)
    worker = origins[-1] if origins else None
    nodes = tuple(int(n) for n in _NODE.findall(message))
    said = _NODE_PREFIX.sub("", message)
    kind, number = _kind(type_name, said)
    return TorchError(kind=kind, type_name=type_name, message=message, worker=worker,
                      context_id=number if kind is ErrorKind.NO_CONTEXT else None,
                      message_id=number if kind is ErrorKind.NO_SEND_FUNCTION else None,
                      nodes=nodes,
                      requested_bytes=number if kind is ErrorKind.OUT_OF_MEMORY else None)


def _innermost(text: str, type_name: str) -> tuple[str, str]:
    """``(type name, first line)`` of the innermost error of PyTorch's remote wrapping: each hop
    is ``On WorkerInfo(id=N, name=W):`` over the ``repr`` of the error raised there."""
    while True:
        m = _REMOTE.search(text)
        if not m:
            break
        body = m.group(3)
        first = body.splitlines()[0] if body.strip() else ""
        inner = _REPR.match(first)
        if inner:
            type_name = inner.group(1)
            text = inner.group(3).encode("utf-8").decode("unicode_escape", errors="replace")
        else:
            text = body
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    message = lines[0] if lines else type_name
    return type_name, _TYPE_PREFIX.sub("", message)


def _kind(type_name: str, message: str) -> tuple[ErrorKind, int | None]:
    """The kind of an innermost first line and the number it names, if any."""
    if message.startswith(NO_CONTEXT_TEXT):
        return ErrorKind.NO_CONTEXT, _first_number(message[len(NO_CONTEXT_TEXT):])
    if message.startswith(NO_SEND_FUNCTION_TEXT):
        return ErrorKind.NO_SEND_FUNCTION, _first_number(message[len(NO_SEND_FUNCTION_TEXT):])
    if message.startswith(NO_CURRENT_CONTEXT_TEXT):
        return ErrorKind.NO_CURRENT_CONTEXT, None
    if message.startswith(FREED_TEXT):
        return ErrorKind.FREED, None
    if RPC_TIMEOUT_TEXT in message:
        return ErrorKind.RPC_TIMEOUT, None
    asked = _ASKED.search(message)
    if type_name == "MemoryError" or _MEMORY_ERROR.search(message) or asked or \
            _NO_MEMORY.search(message):
        return ErrorKind.OUT_OF_MEMORY, int(asked.group(1)) if asked else None
    if any(part in message for part in _GONE):
        return ErrorKind.WORKER_GONE, None
    return ErrorKind.OTHER, None


def _first_number(text: str) -> int | None:
    m = _NUMBER.match(text.strip())
    return int(m.group()) if m else None


def without_location(line: str) -> str:
    """``line`` without the C++ source location PyTorch appends to some errors."""
    return line.split(CPP_LOCATION)[0]


def innermost_hop(text: str) -> str | None:
    """The innermost ``On WorkerInfo(...)`` hop of a remote error's text and what follows it
    (``None``: not a remote error's text, or only one hop at its start)."""
    at = text.rfind(REMOTE_HOP)
    return text[at:] if at > 0 else None


def remote_frames(text: str) -> list[tuple[str, int, str]]:
    """The Python frames ``(file, line, function)`` of the tracebacks a remote error's text
    carries, in the order written."""
    return [(m.group(1), int(m.group(2)), m.group(3)) for m in _FRAME.finditer(text)]


def error_nodes(text: str) -> list[int]:
    """The worker ids of every ``Error on Node N`` in ``text``, in the order written."""
    return [int(n) for n in _NODE.findall(text)]


def shorten_freed(text: str) -> str:
    """``text`` with PyTorch's long freed-tensors advice cut to its first clause."""
    return _FREED_TAIL.sub(r"\1 (...)", text)
