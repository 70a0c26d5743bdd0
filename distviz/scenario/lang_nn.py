"""The scenario language's training names: ``nn`` layers and losses, ``nn.init``, optimizers,
RRefs, ``dist_autograd`` and the distributed optimizer, and the rules for scenario classes.

Pure tables (no torch import), shared by the validator (``distviz.scenario``) and the runtime
(``distviz.runner.sandbox.training_names``); ``distviz.scenario.lang`` holds the tensor-level
tables. A name that is not listed here or there is refused before anything runs.
"""

from __future__ import annotations

from typing import Final

#: ``nn.<name>`` (also ``torch.nn.<name>``): layer, container and loss classes a program may
#: create, call and subclass (only ``nn.Module`` is a base class). They are PyTorch's own
#: classes, so a model's autograd graph is exactly PyTorch's (``nn.LSTM`` is one node per
#: layer, ``MkldnnRnnLayerBackward0`` on CPU).
NN_CLASSES: Final[frozenset[str]] = frozenset({
    "Module", "Parameter", "Sequential", "ModuleList", "ModuleDict", "ParameterList",
    "Identity", "Linear", "Bilinear", "Embedding", "EmbeddingBag",
    "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell",
    "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
    "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool1d",
    "AdaptiveAvgPool2d", "AdaptiveMaxPool2d",
    "BatchNorm1d", "BatchNorm2d", "LayerNorm", "GroupNorm",
    "Dropout", "Dropout1d", "Dropout2d", "Flatten", "Unflatten",
    "ReLU", "ReLU6", "LeakyReLU", "ELU", "GELU", "SiLU", "Mish", "Sigmoid", "Tanh",
    "Softmax", "LogSoftmax", "Softplus", "Hardtanh", "PReLU",
    "MultiheadAttention", "TransformerEncoderLayer",
    "CrossEntropyLoss", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "NLLLoss",
    "BCELoss", "BCEWithLogitsLoss", "KLDivLoss", "CosineEmbeddingLoss",
})

#: ``nn.init.<name>``: in-place initialisers (they draw from the worker's seeded generator).
NN_INIT: Final[frozenset[str]] = frozenset({
    "uniform_", "normal_", "zeros_", "ones_", "constant_", "eye_", "xavier_uniform_",
    "xavier_normal_", "kaiming_uniform_", "kaiming_normal_", "orthogonal_", "trunc_normal_",
})

#: ``optim.<name>`` (also ``torch.optim.<name>``): optimizer classes, for
#: ``DistributedOptimizer(optim.SGD, param_rrefs, lr=0.05)``.
OPTIMIZERS: Final[frozenset[str]] = frozenset({
    "SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "RMSprop", "Rprop", "Adamax", "NAdam",
    "RAdam",
})

#: ``dist_autograd.<name>``: ``context`` only in ``with dist_autograd.context() as context_id:``.
DIST_AUTOGRAD_FUNCS: Final[frozenset[str]] = frozenset({"context", "backward", "get_gradients"})

#: Names the imports of PyTorch's RPC tutorials bring, predefined in every program:
#: ``import torch.nn as nn``, ``import torch.optim as optim``, ``import torch.nn.functional as
#: F``, ``import torch.distributed.autograd as dist_autograd``, ``from torch.distributed.optim
#: import DistributedOptimizer``, ``from torch.distributed.rpc import RRef``, ``from
#: torch.distributed.nn import RemoteModule``.
PREDEFINED: Final[frozenset[str]] = frozenset({
    "nn", "optim", "F", "dist_autograd", "DistributedOptimizer", "RRef", "RemoteModule",
})

#: Namespaces among the predefined names: they can only be used as ``NAME.member``.
NAMESPACES: Final[frozenset[str]] = frozenset({"nn", "optim", "F", "dist_autograd"})

#: ``rpc.<name>`` beyond the three call functions: ``rpc.RRef(x)``.
RPC_EXTRA: Final[frozenset[str]] = frozenset({"RRef"})

