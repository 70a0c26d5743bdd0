"""The one walk up a stack and the one rule for the program's own files (``distviz.frames``).
Pure: no torch."""

from __future__ import annotations

import os
import sys

from distviz import frames


def _inner() -> list[str]:
    return [f.f_code.co_name for f in frames.outwards(sys._getframe(), 3)]


def _middle() -> list[str]:
    return _inner()


def test_the_walk_goes_outwards_innermost_first_within_its_limit() -> None:
    assert _middle() == ["_inner", "_middle",
                         "test_the_walk_goes_outwards_innermost_first_within_its_limit"]
    assert list(frames.outwards(None)) == []
    whole = list(frames.outwards(sys._getframe(), None))
    assert whole[-1].f_back is None and len(whole) > 3


def test_the_programs_own_files_are_not_python_a_library_torch_or_distviz() -> None:
    assert frames.is_own(__file__)
    assert not frames.is_own(os.__file__)                     # the standard library
    assert not frames.is_own(frames.__file__)                 # distviz itself
    assert not frames.is_own("<string>")
    assert not frames.is_own("/opt/env/lib/python3.11/site-packages/fairscale/nn/x.py")
    assert not frames.is_own("/usr/lib/python3/dist-packages/numpy/core.py")


def test_the_own_frames_name_file_line_and_function_and_show_as_a_site() -> None:
    (here,) = frames.own_frames(sys._getframe(), 1)
    assert here[0] == os.path.abspath(__file__)
    assert here[2] == "test_the_own_frames_name_file_line_and_function_and_show_as_a_site"
    site = frames.site_text([here])
    assert site is not None and site.endswith(
        f"test_frames.py:{here[1]} in test_the_own_frames_name_file_line_and_function_and_show_as_a_site")
    assert frames.site_text([]) is None


def test_a_site_reads_back_into_its_frames() -> None:
    shown = [("rnn.py", 19, "_remote_method"), ("/abs/main.py", 55, "_run_trainer")]
    text = frames.site_text([(os.path.abspath(p) if p == "rnn.py" else p, ln, fn)
                             for p, ln, fn in shown])
    assert frames.site_frames(text) == shown
    assert frames.site_frames(None) == []
    assert frames.site_frames("not a frame <- a.py:3 in f") == [("a.py", 3, "f")]
    assert frames.shown_path("rnn.py") == os.path.abspath("rnn.py")

