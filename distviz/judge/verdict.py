"""The verdict: does the replay agree with what PyTorch did? (pure, torch-free)

One function, ``judge(trace, replay)``, decides it for every command (``run``, ``replay``,
``trace``'s summary and ``index.json``, ``fuzz`` and training recordings), so the same trace
gets the same sentence and the same exit code from each. It reads the replay's comparison with
the real run (``distviz.judge.agreement.compare``) and what was observed (``trace.real``,
``trace.reference``) and returns a ``Verdict``: each check with its status and sentence, the
overall sentence, the exit code it implies (``distviz.limits``) and the category the pytest
plugin counts it in. Nothing else writes an agreement sentence or an exit code of a context:
``distviz.judge.agreement`` only compares, and every reader (the CLI, ``trace``'s summary and
``index.json``, the pytest plugin, the fuzz, every renderer) reads a ``Verdict``.

The checks, in the order a difference is named:

``outcome``    PyTorch's outcome against the replay's. A hang PyTorch was seen to have agrees
               with a predicted hang, whatever PyTorch raised afterwards (``real.after_hang``,
               its RPC time-out: a consequence of the hang, named in the sentence).
``order``      each worker's order, exact with one inter-op thread; with several, calls on one
               worker overlap and the order is not compared (``legality`` decides instead).
``legality``   with several inter-op threads: every observed step obeys FAST mode's rules.
``executed``   the nodes each worker ran.
``leaves``     the leaves that received a gradient.
``gradients``  the distributed gradients against the single-process reference.
``zeros``      all-zero gradients. The replay knows a zero only from the graph (an unused RPC
               output sends zeros); a gradient can also be zero by value (``narrow`` of
               ``stack``, a product with zero). A real zero the replay does not predict is
               decided from the reference's values where there are some, else not compared.
               The scenario language's custom Functions are modelled: the replay knows
               what their backward returns (``distviz.replay.undefined``: a ``None`` leaves
               a leaf on its worker without a gradient, an RPC sends it on as zeros), so
               their zeros and missing gradients are compared. Behind any other custom
               Function (``distviz.judge.opaque``) nothing the replay predicts of zeros, or
               of a leaf getting a gradient at all, is proven: its Python backward may
               return zeros, a constant or ``None``; not compared. A leaf behind one whose
               reference gradient is missing (a ``None``) while PyTorch's is all zeros is not
               compared either, never "differs": an RPC sends an undefined gradient on as
               zeros (``RecvRpcBackward::apply``).

PyTorch's backward not returning within the hang timeout while the replay completes is not
compared at all: a time-out cannot tell a hang from a slow backward.

A watched context (``watched=``, a ``distviz.judge.watched.Watched``: a backward that outlived
``--hang-timeout``, whose graph was recorded late, without hooks) has no per-node order: only
its outcome is compared. A hang both sides have agrees (and stays a hang when PyTorch raises
afterwards); a backward still running whose graph completes in the replay, one that returned
late, and one that raised are not compared, never "differs".

A check says ``differs`` only when the difference is proven (a claim that PyTorch or the
replay is wrong); otherwise ``not compared``, with the reason. A check and the whole verdict
use one word (``Status``: ``agrees``, ``differs``, ``not compared``); the JSON formats' own
words (``agree``/``not_compared`` for a check, ``match``/``mismatch``/``skipped`` for the
agreement) are written at the boundary (``distviz.replay.values``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final, NamedTuple

from distviz.judge.agreement import (
    compare,
    matched_sentence,
    mismatch_parts,
    real_interop,
    smart_report,
)
from distviz.judge.findings import CHECK_JSON_WORDS, Agreement, Status
from distviz.judge.legality import Violation
from distviz.judge.legality import check as check_legality
from distviz.judge.opaque import python_behind
from distviz.judge.watched import Watched, returned_sentence, slow_text
from distviz.limits import (
    EXIT_BACKWARD_ERROR,
    EXIT_DISAGREE,
    EXIT_HANG,
    EXIT_OK,
    SEVERITY,
    ExitCode,
    most_severe,
)
from distviz.outcome import Category, ContextOutcome, Mode, Outcome, RealOutcome, Stop
from distviz.replay.result import Replay
from distviz.replay.result import replay as run_replay
from distviz.trace import Trace
from distviz.trace.sections import Real, RowStatus
from distviz.words import plural, word_for

if TYPE_CHECKING:  # pragma: no cover

    from distviz.trace.contexts_file import Recording

__all__ = ["AGREE", "DIFFERS", "NOT_COMPARED", "SEVERITY", "Check", "ContextVerdict",
           "Status", "Verdict", "Watched", "context_verdicts", "judge", "outcome_code",
           "pytest_category", "recording_exit_code", "recording_text"]

AGREE: Final = "agrees"
DIFFERS: Final = "differs"
NOT_COMPARED: Final = "not compared"


@dataclass(frozen=True, slots=True)
class Check:
    """One comparison: ``name`` (``outcome``, ``order``, ...), ``status`` (``agrees``,
    ``differs``, ``not compared``) and a sentence saying what was found or why it was not
    compared."""

    name: str
    status: Status
    sentence: str

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "status": CHECK_JSON_WORDS[self.status],
                "sentence": self.sentence}


@dataclass(frozen=True)
class Verdict:
    """How a replay agrees with PyTorch, as every command reports it.

    ``outcome`` is the context's (``completed``, ``hang`` when either side hangs, ``error``
    when either raises, ``unfinished`` when the traced process ended during the real backward);
    ``predicted`` the replay's outcome, ``real`` PyTorch's (``None`` without a real run);
    ``status`` the verdict in a word; ``text`` its sentence; ``exit_code`` the code it implies;
    ``agreement`` the replay's comparison with ``status`` and ``text`` set from this verdict
    (what renderers and ``--json`` show); ``violations`` the broken FAST-mode rules.
    """

    outcome: ContextOutcome
    status: Status
    text: str
    exit_code: ExitCode
    checks: tuple[Check, ...]
    agreement: Agreement
    predicted: Outcome
    real: RealOutcome | None
    violations: tuple[Violation, ...] = ()

    @property
    def category(self) -> Category:
        """What the context did, as the pytest plugin counts it (``pytest_category``)."""
        return pytest_category(self.status, self.outcome, self.predicted, self.real)

    def check(self, name: str) -> Check | None:
        """The check called ``name``, or ``None`` when it was not made."""
        return next((c for c in self.checks if c.name == name), None)

    def holds(self, name: str) -> bool | None:
        """``True``/``False`` for a check that agrees/differs, ``None`` when not compared."""
        c = self.check(name)
        return None if c is None or c.status == NOT_COMPARED else c.status == AGREE

    @property
    def differences(self) -> tuple[str, ...]:
        """The names of the checks that differ."""
        return tuple(c.name for c in self.checks if c.status == DIFFERS)

    def to_json(self) -> dict[str, Any]:
        return {"outcome": self.outcome, "status": self.status, "text": self.text,
                "exit_code": self.exit_code, "checks": [c.to_json() for c in self.checks]}


def pytest_category(status: str, outcome: str, predicted: str | None,
                    real: str | None) -> Category:
    """What a context did, as the pytest plugin counts it (a ``Category``): a difference first,
    then a hang (predicted, and seen when PyTorch hung too), an error or an unfinished
    backward, else whether the replay agrees."""
    if status == DIFFERS:
        return Category.DIFFERS
    if outcome == "hang" and predicted == "hang":
        return Category.HANG_SEEN if real == "hang" else Category.HANG_PREDICTED
    if outcome == "error":
        return Category.ERROR
    if outcome == "unfinished":
        return Category.UNFINISHED
    return Category.AGREES if status == AGREE else Category.NOT_COMPARED


def outcome_code(outcome: ContextOutcome) -> ExitCode:
    """The exit code of a context's outcome alone (``completed``: 0)."""
    return {"completed": EXIT_OK, "hang": EXIT_HANG}.get(outcome, EXIT_BACKWARD_ERROR)


