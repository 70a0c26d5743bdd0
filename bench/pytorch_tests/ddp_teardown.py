"""PyTorch's DDP teardown deadlock, plain and under ``distviz trace`` (bench/README.md, P1: the
DDP comparison stall).

    python bench/pytorch_tests/ddp_teardown.py [--runs 6] [--rounds 150] [--hogs 2] [--json]

``TensorPipeDdpComparisonTest`` sometimes never ends, traced or not. Its ranks build DDP over a
gloo group, run one dist autograd backward and one local backward, destroy the group, and drop
DDP. Dropping DDP deallocates its ``Reducer`` while the main thread holds the GIL. That
deallocation destroys the gloo process group, which joins gloo's worker threads. If one of
those threads is still releasing the last allreduce's work, and a tensor of that work has a
live Python object, the release needs the GIL. Neither thread can go on.

This script runs the test's body as a loop: each round a fresh gloo group, on four ranks (RPC
and gloo on 127.0.0.1). ``--hogs N`` busy processes stand in for a loaded machine. Runs
alternate plain and ``distviz trace`` (default options). A run that has made no progress for
``--stall-after`` seconds is a stall: every rank's stack is dumped with ``py-spy`` when it is
installed, and every process is killed. Per mode it prints the runs that stalled and the rounds
they reached.

    python bench/pytorch_tests/ddp_teardown.py --rank-program PORT ROUNDS PROGRESS_FILE

is one run's program (what is traced).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

WORLD = 4
HERE = Path(__file__).resolve()


def _round(rank: int, port: int) -> None:
    import torch
    import torch.distributed as dist
    from ddp_uneven_shutdown import compare_step  # this folder: the test's step as a program
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}",
                            world_size=WORLD, rank=rank)
    net = nn.Linear(2, 3)
    ddp = DistributedDataParallel(net)
    compare_step(ddp, net, torch.rand((3, 2)))
    dist.destroy_process_group()
    # leaving this frame drops ddp: the Reducer's dealloc, where the deadlock happens


def _rank(rank: int, port: int, rounds: int, progress: str) -> None:
    import torch
    import torch.distributed.rpc as rpc

    torch.manual_seed(rank)
    rpc.init_rpc(f"worker{rank}", rank=rank, world_size=WORLD,
                 rpc_backend_options=rpc.TensorPipeRpcBackendOptions(
                     init_method=f"tcp://127.0.0.1:{port}"))
    for r in range(rounds):
        _round(rank, port + 1 + r)
        if rank == 0:
            with open(progress, "a", encoding="ascii") as fh:
                fh.write(f"{r + 1}\n")
    rpc.shutdown()


def rank_program(port: int, rounds: int, progress: str) -> None:
    import torch.multiprocessing as mp

    mp.spawn(_rank, args=(port, rounds, progress), nprocs=WORLD, join=True)


def _rounds_done(progress: Path) -> int:
    try:
        lines = progress.read_text(encoding="ascii").split()
    except FileNotFoundError:
        return 0
    return int(lines[-1]) if lines else 0


def _dump(pgid: int, out: Path) -> None:
    spy = shutil.which("py-spy")
    if spy is None:
        return
    pids = subprocess.run(["pgrep", "-g", str(pgid)], capture_output=True, text=True).stdout
    with out.open("w", encoding="utf-8") as fh:
        for pid in pids.split():
            fh.write(f"===== pid {pid}\n")
            fh.flush()
            subprocess.run([spy, "dump", "--native", "--pid", pid], stdout=fh,
                           stderr=subprocess.STDOUT, timeout=60, check=False)


def one_run(mode: str, port: int, rounds: int, stall_after: float, work: Path, k: int
            ) -> dict[str, Any]:
    """One run of ``rounds`` rounds: ``{"mode", "rounds", "stalled", "seconds"}``."""
    progress = work / f"progress-{mode}-{k}"
    program = [sys.executable, str(HERE), "--rank-program", str(port), str(rounds),
               str(progress)]
    argv = program if mode == "plain" else [
        sys.executable, "-m", "distviz", "trace", "-o", str(work / f"traces-{k}"), "--",
        *program]
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    done, seen = 0, time.monotonic()
    while proc.poll() is None:
        time.sleep(1.0)
        now_done = _rounds_done(progress)
        if now_done != done:
            done, seen = now_done, time.monotonic()
        elif time.monotonic() - seen > stall_after:
            _dump(proc.pid, work / f"stall-{mode}-{k}.txt")
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            return {"mode": mode, "rounds": done, "stalled": True,
                    "seconds": round(time.monotonic() - t0, 1)}
    return {"mode": mode, "rounds": _rounds_done(progress), "stalled": proc.returncode != 0,
            "seconds": round(time.monotonic() - t0, 1), "exit": proc.returncode}


def _hogs(n: int) -> list[subprocess.Popen[bytes]]:
    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rank-program", nargs=3, metavar=("PORT", "ROUNDS", "PROGRESS"))
    p.add_argument("--runs", type=int, default=6, help="runs per mode")
    p.add_argument("--rounds", type=int, default=150)
    p.add_argument("--hogs", type=int, default=2, help="busy processes beside the runs")
    p.add_argument("--stall-after", type=float, default=30.0)
    p.add_argument("--port", type=int, default=31000)
    p.add_argument("--keep", type=Path, help="keep dumps and traces here")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if args.rank_program:
        port, rounds, progress = args.rank_program
        rank_program(int(port), int(rounds), progress)
        return
    work = args.keep or Path(tempfile.mkdtemp(prefix="distviz-ddp-"))
    work.mkdir(parents=True, exist_ok=True)
    hogs = _hogs(args.hogs)
    runs: list[dict[str, Any]] = []
    try:
        port = args.port
        for k in range(args.runs):
            for mode in ("plain", "traced"):
                runs.append(one_run(mode, port, args.rounds, args.stall_after, work, k))
                port += args.rounds + 10
                print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    finally:
        for h in hogs:
            h.kill()
    summary = {}
    for mode in ("plain", "traced"):
        mine = [r for r in runs if r["mode"] == mode]
        summary[mode] = {"runs": len(mine), "stalled": sum(r["stalled"] for r in mine),
                         "rounds": [r["rounds"] for r in mine]}
    print(json.dumps(summary) if args.json else
          "\n".join(f"{m}: {s['stalled']} of {s['runs']} runs stalled; rounds reached "
                    f"{s['rounds']} (of {args.rounds})" for m, s in summary.items()))


if __name__ == "__main__":
    main()
