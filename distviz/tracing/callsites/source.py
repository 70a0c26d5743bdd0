"""The program's source, read where an RPC was made (pure): the variable its result went to,
the ``def`` line of a function, the RPCs a function assigns to names (``guess``)."""

from __future__ import annotations

import ast
import bisect
import functools
import linecache
import types

from distviz.frames import Frame


def def_line(code: types.CodeType) -> int:
    """The line of a function's ``def`` (``co_firstlineno`` is its first decorator's)."""
    for k in range(code.co_firstlineno, code.co_firstlineno + 8):
        if linecache.getline(code.co_filename, k).lstrip().startswith(("def ", "async def ")):
            return k
    return code.co_firstlineno


def _statement(path: str, line: int) -> ast.stmt | None:
    """The statement that contains ``line`` (it may start up to 8 lines above)."""
    for start in range(line, max(0, line - 8), -1):
        lines = [linecache.getline(path, k) for k in range(start, line + 12)]
        text = "".join(lines)
        indent = len(text) - len(text.lstrip())
        body = "\n".join(ln[indent:] if ln[:indent].isspace() else ln.lstrip()
                         for ln in text.splitlines())
        for end in range(len(body.splitlines()), 0, -1):
            chunk = "\n".join(body.splitlines()[:end])
            try:
                tree = ast.parse(chunk)
            except SyntaxError:
                continue
            if tree.body and tree.body[0].end_lineno is not None and \
                    start + tree.body[0].end_lineno - 1 >= line:
                return tree.body[0]
            break
    return None


_RETURN = "\x00return"


@functools.lru_cache(maxsize=4096)
def _assigned_at(path: str, line: int) -> str | None:
    """What the statement at ``path:line`` assigns to (``_RETURN`` for a ``return``)."""
    stmt = _statement(path, line)
    if isinstance(stmt, ast.Return):
        return _RETURN
    target: ast.expr | None = None
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        target = stmt.targets[0]
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)):
        target = stmt.target
    if target is None:
        return None
    return target.id if isinstance(target, ast.Name) else ast.unparse(target)


def result_var(frames: list[Frame], api: str = "rpc_sync") -> str | None:
    """The variable the RPC's result was assigned to, following ``return`` to the caller;
    for ``rpc_async``, the variable its future is waited into (``x = fut.wait()``), when the
    function that holds the future does that."""
    for path, line, _fn in frames:
        var = _assigned_at(path, line)
        if var == _RETURN:
            continue
        if api == "rpc_async" and var is not None:
            return _waited_into(path, line, var) or var
        return var
    return None


def _scope(tree: ast.Module, line: int) -> ast.AST:
    """The innermost function of ``tree`` that holds ``line`` (the module if none does)."""
    scope: ast.AST = tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.lineno <= line <= (node.end_lineno or node.lineno) and \
                node.lineno > getattr(scope, "lineno", 0):
            scope = node
    return scope


@functools.lru_cache(maxsize=1024)
def _waited_into(path: str, line: int, future: str) -> str | None:
    """The name of the first ``name = future.wait()`` after ``path:line`` in the function
    (or module) that holds that line."""
    tree = _module_tree(path)
    if tree is None:
        return None
    scope = _scope(tree, line)
    waits = [(node.lineno, name) for node, name in _name_assignments(scope)
             if node.lineno > line and _waits(node.value, future)]
    return min(waits)[1] if waits else None


def _waits(value: ast.expr, future: str) -> bool:
    """Whether ``value`` is ``future.wait()``."""
    return isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and \
        value.func.attr == "wait" and isinstance(value.func.value, ast.Name) and \
        value.func.value.id == future


_RPC_APIS = ("rpc_sync", "rpc_async", "remote")


@functools.lru_cache(maxsize=256)
def _module_tree(path: str) -> ast.Module | None:
    try:
        return ast.parse("".join(linecache.getlines(path)))
    except (SyntaxError, ValueError):
        return None


def _function_node(code: types.CodeType) -> ast.AST | None:
    """The ``def`` (or the module) whose code ``code`` is, from its file's source."""
    return _def_node(code.co_filename, code.co_name, def_line(code))


@functools.lru_cache(maxsize=256)
def _def_node(path: str, name: str, first: int) -> ast.AST | None:
    """The ``def name`` at ``path:first`` (the module for ``<module>``), found once: a training
    loop asks at every recorded step."""
    tree = _module_tree(path)
    if tree is None or name == "<module>":
        return tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                node.name == name and node.lineno == first:
            return node
    return None


