"""The documentation's transcripts of ``distviz run`` on real workers hold: the tutorial's runs of
the shipped scenarios named in ``RUN`` are run for real (the CLI, in a child process) and their
output compared with the page (``...`` stands for any lines, such as the measured timings).

The transcripts of other runs (a 15,000-node pipeline, a 50-iteration training, programs under
``distviz trace``) are too slow for the suite: their command lines are checked by
``tests/pure/project/test_docs.py``.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from builders.doc_examples import ENV, mismatch, page_id, text_transcripts, transcript
from guards import HANG_GUARD_S

#: The shipped scenarios whose ``distviz run`` transcripts are run: a few seconds each.
RUN = {"design_note", "unused_result"}

TRANSCRIPTS = [(page, line, text) for page, line, text in text_transcripts("distviz run ")
               if shlex.split(text.splitlines()[0])[3] in RUN]


def test_the_tutorial_has_the_transcripts_this_module_runs() -> None:
    ran = {shlex.split(text.splitlines()[0])[3] for _, _, text in TRANSCRIPTS}
    assert ran == RUN, ran


@pytest.mark.rpc
@pytest.mark.parametrize(("page", "line", "text"), TRANSCRIPTS,
                         ids=[f"{page_id(p)}:{n}" for p, n, _ in TRANSCRIPTS])
def test_a_run_transcript_is_what_the_run_prints(page: Path, line: int, text: str,
                                                 tmp_path: Path) -> None:
    ((command, expected),) = transcript(text)
    argv = shlex.split(command)
    proc = subprocess.run([sys.executable, "-m", "distviz", *argv[1:]], cwd=tmp_path,
                          env={**os.environ, **ENV}, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=HANG_GUARD_S)
    actual = [out.rstrip() for out in proc.stdout.rstrip("\n").splitlines()]
    problem = mismatch(command, expected, actual)
    assert problem is None, f"{page_id(page)}:{line}: {problem}"
