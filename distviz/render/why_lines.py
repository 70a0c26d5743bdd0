"""``distviz why``'s answer as terminal lines (``distviz.analyses.why.Why``; nothing printed here).

The first line names the leaf and says whether it gets a gradient (green) or not (red); then
why, the path (each node with the replay step it ran, ``-`` for never, and each gradient
message crossed), notes, and fixes (yellow).
"""

from __future__ import annotations

from rich.text import Text

from distviz.analyses.why import Hop, Why
from distviz.render.terminal_text import wrapped_lines

__all__ = ["why_lines"]


def why_lines(answer: Why, *, width: int | None = None) -> list[Text]:
    """Return the lines of ``answer``; with ``width``, long lines wrap with hanging indents."""
    where = f" ({answer.leaf})" if answer.leaf is not None else " (not in the graph)"
    head = Text(f"{answer.name} on {answer.worker}{where}: ")
    head.append("gets a gradient" if answer.gets_gradient else "gets no gradient",
                style="bold green" if answer.gets_gradient else "bold red")
    out = [head]
    out.extend(wrapped_lines("  why: ", "    ", answer.summary, width))
    if answer.path:
        reached = answer.kind not in _BROKEN
        title = (f"  path from the root, pass {(answer.pass_index or 0) + 1}:" if reached
                 else "  path from where it breaks:")
        out.append(Text(title))
        w = max(len(h.worker) for h in answer.path)
        n = max(len(h.name) for h in answer.path)
        for h in answer.path:
            step = "-" if h.step is None else str(h.step)
            base = f"    {step:>5}  {h.worker:<{w}}  {h.name:<{n}}"
            extra = _hop_note(h)
            line = Text(base if extra else base.rstrip())
            if extra:
                line.append(f"  {extra}", style="dim" if h.python is None else "yellow")
            out.append(line)
    for d in answer.details:
        out.extend(wrapped_lines("  note: ", "    ", d, width))
    for fix in answer.fixes:
        out.extend(wrapped_lines("  fix: ", "    ", fix, width, style="yellow"))
    return out


#: The answers whose path starts where the gradient's way breaks, not at a root.
_BROKEN = ("unused_result", "no_grad_rpc", "no_recv", "not_in_loss", "cut")


def _hop_note(h: Hop) -> str:
    if h.message is not None:
        call = f", {h.call}" if h.call else ""
        return f"← message {h.message} from {h.sender}{call}"
    if h.python is not None:
        return "Python backward" + (f" at {h.python}" if h.python else "")
    return ""
