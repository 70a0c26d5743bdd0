"""``distviz trace`` on real, unchanged RPC programs (``tests/programs/``).

Each program runs once per module (``traced``) and the tests read what it left: the exit
status, the summary, ``index.json`` and the traces. A test names the runs it reads with
``@pytest.mark.runs(...)``: the runs of the selected tests go two at a time (``side_by_side``),
each in its own folder with its own rendezvous files (the ports are the kernel's). The
programs are written the way PyTorch's RPC tutorials write them and are started with
``torch.multiprocessing.spawn``; every run checks that no process of the program is left
behind.
"""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from builders.traced import (
    PROGRAMS,
    ROOT,
    _environment,
    finish,
    run_traced,
    trace_command,
)
from guards import HANG_GUARD_S

from distviz.judge import legality
from distviz.replay import replay
from distviz.trace import Trace, load

pytestmark = pytest.mark.rpc


def _pairs_complete(t: Trace) -> bool:
    return all(p["send"] is not None and p["recv"] is not None for p in t.pairs())


def _leaves(t: Trace) -> set[str]:
    return {n.var for n in t.nodes if n.kind == "accumulate_grad" and n.var}


# -- the four tutorial programs ------------------------------------------------------------------

@pytest.mark.runs("rnn")
def test_rnn_tutorial_every_context_recorded_named_and_exact(traced: Any) -> None:
    run = traced("rnn")
    assert run.code == 0, run.stdout + run.stderr[-3000:]
    assert [(c["initiator"], c["context"]) for c in run.index["contexts"]] == [
        ("trainer", 1), ("trainer", 2)]
    t = run.context("trainer", 1)
    assert t.workers == ["ps", "trainer"] and t.initiator == "trainer"
    # embedding + decoder on the parameter server behind RRefs, the LSTM on the trainer
    assert {"ps.encoder.weight", "ps.decoder.weight", "ps.decoder.bias",
            "trainer.rnn.weight_ih_l0", "trainer.rnn.weight_hh_l1"} <= _leaves(t)
    assert all(n.var for n in t.nodes if n.kind == "accumulate_grad")
    assert t.passes[0].root_vars == ["loss"]
    # three send/recv pairs: the embedding's result, the decoder's argument and result
    assert len(t.pairs()) == 3 and _pairs_complete(t)
    sites = [(c.func, c.result_var, c.site) for c in t.rpc_calls]
    assert sites == [
        ("_call_method(EmbeddingTable.forward)", "emb",
         "tests/programs/rnn/rnn.py:15 in _remote_method <- tests/programs/rnn/rnn.py:62 in "
         "forward <- tests/programs/rnn/main.py:43 in _run_trainer <- "
         "tests/programs/rnn/main.py:61 in run_worker"),
        ("_call_method(Decoder.forward)", "decoded",
         "tests/programs/rnn/rnn.py:15 in _remote_method <- tests/programs/rnn/rnn.py:65 in "
         "forward <- tests/programs/rnn/main.py:43 in _run_trainer <- "
         "tests/programs/rnn/main.py:61 in run_worker")]
    # one inter-op thread: the order is compared exactly, and agrees
    assert t.real is not None and t.real["interop_threads"] == 1
    assert all(c["agreement"] == "agrees" and c["outcome"] == "completed"
               for c in run.index["contexts"])
    rp = replay(t)
    from distviz.judge.agreement import compare
    agreement = compare(t, rp)
    assert agreement.exact and agreement.order and agreement.leaves
    # gradients by leaf: get_gradients on every worker has exactly the leaves the replay fills
    assert set(t.real["gradients"]) == set(rp.accumulated)
    assert run.row("trainer", 2)["change"] == "same shape"
    # where each real backward spent its time, as distviz replay says it from the trace file
    from distviz.analyses.timing import analyze
    timing = analyze(t)
    line = timing.summary()[0] if timing is not None else ""
    assert line.startswith("time: backward ") and run.row("trainer", 1)["time"] == line[6:]
    assert f"trainer context 1: {line[6:]}" in run.stdout
    assert "critical path" in run.row("trainer", 2)["time"]


