"""Scenario loading, validation and instrumentation (pure: no torch, milliseconds each)."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from guards import HANG_GUARD_S

from distviz.errors import ScenarioError
from distviz.scenario import PassSpec, Program, Scenario, load_scenario, load_scenario_text

ROOT = Path(__file__).resolve().parents[3]
SHIPPED = sorted((ROOT / "scenarios").glob("*.yaml"))

DESIGN_NOTE = """\
name: design-note
description: t5 = (t1 + t2) * t4, with the addition done on worker1.
workers: [worker0, worker1]
seed: 0
code: |
  def my_add(t1, t2):
      return torch.add(t1, t2)
main: |
  t1 = torch.rand((3, 3), requires_grad=True)
  t2 = torch.rand((3, 3), requires_grad=True)
  t3 = rpc.rpc_sync("worker1", my_add, args=(t1, t2))
  t4 = torch.rand((3, 3), requires_grad=True)
  t5 = torch.mul(t3, t4)
  loss = t5.sum()
backward: [loss]
"""


def load(text: str, overrides: dict[str, str] | None = None) -> Scenario:
    return load_scenario_text(textwrap.dedent(text), path="s.yaml", overrides=overrides)


def error(text: str, overrides: dict[str, str] | None = None) -> str:
    with pytest.raises(ScenarioError) as info:
        load(text, overrides)
    message = str(info.value)
    assert "\n" not in message
    return message


def one_worker(main: str, code: str = "", backward: str = "[loss]") -> str:
    code_block = ("code: |\n" + textwrap.indent(textwrap.dedent(code), "  ")) if code else ""
    return ("name: t\nworkers: [worker0, worker1]\n" + code_block + "main: |\n"
            + textwrap.indent(textwrap.dedent(main), "  ") + f"backward: {backward}\n")


def rpc_calls(program: Program) -> list[ast.Call]:
    return [n for n in ast.walk(program.tree) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute) and isinstance(n.func.value, ast.Name)
            and n.func.value.id == "rpc"]


def keywords(call: ast.Call) -> dict[str, object]:
    return {kw.arg: kw.value.value for kw in call.keywords
            if kw.arg and kw.arg.startswith("_dv") and isinstance(kw.value, ast.Constant)}


# -- the design note and the shipped scenarios ------------------------------------------------


def test_design_note_file_is_the_issue_text_exactly() -> None:
    assert (ROOT / "scenarios" / "design_note.yaml").read_text() == DESIGN_NOTE


def test_design_note_scenario_fields() -> None:
    s = load_scenario(ROOT / "scenarios" / "design_note.yaml")
    assert s.name == "design-note"
    assert s.description.startswith("t5 = (t1 + t2) * t4")
    assert s.workers == ["worker0", "worker1"]
    assert s.initiator == "worker0"
    assert s.worker_init == {"worker0": None, "worker1": None}
    assert s.functions == ["my_add"]
    assert s.passes == [PassSpec(roots=["loss"], retain_graph=False, line=15)]
    assert s.seed == 0 and s.params == {}
    assert s.raw_text == DESIGN_NOTE
    assert s.main.first_line == 9 and s.main.key == "main"
    assert s.code is not None and s.code.first_line == 6


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_shipped_scenario_is_valid_and_described(path: Path) -> None:
    s = load_scenario(path)
    assert s.description
    assert len(s.workers) >= 2
    assert rpc_calls(s.main) or (s.code is not None and rpc_calls(s.code))


def test_shipped_scenarios_cover_the_issue_list() -> None:
    names = {p.stem for p in SHIPPED}
    assert {"design_note", "nested", "callback", "fanout", "remote", "param_server",
            "pipeline", "multi_root", "mixed_requires_grad", "builtin_rpc", "unused_result",
            "no_grad_rpc", "fail_backward", "retain_graph", "multi_output"} <= names


def test_param_server_state_lives_on_ps() -> None:
    s = load_scenario(ROOT / "scenarios" / "param_server.yaml")
    assert s.workers == ["trainer", "ps"] and s.initiator == "trainer"
    assert s.worker_state == {"trainer": [], "ps": ["w"]}
    init = s.worker_init["ps"]
    assert init is not None and init.key == "workers.ps.init"


def test_pipeline_params_and_overrides() -> None:
    path = ROOT / "scenarios" / "pipeline.yaml"
    assert load_scenario(path).params == {"micro": 4, "depth": 2, "width": 8}
    s = load_scenario(path, {"micro": "200", "depth": "8"})
    assert s.params == {"micro": 200, "depth": 8, "width": 8}
    assert s.workers == ["stage0", "stage1", "stage2", "stage3"]


def test_retain_graph_passes() -> None:
    s = load_scenario(ROOT / "scenarios" / "retain_graph.yaml")
    assert [(p.roots, p.retain_graph) for p in s.passes] == [(["loss"], True), (["loss"], False)]


# -- line mapping and instrumentation ----------------------------------------------------------


def test_program_lines_are_yaml_file_lines() -> None:
    s = load_scenario_text(DESIGN_NOTE, path="d.yaml")
    lines = sorted({n.lineno for n in ast.walk(s.main.tree) if isinstance(n, ast.stmt)})
    assert lines == [9, 10, 11, 12, 13, 14]
    code = s.main.compile()
    assert code.co_filename == "d.yaml"


def test_rpc_calls_get_line_and_target() -> None:
    s = load(one_worker("""\
        t1 = torch.rand((3,), requires_grad=True)
        t2 = rpc.rpc_sync("worker1", f, args=(t1,))
        t3 = rpc.rpc_async("worker1", f, args=(t1,)).wait()
        fut = rpc.rpc_async("worker1", f, args=(t1,))
        t4 = rpc.remote("worker1", f, args=(t1,)).to_here()
        a, b = rpc.rpc_sync("worker1", g, args=(t1,))
        loss = (t2 + t3 + t4 + fut.wait() + rpc.rpc_sync("worker1", f, args=(t1,))).sum()
        """, code="""\
        def f(x):
            return x
        def g(x):
            return x, x
        """))
    calls = sorted(rpc_calls(s.main), key=lambda c: c.lineno)
    got = [(ast.unparse(call.func), keywords(call)) for call in calls]
    assert got == [
        ("rpc.rpc_sync", {"_dv_line": 10, "_dv_target": "t2"}),
        ("rpc.rpc_async", {"_dv_line": 11, "_dv_target": "t3"}),
        ("rpc.rpc_async", {"_dv_line": 12, "_dv_target": "fut"}),
        ("rpc.remote", {"_dv_line": 13, "_dv_target": "t4"}),
        ("rpc.rpc_sync", {"_dv_line": 14, "_dv_target": None}),
        ("rpc.rpc_sync", {"_dv_line": 15, "_dv_target": None}),
    ]


def test_rpc_calls_inside_code_are_instrumented_too() -> None:
    s = load_scenario(ROOT / "scenarios" / "nested.yaml")
    assert s.code is not None
    (call,) = rpc_calls(s.code)
    assert keywords(call) == {"_dv_line": 10, "_dv_target": "s"}


def test_ticks_in_loops_functions_and_comprehensions() -> None:
    s = load(one_worker("""\
        xs = [i for i in range(3)]
        for i in range(2):
            xs.append(i)
        loss = f(torch.rand(()))
        """, code="def f(x):\n    return x\n"))
    text = ast.unparse(s.main.tree)
    assert "[i for i in range(3) if _dv_tick()]" in text
    assert "for i in range(2):\n    _dv_tick()\n    xs.append(i)" in text
    assert s.code is not None
    assert ast.unparse(s.code.tree).startswith("def f(x):\n    _dv_tick()\n")


def test_mul_and_pow_are_guarded() -> None:
    s = load(one_worker("x = 2 * 3 ** 2\nx *= 2\nx **= 2\nloss = x - 1 + 4 / 2\n"))
    text = ast.unparse(s.main.tree)
    assert "x = _dv_mul(2, _dv_pow(3, 2))" in text
    assert "x = _dv_imul(x, 2)" in text and "x = _dv_ipow(x, 2)" in text
    assert "loss = x - 1 + 4 / 2" in text


# -- the language: what is allowed ------------------------------------------------------------


def test_allowed_constructs() -> None:
    s = load(one_worker("""\
        a = torch.rand((4, 4), requires_grad=True)
        b, c = torch.chunk(a, 2)
        parts = [b, c]
        parts[0] = parts[0] * 2
        total = 0
        for i, p in enumerate(parts):
            if i == 0 and p.shape[0] > 1:
                total = total + p.sum()
            elif i > 5:
                continue
            else:
                total = total + torch.nn.functional.relu(p).mean()
        with torch.no_grad():
            d = torch.linalg.multi_dot([a, a, a])
        e = a @ a.T if micro > 2 else -a
        label = f"{micro:3d} {scale:.2f} {name!r}"
        futs = [rpc.rpc_async(f"worker{k}", torch.add, args=(a, a)) for k in range(1, 2)]
        ys = [fu.wait() for fu in futs]
        r = rpc.remote("worker1", torch.mul, args=(a, 2.0))
        loss = (total + ys[0].sum() + r.to_here().sum() + helper(a, dtype=torch.float64)).sum()
        """, code="""\
        def helper(x, dtype=None, *rest):
            y = x.double() if dtype is not None else x
            return fail_backward(y, "m") if len(rest) > 3 else y
        """).replace("workers:", "params: {micro: 4, scale: 0.5, name: x}\nworkers:"))
    assert s.functions == ["helper"]
    assert s.params == {"micro": 4, "scale": 0.5, "name": "x"}


def test_init_can_call_code_functions_and_use_params() -> None:
    s = load("""\
        name: t
        params: {n: 2}
        workers:
          a: {}
          b:
            init: |
              ws = make(n)
              w0 = ws[0]
        code: |
          def make(k):
              return [torch.rand((2, 2), requires_grad=True) for i in range(k)]
          def use(x):
              return torch.mm(x, w0)
        main: |
          loss = rpc.rpc_sync("b", use, args=(torch.rand((2, 2)),)).sum()
        backward: [loss]
        """)
    assert s.worker_state == {"a": [], "b": ["ws", "w0"]}


def test_worker_forms() -> None:
    s = load("""\
        name: t
        workers:
          w0:
          w1: {}
          w2: {init: "x = torch.zeros(())"}
        main: |
          loss = torch.rand(())
        backward: [loss]
        """)
    assert s.workers == ["w0", "w1", "w2"]
    assert s.worker_init["w0"] is None and s.worker_init["w1"] is None
    init = s.worker_init["w2"]
    assert init is not None and init.first_line == 5


# -- errors -----------------------------------------------------------------------------------


def test_unknown_worker_with_suggestion_names_file_line_and_key() -> None:
    msg = error(one_worker('t = torch.rand(())\nloss = rpc.rpc_sync("wroker1", torch.add, '
                           'args=(t, t))\n'))
    assert msg == ("s.yaml:5 main: unknown worker 'wroker1' (did you mean 'worker1'?); "
                   "workers: worker0, worker1")


def test_unknown_name_suggestion() -> None:
    assert error(one_worker("loss = torch.rand(())\nx = lsos\n")).endswith(
        "s.yaml:5 main: unknown name 'lsos' (did you mean 'loss'?)")


def test_unknown_torch_attribute_suggestion() -> None:
    assert error(one_worker("loss = torch.foo(1)\n")).endswith(
        "torch.foo is not available in scenarios (did you mean torch.floor?)")


def test_name_defined_only_in_a_branch_is_known_after_it() -> None:
    load(one_worker("if True:\n    loss = torch.rand(())\nelse:\n    loss = torch.rand(())\n"))


def test_comprehension_variable_does_not_leak() -> None:
    assert "unknown name 'i'" in error(one_worker("xs = [i for i in range(2)]\nloss = i\n"))


def test_function_locals_are_checked() -> None:
    msg = error(one_worker("loss = f(1)\n", code="def f(x):\n    return y + x\n"))
    assert msg.startswith("s.yaml:5 code: unknown name 'y'")


def test_break_outside_loop() -> None:
    assert "break is only allowed inside a for loop" in error(one_worker("break\nloss = 1\n"))


def test_override_errors() -> None:
    text = "name: t\nworkers: [a]\nparams: {micro: 4, lr: 0.1, flag: true}\nmain: |\n  loss = 1\n" \
           "backward: [loss]\n"
    assert error(text, {"micro": "abc"}) == (
        "--set micro=abc: expected an integer for param 'micro' (default 4)")
    assert error(text, {"lr": "fast"}) == (
        "--set lr=fast: expected a number for param 'lr' (default 0.1)")
    assert error(text, {"flag": "maybe"}) == (
        "--set flag=maybe: expected true or false for param 'flag' (default true)")
    assert error(text, {"mciro": "3"}).startswith(
        "--set mciro=3: no param 'mciro' in this scenario (did you mean 'micro'?)")
    assert load(text, {"flag": "false", "lr": "1e-3"}).params == {"micro": 4, "lr": 0.001,
                                                                "flag": False}


def test_yaml_boolean_key_is_explained() -> None:
    msg = error("name: t\nworkers: [a]\nparams: {on: 1}\nmain: |\n  loss = 1\nbackward: [loss]\n")
    assert msg == ("s.yaml:3: keys must be strings, found True: YAML reads yes/no/on/off/true/false "
                   "as true/false; quote the key")


def test_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="no such scenario file"):
        load_scenario(tmp_path / "missing.yaml")
    with pytest.raises(ScenarioError, match="is a directory"):
        load_scenario(tmp_path)
    binary = tmp_path / "b.yaml"
    binary.write_bytes(b"name: \xff\xfe\n")
    with pytest.raises(ScenarioError, match="not UTF-8"):
        load_scenario(binary)
    big = tmp_path / "big.yaml"
    big.write_text("#" * 2_000_000)
    with pytest.raises(ScenarioError, match="at most 1,000,000 bytes"):
        load_scenario(big)


PATHOLOGICAL = [
    "loss = " + "(" * 300 + "1" + ")" * 300 + "\n",
    "loss = " + "+".join(["1"] * 50000) + "\n",
    "loss = " + "-" * 20000 + "1\n",
    "x = [" * 150 + "]" * 150 + "\nloss = 1\n",
    "loss = 1\n" + "if True:\n" + "".join(" " * (i + 1) + "if True:\n" for i in range(120))
    + " " * 122 + "loss = 2\n",
]


@pytest.mark.parametrize("main", PATHOLOGICAL,
                         ids=["parens", "long_sum", "unary_chain", "nested_lists", "nested_ifs"])
def test_pathological_programs_give_one_line_errors_or_load(main: str) -> None:
    try:
        load(one_worker(main))
    except ScenarioError as exc:
        assert "\n" not in str(exc)


def test_deep_yaml_gives_one_line_error() -> None:
    text = "name: t\nworkers: " + "[" * 5000 + "]" * 5000 + "\nmain: x\nbackward: [x]\n"
    with pytest.raises(ScenarioError) as info:
        load_scenario_text(text, path="deep.yaml")
    assert str(info.value) == "deep.yaml:2: the YAML is nested more than 32 levels deep"


def test_null_bytes_in_program() -> None:
    msg = error('name: t\nworkers: [a]\nmain: "loss = 1\\0"\nbackward: [loss]\n')
    assert msg.startswith("s.yaml:3 main:")


def test_scenario_module_does_not_import_torch() -> None:
    code = ("import sys, distviz.scenario, distviz.scenario.lang\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=HANG_GUARD_S)


def test_folded_description_loses_the_newline_yaml_keeps_at_its_end() -> None:
    text = DESIGN_NOTE.replace("description: t5 = (t1 + t2) * t4, with the addition done on worker1.",
                               "description: >\n  t5 = (t1 + t2) * t4,\n  with the addition on worker1.\n")
    assert load(text).description == "t5 = (t1 + t2) * t4, with the addition on worker1."
