"""The import graph of ``distviz``: no cycles, torch on its side.

Pure and fast: every module is read with ``ast``, never imported. An import counts wherever it
is written, at the top of a module or inside a function (an import inside a function hides a
cycle from Python until the function runs, not from this test); only imports under
``if TYPE_CHECKING:``, which never run, are left out.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "distviz"

#: Cycles that exist and are being removed; the test fails when one disappears, so that the
#: entry goes with it.
KNOWN_CYCLES: set[str] = set()

#: Modules that may import torch: the recorder, the runner's worker side, and the hooks
#: ``distviz trace`` injects into the traced program's processes.
TORCH_SIDE = ("distviz.recorder.", "distviz.runner.", "distviz.tracing.backward_api",
              "distviz.tracing.recording.assemble", "distviz.tracing.watch.busy", "distviz.tracing.callsites", "distviz.tracing.hooks.jit",
              "distviz.tracing.hooks.dispatch", "distviz.tracing.hooks.local_backward", "distviz.tracing.hooks.local_explain", "distviz.tracing.shared.naming",
              "distviz.tracing.recording.observe", "distviz.tracing.shared.process",
              "distviz.tracing.hooks.patches", "distviz.tracing.snapshot.take",
              "distviz.tracing.watch.watcher", "distviz.tracing.watch.late",
              "distviz.tracing.hooks.observe_args", "distviz.tracing.hooks.rref",
              "distviz.tracing.hooks.scripted", "distviz.tracing.hooks.optimizer",
              "distviz.tracing.hooks.applied", "distviz.tracing.hooks.cut_watch",
              "distviz.tracing.hooks.cut_rpc")
#: Runner modules the parent loads, which must never import torch (it forks the workers from
#: a fork server that imports torch once), and the version check the CLI makes before it.
TORCH_FREE_RUNNER = {"distviz.runner.supervisor", "distviz.runner.protocol",
                     "distviz.runner.torch_range"}
#: Modules whose import must not load torch, even indirectly: the CLI and the parent start in
#: a fraction of a second, and ``distviz.load`` works without torch installed.
TORCH_FREE_AT_LOAD = {"distviz", "distviz.cli", "distviz.runner.supervisor", "distviz.runner.worker",
                      # pytest loads it in every run (the pytest11 entry point)
                      "distviz.tracing.pytest_plugin"}


@dataclass(frozen=True)
class Import:
    """``source`` imports ``target`` (a distviz module or ``torch``); ``at_load``: the import
    runs when ``source`` is loaded (not inside a function)."""

    source: str
    target: str
    at_load: bool
    line: int


def _module_names() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _module_names()


def _runner_lists() -> dict[str, tuple[str, ...]]:
    """``TORCH_FREE`` and ``TORCH_FREE_AT_LOAD`` as ``distviz/runner/__init__.py`` states them
    (read, not imported)."""
    tree = ast.parse((PACKAGE / "runner" / "__init__.py").read_text(encoding="utf-8"))
    return {node.target.id: ast.literal_eval(node.value) for node in tree.body
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
            and node.value is not None}


RUNNER_LISTS = _runner_lists()


def _preloaded() -> tuple[str, ...]:
    """``distviz.tracing.hooks.inject.PRELOAD`` (read, not imported): the hooks' modules that a
    program started early imports before it runs, so before it imports torch."""
    tree = ast.parse((PACKAGE / "tracing" / "hooks" / "inject.py").read_text(encoding="utf-8"))
    (value,) = [node.value for node in tree.body if isinstance(node, ast.Assign)
                and [getattr(t, "id", None) for t in node.targets] == ["PRELOAD"]]
    return tuple(ast.literal_eval(value))


#: Runner modules that never import torch (``distviz.runner.TORCH_FREE``; a package stands for
#: every module in it): the parent, the protocol, and the version check the CLI makes.
TORCH_FREE_RUNNER = {m for m in MODULES for p in RUNNER_LISTS["TORCH_FREE"]
                     if m == p or m.startswith(f"{p}.")}
#: Modules whose import must not load torch, even indirectly: the CLI and the parent start in
#: a fraction of a second, and ``distviz.load`` works without torch installed.
TORCH_FREE_AT_LOAD = {"distviz", "distviz.cli", "distviz.__main__", "distviz.tracing.launcher.launch",
                      # pytest loads it in every run (the pytest11 entry point)
                      "distviz.tracing.pytest_plugin",
                      # the one frame walk and own-file rule (the sandbox and the verdict's
                      # words read it), the journal's fold, the capture pipeline's steps
                      "distviz.frames", "distviz.tracing.shared.fold",
                      "distviz.tracing.recording.capture",
                      *TORCH_FREE_RUNNER, *RUNNER_LISTS["TORCH_FREE_AT_LOAD"], *_preloaded()}


def _resolve(name: str) -> str | None:
    """The distviz module ``name`` loads (``torch`` for any torch module), or ``None``."""
    if name == "torch" or name.startswith("torch."):
        return "torch"
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _targets(node: ast.Import | ast.ImportFrom, module: str) -> list[str]:
    if isinstance(node, ast.Import):
        return [t for a in node.names if (t := _resolve(a.name)) is not None]
    base = node.module or ""
    if node.level:
        package = module if MODULES[module].name == "__init__.py" else module.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{base}" if base else package
    out = []
    for alias in node.names:  # ``from distviz.render import dot`` imports a submodule
        target = _resolve(f"{base}.{alias.name}") if f"{base}.{alias.name}" in MODULES \
            else _resolve(base)
        if target is not None:
            out.append(target)
    return out


def _imports(module: str) -> list[Import]:
    """Every import of a distviz module or of torch written in ``module``."""
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    out: list[Import] = []
    stack: list[tuple[ast.AST, bool]] = [(tree, True)]
    while stack:
        node, at_load = stack.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            stack.extend((child, at_load) for child in node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            out.extend(Import(module, t, at_load, node.lineno) for t in _targets(node, module)
                       if t != module)
        inner = at_load and not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                   ast.Lambda))
        stack.extend((child, inner) for child in ast.iter_child_nodes(node))
    return sorted(out, key=lambda i: (i.line, i.target))


GRAPH = {m: _imports(m) for m in MODULES}


def _edges() -> dict[str, list[str]]:
    return {m: sorted({i.target for i in GRAPH[m] if i.target in MODULES}) for m in MODULES}


def _cycles(edges: dict[str, list[str]]) -> list[list[str]]:
    """The import cycles: strongly connected components of more than one module (Tarjan's
    algorithm, iterative), each as a path that starts and ends at its first module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work: list[tuple[str, int]] = [(root, 0)]
        while work:
            node, i = work.pop()
            if i == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            if i < len(edges[node]):
                work.append((node, i + 1))
                nxt = edges[node][i]
                if nxt not in index:
                    work.append((nxt, 0))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return [_path(c, edges) for c in sorted(components)]


