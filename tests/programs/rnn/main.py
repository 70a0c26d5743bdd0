"""PyTorch's RPC RNN tutorial: a trainer and a parameter server, trained with
DistributedOptimizer, one dist_autograd context per iteration.

Usage: python main.py [ITERATIONS]                (both workers, torch.multiprocessing.spawn)
       torchrun --nproc-per-node 2 main.py [ITERATIONS]   (RANK and WORLD_SIZE from torchrun)
RPC_INIT_METHOD picks the RPC rendezvous (default tcp://127.0.0.1:29500).
"""

import os
import sys

import rnn
import torch
import torch.distributed.autograd as dist_autograd
import torch.distributed.rpc as rpc
import torch.multiprocessing as mp
import torch.optim as optim
from torch.distributed.optim import DistributedOptimizer


def _run_trainer(iterations):
    # Hyperparameters: tiny, so the program runs in seconds
    ntoken, ninp, nhid, nlayers = 10, 4, 4, 2
    model = rnn.RNNModel("ps", ntoken, ninp, nhid, nlayers)

    # setup distributed optimizer
    opt = DistributedOptimizer(optim.SGD, model.parameter_rrefs(), lr=0.05)

    criterion = torch.nn.CrossEntropyLoss()

    def get_next_batch():
        for _ in range(iterations):
            data = torch.LongTensor(5, 3) % ntoken
            target = torch.LongTensor(5, 3) % ntoken
            yield data, target

    # train for several iterations
    for epoch in range(1):
        for data, target in get_next_batch():
            # create distributed autograd context
            with dist_autograd.context() as context_id:
                hidden = (torch.zeros(nlayers, 3, nhid), torch.zeros(nlayers, 3, nhid))
                output, hidden = model(data, hidden)
                loss = criterion(output.view(-1, ntoken), target.view(-1))
                # run distributed backward pass
                dist_autograd.backward(context_id, [loss])
                # run distributed optimizer
                opt.step(context_id)
                # not necessary to zero grads since they are
                # accumulated into the distributed autograd context
                # which is reset every iteration.
        print(f"Training epoch {epoch}")


def run_worker(rank, world_size, iterations):
    torch.manual_seed(rank)
    options = rpc.TensorPipeRpcBackendOptions(
        init_method=os.environ.get("RPC_INIT_METHOD", "tcp://127.0.0.1:29500"))
    if rank == 1:
        rpc.init_rpc("trainer", rank=rank, world_size=world_size, rpc_backend_options=options)
        _run_trainer(iterations)
    else:
        rpc.init_rpc("ps", rank=rank, world_size=world_size, rpc_backend_options=options)
        # parameter server does nothing
        pass

    # block until all rpcs finish
    rpc.shutdown()


if __name__ == "__main__":
    iterations = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    if "RANK" in os.environ:       # started by torchrun, which serves the rendezvous
        os.environ.setdefault("RPC_INIT_METHOD", "env://")
        run_worker(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), iterations)
    else:
        world_size = 2
        mp.spawn(run_worker, args=(world_size, iterations), nprocs=world_size, join=True)
