"""Scenario files: YAML + restricted program text -> a validated, instrumented ``Scenario``.

Pure: never imports torch. A scenario is YAML whose ``code``, ``main`` and per-worker ``init``
values are programs in a small subset of Python (see ``distviz.lang`` for the names it may use).
Every program is parsed with ``ast.parse`` and its syntax tree is checked against a whitelist
before anything runs; nothing here ever executes user text. Every problem is a
``ScenarioError`` whose one line names the file, the line in the YAML file and the key::

    scenarios/x.yaml:14 main: unknown worker 'wroker1' (did you mean 'worker1'?)

After validation each program's tree is instrumented for the runtime (``distviz.runner.sandbox``):

* ``_dv_tick()`` is called at the start of every loop body, function body and list
  comprehension step (the step budget);
* ``a * b`` and ``a ** b`` become ``_dv_mul(a, b)`` / ``_dv_pow(a, b)``, and ``x *= v`` /
  ``x **= v`` become ``x = _dv_imul(x, v)`` / ``x = _dv_ipow(x, v)`` (guards against huge
  strings, lists and integers; tensors behave exactly as with the operators);
* every ``rpc.rpc_sync(...)``, ``rpc.rpc_async(...)`` and ``rpc.remote(...)`` call gets two
  extra keyword arguments, ``_dv_line=<line in the YAML file>`` and ``_dv_target=<name or None>``:
  the variable the result is assigned to, for ``x = rpc.rpc_sync(...)``,
  ``x = rpc.rpc_async(...).wait()``, ``x = rpc.remote(...).to_here()``, ``fut =
  rpc.rpc_async(...)`` and ``rref = rpc.remote(...)``; ``None`` otherwise.
  The runner's ``rpc`` object must accept and remove them.

Line numbers in the instrumented trees are lines of the YAML file, so tracebacks and runtime
errors point into the scenario file (``compile(tree, filename=path)``).
"""

from __future__ import annotations

import ast
import difflib
import keyword
import os
import re
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NoReturn

import yaml

from distviz import lang
from distviz.errors import ScenarioError

__all__ = ["MAX_WORKERS", "PassSpec", "Program", "Scenario", "load_scenario", "load_scenario_text"]

#: Largest scenario file read, in bytes.
MAX_FILE_BYTES = 1_000_000
#: Deepest nesting of YAML lists and mappings accepted.
MAX_YAML_DEPTH = 32
#: Most workers a scenario may declare (each one is a process).
MAX_WORKERS = 32

TOP_KEYS = ("name", "description", "workers", "seed", "params", "code", "main", "backward")
REQUIRED_KEYS = ("name", "workers", "main", "backward")
WORKER_KEYS = ("init",)
PASS_KEYS = ("roots", "retain_graph")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_BINOPS: dict[type[ast.operator], str] = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
    ast.Mod: "%", ast.Pow: "**", ast.MatMult: "@",
}
_OTHER_BINOPS: dict[type[ast.operator], str] = {
    ast.LShift: "<<", ast.RShift: ">>", ast.BitOr: "|", ast.BitXor: "^", ast.BitAnd: "&",
}


# ---------------------------------------------------------------------------------------------
# Public value types


@dataclass(frozen=True)
class PassSpec:
    """One backward pass: ``dist_autograd.backward(ctx, [roots...], retain_graph)``.

    ``line`` is the line of the pass (or of the root list) in the YAML file.
    """

    roots: list[str]
    retain_graph: bool
    line: int


@dataclass(frozen=True, eq=False)
class Program:
    """A validated program: ``code``, ``main`` or one worker's ``init``.

    ``source`` is the text as written in the YAML value; ``first_line`` is the YAML file line
    of its first line; ``key`` names it in messages (``main``, ``code``, ``workers.ps.init``);
    ``tree`` is the instrumented syntax tree whose line numbers are YAML file lines.
    """

    source: str
    first_line: int
    key: str
    path: str
    tree: ast.Module

    def compile(self) -> types.CodeType:
        """Return the code object of the instrumented tree (filename: the scenario path)."""
        return compile(self.tree, filename=self.path, mode="exec")


@dataclass(frozen=True, eq=False)
class Scenario:
    """A validated scenario.

    ``workers`` keeps the file's order; ``initiator`` is the first worker, where ``main`` runs
    inside ``dist_autograd.context()``. ``worker_init`` maps every worker to its ``init``
    program or ``None``; ``worker_state`` maps every worker to the names its ``init`` assigns
    (``ps -> ["w"]``). ``params`` holds the defaults with ``--set`` overrides applied.
    ``functions`` lists the names ``def``-ined in ``code``.

    Run order on each worker (what the validator assumes): namespace from
    ``sandbox.base_namespace``, then ``code``, then that worker's ``init`` (both before the
    workers connect: an init may not make RPC calls), then, on the initiator only, ``main`` in
    the same namespace plus ``rpc``.
    """

    path: str
    name: str
    description: str
    workers: list[str]
    initiator: str
    worker_init: dict[str, Program | None]
    code: Program | None
    main: Program
    passes: list[PassSpec]
    params: dict[str, int | float | bool | str]
    seed: int
    functions: list[str]
    raw_text: str
    worker_state: dict[str, list[str]] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Helpers


def _suggest(word: str, options: Iterable[str], fmt: str = "'{}'") -> str:
    """Return `` (did you mean 'x'?)`` for the closest option, or ``""``."""
    matches = difflib.get_close_matches(word, sorted(set(options)), n=1, cutoff=0.6)
    return f" (did you mean {fmt.format(matches[0])}?)" if matches else ""


def _kind(value: Any) -> str:
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


def _short(node: ast.AST, limit: int = 40) -> str:
    """Source text of ``node`` for messages, shortened."""
    try:
        text = ast.unparse(node)
    except Exception:  # pragma: no cover - unparse of a parsed tree does not fail
        return "..."
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass
class _Y:
    """A YAML value with the line (1-based) where it starts; mappings keep their key lines."""

    value: Any
    line: int
    style: str | None = None
    key_lines: dict[str, int] = field(default_factory=dict)


