"""Every problem of a scenario file is reported, in file order, up to a limit; a problem does
not make later lines look wrong; name-rule errors state the rule (pure, milliseconds)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from distviz.cli import app
from distviz.errors import ScenarioError, ScenarioProblems
from distviz.limits import MAX_PROBLEMS_SHOWN
from distviz.scenario import load_scenario, load_scenario_text

MANY = """\
name: many
wokers: [worker0, worker1]
workers: [worker0, worker1]
seed: -1
code: |
  def my_add(t1, t2):
      import os
      return torch.add(t1, t2)
main: |
  t1 = torch.rand((3, 3), requires_grad=True)
  t2 = open("x")
  t3 = rpc.rpc_sync("wroker1", my_add, args=(t1, t2))
  while True:
      pass
  loss = t3.sum()
backward: [loss, los]
"""

MANY_LINES = [
    "s.yaml:2 wokers: unknown key 'wokers' (did you mean 'workers'?); keys: name, description, "
    "workers, seed, params, code, main, backward",
    "s.yaml:4 seed: expected an integer between 0 and 2**63 - 1",
    "s.yaml:7 code: import is not allowed in scenarios",
    "s.yaml:11 main: open() is not allowed in scenarios: scenarios cannot reach files, "
    "processes or the network",
    "s.yaml:12 main: unknown worker 'wroker1' (did you mean 'worker1'?); workers: worker0, "
    "worker1",
    "s.yaml:13 main: while loops are not allowed; use for ... in range(...)",
    "s.yaml:16 backward: unknown root 'los': roots must be names assigned in main (did you mean "
    "'loss'?)",
]


def _problems(text: str) -> ScenarioProblems:
    with pytest.raises(ScenarioProblems) as info:
        load_scenario_text(textwrap.dedent(text), path="s.yaml")
    return info.value


def test_every_problem_is_reported_in_file_order() -> None:
    err = _problems(MANY)
    assert err.lines() == MANY_LINES
    assert err.one_line() == MANY_LINES[0] + " (and 6 more problems)"
    assert err.exit_code == 2


def test_a_bad_statement_does_not_make_its_names_unknown_later() -> None:
    # t2 = open(...) is refused; t2 and loss are still defined for the lines below
    err = _problems(MANY)
    assert not any("unknown name" in line or "unknown root 'loss'" in line
                   for line in err.lines())


def test_one_problem_is_a_plain_scenario_error() -> None:
    with pytest.raises(ScenarioError) as info:
        load_scenario_text("name: x\nworkers: [w0]\nmain: |\n  loss = open('x')\n"
                           "backward: [loss]\n", path="s.yaml")
    assert not isinstance(info.value, ScenarioProblems)
    assert info.value.lines() == [info.value.one_line()]


def test_problems_beyond_the_limit_are_counted() -> None:
    n = MAX_PROBLEMS_SHOWN + 5
    body = "".join(f"  x{i} = eval('1')\n" for i in range(n))
    err = _problems(f"name: x\nworkers: [w0]\nmain: |\n{body}  loss = x0\nbackward: [loss]\n")
    lines = err.lines()
    assert len(err.problems) == n
    assert len(lines) == MAX_PROBLEMS_SHOWN + 1
    assert lines[0].startswith("s.yaml:4 main: eval() is not allowed")
    assert lines[-1] == "and 5 more problems"


def test_a_program_that_does_not_parse_stops_before_the_checks() -> None:
    # main's names are unknown, so the roots are not checked: only the syntax errors show
    err = _problems("name: x\nworkers: [w0]\ncode: |\n  def f(:\n      pass\nmain: |\n"
                    "  loss = (\nbackward: [nothing]\n")
    assert [line.split(":", 2)[1] for line in err.lines()] == ["4 code", "7 main"]


def test_check_prints_every_problem_and_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(MANY)
    result = CliRunner().invoke(app, ["check", str(path)])
    assert result.exit_code == 2
    expected = [f"error: {tmp_path}/{line}" for line in MANY_LINES]
    assert [line for line in result.output.splitlines() if line.strip()] == expected


@pytest.mark.parametrize(("name", "rule"), [
    ("__call", "names starting with '__' or '_dv' are reserved for distviz"),
    ("_dv_add", "names starting with '__' or '_dv' are reserved for distviz"),
    ("len", "it is a builtin of the scenario language"),
    ("micro", "it is the name of a param"),
    ("_call_method", "function names may not start with '_'"),  # where the language refuses it
])
def test_a_refused_function_name_states_the_rule(tmp_path: Path, name: str, rule: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(f"name: x\nworkers: [w0, w1]\nparams: {{micro: 2}}\ncode: |\n"
                    f"  def {name}(x):\n      return x\nmain: |\n"
                    f"  loss = torch.rand((), requires_grad=True)\nbackward: [loss]\n")
    try:
        load_scenario(path)
    except ScenarioError as err:
        assert err.one_line() == (f"{path}:5 code: cannot define a function named '{name}': "
                                  f"{rule}; choose another name")
    else:
        assert name == "_call_method", f"{name} should be refused"


def test_every_problem_of_one_rpc_call_is_reported() -> None:
    # a misspelled worker does not hide a misspelled function, nor a bad argument after it
    err = _problems("""\
        name: x
        workers: [worker0, worker1]
        code: |
          def my_add(a, b):
              return a + b
        main: |
          t1 = torch.rand((3, 3), requires_grad=True)
          t3 = rpc.rpc_sync("wroker1", my_ad, args=(t1, t22))
          loss = t3.sum()
        backward: [loss]
        """)
    assert err.lines() == [
        "s.yaml:8 main: unknown worker 'wroker1' (did you mean 'worker1'?); workers: worker0, "
        "worker1",
        "s.yaml:8 main: unknown name 'my_ad' (did you mean 'my_add'?)",
        "s.yaml:8 main: unknown name 't22'",
    ]


def test_an_unknown_function_does_not_hide_its_bad_argument() -> None:
    err = _problems("name: x\nworkers: [w0]\nmain: |\n  t1 = torch.ones(2, requires_grad=True)\n"
                    "  loss = sumx(t22)\nbackward: [loss]\n")
    assert [line.split(" main: ")[1] for line in err.lines()] == [
        "unknown function 'sumx' (did you mean 'sum'?)", "unknown name 't22'"]
