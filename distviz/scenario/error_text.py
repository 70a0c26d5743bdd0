"""Wording shared by the YAML reader, the checker and the loader: suggestions, kinds, short
source text, and the messages for statements and expressions outside the scenario language."""

from __future__ import annotations

import ast
from typing import Any

from distviz.scenario import lang, lang_nn

__all__ = ["expression_message", "kind", "reserved_reason", "short", "statement_message"]


def kind(value: Any) -> str:
    """Describe a YAML value's type for messages (``a string``, ``a list``)."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return f"a {type(value).__name__}"


def short(node: ast.AST, limit: int = 40) -> str:
    """Source text of ``node`` for messages, shortened."""
    try:
        text = ast.unparse(node)
    except Exception:  # pragma: no cover - unparse of a parsed tree does not fail
        return "..."
    return text if len(text) <= limit else text[: limit - 3] + "..."

def reserved_reason(name: str) -> str | None:
    """Why ``name`` cannot be defined by a scenario (``"names starting with '__' or '_dv' are
    reserved for distviz"``, ``"it is a builtin of the scenario language"``), or ``None``."""
    if name.startswith("__") or name.startswith("_dv"):
        return "names starting with '__' or '_dv' are reserved for distviz"
    if name in ("torch", "rpc"):
        return f"it is the {name} module"
    if name in lang_nn.PREDEFINED:
        return "it is a name the tutorials' imports bring (nn, optim, F, dist_autograd, RRef, ...)"
    if name in lang.HELPERS:
        return "it is a distviz helper"
    if name in lang.BUILTINS:
        return "it is a builtin of the scenario language"
    if name in lang.RESERVED_NAMES:
        return "it is a Python constant"
    if name == "super":
        return "it is Python's super(), which methods of classes call"
    if name in lang.FORBIDDEN_NAMES:
        return "it is a Python builtin that scenarios may not use"
    return None


def statement_message(node: ast.stmt) -> str:
    messages: dict[type[ast.AST], str] = {
        ast.Import: "import is not allowed in scenarios",
        ast.ImportFrom: "import is not allowed in scenarios",
        ast.Global: "global is not allowed in scenarios; return values instead",
        ast.Nonlocal: "nonlocal is not allowed in scenarios; return values instead",
        ast.Try: "try is not allowed in scenarios; distviz reports errors itself",
        ast.Raise: "raise is not allowed in scenarios; use fail_backward(x, \"message\") to "
                   "make a backward pass fail",
        ast.ClassDef: "class is not allowed in scenarios; define functions with def in code",
        ast.AsyncFunctionDef: "async def is not allowed in scenarios",
        ast.AsyncFor: "async for is not allowed in scenarios",
        ast.AsyncWith: "async with is not allowed in scenarios",
        ast.Delete: "del is not allowed in scenarios",
        ast.Assert: "assert is not allowed in scenarios",
        ast.Match: "match is not allowed in scenarios; use if/elif/else",
    }
    try_star = getattr(ast, "TryStar", None)
    if try_star is not None:
        messages[try_star] = messages[ast.Try]
    return messages.get(type(node), f"{type(node).__name__} statements are not allowed in "
                                    "scenarios")


def expression_message(node: ast.expr) -> str:
    messages: dict[type[ast.AST], str] = {
        ast.Lambda: "lambda is not allowed in scenarios; define a function with def in code",
        ast.GeneratorExp: "generator expressions are not supported; use a list comprehension "
                          "[... for ... in ...]",
        ast.SetComp: "set comprehensions are not supported; use a list comprehension",
        ast.DictComp: "dict comprehensions are not supported; use a for loop",
        ast.Set: "set literals are not supported (their order is not reproducible); use a list",
        ast.Yield: "yield is not allowed in scenarios",
        ast.YieldFrom: "yield is not allowed in scenarios",
        ast.Await: "await is not allowed in scenarios; use rpc.rpc_async(...).wait()",
        ast.NamedExpr: "assignment expressions (:=) are not allowed in scenarios",
    }
    return messages.get(type(node), f"{type(node).__name__} expressions are not allowed in "
                                    "scenarios")
