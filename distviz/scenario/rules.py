"""The rules for names a program reaches through attributes and calls (pure).

Each ``check_*`` function looks at one construct the checker met and calls ``fail(node,
message)`` (which raises) when the scenario language does not allow it: ``torch.NAME`` paths,
``rpc.NAME`` paths, methods and tensor attributes, the fault helpers, the shape of an RPC call
and its worker name. The tables they read are in ``distviz.scenario.lang``.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import NoReturn

from distviz.scenario import lang
from distviz.scenario.error_text import short
from distviz.words import plural, suggest

__all__ = [
    "BINOPS", "Fail", "check_attribute_parts", "check_binop", "check_helper_call",
    "check_member", "check_rpc_path", "check_rpc_shape", "check_torch_path",
    "check_worker_name", "dotted",
]

#: ``fail(node, message)``: raise the ``ScenarioError`` for ``node``.
Fail = Callable[[ast.AST, str], NoReturn]

#: The binary operators a program may use.
BINOPS: dict[type[ast.operator], str] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
    ast.Mod: "%", ast.Pow: "**", ast.MatMult: "@",
}
_OTHER_BINOPS: dict[type[ast.operator], str] = {
    ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|", ast.BitXor: "^", ast.BitAnd: "&",
}


def dotted(node: ast.expr) -> list[str] | None:
    """``torch.nn.functional.relu`` -> ``["torch", "nn", "functional", "relu"]``; ``None``
    when the chain does not start at a plain name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return parts[::-1]


def check_binop(fail: Fail, node: ast.AST, op: ast.operator) -> None:
    """Only the arithmetic operators ``+ - * / // % ** @``."""
    if type(op) not in BINOPS:
        symbol = _OTHER_BINOPS.get(type(op), type(op).__name__)
        fail(node, f"operator {symbol} is not allowed in scenarios "
                   "(allowed: + - * / // % ** @)")


def check_attribute_parts(fail: Fail, node: ast.Attribute, path: list[str] | None) -> None:
    """No dunder or private attribute anywhere in the chain."""
    parts = path[1:] if path is not None else [node.attr]
    for part in parts:
        if part.startswith("__"):
            fail(node, f"dunder attribute '{part}' is not allowed in scenarios")
        if part.startswith("_"):
            fail(node, f"private attribute '{part}' is not allowed in scenarios")


def check_rpc_path(fail: Fail, node: ast.Attribute, path: list[str], call: bool) -> None:
    """``rpc.rpc_sync``, ``rpc.rpc_async`` and ``rpc.remote``, always called."""
    if len(path) == 2 and path[1] in lang.RPC_FUNCS:
        if not call:
            fail(node, f"rpc.{path[1]} must be called: rpc.{path[1]}(\"worker1\", fn, "
                       "args=(...))")
        return
    fail(node, f"rpc.{'.'.join(path[1:])} is not available in scenarios"
               f"{suggest(path[1], lang.RPC_FUNCS, 'rpc.{}')}; use rpc.rpc_sync, "
               "rpc.rpc_async or rpc.remote")


def check_member(fail: Fail, node: ast.Attribute, call: bool) -> None:
    """``x.NAME``: a whitelisted method when called, a tensor attribute otherwise."""
    attr = node.attr
    reason = lang.FORBIDDEN_METHODS.get(attr)
    if reason is not None:
        fail(node, f"{short(node.value)}.{attr}() is not allowed in scenarios: {reason}")
    if call:
        if attr not in lang.ALL_METHODS:
            fail(node, f"method .{attr}() is not available in scenarios"
                       f"{suggest(attr, lang.ALL_METHODS, '.{}()')}")
    elif attr not in lang.TENSOR_ATTRIBUTES:
        if attr in lang.ALL_METHODS:
            fail(node, f".{attr} must be called: write {short(node)}(...)")
        fail(node, f"attribute .{attr} is not available in scenarios"
                   f"{suggest(attr, lang.TENSOR_ATTRIBUTES, '.{}')}")


def check_torch_path(fail: Fail, node: ast.Attribute, path: list[str], call: bool) -> None:
    """``torch.NAME``, ``torch.linalg.NAME`` and ``torch.nn.functional.NAME`` from the tables."""
    name = path[1]
    reason = lang.FORBIDDEN_TORCH.get(name)
    if reason is not None:
        fail(node, f"torch.{name} is not allowed in scenarios: {reason}")
    if name in lang.TORCH_SUBMODULES:
        _check_torch_submodule(fail, node, path)
        return
    if name not in lang.TORCH_NAMES:
        fail(node, f"torch.{name} is not available in scenarios"
                   f"{suggest(name, lang.TORCH_NAMES, 'torch.{}')}")
    if len(path) > 2:
        fail(node, f"{'.'.join(path)} is not available in scenarios")
    if name in lang.TORCH_CONTEXTS:
        fail(node, f"torch.{name}() can only be used as 'with torch.{name}():'")
    if call and name in lang.TORCH_DTYPES:
        fail(node, f"torch.{name} is a dtype, not a function; use x.{name}() or "
                   f"dtype=torch.{name}")


