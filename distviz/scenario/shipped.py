"""The scenarios shipped with distviz, found by name from any folder (pure).

Each file exists once, in the repository's top-level ``scenarios/`` folder. ``pyproject.toml``
maps the data package ``distviz.scenarios`` onto that folder, so a wheel (and an sdist built
into one) installs the files as ``distviz/scenarios/*.yaml``; a checkout or an editable install
reads them where they are. ``distviz run design_note`` and ``distviz scenarios`` work in all
three.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from distviz.errors import ScenarioError

SUFFIX = ".yaml"


def scenario_dir() -> Path:
    """Return the folder of the shipped scenarios: ``distviz/scenarios`` in an installed wheel,
    the top-level ``scenarios/`` beside the package in a checkout or an editable install."""
    package = Path(__file__).resolve().parent.parent
    installed = package / "scenarios"
    return installed if installed.is_dir() else package.parent / "scenarios"


def shipped_scenarios() -> dict[str, Path]:
    """Return ``{name: path}`` of every shipped scenario, sorted by name (the file name without
    ``.yaml``: ``design_note``); empty when the folder is missing."""
    folder = scenario_dir()
    if not folder.is_dir():
        return {}
    return {p.name[:-len(SUFFIX)]: p for p in sorted(folder.glob(f"*{SUFFIX}"))}


def resolve_scenario(arg: str) -> Path:
    """Return the scenario file that a ``run``/``check`` argument names.

    An existing file wins, and so does anything with a ``/`` in it (a missing path is left to
    the scenario loader to report); otherwise ``arg`` is the name of a shipped scenario, with or
    without ``.yaml``, ``-`` and ``_`` alike (``design_note``, ``design-note``). Raises
    ``ScenarioError`` (exit code 2, one line, with the close matches) when it is neither, and
    for a missing path whose file name is a shipped scenario (saying how to run that one).
    """
    path = Path(arg)
    if path.exists() and not path.is_dir():
        return path
    names = shipped_scenarios()
    if "/" in arg:
        stem = path.name[:-len(SUFFIX)] if path.name.endswith(SUFFIX) else path.name
        if not path.exists() and stem in names:
            raise ScenarioError(f"no such scenario file; to run the shipped scenario {stem!r} "
                                f"from anywhere: distviz run {stem}", path=arg)
        return path
    key = (arg[:-len(SUFFIX)] if arg.endswith(SUFFIX) else arg).replace("-", "_")
    if key in names:
        return names[key]
    if path.exists():  # a folder: the loader says it is not a scenario file
        return path
    near = difflib.get_close_matches(key, list(names), n=3, cutoff=0.6)
    hint = f" (close matches: {', '.join(near)})" if near else ""
    raise ScenarioError(f"no scenario file or shipped scenario of that name{hint}; "
                        "`distviz scenarios` lists the shipped ones", path=arg)
