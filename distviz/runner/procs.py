"""Starting processes from the fork server (pure: the parent imports it)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["no_main_import"]


@contextmanager
def no_main_import() -> Iterator[None]:
    """Start processes without re-importing the caller's ``__main__`` in them.

    multiprocessing normally re-runs the parent's main script in each child (``__mp_main__``);
    workers need nothing from it, and for a REPL, a notebook or ``python -`` it does not exist.
    """
    from multiprocessing import spawn
    orig = spawn.get_preparation_data

    def prep(name: str) -> dict[str, Any]:
        data = dict(orig(name))
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
        return data
    spawn.get_preparation_data = prep
    try:
        yield
    finally:
        spawn.get_preparation_data = orig