@pytest.mark.runs("rnn", "pipeline")
def test_observed_orders_obey_the_fast_mode_rules_checked_with_several_threads(
        traced: Any) -> None:
    # the rules the legality check applies hold on every exact real run: PyTorch is the oracle
    for name in ("rnn", "pipeline"):
        for t in traced(name).traces.values():
            assert legality.check(t) == [], name


@pytest.mark.runs("ps")
def test_parameter_server_with_two_concurrent_trainers(traced: Any) -> None:
    run = traced("ps")
    assert run.code == 0, run.stdout + run.stderr[-3000:]
    assert sorted((c["initiator"], c["context"]) for c in run.index["contexts"]) == [
        ("trainer_1", 1), ("trainer_1", 2), ("trainer_2", 1), ("trainer_2", 2)]
    for name in ("trainer_1", "trainer_2"):
        t = run.context(name, 1)
        # only the workers of this context: the other trainer is not in it
        assert t.workers == ["parameter_server", name]
        assert _leaves(t) == {"parameter_server.model.fc1.weight",
                              "parameter_server.model.fc1.bias",
                              "parameter_server.model.fc2.weight",
                              "parameter_server.model.fc2.bias"}
        assert t.real is not None and t.real["outcome"] == "completed"
        # the shared leaves ran once each for this context, whatever the other trainer did
        ran = [e["node"] for e in t.real["events"]]
        assert len(ran) == len(set(ran))
        assert run.row(name, 2)["change"] == "same shape"
    assert all(c["agreement"] == "agrees" for c in run.index["contexts"]), run.index


@pytest.mark.runs("pipeline")
def test_pipeline_of_two_shards_behind_rrefs_with_micro_batches(traced: Any) -> None:
    run = traced("pipeline")
    assert run.code == 0, run.stdout + run.stderr[-3000:]
    assert [c["context"] for c in run.index["contexts"]] == [2]     # --contexts 2
    t = run.context("master", 2)
    assert t.workers == ["master", "worker1", "worker2"]
    assert {"worker1.seq.0.weight", "worker1.seq.0.bias", "worker2.fc.weight",
            "worker2.fc.bias"} == _leaves(t)
    assert _pairs_complete(t)
    # each shard fetches its micro-batch with to_here(), in the shard's own code
    fetches = [c for c in t.rpc_calls if c.api == "to_here"]
    assert {c.caller for c in fetches} == {"worker1", "worker2"}
    assert all(c.site and c.site.startswith("tests/programs/pipeline.py:") and
               c.site.endswith(" in forward") for c in fetches)
    assert run.row("master", 2)["agreement"] == "agrees"


@pytest.mark.runs("ddp")
def test_ddp_with_a_remote_module(traced: Any) -> None:
    run = traced("ddp")
    assert run.code == 0, run.stdout + run.stderr[-3000:]
    for name in ("trainer0", "trainer1"):
        t = run.context(name, 1)
        assert t.workers == [name, "ps"]
        # DDP's module. prefix dropped; the RemoteModule's EmbeddingBag named on its owner
        assert _leaves(t) == {f"{name}.fc.weight", f"{name}.fc.bias", "ps.weight"}
        assert run.row(name, 1)["agreement"] == "agrees"


# -- hangs, errors, crashes ----------------------------------------------------------------------

@pytest.mark.runs("hang")
def test_a_predicted_hang_is_explained_in_the_programs_terms_and_stops_it(traced: Any) -> None:
    run = traced("hang")
    assert run.code == 6, run.stdout + run.stderr[-3000:]
    text = run.stderr
    assert "the replay predicts that this backward hangs" in text
    assert ("the result of rpc_sync(scale) at tests/programs/hang_unused.py:28 in forward <- "
            "tests/programs/hang_unused.py:40 in run_worker, assigned to `checked`, is not used "
            "by the loss (`loss`)") in text
    assert "use `checked` in the loss" in text
    t = run.context("worker0", 1)
    assert t.real is not None and t.real["outcome"] == "skipped"
    assert replay(t).outcome == "hang"
    assert "distviz stopped the program" in run.stdout


