"""The validated scenario as values: ``Scenario``, its ``Program``s and ``PassSpec``s (pure)."""

from __future__ import annotations

import ast
import types
from dataclasses import dataclass, field

__all__ = ["ClassInfo", "PassSpec", "Program", "Scenario"]


@dataclass(frozen=True)
class ClassInfo:
    """A class defined in ``code`` (``class Name(nn.Module):``).

    ``base`` is ``nn.Module`` or the name of a class defined before it; ``methods`` and
    ``attributes`` are the names its body defines (``def forward``) and its methods assign
    (``self.encoder = ...``), in order; ``line`` is its line in the YAML file.
    """

    name: str
    base: str
    methods: tuple[str, ...]
    attributes: tuple[str, ...]
    line: int


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
    ``functions`` lists the names ``def``-ined in ``code``; ``classes`` the classes it defines.

    A scenario has one of two forms. With a ``backward:`` key (``passes``), ``main`` runs on
    the initiator inside a ``dist_autograd.context()`` that distviz opens, and distviz runs the
    passes after recording. Without one (``training``), every program in ``mains`` (worker ->
    its ``main``; the top-level ``main`` belongs to the first worker) opens its own contexts
    (``with dist_autograd.context() as context_id:``) and calls ``dist_autograd.backward``
    itself; several workers may have a ``main`` (trainers). ``initiator`` is then the first
    trainer and ``main`` its program.

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
    training: bool = False
    mains: dict[str, Program] = field(default_factory=dict)
    classes: dict[str, ClassInfo] = field(default_factory=dict)

    @property
    def trainers(self) -> list[str]:
        """The workers that run a ``main``, in worker order (the initiator alone in the
        ``backward:`` form)."""
        if not self.training:
            return [self.initiator]
        return [w for w in self.workers if w in self.mains]