def _context_outcome(real: RealOutcome, predicted: Outcome) -> ContextOutcome:
    if "hang" in (real, predicted):
        return "hang"
    if "error" in (real, predicted):
        return "error"
    return "completed"


def _finish(trace: Trace, replay: Replay, outcome: ContextOutcome, checks: list[Check],
            text: str, agreement: Agreement, violations: tuple[Violation, ...] = ()) -> Verdict:
    if any(c.status == DIFFERS for c in checks):
        status: Status = "differs"
    elif any(c.status == AGREE for c in checks):
        status = "agrees"
    else:
        status = "not compared"
    code = outcome_code(outcome)
    if code == EXIT_OK and status == "differs":
        code = EXIT_DISAGREE
    shown = replace(agreement, status=status, text=text)
    return Verdict(outcome=outcome, status=status, text=text, exit_code=code,
                   checks=tuple(checks), agreement=shown, predicted=replay.outcome,
                   real=trace.real.outcome if trace.real is not None else None,
                   violations=violations)


def _not_compared(trace: Trace, replay: Replay) -> Verdict | None:
    """The verdict when PyTorch's backward did not run or did not end (else ``None``)."""
    real = trace.real
    slow = real is not None and real.outcome == "hang" and replay.outcome == "completed"
    if real is not None and real.outcome != "skipped" and not slow:
        return None
    agreement = compare(trace, replay)     # every check None: nothing to compare
    outcome: ContextOutcome
    if real is not None and slow:
        # a time-out is no proof of a hang: the backward may only be slow (a busy machine)
        waited = (f"after {real.hang_timeout_s:g} s" if real.hang_timeout_s is not None
                  else "within the hang timeout")
        text = (f"PyTorch's backward had not returned {waited}, while "
                "the replay completes: a backward slower than the hang timeout cannot be told "
                "from a hang, so nothing is compared (give it more time with --hang-timeout)")
        outcome = "hang"
    elif real is not None:
        reason = real.reason or "not requested"
        text = f"the real backward did not run: {reason}"
        outcome = replay.outcome
    elif trace.meta.traced is not None and replay.outcome == "hang":
        # --on-hang continue: the process ended (a test that expects the hang stopped waiting)
        # before the hang timeout declared PyTorch's backward hung
        text = ("the replay predicts a hang, and PyTorch's backward had not returned when the "
                "process ended")
        outcome = "hang"
    elif trace.meta.traced is not None:
        text = "the real backward had not finished"
        outcome = "unfinished"
    else:
        text = "no real run recorded for this trace; nothing to compare"
        outcome = replay.outcome
    return _finish(trace, replay, outcome, [Check("outcome", NOT_COMPARED, text)], text,
                   agreement)


