"""The program bench_trace_cmd.py traces: PyTorch's RPC RNN tutorial (embedding table and
decoder on a parameter server behind RRefs, an LSTM on the trainer, DistributedOptimizer, one
dist_autograd context per iteration) at a size where one iteration takes tens of milliseconds.

Usage: python bench/train_program.py ITERATIONS RENDEZVOUS_FILE

With ``BENCH_RSS_FILE`` set, the trainer appends its resident set size there after iteration 100,
every 50th after it and the last one (memory must not grow with the number of steps); with
``BENCH_OBJECTS`` also set, it first runs a full garbage collection and adds the number of
objects the collector tracks (a Python object kept per step would show there, free of the
allocator's noise; too slow for a timed run). With ``BENCH_LOOP_FILE``
set, it writes there the seconds its training loop took (every iteration, without the start-up
and the shutdown). With ``BENCH_AB`` also set (under ``distviz trace``), the loop alternates
iterations as traced and with distviz's patches set aside in the trainer (``_patched``), after
``AB_WARMUP`` iterations as traced, and writes the seconds of each kind: the cost of distviz's per-step work,
measured inside one run, where the machine's noise falls on both alike. ``BENCH_AB_ONLY`` (names,
comma-separated: ``rpc_sync``, ``rpc_async``, ``remote``, ``to_here``, ``backward``,
``__enter__``, ``__exit__``, ``_find_builtin``, ``step``: ``DistributedOptimizer.step``) sets
aside only those wrappers: the cost of each part.
"""

from __future__ import annotations

import gc
import os
import sys
import time

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
import torch.nn as nn
import torch.optim as optim
from torch.distributed.optim import DistributedOptimizer
from torch.distributed.rpc import RRef

NTOKEN, NINP, NHID, NLAYERS, SEQ, BATCH = 2000, 64, 64, 2, 16, 16


def _call_method(method, rref, *args, **kwargs):  # type: ignore[no-untyped-def]
    return method(rref.local_value(), *args, **kwargs)


def _remote_method(method, rref, *args, **kwargs):  # type: ignore[no-untyped-def]
    return rpc.rpc_sync(rref.owner(), _call_method, args=[method, rref, *args], kwargs=kwargs)


def _parameter_rrefs(module: nn.Module) -> list[RRef]:
    return [RRef(p) for p in module.parameters()]


class EmbeddingTable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Embedding(NTOKEN, NINP)

    def forward(self, inp: torch.Tensor) -> torch.Tensor:
        return self.encoder(inp)


class Decoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.decoder = nn.Linear(NHID, NTOKEN)

    def forward(self, output: torch.Tensor) -> torch.Tensor:
        return self.decoder(output)