def test_ctrl_c_with_on_hang_continue_keeps_the_observed_hang(tmp_path: Path) -> None:
    program = [str(PROGRAMS / "hang_unused.py")]
    proc = subprocess.Popen(trace_command(tmp_path, program, "--on-hang", "continue",
                                          "--hang-timeout", "2"),
                            cwd=ROOT, env=_environment(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    trace_file = tmp_path / "traces" / "worker0.ctx1.trace.json"
    deadline = time.monotonic() + HANG_GUARD_S
    while time.monotonic() < deadline:
        if trace_file.exists() and '"outcome":"hang"' in trace_file.read_text():
            break
        time.sleep(0.3)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=HANG_GUARD_S)
    run = finish(tmp_path, proc, stdout, stderr)
    assert run.code == 130, stdout + stderr[-3000:]
    assert "PyTorch's backward has not returned after 2 s: it hangs, as the replay predicts." \
        in stderr
    # the explanation is printed once while the program runs (and once in the summary)
    assert stderr.count("is not used by the loss (`loss`)") == 1, stderr
    assert stdout.count("is not used by the loss (`loss`)") == 1, stdout
    t = run.context("worker0", 1)
    assert t.real is not None and t.real["outcome"] == "hang"
    assert "after_hang" not in t.real
    assert [e["node"] for e in t.real["events"]]      # what ran before it stopped
    row = run.row("worker0", 1)
    assert (row["outcome"], row["real"]) == ("hang", "hang")    # it ran: never "skipped"
    assert "interrupted" in stdout


def test_an_error_after_an_observed_hang_is_reported_as_its_consequence(
        tmp_path: Path) -> None:
    # worker1's backward takes 8 s, then raises: a hang for --hang-timeout 2, which PyTorch
    # ends with an error; the hang stays the outcome and the error is what came after it
    run = run_traced(tmp_path, [str(PROGRAMS / "faults.py"), "late-raise"], "--on-hang",
                     "continue", "--hang-timeout", "2")
    assert run.code == 1, run.stdout + run.stderr[-3000:]     # the program's own status
    t = run.context("worker0", 1)
    assert t.real is not None and t.real["outcome"] == "hang"
    assert "gradient rejected late by Late.backward" in t.real["after_hang"]
    row = run.row("worker0", 1)
    assert (row["outcome"], row["real"]) == ("hang", "hang")
    # the replay completes: slow or hung, the time-out cannot tell; said once, never "differs"
    assert (row["agreement"], row["predicted"]) == ("not compared", "completed"), row
    assert run.stderr.count("PyTorch's backward had not returned after 2 s, while the replay "
                            "completes") == 1, run.stderr
    assert "it hangs" not in run.stderr
    assert "after the hang, PyTorch's backward raised: " in run.stderr


@pytest.mark.runs("raise")
def test_an_error_in_the_backward_is_explained_and_the_status_is_the_programs(
        traced: Any) -> None:
    run = traced("raise")
    assert run.code == 1, run.stdout + run.stderr[-3000:]
    row = run.row("worker0", 1)
    assert row["outcome"] == "error"
    assert "gradient rejected by Checked.backward" in row["explanation"]
    assert "on worker1 while running CheckedBackward" in row["explanation"]
    assert "tests/programs/faults.py:33 in Checked.backward" in row["explanation"]
    assert "the program exited with status 1" in run.stdout


@pytest.mark.runs("crash")
def test_a_worker_killed_mid_backward_keeps_every_trace_so_far(traced: Any) -> None:
    run = traced("crash")
    assert run.code == 1, run.stdout + run.stderr[-3000:]
    first = run.context("worker0", 1)
    assert first.real is not None and first.real["outcome"] == "completed"
    assert run.row("worker0", 1)["agreement"] == "agrees"
    second = run.context("worker0", 2)      # recorded before the backward that killed worker1
    assert len(second.nodes) == len(first.nodes) and _pairs_complete(second)
    assert run.row("worker0", 2)["outcome"] in ("unfinished", "error")


@pytest.mark.runs("no-backward")
def test_a_program_that_never_calls_backward(traced: Any) -> None:
    run = traced("no-backward")
    assert run.code == 0, run.stdout + run.stderr[-3000:]
    assert run.index["contexts"] == []
    assert "no context was recorded" in run.stdout


def test_a_program_without_rpc_says_nothing_was_recorded_not_that_it_agrees(
        tmp_path: Path) -> None:
    proc = subprocess.run(trace_command(tmp_path, ["-c", "print('no rpc here')"]), cwd=ROOT,
                          env=_environment(tmp_path), capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "no rpc here"
    assert lines[1].startswith("distviz trace: 0 contexts recorded in ")
    assert lines[1].endswith(f" s; index {tmp_path / 'traces' / 'index.json'}")
    assert lines[-1] == "exit status 0: the program succeeded; no context was recorded to check"
    assert "ctx<N>" not in proc.stdout and "agrees" not in proc.stdout


@pytest.mark.runs("outside")
def test_backward_outside_a_context(traced: Any) -> None:
    run = traced("outside")
    assert run.code == 1, run.stdout + run.stderr[-3000:]
    assert ("dist_autograd.backward(1000, ...) was called outside a dist_autograd context "
            "(PyTorch: Could not find autograd context with id: 1000)") in run.stdout


# -- several backward passes in one context -----------------------------------------------------

def _printed_sums(stdout: str) -> dict[int, dict[str, float]]:
    """``get_gradients`` sums by leaf after each pass, as ``passes.py`` prints them."""
    out: dict[int, dict[str, float]] = {}
    for line in stdout.splitlines():
        if line.startswith("pass "):
            head, rest = line.split(": ", 1)
            words = rest.split()
            out[int(head.split()[1])] = {words[i]: float(words[i + 1])
                                         for i in range(0, len(words), 2)}
    return out


def _traced_sums(t: Trace) -> dict[str, float]:
    assert t.real is not None
    return {nid.split("(")[1].rstrip(")"): g["sum"] for nid, g in t.real["gradients"].items()}


@pytest.mark.runs("retain")
def test_a_second_pass_with_retain_graph_is_recorded_and_agrees(traced: Any) -> None:
    run = traced("retain")
    assert run.code == 0, run.stdout + run.stderr[-3000:]
    row = run.row("worker0", 1)
    assert (row["passes"], row["outcome"], row["agreement"]) == (3, "completed", "agrees"), row
    t = run.context("worker0", 1)
    first = (["worker0/SumBackward0#2"], True, ["loss"])
    assert [(p.roots, p.retain_graph, p.root_vars) for p in t.passes][:2] == [first] * 2
    assert t.passes[2].root_vars == ["scaled"] and t.passes[2].retain_graph
    assert t.meta["traced"]["backward_sites"] == [
        f"tests/programs/passes.py:{n} in run_worker" for n in (38, 40, 43)]
    assert t.real is not None and t.real["passes_run"] == 3
    assert len(t.real["pass_seconds"]) == 3 and t.real["pass_start_us"][0] == 0.0
    ran = [sorted(e["node"] for e in t.real["events"] if e["pass"] == k) for k in (0, 1, 2)]
    # the first two passes ran the graph of their time, whose nodes kept their ids when the
    # third pass's root (computed after them) was recorded with them
    assert ran[0] == ran[1] and len(ran[0]) == len(set(ran[0]))
    new = set(n.id for n in t.nodes) - set(ran[0])
    assert sorted(i.split("#")[0] for i in new) == ["worker0/MulBackward0",
                                                     "worker0/SumBackward0"]
    assert t.passes[2].roots[0] in new and new <= set(ran[2])
    rp = replay(t)
    assert rp.outcome == "completed"
    assert {a.var: a.count for a in rp.accumulated.values()} == {"x": 3, "w": 3}
    assert [sorted(n for w in p.values() for n in w) for p in rp.order] == ran
    # get_gradients accumulated twice, as the program printed it after each pass, then a third
    printed = _printed_sums(run.stdout)
    assert printed[2] == pytest.approx({k: 2 * v for k, v in printed[1].items()}, rel=1e-6)
    assert _traced_sums(t) == pytest.approx(printed[3], rel=1e-9)
    # the fourth pass follows another RPC: not recorded, named in a note; PyTorch still ran it
    assert 4 in printed
    assert ("worker0: context 1: pass 4 was not recorded: the program made 1 RPC in the "
            "context since pass 3 (rpc_sync(torch.add) at tests/programs/passes.py:45 in "
            "run_worker); a trace's passes share one graph, in which every send takes part in "
            "each pass, so the trace keeps passes 1 to 3") in run.index["notes"]
    lines = run.stdout.splitlines()
    assert "passes" in next(line for line in lines if line.startswith("initiator")).split()


@pytest.mark.runs("no-retain")
def test_a_second_pass_without_retain_graph_is_predicted_and_explained(traced: Any) -> None:
    run = traced("no-retain")
    assert run.code == 1, run.stdout + run.stderr[-3000:]      # the program's own status
    explained = ("pass 2 (tests/programs/passes.py:40 in run_worker) goes through the graph a "
                 "second time: MulBackward0 on worker0 (`sq`) needs its saved tensors, but pass "
                 "1 freed them: it ran without retain_graph=True; fix: pass retain_graph=True to "
                 "the backward at tests/programs/passes.py:38 in run_worker")
    predicted = run.stderr.index(f"the replay predicts that pass 2 raises: {explained}")
    assert predicted < run.stderr.index("Error on Node 0: Trying to backward through the graph "
                                        "a second time")     # before PyTorch raised it
    row = run.row("worker0", 1)
    assert (row["passes"], row["outcome"], row["agreement"]) == (2, "error", "agrees"), row
    assert row["explanation"].startswith(explained + "; the backward raised: Error on Node 0: ")
    t = run.context("worker0", 1)
    assert [p.retain_graph for p in t.passes] == [False, False]
    assert t.real is not None and t.real["outcome"] == "error" and t.real["passes_run"] == 2
    rp = replay(t)
    assert rp.error is not None and rp.error.pass_index == 1
    assert rp.error.node == "worker0/MulBackward0#1"
    # the second pass raised before any leaf: get_gradients holds the first pass's only
    assert _traced_sums(t) == pytest.approx(_printed_sums(run.stdout)[1], rel=1e-9)
    assert "the program exited with status 1" in run.stdout


# -- bad input -----------------------------------------------------------------------------------

def test_command_not_found_or_not_executable(tmp_path: Path) -> None:
    env = _environment(tmp_path)
    missing = subprocess.run([sys.executable, "-m", "distviz", "trace", "--",
                              "no-such-program-here", "x"], cwd=tmp_path, env=env,
                             capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert missing.returncode == 127
    assert missing.stderr.strip().splitlines()[-1] == (
        "error: no-such-program-here: command not found (not on PATH)")
    script = tmp_path / "script.sh"
    script.write_text("#!/bin/sh\n")
    plain = subprocess.run([sys.executable, "-m", "distviz", "trace", "--", str(script)],
                           cwd=tmp_path, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert plain.returncode == 126
    assert "not an executable file" in plain.stderr


def test_port_already_in_use(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        env = _environment(tmp_path)
        env["RPC_INIT_METHOD"] = f"tcp://127.0.0.1:{port}"
        proc = subprocess.run(trace_command(tmp_path, [str(PROGRAMS / "faults.py"), "raise"]),
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
        run = finish(tmp_path, proc, proc.stdout, proc.stderr)
    assert run.code == 1, proc.stdout + proc.stderr[-3000:]
    assert "worker0: rpc.init_rpc failed:" in run.stdout
    assert "in use" in run.stdout.lower()


def test_bad_options_are_refused_before_anything_runs(tmp_path: Path) -> None:
    for options, message in ((["--contexts", "second"], "--contexts second: expected all, first"),
                             (["--on-hang", "wait"], "--on-hang wait: expected stop or"),
                             (["--hang-timeout", "0"], "--hang-timeout 0: expected a positive")):
        proc = subprocess.run([sys.executable, "-m", "distviz", "trace", *options, "--", "true"],
                              cwd=tmp_path, env=_environment(tmp_path), capture_output=True,
                              text=True, timeout=HANG_GUARD_S)
        assert proc.returncode == 2 and message in proc.stderr, proc.stderr


# -- the Python API ------------------------------------------------------------------------------

def test_backward_and_record_observe_api(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "scripts" / "api_observe.py"),
                           str(tmp_path)], cwd=ROOT, env=_environment(tmp_path),
                          capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # torch 2.8's gloo prints "[Gloo] Rank N is connected to M peer ranks. ..." on the stdout of
    # each process that joins RPC (2.4.1, 2.11.0, 2.14.1 and 2.15.0 print nothing): torch's own
    lines = [ln for ln in proc.stdout.splitlines() if not ln.startswith("[Gloo] ")]
    assert lines[:3] == ["backward: completed", "record before: None", "record after: completed"]
    assert lines[3].startswith("hang: predicted: ") and "assigned to `unused`" in lines[3]
    assert "tests/scripts/api_observe.py:68 in worker" in lines[3]
    for name in ("backward.json", "record.json"):
        t = load(tmp_path / name)
        assert t.real is not None and t.real["outcome"] == "completed"
        assert {"worker1.lin.weight", "worker1.lin.bias"} <= _leaves(t)
        assert set(t.real["gradients"]) == set(replay(t).accumulated)
    assert load(tmp_path / "hang.json").real["outcome"] == "skipped"  # type: ignore[index]


@pytest.mark.runs("held")
def test_workers_let_go_of_contexts_that_ended_without_a_round_each(traced: Any) -> None:
    """Five recorded contexts: the initiator drops each one's node references as it ends, the
    parameter server at its next recording (``recorder.sweep``), so after the loop it holds at
    most the last context's, not five; every context agrees."""
    run = traced("held")
    assert run.code == 0, run.stdout + run.stderr[-3000:]
    assert len(run.index["contexts"]) == 5
    assert all(c["agreement"] == "agrees" for c in run.index["contexts"])
    line = next(x for x in run.stdout.splitlines() if x.startswith("held: "))
    counts = dict(zip(line.split()[1::2], (int(n) for n in line.split()[2::2]), strict=True))
    assert counts["worker0"] == 0 and 0 <= counts["worker1"] <= 1, line


@pytest.mark.runs("inplace")
def test_gradients_are_read_before_the_program_changes_them(traced: Any) -> None:
    """The program zeroes every gradient in place on both workers as soon as the backward
    returns: the trace holds what the backward produced (x's gradient is 3 everywhere, the
    weight's nonzero), so nothing reads as an all-zero gradient, and the program's own assert
    on the zeros it wrote holds."""
    run = traced("inplace")
    assert run.code == 0, run.stdout + run.stderr[-3000:]
    row = run.row("worker0", 1)
    assert row["agreement"] == "agrees" and "zeros" not in row["agreement_text"], row
    t = run.context("worker0", 1)
    assert t.real is not None
    grads = t.real["gradients"]
    assert len(grads) == 2 and not any(g["zero"] for g in grads.values()), grads
    assert sorted(g["sum"] for g in grads.values())[-1] == 27.0   # x's: 3 in each of 9 cells


@pytest.mark.runs("unused-tensors")
def test_a_gradient_zero_by_value_is_no_disagreement(traced: Any) -> None:
    """PyTorch's test_backward_unused_tensors: t2's gradient is all zeros through narrow of
    stack, which the graph cannot show; with no reference to decide it, it is not compared."""
    run = traced("unused-tensors")
    assert run.code == 0, run.stdout + run.stderr[-3000:]
    row = run.row("worker0", 1)
    assert row["agreement"] == "agrees", row
    assert "not compared: PyTorch's gradient of t2 is all zeros" in row["agreement_text"]


#: custom_functions.py's cases: context -> (the Python nodes, the leaves whose gradient comes
#: through one and is not compared)
_CUSTOM = {1: ({"SluggishBackward"}, ""), 2: (set(), ""), 3: ({"SplitBackward"}, ""),
           4: ({"NonDiffBackward"}, ""), 5: ({"ZerosBackward"}, "x"),
           6: ({"ConstantBackward"}, "x"), 7: ({"DroppedBackward"}, "x"),
           8: ({"DroppedBackward", "SluggishBackward"}, "y"), 9: ({"SquareBackward"}, "")}


def _printed_gradients(stdout: str) -> dict[int, dict[str, list[float] | None]]:
    """What custom_functions.py printed: per case, x's and y's gradients from PyTorch."""
    out: dict[int, dict[str, list[float] | None]] = {}
    for line in stdout.splitlines():
        k, sep, rest = line.partition(" ")
        if k.isdigit() and sep and rest.startswith("["):
            x, y = json.loads(rest.replace("None", "null"))
            out[int(k)] = {"x": x, "y": y}
    return out


@pytest.mark.runs("custom")
def test_custom_functions_agree_with_pytorch_and_opaque_zeros_are_not_compared(
        traced: Any) -> None:
    """Custom autograd Functions across RPC: the replay agrees with PyTorch's real gradients
    wherever the graph proves them (a loss that is an RPC's result, or its second tensor, with
    a Function that returns None for a float argument), and a zero or a missing gradient that
    comes through a Python backward (zeros_like, a constant, None with
    set_materialize_grads(False)) is "not compared", never "differs"."""
    run = traced("custom")
    assert run.code == 0, run.stdout + run.stderr[-3000:]
    printed = _printed_gradients(run.stdout)
    assert sorted(printed) == sorted(_CUSTOM)
    for k, (python, opaque) in _CUSTOM.items():
        t, row = run.context("worker0", k), run.row("worker0", k)
        assert row["agreement"] == "agrees", (k, row["agreement_text"])
        assert {n.name for n in t.nodes if n.python} == python, k
        assert t.real is not None
        nodes = t.node_map()
        real = {nodes[nid].var: g for nid, g in t.real.gradients.items()}
        for var, grad in printed[k].items():    # the trace holds what the program saw
            assert (real[var]["values"] if var in real else None) == grad, (k, var)
        text = row["agreement_text"]
        if opaque:
            assert (f"not compared: the gradient of {opaque} comes through "
                    f"{sorted(python)[0]}, a custom Function") in text, (k, text)
        else:
            assert "not compared" not in text, (k, text)
        if not opaque:  # proven: the leaves PyTorch stored a gradient for, zero where it is
            assert {nid: a.zero for nid, a in replay(t).accumulated.items()} == {
                nid: g["zero"] for nid, g in t.real.gradients.items()}, k
    assert printed[1] == {"x": [3.0] * 4, "y": None}
    assert printed[2] == {"x": [0.0] * 4, "y": [3.0] * 4}
    assert printed[6]["x"] == [1.0] * 4
    # a backward's None: zeros across an RPC, no gradient at all on the Function's own worker
    assert printed[7]["x"] == [0.0] * 4 and printed[8]["y"] is None
    assert run.context("worker0", 2).passes[0].root_nrs == [1]