def judge(trace: Trace, replay: Replay, watched: Watched | None = None) -> Verdict:
    """The verdict on ``replay`` against what PyTorch did in ``trace`` (see the module
    docstring). A SMART replay, which PyTorch never built, gets FAST mode's checks, the
    ``smart_report`` as its sentence, and the exit code of its own outcome. ``watched``: how
    the backward of a watched context ended (only its outcome is compared)."""
    if watched is not None:
        return _judge_watched(trace, replay, watched)
    if replay.mode == Mode.SMART:
        fast_replay = run_replay(trace, Mode.FAST)
        fast = judge(trace, fast_replay)
        report = smart_report(trace, replay, fast_replay)
        agreement = replace(fast.agreement, smart=report, text=report.text)
        return replace(fast, text=report.text, agreement=agreement,
                       exit_code=outcome_code(replay.outcome))
    early = _not_compared(trace, replay)
    if early is not None:
        return early
    real = trace.real
    assert real is not None   # _not_compared took the traces without one
    real_outcome = real.outcome
    a = compare(trace, replay)
    interop = real_interop(trace)
    violations = () if a.exact else tuple(check_legality(trace))
    unforeseen = (real_outcome == "error" and replay.outcome == "completed"
                  and trace.meta.traced is not None)
    made = [_outcome_check(a, real, replay, unforeseen),
            *_order_checks(a, interop, violations),
            _check("executed", a.executed, "every worker ran the nodes the replay runs",
                   "the nodes run differ"),
            _check("leaves", a.leaves, "the same leaves received gradients",
                   "the set of leaves with gradients differs"),
            _check("gradients", a.gradients, "gradients equal the single-process reference",
                   "gradients differ from the single-process reference",
                   "no single-process reference to compare the gradients with"),
            _zeros_check(trace, replay)]
    checks = [c for c in made if c is not None]
    outcome = _context_outcome(real_outcome, replay.outcome)
    text = _sentence(trace, replay, a, checks, interop, unforeseen)
    after = real.after_hang
    if real_outcome == "hang" and after:
        text += (f"; after the hang PyTorch raised: {after} (a consequence of the hang, "
                 "not a different outcome)")
    return _finish(trace, replay, outcome, checks, text, a, violations)


