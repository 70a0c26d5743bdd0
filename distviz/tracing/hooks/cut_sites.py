"""The program's lines a cut is named at, read from its source (torch-free): the ``with`` block
that disabled grad around a line, the ``return`` of an RPC's function. Each file is parsed once; a file that
cannot be read or parsed gives nothing, and the caller keeps the line it had."""

from __future__ import annotations

import ast
import functools
import linecache
import types

#: The words in a ``with`` item that disable grad, by what they disable.
GRAD_BLOCKS = ("no_grad", "inference_mode", "set_grad_enabled")


@functools.lru_cache(maxsize=64)
def _tree(path: str) -> ast.Module | None:
    text = "".join(linecache.getlines(path))
    if not text:
        return None
    try:
        return ast.parse(text, filename=path)
    except (SyntaxError, ValueError):
        return None


def _nodes(path: str) -> list[ast.AST]:
    tree = _tree(path)
    return list(ast.walk(tree)) if tree is not None else []


def grad_block(path: str, line: int) -> tuple[int, str] | None:
    """``(line, word)`` of the innermost ``with`` whose item names a ``GRAD_BLOCKS`` word and
    whose body holds ``line``, in ``path``."""
    best: tuple[int, str] | None = None
    for node in _nodes(path):
        if not isinstance(node, (ast.With, ast.AsyncWith)):
            continue
        end = getattr(node, "end_lineno", None) or node.lineno
        if not node.lineno <= line <= end:
            continue
        for item in node.items:
            text = ast.unparse(item.context_expr)
            word = next((w for w in GRAD_BLOCKS if w in text), None)
            if word is not None and (best is None or node.lineno >= best[0]):
                best = (node.lineno, word)
    return best


def function_of(code: types.CodeType) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The definition of ``code`` in its file (its name, at or after its first line: a
    decorator's line comes first)."""
    found: ast.FunctionDef | ast.AsyncFunctionDef | None = None
    for node in _nodes(code.co_filename):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.name == code.co_name and node.lineno >= code.co_firstlineno and \
                (found is None or node.lineno < found.lineno):
            found = node
    return found


def return_line(code: types.CodeType) -> int:
    """The line of the first ``return`` with a value in the function of ``code`` (not in a
    function nested in it), else the line of its ``def``."""
    fn = function_of(code)
    if fn is None:
        return code.co_firstlineno
    todo: list[ast.AST] = list(fn.body)
    best = 0
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        if isinstance(node, ast.Return) and node.value is not None and \
                (best == 0 or node.lineno < best):
            best = node.lineno
        todo.extend(ast.iter_child_nodes(node))
    return best or fn.lineno
