"""PyTorch's RPC test classes, generated as ``rpc_utils.generate_tests`` generates them, with
their workers spawned (as PyTorch's CI starts them) or, when ``PYTORCH_TESTS_START=fork``,
forked (``MultiProcessTestCase._start_processes`` with the fork context's ``Process``, as
``_spawn_processes`` calls it with spawn's). A forked
worker inherits torch and distviz's hooks from the pytest process; a spawned one imports both
again (about 2 s of CPU a worker, four workers a test). ``tests/e2e/test_pytest_plugin_pytorch.py``
forks; ``bench/bench_pytorch_tests.py`` spawns."""

import os

import torch.multiprocessing
from torch.testing._internal.distributed import rpc_utils


class ForkHelper(rpc_utils.MultiProcessTestCase):
    """``rpc_utils.SpawnHelper`` with its workers forked."""

    def setUp(self):
        super().setUp()
        rpc_utils._check_and_set_tcp_init()
        self._start_processes(torch.multiprocessing.get_context("fork").Process)

    def tearDown(self):
        rpc_utils._check_and_unset_tcp_init()
        super().tearDown()


def generate(prefix, mixin, tests, module_name):
    """``rpc_utils.generate_tests(prefix, mixin, tests, module_name)``, forked on request."""
    if os.environ.get("PYTORCH_TESTS_START") != "fork":
        return rpc_utils.generate_tests(prefix, mixin, tests, module_name)
    out = {}
    for test_class in tests:
        name = f"{prefix}{test_class.__name__}"
        class_ = type(name, (test_class, mixin, ForkHelper), {})
        class_.__module__ = module_name
        out[name] = class_
    return out