def _rpc_shape(call: ast.expr) -> tuple[str, str] | None:
    """``(api, func)`` of an RPC written as an expression: ``rpc.rpc_sync(to, mult, ...)``,
    ``rpc.rpc_async(...).wait()``, ``rref.to_here()``; ``None`` for anything else."""
    calls = [n for n in ast.walk(call) if isinstance(n, ast.Call)]
    for node in calls:
        name = node.func.attr if isinstance(node.func, ast.Attribute) else (
            node.func.id if isinstance(node.func, ast.Name) else None)
        if name == "to_here":
            return "to_here", "RRef"
        if name in _RPC_APIS:
            func = node.args[1] if len(node.args) > 1 else next(
                (k.value for k in node.keywords if k.arg == "func"), None)
            return name, ast.unparse(func) if func is not None else "?"
    return None


def rpc_assignments(code: types.CodeType, upto: int) -> dict[str, tuple[int, str, str]]:
    """``{variable: (line, api, func)}``: the last statement up to line ``upto`` of the
    function of ``code`` that assigns an RPC's result to a plain name."""
    fn = _function_node(code)
    if fn is None:
        return {}
    out: dict[str, tuple[int, str, str]] = {}
    for node, name in _name_assignments(fn):
        shape = _rpc_shape(node.value) if node.lineno <= upto else None
        if shape is not None and node.lineno >= out.get(name, (0, "", ""))[0]:
            out[name] = (node.lineno, *shape)
    return out


def _name_assignments(scope: ast.AST) -> list[tuple[ast.Assign, str]]:
    """Every ``name = ...`` statement of ``scope``'s own body (a function's or a module's; not
    those of the functions, classes and lambdas inside it), with its name."""
    out: list[tuple[ast.Assign, str]] = []
    stack = list(getattr(scope, "body", []))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0], ast.Name):
            out.append((node, node.targets[0].id))
        stack.extend(ast.iter_child_nodes(node))
    return out


#: the longest statement text kept for an explanation
MAX_STATEMENT = 100


@functools.lru_cache(maxsize=1024)
def statement_text(path: str, line: int) -> str | None:
    """The source of the statement at ``path:line`` on one line (``loss = sum(...)``),
    shortened to ``MAX_STATEMENT`` characters; ``None`` when the source cannot be read."""
    stmt = _statement(path, line)
    if stmt is None:
        text = linecache.getline(path, line).strip()
        return text[:MAX_STATEMENT] or None
    if isinstance(stmt, (ast.For, ast.While, ast.If, ast.With, ast.FunctionDef, ast.ClassDef,
                         ast.AsyncFunctionDef, ast.AsyncFor, ast.AsyncWith, ast.Try)):
        text = linecache.getline(path, line).strip()   # a compound statement: its own line
    else:
        text = linecache.getline(path, line).strip()
        if stmt.end_lineno != stmt.lineno or not _parses(text):
            text = " ".join(ast.unparse(stmt).split())
    return text if len(text) <= MAX_STATEMENT else text[:MAX_STATEMENT - 3] + "..."


@functools.lru_cache(maxsize=1024)
def is_read(path: str, line: int, name: str) -> bool:
    """Whether the function (or module) that holds ``path:line`` reads the variable ``name``
    anywhere (``True`` when the source cannot be read): a result assigned to a variable that
    is never read is dropped right there."""
    tree = _module_tree(path)
    if tree is None:
        return True
    scope = _scope(tree, line)
    return any(isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Load)
               for node in ast.walk(scope))


def _parses(text: str) -> bool:
    try:
        ast.parse(text)
    except SyntaxError:
        return False
    return True


def assigned_before(code: types.CodeType, name: str, upto: int) -> int | None:
    """The line of the last ``name = ...`` (or ``name += ...``) statement before line ``upto``
    in the function of ``code``; ``None`` when there is none."""
    lines = _assignment_lines(code.co_filename, code.co_name, def_line(code), name)
    k = bisect.bisect_left(lines, upto)
    return lines[k - 1] if k else None


@functools.lru_cache(maxsize=1024)
def _assignment_lines(path: str, fn_name: str, first: int, name: str) -> tuple[int, ...]:
    """The lines of every ``name = ...`` (``+=``, annotated) statement in the function ``def
    fn_name`` at ``path:first`` (not in the functions, classes and lambdas inside it), in
    order."""
    fn = _def_node(path, fn_name, first)
    if fn is None:
        return ()
    lines: list[int] = []
    stack = list(getattr(fn, "body", []))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        if any(isinstance(t, ast.Name) and t.id == name for t in targets):
            lines.append(node.lineno)
        stack.extend(ast.iter_child_nodes(node))
    return tuple(sorted(lines))
