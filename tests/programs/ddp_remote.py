"""DDP combined with the RPC framework, in the style of PyTorch's tutorial "Combining
Distributed DataParallel with Distributed RPC Framework": an EmbeddingBag lives on the
parameter server as a RemoteModule; two trainers run a DDP-wrapped Linear layer on gloo;
DistributedOptimizer updates both; one dist_autograd context per iteration. The parameter
server also plays the tutorial's master: it creates the RemoteModule and starts the trainers.

Usage: python ddp_remote.py [ITERATIONS]   (PG_INIT_METHOD picks the gloo rendezvous)
"""

import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
import torch.optim as optim
from torch.distributed.nn import RemoteModule
from torch.distributed.optim import DistributedOptimizer
from torch.distributed.rpc import RRef
from torch.nn.parallel import DistributedDataParallel as DDP

NUM_EMBEDDINGS = 20
EMBEDDING_DIM = 8


class HybridModel(torch.nn.Module):
    """The model: a remote EmbeddingBag on the parameter server, a local DDP Linear."""

    def __init__(self, remote_emb_module):
        super().__init__()
        self.remote_emb_module = remote_emb_module
        self.fc = DDP(torch.nn.Linear(EMBEDDING_DIM, 4))

    def forward(self, indices, offsets):
        emb_lookup = self.remote_emb_module.forward(indices, offsets)
        return self.fc(emb_lookup)


def _run_trainer(remote_emb_module, rank, iterations):
    model = HybridModel(remote_emb_module)
    # the remote parameters of the embedding table and the local DDP parameters
    model_parameter_rrefs = model.remote_emb_module.remote_parameters()
    for param in model.fc.parameters():
        model_parameter_rrefs.append(RRef(param))
    opt = DistributedOptimizer(optim.SGD, model_parameter_rrefs, lr=0.05)
    criterion = torch.nn.CrossEntropyLoss()

    def get_next_batch():
        for _ in range(iterations):
            num_indices = 6
            indices = torch.LongTensor(num_indices).random_(0, NUM_EMBEDDINGS)
            offsets = torch.LongTensor([0, 2, 4])
            target = torch.LongTensor(3).random_(0, 4)
            yield indices, offsets, target

    for indices, offsets, target in get_next_batch():
        with dist_autograd.context() as context_id:
            output = model(indices, offsets)
            loss = criterion(output, target)
            dist_autograd.backward(context_id, [loss])
            opt.step(context_id)
    print(f"trainer{rank}: training done", flush=True)


def run_worker(rank, world_size, iterations):
    torch.manual_seed(rank)
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=os.environ.get("RPC_INIT_METHOD", "tcp://127.0.0.1:29500"))
    if rank == 2:
        rpc.init_rpc("ps", rank=rank, world_size=world_size, rpc_backend_options=options)
        remote_emb_module = RemoteModule("ps/cpu", torch.nn.EmbeddingBag,
                                         args=(NUM_EMBEDDINGS, EMBEDDING_DIM),
                                         kwargs={"mode": "sum"})
        futs = [rpc.rpc_async(f"trainer{r}", _run_trainer, args=(remote_emb_module, r, iterations))
                for r in (0, 1)]
        torch.futures.wait_all(futs)
    else:
        dist.init_process_group(backend="gloo", rank=rank, world_size=2,
                                init_method=os.environ.get("PG_INIT_METHOD",
                                                           "tcp://127.0.0.1:29501"))
        rpc.init_rpc(f"trainer{rank}", rank=rank, world_size=world_size,
                     rpc_backend_options=options)
    rpc.shutdown()
    if rank != 2:
        dist.destroy_process_group()


if __name__ == "__main__":
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    mp.start_processes(run_worker, args=(3, iterations), nprocs=3, join=True, start_method="fork")
