"""The docs stay in step with the code: every command's ``--help``, README.md and the pages of
the documentation site (docs/: the command lines they show, the options they name, the exit
codes, docs/layout.md against the packages' docstrings, docs/trace-format.md against what is
written). ``test_doc_examples.py`` runs the pages' examples.

Pure and fast: no torch, no workers. The CLI runs in-process (``--help`` and ``replay --json``
on hand-built traces); source files are read with ``ast``, never imported, where they would
import torch.
"""

from __future__ import annotations

import ast
import difflib
import functools
import importlib.util
import json
import re
import shlex
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
import replay_fixtures as F
import typer.main
import yaml
from typer.testing import CliRunner

from distviz.cli import app
from distviz.errors import ScenarioError
from distviz.judge.agreement import compare, smart_report
from distviz.limits import EXIT_CODES, ExitCode
from distviz.replay import replay
from distviz.replay.values import ACTIONS
from distviz.scenario import load_scenario
from distviz.scenario.shipped import resolve_scenario
from distviz.trace import KINDS, BackwardPass, Node, RpcCall, Trace, loads

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "distviz"
README = ROOT / "README.md"
DOCS = ROOT / "docs"
LAYOUT = DOCS / "layout.md"
TRACE_FORMAT = DOCS / "trace-format.md"
EXIT_CODES_PAGE = DOCS / "reference" / "exit-codes.md"
CLI_PAGE = DOCS / "reference" / "cli.md"
MKDOCS = ROOT / "mkdocs.yml"
#: README.md and every page of the site.
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
README_MAX_LINES = 200

SHELL_FENCES = {"", "sh", "bash", "shell", "console", "zsh"}


def _hook() -> Any:
    """docs/hooks/reference.py, the MkDocs hook that generates the CLI and exit-code reference."""
    spec = importlib.util.spec_from_file_location("docs_reference_hook",
                                                  DOCS / "hooks" / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _pages_text() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in PAGES)


# -- the CLI as click sees it ----------------------------------------------------------------

@functools.cache
def _group() -> Any:
    """The click group typer builds (typer vendors click, so its classes are typer's own)."""
    group = typer.main.get_command(app)
    assert hasattr(group, "commands"), type(group)
    return group


def _registered_names() -> list[str]:
    """Command names from the typer app's registered commands (a new command shows up here)."""
    names = []
    for info in app.registered_commands:
        assert info.callback is not None
        names.append(info.name or info.callback.__name__.lower().replace("_", "-"))
    return names


COMMANDS = _registered_names()


