"""Names that lead to the code: every class name is defined once in distviz/ (a reader who
meets ``ReplayEvent`` or ``WatchEntry`` finds one class), and a function has one address (no
module hands out another module's function under its own name, but a package's ``__init__``,
which is its public face), and no two modules share a file name (no two ``model.py``).
Pure: every module is read with ``ast``, never imported."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "distviz"


def _modules() -> dict[str, ast.Module]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = ast.parse(path.read_text(encoding="utf-8"))
    return out


MODULES = _modules()


def _top_level(tree: ast.Module) -> list[ast.stmt]:
    """The module's statements, those under a top-level ``if``/``try`` included."""
    out: list[ast.stmt] = []
    todo: list[ast.stmt] = list(tree.body)
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, (ast.If, ast.Try)):
            todo.extend([*node.body, *node.orelse, *getattr(node, "finalbody", [])])
    return out


def class_definitions(modules: dict[str, ast.Module]) -> dict[str, list[str]]:
    """Each class name and the modules that define a class of that name."""
    found: dict[str, list[str]] = defaultdict(list)
    for name, tree in modules.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                found[node.name].append(name)
    return found


def test_every_class_name_is_defined_once() -> None:
    twice = {k: v for k, v in class_definitions(MODULES).items() if len(v) > 1}
    assert twice == {}


def test_the_class_check_sees_a_name_defined_twice() -> None:
    modules = {"a": ast.parse("class Event:\n    pass"),
               "b": ast.parse("def f():\n    class Event:\n        pass")}
    assert class_definitions(modules) == {"Event": ["a", "b"]}


def _functions(tree: ast.Module) -> set[str]:
    return {n.name for n in _top_level(tree) if isinstance(n, (ast.FunctionDef,
                                                               ast.AsyncFunctionDef))}


def re_exports(modules: dict[str, ast.Module]) -> list[str]:
    """``module: name from source`` for each function a module hands out from another distviz
    module: lists in its ``__all__`` or imports as itself (``import f as f``). A package's
    ``__init__`` may hand out its own modules' functions (it is their package's face), never
    one from outside the package."""
    functions = {m: _functions(t) for m, t in modules.items()}
    packages = {m for m in modules if (PACKAGE.parent / m.replace(".", "/")).is_dir()}
    out = []
    for module, tree in modules.items():
        listed: set[str] = set()
        for node in _top_level(tree):
            if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__"
                                                    for t in node.targets):
                listed = {e.value for e in getattr(node.value, "elts", [])
                          if isinstance(e, ast.Constant)}
        for node in _top_level(tree):
            if not (isinstance(node, ast.ImportFrom) and node.module in functions):
                continue
            if module in packages and node.module.startswith(f"{module}."):
                continue
            for alias in node.names:
                bound = alias.asname or alias.name
                if alias.name in functions[node.module] and (bound in listed
                                                             or alias.asname == alias.name):
                    out.append(f"{module}: {bound} from {node.module}")
    return sorted(out)


#: Re-exports that are documented public API (``docs/trace-format.md``: ``Trace.save`` and
#: ``distviz.trace.write_atomic``); ``distviz.files`` is a leaf so that writers need not load
#: the trace model.
PUBLIC = {"distviz.trace: write_atomic from distviz.files"}


def test_no_module_hands_out_another_modules_function() -> None:
    assert sorted(set(re_exports(MODULES)) - PUBLIC) == []
    assert PUBLIC <= set(re_exports(MODULES)), "a public re-export went: drop it from PUBLIC"


def test_the_address_check_sees_a_re_export() -> None:
    modules = {"distviz.frames": ast.parse("def is_own(path):\n    return True"),
               "distviz.callsites.x": ast.parse("from distviz.frames import is_own as is_own\n"
                                                "from distviz.frames import is_own as _own\n"),
               "distviz.other": ast.parse("from distviz.frames import is_own\n"
                                          "__all__ = ['is_own']"),
               "distviz.used": ast.parse("from distviz.frames import is_own\n")}
    assert re_exports(modules) == ["distviz.callsites.x: is_own from distviz.frames",
                                   "distviz.other: is_own from distviz.frames"]


#: File names that several packages may share, and why: a package's face and a package's
#: ``python -m`` entry are not modules a reader looks for by name.
SHARED_FILE_NAMES = {"__init__.py", "__main__.py"}


def shared_file_names(paths: list[Path]) -> dict[str, list[str]]:
    """Each module file name that more than one module in ``paths`` has, with their paths."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in paths:
        if path.name not in SHARED_FILE_NAMES:
            found[path.name].append(path.as_posix())
    return {name: sorted(where) for name, where in found.items() if len(where) > 1}


def test_no_two_modules_share_a_file_name() -> None:
    """A reader who knows the feature guesses the file: no two ``model.py`` or ``training.py``."""
    paths = [p.relative_to(ROOT) for p in sorted(PACKAGE.rglob("*.py"))
             if "__pycache__" not in p.parts]
    assert shared_file_names(paths) == {}


def test_the_file_name_check_sees_a_name_twice() -> None:
    paths = [Path("distviz/trace/model.py"), Path("distviz/views/model.py"),
             Path("distviz/trace/__init__.py"), Path("distviz/views/__init__.py")]
    assert shared_file_names(paths) == {"model.py": ["distviz/trace/model.py",
                                                     "distviz/views/model.py"]}