#: Legacy typed constructors. With sizes (``torch.LongTensor(5, 6)``) PyTorch returns
#: uninitialised memory; in scenarios they return values drawn from the worker's generator
#: (integers in [0, 2**31), floats in [0, 1)) so that runs reproduce. With data
#: (``torch.LongTensor([1, 2])``) they are PyTorch's.
LEGACY_CONSTRUCTORS: Final[frozenset[str]] = frozenset({
    "LongTensor", "IntTensor", "FloatTensor", "DoubleTensor", "BoolTensor",
})

#: ``torch.<namespace>.<name>`` that answer questions about devices: scenarios run on CPU, so
#: ``is_available()`` is ``False`` and ``current_accelerator()`` is ``None``.
DEVICE_QUERIES: Final[dict[str, frozenset[str]]] = {
    "accelerator": frozenset({"is_available", "current_accelerator", "device_count"}),
    "cuda": frozenset({"is_available", "device_count"}),
}

#: Methods of modules, optimizers and RRefs a program may call on any value (the validator
#: cannot know types). None of them reaches Python internals.
MODULE_METHODS: Final[frozenset[str]] = frozenset({
    "forward", "parameters", "named_parameters", "buffers", "named_buffers", "children",
    "named_children", "modules", "named_modules", "train", "eval", "zero_grad", "state_dict",
    "cpu", "step", "remote_parameters", "get_module_rref", "forward_async",
})

#: Methods on RRefs (``rpc.remote`` results, ``RRef(x)``, RRefs received over RPC).
RREF_METHODS: Final[frozenset[str]] = frozenset({
    "to_here", "local_value", "is_owner", "owner", "owner_name", "confirmed_by_owner",
    "rpc_sync", "rpc_async", "remote",
})

#: Attributes of modules a program may read on any value.
MODULE_ATTRIBUTES: Final[frozenset[str]] = frozenset({
    "weight", "bias", "training", "in_features", "out_features", "num_embeddings",
    "embedding_dim", "hidden_size", "input_size", "num_layers", "name",
})

#: Tensor methods added for training programs.
TRAINING_TENSOR_METHODS: Final[frozenset[str]] = frozenset({
    "detach_", "cpu", "to", "cuda", "uniform_", "normal_", "long", "argmax", "squeeze_", "unsqueeze_",
    "masked_fill_", "clamp_", "t_", "item",
})

#: Tensor attributes added for training programs (read-only): ``x.grad`` shows that distributed
#: autograd leaves it ``None``; ``x.data`` is the usual detached alias.
TRAINING_TENSOR_ATTRIBUTES: Final[frozenset[str]] = frozenset({"grad", "data"})

#: String methods: ``"Training epoch {}".format(epoch)`` on a string literal whose fields are
#: plain (``{}``, ``{0}``, ``{name}``, with a plain format spec); checked by the validator.
STRING_METHODS: Final[frozenset[str]] = frozenset({"format"})

#: The only dunder a program may write: ``def __init__`` in a class, and
#: ``super().__init__(...)`` / ``super(Name, self).__init__(...)`` as a statement in it.
ALLOWED_DUNDERS: Final[frozenset[str]] = frozenset({"__init__"})

#: Attribute names of Python's own objects (frames, code, functions, generators, coroutines,
#: tracebacks, classes, modules) that lead to interpreter internals. They are refused as
#: attributes, as method names and as ``self.`` attribute names, whatever object they are
#: written on, so no scenario-defined name can ever alias them.
PYTHON_INTERNALS: Final[frozenset[str]] = frozenset({
    "gi_frame", "gi_code", "gi_yieldfrom", "gi_running", "gi_suspended",
    "cr_frame", "cr_code", "cr_await", "cr_origin", "cr_running", "ag_frame", "ag_code",
    "ag_await", "ag_running", "f_back", "f_builtins", "f_code", "f_globals", "f_locals",
    "f_lineno", "f_trace", "f_lasti", "tb_frame", "tb_next", "tb_lineno", "tb_lasti",
    "co_code", "co_consts", "co_names", "co_varnames", "co_filename", "co_name",
    "func_globals", "func_code", "func_closure", "im_func", "im_self", "im_class",
    "cell_contents", "mro", "register", "with_traceback", "throw", "send", "close",
    "f_trace_lines", "f_trace_opcodes",
})

#: ``super`` forms a class body may use, for messages.
SUPER_USAGE: Final[str] = "super().__init__(...) or super(Name, self).__init__(...)"