class RNNModel(nn.Module):
    def __init__(self, ps: str) -> None:
        super().__init__()
        self.emb_table_rref = rpc.remote(ps, EmbeddingTable)
        self.rnn = nn.LSTM(NINP, NHID, NLAYERS)
        self.decoder_rref = rpc.remote(ps, Decoder)

    def forward(self, inp: torch.Tensor, hidden: tuple[torch.Tensor, torch.Tensor]
                ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
        emb = _remote_method(EmbeddingTable.forward, self.emb_table_rref, inp)
        output, hidden = self.rnn(emb, hidden)
        return _remote_method(Decoder.forward, self.decoder_rref, output), hidden

    def parameter_rrefs(self) -> list[RRef]:
        return (_remote_method(_parameter_rrefs, self.emb_table_rref) + _parameter_rrefs(self.rnn)
                + _remote_method(_parameter_rrefs, self.decoder_rref))


AB_WARMUP = 25


def _patched() -> list[tuple[object, str, object]]:
    """``(owner, name, distviz's wrapper)`` for every function distviz wraps that a training
    step of the trainer calls (RPCs, backward, the context, module hooks); empty when not
    traced."""
    from torch.distributed.rpc import api, rref_proxy
    from torch.nn.modules import module

    owners = [(rpc, n) for n in ("rpc_sync", "rpc_async", "remote")]
    owners += [(api, n) for n in ("rpc_sync", "rpc_async", "remote")]
    owners += [(rref_proxy, "rpc_async"), (rpc.PyRRef, "to_here"), (dist_autograd, "backward"),
               (dist_autograd.context, "__enter__"), (dist_autograd.context, "__exit__")]
    from torch.jit import _builtins
    owners.append((_builtins, "_find_builtin"))     # PyTorch's RPC looks each function up
    owners.append((DistributedOptimizer, "step"))   # the optimizer's check (its first step)
    out = [(o, n, getattr(o, n)) for o, n in owners if hasattr(getattr(o, n), "__wrapped__")]
    only = os.environ.get("BENCH_AB_ONLY")
    if only:    # set aside only these (by name: rpc_sync, backward, __exit__, ...)
        return [(o, n, w) for o, n, w in out if n in only.split(",")]
    if out:
        out.append((module, "_global_forward_hooks", module._global_forward_hooks))
    return out


def _set_aside(patched: list[tuple[object, str, object]], aside: bool) -> None:
    """Put back PyTorch's own functions (``aside``) or distviz's wrappers."""
    from collections import OrderedDict

    for owner, name, wrapper in patched:
        if name == "_global_forward_hooks":
            value: object = OrderedDict() if aside else wrapper
        else:
            value = wrapper.__wrapped__ if aside else wrapper
        setattr(owner, name, value)


def train(iterations: int) -> None:
    model = RNNModel("ps")
    opt = DistributedOptimizer(optim.SGD, model.parameter_rrefs(), lr=0.05)
    criterion = nn.CrossEntropyLoss()
    rss_file = os.environ.get("BENCH_RSS_FILE")
    patched = _patched() if os.environ.get("BENCH_AB") else []
    spent = {False: 0.0, True: 0.0}     # aside -> seconds
    cpu = {False: 0.0, True: 0.0}       # aside -> the trainer thread's CPU seconds
    started = time.perf_counter()
    for k in range(1, iterations + 1):
        aside = bool(patched) and k > AB_WARMUP and k % 2 == 0
        if patched and k > AB_WARMUP:
            _set_aside(patched, aside)
        t0, c0 = time.perf_counter(), time.thread_time()
        data = torch.randint(NTOKEN, (SEQ, BATCH))
        target = torch.randint(NTOKEN, (SEQ, BATCH))
        with dist_autograd.context() as context_id:
            hidden = (torch.zeros(NLAYERS, BATCH, NHID), torch.zeros(NLAYERS, BATCH, NHID))
            output, hidden = model(data, hidden)
            loss = criterion(output.view(-1, NTOKEN), target.view(-1))
            dist_autograd.backward(context_id, [loss])
            opt.step(context_id)
        if k > AB_WARMUP:   # the first iterations warm up (the first RPCs, the optimizer)
            spent[aside] += time.perf_counter() - t0
            cpu[aside] += time.thread_time() - c0
        if rss_file and k >= 100 and (k == iterations or k % 50 == 0):
            _note_rss(rss_file, k)
    loop_file = os.environ.get("BENCH_LOOP_FILE")
    if loop_file:
        _set_aside(patched, False)
        with open(loop_file, "w", encoding="ascii") as out:
            out.write(f"{time.perf_counter() - started:.6f}\n")
            if patched:
                out.write(f"traced {spent[False]:.6f} aside {spent[True]:.6f} "
                          f"cpu {cpu[False]:.6f} {cpu[True]:.6f} "
                          f"steps {(iterations - AB_WARMUP) // 2}\n")


def _note_rss(path: str, iteration: int) -> None:
    """Append ``<iteration> <trainer's resident set in KiB>`` to ``path`` (and, with
    ``BENCH_OBJECTS``, the number of objects the garbage collector tracks)."""
    objects = ""
    if os.environ.get("BENCH_OBJECTS"):
        gc.collect()
        objects = f" {len(gc.get_objects())}"
    with open("/proc/self/status", encoding="ascii") as fh:
        kib = next(line.split()[1] for line in fh if line.startswith("VmRSS:"))
    with open(path, "a", encoding="ascii") as out:
        out.write(f"{iteration} {kib}{objects}\n")


def run_worker(rank: int, iterations: int, rendezvous: str) -> None:
    torch.manual_seed(rank)
    os.environ.setdefault("TP_SOCKET_IFNAME", "lo")
    options = rpc.TensorPipeRpcBackendOptions(init_method=f"file://{rendezvous}")
    name = "trainer" if rank == 1 else "ps"
    rpc.init_rpc(name, rank=rank, world_size=2, rpc_backend_options=options)
    if rank == 1:
        train(iterations)
    rpc.shutdown()


if __name__ == "__main__":
    mp.spawn(run_worker, args=(int(sys.argv[1]), sys.argv[2]), nprocs=2, join=True)
