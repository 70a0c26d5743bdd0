"""Counts and their nouns agree everywhere (``1 message``, ``2 messages``): one helper,
``distviz.words.plural``, and no module writes its own plural."""

from __future__ import annotations

import re
from pathlib import Path

import replay_fixtures as F
from builders.agreement import _real_from_replay
from conftest import ROOT
from rich.console import Console

from distviz.judge.verdict import judge
from distviz.render.tree import render_graph, render_summary
from distviz.replay import replay
from distviz.trace import Trace
from distviz.words import duration, error_line, first_line, plural, word_for


def test_plural_and_word_for() -> None:
    assert plural(1, "message") == "1 message"
    assert plural(0, "message") == "0 messages"
    assert plural(2, "pass", "passes") == "2 passes"
    assert plural(1, "leaf", "leaves") == "1 leaf"
    assert plural(12000, "node", grouped=True) == "12,000 nodes"
    assert word_for(1, "waits", "wait") == "waits" and word_for(3, "output") == "outputs"


def one_of_each() -> Trace:
    """One worker sends one gradient message: ``loss = rpc_sync("worker1", f).sum()`` where
    ``f`` uses the parameter ``w`` of worker1, with one backward pass.

    ::

        worker0: SumBackward0#1 -> RecvRpcBackward#0 (msg 1:0)
        worker1: SendRpcBackward#1 (msg 1:0) -> AccumulateGrad(w)
    """
    b = F.TraceBuilder(2)
    w = b.acc(1, "w")
    b.send(1, F.M(1, 0), [w], seq=1)
    recv = b.recv(0, F.M(1, 0), seq=0)
    loss = b.op(0, "SumBackward0", 1, [recv])
    b.backward([loss], root_vars=["loss"])
    return b.build()


def test_one_message_one_pass_one_leaf_are_singular() -> None:
    t = one_of_each()
    rp = replay(t)
    assert rp.outcome == "completed"
    assert rp.summary().startswith("FAST replay of 1 pass on 2 workers completes in ")
    assert rp.summary().endswith(" node runs, 1 gradient message).")
    t.real = _real_from_replay(t)
    assert judge(t, rp).text == "replay matches PyTorch on all 2 workers (4 nodes, 1 message)"
    console = Console(width=200, record=True, color_system=None)
    console.print(render_summary(t))
    console.print(render_graph(t))
    text = console.export_text()
    assert "4 nodes on 2 workers · initiator worker0 · context 1 (id 0) · 1 backward pass" in text
    assert "worker1 (2 nodes)" in text
    log = "\n".join(ev.text for ev in rp.events)
    assert "its 1 send (message 1:0): 1 node to wait for, 1 task outstanding" in log
    assert not re.search(r"\b1 (messages|nodes|sends|tasks|passes|steps|leaves)\b",
                         text + log + rp.summary())


def test_no_module_writes_its_own_plural() -> None:
    # {'s' if n != 1 else ''}, {'es' if ...}, "acknowledgement(s)"
    ad_hoc = re.compile(r"""['"](e?s)['"] if |[a-z]\(s\)(?!\s*for\b)["' ]""")
    found = [f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
             for path in sorted((ROOT / "distviz").rglob("*.py"))
             for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if ad_hoc.search(line) and path.name != "words.py"]
    assert not found, "use distviz.words.plural:\n" + "\n".join(found)


def test_one_worker_reads_naturally(tmp_path: Path) -> None:
    b = F.TraceBuilder(1)
    leaf = b.acc(0, "x")
    loss = b.op(0, "SumBackward0", 0, [leaf])
    b.backward([loss], root_vars=["loss"])
    t = b.build()
    t.real = _real_from_replay(t)
    assert judge(t, replay(t)).text == ("replay matches PyTorch on its one worker (2 nodes, "
                                          "0 messages)")


def test_check_counts_workers_and_backward_calls() -> None:
    from typer.testing import CliRunner

    from distviz.cli import app
    runner = CliRunner()
    out = runner.invoke(app, ["check", "design_note"]).output
    assert out.strip() == "design_note: ok (design-note: 2 workers, 1 backward pass)"
    out = runner.invoke(app, ["check", "rnn_tutorial"]).output  # main calls backward itself
    assert out.strip() == ("rnn_tutorial: ok (rnn-tutorial: 2 workers, 1 main calling "
                           "dist_autograd.backward)")


def test_an_error_is_told_by_its_first_line_without_pytorchs_source_location() -> None:
    assert first_line(ValueError("\n  a bad batch \nmore")) == "a bad batch"
    assert first_line(ValueError("")) == "ValueError" and first_line("") == ""
    assert error_line(RuntimeError("")) == "RuntimeError"
    assert error_line(RuntimeError("worker1 is gone Exception raised from rpc.cpp:12")) == \
        "worker1 is gone"


def test_a_duration_is_written_to_three_digits_in_ms_under_a_second() -> None:
    assert duration(0.0029) == "2.9 ms"
    assert duration(0.12345) == "123 ms"
    assert duration(1.25) == "1.25 s"
    assert duration(None) == "?"