def _help(args: list[str]) -> str:
    result = CliRunner().invoke(app, args, env={"NO_COLOR": "1", "COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    return result.output


def _example_lines(help_text: str) -> list[str]:
    """The command lines of the ``Example:`` block that ends the description of a help text.

    Fails when there is no such block, when it is empty, or when description text follows it
    (anything less indented than the commands before the next section, ``Options:``).
    """
    lines = help_text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == "Example:"]
    assert len(starts) == 1, f"expected one 'Example:' line in:\n{help_text}"
    header = lines[starts[0]]
    header_indent = len(header) - len(header.lstrip(" "))
    examples: list[str] = []
    for line in lines[starts[0] + 1:]:
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        if indent == 0:
            assert line.rstrip().endswith(":"), f"text after the Example: block: {line!r}"
            break                                    # Arguments: / Options: / Commands:
        assert indent > header_indent, (
            f"text after the Example: block: {line!r}; the example must end the help text")
        examples.append(line.strip())
    assert examples, f"the Example: block is empty in:\n{help_text}"
    return examples


# -- checking a distviz command line against the click commands -------------------------------

_OPERATORS = {"|", "||", "&", "&&", ";", ">", ">>", "<", "2>", "(", ")"}


def _segments(text: str) -> list[list[str]]:
    """Split a shell line into simple commands (tokens), dropping comments and redirections."""
    lex = shlex.shlex(text, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    lex.commenters = "#"
    out: list[list[str]] = [[]]
    for tok in lex:
        if tok and set(tok) <= set("|&;<>()"):
            if out[-1] and out[-1][-1].isdigit() and tok.startswith(">"):
                out[-1].pop()                      # 2> file
            out.append([])
        else:
            out[-1].append(tok)
    return [seg for seg in out if seg]


def _distviz_argv(tokens: list[str]) -> list[str] | None:
    """The arguments after ``distviz`` (or ``python -m distviz``), or ``None``."""
    while tokens and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", tokens[0]):
        tokens = tokens[1:]                          # NO_COLOR=1 distviz ...
    if tokens[:1] == ["$"]:
        tokens = tokens[1:]
    if not tokens:
        return None
    program = tokens[0].rsplit("/", 1)[-1]           # .venv/bin/distviz
    if program == "distviz":
        return tokens[1:]
    if re.fullmatch(r"python[\d.]*", program) and tokens[1:3] == ["-m", "distviz"]:
        return tokens[3:]
    return None


def _runs_pytest(tokens: list[str]) -> bool:
    """``python -m pytest ...`` (any python, any path to it) or ``pytest ...``."""
    program = tokens[0].rsplit("/", 1)[-1] if tokens else ""
    return program == "pytest" or (re.fullmatch(r"python[\d.]*", program) is not None
                                   and tokens[1:3] == ["-m", "pytest"])


def _problems(argv: list[str]) -> list[str]:
    """What is wrong with ``distviz <argv>``: unknown command or option, missing option value,
    too many arguments, or a scenario that fails ``load_scenario`` with the given ``--set``."""
    group = _group()
    if not argv or argv[0].startswith("-"):
        top = {o for p in group.params for o in p.opts} | {"--help"}   # --version
        bad = [a for a in argv if a not in top]
        return [f"unknown top-level option(s) {bad}"] if bad else []
    name = argv[0]
    cmd = group.commands.get(name)
    if cmd is None:
        near = difflib.get_close_matches(name, group.commands, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        return [f"unknown command {name!r}{hint}; commands: {', '.join(sorted(group.commands))}"]
    takes_value: dict[str, bool] = {"--help": False}
    n_args = 0
    for p in cmd.params:
        if p.param_type_name == "option":
            for o in p.opts:
                takes_value[o] = not p.is_flag and not p.count
            for o in p.secondary_opts:
                takes_value[o] = False
        elif p.param_type_name == "argument":
            n_args += 1 if p.nargs == 1 else 1_000
    problems: list[str] = []
    positional: list[str] = []
    sets: dict[str, str] = {}
    i = 1
    while i < len(argv):
        tok = argv[i]
        if tok == "--":
            positional.extend(argv[i + 1:])
            break
        if tok.startswith("-") and tok != "-":
            opt, eq, value = tok.partition("=")
            if opt not in takes_value:
                near = difflib.get_close_matches(opt, takes_value, n=1)
                hint = f" (did you mean {near[0]!r}?)" if near else ""
                problems.append(f"distviz {name} has no option {opt!r}{hint}")
            elif takes_value[opt] and not eq:
                if i + 1 >= len(argv):
                    problems.append(f"{opt} needs a value")
                else:
                    value = argv[i + 1]
                    i += 1
            elif eq and not takes_value[opt]:
                problems.append(f"{opt} is a flag and takes no value")
            if opt == "--set" and "=" in value:
                k, v = value.split("=", 1)
                sets[k] = v
        else:
            positional.append(tok)
        i += 1
    if len(positional) > n_args:
        problems.append(f"distviz {name} takes {n_args} argument(s), found {positional}")
    if name in ("run", "check") and positional and "--help" not in argv:
        arg = positional[0]
        path: Path | None = ROOT / arg if arg.startswith("scenarios/") else None
        if re.fullmatch(r"[a-z0-9_-]+", arg):               # a shipped scenario's name
            try:
                path = resolve_scenario(arg)
            except ScenarioError as exc:
                problems.append(f"no shipped scenario {arg!r}: {exc}")
        if path is not None and path.is_file():
            try:
                load_scenario(path, sets)
            except Exception as exc:  # noqa: BLE001 - the message is the point
                problems.append(f"the scenario does not load: {exc}")
    return problems


# -- README parsing ----------------------------------------------------------------------------

def _readme() -> str:
    assert README.is_file(), "README.md is missing"
    return README.read_text(encoding="utf-8")


def _fences(text: str) -> list[tuple[str, list[str]]]:
    """Every fenced code block: ``(info string, lines)``."""
    out: list[tuple[str, list[str]]] = []
    info: str | None = None
    fence = ""
    body: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if info is None:
            m = re.match(r"(`{3,}|~{3,})\s*([\w+-]*)", stripped)
            if m:
                fence, info, body = m.group(1), m.group(2).lower(), []
        elif stripped.startswith(fence) and not stripped[len(fence):].strip():
            out.append((info, body))
            info = None
        else:
            body.append(line)
    return out


def _shell_commands(info: str, lines: list[str]) -> list[str]:
    """The command lines of a shell block (``$ `` prompts in ``console`` blocks; ``\\``
    continuations joined; comments and blank lines dropped)."""
    commands: list[str] = []
    pending = ""
    for raw in lines:
        line = raw.strip()
        if info == "console" and not pending:
            if not line.startswith("$ "):
                continue
            line = line[2:]
        elif line.startswith("$ ") and not pending:
            line = line[2:]
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        commands.append(pending + line)
        pending = ""
    if pending.strip():
        commands.append(pending.strip())
    return commands


def _section(text: str, heading: str) -> str:
    """The text under the first heading matching ``heading`` (a regex), up to the next heading
    of the same or a higher level."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"(#{1,6})\s+(.*)", line)
        if m and re.search(heading, m.group(2), re.IGNORECASE):
            level = len(m.group(1))
            body = []
            for nxt in lines[i + 1:]:
                h = re.match(r"(#{1,6})\s", nxt)
                if h and len(h.group(1)) <= level:
                    break
                body.append(nxt)
            return "\n".join(body)
    raise AssertionError(f"README.md has no heading matching {heading!r}")


def _readme_command_lines(text: str) -> list[str]:
    """Every ``distviz ...`` command line in README.md: in shell fences and in inline code."""
    found: list[str] = []
    for info, lines in _fences(text):
        if info in SHELL_FENCES:
            found.extend(_shell_commands(info, lines))
        elif info in ("text", "txt", "output"):
            found.extend(_shell_commands("console", lines))   # `$ distviz ...` transcripts
    no_fences = re.sub(r"(?ms)^\s*(```|~~~).*?^\s*\1\s*$", "", text)
    found.extend(m.group(1) for m in re.finditer(r"(?<!`)`([^`\n]+)`(?!`)", no_fences))
    return [c for c in found if any(_distviz_argv(seg) is not None for seg in _segments(c))]


# -- (a) --help ----------------------------------------------------------------------------------

def test_registered_commands_are_the_cli_commands() -> None:
    assert sorted(COMMANDS) == sorted(_group().commands)


def test_top_level_help_ends_with_an_example() -> None:
    for line in _example_lines(_help(["--help"])):
        assert line.startswith("distviz "), line


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_help_ends_with_an_example_of_that_command(command: str) -> None:
    for line in _example_lines(_help([command, "--help"])):
        assert line == f"distviz {command}" or line.startswith(f"distviz {command} "), (
            f"the example of `distviz {command}` runs something else: {line!r}")
        argv = _distviz_argv(shlex.split(line))
        assert argv is not None
        problems = [p for p in _problems(argv) if not p.startswith("the scenario does not load")]
        assert not problems, f"{line!r}: {problems}"


@pytest.mark.parametrize("command", COMMANDS)
def test_help_examples_load_their_scenario_with_their_params(command: str) -> None:
    for line in _example_lines(_help([command, "--help"])):
        argv = _distviz_argv(shlex.split(line))
        assert argv is not None
        assert not _problems(argv), f"{line!r}: {_problems(argv)}"


# -- (b) README and the pages: quick start, command lines, options, paths ----------------------

def test_readme_quick_start_has_the_run_and_the_test_commands() -> None:
    section = _section(_readme(), r"^quick start\b")
    commands = [c for info, lines in _fences(section) if info in SHELL_FENCES
                for c in _shell_commands(info, lines)]
    assert len(commands) == 2, f"Quick start shows {len(commands)} shell commands: {commands}"
    runs = [c for c in commands if any(
        (_distviz_argv(seg) or [])[:2] == ["run", "scenarios/design_note.yaml"]
        for seg in _segments(c))]
    tests = [c for c in commands if any(_runs_pytest(seg) for seg in _segments(c))]
    assert len(runs) == 1 and len(tests) == 1 and runs != tests, (
        "Quick start must show one command that runs `distviz run scenarios/design_note.yaml` "
        f"and another that runs `python -m pytest`; found {commands}")


def test_ci_installs_what_the_readme_test_command_installs_and_runs_pytest() -> None:
    """`.ci/run` does the README's test command: the same extras, then pytest."""
    section = _section(_readme(), r"^quick start\b")
    test_command = next(c for info, lines in _fences(section) if info in SHELL_FENCES
                        for c in _shell_commands(info, lines) if "pytest" in c)
    extras = re.search(r"-e '\.\[([\w,]+)\]'", test_command)
    assert extras is not None, test_command
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert f'-e ".[{extras.group(1)}]"' in ci
    assert re.search(r"(?m)^python -m pytest\b", ci)
    assert re.search(r"(?m)^\S*.*python -m mkdocs build --strict\b", ci)


def test_readme_is_a_landing_page() -> None:
    lines = _readme().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"
    links = re.findall(r"\]\((docs/[^)#]+\.md)(?:#[^)]*)?\)", _readme())
    assert len(links) >= 10, links
    missing = [link for link in links if not (ROOT / link).is_file()]
    assert not missing, missing
    assert re.search(r"!\[[^\]]*\]\(docs/images/[\w.-]+\.png\)", _readme()), "no picture"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_distviz_commands_use_existing_commands_and_options(page: Path) -> None:
    lines = _readme_command_lines(page.read_text(encoding="utf-8"))
    bad: list[str] = []
    for line in lines:
        for seg in _segments(line):
            argv = _distviz_argv(seg)
            if argv is not None:
                bad.extend(f"{line!r}: {p}" for p in _problems(argv))
    assert not bad, "\n".join(bad)


def test_the_pages_show_distviz_commands() -> None:
    """The command-line check above reads something (a parser that finds nothing checks nothing)."""
    assert len(_readme_command_lines(_pages_text())) >= 100


def test_options_named_in_prose_exist() -> None:
    """Options quoted on their own (`--hang-timeout S`, `--svg/--png FILE`) belong to some
    distviz command (or to distviz's pytest plugin)."""
    from distviz.tracing.pytest_plugin import OPTIONS

    known = {"--help", *OPTIONS}
    for cmd in _group().commands.values():
        for p in cmd.params:
            known |= set(getattr(p, "opts", [])) | set(getattr(p, "secondary_opts", []))
    unknown = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        no_fences = re.sub(r"(?ms)^\s*(```|~~~).*?^\s*\1\s*$", "", text)
        for m in re.finditer(r"(?<!`)`(--[^`\n]+)`(?!`)", no_fences):
            for tok in m.group(1).split():
                for opt in tok.split("/"):
                    opt = opt.split("=", 1)[0]
                    if opt.startswith("--") and opt not in known:
                        unknown.append(f"{page.relative_to(ROOT)}: {opt}")
    assert not unknown, f"the docs name options no command has: {sorted(set(unknown))}"


def test_paths_the_pages_name_exist() -> None:
    missing = []
    for page in PAGES:
        for m in re.finditer(r"(?<![\w./-])((?:scenarios|docs|tests|bench)/[^\s)\]\[`'\"<>,;|:]*)",
                             page.read_text(encoding="utf-8")):
            path = m.group(1).split("#", 1)[0].rstrip(".")
            if path.rstrip("/") in ("scenarios", "docs", "tests", "bench") or re.search(
                    r"(^|/)[A-Z_]+(\.|/|$)", path):     # a placeholder: scenarios/NAME.yaml
                continue
            if any(ch in path for ch in "*?"):
                if not list(ROOT.glob(path)):
                    missing.append(f"{page.relative_to(ROOT)}: {path}")
            elif not (ROOT / path).exists():
                missing.append(f"{page.relative_to(ROOT)}: {path}")
    assert not missing, f"the docs name paths that do not exist: {sorted(set(missing))}"


def test_every_page_is_in_the_site_navigation() -> None:
    config = yaml.safe_load(MKDOCS.read_text(encoding="utf-8"))
    in_nav: set[str] = set()
    stack: list[Any] = [config["nav"]]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            in_nav.add(item)
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert in_nav <= pages, f"the nav names pages that do not exist: {sorted(in_nav - pages)}"
    assert pages <= in_nav, f"pages missing from mkdocs.yml's nav: {sorted(pages - in_nav)}"


def test_the_site_builds_offline() -> None:
    """No web fonts, and only plugins that need no network (mkdocs build runs in CI)."""
    config = yaml.safe_load(MKDOCS.read_text(encoding="utf-8"))
    assert config["theme"]["name"] == "material" and config["theme"]["font"] is False
    plugins = {next(iter(p)) if isinstance(p, dict) else p for p in config["plugins"]}
    assert plugins <= {"search", "mkdocstrings"}, plugins
    assert config["strict"] is True


# -- (c) exit codes: generated from ExitCode -------------------------------------------------------

def _exit_code_rows(text: str) -> list[list[int]]:
    """The first-column integers of every table whose header starts with an exit-code
    column (``| exit code | meaning |``), one list per table."""
    tables: list[list[int]] = []
    rows: list[int] | None = None
    for line in text.splitlines():
        if not line.strip().startswith("|"):
            rows = None
            continue
        first = line.strip().strip("|").split("|")[0].strip().strip("`")
        if rows is None:
            rows = []
            if re.search(r"\bcode\b", first, re.IGNORECASE):
                tables.append(rows)
            continue
        if re.fullmatch(r"\d+", first):
            rows.append(int(first))
    return tables


def test_the_exit_code_table_is_generated_from_the_exit_code_enum() -> None:
    hook = _hook()
    table = hook.exit_code_table()
    (codes,) = _exit_code_rows(table)
    assert codes == sorted(EXIT_CODES), codes
    for code in ExitCode:
        assert f"| {int(code)} | `{code.name}` | {code.meaning} |" in table
    assert hook.EXIT_CODES_MARK in EXIT_CODES_PAGE.read_text(encoding="utf-8")
    assert hook.on_page_markdown(hook.EXIT_CODES_MARK) == table


def test_no_page_holds_an_exit_code_table_of_its_own() -> None:
    """One table, generated: a hand-written copy would drift from ``ExitCode``."""
    assert _exit_code_rows(_pages_text()) == [], "a page lists exit codes in a table"


def test_the_cli_reference_is_every_command_help() -> None:
    hook = _hook()
    assert hook.CLI_MARK in CLI_PAGE.read_text(encoding="utf-8")
    assert hook.command_names() == list(_group().commands)
    reference = hook.on_page_markdown(hook.CLI_MARK)
    for command in COMMANDS:
        help_text = _help([command, "--help"]).rstrip()
        assert f"## `distviz {command}`" in reference
        assert help_text.replace("Usage: root", "Usage: distviz") in reference or \
            help_text.split("\n", 1)[1] in reference, command


# -- (d) docs/layout.md: the packages and their jobs ----------------------------------------------

def _packages() -> list[str]:
    return sorted(p.parent.relative_to(ROOT).as_posix() + "/" for p in PACKAGE.rglob("__init__.py")
                  if "__pycache__" not in p.parts)


def _job(package: str) -> str:
    """The first paragraph of a package's docstring, on one line, as Markdown writes code."""
    doc = ast.get_docstring(ast.parse((ROOT / package / "__init__.py").read_text(encoding="utf-8")))
    assert doc, f"{package}__init__.py has no docstring: say the package's job in it"
    return " ".join(doc.split("\n\n", 1)[0].split()).replace("``", "`")


def _layout_rows() -> dict[str, str]:
    rows = {}
    for line in LAYOUT.read_text(encoding="utf-8").splitlines():
        m = re.fullmatch(r"\| `(distviz/[\w/]*)` \| (.*) \|", line.strip())
        if m:
            rows[m.group(1)] = m.group(2).strip()
    return rows


def test_layout_is_one_screen() -> None:
    assert len(LAYOUT.read_text(encoding="utf-8").splitlines()) <= 60


def test_layout_lists_every_package_with_its_docstring_job() -> None:
    rows = _layout_rows()
    expected = "\n".join(f"| `{p}` | {_job(p)} |" for p in _packages())
    assert sorted(rows) == _packages(), (
        f"docs/layout.md's packages differ from distviz/'s; the rows, in any order:\n{expected}")
    wrong = [p for p in rows if rows[p] != _job(p)]
    assert not wrong, (f"docs/layout.md's job of {wrong} is not the first paragraph of the "
                       f"package's docstring; the rows:\n{expected}")


def test_package_docstrings_say_what_and_why_in_a_few_lines() -> None:
    long = []
    for package in _packages():
        doc = ast.get_docstring(ast.parse((ROOT / package / "__init__.py").read_text(
            encoding="utf-8"))) or ""
        if not 1 <= len(doc.splitlines()) <= 8:
            long.append(f"{package}: {len(doc.splitlines())} lines")
    assert not long, long


def test_layout_lists_the_stages_in_data_flow_order() -> None:
    text = LAYOUT.read_text(encoding="utf-8")
    stages = ["distviz/scenario/", "distviz/runner/", "distviz/recorder/", "distviz/trace/",
              "distviz/replay/", "distviz/render/", "distviz/cli/"]
    where = [text.find(f"| `{s}`") for s in stages]
    assert -1 not in where, dict(zip(stages, where, strict=True))
    assert where == sorted(where), f"stages out of data-flow order: {stages}"


# -- (e) docs/trace-format.md ----------------------------------------------------------------------

def _documented(text: str, keys: set[str]) -> list[str]:
    return sorted(k for k in keys if f"`{k}`" not in text)


def _full_node() -> Node:
    node = Node(id="worker1/RecvRpcBackward#0", worker="worker1", name="RecvRpcBackward",
                kind="recv", seq=0, next=[("worker1/AddBackward0#1", 0), None], msg_id=1 << 48,
                var="t1", shape=[3, 3], dtype="float32", input_shapes=[[3, 3]], saved=True,
                fault={"kind": "fail", "message": "boom"}, vars=["t3"], call=0, python=True,
                custom="none")
    emitted = set(node.to_json())
    assert emitted == {f.name for f in fields(Node)}, (
        "a Node field is not set here or not emitted by Node.to_json; update this test")
    return node


def test_trace_format_documents_every_top_level_and_node_key() -> None:
    text = TRACE_FORMAT.read_text(encoding="utf-8")
    trace = Trace(workers=["worker0", "worker1"], initiator="worker0", context_id=0,
                  nodes=[_full_node()], passes=[BackwardPass(roots=[], root_nrs=[1])],
                  rpc_calls=[RpcCall("worker0", "worker1", "rpc_sync", "f", False, True)])
    obj = trace.to_json()
    assert not _documented(text, set(obj)), f"top-level keys: {_documented(text, set(obj))}"
    node_keys = set(_full_node().to_json())
    assert not _documented(text, node_keys), f"node keys: {_documented(text, node_keys)}"
    other = set(obj["passes"][0]) | set(obj["rpc_calls"][0]) | set(KINDS)
    assert not _documented(text, other), f"pass/call keys, kinds: {_documented(text, other)}"


def test_trace_format_example_is_a_valid_trace() -> None:
    text = TRACE_FORMAT.read_text(encoding="utf-8")
    blocks = [lines for info, lines in _fences(text) if info == "json"]
    assert blocks, "docs/trace-format.md has no ```json example"
    trace = loads("\n".join(blocks[0]), source="docs/trace-format.md")
    assert trace.real is not None and trace.reference is not None
    assert all(n.id.startswith(f"{n.worker}/") for n in trace.nodes)


def _written_keys(relpath: str, function: str, objects: set[str]) -> set[str]:
    """String keys a function writes: keys of its dict displays and of ``obj["key"] = ...`` for
    ``obj`` in ``objects`` (``Class.method`` for a method). Read with ``ast`` (the runner
    imports torch)."""
    tree: ast.AST = ast.parse((ROOT / relpath).read_text(encoding="utf-8"))
    if "." in function:
        owner, function = function.split(".")
        tree = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == owner)
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function)
    keys: set[str] = set()
    for node in ast.walk(fn):
        if isinstance(node, ast.Dict):
            keys |= {k.value for k in node.keys
                     if isinstance(k, ast.Constant) and isinstance(k.value, str)}
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if (isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                        and t.value.id in objects and isinstance(t.slice, ast.Constant)
                        and isinstance(t.slice.value, str)):
                    keys.add(t.slice.value)
    return {k for k in keys if not k.startswith("_")}


def _status_values() -> set[str]:
    """Every word a reference row's ``status`` can hold (``RowStatus``, which the loader checks),
    after making sure the runner's writer sets ``status`` from its members."""
    from distviz.trace.sections import RowStatus
    tree = ast.parse((ROOT / "distviz/runner/gradients.py").read_text(encoding="utf-8"))
    used: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant)
                and t.slice.value == "status" for t in node.targets):
            used |= {c.attr for c in ast.walk(node.value) if isinstance(c, ast.Attribute)
                     and isinstance(c.value, ast.Name) and c.value.id == "RowStatus"}
    assert used <= set(RowStatus.__members__), used
    return {s.value for s in RowStatus} if used else set()


