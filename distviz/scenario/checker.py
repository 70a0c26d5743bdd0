"""The checker: one program's syntax tree against the scenario language (pure).

``Checker(...).check_module(tree)`` walks the tree and raises ``ScenarioError`` (file, line,
key) for the constructs the language does not allow: statements and expressions by node type
(one method per type, dispatched by the tables at the end of the class), names by scope,
attributes and calls by the rules in ``distviz.scenario.rules``. A statement stops at its first
problem and the walk goes on with the next one, so every bad statement is reported (as
``ScenarioProblems`` when there are several). Nothing here executes user text.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from distviz import lang
from distviz.errors import ScenarioError
from distviz.scenario import rules
from distviz.scenario.messages import expression_message, short, statement_message, suggest
from distviz.scenario.problems import Problems

__all__ = ["Checker", "Scope"]

#: Statements a ``def`` body may hold that make no sense at the top level of ``code``.
_NOT_AT_CODE_TOP = (ast.Assign, ast.AugAssign, ast.Expr, ast.For, ast.If, ast.With, ast.Return,
                    ast.Break, ast.Continue)


@dataclass
class Scope:
    """Names defined so far where the walk is, and what kind of block it is in."""

    defined: set[str]
    in_function: bool = False
    loops: int = 0
    module_level: bool = True

    def child(self) -> Scope:
        return Scope(set(self.defined), self.in_function, self.loops, self.module_level)


def _is_docstring(stmt: ast.stmt) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str))


class Checker:
    """Walk one program's tree and raise ``ScenarioError`` for what is not allowed.

    ``kind`` is ``code``, ``init`` or ``main``. ``params``, ``functions`` and ``state`` are the
    names visible at module level besides builtins and helpers; ``elsewhere`` maps names set
    by other workers' ``init`` to their worker (for the message). ``assigned`` collects the
    names assigned at module level (for backward roots and worker state).
    """

    def __init__(self, path: str, key: str, kind: str, *, params: Iterable[str],
                 functions: Iterable[str], state: Iterable[str], workers: list[str],
                 elsewhere: Mapping[str, str]) -> None:
        self.path = path
        self.key = key
        self.kind = kind
        self.params = set(params)
        self.functions = set(functions)
        self.state = set(state)
        self.workers = workers
        self.elsewhere = dict(elsewhere)
        self.globals = (self.params | self.functions | self.state | lang.BUILTINS
                        | lang.HELPERS)
        self.assigned: list[str] = []
        self.stores: dict[str, int] = {}
        self.problems = Problems()

    def fail(self, node: ast.AST, message: str) -> NoReturn:
        raise ScenarioError(message, path=self.path, line=getattr(node, "lineno", None),
                            key=self.key)

    # -- programs and functions ---------------------------------------------------------------

    def check_module(self, tree: ast.Module) -> None:
        """Check a whole program; ``code`` holds only ``def``s (and docstrings, ``pass``).

        Raises the problem found, or ``ScenarioProblems`` with every problem found."""
        if self.kind != "code":
            for node in ast.walk(tree):
                if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    line = node.lineno
                    self.stores[node.id] = min(line, self.stores.get(node.id, line))
            self.block(tree.body, Scope(set()))
            self.problems.raise_found()
            return
        self.block(tree.body, Scope(set()), self.code_top)
        self.problems.raise_found()

    def code_top(self, stmt: ast.stmt, scope: Scope) -> None:
        """One statement at the top level of ``code``."""
        if isinstance(stmt, ast.FunctionDef):
            self.function(stmt)
        elif isinstance(stmt, ast.Pass) or _is_docstring(stmt):
            return
        elif isinstance(stmt, _NOT_AT_CODE_TOP):
            self.fail(stmt, "only function definitions (def) are allowed at the top "
                            "level of code; put statements in main or in a worker's init")
        else:
            self.stmt(stmt, scope)

    def function(self, node: ast.FunctionDef) -> None:
        if node.decorator_list:
            self.fail(node.decorator_list[0], "decorators are not allowed in scenarios")
        args = node.args
        if args.posonlyargs:
            self.fail(node, "positional-only parameters (/) are not supported")
        if args.kwonlyargs:
            self.fail(node, "keyword-only parameters are not supported; use plain parameters")
        if args.kwarg is not None:
            self.fail(node, "**kwargs parameters are not supported; use plain parameters")
        if node.returns is not None:
            self.fail(node, "annotations are not supported in scenarios")
        names: list[str] = []
        for arg in list(args.args) + ([args.vararg] if args.vararg else []):
            if arg.annotation is not None:
                self.fail(arg, "annotations are not supported in scenarios")
            self.check_store_name(arg, arg.arg)
            if arg.arg in names:
                self.fail(arg, f"duplicate parameter '{arg.arg}' in def {node.name}")
            names.append(arg.arg)
        top = Scope(set())
        for default in args.defaults:
            self.expr(default, top)
        self.block(node.body, Scope(set(names), in_function=True, loops=0, module_level=False))

    # -- statements ---------------------------------------------------------------------------

    def block(self, stmts: list[ast.stmt], scope: Scope,
              check: Callable[[ast.stmt, Scope], None] | None = None) -> None:
        """Check each statement with ``check`` (``stmt``); a statement's problem is kept and
        the names it assigns count as defined, so later lines are not blamed for it."""
        for stmt in stmts:
            try:
                (check or self.stmt)(stmt, scope)
            except ScenarioError as err:
                self.problems.add(err)
                for node in ast.walk(stmt):
                    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                        scope.defined.add(node.id)
                        if scope.module_level and node.id not in self.assigned:
                            self.assigned.append(node.id)

    def stmt(self, node: ast.stmt, scope: Scope) -> None:
        check = _STATEMENTS.get(type(node))
        if check is None:
            self.fail(node, statement_message(node))
        check(self, node, scope)

    def assign(self, node: ast.Assign, scope: Scope) -> None:
        self.expr(node.value, scope)
        for target in node.targets:
            self.target(target, scope)

    def aug_assign(self, node: ast.AugAssign, scope: Scope) -> None:
        rules.check_binop(self.fail, node, node.op)
        self.expr(node.value, scope)
        if isinstance(node.target, ast.Name):
            self.load_name(node.target, node.target.id, scope)
            self.check_store_name(node.target, node.target.id)
        else:
            self.target(node.target, scope)

    def ann_assign(self, node: ast.AnnAssign, scope: Scope) -> None:
        self.fail(node, "annotations are not supported in scenarios; write x = ...")

    def expr_stmt(self, node: ast.Expr, scope: Scope) -> None:
        self.expr(node.value, scope)

    def return_(self, node: ast.Return, scope: Scope) -> None:
        if not scope.in_function:
            self.fail(node, "return is only allowed inside a def in code")
        if node.value is not None:
            self.expr(node.value, scope)

    def nested_def(self, node: ast.FunctionDef, scope: Scope) -> None:
        where = "inside a def" if scope.in_function else f"in {self.key}"
        self.fail(node, f"def is not allowed {where}; define functions at the top level of code")

    def for_(self, node: ast.For, scope: Scope) -> None:
        self.iterable(node.iter, scope, "for loops")
        if node.orelse:
            self.fail(node.orelse[0], "for ... else is not supported")
        body = scope.child()
        self.target(node.target, body, loop=True)
        body.loops += 1
        self.block(node.body, body)
        scope.defined |= body.defined

    def while_(self, node: ast.While, scope: Scope) -> None:
        self.fail(node, "while loops are not allowed; use for ... in range(...)")

    def if_(self, node: ast.If, scope: Scope) -> None:
        self.expr(node.test, scope)
        then, other = scope.child(), scope.child()
        self.block(node.body, then)
        self.block(node.orelse, other)
        scope.defined |= then.defined | other.defined

    def with_(self, node: ast.With, scope: Scope) -> None:
        item = node.items[0]
        ok = (len(node.items) == 1 and item.optional_vars is None
              and isinstance(item.context_expr, ast.Call)
              and rules.dotted(item.context_expr.func) == ["torch", "no_grad"]
              and not item.context_expr.args and not item.context_expr.keywords)
        if not ok:
            self.fail(node, "with is only allowed as 'with torch.no_grad():'")
        self.block(node.body, scope)

    def break_continue(self, node: ast.Break | ast.Continue, scope: Scope) -> None:
        if scope.loops == 0:
            word = "break" if isinstance(node, ast.Break) else "continue"
            self.fail(node, f"{word} is only allowed inside a for loop")

    def pass_(self, node: ast.Pass, scope: Scope) -> None:
        pass

    def iterable(self, node: ast.expr, scope: Scope, what: str) -> None:
        allowed = isinstance(node, ast.Name) or (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("range", "enumerate", "zip", "reversed"))
        if not allowed:
            self.fail(node, f"{what} must iterate over range(...), enumerate(...), zip(...) "
                            f"or a variable, found '{short(node)}'; assign it to a variable "
                            "first")
        self.expr(node, scope)

    def target(self, node: ast.expr, scope: Scope, loop: bool = False) -> None:
        if isinstance(node, ast.Name):
            self.check_store_name(node, node.id)
            scope.defined.add(node.id)
            if scope.module_level and node.id not in self.assigned:
                self.assigned.append(node.id)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for elt in node.elts:
                self.target(elt, scope, loop)
        elif isinstance(node, ast.Subscript) and not loop:
            base: ast.expr = node.value
            while isinstance(base, ast.Subscript):
                base = base.value
            if not isinstance(base, ast.Name):
                self.fail(node, "only variables and items of variables (xs[i] = ...) can be "
                                "assigned to")
            self.expr(node.value, scope)
            self.expr(node.slice, scope)
        elif isinstance(node, ast.Attribute):
            self.fail(node, f"assigning to an attribute ({short(node)} = ...) is not allowed; "
                            "use methods such as x.requires_grad_()")
        elif isinstance(node, ast.Starred):
            self.fail(node, "starred assignment (*x) is not supported")
        else:
            self.fail(node, f"cannot assign to '{short(node)}'")

    def check_store_name(self, node: ast.AST, name: str) -> None:
        if name.startswith("__") or name.startswith("_dv"):
            self.fail(node, f"name '{name}' is reserved: names starting with '__' or '_dv' "
                            "are not allowed")
        if name in lang.FORBIDDEN_NAMES or name in lang.RESERVED_NAMES:
            self.fail(node, f"cannot assign to '{name}': it is a reserved name; choose another")
        if name in self.functions:
            self.fail(node, f"cannot assign to '{name}': it is a function defined in code")

    # -- expressions --------------------------------------------------------------------------

    def expr(self, node: ast.expr, scope: Scope) -> None:
        check = _EXPRESSIONS.get(type(node))
        if check is None:
            self.fail(node, expression_message(node))
        check(self, node, scope)

    def children(self, node: ast.expr, scope: Scope) -> None:
        """Check every sub-expression (tuples, operators, comparisons, f-strings, ...)."""
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child, scope)

    def constant(self, node: ast.Constant, scope: Scope) -> None:
        if isinstance(node.value, bytes):
            self.fail(node, "bytes literals are not supported")

    def name(self, node: ast.Name, scope: Scope) -> None:
        self.load_name(node, node.id, scope)

    def dict_(self, node: ast.Dict, scope: Scope) -> None:
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                self.fail(node, "**mapping in dict displays is not supported")
            self.expr(key, scope)
            self.expr(value, scope)

    def binop(self, node: ast.BinOp, scope: Scope) -> None:
        rules.check_binop(self.fail, node, node.op)
        self.expr(node.left, scope)
        self.expr(node.right, scope)

    def formatted(self, node: ast.FormattedValue, scope: Scope) -> None:
        self.expr(node.value, scope)
        if node.format_spec is None:
            return
        spec = node.format_spec
        for part in spec.values if isinstance(spec, ast.JoinedStr) else [spec]:
            if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
                self.fail(spec, "f-string format specs must be plain text (like :.3f)")
            if re.search(r"\d{4,}", part.value):
                self.fail(spec, f"f-string format spec '{part.value}' is too wide")

    def listcomp(self, node: ast.ListComp, scope: Scope) -> None:
        if len(node.generators) != 1:
            self.fail(node, "list comprehensions may have only one 'for'")
        gen = node.generators[0]
        if gen.is_async:
            self.fail(node, "async comprehensions are not allowed")
        self.iterable(gen.iter, scope, "list comprehensions")
        inner = scope.child()
        inner.module_level = False
        self.target(gen.target, inner, loop=True)
        for cond in gen.ifs:
            self.expr(cond, inner)
        self.expr(node.elt, inner)

    def load_name(self, node: ast.AST, name: str, scope: Scope) -> None:
        if name.startswith("__") or name.startswith("_dv"):
            self.fail(node, f"name '{name}' is not allowed: names starting with '__' or '_dv' "
                            "are reserved")
        reason = lang.FORBIDDEN_NAMES.get(name)
        if reason is not None:
            self.fail(node, f"'{name}' is not allowed in scenarios: {reason}")
        if name in ("torch", "rpc"):
            self.fail(node, f"'{name}' can only be used as {name}.NAME (for example "
                            f"{'torch.add' if name == 'torch' else 'rpc.rpc_sync(...)'})")
        if name in scope.defined or name in self.globals:
            return
        if name in self.elsewhere:
            worker = self.elsewhere[name]
            self.fail(node, f"unknown name '{name}': it is set by the init of worker "
                            f"'{worker}', so only code running on '{worker}' sees it (call a "
                            f"function from code on '{worker}' with rpc)")
        if name in self.stores and self.stores[name] >= getattr(node, "lineno", 0):
            self.fail(node, f"name '{name}' is used before it is assigned (at line "
                            f"{self.stores[name]})")
        known = scope.defined | self.globals | {"torch", "rpc"}
        self.fail(node, f"unknown name '{name}'{suggest(name, known)}")

    def attribute(self, node: ast.Attribute, scope: Scope, call: bool = False) -> None:
        path = rules.dotted(node)
        rules.check_attribute_parts(self.fail, node, path)
        if path is not None and path[0] == "torch":
            rules.check_torch_path(self.fail, node, path, call)
            return
        if path is not None and path[0] == "rpc":
            rules.check_rpc_path(self.fail, node, path, call)
            return
        self.expr(node.value, scope)
        rules.check_member(self.fail, node, call)

    # -- calls --------------------------------------------------------------------------------

    def call(self, node: ast.Call, scope: Scope) -> None:
        func = node.func
        if isinstance(func, ast.Name):
            self.call_name(node, func.id, scope)
        elif isinstance(func, ast.Attribute):
            self.attribute(func, scope, call=True)
            path = rules.dotted(func)
            if path is not None and path[0] == "rpc":
                self.rpc_call(node, func.attr, scope)
                return
        else:
            self.expr(func, scope)
        self.arguments(node, scope)

    def arguments(self, node: ast.Call, scope: Scope) -> None:
        for arg in node.args:
            self.expr(arg, scope)
        for kw in node.keywords:
            if kw.arg is None:
                self.fail(kw.value, "**kwargs in calls is not supported; pass keywords "
                                    "one by one")
            if kw.arg.startswith("_"):
                self.fail(kw.value, f"keyword argument '{kw.arg}' is not allowed: keyword "
                                    "names starting with '_' are reserved")
            self.expr(kw.value, scope)

    def call_name(self, node: ast.Call, name: str, scope: Scope) -> None:
        reason = lang.FORBIDDEN_NAMES.get(name)
        if reason is not None:
            self.fail(node, f"{name}() is not allowed in scenarios: {reason}")
        if name in lang.HELPERS:
            rules.check_helper_call(self.fail, node, name)
            return
        if name in lang.BUILTINS or name in self.functions:
            return
        if name in ("torch", "rpc") or name.startswith("__") or name.startswith("_dv"):
            self.load_name(node, name, scope)
        if name in scope.defined or name in self.params or name in self.state:
            return  # calling a variable: it can only hold whitelisted callables
        callables = self.functions | lang.BUILTINS | lang.HELPERS
        self.fail(node, f"unknown function '{name}'{suggest(name, callables)}")

    def rpc_call(self, node: ast.Call, fn: str, scope: Scope) -> None:
        if self.kind == "init":
            self.fail(node, "rpc calls are not allowed in a worker's init: it runs before the "
                            "workers are connected; call from main or from a function in code")
        rules.check_rpc_shape(self.fail, node, fn, self.workers)
        self.arguments(node, scope)


_Check = Callable[[Checker, Any, Scope], None]

#: How each statement type is checked; any other type is refused (``statement_message``).
_STATEMENTS: dict[type[ast.AST], _Check] = {
    ast.Assign: Checker.assign, ast.AugAssign: Checker.aug_assign,
    ast.AnnAssign: Checker.ann_assign, ast.Expr: Checker.expr_stmt, ast.Return: Checker.return_,
    ast.FunctionDef: Checker.nested_def, ast.For: Checker.for_, ast.While: Checker.while_,
    ast.If: Checker.if_, ast.With: Checker.with_, ast.Break: Checker.break_continue,
    ast.Continue: Checker.break_continue, ast.Pass: Checker.pass_,
}

#: How each expression type is checked; any other type is refused (``expression_message``).
_EXPRESSIONS: dict[type[ast.AST], _Check] = {
    ast.Constant: Checker.constant, ast.Name: Checker.name, ast.Tuple: Checker.children,
    ast.List: Checker.children, ast.Starred: Checker.children, ast.Dict: Checker.dict_,
    ast.BinOp: Checker.binop, ast.UnaryOp: Checker.children, ast.BoolOp: Checker.children,
    ast.Compare: Checker.children, ast.IfExp: Checker.children, ast.JoinedStr: Checker.children,
    ast.FormattedValue: Checker.formatted, ast.Subscript: Checker.children,
    ast.Slice: Checker.children, ast.Attribute: Checker.attribute, ast.Call: Checker.call,
    ast.ListComp: Checker.listcomp,
}