class _YamlReader:
    """Compose YAML safely and convert it to ``_Y`` values, keeping lines, refusing duplicate
    keys, aliases and non-standard tags."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.seen: set[int] = set()
        self.constructor = yaml.SafeLoader("")

    def error(self, line: int | None, message: str, key: str | None = None) -> NoReturn:
        raise ScenarioError(message, path=self.path, line=line, key=key)

    def read(self, text: str) -> _Y | None:
        try:
            depth = 0
            for event in yaml.parse(text, Loader=yaml.SafeLoader):
                mark = event.start_mark
                line = mark.line + 1 if mark is not None else None
                if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                    self.error(line, "YAML anchors and aliases (&name, *name) are not "
                                     "supported in scenarios")
                if isinstance(event, yaml.CollectionStartEvent):
                    depth += 1
                    if depth > MAX_YAML_DEPTH:
                        self.error(line, f"the YAML is nested more than {MAX_YAML_DEPTH} "
                                         "levels deep")
                elif isinstance(event, yaml.CollectionEndEvent):
                    depth -= 1
            node = yaml.compose(text, Loader=yaml.SafeLoader)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = mark.line + 1 if mark is not None else None
            problem = exc.problem or "cannot parse"
            context = f" {exc.context}" if exc.context else ""
            hint = "; check the indentation" if "block" in problem + context else ""
            self.error(line, f"invalid YAML: {problem}{context}{hint}")
        except yaml.YAMLError as exc:
            self.error(None, f"invalid YAML: {' '.join(str(exc).split())}")
        if node is None:
            return None
        return self.convert(node)

    def convert(self, node: yaml.Node) -> _Y:
        line = node.start_mark.line + 1
        if node.tag not in _SAFE_TAGS:
            self.error(line, f"unsupported YAML tag {node.tag!r}")
        if id(node) in self.seen:
            self.error(line, "YAML anchors and aliases (*name) are not supported in scenarios")
        self.seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            out: dict[str, _Y] = {}
            key_lines: dict[str, int] = {}
            for key_node, value_node in node.value:
                key_line = key_node.start_mark.line + 1
                if not isinstance(key_node, yaml.ScalarNode):
                    self.error(key_line, "keys must be plain strings")
                key = self.scalar(key_node)
                if isinstance(key, bool):
                    self.error(key_line, f"keys must be strings, found {key!r}: YAML reads "
                                         "yes/no/on/off/true/false as true/false; quote the key")
                if not isinstance(key, str):
                    self.error(key_line, f"keys must be strings, found {key!r} ({_kind(key)})")
                if key in out:
                    self.error(key_line, f"duplicate key '{key}' (first at line {key_lines[key]})",
                               key=key)
                key_lines[key] = key_line
                out[key] = self.convert(value_node)
            return _Y(out, line, key_lines=key_lines)
        if isinstance(node, yaml.SequenceNode):
            return _Y([self.convert(item) for item in node.value], line)
        if isinstance(node, yaml.ScalarNode):
            return _Y(self.scalar(node), line, style=node.style)
        self.error(line, "unsupported YAML node")  # pragma: no cover

    def scalar(self, node: yaml.Node) -> Any:
        if node.tag not in _SAFE_TAGS:
            self.error(node.start_mark.line + 1, f"unsupported YAML tag {node.tag!r}")
        try:
            return self.constructor.construct_object(node, deep=True)
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or str(exc)
            self.error(node.start_mark.line + 1, f"invalid YAML value: {problem}")
        except ValueError as exc:
            self.error(node.start_mark.line + 1, f"invalid YAML value: {exc}")


_SAFE_TAGS = frozenset({
    "tag:yaml.org,2002:str", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null", "tag:yaml.org,2002:seq",
    "tag:yaml.org,2002:map",
})


# ---------------------------------------------------------------------------------------------
# Program validation


@dataclass
class _Scope:
    defined: set[str]
    in_function: bool = False
    loops: int = 0
    module_level: bool = True

    def child(self) -> _Scope:
        return _Scope(set(self.defined), self.in_function, self.loops, self.module_level)


class _Checker:
    """Walk one program's tree and raise ``ScenarioError`` on the first thing not allowed.

    ``kind`` is ``code``, ``init`` or ``main``. ``globals_`` are the names visible at module
    level besides builtins and helpers (params, functions, worker state). ``assigned`` collects
    the names assigned at module level (for backward roots and worker state).
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

    def fail(self, node: ast.AST, message: str) -> NoReturn:
        raise ScenarioError(message, path=self.path, line=getattr(node, "lineno", None),
                            key=self.key)

    # -- statements -------------------------------------------------------------------------

    def check_module(self, tree: ast.Module) -> None:
        for node in ast.walk(tree) if self.kind != "code" else ():
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                line = node.lineno
                self.stores[node.id] = min(line, self.stores.get(node.id, line))
        scope = _Scope(set())
        if self.kind == "code":
            for stmt in tree.body:
                if isinstance(stmt, ast.FunctionDef):
                    self.function(stmt)
                elif isinstance(stmt, ast.Pass) or (
                        isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)
                        and isinstance(stmt.value.value, str)):
                    continue
                elif isinstance(stmt, (ast.Assign, ast.AugAssign, ast.Expr, ast.For, ast.If,
                                       ast.With, ast.Return, ast.Break, ast.Continue)):
                    self.fail(stmt, "only function definitions (def) are allowed at the top "
                                    "level of code; put statements in main or in a worker's init")
                else:
                    self.stmt(stmt, scope)
            return
        self.block(tree.body, scope)

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
        all_args = list(args.args) + ([args.vararg] if args.vararg else [])
        for arg in all_args:
            if arg.annotation is not None:
                self.fail(arg, "annotations are not supported in scenarios")
            self.check_store_name(arg, arg.arg)
            if arg.arg in names:
                self.fail(arg, f"duplicate parameter '{arg.arg}' in def {node.name}")
            names.append(arg.arg)
        top = _Scope(set())
        for default in args.defaults:
            self.expr(default, top)
        scope = _Scope(set(names), in_function=True, loops=0, module_level=False)
        self.block(node.body, scope)

    def block(self, stmts: list[ast.stmt], scope: _Scope) -> None:
        for stmt in stmts:
            self.stmt(stmt, scope)

    def stmt(self, node: ast.stmt, scope: _Scope) -> None:
        if isinstance(node, ast.Assign):
            self.expr(node.value, scope)
            for target in node.targets:
                self.target(target, scope)
        elif isinstance(node, ast.AugAssign):
            self.binop_kind(node, node.op)
            self.expr(node.value, scope)
            if isinstance(node.target, ast.Name):
                self.load_name(node.target, node.target.id, scope)
                self.check_store_name(node.target, node.target.id)
            else:
                self.target(node.target, scope)
        elif isinstance(node, ast.AnnAssign):
            self.fail(node, "annotations are not supported in scenarios; write x = ...")
        elif isinstance(node, ast.Expr):
            self.expr(node.value, scope)
        elif isinstance(node, ast.Return):
            if not scope.in_function:
                self.fail(node, "return is only allowed inside a def in code")
            if node.value is not None:
                self.expr(node.value, scope)
        elif isinstance(node, ast.FunctionDef):
            where = "inside a def" if scope.in_function else f"in {self.key}"
            self.fail(node, f"def is not allowed {where}; define functions at the top level "
                            "of code")
        elif isinstance(node, ast.For):
            self.iterable(node.iter, scope, "for loops")
            if node.orelse:
                self.fail(node.orelse[0], "for ... else is not supported")
            body = scope.child()
            self.target(node.target, body, loop=True)
            body.loops += 1
            self.block(node.body, body)
            scope.defined |= body.defined
        elif isinstance(node, ast.While):
            self.fail(node, "while loops are not allowed; use for ... in range(...)")
        elif isinstance(node, ast.If):
            self.expr(node.test, scope)
            then, other = scope.child(), scope.child()
            self.block(node.body, then)
            self.block(node.orelse, other)
            scope.defined |= then.defined | other.defined
        elif isinstance(node, ast.With):
            self.with_(node, scope)
        elif isinstance(node, (ast.Break, ast.Continue)):
            if scope.loops == 0:
                word = "break" if isinstance(node, ast.Break) else "continue"
                self.fail(node, f"{word} is only allowed inside a for loop")
        elif isinstance(node, ast.Pass):
            pass
        else:
            self.fail(node, _statement_message(node))

    def with_(self, node: ast.With, scope: _Scope) -> None:
        ok = (len(node.items) == 1 and node.items[0].optional_vars is None
              and isinstance(node.items[0].context_expr, ast.Call)
              and _dotted(node.items[0].context_expr.func) == ["torch", "no_grad"]
              and not node.items[0].context_expr.args
              and not node.items[0].context_expr.keywords)
        if not ok:
            self.fail(node, "with is only allowed as 'with torch.no_grad():'")
        self.block(node.body, scope)

    def iterable(self, node: ast.expr, scope: _Scope, what: str) -> None:
        allowed = isinstance(node, ast.Name) or (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
            and node.func.id in ("range", "enumerate", "zip", "reversed"))
        if not allowed:
            self.fail(node, f"{what} must iterate over range(...), enumerate(...), zip(...) "
                            f"or a variable, found '{_short(node)}'; assign it to a variable "
                            "first")
        self.expr(node, scope)

    def target(self, node: ast.expr, scope: _Scope, loop: bool = False) -> None:
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
            self.fail(node, f"assigning to an attribute ({_short(node)} = ...) is not allowed; "
                            "use methods such as x.requires_grad_()")
        elif isinstance(node, ast.Starred):
            self.fail(node, "starred assignment (*x) is not supported")
        else:
            self.fail(node, f"cannot assign to '{_short(node)}'")

    def check_store_name(self, node: ast.AST, name: str) -> None:
        if name.startswith("__") or name.startswith("_dv"):
            self.fail(node, f"name '{name}' is reserved: names starting with '__' or '_dv' "
                            "are not allowed")
        if name in lang.FORBIDDEN_NAMES or name in lang.RESERVED_NAMES:
            self.fail(node, f"cannot assign to '{name}': it is a reserved name; choose another")
        if name in self.functions:
            self.fail(node, f"cannot assign to '{name}': it is a function defined in code")

    # -- expressions ------------------------------------------------------------------------

    def expr(self, node: ast.expr, scope: _Scope) -> None:
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bytes):
                self.fail(node, "bytes literals are not supported")
        elif isinstance(node, ast.Name):
            self.load_name(node, node.id, scope)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for elt in node.elts:
                self.expr(elt, scope)
        elif isinstance(node, ast.Starred):
            self.expr(node.value, scope)
        elif isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if key is None:
                    self.fail(node, "**mapping in dict displays is not supported")
                self.expr(key, scope)
                self.expr(value, scope)
        elif isinstance(node, ast.BinOp):
            self.binop_kind(node, node.op)
            self.expr(node.left, scope)
            self.expr(node.right, scope)
        elif isinstance(node, ast.UnaryOp):
            self.expr(node.operand, scope)
        elif isinstance(node, ast.BoolOp):
            for value in node.values:
                self.expr(value, scope)
        elif isinstance(node, ast.Compare):
            self.expr(node.left, scope)
            for comparator in node.comparators:
                self.expr(comparator, scope)
        elif isinstance(node, ast.IfExp):
            self.expr(node.test, scope)
            self.expr(node.body, scope)
            self.expr(node.orelse, scope)
        elif isinstance(node, ast.JoinedStr):
            for value in node.values:
                self.expr(value, scope)
        elif isinstance(node, ast.FormattedValue):
            self.expr(node.value, scope)
            if node.format_spec is not None:
                self.format_spec(node.format_spec)
        elif isinstance(node, ast.Subscript):
            self.expr(node.value, scope)
            self.expr(node.slice, scope)
        elif isinstance(node, ast.Slice):
            for part in (node.lower, node.upper, node.step):
                if part is not None:
                    self.expr(part, scope)
        elif isinstance(node, ast.Attribute):
            self.attribute(node, scope, call=False)
        elif isinstance(node, ast.Call):
            self.call(node, scope)
        elif isinstance(node, ast.ListComp):
            self.listcomp(node, scope)
        else:
            self.fail(node, _expression_message(node))

    def binop_kind(self, node: ast.AST, op: ast.operator) -> None:
        if type(op) not in _BINOPS:
            symbol = _OTHER_BINOPS.get(type(op), type(op).__name__)
            self.fail(node, f"operator {symbol} is not allowed in scenarios "
                            "(allowed: + - * / // % ** @)")

    def format_spec(self, node: ast.expr) -> None:
        parts = node.values if isinstance(node, ast.JoinedStr) else [node]
        for part in parts:
            if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
                self.fail(node, "f-string format specs must be plain text (like :.3f)")
            if re.search(r"\d{4,}", part.value):
                self.fail(node, f"f-string format spec '{part.value}' is too wide")

    def listcomp(self, node: ast.ListComp, scope: _Scope) -> None:
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

    def load_name(self, node: ast.AST, name: str, scope: _Scope) -> None:
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
        self.fail(node, f"unknown name '{name}'{_suggest(name, known)}")

    def attribute(self, node: ast.Attribute, scope: _Scope, call: bool) -> None:
        path = _dotted(node)
        parts = path if path is not None else [node.attr]
        for part in parts[1:] if path is not None else parts:
            if part.startswith("__"):
                self.fail(node, f"dunder attribute '{part}' is not allowed in scenarios")
            if part.startswith("_"):
                self.fail(node, f"private attribute '{part}' is not allowed in scenarios")
        if path is not None and path[0] == "torch":
            self.torch_attribute(node, path, call)
            return
        if path is not None and path[0] == "rpc":
            if len(path) == 2 and path[1] in lang.RPC_FUNCS:
                if not call:
                    self.fail(node, f"rpc.{path[1]} must be called: rpc.{path[1]}(\"worker1\", "
                                    "fn, args=(...))")
                return
            self.fail(node, f"rpc.{'.'.join(path[1:])} is not available in scenarios"
                            f"{_suggest(path[1], lang.RPC_FUNCS, 'rpc.{}')}; use rpc.rpc_sync, "
                            "rpc.rpc_async or rpc.remote")
        self.expr(node.value, scope)
        attr = node.attr
        reason = lang.FORBIDDEN_METHODS.get(attr)
        if reason is not None:
            self.fail(node, f"{_short(node.value)}.{attr}() is not allowed in scenarios: "
                            f"{reason}")
        if call:
            if attr not in lang.ALL_METHODS:
                self.fail(node, f"method .{attr}() is not available in scenarios"
                                f"{_suggest(attr, lang.ALL_METHODS, '.{}()')}")
        elif attr not in lang.TENSOR_ATTRIBUTES:
            if attr in lang.ALL_METHODS:
                self.fail(node, f".{attr} must be called: write {_short(node)}(...)")
            self.fail(node, f"attribute .{attr} is not available in scenarios"
                            f"{_suggest(attr, lang.TENSOR_ATTRIBUTES, '.{}')}")

    def torch_attribute(self, node: ast.Attribute, path: list[str], call: bool) -> None:
        name = path[1]
        dotted = ".".join(path)
        reason = lang.FORBIDDEN_TORCH.get(name)
        if reason is not None:
            self.fail(node, f"torch.{name} is not allowed in scenarios: {reason}")
        if name in lang.TORCH_SUBMODULES:
            members = lang.TORCH_SUBMODULES[name]
            if len(path) == 2:
                self.fail(node, f"torch.{name} can only be used as torch.{name}.NAME")
            member = path[2]
            if member not in members:
                hint = ("; write functions from torch.nn.functional with weight tensors"
                        if name == "nn" else _suggest(member, members, f"torch.{name}.{{}}"))
                self.fail(node, f"torch.{name}.{member} is not available in scenarios{hint}")
            if name == "nn":
                if len(path) == 3:
                    self.fail(node, "torch.nn.functional can only be used as "
                                    "torch.nn.functional.NAME")
                fn = path[3]
                if fn not in lang.TORCH_NN_FUNCTIONAL:
                    self.fail(node, f"torch.nn.functional.{fn} is not available in scenarios"
                                    f"{_suggest(fn, lang.TORCH_NN_FUNCTIONAL, 'torch.nn.functional.{}')}")
                if len(path) > 4:
                    self.fail(node, f"{dotted} is not available in scenarios")
            elif len(path) > 3:
                self.fail(node, f"{dotted} is not available in scenarios")
            return
        if name not in lang.TORCH_NAMES:
            self.fail(node, f"torch.{name} is not available in scenarios"
                            f"{_suggest(name, lang.TORCH_NAMES, 'torch.{}')}")
        if len(path) > 2:
            self.fail(node, f"{dotted} is not available in scenarios")
        if name in lang.TORCH_CONTEXTS:
            self.fail(node, f"torch.{name}() can only be used as 'with torch.{name}():'")
        if call and name in lang.TORCH_DTYPES:
            self.fail(node, f"torch.{name} is a dtype, not a function; use x.{name}() or "
                            f"dtype=torch.{name}")

    def call(self, node: ast.Call, scope: _Scope) -> None:
        func = node.func
        if isinstance(func, ast.Name):
            self.call_name(node, func.id, scope)
        elif isinstance(func, ast.Attribute):
            path = _dotted(func)
            if path is not None and path[0] == "rpc":
                self.attribute(func, scope, call=True)
                self.rpc_call(node, func.attr, scope)
                return
            self.attribute(func, scope, call=True)
        else:
            self.expr(func, scope)
        self.arguments(node, scope)

    def arguments(self, node: ast.Call, scope: _Scope) -> None:
        for arg in node.args:
            self.expr(arg, scope)
        for kw in node.keywords:
            if kw.arg is None:
                self.fail(kw.value, "**kwargs in calls is not supported; pass keywords "
                                    "one by one")
            if kw.arg.startswith("_"):
                self.fail(kw.value, f"keyword argument '{kw.arg}' is not allowed")
            self.expr(kw.value, scope)

    def call_name(self, node: ast.Call, name: str, scope: _Scope) -> None:
        reason = lang.FORBIDDEN_NAMES.get(name)
        if reason is not None:
            self.fail(node, f"{name}() is not allowed in scenarios: {reason}")
        if name in lang.HELPERS:
            arity = lang.HELPER_ARITY[name]
            if len(node.args) != arity or node.keywords:
                usage = "fail_backward(x, \"message\")" if name == "fail_backward" \
                    else "crash_backward(x)"
                self.fail(node, f"{name} takes {arity} argument{'s' if arity > 1 else ''}: "
                                f"{usage}")
            return
        if name in lang.BUILTINS or name in self.functions:
            return
        if name in ("torch", "rpc") or name.startswith("__") or name.startswith("_dv"):
            self.load_name(node, name, scope)
        if name in scope.defined or name in self.params or name in self.state:
            return  # calling a variable: it can only hold whitelisted callables
        callables = self.functions | lang.BUILTINS | lang.HELPERS
        self.fail(node, f"unknown function '{name}'{_suggest(name, callables)}")

    def rpc_call(self, node: ast.Call, fn: str, scope: _Scope) -> None:
        if self.kind == "init":
            self.fail(node, "rpc calls are not allowed in a worker's init: it runs before the "
                            "workers are connected; call from main or from a function in code")
        keywords = {kw.arg: kw.value for kw in node.keywords if kw.arg is not None}
        for kw in node.keywords:
            if kw.arg is not None and kw.arg not in lang.RPC_KEYWORDS:
                self.fail(kw.value, f"rpc.{fn} has no argument '{kw.arg}'"
                                    f"{_suggest(kw.arg, lang.RPC_KEYWORDS)}; it takes to, func, "
                                    "args, kwargs, timeout")
        if len(node.args) > 5 or any(isinstance(a, ast.Starred) for a in node.args[:2]):
            self.fail(node, f"rpc.{fn} takes (to, func, args=(...), kwargs={{...}}, timeout=...)")
        to = node.args[0] if node.args else keywords.get("to")
        target = node.args[1] if len(node.args) > 1 else keywords.get("func")
        usage = f"rpc.{fn}(\"worker1\", my_fn, args=(x,))"
        if to is None:
            self.fail(node, f"rpc.{fn} needs the worker name as its first argument: {usage}")
        if target is None:
            self.fail(node, f"rpc.{fn} needs the function to call as its second argument: "
                            f"{usage}")
        self.worker_name(to, fn)
        if isinstance(target, ast.Constant):
            self.fail(target, f"the second argument of rpc.{fn} must be a function, found "
                              f"{_short(target)}")
        self.arguments(node, scope)

    def worker_name(self, node: ast.expr, fn: str) -> None:
        if isinstance(node, ast.Constant):
            if not isinstance(node.value, str):
                self.fail(node, f"the first argument of rpc.{fn} must be a worker name, found "
                                f"{node.value!r}")
            if node.value not in self.workers:
                self.fail(node, f"unknown worker '{node.value}'"
                                f"{_suggest(node.value, self.workers)}; workers: "
                                f"{', '.join(self.workers)}")
        elif isinstance(node, ast.JoinedStr) and node.values:
            first = node.values[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str):
                prefix = first.value
                if not any(w.startswith(prefix) for w in self.workers):
                    self.fail(node, f"no worker name starts with '{prefix}'; workers: "
                                    f"{', '.join(self.workers)}")


