"""The validated scenario as values: ``Scenario``, its ``Program``s and ``PassSpec``s (pure)."""

from __future__ import annotations

import ast
import types
from dataclasses import dataclass, field

__all__ = ["PassSpec", "Program", "Scenario"]


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