def _check_torch_submodule(fail: Fail, node: ast.Attribute, path: list[str]) -> None:
    name = path[1]
    members = lang.TORCH_SUBMODULES[name]
    if len(path) == 2:
        fail(node, f"torch.{name} can only be used as torch.{name}.NAME")
    member = path[2]
    if member not in members:
        hint = ("; write functions from torch.nn.functional with weight tensors"
                if name == "nn" else suggest(member, members, f"torch.{name}.{{}}"))
        fail(node, f"torch.{name}.{member} is not available in scenarios{hint}")
    if name != "nn":
        if len(path) > 3:
            fail(node, f"{'.'.join(path)} is not available in scenarios")
        return
    if len(path) == 3:
        fail(node, "torch.nn.functional can only be used as torch.nn.functional.NAME")
    fn = path[3]
    if fn not in lang.TORCH_NN_FUNCTIONAL:
        fail(node, f"torch.nn.functional.{fn} is not available in scenarios"
                   f"{suggest(fn, lang.TORCH_NN_FUNCTIONAL, 'torch.nn.functional.{}')}")
    if len(path) > 4:
        fail(node, f"{'.'.join(path)} is not available in scenarios")


_HELPER_USAGE = {"fail_backward": "fail_backward(x, \"message\")",
                 "crash_backward": "crash_backward(x)",
                 "custom_function": "custom_function(\"scale\", x)"}


def check_helper_call(fail: Fail, node: ast.Call, name: str) -> None:
    """``fail_backward(x, "message")``, ``crash_backward(x)`` and
    ``custom_function("SHAPE", x)`` with a shape of ``lang.CUSTOM_FUNCTIONS`` written as a
    string, positional arguments only."""
    arity = lang.HELPER_ARITY[name]
    if len(node.args) != arity or node.keywords:
        fail(node, f"{name} takes {plural(arity, 'argument')}: {_HELPER_USAGE[name]}")
    if name != "custom_function":
        return
    shape = node.args[0]
    shapes = lang.CUSTOM_FUNCTIONS
    if not (isinstance(shape, ast.Constant) and isinstance(shape.value, str)):
        fail(shape, f"custom_function's first argument is the Function's shape written as a "
                    f"string, one of {', '.join(shapes)}")
    elif shape.value not in shapes:
        fail(shape, f"custom_function has no shape {shape.value!r}"
                    f"{suggest(shape.value, shapes)}; it offers {', '.join(shapes)}")


def check_rpc_shape(fail: Fail, node: ast.Call, fn: str, workers: list[str]) -> None:
    """``rpc.FN(to, func, args=(...), kwargs={...}, timeout=...)`` with a known worker."""
    keywords = {kw.arg: kw.value for kw in node.keywords if kw.arg is not None}
    for kw in node.keywords:
        if kw.arg is not None and kw.arg not in lang.RPC_KEYWORDS:
            fail(kw.value, f"rpc.{fn} has no argument '{kw.arg}'"
                           f"{suggest(kw.arg, lang.RPC_KEYWORDS)}; it takes to, func, args, "
                           "kwargs, timeout")
    if len(node.args) > 5 or any(isinstance(a, ast.Starred) for a in node.args[:2]):
        fail(node, f"rpc.{fn} takes (to, func, args=(...), kwargs={{...}}, timeout=...)")
    to = node.args[0] if node.args else keywords.get("to")
    target = node.args[1] if len(node.args) > 1 else keywords.get("func")
    usage = f"rpc.{fn}(\"worker1\", my_fn, args=(x,))"
    if to is None:
        fail(node, f"rpc.{fn} needs the worker name as its first argument: {usage}")
    if target is None:
        fail(node, f"rpc.{fn} needs the function to call as its second argument: {usage}")
    check_worker_name(fail, to, fn, workers)
    if isinstance(target, ast.Constant):
        fail(target, f"the second argument of rpc.{fn} must be a function, found "
                     f"{short(target)}")


def check_worker_name(fail: Fail, node: ast.expr, fn: str, workers: list[str]) -> None:
    """A literal worker name must be declared; an f-string's literal prefix must start one."""
    if isinstance(node, ast.Constant):
        if not isinstance(node.value, str):
            fail(node, f"the first argument of rpc.{fn} must be a worker name, found "
                       f"{node.value!r}")
        if node.value not in workers:
            fail(node, f"unknown worker '{node.value}'{suggest(node.value, workers)}; "
                       f"workers: {', '.join(workers)}")
    elif isinstance(node, ast.JoinedStr) and node.values:
        first = node.values[0]
        if isinstance(first, ast.Constant) and isinstance(first.value, str):
            prefix = first.value
            if not any(w.startswith(prefix) for w in workers):
                fail(node, f"no worker name starts with '{prefix}'; workers: "
                           f"{', '.join(workers)}")
