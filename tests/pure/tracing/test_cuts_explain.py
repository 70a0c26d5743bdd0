"""Which cut caused each missing gradient (``distviz.cuts.explain``), how a run's
cuts answer ``distviz why`` (``distviz.analyses.cut_answers``), the hang notes of the summary,
and the program's lines read from its source (``distviz.tracing.hooks.cut_sites``): pure."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from distviz.analyses.cut_answers import RunCuts
from distviz.cuts import Cut, CutKind, Explained, Kept, Missing, RpcRef, cuts_json, explain
from distviz.tracing.hooks import cut_sites
from distviz.tracing.launcher.run_summary import Entry, hang_cut_notes
from distviz.tracing.shared import journal

SCALE = RpcRef("rpc_sync", "scale on an RRef", "ps", "train.py:113 in step <- train.py:9 in run")


def _cut(kind: CutKind, worker: str = "ps", leaves: tuple[str, ...] = (), **kw: object) -> Cut:
    return Cut(kind=kind, worker=worker, site=kw.pop("site", "model.py:31 in embed"),  # type: ignore[arg-type]
               leaves=leaves, **kw)  # type: ignore[arg-type]


def test_a_parameter_gets_the_cut_of_its_own_worker_whose_tensor_came_from_it() -> None:
    no_grad = _cut(CutKind.NO_GRAD, leaves=("ps.emb.weight",))
    other = _cut(CutKind.DETACH, leaves=("ps.fc.weight",), site="model.py:40 in forward")
    found = explain([Missing("ps.emb.weight", "ps")], [other, no_grad])
    assert found == [Explained(("ps.emb.weight",), "ps", no_grad)]
    text = found[0].text()
    assert text.startswith("ps.emb.weight got no gradient: it was used under torch.no_grad(), "
                           "entered at model.py:31 in embed")
    assert text.endswith("fix: remove the torch.no_grad() block at model.py:31 around the "
                         "computation that must train (keep it for evaluation only)")


def test_never_used_comes_after_a_parameters_own_cuts_and_a_call_outside_the_context() -> None:
    never = _cut(CutKind.NEVER_USED, leaves=("ps.fc.weight",), site="model.py:12")
    frozen = _cut(CutKind.REQUIRES_GRAD_FALSE, leaves=("ps.fc.weight",), site="model.py:14")
    assert explain([Missing("ps.fc.weight", "ps")], [never, frozen])[0].cut == frozen
    assert explain([Missing("ps.fc.weight", "ps")], [never])[0].cut == never
    # the owner saw no use of it in a context: the call was made before the context
    outside = _cut(CutKind.OUTSIDE_CONTEXT, worker="trainer", behind=(SCALE,))
    assert explain([Missing("ps.fc.weight", "ps")], [never, outside])[0].cut == outside
    # a cut of another RPC's result does not explain a layer the forward never called
    item = _cut(CutKind.ITEM, worker="trainer", behind=(SCALE,))
    assert explain([Missing("ps.fc.weight", "ps")], [item, never])[0].cut == never


def test_a_cut_of_an_rpc_result_on_the_caller_explains_the_callees_parameters() -> None:
    item = _cut(CutKind.ITEM, worker="trainer", behind=(SCALE,), site="train.py:113 in step")
    found = explain([Missing("ps.gain", "ps"), Missing("shard.fc.weight", "shard")], [item])
    assert found[0] == Explained(("ps.gain",), "ps", item)
    assert "(behind rpc_sync(scale on an RRef) to ps at train.py:113 in step" in found[0].text()
    assert found[1] == Explained(("shard.fc.weight",), "shard", None)    # no RPC to shard


def test_a_cut_on_a_callee_of_its_rpcs_arguments_explains_upstream_parameters() -> None:
    detach = _cut(CutKind.DETACH, worker="shard", leaves=("shard.fc.weight",), upstream=True,
                  served="Shard.forward", site="stage.py:20 in forward")
    found = explain([Missing("ps.fc.weight", "ps"), Missing("shard.fc.weight", "shard")],
                    [detach])
    assert [e.names for e in found] == [("ps.fc.weight",), ("shard.fc.weight",)]
    assert all(e.cut == detach for e in found)
    assert "(in Shard.forward, run over RPC)" in found[1].text()
    assert "fix: do not detach at stage.py:20: use (or return) the tensor itself" in \
        found[1].text()


def test_parameters_of_one_cut_are_one_sentence_and_unexplained_ones_say_no_cause() -> None:
    sent = _cut(CutKind.PARAMETER_SENT, leaves=("ps.fc.weight", "ps.fc.bias"),
                site="model.py:50 in fc_parameters")
    found = explain([Missing("ps.fc.weight", "ps"), Missing("ps.fc.bias", "ps"),
                     Missing("ps.extra.bias", "ps")], [sent])
    assert found[0].names == ("ps.fc.weight", "ps.fc.bias")
    assert "return an output computed from the parameter at model.py:50" in found[0].text()
    assert found[1] == Explained(("ps.extra.bias",), "ps", None)
    assert found[1].text() == "ps.extra.bias got no gradient; no cut was recorded for it"


def test_nothing_is_explained_without_a_cut_and_nothing_missing_says_nothing() -> None:
    assert explain([], [_cut(CutKind.ITEM, leaves=("ps.w",))]) == []
    assert explain([Missing("ps.w", "ps")], []) == [Explained(("ps.w",), "ps", None)]
    # a cut of another parameter of the same worker explains nothing
    assert explain([Missing("ps.w", "ps")], [_cut(CutKind.DATA, leaves=("ps.v",))])[0].cut \
        is None


def test_each_kind_has_its_own_words_and_fix() -> None:
    seen = set()
    for kind in CutKind:
        c = _cut(kind, leaves=("ps.w",), behind=(SCALE,))
        assert "model.py:31" in c.what() or kind == CutKind.OUTSIDE_CONTEXT, kind
        seen.add((c.what(), c.fix()))
    assert len(seen) == len(CutKind)
    outside = _cut(CutKind.OUTSIDE_CONTEXT, behind=(SCALE,), site="train.py:113 in step")
    assert outside.what().startswith("rpc_sync(scale on an RRef) to ps at train.py:113 in step "
                                     "<- train.py:9 in run was made outside any "
                                     "dist_autograd context")
    assert "inside `with dist_autograd.context()`" in outside.fix()


def test_cuts_and_explanations_go_through_the_log_unchanged() -> None:
    c = _cut(CutKind.OUTSIDE_CONTEXT, worker="trainer", behind=(SCALE,), upstream=True,
             served="f", context_id=7, file="/x/train.py", line=113)
    e = Explained(("ps.w", "ps.b"), "ps", c)
    for ev in (journal.Event(kind=journal.CUT_SEEN, pid=1, cut=c),
               journal.Event(kind=journal.CUT, pid=1, message=e.text(), explained=e)):
        back = journal.Event.from_json(json.loads(json.dumps(ev.to_json())))
        assert back == ev
    assert RunCuts.from_json(cuts_json([e], [c])) == RunCuts((e,), (c,))


def test_a_process_keeps_each_cut_once_and_at_most_its_limit() -> None:
    kept = Kept(2)
    a = _cut(CutKind.ITEM, leaves=("ps.w",), context_id=1)
    assert kept.add(a) and not kept.add(_cut(CutKind.ITEM, leaves=("ps.w",), context_id=2))
    assert kept.add(_cut(CutKind.DATA, leaves=("ps.w",)))
    assert not kept.add(_cut(CutKind.TOLIST, leaves=("ps.w",))) and kept.dropped == 1


def test_why_finds_the_cut_of_a_named_parameter_and_of_an_rpc_result(tmp_path: Path) -> None:
    item = _cut(CutKind.ITEM, worker="trainer", behind=(SCALE,), site="train.py:113 in step")
    detach = _cut(CutKind.DETACH, worker="shard", upstream=True, context_id=3)
    run = RunCuts((Explained(("ps.gain",), "ps", item), Explained(("ps.x",), "ps", None)),
                  (item, detach))
    (tmp_path / "index.json").write_text(json.dumps({"cuts": cuts_json(
        list(run.explained), list(run.seen))}), encoding="utf-8")
    assert RunCuts.read(tmp_path / "trainer.ctx1.trace.json") == run
    assert RunCuts.read(tmp_path / "none" / "t.json") == RunCuts()
    assert run.explained_for("ps.gain") == run.explained[0]
    assert run.explained_for("ps.y") is None and run.names() == ["ps.gain", "ps.x"]
    said = "the result of rpc_sync(scale on an RRef) at train.py:113 in step is not used"
    assert run.seen_for("ps.gain", "ps", said) == item
    assert run.seen_for("ps.gain", "ps", "at train.py:114 in step") is None
    assert run.seen_for("ps.fc.weight", "ps", "a hang", 3) == detach     # upstream, same context
    assert run.seen_for("ps.fc.weight", "ps", "a hang", 4) is None


def _row(outcome: str, explanation: str, context_id: int = 3) -> Entry:
    row = journal.ContextRow(file="t.json", initiator="trainer", index=1, context_id=context_id,
                             pid=1, workers=["trainer", "ps", "shard"], nodes=3, messages=2,
                             outcome=outcome, predicted="hang",  # type: ignore[arg-type]
                             real=journal.RealState.SKIPPED,
                             agreement=journal.VerdictStatus.NOT_COMPARED,
                             explanation=explanation)
    return Entry(row=row, change="first recorded")


def test_a_hang_that_comes_from_a_cut_gets_its_note_and_no_other_does() -> None:
    item = _cut(CutKind.ITEM, worker="trainer", behind=(SCALE,), site="train.py:113 in step")
    detach = _cut(CutKind.DETACH, worker="shard", upstream=True, context_id=3,
                  site="stage.py:20 in forward")
    events = [journal.Event(kind=journal.CUT_SEEN, pid=1, cut=c) for c in (item, detach)]
    hang = _row("hang", "the result of rpc_sync(scale on an RRef) at train.py:113 in step is "
                "not used", context_id=9)
    notes = hang_cut_notes([hang], events)
    assert len(notes) == 1 and notes[0].startswith("trainer context 1: the hang comes from a "
                                                   "cut on trainer: the tensor computed")
    assert "stage.py" in hang_cut_notes([_row("hang", "anything", 3)], events)[0]
    assert hang_cut_notes([_row("completed", "", 3)], events) == []


def test_the_programs_lines_come_from_its_source(tmp_path: Path) -> None:
    src = tmp_path / "prog_cut_sites.py"
    src.write_text(textwrap.dedent("""\
        import torch

        def embed(x):
            y = x + 1
            with torch.no_grad():
                z = y * 2
            with torch.inference_mode():
                w = y * 3
            return z

        def params(m, flag):
            def inner():
                return 5
            if flag:
                return [m.weight]
            return None
        """), encoding="utf-8")
    sys.path.insert(0, str(tmp_path))
    try:
        import prog_cut_sites as prog
    finally:
        sys.path.remove(str(tmp_path))
    assert cut_sites.grad_block(str(src), 6) == (5, "no_grad")
    assert cut_sites.grad_block(str(src), 8) == (7, "inference_mode")
    assert cut_sites.grad_block(str(src), 4) is None
    assert cut_sites.return_line(prog.embed.__code__) == 9
    assert cut_sites.return_line(prog.params.__code__) == 15
