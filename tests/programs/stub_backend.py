"""``rpc.init_rpc`` with an RPC backend of the program's own whose start is mocked, as
PyTorch's ``RpcTest.test_register_rpc_backend_and_set_and_start_rpc_backend`` does: ``init_rpc``
returns although no agent runs. One process, no worker.

Usage: python stub_backend.py RENDEZVOUS_FILE
"""

import sys
from unittest import mock

import torch.distributed.autograd
import torch.distributed.rpc as rpc
import torch.distributed.rpc.api


class StubAgent:
    def __init__(self, world_size):
        self.world_size = world_size

    def get_worker_infos(self):
        return {rpc.WorkerInfo(name=f"worker{rank}", id=rank) for rank in range(self.world_size)}


def options_handler(**kwargs):
    return mock.Mock()


def init_handler(store, name, rank, world_size, rpc_backend_options):
    return StubAgent(world_size)


with mock.patch.object(torch.distributed.autograd, "_init"), \
        mock.patch.object(torch.distributed.rpc.api, "_set_and_start_rpc_agent"):
    backend = rpc.backend_registry.register_backend("stub_backend", options_handler,
                                                    init_handler)
    result = rpc.init_rpc("worker0", backend=backend, rank=0, world_size=1,
                          rpc_backend_options=rpc.TensorPipeRpcBackendOptions(
                              init_method=f"file://{sys.argv[1]}"))
    print(f"init_rpc returned {result!r}")
    try:
        rpc.get_worker_info()
    except RuntimeError as exc:
        print(f"get_worker_info raised RuntimeError: {exc}")
