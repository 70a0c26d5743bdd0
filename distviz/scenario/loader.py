"""The loader: a scenario file -> a validated, instrumented ``Scenario`` (pure).

``load_scenario(path, overrides)`` reads the file (at most ``limits.MAX_FILE_BYTES``), reads
the YAML with lines (``yaml_reader``), checks the top-level keys and each section (name, seed,
params and ``--set`` overrides, workers, backward passes), parses every program, checks each
one against the scenario language (``checker``) with the names the others define, and
instruments the checked trees (``instrument``). Every problem is a ``ScenarioError``.
"""

from __future__ import annotations

import ast
import functools
import keyword
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from distviz.errors import ScenarioError
from distviz.limits import MAX_FILE_BYTES, MAX_WORKERS
from distviz.scenario import classes as class_rules
from distviz.scenario.checker import Checker
from distviz.scenario.error_text import kind, reserved_reason
from distviz.scenario.instrument import instrument
from distviz.scenario.problems import Problems
from distviz.scenario.scenario import ClassInfo, PassSpec, Program, Scenario
from distviz.scenario.yaml_reader import Y, YamlReader
from distviz.words import suggest

__all__ = ["load_scenario", "load_scenario_text"]

TOP_KEYS = ("name", "description", "workers", "seed", "params", "code", "main", "backward")
REQUIRED_KEYS = ("name", "workers", "main", "backward")
WORKER_KEYS = ("init", "main")
PASS_KEYS = ("roots", "retain_graph")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class _ScenarioLoader:
    """Raises ``ScenarioError`` for one file; reads strings and programs from YAML values."""

    def __init__(self, path: str) -> None:
        self.path = path

    def error(self, line: int | None, key: str | None, message: str) -> NoReturn:
        raise ScenarioError(message, path=self.path, line=line, key=key)

    def string(self, y: Y, key: str, *, allow_empty: bool = False) -> str:
        if not isinstance(y.value, str):
            self.error(y.line, key, f"expected a string, found {kind(y.value)}")
        if not allow_empty and not y.value.strip():
            self.error(y.line, key, "expected a non-empty string")
        return y.value

    def parse_program(self, y: Y, key: str) -> tuple[str, int, ast.Module]:
        if not isinstance(y.value, str):
            self.error(y.line, key, f"expected the program as a string (write '{key.split('.')[-1]}"
                                    f": |' and indent the lines below it), found "
                                    f"{kind(y.value)}")
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
        tree = instrument(tree)
        program = Program(source=source, first_line=first, key=key, path=self.path, tree=tree)
        try:
            program.compile()
        except SyntaxError as exc:
            self.error(exc.lineno, key, f"invalid syntax: {exc.msg}")
        except (ValueError, RecursionError, MemoryError) as exc:
            self.error(first, key, f"cannot compile the program: {exc}")
        return program


def _checked_name(loader: _ScenarioLoader, y: Y, key: str, what: str) -> str:
    if not isinstance(y.value, str):
        loader.error(y.line, key, f"{what} names must be strings, found {y.value!r} "
                                  f"({kind(y.value)})")
    name = y.value
    if not _IDENT.match(name) or keyword.iskeyword(name):
        loader.error(y.line, key, f"invalid {what} name '{name}': use letters, digits and _ "
                                  "(not starting with a digit)")
    return name


def _load_workers(loader: _ScenarioLoader, y: Y) -> tuple[list[str], dict[str, Y | None],
                                                  dict[str, Y]]:
    """Worker names, each worker's ``init`` (or ``None``) and the ``main``s workers have."""
    workers: list[str] = []
    inits: dict[str, Y | None] = {}
    mains: dict[str, Y] = {}
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
            _checked_name(loader, Y(name, line), "workers", "worker")
            workers.append(name)
            key = f"workers.{name}"
            if spec.value is None:
                inits[name] = None
                continue
            if not isinstance(spec.value, dict):
                loader.error(spec.line, key, f"expected {{init: <program>}} or nothing, found "
                                             f"{kind(spec.value)}")
            for k in spec.value:
                if k not in WORKER_KEYS:
                    loader.error(spec.key_lines[k], key, f"unknown key '{k}'"
                                                         f"{suggest(k, WORKER_KEYS)}; a worker "
                                                         "may only have 'init' and 'main'")
            init = spec.value.get("init")
            inits[name] = None if init is None or init.value is None else init
            main = spec.value.get("main")
            if main is not None and main.value is not None:
                mains[name] = main
    else:
        loader.error(y.line, "workers", "expected a list of worker names like [worker0, "
                                        "worker1] or a mapping name -> {init: ...}, found "
                                        f"{kind(y.value)}")
    if not workers:
        loader.error(y.line, "workers", "at least one worker is needed")
    if len(workers) > MAX_WORKERS:
        loader.error(y.line, "workers", f"{len(workers)} workers declared; at most "
                                        f"{MAX_WORKERS} are allowed")
    return workers, inits, mains


