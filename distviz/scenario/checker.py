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
import functools
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from distviz.errors import ScenarioError
from distviz.scenario import classes as class_rules
from distviz.scenario import lang, lang_nn, rules, rules_nn
from distviz.scenario.error_text import (
    expression_message,
    reserved_reason,
    short,
    statement_message,
)
from distviz.scenario.problems import Problems
from distviz.scenario.scenario import ClassInfo
from distviz.words import suggest

__all__ = ["Checker", "NameScope"]

#: Roots of dotted paths checked by path rules (``torch.add``, ``nn.Linear``, ``rpc.RRef``).
_NAMESPACES = rules_nn.NAMESPACE_ROOTS

#: Forbidden names a program may not use even as its own variables (the others, ``input`` or
#: ``type``, may name a parameter or variable, which then hides the builtin).
_NOT_SHADOWABLE = frozenset({"super", "dist_autograd", "__import__"})

#: Statements a ``def`` body may hold that make no sense at the top level of ``code``.
_NOT_AT_CODE_TOP = (ast.Assign, ast.AugAssign, ast.Expr, ast.For, ast.If, ast.With, ast.Return,
                    ast.Break, ast.Continue)


@dataclass
class NameScope:
    """Names defined so far where the walk is, and what kind of block it is in."""

    defined: set[str]
    in_function: bool = False
    loops: int = 0
    module_level: bool = True
    self_name: str | None = None   # a method's first parameter (``self``)
    cls: str | None = None         # the class of that method
    method: str | None = None      # the method's name
    kwargs_name: str | None = None  # the function's ``**kwargs`` parameter

    def child(self) -> NameScope:
        return NameScope(set(self.defined), self.in_function, self.loops, self.module_level,
                     self.self_name, self.cls, self.method, self.kwargs_name)


def _is_docstring(stmt: ast.stmt) -> bool:
    return (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
            and isinstance(stmt.value.value, str))


