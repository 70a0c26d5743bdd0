"""Small helpers the terminal renderings share: node labels, cut lists, wrapped lines."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator, Sequence

from rich.text import Text

from distviz.trace import Node

__all__ = ["leaf_name", "more", "node_label", "wrap", "wrapped_lines"]


def node_label(node_id: str | None) -> str:
    """Return a node id without its worker prefix (``worker1/AddBackward0#1`` -> ``AddBackward0#1``)."""
    if node_id is None:
        return "?"
    return node_id.split("/", 1)[1] if "/" in node_id else node_id


def leaf_name(node: Node | None, node_id: str, times: int = 1) -> str:
    """Return a leaf's variable (or its id without the worker), ``×N`` when accumulated N times."""
    name = (node.var if node is not None and node.var else None) or node_label(node_id)
    return f"{name} ×{times}" if times > 1 else name


def more(items: Sequence[str], limit: int) -> list[str]:
    """Return at most ``limit`` items, the last replaced by ``… N more`` when cut."""
    if len(items) <= limit:
        return list(items)
    keep = max(limit - 1, 0)
    return list(items[:keep]) + [f"… {len(items) - keep} more"]


def wrap(prefix: Text, sentence: str, style: str, width: int | None) -> Text:
    """Return ``prefix`` + ``sentence``; with ``width``, wrapped under the sentence column."""
    line = prefix.copy()
    if width is None or width - len(prefix.plain) < 20:
        line.append(sentence, style=style)
        return line
    indent = len(prefix.plain)
    parts = textwrap.wrap(sentence, width=width - indent, break_on_hyphens=False) or [""]
    line.append(parts[0], style=style)
    for part in parts[1:]:
        line.append("\n" + " " * indent)
        line.append(part, style=style)
    return line


def wrapped_lines(first: str, rest: str, text: str, width: int | None,
                  style: str = "") -> Iterator[Text]:
    """Yield ``first + text`` as lines no wider than ``width``; continuation lines start with
    ``rest`` (a hanging indent). Without ``width``, one line."""
    if width is None:
        line = Text(first)
        line.append(text, style=style)
        yield line
        return
    body = textwrap.wrap(text, width=max(width - len(first), 20), break_on_hyphens=False)
    if len(body) > 1:
        tail = " ".join(body[1:])
        body = body[:1] + textwrap.wrap(tail, width=max(width - len(rest), 20),
                                        break_on_hyphens=False)
    for i, part in enumerate(body or [""]):
        line = Text(first if i == 0 else rest)
        line.append(part, style=style)
        yield line