def _judge_watched(trace: Trace, replay: Replay, w: Watched) -> Verdict:
    """A watched context's verdict: its outcome alone (see the module docstring)."""
    status: Status = NOT_COMPARED
    real: RealOutcome
    outcome: ContextOutcome
    if w.state == "hang" or (w.state == "raised" and w.hung and replay.outcome == "hang"):
        real = outcome = "hang"
        if replay.outcome == "hang":
            status = AGREE
            text = (f"PyTorch's backward had not returned after {w.timeout:g} s and the replay "
                    "of its graph, recorded then, hangs (watched: no per-node order to compare)")
            if w.state == "raised":
                text += (f"; after the hang PyTorch raised: {w.error} (a consequence of the "
                         "hang, not a different outcome)")
        else:
            text = slow_text(trace, w.timeout)
    elif w.state == "returned":
        real = outcome = "completed"
        text = (f"{returned_sentence(w.seconds, w.timeout, replay)} (watched: nothing "
                "compared)")
    else:
        real = outcome = "error"
        text = "watched: PyTorch's backward raised; nothing else compared"
    verdict = _finish(trace, replay, outcome, [Check("outcome", status, text)], text,
                      compare(trace, replay))
    return replace(verdict, real=real)


def _check(name: str, value: bool | None, agree: str, differs: str,
           missing: str = "nothing to compare") -> Check:
    if value is None:
        return Check(name, NOT_COMPARED, missing)
    return Check(name, AGREE, agree) if value else Check(name, DIFFERS, differs)


def _outcome_check(a: Agreement, real: Real, replay: Replay, unforeseen: bool) -> Check:
    real_outcome = real.outcome
    if unforeseen:
        return Check("outcome", NOT_COMPARED,
                     "the error comes from the program's own code, which the replay cannot "
                     "foresee")
    if a.outcome:
        return Check("outcome", AGREE, f"PyTorch's backward and the replay both "
                     f"{_outcome_verb(real_outcome)}")
    return Check("outcome", DIFFERS,
                 f"PyTorch's outcome was {real_outcome}, the replay's {replay.outcome}")


def _outcome_verb(outcome: RealOutcome) -> str:
    return {"completed": "complete", "hang": "hang", "error": "raise"}.get(outcome, outcome)