_PARAM_TYPES = (bool, int, float, str)


def _load_params(loader: _ScenarioLoader, y: Y | None) -> dict[str, int | float | bool | str]:
    if y is None or y.value is None:
        return {}
    if not isinstance(y.value, dict):
        loader.error(y.line, "params", f"expected a mapping name -> default value, found "
                                       f"{kind(y.value)}")
    params: dict[str, int | float | bool | str] = {}
    for name, value in y.value.items():
        line = y.key_lines[name]
        key = f"params.{name}"
        _checked_name(loader, Y(name, line), key, "param")
        reason = reserved_reason(name)
        if reason is not None:
            loader.error(line, key, f"cannot name a param '{name}': {reason}; choose another "
                                    "name")
        if not isinstance(value.value, _PARAM_TYPES):
            loader.error(value.line, key, f"a param default must be an integer, number, "
                                          f"true/false or string, found {kind(value.value)}")
        params[name] = value.value
    return params


def _apply_overrides(path: str, params: dict[str, int | float | bool | str],
                     overrides: Mapping[str, str]) -> dict[str, int | float | bool | str]:
    out = dict(params)
    for name, raw in overrides.items():
        key = f"--set {name}={raw}"
        if name not in params:
            declared = (f"params: {', '.join(params)}" if params
                        else f"{path} declares no params")
            raise ScenarioError(f"no param '{name}' in this scenario{suggest(name, params)}; "
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


def _load_backward(loader: _ScenarioLoader, y: Y, main_names: list[str]) -> list[PassSpec]:
    usage = ("expected a list of root names like [loss] or a list of passes like "
             "[{roots: [loss], retain_graph: true}, {roots: [loss]}]")
    if not isinstance(y.value, list):
        loader.error(y.line, "backward", f"{usage}, found {kind(y.value)}")
    items: list[Y] = y.value
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
                                         f"{kind(item.value)}")
        spec: dict[str, Y] = item.value
        for k in spec:
            if k not in PASS_KEYS:
                loader.error(item.key_lines[k], key, f"unknown key '{k}'"
                                                     f"{suggest(k, PASS_KEYS)}; a pass has "
                                                     "roots and retain_graph")
        if "roots" not in spec:
            loader.error(item.line, key, "missing key 'roots' (like {roots: [loss]})")
        roots_y = spec["roots"]
        if not isinstance(roots_y.value, list) or not roots_y.value:
            loader.error(roots_y.line, f"{key}.roots", f"expected a non-empty list of root "
                                                       f"names like [loss], found "
                                                       f"{kind(roots_y.value)}")
        roots = _load_roots(loader, roots_y.value, f"{key}.roots", main_names)
        retain = spec.get("retain_graph")
        if retain is not None and not isinstance(retain.value, bool):
            loader.error(retain.line, f"{key}.retain_graph", f"expected true or false, found "
                                                             f"{kind(retain.value)}")
        passes.append(PassSpec(roots=roots, retain_graph=bool(retain and retain.value),
                               line=item.line))
    return passes


def _load_roots(loader: _ScenarioLoader, items: list[Y], key: str, main_names: list[str]) -> list[str]:
    roots: list[str] = []
    for item in items:
        if not isinstance(item.value, str):
            loader.error(item.line, key, f"root names must be strings, found {kind(item.value)}")
        name = item.value
        if name not in main_names:
            loader.error(item.line, key, f"unknown root '{name}': roots must be names assigned "
                                         f"in main{suggest(name, main_names)}")
        if name in roots:
            loader.error(item.line, key, f"root '{name}' is listed twice")
        roots.append(name)
    return roots


_TRACE_HEAD = re.compile(r'\A\s*\{\s*"schema_version"\s*:|"format"\s*:\s*"distviz-trace"')