def test_trace_format_documents_what_the_runner_writes() -> None:
    text = TRACE_FORMAT.read_text(encoding="utf-8")
    keys = (_written_keys("distviz/runner/observe_real.py", "to_json", {"real"})
            | _written_keys("distviz/trace/sections.py", "RealEvent.to_json", set())
            | _written_keys("distviz/runner/gradients.py", "summarize", {"out"})
            | _written_keys("distviz/runner/gradients.py", "compare", {"row"})
            | _written_keys("distviz/runner/supervisor/run.py", "_note_deaths", set()))
    assert "grad_shapes" in keys and "comparable" in keys   # the walk found the writers
    assert not _documented(text, keys), f"real/reference keys: {_documented(text, keys)}"
    statuses = _status_values()
    assert {"match", "mismatch", "zero_unused"} <= statuses
    assert not _documented(text, statuses), f"status values: {_documented(text, statuses)}"


def test_trace_format_documents_the_json_report(tmp_path: Path) -> None:
    text = TRACE_FORMAT.read_text(encoding="utf-8")
    keys: set[str] = set(ACTIONS)
    for trace, name in ((F.design_note(), "dn"), (F.unused_rpc_result(), "un")):
        path = tmp_path / f"{name}.json"
        trace.save(path)
        for mode in ("fast", "smart"):
            result = CliRunner().invoke(app, ["replay", str(path), "--json", "--mode", mode])
            report = json.loads(result.stdout)
            keys |= set(report) | set(report["replay"]) | set(report["agreement"])
            keys |= set(report["replay"]["counts"])
            for step in report["replay"]["steps"]:
                keys |= set(step) | set(step.get("message") or {})
            for entry in (report["replay"]["accumulated"] or {}).values():
                keys |= set(entry)
            if report["replay"]["hang"]:
                keys |= set(report["replay"]["hang"])
            if "smart" in report["agreement"]:
                keys |= set(report["agreement"]["smart"])
        keys |= set(compare(trace, replay(trace)).to_json())
        keys |= set(smart_report(trace, replay(trace, "smart"), replay(trace)).to_json())
    assert "excluded_sends" in keys and "blocked_sends" in keys   # both modes and a hang seen
    assert not _documented(text, keys), f"report keys: {_documented(text, keys)}"


