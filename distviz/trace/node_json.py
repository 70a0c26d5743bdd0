"""A trace's node from its JSON object (pure): the fast path for well-formed nodes and the
checked one that names the file, the node and the key of the first problem (``TraceError``).
``distviz.trace`` reads its other fields with ``need`` too."""

from __future__ import annotations

from typing import Any

from distviz.errors import TraceError
from distviz.trace.node import KIND_OF_WORD, KINDS, Node, NodeKind

__all__ = ["checked_node", "fast_node", "need", "type_name"]


def need(obj: dict[str, Any], key: str, typ: type | tuple[type, ...], source: str,
          where: str, optional: bool = False) -> Any:
    if key not in obj or obj[key] is None:
        if optional:
            return None
        raise TraceError(f"missing required key {key!r}", path=source, key=where + key)
    val = obj[key]
    if isinstance(val, bool) and bool not in (typ if isinstance(typ, tuple) else (typ,)):
        raise TraceError(f"expected {type_name(typ)}, found bool", path=source, key=where + key)
    if not isinstance(val, typ):
        raise TraceError(f"expected {type_name(typ)}, found {type(val).__name__}", path=source,
                         key=where + key)
    return val


def type_name(typ: type | tuple[type, ...]) -> str:
    if isinstance(typ, tuple):
        return " or ".join(t.__name__ for t in typ)
    return typ.__name__


_OPTIONAL_STR = ("var", "dtype", "custom")
_OPTIONAL_LIST = ("shape", "input_shapes")
_MSG_KINDS = (NodeKind.SEND, NodeKind.RECV)   # the kinds with a ``msg_id`` (read once per node)


def fast_node(rn: Any, wset: set[str], kinds: dict[str, NodeKind]) -> Node | None:
    """Build a node when every field has its expected type (the common case, checked with
    exact type tests; ``kinds``: the JSON words of ``NodeKind``); return ``None`` to fall back to
    ``_checked_node`` and its messages."""
    if type(rn) is not dict:
        return None
    nid, worker, name, kind, seq, raw_next = (rn.get("id"), rn.get("worker"), rn.get("name"),
                                             rn.get("kind"), rn.get("seq"), rn.get("next"))
    if (type(nid) is not str or type(worker) is not str or worker not in wset
            or type(name) is not str or type(kind) is not str or kind not in kinds
            or type(seq) is not int or type(raw_next) is not list):
        return None
    kind = kinds[kind]
    nxt: list[tuple[str, int] | None] = []
    for e in raw_next:
        if e is None:
            nxt.append(None)
        elif type(e) is list and len(e) == 2 and type(e[0]) is str and type(e[1]) is int:
            nxt.append((e[0], e[1]))
        else:
            return None
    msg_id = rn.get("msg_id")
    if (msg_id is not None and type(msg_id) is not int) or (kind in _MSG_KINDS
                                                           and msg_id is None):
        return None
    for key in _OPTIONAL_STR:
        if rn.get(key) is not None and type(rn[key]) is not str:
            return None
    for key in _OPTIONAL_LIST:
        if rn.get(key) is not None and type(rn[key]) is not list:
            return None
    fault, vars_, call = rn.get("fault"), rn.get("vars"), rn.get("call")
    if ((fault is not None and type(fault) is not dict) or (vars_ is not None and type(vars_)
                                                             is not list)
            or (call is not None and type(call) is not int)):
        return None
    return Node(id=nid, worker=worker, name=name, kind=kind, seq=seq, next=nxt, msg_id=msg_id,
                var=rn.get("var"), shape=rn.get("shape"), dtype=rn.get("dtype"),
                input_shapes=rn.get("input_shapes"), saved=bool(rn.get("saved", False)),
                fault=fault, vars=[str(v) for v in vars_] if vars_ else [], call=call,
                python=rn.get("python") is True, custom=rn.get("custom"))


def checked_node(rn: Any, i: int, source: str, workers: list[str], wset: set[str]) -> Node:
    """Build one node, checking every field and naming the first bad one."""
    where = f"nodes[{i}]."
    if not isinstance(rn, dict):
        raise TraceError(f"expected an object, found {type(rn).__name__}", path=source,
                         key=f"nodes[{i}]")
    nid = need(rn, "id", str, source, where)
    worker = need(rn, "worker", str, source, where)
    if worker not in wset:
        raise TraceError(f"unknown worker {worker!r} (workers: {', '.join(workers)})",
                         path=source, key=where + "worker")
    word = need(rn, "kind", str, source, where)
    kind = KIND_OF_WORD.get(word)
    if kind is None:
        raise TraceError(f"unknown kind {word!r} (expected one of {', '.join(KINDS)})",
                         path=source, key=where + "kind")
    raw_next = need(rn, "next", list, source, where)
    nxt: list[tuple[str, int] | None] = []
    for j, e in enumerate(raw_next):
        if e is None:
            nxt.append(None)
            continue
        if (not isinstance(e, list) or len(e) != 2 or not isinstance(e[0], str)
                or not isinstance(e[1], int) or isinstance(e[1], bool)):
            raise TraceError("expected [node id, input number] or null", path=source,
                             key=f"{where}next[{j}]")
        nxt.append((e[0], e[1]))
    msg_id = need(rn, "msg_id", int, source, where, optional=True)
    if kind in _MSG_KINDS and msg_id is None:
        raise TraceError(f"a {kind} node needs 'msg_id'", path=source, key=where + "msg_id")
    fault = rn.get("fault")
    if fault is not None and not isinstance(fault, dict):
        raise TraceError("expected an object", path=source, key=where + "fault")
    vars_ = rn.get("vars") or []
    if not isinstance(vars_, list):
        raise TraceError("expected a list of names", path=source, key=where + "vars")
    return Node(
        id=nid, worker=worker, name=need(rn, "name", str, source, where), kind=kind,
        seq=need(rn, "seq", int, source, where), next=nxt, msg_id=msg_id,
        var=need(rn, "var", str, source, where, optional=True),
        shape=need(rn, "shape", list, source, where, optional=True),
        dtype=need(rn, "dtype", str, source, where, optional=True),
        input_shapes=need(rn, "input_shapes", list, source, where, optional=True),
        saved=bool(rn.get("saved", False)), fault=fault, vars=[str(v) for v in vars_],
        call=need(rn, "call", int, source, where, optional=True),
        python=bool(need(rn, "python", bool, source, where, optional=True)),
        custom=need(rn, "custom", str, source, where, optional=True))
