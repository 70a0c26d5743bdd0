"""The look of the DOT pictures: colours and shapes by node kind and replay state, and the
legend table every picture carries (so a picture explains its own notation)."""

from __future__ import annotations

from collections.abc import Mapping

from distviz.render.dot.text import attrs

__all__ = ["BLOCKED_COLOR", "CURRENT_COLOR", "KIND_STYLE", "MESSAGE_COLOR", "NEVER_COLOR",
           "STATE_FILL", "legend"]

# Kind styles: (shape, fill colour, outline colour).
KIND_STYLE: dict[str, tuple[str, str, str]] = {
    "op": ("box", "#ffffff", "#333333"),
    "send": ("invhouse", "#ffd8a8", "#d9480f"),
    "recv": ("house", "#b2f2bb", "#2b8a3e"),
    "accumulate_grad": ("box", "#add8e6", "#1864ab"),
    "chain": ("box3d", "#f1f3f5", "#495057"),
    "group": ("folder", "#e9ecef", "#495057"),
    "ghost": ("box", "#f8f9fa", "#adb5bd"),
}
# Step-state fills (``step=N``).
STATE_FILL: dict[str, str] = {
    "executed": "#bdbdbd",
    "ready": "#fff176",
    "waiting": "#ffffff",
    "blocked": "#ff8a80",
    "never": "#e5dbff",
}
CURRENT_COLOR = "#e03131"
MESSAGE_COLOR = "#c2255c"
BLOCKED_COLOR = "#c92a2a"
NEVER_COLOR = "#7048e8"


def _row(fill: str, color: str, border: int, text: str, style: str = "") -> str:
    extra = f' STYLE="{style}"' if style else ""
    return (f'<TR><TD BGCOLOR="{fill}" COLOR="{color}" BORDER="{border}"{extra} WIDTH="18"> </TD>'
            f'<TD ALIGN="LEFT" BORDER="0">{text}</TD></TR>')


def legend(states: Mapping[str, str], ghosts: bool = False) -> list[str]:
    """Return the legend cluster: one HTML-like table node (our own fixed text only).

    Kinds, arrows and label notation always; the replay states when ``states`` holds any (a
    step picture, or the end of a hang); ``never runs`` and ``blocked send`` when present.
    """
    rows = [
        _row(KIND_STYLE["op"][1], KIND_STYLE["op"][2], 1, "op: Name #sequence_nr"),
        _row(KIND_STYLE["send"][1], KIND_STYLE["send"][2], 1, "SendRpcBackward (msg sender:n)"),
        _row(KIND_STYLE["recv"][1], KIND_STYLE["recv"][2], 1, "RecvRpcBackward (msg sender:n)"),
        _row(KIND_STYLE["accumulate_grad"][1], KIND_STYLE["accumulate_grad"][2], 1,
             "leaf (AccumulateGrad): variable [shape]"),
    ]
    if ghosts:
        rows.append(_row(KIND_STYLE["ghost"][1], KIND_STYLE["ghost"][2], 1,
                         "nodes this view leaves out", "dotted"))
    present = set(states.values())
    if present:
        rows += [
            _row(STATE_FILL["executed"], "#333333", 1, "executed"),
            _row("#ffffff", CURRENT_COLOR, 3, "current step"),
            _row(STATE_FILL["ready"], "#333333", 1, "ready (queued)"),
            _row(STATE_FILL["waiting"], "#333333", 1, "waiting: deps D (R left)"),
        ]
        if "blocked" in present:
            rows.append(_row(STATE_FILL["blocked"], BLOCKED_COLOR, 1,
                             "blocked send: its gradient never comes"))
        if "never" in present:
            rows.append(_row(STATE_FILL["never"], NEVER_COLOR, 1,
                             "never runs (the replay hangs first)"))
    cells = "".join(rows)
    cells += (f'<TR><TD BORDER="0"><FONT COLOR="{MESSAGE_COLOR}">- - &gt;</FONT></TD>'
              '<TD ALIGN="LEFT" BORDER="0">gradient message: recv -&gt; send</TD></TR>'
              '<TR><TD BORDER="0">-&gt;</TD>'
              '<TD ALIGN="LEFT" BORDER="0">gradient flow: node -&gt; next function</TD></TR>'
              '<TR><TD BORDER="0">deps D</TD><TD ALIGN="LEFT" BORDER="0">'
              "gradients a node waits for (FAST mode)</TD></TR>")
    table = f'<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="3" CELLPADDING="2">{cells}</TABLE>>'
    return ['  subgraph "cluster_legend" {',
            "    graph " + attrs({"id": "cluster_legend", "label": "legend", "style": "rounded",
                                   "color": "#adb5bd", "fontsize": 11}) + ";",
            f'    "legend" [id="legend", shape=plaintext, style="", fontsize=9, label={table}];',
            "  }"]
