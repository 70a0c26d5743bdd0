"""The torch releases distviz supports, checked without importing torch.

``distviz run``, ``trace`` and ``fuzz`` call ``require_torch()`` first: it reads the installed
torch's version from its package metadata (milliseconds; torch itself takes seconds to import)
and refuses, in one line, a torch outside ``limits.TORCH_OLDEST`` .. ``limits.TORCH_NEWEST``
or none at all. The pure commands (``replay``, ``export``, ``graph``, ``check``) never call it and
run without torch. ``DISTVIZ_ANY_TORCH=1`` lets a run try an unsupported release anyway. Where
releases differ in what distviz reaches inside torch, ``distviz.recorder.torch_compat`` handles it
(``tests/pure/runner/test_torch_internals.py`` checks the installed one). Never imports torch.
"""

from __future__ import annotations

import importlib.util
import os
import re
from importlib.machinery import ModuleSpec
from pathlib import Path

from distviz.errors import TorchVersionError
from distviz.limits import TORCH_ANY_ENV, TORCH_NEWEST, TORCH_OLDEST

__all__ = ["installed_torch", "range_problem", "release_of", "require_torch", "supported_range",
           "supported_requirement"]


def supported_range() -> str:
    """``2.4 to 2.15``: the supported releases, in words."""
    return f"{TORCH_OLDEST[0]}.{TORCH_OLDEST[1]} to {TORCH_NEWEST[0]}.{TORCH_NEWEST[1]}"


def supported_requirement() -> str:
    """``torch>=2.4,<2.16``: the supported releases as a pip requirement (pyproject.toml's)."""
    return (f"torch>={TORCH_OLDEST[0]}.{TORCH_OLDEST[1]},"
            f"<{TORCH_NEWEST[0]}.{TORCH_NEWEST[1] + 1}")


def release_of(version: str) -> tuple[int, int] | None:
    """``(2, 14)`` for ``2.14.1``, ``2.14.0+cpu`` or ``2.14.0a0+git1234``; ``None`` when
    ``version`` does not start with two numbers."""
    match = re.match(r"\s*(\d+)\.(\d+)", version)
    return (int(match[1]), int(match[2])) if match else None


def installed_torch() -> str | None:
    """The version of the installed torch (``2.13.0+cpu``), or ``None`` when no torch is
    installed. Reads the ``torch/version.py`` that the import system would load (a millisecond),
    else the package metadata (``importlib.metadata`` alone takes tens of milliseconds to
    import); never imports torch."""
    return _version_file(importlib.util.find_spec("torch")) or metadata_version()


_VERSION = re.compile(r"""^__version__\s*=\s*['"]([^'"]+)['"]""", re.MULTILINE)


def _version_file(spec: ModuleSpec | None) -> str | None:
    """``__version__`` as ``torch/version.py`` beside the package's ``__init__.py`` writes it."""
    if spec is None or not spec.origin:
        return None
    try:
        text = (Path(spec.origin).parent / "version.py").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    match = _VERSION.search(text)
    return match[1] if match else None


def metadata_version() -> str | None:
    """The torch distribution's version from its package metadata, or ``None``."""
    from importlib import metadata

    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def range_problem(found: str | None) -> str | None:
    """The one line that refuses torch ``found`` (a version string, ``None`` for no torch), or
    ``None`` when distviz supports it."""
    release = release_of(found) if found is not None else None
    if release is not None and TORCH_OLDEST <= release <= TORCH_NEWEST:
        return None
    install = f"pip install '{supported_requirement()}'"
    if found is None:
        return f"distviz supports torch {supported_range()}; found no torch installed: {install}"
    return (f"distviz supports torch {supported_range()}; found {found}: {install} "
            f"(or set {TORCH_ANY_ENV}=1 to try {found} anyway)")


def require_torch() -> None:
    """Check the installed torch before a command that runs it (``run``, ``trace``, ``fuzz``).

    Raises ``TorchVersionError`` (exit code 2) when torch is missing or outside the supported
    releases, unless ``DISTVIZ_ANY_TORCH=1`` asks to try that torch anyway (missing still
    raises).
    """
    found = installed_torch()
    problem = range_problem(found)
    if problem is None or (found is not None and os.environ.get(TORCH_ANY_ENV) == "1"):
        return
    raise TorchVersionError(problem)
