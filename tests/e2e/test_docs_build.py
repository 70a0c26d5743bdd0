"""The documentation site builds with ``mkdocs build --strict`` (as .ci/run builds it), offline,
and its generated reference comes from the code: every command's ``--help`` and every
``ExitCode``."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer.main
from guards import HANG_GUARD_S

from distviz.cli import app
from distviz.limits import ExitCode

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = list(getattr(typer.main.get_command(app), "commands", {}))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir",
                           str(out)], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return out


def _text(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


@pytest.mark.build
def test_the_cli_reference_holds_every_command_help(site: Path) -> None:
    text = _text(site / "reference" / "cli" / "index.html")
    assert len(COMMANDS) >= 10, COMMANDS
    for command in COMMANDS:
        assert f"Usage: distviz {command} [OPTIONS]" in text, command
    assert text.count("Example:") >= len(COMMANDS)


@pytest.mark.build
def test_the_exit_code_page_lists_every_exit_code(site: Path) -> None:
    text = " ".join(_text(site / "reference" / "exit-codes" / "index.html").split())
    for code in ExitCode:
        meaning = " ".join(code.meaning.replace("`", "").split())
        assert f"{int(code)} {code.name} {meaning}" in text, code


@pytest.mark.build
def test_the_site_fetches_nothing(site: Path) -> None:
    """No web fonts or scripts from elsewhere: the pages work offline."""
    remote = set()
    for page in site.rglob("*.html"):
        remote |= set(re.findall(r"""(?:src|href)=["'](https?://[^"']+\.(?:css|js|woff2?))""",
                                 page.read_text(encoding="utf-8")))
    assert not remote, sorted(remote)
    assert (site / "reference" / "python-api" / "index.html").is_file()
