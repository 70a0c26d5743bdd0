"""What the docs (README.md and docs/) say of distviz's Python names and shipped scenarios holds
(pure: no torch)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import distviz
from distviz.errors import RecordError
from distviz.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
DESIGN_NOTE_PAGE = ROOT / "docs" / "tutorial" / "design-note.md"


def _docs_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in PAGES)


def test_every_distviz_name_the_docs_use_exists() -> None:
    names = sorted(set(re.findall(r"`distviz\.([A-Za-z_]\w*)", _docs_text())))
    assert len(names) >= 5, f"the docs name too few distviz.X: {names}"
    missing = [n for n in names
               if n not in distviz.__all__ and importlib.util.find_spec(f"distviz.{n}") is None]
    assert missing == []


def test_record_error_is_raised_under_the_name_the_readme_gives() -> None:
    assert distviz.RecordError is RecordError


def test_the_tutorial_counts_the_shipped_hang_scenarios() -> None:
    hangs = [p.stem for p in sorted((ROOT / "scenarios").glob("*.yaml"))
             if "backward hangs" in load_scenario(p).description]
    assert len(hangs) == 3, hangs
    text = " ".join(DESIGN_NOTE_PAGE.read_text(encoding="utf-8").split())
    assert "the three classic FAST-mode hangs (an unused RPC result; one overwritten in a loop;" \
        in text