def _dotted(node: ast.expr) -> list[str] | None:
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


def _statement_message(node: ast.stmt) -> str:
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


def _expression_message(node: ast.expr) -> str:
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


# ---------------------------------------------------------------------------------------------
# Instrumentation


def _tick(at: ast.AST) -> ast.Call:
    call = ast.Call(func=ast.Name(id="_dv_tick", ctx=ast.Load()), args=[], keywords=[])
    return ast.copy_location(call, at)


def _is_rpc_call(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "rpc"
            and node.func.attr in lang.RPC_FUNCS)


class _Instrument(ast.NodeTransformer):
    """Add step ticks, guarded * and **, and ``_dv_line``/``_dv_target`` on rpc calls."""

    def __init__(self) -> None:
        self.targets: dict[int, str] = {}

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.generic_visit(node)
        node.body.insert(0, ast.copy_location(ast.Expr(_tick(node)), node))
        return node

    def visit_For(self, node: ast.For) -> ast.AST:
        self.generic_visit(node)
        node.body.insert(0, ast.copy_location(ast.Expr(_tick(node)), node))
        return node

    def visit_ListComp(self, node: ast.ListComp) -> ast.AST:
        self.generic_visit(node)
        node.generators[0].ifs.insert(0, _tick(node))
        return node

    def visit_Assign(self, node: ast.Assign) -> ast.AST:
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            if (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                    and not value.args and not value.keywords):
                # x = rpc.rpc_async(...).wait() and x = rpc.remote(...).to_here()
                inner = value.func.value
                wanted = {"wait": "rpc_async", "to_here": "remote"}.get(value.func.attr)
                if (_is_rpc_call(inner) and isinstance(inner, ast.Call)
                        and isinstance(inner.func, ast.Attribute) and inner.func.attr == wanted):
                    self.targets[id(inner)] = node.targets[0].id
            if _is_rpc_call(value) and isinstance(value, ast.Call) \
                    and isinstance(value.func, ast.Attribute):
                # x = rpc.rpc_sync(...); fut = rpc.rpc_async(...); rref = rpc.remote(...)
                self.targets[id(value)] = node.targets[0].id
        self.generic_visit(node)
        return node

    def visit_Call(self, node: ast.Call) -> ast.AST:
        target = self.targets.get(id(node))
        self.generic_visit(node)
        if _is_rpc_call(node):
            node.keywords.append(ast.keyword(arg="_dv_line", value=ast.Constant(node.lineno)))
            node.keywords.append(ast.keyword(arg="_dv_target", value=ast.Constant(target)))
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        guard = {ast.Mult: "_dv_mul", ast.Pow: "_dv_pow"}.get(type(node.op))
        if guard is None:
            return node
        call = ast.Call(func=ast.Name(id=guard, ctx=ast.Load()), args=[node.left, node.right],
                        keywords=[])
        return ast.copy_location(call, node)

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        guard = {ast.Mult: "_dv_imul", ast.Pow: "_dv_ipow"}.get(type(node.op))
        if guard is None or not isinstance(node.target, ast.Name):
            return node
        name = node.target.id
        call = ast.Call(func=ast.Name(id=guard, ctx=ast.Load()),
                        args=[ast.Name(id=name, ctx=ast.Load()), node.value], keywords=[])
        assign = ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=call)
        return ast.copy_location(assign, node)


