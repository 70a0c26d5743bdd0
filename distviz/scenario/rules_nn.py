"""The rules for the training names (pure): ``nn``, ``optim``, ``F``, ``dist_autograd``,
``torch.nn.*``, ``torch.optim.*``, device queries, legacy constructors, ``rpc.RRef``, the
methods and attributes of modules and RRefs, and ``"...".format(...)``.

Like ``distviz.scenario.rules``, each ``check_*`` calls ``fail(node, message)`` (which raises)
when the scenario language does not allow what it is given. The tables are in
``distviz.scenario.lang_nn``.
"""

from __future__ import annotations

import ast
import re
import string

from distviz.scenario import lang, lang_nn
from distviz.scenario.error_text import short
from distviz.scenario.rules import Fail
from distviz.words import suggest

__all__ = [
    "NAMESPACE_ROOTS", "STATIC_ATTRIBUTES", "STATIC_METHODS", "check_format_call",
    "check_member", "check_namespace_path", "check_torch_extra", "is_static_member",
]

#: Names whose attributes are checked as paths (``torch.add``, ``nn.Linear``), never at run time.
NAMESPACE_ROOTS: frozenset[str] = frozenset({"torch", "rpc"}) | lang_nn.NAMESPACES

#: Methods a program may call on any value.
STATIC_METHODS: frozenset[str] = (lang.ALL_METHODS | lang_nn.MODULE_METHODS
                                  | lang_nn.RREF_METHODS | lang_nn.TRAINING_TENSOR_METHODS)

#: Attributes a program may read on any value.
STATIC_ATTRIBUTES: frozenset[str] = (lang.TENSOR_ATTRIBUTES | lang_nn.TRAINING_TENSOR_ATTRIBUTES
                                     | lang_nn.MODULE_ATTRIBUTES)

_MEMBERS: dict[str, frozenset[str]] = {
    "nn": lang_nn.NN_CLASSES | frozenset({"init", "functional"}),
    "optim": lang_nn.OPTIMIZERS,
    "F": lang.TORCH_NN_FUNCTIONAL,
    "dist_autograd": lang_nn.DIST_AUTOGRAD_FUNCS,
}


def is_static_member(attr: str) -> bool:
    """Whether ``x.attr`` is allowed on any value without a run-time check."""
    return attr in STATIC_METHODS or attr in STATIC_ATTRIBUTES


def check_namespace_path(fail: Fail, node: ast.Attribute, path: list[str], call: bool,
                         training: bool, shown: str | None = None) -> None:
    """``nn.NAME``, ``nn.init.NAME``, ``nn.functional.NAME``, ``optim.NAME``, ``F.NAME`` and
    ``dist_autograd.NAME`` (the last only in the training form). ``shown`` is how messages
    write the root (``torch.nn`` for ``torch.nn.Linear``)."""
    root = path[0]
    label = shown or root
    if root == "dist_autograd" and not training:
        fail(node, f"'dist_autograd' is not allowed in scenarios: "
                   f"{lang.FORBIDDEN_NAMES['dist_autograd']}")
    members = _MEMBERS[root]
    name = path[1]
    if name not in members:
        fail(node, f"{label}.{name} is not available in scenarios"
                   f"{suggest(name, members, label + '.{}')}")
    if root == "nn" and name in ("init", "functional"):
        inner = lang_nn.NN_INIT if name == "init" else lang.TORCH_NN_FUNCTIONAL
        if len(path) == 2:
            fail(node, f"{label}.{name} can only be used as {label}.{name}.NAME")
        if path[2] not in inner:
            fail(node, f"{label}.{name}.{path[2]} is not available in scenarios"
                       f"{suggest(path[2], inner, f'{label}.{name}.{{}}')}")
        if len(path) > 3:
            fail(node, f"{label}.{'.'.join(path[1:])} is not available in scenarios")
        return
    if len(path) > 2:
        fail(node, f"{label}.{'.'.join(path[1:])} is not available in scenarios; use "
                   f"{label}.{name} itself")
    if root == "dist_autograd":
        if name == "context":
            fail(node, "dist_autograd.context() can only be used as 'with dist_autograd."
                       "context() as context_id:'")
        if not call:
            fail(node, f"dist_autograd.{name} must be called: dist_autograd.{name}(context_id"
                       f"{', [loss]' if name == 'backward' else ''})")