def _path(component: list[str], edges: dict[str, list[str]]) -> list[str]:
    """The shortest cycle through ``component``'s first module (breadth-first)."""
    start = component[0]
    came: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in edges[node]:
                if nxt == start:
                    chain = [node]
                    while chain[-1] != start:
                        chain.append(came[chain[-1]])
                    return [*reversed(chain), start]
                if nxt in component and nxt not in came:
                    came[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle through {start}")  # pragma: no cover


def _pretty(path: list[str]) -> str:
    return " -> ".join(path)


def test_the_graph_is_read_from_every_module() -> None:
    # the walk sees imports inside functions and relative imports
    assert "distviz.scenario.loader" in {i.target for i in GRAPH["distviz.scenario"]}
    assert any(i.target == "torch" and not i.at_load for i in GRAPH["distviz.runner.worker.main"])
    assert any(i.target == "distviz.recorder.record_api" and not i.at_load for i in GRAPH["distviz"])


def test_the_import_graph_has_no_cycle() -> None:
    cycles = {_pretty(c) for c in _cycles(_edges())}
    unexpected = sorted(cycles - KNOWN_CYCLES)
    assert not unexpected, ("import cycles (imports inside functions count):\n"
                            + "\n".join(unexpected))
    gone = sorted(KNOWN_CYCLES - cycles)
    assert not gone, f"these cycles are gone: remove them from KNOWN_CYCLES: {gone}"


def test_the_cycle_finder_names_each_cycle_once_shortest_first() -> None:
    edges = {"a": ["b"], "b": ["c", "d"], "c": ["a"], "d": ["b"], "e": ["e", "a"]}
    assert _cycles(edges) == [["a", "b", "c", "a"]]
    assert _cycles({"x": ["y"], "y": []}) == []


def test_only_the_recorder_and_the_runner_import_torch() -> None:
    importers = {m for m, imports in GRAPH.items() if any(i.target == "torch" for i in imports)}
    allowed = {m for m in MODULES if m.startswith(TORCH_SIDE)} - TORCH_FREE_RUNNER
    assert importers <= allowed, sorted(importers - allowed)
    assert "distviz.recorder.piece" in importers


def test_the_preloaded_hooks_are_real_modules() -> None:
    assert _preloaded() and [m for m in _preloaded() if m not in MODULES] == []


def test_the_runners_torch_free_list_names_real_modules() -> None:
    listed = [*RUNNER_LISTS["TORCH_FREE"], *RUNNER_LISTS["TORCH_FREE_AT_LOAD"]]
    assert [m for m in listed if m not in MODULES] == []
    assert {"distviz.runner.supervisor.run", "distviz.runner.protocol",
            "distviz.runner.supervisor.torch_range"} <= TORCH_FREE_RUNNER


def test_loading_the_cli_or_the_parent_never_loads_torch() -> None:
    for start in sorted(TORCH_FREE_AT_LOAD):
        seen = {start: [start]}
        todo = [start]
        while todo:
            module = todo.pop()
            for imp in GRAPH[module]:
                if not imp.at_load or imp.target in seen:
                    continue
                seen[imp.target] = [*seen[module], imp.target]
                assert imp.target != "torch", (
                    f"importing {start} loads torch: {_pretty(seen[imp.target])}")
                todo.append(imp.target)


def _all_edges() -> dict[str, list[str]]:
    """The import graph with the imports under ``if TYPE_CHECKING:`` too."""
    edges: dict[str, list[str]] = {}
    for module, path in MODULES.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                targets.update(t for t in _targets(node, module) if t in MODULES and t != module)
        edges[module] = sorted(targets)
    return edges


def test_no_cycle_even_through_type_only_imports_and_no_arrow_up_into_the_cli() -> None:
    edges = _all_edges()
    assert [_pretty(c) for c in _cycles(edges)] == []
    up = {m: [t for t in ts if t.startswith("distviz.cli")] for m, ts in edges.items()
          if not m.startswith("distviz.cli") and m != "distviz.__main__"}
    assert {m: ts for m, ts in up.items() if ts} == {}


def _private_uses(module: str) -> list[str]:
    """``module``'s uses of another distviz module's private names: ``from distviz.x import _y``
    and ``x._y`` where ``x`` names a distviz module (dunder names are public)."""
    def private(name: str) -> bool:
        return name.startswith("_") and not name.endswith("__")
    tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
    aliases: dict[str, str] = {}   # local name -> the distviz module it names
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name in MODULES and a.asname:
                    aliases[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom) and node.level == 0 \
                and (node.module or "").startswith("distviz"):
            for a in node.names:
                full = f"{node.module}.{a.name}"
                if full in MODULES:
                    aliases[a.asname or a.name] = full
                elif private(a.name) and node.module in MODULES and node.module != module:
                    out.append(f"{module}:{node.lineno} imports {node.module}.{a.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                and node.value.id in aliases and private(node.attr) \
                and aliases[node.value.id] != module:
            out.append(f"{module}:{node.lineno} uses {aliases[node.value.id]}.{node.attr}")
    return out


def test_no_module_uses_another_modules_private_names() -> None:
    uses = [u for m in sorted(MODULES) for u in _private_uses(m)]
    assert uses == [], "private names used across modules:\n" + "\n".join(uses)


def _package_edges(edges: dict[str, list[str]], depth: int) -> dict[str, list[str]]:
    """The import graph between the packages (and modules) ``depth`` names deep that share a
    parent: ``distviz.runner`` stands for every module in it at depth 2, and
    ``distviz.runner.worker`` at depth 3."""
    out: dict[str, set[str]] = {}
    for module, targets in edges.items():
        parts = module.split(".")
        if len(parts) < depth:
            continue
        source = ".".join(parts[:depth])
        for target in targets:
            tparts = target.split(".")
            if len(tparts) >= depth and tparts[:depth - 1] == parts[:depth - 1]:
                dest = ".".join(tparts[:depth])
                if dest != source:
                    out.setdefault(source, set()).add(dest)
    names = set(out) | {d for ds in out.values() for d in ds}
    return {n: sorted(out.get(n, ())) for n in sorted(names)}


def test_no_two_packages_import_each_other() -> None:
    edges = _all_edges()
    deepest = max(len(m.split(".")) for m in MODULES)
    cycles = [_pretty(c) for depth in range(2, deepest)
              for c in _cycles(_package_edges(edges, depth))]
    assert cycles == [], "packages that import each other:\n" + "\n".join(cycles)


def test_the_package_graph_groups_modules_by_package() -> None:
    edges = {"distviz.a.x": ["distviz.b.y"], "distviz.b.y": ["distviz.a.z"], "distviz.a.z": [],
             "distviz.c": ["distviz.a.x"]}
    graph = _package_edges(edges, 2)
    assert graph == {"distviz.a": ["distviz.b"], "distviz.b": ["distviz.a"],
                     "distviz.c": ["distviz.a"]}
    assert _cycles(graph) == [["distviz.a", "distviz.b", "distviz.a"]]


#: The modules every side reads (values, words, errors, limits), which import no room below.
SHARED_LEAVES = ("distviz.trace", "distviz.outcome", "distviz.words", "distviz.errors",
                 "distviz.limits", "distviz.frames", "distviz.torch_errors", "distviz.cuts")
#: The replay side's rooms and the distviz packages each may import: data flows one way, from
#: the engine and its model (``replay``) to the analyses built on it (``analyses``) to the judge
#: (``judge``), whose values the renderers and commands read.
ONE_WAY = {
    "distviz.replay": SHARED_LEAVES,
    "distviz.analyses": (*SHARED_LEAVES, "distviz.replay"),
    "distviz.judge": (*SHARED_LEAVES, "distviz.replay", "distviz.analyses",
                      # the run-and-judge policy: the version, the parent's run, the scenario
                      "distviz", "distviz.runner.supervisor", "distviz.scenario"),
}


def _within(module: str, rooms: tuple[str, ...]) -> bool:
    return any(module == r or module.startswith(f"{r}.") for r in rooms)


def test_the_engine_the_analyses_and_the_judge_import_one_way() -> None:
    edges = _all_edges()
    wrong = [f"{m} imports {t}" for room, allowed in ONE_WAY.items() for m, ts in edges.items()
             if _within(m, (room,)) for t in ts
             if not _within(t, (room,)) and t not in allowed
             and not _within(t, tuple(a for a in allowed if a != "distviz"))]
    assert wrong == [], "imports against the replay side's direction:\n" + "\n".join(wrong)
    # only the policy runs workers; the rest of the judge reads traces and replays
    runs = sorted(m for m, ts in edges.items() if _within(m, ("distviz.judge",))
                  and any(_within(t, ("distviz.runner", "distviz.scenario")) for t in ts))
    assert runs == ["distviz.judge.policy"]
    # renderers read results: no picture or view runs a scenario
    drawn = [f"{m} imports {t}" for m, ts in edges.items()
             if _within(m, ("distviz.render", "distviz.views")) for t in ts
             if _within(t, ("distviz.judge.policy", "distviz.runner"))]
    assert drawn == []
    # the rule sees the imports that do exist in the allowed direction
    assert "distviz.replay.result" in edges["distviz.judge.verdict"]
    assert "distviz.analyses.timing" in edges["distviz.judge.analysis"]
    assert "distviz.replay.engine" in edges["distviz.analyses.whatif"]
