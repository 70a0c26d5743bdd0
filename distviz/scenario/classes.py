"""The rules for classes in ``code`` (pure): ``class Name(nn.Module):`` as in PyTorch's tutorials.

A class body holds a docstring, ``def``s and ``pass``; a class derives from ``nn.Module`` (or
``torch.nn.Module``) or from a class defined before it in ``code``. Its methods take ``self``
(any name) first; ``__init__`` is the only dunder method, and it may call
``super().__init__(...)`` or ``super(Name, self).__init__(...)``. Methods set attributes only
as ``self.NAME = ...``. ``collect_classes`` checks the shape of every class and returns what
each one declares; the method bodies are checked by the checker like any ``def``.

The names a class declares (its methods and ``self.`` attributes) become attribute names a
program may write, on any value: the checker cannot know types, so the runtime checks each
such access (``distviz.runner.sandbox.training_names.attr``): it is allowed only on an instance of a
scenario class, the class itself, or an RRef's ``rpc_sync()``/``rpc_async()``/``remote()``.
No declared name may be a Python internal (``gi_frame``, ``f_globals``, ...), so no
scenario-defined name can alias one.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from distviz.scenario import lang, lang_nn
from distviz.scenario.error_text import reserved_reason
from distviz.scenario.rules import Fail, dotted
from distviz.scenario.scenario import ClassInfo

__all__ = ["collect_classes", "declared_names", "is_super_init", "self_attribute_target"]

_BASES = (["nn", "Module"], ["torch", "nn", "Module"])


def collect_classes(fail: Fail, tree: ast.Module, taken: Iterable[str]) -> dict[str, ClassInfo]:
    """Check the shape of every class at the top level of ``code``; return them by name.

    ``taken`` are names a class may not have (functions, params, reserved names).
    """
    classes: dict[str, ClassInfo] = {}
    used = set(taken)
    for stmt in tree.body:
        if isinstance(stmt, ast.ClassDef):
            info = _check_class(fail, stmt, classes, used)
            classes[info.name] = info
            used.add(info.name)
    return classes


def _check_class(fail: Fail, node: ast.ClassDef, known: dict[str, ClassInfo],
                 used: set[str]) -> ClassInfo:
    check_declared_name(fail, node, node.name, "a class")
    if node.name in used or node.name in known:
        fail(node, f"cannot define a class named '{node.name}': the name is already used")
    if node.decorator_list:
        fail(node.decorator_list[0], "decorators are not allowed in scenarios")
    if node.keywords:
        fail(node, f"class {node.name}: keywords in a class statement (metaclass=...) are not "
                   "allowed")
    base = _base(node, known)
    if base is None:
        fail(node, "class is not allowed in scenarios; define functions with def in code, or "
                   f"a module as class {node.name}(nn.Module)")
    methods: list[str] = []
    attributes: list[str] = []
    for stmt in node.body:
        if isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(
                stmt.value, ast.Constant) and isinstance(stmt.value.value, str)):
            continue
        if not isinstance(stmt, ast.FunctionDef):
            fail(stmt, f"class {node.name}: a class body may only hold a docstring and methods "
                       "(def); set attributes in __init__ with self.NAME = ...")
        _check_method(fail, node.name, stmt)
        if stmt.name in methods:
            fail(stmt, f"class {node.name}: method '{stmt.name}' is defined twice")
        methods.append(stmt.name)
        for attr in _self_stores(stmt):
            if attr not in attributes:
                attributes.append(attr)
    return ClassInfo(name=node.name, base=base, methods=tuple(methods),
                     attributes=tuple(attributes), line=node.lineno)


def _base(node: ast.ClassDef, known: dict[str, ClassInfo]) -> str | None:
    if len(node.bases) != 1:
        return None
    path = dotted(node.bases[0])
    if path in _BASES:
        return "nn.Module"
    if path is not None and len(path) == 1 and path[0] in known:
        return path[0]
    return None


def _check_method(fail: Fail, cls: str, node: ast.FunctionDef) -> None:
    if node.name.startswith("__") and node.name not in lang_nn.ALLOWED_DUNDERS:
        fail(node, f"class {cls}: dunder method '{node.name}' is not allowed; the only dunder "
                   "method is __init__")
    if not node.name.startswith("__"):
        check_declared_name(fail, node, node.name, "a method")
    if node.decorator_list:
        fail(node.decorator_list[0], "decorators are not allowed in scenarios")
    if not node.args.args:
        fail(node, f"class {cls}: method '{node.name}' needs self as its first parameter")


def _self_stores(method: ast.FunctionDef) -> list[str]:
    """Attribute names assigned as ``self.NAME = ...`` directly in ``method``'s body."""
    self_name = method.args.args[0].arg
    out: list[str] = []
    for node in ast.walk(method):
        if isinstance(node, (ast.Assign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if (isinstance(target, ast.Attribute) and self_attribute_target(target, self_name)
                        and target.attr not in out):
                    out.append(target.attr)
    return out


def self_attribute_target(node: ast.AST, self_name: str | None) -> bool:
    """Whether ``node`` is ``self.NAME`` for the method's own ``self``."""
    return (self_name is not None and isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name) and node.value.id == self_name)


def check_declared_name(fail: Fail, node: ast.AST, name: str, what: str) -> None:
    """A class, method or ``self.`` attribute name: not private, not reserved, not internal."""
    if name.startswith("_dv") or name.startswith("__"):
        fail(node, f"name '{name}' is reserved: names starting with '__' or '_dv' are not "
                   "allowed")
    if name in lang_nn.PYTHON_INTERNALS:
        fail(node, f"'{name}' cannot be the name of {what}: it is the name of a Python "
                   "internal")
    if name in lang.RESERVED_NAMES or name in lang.FORBIDDEN_NAMES \
            or name in lang_nn.PREDEFINED:
        fail(node, f"'{name}' cannot be the name of {what}: "
                   f"{reserved_reason(name) or 'it is a reserved name'}")


def declared_names(classes: Iterable[ClassInfo]) -> frozenset[str]:
    """Every method and ``self.`` attribute name the classes declare."""
    out: set[str] = set()
    for info in classes:
        out.update(info.methods)
        out.update(info.attributes)
    return frozenset(out)


def is_super_init(node: ast.expr, cls: str, self_name: str) -> bool:
    """Whether ``node`` is ``super().__init__(...)`` or ``super(cls, self).__init__(...)``."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "__init__"):
        return False
    inner = node.func.value
    if not (isinstance(inner, ast.Call) and isinstance(inner.func, ast.Name)
            and inner.func.id == "super" and not inner.keywords):
        return False
    if not inner.args:
        return True
    return (len(inner.args) == 2 and isinstance(inner.args[0], ast.Name)
            and inner.args[0].id == cls and isinstance(inner.args[1], ast.Name)
            and inner.args[1].id == self_name)