def _order_checks(a: Agreement, interop: Any, violations: tuple[Violation, ...]
                  ) -> list[Check]:
    if a.exact:
        if a.order is None:
            return [Check("order", NOT_COMPARED, "nothing to compare")]
        if a.order:
            return [Check("order", AGREE, "each worker ran its nodes in the replay's order")]
        return [Check("order", DIFFERS, mismatch_parts(a)[0])]
    overlap = (f"with {interop} inter-op threads one worker's calls overlap, so PyTorch's "
               "order can change from run to run")
    if violations:
        legality = Check("legality", DIFFERS,
                         f"{plural(len(violations), 'observed step')} "
                         f"{word_for(len(violations), 'breaks', 'break')} FAST mode's rules "
                         f"({violations[0].text})")
    else:
        legality = Check("legality", AGREE, f"with {interop} inter-op threads each worker's "
                         "observed order is one that FAST mode's rules allow")
    return [Check("order", NOT_COMPARED, overlap), legality]


def _zeros_check(trace: Trace, replay: Replay) -> Check | None:
    """All-zero gradients, proven different only where values decide it."""
    real = trace.real
    if real is None or real.outcome != "completed" or replay.outcome != "completed":
        return None
    grads = real.gradients
    rows = {r.leaf: r for r in (trace.reference.rows if trace.reference is not None else [])}
    differ: list[str] = []
    undecided: list[str] = []
    # the leaves where PyTorch's gradient is not what the graph predicts: missing, or zero
    # where the replay's is not, or not zero where the replay's is
    odd = {nid: acc for nid, acc in replay.accumulated.items()
           if not isinstance(grads.get(nid), dict) or bool(grads[nid].get("zero")) != acc.zero}
    behind = python_behind(trace, odd)
    opaque: list[str] = []
    dropped: list[str] = []
    for nid, acc in sorted(odd.items()):
        name = acc.var or nid
        got = grads.get(nid)
        if isinstance(got, dict) and not acc.zero:   # PyTorch's is zero, the graph's is not
            row = rows.get(nid)
            status = row.status if row is not None else None
            if status == RowStatus.MATCH:
                continue           # the reference's gradient is zero too
            if status == RowStatus.ZERO_UNUSED and nid in behind:
                dropped.append(nid)    # a Python backward's None, sent across an RPC as zeros
                continue
            if status in (RowStatus.MISMATCH, RowStatus.ZERO_UNUSED):
                differ.append(name)    # the reference's gradient is not zero: PyTorch's zero is
                continue
        if nid in behind:
            opaque.append(nid)     # a Python backward decides its values: nothing is proven
        elif not isinstance(got, dict):
            continue               # no gradient at all: the leaves check says it
        elif acc.zero:
            differ.append(name)    # only zeros reach it in the graph, yet PyTorch's is not zero
        else:
            undecided.append(name)
    if differ:
        return Check("zeros", DIFFERS, f"all-zero gradient differs for {', '.join(differ[:3])}")
    reasons: list[str] = []
    if opaque:
        names = [odd[nid].var or nid for nid in opaque]
        fns = sorted({behind[nid] for nid in opaque})
        reasons.append(f"the gradient of {', '.join(names[:3])} comes through "
                       f"{', '.join(fns[:3])}, "
                       f"{word_for(len(fns), 'a custom Function whose', 'custom Functions whose')}"
                       " Python backward may return zeros, a constant or None, values the "
                       "replay cannot know")
    if dropped:
        names = [odd[nid].var or nid for nid in dropped]
        fns = sorted({behind[nid] for nid in dropped})
        reasons.append(f"PyTorch's gradient of {', '.join(names[:3])} is all zeros where the "
                       "single-process reference has none: behind "
                       f"{', '.join(fns[:3])} a Python backward returned None, which an RPC "
                       "sends on as zeros (RecvRpcBackward); the replay does not know what a "
                       "Python backward returns")
    if undecided:
        reasons.append(f"PyTorch's gradient of {', '.join(undecided[:3])} is all zeros where "
                       "the graph carries a gradient; the replay tracks zeros only through the "
                       "graph (a gradient can be zero by value, as through narrow of stack), "
                       "and no single-process reference decides it")
    if reasons:
        return Check("zeros", NOT_COMPARED, "; ".join(reasons))
    return Check("zeros", AGREE, "all-zero gradients are where the replay predicts them")


