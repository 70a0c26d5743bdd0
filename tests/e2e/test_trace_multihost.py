"""``distviz trace`` across hosts: two network namespaces joined by a veth pair.

Each namespace is a "host" with its own address and only its own loopback; the RNN tutorial
program runs with its parameter server on one and its trainer on the other, each started by
``torchrun`` (two nodes), talking TensorPipe and Gloo over the veth addresses. distviz records
over the program's own RPC agent, so the traces must be those of the same program on one host.
The namespaces are made and removed by the test (it needs root and iproute2's ``ip``, as in
CI); nothing is sent to any address outside them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from builders.traced import PROGRAMS, ROOT, finish, trace_command

from distviz.trace import Trace

pytestmark = pytest.mark.rpc


@dataclass(frozen=True)
class Host:
    netns: str
    veth: str
    address: str


def _ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


@pytest.fixture
def two_hosts() -> Iterator[tuple[Host, Host]]:
    if shutil.which("ip") is None:
        pytest.skip("needs iproute2's `ip` to make network namespaces")
    if os.geteuid() != 0:
        pytest.skip("needs root to make network namespaces")
    tag = os.getpid() % 100_000
    net = f"10.231.{tag % 250}"
    a = Host(f"dvz{tag}a", f"dvz{tag}va", f"{net}.1")
    b = Host(f"dvz{tag}b", f"dvz{tag}vb", f"{net}.2")
    made: list[str] = []
    try:
        for host in (a, b):
            r = _ip("netns", "add", host.netns)
            if r.returncode != 0:
                pytest.skip(f"cannot make a network namespace here: {r.stderr.strip()}")
            made.append(host.netns)
        steps = [("link", "add", a.veth, "type", "veth", "peer", "name", b.veth)]
        for host in (a, b):
            steps += [("link", "set", host.veth, "netns", host.netns),
                      ("-n", host.netns, "addr", "add", f"{host.address}/24", "dev", host.veth),
                      ("-n", host.netns, "link", "set", host.veth, "up"),
                      ("-n", host.netns, "link", "set", "lo", "up")]
        for step in steps:
            r = _ip(*step)
            assert r.returncode == 0, f"ip {' '.join(step)}: {r.stderr}"
        yield a, b
    finally:
        for name in made:     # removing a namespace removes its end of the veth pair
            _ip("netns", "del", name)


def _tx_bytes(host: Host) -> int:
    r = _ip("-n", host.netns, "-s", "-j", "link", "show", host.veth)
    return int(json.loads(r.stdout)[0]["stats64"]["tx"]["bytes"])


def _shape(t: Trace) -> list[tuple[object, ...]]:
    """The graph with every node named by what it is, not by its ``sequence_nr``: a send or
    recv by its message, any other node by its worker, kind, name and variable and the names
    of its next edges' targets. ``sequence_nr`` counts per thread, and the ops the parameter
    server runs for an RPC, like a response's recv, take theirs from whichever RPC agent
    thread ran them, which varies from run to run on one host as on two."""
    nodes = {n.id: n for n in t.nodes}
    name: dict[str, str] = {}
    for start in nodes:                     # post-order, iteratively: targets first
        stack = [(start, False)]
        while stack:
            nid, ready = stack.pop()
            if nid in name:
                continue
            n = nodes[nid]
            if n.msg_id is not None:
                name[nid] = f"{n.worker}/{n.kind}({n.msg_id})"
            elif not ready:
                stack.append((nid, True))
                stack.extend((e[0], False) for e in n.next if e and e[0] not in name)
            else:
                whole = repr((n.worker, n.kind, n.name.rsplit("#", 1)[0], n.var,
                              [name[e[0]] for e in n.next if e]))
                name[nid] = hashlib.sha1(whole.encode()).hexdigest()[:16]
    return sorted((name[n.id], n.kind, n.msg_id, tuple(name[e[0]] for e in n.next if e),
                   n.var, tuple(n.vars)) for n in t.nodes)


@pytest.mark.runs("rnn")
def test_workers_on_two_hosts_give_the_trace_of_one_host(two_hosts: tuple[Host, Host],
                                                         tmp_path: Path, traced: Any) -> None:  # noqa: F811
    a, b = two_hosts
    one_host = traced("rnn")      # the same program and options, both workers on one host
    starts = []
    for rank, host in enumerate((a, b)):
        env = (f"TP_SOCKET_IFNAME={host.veth} GLOO_SOCKET_IFNAME={host.veth} "
               f"RPC_INIT_METHOD=env://")
        starts.append(
            f"ip netns exec {host.netns} env {env} {shlex.quote(sys.executable)} -m "
            f"torch.distributed.run --nnodes 2 --node-rank {rank} --nproc-per-node 1 "
            f"--master-addr {a.address} --master-port 29500 {PROGRAMS / 'rnn' / 'main.py'} 2")
    script = " & ".join(starts) + " & wait"
    before = [_tx_bytes(h) for h in (a, b)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_COLOR": "1", "COLUMNS": "120"}
    cmd = trace_command(tmp_path, [], "--contexts", "all", "--interop-threads", "1")
    cmd = cmd[:cmd.index("--") + 1] + ["sh", "-c", script]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=400)
    run = finish(tmp_path, proc, proc.stdout, proc.stderr)
    assert run.code == 0, proc.stdout + proc.stderr[-3000:]
    sent = [_tx_bytes(h) - x for h, x in zip((a, b), before, strict=True)]
    assert min(sent) > 10_000, f"little traffic on the veth pair: {sent} bytes"
    for k in (1, 2):
        there, here = run.context("trainer", k), one_host.context("trainer", k)
        assert there.workers == here.workers == ["ps", "trainer"]
        assert _shape(there) == _shape(here)
        assert [(c.caller, c.callee, c.func, c.result_var, c.msg_ids, c.site)
                for c in there.rpc_calls] == [
            (c.caller, c.callee, c.func, c.result_var, c.msg_ids, c.site) for c in here.rpc_calls]
        assert run.row("trainer", k)["agreement"] == "agrees"
