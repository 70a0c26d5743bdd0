"""Each command makes one analysis (``distviz.judge.analysis``) and hands it to every renderer:
one indexed graph, one timing analysis of the real run, whatever it writes, and the replay
(twice for this trace: the verdict replays again with the observed arrival order of gradient
messages when FIFO order guessed it wrong, on the same graph).

The counts come from wrapping the real functions (nothing is replaced): ``Replay`` objects made,
``IndexedGraph`` objects built, and the real run's timelines measured (the first step of
``timing.analyze``)."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT
from typer.testing import CliRunner

from distviz.analyses import timing as timing_mod
from distviz.cli import app
from distviz.replay import graph as graph_mod
from distviz.replay import result as result_mod

PIPELINE = ROOT / "tests" / "traces" / "pipeline.json"
DOT = shutil.which("dot")


@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How many replays, indexed graphs and timing analyses were made since the test began."""
    counts: Counter[str] = Counter()

    def counted(name: str, cls: Any) -> None:
        real_init = cls.__init__

        def init(self: Any, *args: Any, **kwargs: Any) -> None:
            counts[name] += 1
            real_init(self, *args, **kwargs)
        monkeypatch.setattr(cls, "__init__", init)

    counted("replay", result_mod.Replay)
    counted("graph", graph_mod.IndexedGraph)
    real_timelines = timing_mod.measured_timelines

    def timelines(trace: Any) -> Any:
        counts["timing"] += 1
        return real_timelines(trace)
    monkeypatch.setattr(timing_mod, "measured_timelines", timelines)
    return counts


def _once(made: Counter[str]) -> None:
    assert made == Counter(replay=2, graph=1, timing=1), made


def test_the_recorded_trace_is_replayed_again_in_its_arrival_order() -> None:
    """Why the counts say two replays: the verdict on this trace needs the second one."""
    from distviz.judge.analysis import analysis
    from distviz.trace import load
    assert analysis(load(PIPELINE)).agreement.arrival_differs


def test_the_recorded_trace_has_a_timed_real_run() -> None:
    from distviz.trace import load
    assert timing_mod.analyze(load(PIPELINE)) is not None   # so the timing counts are meaningful


@pytest.mark.parametrize(("fmt", "more"), [("html", []), ("perfetto", []), ("dot", []),
                                           ("dot", ["--view", "summary"])])
def test_export_makes_one_analysis(tmp_path: Path, made: Counter[str], fmt: str,
                                   more: list[str]) -> None:
    out = tmp_path / f"out.{fmt}"
    result = CliRunner().invoke(app, ["export", str(PIPELINE), "--format", fmt, "-o", str(out),
                                      *more])
    assert result.exit_code == 0, result.output
    assert out.stat().st_size > 0
    _once(made)


def test_replay_makes_one_analysis(made: Counter[str]) -> None:
    result = CliRunner().invoke(app, ["replay", str(PIPELINE)])
    assert result.exit_code == 0, result.output
    assert "critical path" in result.output   # the timing was shown, from the one analysis
    _once(made)


@pytest.mark.skipif(DOT is None, reason="Graphviz dot not installed")
def test_a_finished_run_writing_every_format_makes_one_analysis(tmp_path: Path,
                                                               made: Counter[str]) -> None:
    """``distviz run --html --perfetto --svg``: after the workers are gone, the saved trace is
    replayed, judged and timed once for the report and all three files."""
    from distviz.cli.options import View
    from distviz.cli.running import show_run
    from distviz.trace import load
    from distviz.trace.contexts_file import Recording
    trace = load(PIPELINE)
    made.clear()
    pictures: dict[str, Path | None] = {fmt: tmp_path / f"run.{fmt}"
                                        for fmt in ("html", "perfetto", "svg")}
    view = View(as_json=False, step=False, log=None, worker=None, start=None, end=None,
                pictures=pictures)
    code = show_run(Recording.single(trace), "fast", tmp_path / "run.trace.json", view)
    assert code == 0
    assert all(p is not None and p.stat().st_size > 0 for p in pictures.values())
    _once(made)


def test_every_picture_of_one_analysis_reuses_its_timing(tmp_path: Path,
                                                          made: Counter[str]) -> None:
    """The worker summary shows each worker's busy time: from the analysis, not analysed
    again, alongside the HTML viewer and the Perfetto export."""
    from distviz.cli.output import write_pictures
    from distviz.judge.analysis import analysis
    from distviz.trace import load
    from distviz.views import ViewSpec
    found = analysis(load(PIPELINE))
    targets: dict[str, Path | None] = {"dot": tmp_path / "s.dot", "html": tmp_path / "s.html",
                                       "perfetto": tmp_path / "s.json"}
    write_pictures(found, targets, spec=ViewSpec(detail="summary"))
    assert "real run: busy" in (tmp_path / "s.dot").read_text(encoding="utf-8")
    _once(made)


def test_a_run_replays_the_recorded_graph_once(tmp_path: Path, made: Counter[str]) -> None:
    """``distviz run`` replays the recorded graph before the real backward, to decide whether
    to run it; the report and the files use that replay (the verdict's replay in the observed
    arrival order is the second)."""
    from distviz.cli.options import View
    from distviz.cli.running import show_run
    from distviz.judge.policy import Decided
    from distviz.judge.policy import backward_policy as decider
    from distviz.trace import load
    from distviz.trace.contexts_file import Recording
    trace = load(PIPELINE)
    made.clear()
    decided = Decided()
    assert decider(False, decided)(trace) == (True, None)
    view = View(as_json=True, step=False, log=None, worker=None, start=None, end=None,
                pictures={"html": tmp_path / "run.html", "perfetto": tmp_path / "run.json"})
    assert show_run(Recording.single(trace), "fast", tmp_path / "run.trace.json", view,
                    made=decided.replay) == 0
    _once(made)
    made.clear()   # a SMART report cannot use the FAST replay
    show_run(Recording.single(trace), "smart", tmp_path / "smart.trace.json", view,
             made=decided.replay)
    assert made["replay"] >= 1


def test_a_predicted_hang_skips_the_real_backward_with_its_replay_kept() -> None:
    from replay_fixtures import unused_rpc_result

    from distviz.judge.policy import Decided
    from distviz.judge.policy import backward_policy as decider
    decided = Decided()
    run, reason = decider(False, decided)(unused_rpc_result())
    assert not run and reason is not None and "--confirm-hang" in reason
    assert decided.replay is not None and decided.replay.outcome == "hang"
    assert decider(True, Decided())(unused_rpc_result()) == (True, None)
