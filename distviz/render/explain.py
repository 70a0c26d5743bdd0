"""How a replay ended, as terminal lines: the leaves that got gradients, why a pass hangs, where
an error was raised and how far it travelled, and the agreement with the real run.

Everything returns ``rich.text.Text`` lines (no printing here). Styles: the outcome word is bold
green (``completed``) or bold red (``HANG``, ``ERROR``); blocked sends and error messages red;
fixes yellow.
"""

from __future__ import annotations

from collections.abc import Iterator

from rich.text import Text

from distviz.judge.findings import Agreement
from distviz.render.terminal_text import leaf_name, wrapped_lines
from distviz.replay.values import Hang, PassError, ReplayLike
from distviz.trace import Trace

__all__ = ["agreement_lines", "explain_outcome"]

_OUTCOME_STYLES = {"completed": "bold green", "hang": "bold red", "error": "bold red"}


def explain_outcome(trace: Trace, replay: ReplayLike, *, width: int | None = None) -> list[Text]:
    """Return the lines that explain how the replay ended.

    ``completed``: the leaves each worker accumulated (``zeros`` marks an all-zero gradient).
    ``hang``: each blocked send, why it gets no gradient, its recv with the variable and scenario
    line to fix, the blocked workers, the recvs that never run, the wait chain and the fixes.
    ``error``: the worker, node and message, the chain the error travelled and the workers never
    told. With ``width``, long lines wrap with hanging indents.
    """
    outcome = replay.outcome
    style = _OUTCOME_STYLES.get(outcome, "bold")
    word = outcome if outcome == "completed" else outcome.upper()
    if outcome == "completed":
        return (_head(word, "every worker finished its backward", style, width)
                + _completed(trace, replay, width))
    if outcome == "hang":
        hang = replay.hang
        summary = hang.summary if hang is not None else "the backward never completes"
        out = _head(word, summary, style, width)
        if hang is not None:
            out.extend(_hang_lines(hang, width))
        return out
    if outcome == "error" and replay.error is not None:
        err = replay.error
        what = "crashed" if err.crash else "raised"
        return (_head(word, f"{err.worker} {what} in {err.node or '?'}", style, width)
                + _error_lines(err, width))
    return _head(word, "", style, width)


def _head(word: str, rest: str, style: str, width: int | None) -> list[Text]:
    """Return ``outcome: WORD — rest``, wrapped with a hanging indent."""
    lines = list(wrapped_lines("outcome: ", " " * 9, f"{word} — {rest}" if rest else word, width))
    lines[0].stylize("bold", 0, len("outcome: "))
    lines[0].stylize(style, len("outcome: "), len("outcome: ") + len(word))
    return lines


def _completed(trace: Trace, replay: ReplayLike, width: int | None) -> list[Text]:
    """Per worker, the leaves that received a gradient (``(zeros)``: only all-zero ones)."""
    if not replay.events:
        return []
    out: list[Text] = []
    final = replay.state_at(len(replay.events) - 1)
    nodes = trace.node_map()
    for w in trace.workers:
        ws = final.workers.get(w)
        if ws is None or not ws.accumulated:
            continue
        names = []
        for nid, times in sorted(ws.accumulated.items()):
            name = leaf_name(nodes.get(nid), nid, times)
            acc = replay.accumulated.get(nid)
            if acc is not None and acc.zero:
                name += " (zeros)"
            names.append(name)
        out.extend(wrapped_lines(f"  {w} gradients: ", "    ", ", ".join(names), width))
    return out


def _hang_lines(hang: Hang, width: int | None) -> list[Text]:
    out: list[Text] = []
    for b in hang.blocked_sends:
        out.extend(wrapped_lines("  blocked send: ", "    ", f"{b.node} (message {b.label}) "
                                 "never gets a gradient", width, style="red"))
        if b.reason:
            out.extend(wrapped_lines("    why: ", "      ", b.reason, width))
        where = [b.recv] if b.recv else ["no recv in the trace"]
        if b.var:
            where.append(f"variable `{b.var}`")
        if b.line is not None:
            where.append(f"line {b.line}")
        out.extend(wrapped_lines("    its recv: ", "      ", " · ".join(where), width))
    for bw in hang.blocked_workers:
        out.extend(wrapped_lines("  blocked: ", "    ",
                                 f"{bw.worker} waits for {bw.waiting_for or 'ever'}", width))
    for r in hang.unreachable_recvs:
        out.extend(wrapped_lines("  never runs: ", "    ",
                                 f"{r.node}: {r.reason or 'never runs'}", width))
    if hang.chain:
        out.append(Text("  chain:"))
        for c in hang.chain:
            out.extend(wrapped_lines("    ", "      ", c, width))
    for fix in hang.fixes:
        out.extend(wrapped_lines("  fix: ", "    ", fix, width, style="yellow"))
    return out


def _error_lines(err: PassError, width: int | None) -> list[Text]:
    out = list(wrapped_lines("  message: ", "    ", err.message, width, style="red"))
    if err.chain:
        out.extend(wrapped_lines("  travelled: ", "    ", " → ".join(err.chain), width))
    if err.unnotified:
        out.extend(wrapped_lines("  never told: ", "    ", ", ".join(err.unnotified)
                                 + " (off the first-message chain; their state stays stale)",
                                 width))
    return out


def agreement_lines(agreement: Agreement, width: int | None) -> Iterator[Text]:
    """Yield the verdict's sentence (``distviz.judge.verdict``; green: agrees, red: differs,
    yellow: nothing compared or a SMART prediction, which has no PyTorch to check against)."""
    if agreement.smart is not None:
        yield from wrapped_lines("SMART prediction (no PyTorch to check against): ", "  ",
                                 agreement.text, width, style="yellow")
        return
    style = {"agrees": "green", "differs": "red"}.get(agreement.status, "yellow")
    yield from wrapped_lines("agreement with the real run: ", "  ", agreement.text, width,
                             style=style)