# ---------------------------------------------------------------------------------------------
# Loading


class _Loader:
    def __init__(self, path: str, text: str) -> None:
        self.path = path
        self.text = text

    def error(self, line: int | None, key: str | None, message: str) -> NoReturn:
        raise ScenarioError(message, path=self.path, line=line, key=key)

    def string(self, y: _Y, key: str, *, allow_empty: bool = False) -> str:
        if not isinstance(y.value, str):
            self.error(y.line, key, f"expected a string, found {_kind(y.value)}")
        if not allow_empty and not y.value.strip():
            self.error(y.line, key, "expected a non-empty string")
        return y.value

    def parse_program(self, y: _Y, key: str) -> tuple[str, int, ast.Module]:
        if not isinstance(y.value, str):
            self.error(y.line, key, f"expected the program as a string (write '{key.split('.')[-1]}"
                                    f": |' and indent the lines below it), found "
                                    f"{_kind(y.value)}")
        source = y.value
        if not source.strip():
            self.error(y.line, key, "the program is empty")
        first = y.line + 1 if y.style in ("|", ">") else y.line
        try:
            tree = ast.parse(source, filename=self.path, mode="exec")
        except SyntaxError as exc:
            offset = (exc.lineno or 1) - 1
            lines = source.splitlines()
            text = lines[offset].strip() if 0 <= offset < len(lines) else ""
            near = f" in '{text[:60]}'" if text else ""
            msg = exc.msg or "invalid syntax"
            detail = msg if msg.startswith("invalid syntax") else f"invalid syntax: {msg}"
            self.error(first + offset, key, f"{detail}{near}")
        except (ValueError, RecursionError, MemoryError) as exc:
            self.error(first, key, f"cannot parse the program: {exc}")
        ast.increment_lineno(tree, first - 1)
        return source, first, tree

    def program(self, source: str, first: int, key: str, tree: ast.Module) -> Program:
        tree = _Instrument().visit(tree)
        ast.fix_missing_locations(tree)
        program = Program(source=source, first_line=first, key=key, path=self.path, tree=tree)
        try:
            program.compile()
        except SyntaxError as exc:
            self.error(exc.lineno, key, f"invalid syntax: {exc.msg}")
        except (ValueError, RecursionError, MemoryError) as exc:
            self.error(first, key, f"cannot compile the program: {exc}")
        return program