def _not_a_trace(path: str, text: str) -> None:
    """Raise ``ScenarioError`` when ``text`` is a distviz trace (JSON with ``schema_version``)
    rather than a scenario."""
    if _TRACE_HEAD.search(text[:4096]):
        raise ScenarioError(f"this is a trace, not a scenario: replay it with `distviz replay "
                            f"{path}`", path=path)


def _read_text(path: str) -> str:
    try:
        size = os.path.getsize(path)
        if size > MAX_FILE_BYTES:
            with open(path, encoding="utf-8", errors="replace") as fh:
                _not_a_trace(path, fh.read(4096))
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
    return _guarded(spath, lambda: _read_text(spath), overrides)


def load_scenario_text(text: str, path: str = "<scenario>",
                       overrides: Mapping[str, str] | None = None) -> Scenario:
    """Like ``load_scenario`` for text already in memory; ``path`` is used in messages."""
    return _guarded(path, lambda: text, overrides)


def _guarded(path: str, read: Callable[[], str],
             overrides: Mapping[str, str] | None) -> Scenario:
    """``_load`` with the interpreter's own limits turned into ``ScenarioError``s."""
    try:
        return _load(path, read(), dict(overrides or {}))
    except ScenarioError:
        raise
    except RecursionError:
        raise ScenarioError("the scenario is nested too deeply to check", path=path) from None
    except MemoryError:
        raise ScenarioError("the scenario is too large to check", path=path) from None


@dataclass
class _Parsed:
    """Every program of a scenario, parsed (``(source, first line, tree)``), not yet checked.

    ``mains`` maps each worker that runs a main to its key (``main`` for the top-level one,
    which belongs to the first worker; ``workers.NAME.main`` otherwise) and its program.
    """

    code: tuple[str, int, ast.Module] | None
    inits: dict[str, tuple[str, int, ast.Module]]
    mains: dict[str, tuple[str, tuple[str, int, ast.Module]]]


def _load(path: str, text: str, overrides: dict[str, str]) -> Scenario:
    _not_a_trace(path, text)
    loader = _ScenarioLoader(path)
    # Every part is checked even after a problem (Problems.attempt gives a stand-in value),
    # except where later problems would only follow from an earlier one.
    problems = Problems()
    top, root_line = _top_keys(loader, YamlReader(path).read(text), problems)
    name = problems.attempt(lambda: loader.string(top["name"], "name"), "")
    description = problems.attempt(lambda: _description(loader, top.get("description")), "")
    seed = problems.attempt(lambda: _load_seed(loader, top.get("seed")), 0)
    declared = problems.attempt(lambda: _load_params(loader, top.get("params")),
                                _param_names(top.get("params")))
    params = problems.attempt(lambda: _apply_overrides(path, declared, overrides), declared)
    no_workers: tuple[list[str], dict[str, Y | None], dict[str, Y]] = ([], {}, {})
    workers, init_ys, main_ys = problems.attempt(lambda: _load_workers(loader, top["workers"]),
                                                 no_workers)
    if not workers:
        problems.raise_found()
    training = "backward" not in top
    mains = _main_sources(loader, top, main_ys, workers, root_line, training)

    # Parse every program first: checking needs the functions and worker state names.
    parsed = _parse_programs(loader, top, init_ys, mains, problems)
    functions = problems.attempt(lambda: _functions(loader, parsed.code, params),
                                 _def_names(parsed.code))
    no_classes: dict[str, ClassInfo] = {}
    classes = problems.attempt(lambda: _classes(loader, parsed.code, params, functions),
                               no_classes)
    checked = _check_programs(path, parsed, params, functions, workers, classes, training,
                              problems)
    initiator = next(iter(parsed.mains))
    if training and checked.backward_calls == 0:
        problems.add(ScenarioError(
            "missing required key 'backward'; a scenario needs name, workers, main, backward "
            "(or a main that calls dist_autograd.backward(context_id, [loss]) itself)",
            path=path, line=root_line))
    no_passes: list[PassSpec] = []
    passes = no_passes if training else problems.attempt(
        lambda: _load_backward(loader, top["backward"], checked.main_names[initiator]),
        no_passes)
    problems.raise_found()

    code = loader.program(*parsed.code[:2], "code", parsed.code[2]) if parsed.code else None
    worker_init: dict[str, Program | None] = {w: None for w in workers}
    for worker, (source, first, tree) in parsed.inits.items():
        worker_init[worker] = loader.program(source, first, f"workers.{worker}.init", tree)
    programs = {w: loader.program(src, first, key, tree)
                for w, (key, (src, first, tree)) in parsed.mains.items()}
    return Scenario(path=path, name=name, description=description, workers=workers,
                    initiator=initiator, worker_init=worker_init, code=code,
                    main=programs[initiator], passes=passes, params=params, seed=seed,
                    functions=functions, raw_text=text, worker_state=checked.worker_state,
                    training=training, mains=programs if training else {}, classes=classes)


