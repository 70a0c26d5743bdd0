"""No test module imports another: what several share lives in tests/builders/ (or conftest.py
for fixtures), so moving or splitting a test file never breaks another."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parents[2]
while TESTS.name != "tests":
    TESTS = TESTS.parent

IMPORT = re.compile(r"^\s*(from\s+(tests\.)?test_\w*\s+import|import\s+(tests\.)?test_\w*)", re.M)


def test_no_test_module_imports_another() -> None:
    found = [f"{path.relative_to(TESTS)}: {m.group(0).strip()}"
             for path in sorted(TESTS.rglob("*.py")) if "thirdparty" not in path.parts
             for m in IMPORT.finditer(path.read_text())]
    assert not found, ("test modules import test modules (move what they share into "
                       "tests/builders/): " + "; ".join(found))


def test_the_check_sees_an_import() -> None:
    assert IMPORT.search("from test_render_dot import design_trace")
    assert IMPORT.search("    from tests.test_trace_cmd import ROOT")
    assert IMPORT.search("import test_verdict")
    assert not IMPORT.search("from builders.graphs import design_trace")
