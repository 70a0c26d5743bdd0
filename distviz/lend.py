"""What the ``distviz`` package lends ``distviz.trace`` (pure, imports nothing).

``Trace.to_networkx`` and a trace's display in Jupyter need the replay and the renderers, which
import ``distviz.trace``; so ``distviz.trace`` imports none of them, and ``distviz/__init__.py``
(which Python runs before any ``distviz.*`` module) puts here the object that does, importing
each on first use. It lives in a module of its own so that ``import distviz`` does not load
the trace module: every process ``distviz trace`` starts imports the package at start-up.
"""

from __future__ import annotations

from typing import Any

#: ``[views]``: the one ``distviz.trace.TraceViews``, set by ``distviz/__init__.py``.
VIEWS: list[Any] = []
