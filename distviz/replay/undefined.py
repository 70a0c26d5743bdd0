"""Defined, all-zero and undefined gradients, as PyTorch's engines treat them (pure, torch-free).

A gradient flowing along an edge of the backward graph is in one of three states
(``GradState``): undefined (no tensor: a Python backward returned ``None``), defined and all
zeros (an unused RPC output, a backward that returns zeros), or defined with values. Where
several reach one node, its input buffer adds them (``InputBuffer::add`` skips an undefined
one), so a node's state is the largest of what reached it. The rules, from PyTorch's source
(torch 2.13; docs/scenario-language.md has the table with the files):

* the ``GraphRoot`` seeds ones (``VALUE``);
* a C++ backward (``Functions.cpp``) returns undefined gradients when none of its incoming
  ones is defined (``any_grad_defined ? ... : Tensor()``), zeros for zeros, values for values;
* a Python backward (``PyNode::apply``) gets an undefined incoming gradient as zeros, or as
  ``None`` after ``ctx.set_materialize_grads(False)``; what it returns is its own code's, and a
  returned ``None`` is undefined;
* a ``SendRpcBackward`` passes on the gradients its message brought: always defined;
* a ``RecvRpcBackward`` sends every undefined gradient as zeros of its input's metadata;
* a captured ``AccumulateGrad`` accumulates into the context only a defined gradient: a leaf
  that gets only undefined ones is not in ``get_gradients``.

What a Python backward returns is known only for the scenario language's custom Functions
(``custom_function("SHAPE", x)``; the recorder writes the shape as the node's ``custom``):
``PYTHON_BACKWARDS`` says, per shape, whether it materializes and what it returns. A custom
Function of a traced program is not known: the replay passes its gradient on as a C++ backward
would, and the verdict compares nothing behind it that only its values decide
(``distviz.judge.opaque``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, IntEnum
from typing import Final

from distviz.trace import Node

__all__ = ["PYTHON_BACKWARDS", "GradState", "PythonBackward", "Returns", "known_python",
           "python_out"]


class GradState(IntEnum):
    """The state of the gradient a node has received, ordered so that the sum of two is the
    larger (an undefined gradient adds nothing)."""

    UNDEFINED = 0
    ZERO = 1
    VALUE = 2


class Returns(Enum):
    """What a Python backward returns for its input, given what it got."""

    LINEAR = "linear"    # an expression linear in its gradient: zeros for zeros (g * 3, 2 * x * g)
    ZEROS = "zeros"      # zeros whatever it got (torch.zeros_like(g))
    NONE = "none"        # None: an undefined gradient


@dataclass(frozen=True, slots=True)
class PythonBackward:
    """A custom Function's backward as the replay models it: ``materialize`` is
    ``ctx.materialize_grads`` (an undefined incoming gradient comes in as zeros), ``returns``
    what it returns."""

    materialize: bool
    returns: Returns

    def out(self, state: GradState) -> GradState:
        """The state of what it returns for an incoming gradient in ``state``."""
        if self.returns is Returns.NONE:
            return GradState.UNDEFINED
        if self.returns is Returns.ZEROS:
            return GradState.ZERO
        if state == GradState.UNDEFINED:
            # materialized: zeros in, zeros out; not materialized, a linear backward of None
            # would raise: the scenario language has no such Function
            return GradState.ZERO if self.materialize else GradState.UNDEFINED
        return state


#: The scenario language's custom Functions (``distviz.scenario.lang.CUSTOM_FUNCTIONS``, made
#: in ``distviz/runner/sandbox/custom_fns.py``), by shape.
PYTHON_BACKWARDS: Final[dict[str, PythonBackward]] = {
    "scale": PythonBackward(True, Returns.LINEAR),     # g * 3 (None for the float)
    "split": PythonBackward(True, Returns.LINEAR),     # g1 * 2 + g2 * 5
    "nondiff": PythonBackward(True, Returns.LINEAR),   # g * 4
    "square": PythonBackward(True, Returns.LINEAR),    # 2 * x * g
    "zeros": PythonBackward(True, Returns.ZEROS),      # torch.zeros_like(g)
    "none": PythonBackward(False, Returns.NONE),       # None, gradients not materialized
}


def known_python(node: Node) -> PythonBackward | None:
    """The model of ``node``'s Python backward, or ``None`` when it is not a custom Function's
    node or its Function is not one the replay knows."""
    if not node.python or node.custom is None:
        return None
    return PYTHON_BACKWARDS.get(node.custom)


def python_out(backward: PythonBackward) -> tuple[int, int, int]:
    """``backward.out`` as a table indexed by the incoming state (the engine's hot loop)."""
    return (int(backward.out(GradState.UNDEFINED)), int(backward.out(GradState.ZERO)),
            int(backward.out(GradState.VALUE)))