class Checker:
    """Walk one program's tree and raise ``ScenarioError`` for what is not allowed.

    ``kind`` is ``code``, ``init`` or ``main``. ``params``, ``functions`` and ``state`` are the
    names visible at module level besides builtins and helpers; ``elsewhere`` maps names set
    by other workers' ``init`` to their worker (for the message). ``assigned`` collects the
    names assigned at module level (for backward roots and worker state). ``classes`` are
    the classes of ``code`` (their names are callable, their methods and ``self.``
    attributes are attribute names); ``training`` is the form without a ``backward:`` key,
    where programs use ``dist_autograd`` themselves (``backward_calls`` counts their
    ``dist_autograd.backward`` calls).
    """

    def __init__(self, path: str, key: str, kind: str, *, params: Iterable[str],
                 functions: Iterable[str], state: Iterable[str], workers: list[str],
                 elsewhere: Mapping[str, str], classes: Mapping[str, ClassInfo] | None = None,
                 training: bool = False) -> None:
        self.path = path
        self.key = key
        self.kind = kind
        self.params = set(params)
        self.classes = dict(classes or {})
        self.functions = set(functions) | set(self.classes)
        self.state = set(state)
        self.workers = workers
        self.elsewhere = dict(elsewhere)
        self.training = training
        self.declared = class_rules.declared_names(self.classes.values())
        self.globals = (self.params | self.functions | self.state | lang.BUILTINS
                        | lang.HELPERS | (lang_nn.PREDEFINED - lang_nn.NAMESPACES))
        self.assigned: list[str] = []
        self.stores: dict[str, int] = {}
        self.problems = Problems()
        self.backward_calls = 0

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
            self.block(tree.body, NameScope(set()))
            self.problems.raise_found()
            return
        self.block(tree.body, NameScope(set()), self.code_top)
        self.problems.raise_found()

    def code_top(self, stmt: ast.stmt, scope: NameScope) -> None:
        """One statement at the top level of ``code``: a ``def``, or a class whose methods are
        checked like ``def``s."""
        if isinstance(stmt, ast.FunctionDef):
            self.function(stmt, NameScope(set()))
        elif isinstance(stmt, ast.ClassDef):
            if stmt.name not in self.classes:
                return  # its shape's problem is the loader's (distviz.scenario.classes)
            for method in stmt.body:
                if isinstance(method, ast.FunctionDef):
                    self.function(method, NameScope(set()), cls=stmt.name)
        elif isinstance(stmt, ast.Pass) or _is_docstring(stmt):
            return
        elif isinstance(stmt, _NOT_AT_CODE_TOP):
            self.fail(stmt, "only function definitions (def) are allowed at the top "
                            "level of code; put statements in main or in a worker's init")
        else:
            self.stmt(stmt, scope)

    def function(self, node: ast.FunctionDef, outer: NameScope, cls: str | None = None) -> None:
        """A ``def`` in ``code`` (``outer`` is empty) or nested in one (a closure), or a method
        of class ``cls``."""
        if node.decorator_list:
            self.fail(node.decorator_list[0], "decorators are not allowed in scenarios")
        args = node.args
        if args.posonlyargs:
            self.fail(node, "positional-only parameters (/) are not supported")
        if args.kwonlyargs:
            self.fail(node, "keyword-only parameters are not supported; use plain parameters")
        if node.returns is not None:
            self.fail(node, "annotations are not supported in scenarios")
        names: list[str] = []
        extra = [a for a in (args.vararg, args.kwarg) if a is not None]
        for arg in list(args.args) + extra:
            if arg.annotation is not None:
                self.fail(arg, "annotations are not supported in scenarios")
            self.check_store_name(arg, arg.arg)
            if arg.arg in names:
                self.fail(arg, f"duplicate parameter '{arg.arg}' in def {node.name}")
            names.append(arg.arg)
        for default in args.defaults:
            self.expr(default, outer)
        scope = NameScope(outer.defined | set(names), in_function=True, loops=0, module_level=False,
                      kwargs_name=args.kwarg.arg if args.kwarg is not None else None)
        if cls is not None:
            scope.self_name, scope.cls, scope.method = args.args[0].arg, cls, node.name
        self.block(node.body, scope)

    # -- statements ---------------------------------------------------------------------------

    def block(self, stmts: list[ast.stmt], scope: NameScope,
              check: Callable[[ast.stmt, NameScope], None] | None = None) -> None:
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

    def stmt(self, node: ast.stmt, scope: NameScope) -> None:
        check = _STATEMENTS.get(type(node))
        if check is None:
            self.fail(node, statement_message(node))
        check(self, node, scope)

    def assign(self, node: ast.Assign, scope: NameScope) -> None:
        self.expr(node.value, scope)
        for target in node.targets:
            self.target(target, scope)

    def aug_assign(self, node: ast.AugAssign, scope: NameScope) -> None:
        rules.check_binop(self.fail, node, node.op)
        self.expr(node.value, scope)
        if isinstance(node.target, ast.Name):
            self.load_name(node.target, node.target.id, scope)
            self.check_store_name(node.target, node.target.id)
        else:
            self.target(node.target, scope)

    def ann_assign(self, node: ast.AnnAssign, scope: NameScope) -> None:
        self.fail(node, "annotations are not supported in scenarios; write x = ...")

    def expr_stmt(self, node: ast.Expr, scope: NameScope) -> None:
        if (scope.method == "__init__" and scope.cls is not None and scope.self_name is not None
                and class_rules.is_super_init(node.value, scope.cls, scope.self_name)):
            assert isinstance(node.value, ast.Call)
            self.arguments(node.value, scope)
            return
        self.expr(node.value, scope)

    def return_(self, node: ast.Return, scope: NameScope) -> None:
        if not scope.in_function:
            self.fail(node, "return is only allowed inside a def in code")
        if node.value is not None:
            self.expr(node.value, scope)

    def nested_def(self, node: ast.FunctionDef, scope: NameScope) -> None:
        if not scope.in_function or self.kind != "code":
            self.fail(node, f"def is not allowed in {self.key}; define functions at the top "
                            "level of code")
        self.check_store_name(node, node.name)
        scope.defined.add(node.name)
        inner = scope.child()
        inner.self_name = None  # a closure inside a method does not set self's attributes
        self.function(node, inner)

    def for_(self, node: ast.For, scope: NameScope) -> None:
        self.iterable(node.iter, scope, "for loops")
        if node.orelse:
            self.fail(node.orelse[0], "for ... else is not supported")
        body = scope.child()
        self.target(node.target, body, loop=True)
        body.loops += 1
        self.block(node.body, body)
        scope.defined |= body.defined

    def while_(self, node: ast.While, scope: NameScope) -> None:
        self.fail(node, "while loops are not allowed; use for ... in range(...)")

    def if_(self, node: ast.If, scope: NameScope) -> None:
        self.expr(node.test, scope)
        then, other = scope.child(), scope.child()
        self.block(node.body, then)
        self.block(node.orelse, other)
        scope.defined |= then.defined | other.defined

    def with_(self, node: ast.With, scope: NameScope) -> None:
        item = node.items[0]
        call = item.context_expr
        plain = (len(node.items) == 1 and isinstance(call, ast.Call) and not call.args
                 and not call.keywords)
        path = rules.dotted(call.func) if isinstance(call, ast.Call) else None
        if plain and path == ["torch", "no_grad"] and item.optional_vars is None:
            self.block(node.body, scope)
            return
        if plain and path == ["dist_autograd", "context"] and (
                item.optional_vars is None or isinstance(item.optional_vars, ast.Name)):
            if not self.training:
                self.fail(node, f"'dist_autograd' is not allowed in scenarios: "
                                f"{lang.FORBIDDEN_NAMES['dist_autograd']}")
            if item.optional_vars is not None:
                self.target(item.optional_vars, scope)
            self.block(node.body, scope)
            return
        usage = "'with torch.no_grad():'"
        if self.training:
            usage += " or 'with dist_autograd.context() as context_id:'"
        self.fail(node, f"with is only allowed as {usage}")

    def break_continue(self, node: ast.Break | ast.Continue, scope: NameScope) -> None:
        if scope.loops == 0:
            word = "break" if isinstance(node, ast.Break) else "continue"
            self.fail(node, f"{word} is only allowed inside a for loop")

    def pass_(self, node: ast.Pass, scope: NameScope) -> None:
        pass

    def iterable(self, node: ast.expr, scope: NameScope, what: str) -> None:
        func = node.func if isinstance(node, ast.Call) else None
        path = rules.dotted(func) if isinstance(func, ast.Attribute) else None
        allowed = isinstance(node, (ast.Name, ast.Attribute)) or (
            isinstance(func, ast.Name) and (func.id in ("range", "enumerate", "zip", "reversed")
                                            or func.id in self.functions
                                            or func.id in scope.defined)) or (
            # methods (module.parameters(), d.items()), not torch.NAME(...)
            isinstance(func, ast.Attribute) and (path is None or path[0] not in _NAMESPACES))
        if not allowed:
            self.fail(node, f"{what} must iterate over range(...), enumerate(...), zip(...) "
                            f"or a variable, found '{short(node)}'; assign it to a variable "
                            "first")
        self.expr(node, scope)

    def target(self, node: ast.expr, scope: NameScope, loop: bool = False) -> None:
        if isinstance(node, ast.Name):
            if node.id == scope.self_name:
                self.fail(node, f"cannot assign to '{node.id}': it is the method's self")
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
        elif isinstance(node, ast.Attribute) and not loop \
                and class_rules.self_attribute_target(node, scope.self_name):
            self.attribute_name(node, node.attr)
        elif isinstance(node, ast.Attribute):
            where = " outside self.NAME = ... in a method" if self.classes else ""
            self.fail(node, f"assigning to an attribute ({short(node)} = ...) is not allowed"
                            f"{where}; use methods such as x.requires_grad_()")
        elif isinstance(node, ast.Starred):
            self.fail(node, "starred assignment (*x) is not supported")
        else:
            self.fail(node, f"cannot assign to '{short(node)}'")

    def check_store_name(self, node: ast.AST, name: str) -> None:
        if name.startswith("__") or name.startswith("_dv"):
            self.fail(node, f"name '{name}' is reserved: names starting with '__' or '_dv' "
                            "are not allowed")
        if name in _NOT_SHADOWABLE or name in lang.RESERVED_NAMES \
                or name in lang_nn.PREDEFINED:
            reason = reserved_reason(name) or "it is a reserved name"
            self.fail(node, f"cannot assign to '{name}': {reason}; choose another name")
        if name in self.classes:
            self.fail(node, f"cannot assign to '{name}': it is a class defined in code")
        if name in self.functions:
            self.fail(node, f"cannot assign to '{name}': it is a function defined in code")

    # -- expressions --------------------------------------------------------------------------

    def expr(self, node: ast.expr, scope: NameScope) -> None:
        check = _EXPRESSIONS.get(type(node))
        if check is None:
            self.fail(node, expression_message(node))
        check(self, node, scope)

    def children(self, node: ast.expr, scope: NameScope) -> None:
        """Check every sub-expression (tuples, operators, comparisons, f-strings, ...)."""
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child, scope)

    def constant(self, node: ast.Constant, scope: NameScope) -> None:
        if isinstance(node.value, bytes):
            self.fail(node, "bytes literals are not supported")

    def name(self, node: ast.Name, scope: NameScope) -> None:
        self.load_name(node, node.id, scope)

    def dict_(self, node: ast.Dict, scope: NameScope) -> None:
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                self.fail(node, "**mapping in dict displays is not supported")
            self.expr(key, scope)
            self.expr(value, scope)

    def binop(self, node: ast.BinOp, scope: NameScope) -> None:
        rules.check_binop(self.fail, node, node.op)
        self.expr(node.left, scope)
        self.expr(node.right, scope)

    def formatted(self, node: ast.FormattedValue, scope: NameScope) -> None:
        self.expr(node.value, scope)
        if node.format_spec is None:
            return
        spec = node.format_spec
        for part in spec.values if isinstance(spec, ast.JoinedStr) else [spec]:
            if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
                self.fail(spec, "f-string format specs must be plain text (like :.3f)")
            if re.search(r"\d{4,}", part.value):
                self.fail(spec, f"f-string format spec '{part.value}' is too wide")

    def listcomp(self, node: ast.ListComp, scope: NameScope) -> None:
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

    def yield_(self, node: ast.Yield, scope: NameScope) -> None:
        if not scope.in_function or self.kind != "code":
            self.fail(node, "yield is only allowed inside a def in code")
        if node.value is not None:
            self.expr(node.value, scope)

    def load_name(self, node: ast.AST, name: str, scope: NameScope) -> None:
        if name.startswith("__") or name.startswith("_dv"):
            self.fail(node, f"name '{name}' is not allowed: names starting with '__' or '_dv' "
                            "are reserved")
        if name == "super":
            self.fail(node, f"super() is only allowed as {lang_nn.SUPER_USAGE}, as a "
                            "statement in a class's __init__")
        if name == "dist_autograd" and not self.training:
            self.fail(node, f"'{name}' is not allowed in scenarios: "
                            f"{lang.FORBIDDEN_NAMES['dist_autograd']}")
        if name in scope.defined:
            return  # a variable of the program (it may hide a forbidden builtin: input)
        reason = lang.FORBIDDEN_NAMES.get(name)
        if reason is not None and name != "dist_autograd":
            self.fail(node, f"'{name}' is not allowed in scenarios: {reason}")
        if name in _NAMESPACES:
            example = {"torch": "torch.add", "rpc": "rpc.rpc_sync(...)", "nn": "nn.Linear",
                       "optim": "optim.SGD", "F": "F.relu",
                       "dist_autograd": "dist_autograd.backward(context_id, [loss])"}[name]
            self.fail(node, f"'{name}' can only be used as {name}.NAME (for example "
                            f"{example})")
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

    def attribute(self, node: ast.Attribute, scope: NameScope, call: bool = False) -> None:
        path = rules.dotted(node)
        rules.check_attribute_parts(self.fail, node, path)
        root = path[0] if path is not None else None
        if path is not None and root == "torch":
            if not rules_nn.check_torch_extra(self.fail, node, path, call):
                rules.check_torch_path(self.fail, node, path, call)
            return
        if path is not None and root == "rpc":
            if path[1:] != ["RRef"]:
                rules.check_rpc_path(self.fail, node, path, call)
            return
        if path is not None and root in _NAMESPACES:
            rules_nn.check_namespace_path(self.fail, node, path, call, self.training)
            return
        self.expr(node.value, scope)
        rules_nn.check_member(self.fail, node, call, self.declared)

    def attribute_name(self, node: ast.Attribute, name: str) -> None:
        """The attribute of ``self.NAME = ...``."""
        rules.check_attribute_parts(self.fail, node, None)
        class_rules.check_declared_name(self.fail, node, name, "an attribute")

    # -- calls --------------------------------------------------------------------------------

    def call(self, node: ast.Call, scope: NameScope) -> None:
        """A call: what it calls, then its arguments, each checked even when the other has a
        problem (``unknwn(t22)`` names both)."""
        if self.problems.attempt(functools.partial(self.callee, node, scope), True):
            self.arguments(node, scope)

    def callee(self, node: ast.Call, scope: NameScope) -> bool:
        """What ``node`` calls; ``False`` when its arguments were checked here already."""
        func = node.func
        if isinstance(func, ast.Name):
            self.call_name(node, func.id, scope)
        elif isinstance(func, ast.Attribute):
            inner = func.value
            if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name) \
                    and inner.func.id == "super":
                self.fail(node, f"super() is only allowed as {lang_nn.SUPER_USAGE}, as a "
                                "statement in a class's __init__")
            if rules_nn.check_format_call(self.fail, node):
                self.arguments(node, scope)
                return False
            self.attribute(func, scope, call=True)
            path = rules.dotted(func)
            if path == ["dist_autograd", "backward"]:
                self.backward_calls += 1
            if path is not None and path[0] == "rpc" and func.attr in lang.RPC_FUNCS:
                self.rpc_call(node, func.attr, scope)
                return False
        else:
            self.expr(func, scope)
        return True

    def arguments(self, node: ast.Call, scope: NameScope) -> None:
        """Each argument of a call, on its own: a problem in one is kept and the next ones
        are checked too (``rpc.rpc_sync("wroker1", my_ad)`` names both)."""
        for arg in node.args:
            self.problems.attempt(functools.partial(self.expr, arg, scope), None)
        for kw in node.keywords:
            self.problems.attempt(functools.partial(self.keyword, kw, scope), None)

    def keyword(self, kw: ast.keyword, scope: NameScope) -> None:
        if kw.arg is None:
            if isinstance(kw.value, ast.Name) and kw.value.id == scope.kwargs_name:
                return  # passing a function's own **kwargs on
            self.fail(kw.value, "**kwargs in calls is not supported; pass keywords "
                                "one by one (a def may pass its own **kwargs on)")
        if kw.arg.startswith("_"):
            self.fail(kw.value, f"keyword argument '{kw.arg}' is not allowed: keyword "
                                "names starting with '_' are reserved")
        self.expr(kw.value, scope)

    def call_name(self, node: ast.Call, name: str, scope: NameScope) -> None:
        if name == "super":
            self.load_name(node, name, scope)
        reason = lang.FORBIDDEN_NAMES.get(name)
        if reason is not None and name != "dist_autograd" and name not in scope.defined:
            self.fail(node, f"{name}() is not allowed in scenarios: {reason}")
        if name in lang.HELPERS:
            rules.check_helper_call(self.fail, node, name)
            return
        if name in lang.BUILTINS or name in self.functions:
            return
        if name in _NAMESPACES or name.startswith("__") or name.startswith("_dv"):
            self.load_name(node, name, scope)
        if name in lang_nn.PREDEFINED:
            return  # RRef, DistributedOptimizer, RemoteModule
        if name in scope.defined or name in self.params or name in self.state:
            return  # calling a variable: it can only hold whitelisted callables
        callables = self.functions | lang.BUILTINS | lang.HELPERS | lang_nn.PREDEFINED
        self.fail(node, f"unknown function '{name}'{suggest(name, callables)}")

    def rpc_call(self, node: ast.Call, fn: str, scope: NameScope) -> None:
        if self.kind == "init":
            self.fail(node, "rpc calls are not allowed in a worker's init: it runs before the "
                            "workers are connected; call from main or from a function in code")
        self.problems.attempt(lambda: rules.check_rpc_shape(self.fail, node, fn, self.workers),
                              None)
        self.arguments(node, scope)


_Check = Callable[[Checker, Any, NameScope], None]

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
    ast.ListComp: Checker.listcomp, ast.Yield: Checker.yield_,
}