def _checked_name(loader: _Loader, y: _Y, key: str, what: str) -> str:
    if not isinstance(y.value, str):
        loader.error(y.line, key, f"{what} names must be strings, found {y.value!r} "
                                  f"({_kind(y.value)})")
    name = y.value
    if not _IDENT.match(name) or keyword.iskeyword(name):
        loader.error(y.line, key, f"invalid {what} name '{name}': use letters, digits and _ "
                                  "(not starting with a digit)")
    return name


def _load_workers(loader: _Loader, y: _Y) -> tuple[list[str], dict[str, _Y | None], int]:
    workers: list[str] = []
    inits: dict[str, _Y | None] = {}
    if isinstance(y.value, list):
        for item in y.value:
            name = _checked_name(loader, item, "workers", "worker")
            if name in workers:
                loader.error(item.line, "workers", f"duplicate worker name '{name}'")
            workers.append(name)
            inits[name] = None
    elif isinstance(y.value, dict):
        for name, spec in y.value.items():
            line = y.key_lines[name]
            _checked_name(loader, _Y(name, line), "workers", "worker")
            workers.append(name)
            key = f"workers.{name}"
            if spec.value is None:
                inits[name] = None
                continue
            if not isinstance(spec.value, dict):
                loader.error(spec.line, key, f"expected {{init: <program>}} or nothing, found "
                                             f"{_kind(spec.value)}")
            for k in spec.value:
                if k not in WORKER_KEYS:
                    loader.error(spec.key_lines[k], key, f"unknown key '{k}'"
                                                         f"{_suggest(k, WORKER_KEYS)}; a worker "
                                                         "may only have 'init'")
            init = spec.value.get("init")
            inits[name] = None if init is None or init.value is None else init
    else:
        loader.error(y.line, "workers", "expected a list of worker names like [worker0, "
                                        "worker1] or a mapping name -> {init: ...}, found "
                                        f"{_kind(y.value)}")
    if not workers:
        loader.error(y.line, "workers", "at least one worker is needed")
    if len(workers) > MAX_WORKERS:
        loader.error(y.line, "workers", f"{len(workers)} workers declared; at most "
                                        f"{MAX_WORKERS} are allowed")
    return workers, inits, y.line