def _main_sources(loader: _ScenarioLoader, top: dict[str, Y], main_ys: dict[str, Y], workers: list[str],
                  root_line: int, training: bool) -> dict[str, tuple[str, Y]]:
    """Each worker that runs a main, in worker order, with its key and YAML value."""
    first = workers[0]
    if "main" in top and first in main_ys:
        loader.error(main_ys[first].line, f"workers.{first}.main", "the top-level main is the "
                                                                   f"main of {first}, the first "
                                                                   "worker; give only one")
    if main_ys and not training:
        worker = next(iter(main_ys))
        loader.error(main_ys[worker].line, f"workers.{worker}.main",
                     "workers have their own main only without a backward: key (each main "
                     "then calls dist_autograd.backward itself); with backward:, write one "
                     "top-level main")
    if "main" not in top and not main_ys:
        loader.error(root_line, None, f"missing required key 'main'; a scenario needs "
                                      f"{', '.join(REQUIRED_KEYS)}")
    found = {first: ("main", top["main"])} if "main" in top else {}
    found.update({w: (f"workers.{w}.main", y) for w, y in main_ys.items()})
    return {w: found[w] for w in workers if w in found}


def _description(loader: _ScenarioLoader, y: Y | None) -> str:
    if y is None or y.value is None:
        return ""
    # a folded or literal block (`description: >`) keeps a final newline; a description has none
    return loader.string(y, "description", allow_empty=True).strip()


def _param_names(y: Y | None) -> dict[str, int | float | bool | str]:
    """Stand-in params when ``params`` has a problem: the names it declares."""
    if y is None or not isinstance(y.value, dict):
        return {}
    return {name: 0 for name in y.value if isinstance(name, str)}


def _parse_programs(loader: _ScenarioLoader, top: dict[str, Y], init_ys: dict[str, Y | None],
                    mains: dict[str, tuple[str, Y]], problems: Problems) -> _Parsed:
    """Parse every program; raises every problem found so far when one does not parse (the
    others cannot be checked without its names)."""
    def parse(y: Y, key: str) -> tuple[str, int, ast.Module] | None:
        return problems.attempt(lambda: loader.parse_program(y, key), None)
    code = parse(top["code"], "code") if top.get("code") and top["code"].value is not None \
        else None
    inits = {w: parse(y, f"workers.{w}.init") for w, y in init_ys.items() if y is not None}
    parsed_mains = {w: (key, parse(y, key)) for w, (key, y) in mains.items()}
    failed = (any(v is None for _, v in parsed_mains.values())
              or any(v is None for v in inits.values())
              or (code is None and top.get("code") is not None and top["code"].value is not None))
    if failed:
        problems.raise_found()
    return _Parsed(code=code, inits={w: v for w, v in inits.items() if v is not None},
                   mains={w: (key, v) for w, (key, v) in parsed_mains.items() if v is not None})


def _def_names(code: tuple[str, int, ast.Module] | None) -> list[str]:
    """Stand-in functions when one has a problem: every name ``def``-ined in ``code``."""
    names = [s.name for s in code[2].body if isinstance(s, ast.FunctionDef)] if code else []
    return list(dict.fromkeys(names))


def _top_keys(loader: _ScenarioLoader, root: Y | None, problems: Problems) -> tuple[dict[str, Y], int]:
    """The top-level mapping and its line: only known keys, and ``name`` and ``workers``
    (``main`` and ``backward`` are checked with the workers' own mains)."""
    if root is None:
        loader.error(1, None, "the scenario file is empty; expected the keys name, workers, "
                              "main and backward")
    if not isinstance(root.value, dict):
        loader.error(root.line, None, f"a scenario is a mapping of keys (name, workers, main, "
                                      f"backward, ...), found {kind(root.value)}")
    top: dict[str, Y] = root.value
    hints = ""
    for key in top:
        if key not in TOP_KEYS:
            hint = suggest(key, TOP_KEYS)
            hints += hint
            problems.add(ScenarioError(f"unknown key '{key}'{hint}; keys: "
                                       f"{', '.join(TOP_KEYS)}", path=loader.path,
                                       line=root.key_lines[key], key=key))
    required = ("name", "workers")
    for key in required:
        if key not in top and f"'{key}'" not in hints:  # not already named as a typo's fix
            problems.add(ScenarioError(f"missing required key '{key}'; a scenario needs "
                                       f"{', '.join(REQUIRED_KEYS)}", path=loader.path,
                                       line=root.line))
    if any(key not in top for key in required):
        problems.raise_found()
    return top, root.line


