"""Leaf names of ``distviz trace`` and the Python API: a module held in a variable of the
program and holding parameters itself is named after the variable, as roots are
(``trainer.head.weight``), on the recording worker, and keeps that name in every later note;
the program's lines a hang's explanation quotes (needs torch, no RPC; milliseconds)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from distviz.tracing.callsites import program  # noqa: E402
from distviz.tracing.callsites.source import is_read, statement_text  # noqa: E402
from distviz.tracing.shared import naming  # noqa: E402


@pytest.fixture(autouse=True)
def _no_names_of_earlier_tests() -> None:
    """Each test is a program of its own: a module an earlier test named (still alive in this
    process, held by some other test's object) keeps its name for the rest of the process, and
    two live modules named ``head`` are told apart by class (``trainer.Linear.head.weight``)."""
    naming._LABELS.clear()
    naming._CACHE.clear()


def _names(worker: str) -> dict[str, object]:
    """What ``record_piece`` asks for on the initiator: called from the program's frames."""
    naming.ensure()
    return {name: p for p, name in naming.parameter_names(worker)}


class Body(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(2, 2)


def test_a_module_in_a_local_variable_is_named_after_it() -> None:
    head = torch.nn.Linear(2, 1)
    names = _names("trainer")
    assert names["trainer.head.weight"] is head.weight
    assert names["trainer.head.bias"] is head.bias
    assert [n for n, p in names.items() if p is head.weight] == ["trainer.head.weight"]


def test_two_local_modules_of_one_class_keep_their_own_names() -> None:
    encoder = torch.nn.Linear(2, 2)
    decoder = torch.nn.Linear(2, 2)
    names = _names("trainer")
    assert names["trainer.encoder.weight"] is encoder.weight
    assert names["trainer.decoder.weight"] is decoder.weight


def test_a_model_of_submodules_keeps_its_parameter_paths() -> None:
    model = Body()   # like the RNN tutorial's RNNModel: trainer.rnn.weight_ih_l0 stays
    names = _names("trainer")
    assert names["trainer.fc.weight"] is model.fc.weight


def _from_elsewhere(worker: str) -> dict[str, object]:
    """What a note asks for from a frame that does not hold the module (an optimizer's step
    on an RPC thread, a helper of distviz's): no program frame names it there."""
    import threading

    naming.ensure()
    out: dict[str, object] = {}

    def ask() -> None:
        out.update({name: p for p, name in naming.parameter_names(worker, None)})
    thread = threading.Thread(target=ask)
    thread.start()
    thread.join()
    return out


def test_a_module_keeps_the_name_its_variable_gave_it_in_every_later_note() -> None:
    head = torch.nn.Linear(2, 1)
    first = _names("trainer")
    assert first["trainer.head.weight"] is head.weight
    later = _from_elsewhere("trainer")     # another thread, while this frame holds `head`
    assert later["trainer.head.weight"] is head.weight
    assert [n for n, p in later.items() if p is head.weight] == ["trainer.head.weight"]


def test_a_note_from_another_thread_first_finds_the_programs_variable() -> None:
    tail = torch.nn.Linear(2, 1)     # never named from this frame before the other thread asks
    names = _from_elsewhere("trainer")
    assert names["trainer.tail.weight"] is tail.weight
    assert "trainer.weight" not in names


def test_the_statement_of_a_line_is_read_whole_and_short(tmp_path: Path) -> None:
    path = str(tmp_path / "prog.py")
    with open(path, "w", encoding="utf-8") as f:
        f.write("def train(model, xs):\n"
                "    loss = sum(model(x)\n"
                "               for x in xs)\n"
                "    unused = model(xs)\n"
                "    return loss\n")
    assert statement_text(path, 2) == "loss = sum((model(x) for x in xs))"
    assert statement_text(path, 4) == "unused = model(xs)"
    assert is_read(path, 4, "loss") and not is_read(path, 4, "unused")


def _backward(roots: list[object]) -> program.PassLines:
    """Where a program calls the backward: its lines, as the recording reads them."""
    return program.pass_lines(sys._getframe(), roots)


def _train() -> program.PassLines:
    outputs = [torch.ones(2, requires_grad=True) for _ in range(3)]
    first = 1
    loss = sum(o.sum() for o in outputs[first:])
    return _backward([loss])


def test_the_loss_is_found_where_its_variable_was_assigned_not_where_it_was_passed() -> None:
    lines = _train()
    here = "tests/pure/tracing/test_tracing_names.py"
    src = Path(__file__).read_text().splitlines()
    built = next(k for k, ln in enumerate(src, 1) if ln.strip().startswith("loss = sum(o.sum()"))
    assert lines.loss_site == f"{here}:{built} in _train"
    assert lines.loss_statement == "loss = sum(o.sum() for o in outputs[first:])"
    assert lines.site is not None and lines.site.startswith(f"{here}:")
    assert (here, "_train") in lines.functions


def _backward_of(loss: object) -> program.PassLines:
    """A program's helper whose parameter holds the loss: its caller's line built it."""
    return _backward([loss])


def test_a_loss_given_as_an_expression_is_named_at_the_line_that_passed_it() -> None:
    src = Path(__file__).read_text().splitlines()
    here = "tests/pure/tracing/test_tracing_names.py"

    def line_of(text: str) -> int:
        return next(k for k, ln in enumerate(src, 1) if ln.strip().startswith(text))
    # given to the backward itself: the backward's own line
    lines = _backward([torch.ones(2, requires_grad=True).sum()])
    backward = line_of("return program.pass_lines(")
    assert lines.loss_site == f"{here}:{backward} in _backward"
    # given to a helper whose parameter holds it: the line that called the helper
    lines = _backward_of(torch.ones(2, requires_grad=True).sum() * 2)
    passed = line_of("lines = _backward_of(")
    assert lines.loss_site == (f"{here}:{passed} in test_a_loss_given_as_an_expression_is_named_"
                               "at_the_line_that_passed_it")
    assert lines.loss_statement == \
        "lines = _backward_of(torch.ones(2, requires_grad=True).sum() * 2)"


def test_each_step_of_a_loop_names_the_loss_assigned_before_its_own_backward() -> None:
    # the function's assignments are read once and kept: every step still gets the last one
    # above its backward, not one further down the loop
    src = Path(__file__).read_text().splitlines()
    here = "tests/pure/tracing/test_tracing_names.py"
    fn = "test_each_step_of_a_loop_names_the_loss_assigned_before_its_own_backward"
    first = next(k for k, ln in enumerate(src, 1) if ln.strip() == "loss = torch.ones(2).sum()")
    sites = []
    for _ in range(3):
        loss = torch.ones(2).sum()
        sites.append(program.pass_lines(sys._getframe(), [loss]).loss_site)
        loss = torch.zeros(1)
        sites.append(program.pass_lines(sys._getframe(), [loss]).loss_site)
    assert sites == [f"{here}:{first} in {fn}", f"{here}:{first + 2} in {fn}"] * 3