_PARAM_TYPES = (bool, int, float, str)


def _load_params(loader: _Loader, y: _Y | None) -> tuple[dict[str, int | float | bool | str],
                                                       dict[str, int]]:
    if y is None or y.value is None:
        return {}, {}
    if not isinstance(y.value, dict):
        loader.error(y.line, "params", f"expected a mapping name -> default value, found "
                                       f"{_kind(y.value)}")
    params: dict[str, int | float | bool | str] = {}
    lines: dict[str, int] = {}
    for name, value in y.value.items():
        line = y.key_lines[name]
        key = f"params.{name}"
        _checked_name(loader, _Y(name, line), key, "param")
        if (name in lang.RESERVED_NAMES or name in lang.FORBIDDEN_NAMES
                or name.startswith("__") or name.startswith("_dv")):
            loader.error(line, key, f"'{name}' is a reserved name; choose another param name")
        if not isinstance(value.value, _PARAM_TYPES):
            loader.error(value.line, key, f"a param default must be an integer, number, "
                                          f"true/false or string, found {_kind(value.value)}")
        params[name] = value.value
        lines[name] = line
    return params, lines


def _apply_overrides(path: str, params: dict[str, int | float | bool | str],
                     overrides: Mapping[str, str]) -> dict[str, int | float | bool | str]:
    out = dict(params)
    for name, raw in overrides.items():
        key = f"--set {name}={raw}"
        if name not in params:
            declared = (f"params: {', '.join(params)}" if params
                        else f"{path} declares no params")
            raise ScenarioError(f"no param '{name}' in this scenario{_suggest(name, params)}; "
                                f"{declared}", key=key)
        default = params[name]
        text = str(raw).strip()
        value: int | float | bool | str
        if isinstance(default, bool):
            lowered = text.lower()
            if lowered in ("true", "yes", "on", "1"):
                value = True
            elif lowered in ("false", "no", "off", "0"):
                value = False
            else:
                raise ScenarioError(f"expected true or false for param '{name}' "
                                    f"(default {str(default).lower()})", key=key)
        elif isinstance(default, int):
            try:
                value = int(text, 10)
            except ValueError:
                raise ScenarioError(f"expected an integer for param '{name}' (default "
                                    f"{default})", key=key) from None
        elif isinstance(default, float):
            try:
                value = float(text)
            except ValueError:
                raise ScenarioError(f"expected a number for param '{name}' (default "
                                    f"{default})", key=key) from None
        else:
            value = str(raw)
        out[name] = value
    return out


