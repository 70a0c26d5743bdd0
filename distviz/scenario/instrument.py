"""Instrumentation of a validated program's syntax tree for the runtime (pure).

``instrument(tree)`` returns the tree with

* ``_dv_tick()`` at the start of every loop body, function body and list comprehension step
  (the step budget);
* ``a * b`` and ``a ** b`` as ``_dv_mul(a, b)`` / ``_dv_pow(a, b)``, and ``x *= v`` /
  ``x **= v`` as ``x = _dv_imul(x, v)`` / ``x = _dv_ipow(x, v)`` (guards against huge strings,
  lists and integers; tensors behave exactly as with the operators);
* two extra keyword arguments on every ``rpc.rpc_sync(...)``, ``rpc.rpc_async(...)`` and
  ``rpc.remote(...)`` call: ``_dv_line=<line in the YAML file>`` and ``_dv_target=<name or
  None>``, the variable the result is assigned to, for ``x = rpc.rpc_sync(...)``,
  ``x = rpc.rpc_async(...).wait()``, ``x = rpc.remote(...).to_here()``, ``fut =
  rpc.rpc_async(...)`` and ``rref = rpc.remote(...)``; ``None`` otherwise. The runner's ``rpc``
  object accepts and removes them.

The names ``_dv_*`` are supplied by ``distviz.runner.sandbox.base.base_namespace``.
"""

from __future__ import annotations

import ast

from distviz.scenario import lang
from distviz.scenario.rules import dotted
from distviz.scenario.rules_nn import NAMESPACE_ROOTS, is_static_member

__all__ = ["instrument"]


def instrument(tree: ast.Module) -> ast.Module:
    """Return ``tree`` instrumented (changed in place) with every location filled in."""
    out = _Instrument().visit(tree)
    ast.fix_missing_locations(out)
    assert isinstance(out, ast.Module)
    return out


def _is_guarded_self(node: ast.Attribute, self_name: str) -> bool:
    """``self.NAME`` in a store, after ``visit_Attribute`` wrapped it (``_dv_self(self).NAME``)
    or before."""
    value = node.value
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
            and value.func.id == "_dv_self" and value.args:
        value = value.args[0]
    return isinstance(value, ast.Name) and value.id == self_name


def _is_super(node: ast.Attribute) -> bool:
    """``super(...).__init__``: the checker allows it only as ``super().__init__(...)``."""
    return (node.attr == "__init__" and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name) and node.value.func.id == "super")


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

    def visit_ClassDef(self, node: ast.ClassDef) -> list[ast.stmt]:
        self.generic_visit(node)
        methods = [m.name for m in node.body if isinstance(m, ast.FunctionDef)]
        attributes: list[str] = []
        for method in node.body:
            if isinstance(method, ast.FunctionDef) and method.args.args:
                me = method.args.args[0].arg
                for sub in ast.walk(method):
                    if (isinstance(sub, ast.Attribute) and isinstance(sub.ctx, ast.Store)
                            and _is_guarded_self(sub, me) and sub.attr not in attributes):
                        attributes.append(sub.attr)
        register = ast.Call(func=ast.Name(id="_dv_class", ctx=ast.Load()),
                            args=[ast.Name(id=node.name, ctx=ast.Load()),
                                  ast.Tuple([ast.Constant(m) for m in methods], ast.Load()),
                                  ast.Tuple([ast.Constant(a) for a in attributes], ast.Load())],
                            keywords=[])
        return [node, ast.copy_location(ast.Expr(register), node)]

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.ctx, ast.Store):
            # self.NAME = v: the checker allows it only on a method's own self
            node.value = ast.copy_location(
                ast.Call(func=ast.Name(id="_dv_self", ctx=ast.Load()), args=[node.value],
                         keywords=[]), node.value)
            return node
        path = dotted(node)
        if (path is not None and path[0] in NAMESPACE_ROOTS) or is_static_member(node.attr) \
                or not isinstance(node.ctx, ast.Load) or _is_super(node) or (
                    node.attr == "format" and isinstance(node.value, ast.Constant)):
            return node
        call = ast.Call(func=ast.Name(id="_dv_attr", ctx=ast.Load()),
                        args=[node.value, ast.Constant(node.attr)], keywords=[])
        return ast.copy_location(call, node)

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
