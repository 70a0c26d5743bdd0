"""A parameter server with two trainers, in the style of PyTorch's tutorial "Implementing a
Parameter Server Using Distributed RPC Framework": the model lives on the parameter server,
each trainer calls its forward over RPC and trains it with DistributedOptimizer, one
dist_autograd context per iteration, both trainers at the same time. The trainers wait for
each other around the update (synchronous SGD): an update made while the other trainer's
backward still needs the old weights would make that backward fail ("modified by an inplace
operation").

Usage: python ps_trainers.py [ITERATIONS]          (three processes, torch.multiprocessing.spawn)
       torchrun --nproc-per-node 3 ps_trainers.py  (RANK and WORLD_SIZE from torchrun)
"""

import os
import sys
import threading

import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch import optim
from torch.distributed.optim import DistributedOptimizer
from torch.distributed.rpc import RRef


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(8, 16)
        self.fc2 = nn.Linear(16, 4)

    def forward(self, x):
        x = F.relu(self.fc1(x))
        return F.log_softmax(self.fc2(x), dim=1)


def call_method(method, rref, *args, **kwargs):
    return method(rref.local_value(), *args, **kwargs)


def remote_method(method, rref, *args, **kwargs):
    args = [method, rref] + list(args)
    return rpc.rpc_sync(rref.owner(), call_method, args=args, kwargs=kwargs)


class ParameterServer(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = Net()
        self.barrier = threading.Barrier(2)

    def forward(self, inp):
        return self.model(inp)

    def get_param_rrefs(self):
        return [RRef(param) for param in self.model.parameters()]

    def wait_for_trainers(self):
        self.barrier.wait()


param_server = None
global_lock = threading.Lock()


def get_parameter_server():
    global param_server
    with global_lock:
        if not param_server:
            param_server = ParameterServer()
        return param_server


class TrainerNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.param_server_rref = rpc.remote("parameter_server", get_parameter_server)

    def get_global_param_rrefs(self):
        return remote_method(ParameterServer.get_param_rrefs, self.param_server_rref)

    def forward(self, x):
        return remote_method(ParameterServer.forward, self.param_server_rref, x)

    def sync(self):
        remote_method(ParameterServer.wait_for_trainers, self.param_server_rref)


def run_training_loop(rank, iterations):
    net = TrainerNet()
    opt = DistributedOptimizer(optim.SGD, net.get_global_param_rrefs(), lr=0.03)
    for _ in range(iterations):
        data = torch.randn(6, 8)
        target = torch.randint(0, 4, (6,))
        with dist_autograd.context() as cid:
            model_output = net(data)
            loss = F.nll_loss(model_output, target)
            dist_autograd.backward(cid, [loss])
            net.sync()       # both backward passes are done: the weights may change
            opt.step(cid)
            net.sync()       # both updates are done: the next forward sees them
    print(f"trainer_{rank}: training done", flush=True)


def run_worker(rank, world_size, iterations):
    torch.manual_seed(rank)
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=os.environ.get("RPC_INIT_METHOD", "tcp://127.0.0.1:29500"))
    if rank == 0:
        rpc.init_rpc("parameter_server", rank=rank, world_size=world_size,
                     rpc_backend_options=options)
    else:
        rpc.init_rpc(f"trainer_{rank}", rank=rank, world_size=world_size,
                     rpc_backend_options=options)
        run_training_loop(rank, iterations)
    rpc.shutdown()


if __name__ == "__main__":
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    if "RANK" in os.environ:       # started by torchrun, which serves the rendezvous
        os.environ.setdefault("RPC_INIT_METHOD", "env://")
        run_worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), iterations)
    else:
        mp.spawn(run_worker, args=(3, iterations), nprocs=3, join=True)
