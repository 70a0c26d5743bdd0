"""Recordings of several contexts in a real Chromium: the context picker (the rest is
tests/pure/trace/test_recording.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders.recording import _html
from guards import HANG_GUARD_S


def _chromium_dom(tmp_path: Path, url: str) -> str:
    import shutil
    import subprocess
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        pytest.skip("chromium not installed")
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", url]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=HANG_GUARD_S, check=False).stdout


@pytest.mark.browser
def test_the_context_picker_shows_the_chosen_context_to_its_last_event(tmp_path: Path) -> None:
    import html as html_mod
    import re
    out, rec = _html(tmp_path)
    dom = _chromium_dom(tmp_path, out.as_uri() + "?ctx=2#keys=G")
    body = dict(re.findall(r'data-([a-z-]+)="([^"]*)"', re.search(r"<body([^>]*)>", dom)[1]))
    assert body["context"] == "2"
    assert body["action"] == "optimizer"   # the iteration's events end the log
    assert "updates 1 parameter on worker1" in html_mod.unescape(body["text"])
    assert 'id="workers"' in dom and "worker2" in dom   # context 2 is nested(): 3 workers
