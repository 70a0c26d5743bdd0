"""Wording shared by every module that writes sentences (pure: imports nothing of distviz).

``plural(n, "message")`` is the one way to write a count with its noun (``1 message``,
``2 messages``); ``word_for(n, ...)`` gives a word alone in the form that agrees with ``n``
(``outputs``, ``waits``/``wait``); ``suggest(word, options)`` the "did you mean" of every
message about a name that is not known; ``first_line(exc)`` the one line an error is told
by, ``error_line(exc)`` the same without PyTorch's C++ source location; ``duration(seconds)``
a time as the summaries write it (``2.9 ms``, ``1.25 s``).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["NOTATION", "context_label", "duration", "error_line", "first_line", "plural", "suggest",
           "word_for"]


def first_line(exc: BaseException | str) -> str:
    """The first non-empty line of an exception's (or a text's) message; an exception's type
    name when its message is empty."""
    text = str(exc).strip()
    if not text:
        return type(exc).__name__ if isinstance(exc, BaseException) else ""
    return next(line.strip() for line in text.splitlines() if line.strip())


def error_line(exc: BaseException) -> str:
    """``first_line(exc)`` without the C++ source location PyTorch appends (`` Exception raised
    from ...``), or the exception's type name."""
    from distviz.torch_errors import without_location  # what reads an error loads its texts

    return without_location(first_line(exc)) or type(exc).__name__


def duration(seconds: float | None) -> str:
    """A duration to three significant digits: ``2.9 ms`` under a second, else ``1.25 s``;
    ``?`` when it is not known."""
    if seconds is None:
        return "?"
    return f"{seconds * 1000:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def word_for(n: int, one: str, many: str | None = None) -> str:
    """Return ``one`` when ``n`` is 1, else ``many`` (default: ``one + "s"``):
    ``word_for(2, "output")`` is ``"outputs"``, ``word_for(1, "waits", "wait")`` is
    ``"waits"``."""
    return one if n == 1 else (many if many is not None else one + "s")


def plural(n: int, one: str, many: str | None = None, *, grouped: bool = False) -> str:
    """Return ``n`` and its noun in the right number: ``plural(1, "message")`` is
    ``"1 message"``, ``plural(2, "message")`` is ``"2 messages"``; ``many`` gives an irregular
    plural (``plural(3, "pass", "passes")``); ``grouped`` writes ``12,000``."""
    count = f"{n:,}" if grouped else str(n)
    return f"{count} {word_for(n, one, many)}"


def suggest(word: str, options: Iterable[str], fmt: str = "'{}'") -> str:
    """Return `` (did you mean 'x'?)`` for the closest option, or ``""``."""
    import difflib  # a mistake's cost: the console script's start-up does without it

    matches = difflib.get_close_matches(word, sorted(set(options)), n=1, cutoff=0.6)
    return f" (did you mean {fmt.format(matches[0])}?)" if matches else ""


def context_label(number: int, context_id: int | None = None, more: str | None = None) -> str:
    """The one way distviz names a context: the number the user counts (from 1: ``--context
    N``, the N of ``trainer.ctxN.trace.json``) and, where it helps, PyTorch's context id and
    more words beside it. ``context_label(1, 562949953421312)`` is
    ``"context 1 (id 562949953421312)"``, ``context_label(3, 7, "trainer 3")`` is
    ``"context 3 (trainer 3, id 7)"``, ``context_label(2)`` is ``"context 2"``."""
    extra = [x for x in (more, None if context_id is None else f"id {context_id}") if x]
    return f"context {number}" + (f" ({', '.join(extra)})" if extra else "")


#: The notation distviz writes, explained once for every view (the graph's legend, the
#: step-through's help, the HTML viewer's help): (what you see, what it means).
NOTATION: list[tuple[str, str]] = [
    ("#3", "the node's sequence_nr: PyTorch's creation counter on the thread that made it"),
    ("~1", "at the end of a node id: another node of that worker has the same name and "
           "number; the second such node is ~1, the third ~2"),
    ("1:0", "a gradient message: sender rank 1, that worker's counter 0"),
    ("deps 2 (1 left)", "the gradients FAST mode makes the node wait for in this pass (a root "
                        "counts the backward call's edge), and how many have not come yet"),
    ("task 2", "one run of a worker's engine on a fresh ready queue: the backward call's "
               "(task 0), or one per gradient message received"),
    ("RPC call 3", "an RPC the program made (rpc_sync, rpc_async, remote), numbered from 0"),
    ("[in 1]", "in `distviz graph`: the input number of an edge, when it is not 0"),
    ("↺", "in `distviz graph`: a node already shown above, not expanded again"),
]
