"""A hook that runs right after one module is imported (torch-free): the way distviz's hooks
reach torch (``inject``) and ``torch.distributed.optim`` (``optimizer``) only once the program
imports them."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:  # pragma: no cover
    import importlib.abc

__all__ = ["AfterImport"]


class AfterImport:
    """A meta path finder that wraps the loader of the module ``name`` so that ``then(module)``
    runs right after the module's own code, before the importer's next line (the import system
    asks only for ``find_spec``: no ``importlib.abc`` base, whose import loads
    ``importlib.resources`` and ``tempfile`` in every traced process before the program). It
    takes itself off ``sys.meta_path`` at its first use."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.done = False

    def then(self, module: ModuleType) -> None:
        """What runs once the module is loaded (each finder says)."""
        raise NotImplementedError

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.name or self.done:
            return None
        self.done = True
        try:
            sys.meta_path.remove(self)
        except ValueError:
            pass
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module: Any = getattr(loader, "exec_module", None)
        if exec_module is None:
            return spec
        then = self.then

        class _Loader:
            def create_module(self, s: Any) -> ModuleType | None:
                return loader.create_module(s)

            def exec_module(self, module: ModuleType) -> None:
                module.__loader__ = loader          # the module sees its own loader
                if module.__spec__ is not None:
                    module.__spec__.loader = loader
                exec_module(module)
                then(module)

        spec.loader = cast("importlib.abc.Loader", _Loader())
        return spec