def _sentence(trace: Trace, replay: Replay, a: Agreement, checks: list[Check], interop: Any,
              unforeseen: bool) -> str:
    """The verdict's one sentence."""
    bad = [c for c in checks if c.status == DIFFERS]
    if bad:
        parts: list[str] = []
        for c in bad:
            if c.name == "order":
                parts.extend(mismatch_parts(a))
            elif not (c.name == "executed" and a.mismatches):   # the order's difference says it
                parts.append(c.sentence)
        return "replay differs from PyTorch: " + "; ".join(parts)
    if unforeseen:
        return ("the error comes from the program's own code, which the replay cannot foresee; "
                "up to the error every worker ran what the replay runs")
    text = matched_sentence(trace, replay, a)
    if not a.exact:
        text += (f"; with {interop} inter-op threads each worker's observed order is one that "
                 "FAST mode's rules allow")
    zeros = next((c for c in checks if c.name == "zeros" and c.status == NOT_COMPARED), None)
    if zeros is not None:
        text += f"; not compared: {zeros.sentence}"
    return text


# -- recordings of several contexts (training) ------------------------------------------------

#: exit codes from least to most severe: a recording's code is the most severe of its contexts'
class ContextVerdict(NamedTuple):
    """One context of a recording: its replay and verdict (both ``None`` for a context without
    a recorded pass)."""

    replay: Replay | None
    verdict: Verdict | None

    @property
    def agreement(self) -> Agreement | None:
        return self.verdict.agreement if self.verdict is not None else None


def context_verdicts(recording: Recording, mode: Mode) -> list[ContextVerdict]:
    """The replay (in ``mode``) and verdict of every context of ``recording``."""
    out: list[ContextVerdict] = []
    for trace in recording.contexts:
        if not trace.passes:
            out.append(ContextVerdict(None, None))
            continue
        rp = run_replay(trace, mode)
        out.append(ContextVerdict(rp, judge(trace, rp)))
    return out


def recording_text(recording: Recording, verdicts: list[ContextVerdict]) -> str:
    """A recording's verdict in one sentence: the first context that differs (``context N:``
    and its sentence), final parameters that differ from the reference training, the first
    context where nothing was compared, or every context agreeing."""
    judged = [(i, cv.verdict) for i, cv in enumerate(verdicts, 1) if cv.verdict is not None]
    bad = [(i, v) for i, v in judged if v.status == DIFFERS]
    if bad:
        return f"context {bad[0][0]}: {bad[0][1].text}"
    summary = recording.training
    if summary is not None and summary.ok is False:
        return "the final parameters differ from the reference training"
    unjudged = [(i, v) for i, v in judged if v.status == NOT_COMPARED]
    if unjudged:
        return f"context {unjudged[0][0]}: {unjudged[0][1].text}"
    return (f"all {len(recording.contexts)} contexts agree"
            + ("; the final parameters equal the reference training"
               if summary is not None and summary.ok else ""))


def recording_exit_code(recording: Recording, verdicts: list[ContextVerdict],
                        stopped: Stop | None = None) -> ExitCode:
    """The most severe code of any context; final parameters that differ from the reference
    training count as a disagreement, a stopped training as what stopped it."""
    codes = [cv.verdict.exit_code for cv in verdicts if cv.verdict is not None]
    if stopped is not None:
        codes.append(EXIT_HANG if stopped.kind.outcome == "hang" else EXIT_BACKWARD_ERROR)
    summary = recording.training
    if summary is not None and summary.ok is False:
        codes.append(EXIT_DISAGREE)
    return most_severe(codes)