def _load_backward(loader: _Loader, y: _Y, main_names: list[str]) -> list[PassSpec]:
    usage = ("expected a list of root names like [loss] or a list of passes like "
             "[{roots: [loss], retain_graph: true}, {roots: [loss]}]")
    if not isinstance(y.value, list):
        loader.error(y.line, "backward", f"{usage}, found {_kind(y.value)}")
    items: list[_Y] = y.value
    if not items:
        loader.error(y.line, "backward", "at least one root is needed, like [loss]")
    if all(isinstance(item.value, str) for item in items):
        roots = _load_roots(loader, items, "backward", main_names)
        return [PassSpec(roots=roots, retain_graph=False, line=y.line)]
    passes: list[PassSpec] = []
    for index, item in enumerate(items):
        key = f"backward[{index}]"
        if not isinstance(item.value, dict):
            loader.error(item.line, key, f"{usage}; do not mix the two forms, found "
                                         f"{_kind(item.value)}")
        spec: dict[str, _Y] = item.value
        for k in spec:
            if k not in PASS_KEYS:
                loader.error(item.key_lines[k], key, f"unknown key '{k}'"
                                                     f"{_suggest(k, PASS_KEYS)}; a pass has "
                                                     "roots and retain_graph")
        if "roots" not in spec:
            loader.error(item.line, key, "missing key 'roots' (like {roots: [loss]})")
        roots_y = spec["roots"]
        if not isinstance(roots_y.value, list) or not roots_y.value:
            loader.error(roots_y.line, f"{key}.roots", f"expected a non-empty list of root "
                                                       f"names like [loss], found "
                                                       f"{_kind(roots_y.value)}")
        roots = _load_roots(loader, roots_y.value, f"{key}.roots", main_names)
        retain = spec.get("retain_graph")
        if retain is not None and not isinstance(retain.value, bool):
            loader.error(retain.line, f"{key}.retain_graph", f"expected true or false, found "
                                                             f"{_kind(retain.value)}")
        passes.append(PassSpec(roots=roots, retain_graph=bool(retain and retain.value),
                               line=item.line))
    return passes


def _load_roots(loader: _Loader, items: list[_Y], key: str, main_names: list[str]) -> list[str]:
    roots: list[str] = []
    for item in items:
        if not isinstance(item.value, str):
            loader.error(item.line, key, f"root names must be strings, found {_kind(item.value)}")
        name = item.value
        if name not in main_names:
            loader.error(item.line, key, f"unknown root '{name}': roots must be names assigned "
                                         f"in main{_suggest(name, main_names)}")
        if name in roots:
            loader.error(item.line, key, f"root '{name}' is listed twice")
        roots.append(name)
    return roots


def _read_text(path: str) -> str:
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            raise ScenarioError(f"the file is {size:,} bytes; scenarios are at most "
                                f"{MAX_FILE_BYTES:,} bytes", path=path)
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        raise ScenarioError("no such scenario file", path=path) from None
    except IsADirectoryError:
        raise ScenarioError("is a directory, not a scenario file", path=path) from None
    except UnicodeDecodeError as exc:
        raise ScenarioError(f"not UTF-8 text ({exc.reason} at byte {exc.start})",
                            path=path) from None
    except OSError as exc:
        raise ScenarioError(f"cannot read the scenario: {exc.strerror or exc}",
                            path=path) from None


