"""The custom autograd Functions of the scenario language (torch side; worker processes only).

``custom_function("SHAPE", x)`` applies one of a fixed set of ``torch.autograd.Function``s to
``x``, the shapes users write (``distviz.scenario.lang.CUSTOM_FUNCTIONS`` says what each does;
the checker accepts only those, written as a string). Their backward is Python code, which the
replay cannot see into: the recorder marks their nodes (``"python": true``) and writes each
one's shape (``distviz_custom``, the node's ``"custom"``), so that the replay models what its
backward returns (``distviz.replay.undefined``). Each returns one tensor.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.autograd.function import once_differentiable

from distviz.scenario import lang

__all__ = ["FUNCTIONS", "custom_function"]


class Scale(torch.autograd.Function):
    """``x * factor``; the float ``factor`` is an argument of its own (gradient ``None``)."""

    distviz_custom = "scale"

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, factor: float) -> torch.Tensor:
        ctx.factor = factor
        return x * factor

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> tuple[torch.Tensor, None]:
        return g * ctx.factor, None


class Split(torch.autograd.Function):
    """Two outputs, ``x * 2`` and ``x * 5``; an unused one's gradient comes in as zeros."""

    distviz_custom = "split"

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x * 2, x * 5

    @staticmethod
    def backward(ctx: Any, g1: torch.Tensor, g2: torch.Tensor) -> torch.Tensor:
        return g1 * 2 + g2 * 5


class NonDiff(torch.autograd.Function):
    """``x * 4`` and ``x``'s ranks, marked non-differentiable; a once-differentiable
    backward."""

    distviz_custom = "nondiff"

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        ranks = x.flatten().argsort().reshape(x.shape).to(x.dtype)
        ctx.mark_non_differentiable(ranks)
        return x * 4, ranks

    @staticmethod
    @once_differentiable
    def backward(ctx: Any, g: torch.Tensor, _ranks: torch.Tensor) -> torch.Tensor:
        return g * 4


class Square(torch.autograd.Function):
    """``x * x`` with ``x`` saved; the backward is made of differentiable operations."""

    distviz_custom = "square"

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return 2 * x * g


class Zeros(torch.autograd.Function):
    """``x``; the backward returns zeros whatever it gets."""

    distviz_custom = "zeros"

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> torch.Tensor:
        return torch.zeros_like(g)


class Dropped(torch.autograd.Function):
    """``x``; gradients are not materialized and the backward returns ``None``."""

    distviz_custom = "none"

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.set_materialize_grads(False)
        return x.clone()

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor | None) -> None:
        return None


def _scale(x: torch.Tensor) -> torch.Tensor:
    out: torch.Tensor = Scale.apply(x, 3.0)
    return out


def _first(fn: type[torch.autograd.Function]) -> Any:
    def apply(x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = fn.apply(x)[0]
        return out
    return apply


#: shape -> how ``custom_function`` applies it
FUNCTIONS: dict[str, Any] = {"scale": _scale, "split": _first(Split),
                             "nondiff": _first(NonDiff), "square": Square.apply,
                             "zeros": Zeros.apply, "none": Dropped.apply}
assert set(FUNCTIONS) == set(lang.CUSTOM_FUNCTIONS)


def custom_function(shape: str, x: torch.Tensor) -> torch.Tensor:
    """Return ``x`` through the custom Function ``shape`` (the checker allows only the shapes of
    ``lang.CUSTOM_FUNCTIONS``; PyTorch's own error for anything else)."""
    out: torch.Tensor = FUNCTIONS[shape](x)
    return out