# -- (f) tests/README.md: the tree of test files ---------------------------------------------------

def _tests_readme_tree() -> dict[str, set[str]]:
    """The tree block of tests/README.md: folder -> the names it lists (``test_`` dropped)."""
    text = (ROOT / "tests" / "README.md").read_text(encoding="utf-8")
    blocks = [lines for info, lines in _fences(text) if info == ""]
    assert blocks, "tests/README.md has no tree block"
    tree: dict[str, set[str]] = {}
    folder = ""
    for line in blocks[0]:
        m = re.match(r"(\S+/)\s+(.*)", line)
        if m:
            folder, names = m.group(1), m.group(2)
        else:
            names = line
        tree.setdefault(folder, set()).update(names.split())
    return tree


def test_tests_readme_lists_every_test_module() -> None:
    tree = _tests_readme_tree()
    on_disk: dict[str, set[str]] = {}
    tests = ROOT / "tests"
    for path in [*tests.glob("pure/*/test_*.py"), *tests.glob("e2e/test_*.py")]:
        folder = path.parent.relative_to(tests).as_posix() + "/"
        on_disk.setdefault(folder, set()).add(path.stem.removeprefix("test_"))
    listed = {k: v for k, v in tree.items() if k != "builders/"}
    assert listed == on_disk, {
        k: {"not listed": sorted(on_disk.get(k, set()) - listed.get(k, set())),
            "listed, not on disk": sorted(listed.get(k, set()) - on_disk.get(k, set()))}
        for k in set(listed) | set(on_disk) if listed.get(k) != on_disk.get(k)}