def check_torch_extra(fail: Fail, node: ast.Attribute, path: list[str], call: bool) -> bool:
    """``torch.nn.NAME`` (as ``nn.NAME``), ``torch.optim.NAME``, ``torch.accelerator.NAME``,
    ``torch.cuda.is_available`` and the legacy constructors (``torch.LongTensor``).

    Returns whether ``path`` was one of them (and allowed); ``False`` leaves it to the
    tensor-level rules.
    """
    name = path[1]
    if name in lang_nn.LEGACY_CONSTRUCTORS:
        if len(path) > 2:
            fail(node, f"{'.'.join(path)} is not available in scenarios")
        return True
    if name in lang_nn.DEVICE_QUERIES and len(path) >= 3:
        allowed = lang_nn.DEVICE_QUERIES[name]
        if path[2] not in allowed or len(path) > 3:
            fail(node, f"{'.'.join(path)} is not available in scenarios (scenarios run on CPU;"
                       f" torch.{name} offers {', '.join(sorted(allowed))})")
        if not call:
            fail(node, f"{'.'.join(path)} must be called")
        return True
    if (name == "optim" and len(path) >= 3) or (name == "nn" and len(path) >= 3
                                                  and path[2] != "functional"):
        check_namespace_path(fail, node, path[1:], call, True, shown=f"torch.{name}")
        return True
    return False


def check_member(fail: Fail, node: ast.Attribute, call: bool, declared: frozenset[str]) -> None:
    """``x.NAME`` on a value: a whitelisted method or attribute, or a name the scenario's
    classes declare (checked again at run time)."""
    attr = node.attr
    if attr in lang_nn.PYTHON_INTERNALS:
        fail(node, f"attribute .{attr} is a Python internal and is not available in scenarios")
    reason = lang.FORBIDDEN_METHODS.get(attr)
    if reason is not None:
        fail(node, f"{short(node.value)}.{attr}() is not allowed in scenarios: {reason}")
    if attr in declared:
        return
    if call:
        if attr not in STATIC_METHODS and attr not in STATIC_ATTRIBUTES:
            fail(node, f"method .{attr}() is not available in scenarios"
                       f"{suggest(attr, STATIC_METHODS, '.{}()')}")
    elif attr not in STATIC_ATTRIBUTES:
        if attr in STATIC_METHODS:
            fail(node, f".{attr} must be called: write {short(node)}(...)")
        fail(node, f"attribute .{attr} is not available in scenarios"
                   f"{suggest(attr, STATIC_ATTRIBUTES, '.{}')}")


_FIELD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z|\d*\Z")


def check_format_call(fail: Fail, node: ast.Call) -> bool:
    """``"text {}".format(...)`` on a string literal with plain fields (``{}``, ``{0}``,
    ``{name}``, optional ``!r``/``!s`` and a plain spec). Returns whether ``node`` is such a
    call; refuses fields that reach attributes or items (``{0.__class__}``, ``{x[k]}``)."""
    func = node.func
    if not (isinstance(func, ast.Attribute) and func.attr == "format"
            and isinstance(func.value, ast.Constant) and isinstance(func.value.value, str)):
        return False
    try:
        fields = list(string.Formatter().parse(func.value.value))
    except ValueError as exc:
        fail(node, f"bad format string: {exc}")
    for _text, field, spec, conversion in fields:
        if field is None:
            continue
        if not _FIELD.match(field):
            fail(node, f"format field '{{{field}}}' is not allowed: fields may only be {{}}, "
                       "{0} or {name}; use an f-string for anything else")
        if conversion not in (None, "r", "s"):
            fail(node, f"format conversion '!{conversion}' is not allowed")
        if spec and ("{" in spec or re.search(r"\d{4,}", spec)):
            fail(node, f"format spec '{spec}' is not allowed (too wide or nested)")
    return True
