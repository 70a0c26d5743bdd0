"""Every view shows the same dependency counts for the same step: the HTML viewer's script
in a real Chromium (the rest is tests/pure/views/test_views_agree.py)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from builders.graphs import judged
from builders.views_agree import _pending, _replayed
from guards import HANG_GUARD_S

from distviz.render.html.page import to_html
from distviz.replay import initial_dependencies

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.browser
@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed")
@pytest.mark.parametrize(("name", "pick"), [("design_note", 2), ("two_passes", -3)])
def test_html_viewer_script_shows_the_same_counts(tmp_path: Path, name: str, pick: int) -> None:
    assert CHROMIUM is not None
    trace, r = _replayed(name, "fast")
    step = pick % len(r.events)
    page = tmp_path / "view.html"
    page.write_text(to_html(judged(trace, r)), encoding="utf-8")
    cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri() + f"#step={step}"]
    dom = subprocess.run(cmd, capture_output=True, text=True, timeout=HANG_GUARD_S, check=False).stdout
    body = re.search(r"<body([^>]*)>", dom)
    assert body, dom[:300]
    got = {k: v.replace("&quot;", '"') for k, v in re.findall(r'data-([a-z]+)="([^"]*)"',
                                                               body.group(1))}
    assert got["step"] == str(step)
    assert json.loads(got["pending"]) == _pending(r, step)
    truth = initial_dependencies(trace, r.events[step].pass_index)
    assert json.loads(got["initial"]) == {n: c for n, c in truth.items()
                                          if n in json.loads(got["initial"])}
    assert json.loads(got["initial"])
