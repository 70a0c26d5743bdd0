"""Where the supported torch releases differ in what distviz reaches inside PyTorch, each
difference named with the releases measured (docs/torch-versions.md). Torch side.

* ``Node._input_metadata`` (the shapes of the gradients a node receives): 2.11.0, 2.14.1 and
  2.15.0 have it; 2.4.1 has not. Without it a trace records no gradient shapes
  (``input_shapes`` is ``None``, as for a node kind without metadata); the replay and the
  agreement with PyTorch do not use them.
"""

from __future__ import annotations

from typing import Any

__all__ = ["input_shapes"]


def input_shapes(fn: Any) -> list[list[int]] | None:
    """The shapes of the gradients node ``fn`` receives, or ``None`` where this torch has no
    ``Node._input_metadata`` (2.4) or the node kind carries none."""
    metadata = getattr(fn, "_input_metadata", None)
    if metadata is None:
        return None
    try:
        return [[int(s) for s in m.shape] for m in metadata]
    except Exception:  # noqa: BLE001 - a node kind without input metadata
        return None
