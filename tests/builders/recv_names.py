"""What tests/pure/render/test_recv_names.py and tests/e2e/test_recv_names_rpc.py share."""

from __future__ import annotations

from rich.console import Console


def _text(renderable: object) -> str:
    console = Console(width=200, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()