def _load_seed(loader: _ScenarioLoader, y: Y | None) -> int:
    if y is None:
        return 0
    if isinstance(y.value, bool) or not isinstance(y.value, int):
        loader.error(y.line, "seed", f"expected an integer, found {kind(y.value)}")
    if not 0 <= y.value < 2**63:
        loader.error(y.line, "seed", "expected an integer between 0 and 2**63 - 1")
    return y.value


def _functions(loader: _ScenarioLoader, code: tuple[str, int, ast.Module] | None,
               params: Mapping[str, Any]) -> list[str]:
    """The names ``def``-ined at the top level of ``code``, in order."""
    functions: list[str] = []
    for stmt in code[2].body if code is not None else ():
        if isinstance(stmt, ast.FunctionDef):
            if stmt.name in functions:
                loader.error(stmt.lineno, "code", f"function '{stmt.name}' is defined twice")
            reason = reserved_reason(stmt.name)
            if reason is None and stmt.name in params:
                reason = "it is the name of a param"
            if reason is not None:
                loader.error(stmt.lineno, "code", f"cannot define a function named "
                                                  f"'{stmt.name}': {reason}; choose another "
                                                  "name")
            functions.append(stmt.name)
    return functions


def _classes(loader: _ScenarioLoader, code: tuple[str, int, ast.Module] | None,
             params: Mapping[str, Any], functions: list[str]) -> dict[str, ClassInfo]:
    """The classes of ``code``, their shape checked (``distviz.scenario.classes``)."""
    if code is None:
        return {}

    def fail(node: ast.AST, message: str) -> NoReturn:
        loader.error(getattr(node, "lineno", None), "code", message)
    return class_rules.collect_classes(fail, code[2], set(functions) | set(params))


@dataclass
class _Checked:
    """What checking every program found: the names each worker's init sets, the names each
    main assigns at its top level, and how many ``dist_autograd.backward`` calls there are."""

    worker_state: dict[str, list[str]]
    main_names: dict[str, list[str]]
    backward_calls: int


def _check_programs(path: str, parsed: _Parsed, params: dict[str, Any], functions: list[str],
                    workers: list[str], classes: dict[str, ClassInfo], training: bool,
                    problems: Problems) -> _Checked:
    """Check every program, keeping each one's problems in ``problems``.

    Order: each ``init`` (it sees params, functions and classes), then ``code`` (it also sees
    every worker's state), then each ``main`` (it sees its own worker's state).
    """
    common: dict[str, Any] = {"params": params, "functions": functions, "workers": workers,
                              "classes": classes, "training": training}
    worker_state: dict[str, list[str]] = {w: [] for w in workers}
    for worker, (_, _, tree) in parsed.inits.items():
        checker = Checker(path, f"workers.{worker}.init", "init", state=(), elsewhere={},
                          **common)
        problems.attempt(functools.partial(checker.check_module, tree), None)
        worker_state[worker] = checker.assigned
    all_state = {n for names in worker_state.values() for n in names}
    calls = 0
    if parsed.code is not None:
        code_checker = Checker(path, "code", "code", state=all_state, elsewhere={}, **common)
        problems.attempt(functools.partial(code_checker.check_module, parsed.code[2]), None)
        calls += code_checker.backward_calls
    main_names: dict[str, list[str]] = {}
    for worker, (key, (_, _, tree)) in parsed.mains.items():
        elsewhere = {n: w for w in workers if w != worker for n in worker_state[w]
                     if n not in worker_state[worker]}
        main_checker = Checker(path, key, "main", state=worker_state[worker],
                               elsewhere=elsewhere, **common)
        problems.attempt(functools.partial(main_checker.check_module, tree), None)
        main_names[worker] = main_checker.assigned
        calls += main_checker.backward_calls
    return _Checked(worker_state, main_names, calls)