def load_scenario(path: str | os.PathLike[str],
                  overrides: Mapping[str, str] | None = None) -> Scenario:
    """Read, validate and instrument a scenario file.

    ``overrides`` maps declared param names to text values (``--set micro=200``), parsed to the
    type of the param's default. Returns a ``Scenario``. Raises ``ScenarioError`` (one line:
    ``file:line key: message``, exit code 2) for anything wrong: unreadable file, YAML syntax,
    duplicate/unknown/missing keys, wrong types, program syntax, anything outside the scenario
    language, unknown names/workers/functions/roots, bad ``--set`` values. Never raises
    anything else, even on pathological input.
    """
    spath = os.fspath(path)
    try:
        return _load(spath, _read_text(spath), dict(overrides or {}))
    except ScenarioError:
        raise
    except RecursionError:
        raise ScenarioError("the scenario is nested too deeply to check", path=spath) from None
    except MemoryError:
        raise ScenarioError("the scenario is too large to check", path=spath) from None


def load_scenario_text(text: str, path: str = "<scenario>",
                       overrides: Mapping[str, str] | None = None) -> Scenario:
    """Like ``load_scenario`` for text already in memory; ``path`` is used in messages."""
    try:
        return _load(path, text, dict(overrides or {}))
    except ScenarioError:
        raise
    except RecursionError:
        raise ScenarioError("the scenario is nested too deeply to check", path=path) from None
    except MemoryError:
        raise ScenarioError("the scenario is too large to check", path=path) from None


def _load(path: str, text: str, overrides: dict[str, str]) -> Scenario:
    loader = _Loader(path, text)
    root = _YamlReader(path).read(text)
    if root is None:
        loader.error(1, None, "the scenario file is empty; expected the keys name, workers, "
                              "main and backward")
    if not isinstance(root.value, dict):
        loader.error(root.line, None, f"a scenario is a mapping of keys (name, workers, main, "
                                      f"backward, ...), found {_kind(root.value)}")
    top: dict[str, _Y] = root.value
    for key in top:
        if key not in TOP_KEYS:
            loader.error(root.key_lines[key], key, f"unknown key '{key}'"
                                                   f"{_suggest(key, TOP_KEYS)}; keys: "
                                                   f"{', '.join(TOP_KEYS)}")
    for key in REQUIRED_KEYS:
        if key not in top:
            loader.error(root.line, None, f"missing required key '{key}'; a scenario needs "
                                          f"{', '.join(REQUIRED_KEYS)}")

    name = loader.string(top["name"], "name")
    description = ""
    if "description" in top and top["description"].value is not None:
        description = loader.string(top["description"], "description", allow_empty=True)
    seed = 0
    if "seed" in top:
        seed_y = top["seed"]
        if isinstance(seed_y.value, bool) or not isinstance(seed_y.value, int):
            loader.error(seed_y.line, "seed", f"expected an integer, found {_kind(seed_y.value)}")
        if not 0 <= seed_y.value < 2**63:
            loader.error(seed_y.line, "seed", "expected an integer between 0 and 2**63 - 1")
        seed = seed_y.value
    declared, _ = _load_params(loader, top.get("params"))
    params = _apply_overrides(path, declared, overrides)
    workers, init_ys, _ = _load_workers(loader, top["workers"])

    # Parse every program first: validation needs the functions and worker state names.
    code_parsed = None
    if "code" in top and top["code"].value is not None:
        code_parsed = loader.parse_program(top["code"], "code")
    init_parsed: dict[str, tuple[str, int, ast.Module]] = {}
    for worker, init_y in init_ys.items():
        if init_y is not None:
            init_parsed[worker] = loader.parse_program(init_y, f"workers.{worker}.init")
    main_parsed = loader.parse_program(top["main"], "main")

    functions: list[str] = []
    if code_parsed is not None:
        for stmt in code_parsed[2].body:
            if isinstance(stmt, ast.FunctionDef):
                if stmt.name in functions:
                    loader.error(stmt.lineno, "code", f"function '{stmt.name}' is defined twice")
                if (stmt.name in lang.RESERVED_NAMES or stmt.name in lang.FORBIDDEN_NAMES
                        or stmt.name in params or stmt.name.startswith("_")):
                    loader.error(stmt.lineno, "code", f"cannot define a function named "
                                                      f"'{stmt.name}': it is a reserved or "
                                                      "param name")
                functions.append(stmt.name)

    common: dict[str, Any] = {"params": params, "functions": functions, "workers": workers}
    worker_state: dict[str, list[str]] = {w: [] for w in workers}
    for worker, (_, _, tree) in init_parsed.items():
        checker = _Checker(path, f"workers.{worker}.init", "init", state=(), elsewhere={},
                           **common)
        checker.check_module(tree)
        worker_state[worker] = checker.assigned
    all_state = {n for names in worker_state.values() for n in names}
    if code_parsed is not None:
        _Checker(path, "code", "code", state=all_state, elsewhere={}, **common) \
            .check_module(code_parsed[2])
    initiator = workers[0]
    elsewhere = {n: w for w in workers[1:] for n in worker_state[w]
                 if n not in worker_state[initiator]}
    main_checker = _Checker(path, "main", "main", state=worker_state[initiator],
                            elsewhere=elsewhere, **common)
    main_checker.check_module(main_parsed[2])

    passes = _load_backward(loader, top["backward"], main_checker.assigned)

    code = loader.program(*code_parsed[:2], "code", code_parsed[2]) if code_parsed else None
    worker_init: dict[str, Program | None] = {w: None for w in workers}
    for worker, (source, first, tree) in init_parsed.items():
        worker_init[worker] = loader.program(source, first, f"workers.{worker}.init", tree)
    main = loader.program(main_parsed[0], main_parsed[1], "main", main_parsed[2])
    return Scenario(path=path, name=name, description=description, workers=workers,
                    initiator=initiator, worker_init=worker_init, code=code, main=main,
                    passes=passes, params=params, seed=seed, functions=functions,
                    raw_text=text, worker_state=worker_state)
