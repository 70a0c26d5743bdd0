"""DOT text pieces: safe ids, quoted strings, attribute lists, the names a picture shows, and
``DotGraph`` (DOT text with the maps from trace things to the ids it draws them with)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from distviz.trace import Node, NodeKind, short_name, twin_suffix

__all__ = ["DotGraph", "attrs", "display_name", "dot_quote", "node_title", "sanitize_id", "shape_text"]

_ID_BAD = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass(slots=True)
class DotGraph:
    """DOT text plus the maps a viewer needs to find trace things in the rendered SVG."""

    source: str
    node_ids: dict[str, str]        # trace node id -> DOT/SVG id of the node drawing it
    message_edges: dict[int, str]   # message id -> DOT/SVG id of the dashed message edge
    total_nodes: int                # nodes in the trace
    drawn_nodes: int                # graph nodes drawn (excluding legend and note)
    detail: str                     # "full" | "folded" | "calls" | "summary"
    title: str = ""                 # what the view shows, in words


def sanitize_id(text: str) -> str:
    """Return ``text`` reduced to ``[A-Za-z0-9_.-]`` (other characters become ``_``)."""
    return _ID_BAD.sub("_", text)


def dot_quote(text: str) -> str:
    """Return ``text`` as a quoted DOT string, safe for labels.

    Backslashes and quotes are escaped, newlines become Graphviz line breaks (``\\n``), other
    control characters become spaces, and ``&`` becomes ``&amp;`` (Graphviz decodes entities in
    labels). ``<`` and ``>`` need no escaping inside a quoted string; Graphviz writes them to SVG
    as ``&lt;``/``&gt;``.
    """
    out: list[str] = []
    for ch in text:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append("\\n")
        elif ch == "&":
            out.append("&amp;")
        elif ord(ch) < 32 or ch in "\u2028\u2029\x7f":
            out.append(" ")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def attrs(values: Mapping[str, str | int | float]) -> str:
    """Return a DOT attribute list; every string value is quoted and escaped."""
    parts = []
    for k, v in values.items():
        parts.append(f"{k}={dot_quote(v) if isinstance(v, str) else v}")
    return "[" + ", ".join(parts) + "]"


def display_name(node: Node) -> str:
    """Return the short name a picture shows: ``torch::distributed::autograd::`` dropped."""
    return short_name(node.name)


def shape_text(shape: Sequence[int] | None) -> str:
    """Return ``[3,3]`` for a shape, ``[]`` for a scalar, ``""`` when unknown."""
    if shape is None:
        return ""
    return "[" + ",".join(str(s) for s in shape) + "]"


def node_title(node: Node, names: Sequence[str] | None = None) -> str:
    """Return the first label line of a node: ``MulBackward0 #2``, ``t1 [3,3]``, and for a
    recv the variables its RPC result was assigned to: ``RecvRpcBackward #0 = t3`` (``names``,
    from ``distviz.replay.rpc_calls.recv_names``: also a result never used; else the
    variables the recorder found)."""
    if node.kind == NodeKind.ACCUMULATE_GRAD:
        name = node.var if node.var else "AccumulateGrad"
        shp = shape_text(node.shape)
        return f"{name} {shp}" if shp else name
    title = f"{display_name(node)} #{node.seq}{twin_suffix(node.id)}"
    held = node.vars if names is None else names
    if node.kind == NodeKind.RECV and held:
        title += f" = {', '.join(held)}"
    return title
