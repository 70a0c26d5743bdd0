"""The scenario language: which names, torch functions and methods a scenario program may use.

Pure tables (no torch import), shared by the validator (``distviz.scenario``) and the runtime
(``distviz.runner.sandbox.base``). The syntax-tree whitelist in ``distviz.scenario`` is the
primary guard; the runtime only ever exposes what these tables name.
"""

from __future__ import annotations

from typing import Final

#: Builtins a program may call or use. ``range`` is replaced at run time by a checked ``range``
#: that refuses more elements than the step budget.
BUILTINS: Final[frozenset[str]] = frozenset({
    "range", "len", "min", "max", "abs", "sum", "float", "int", "bool", "str", "list",
    "tuple", "dict", "enumerate", "zip", "print", "round", "sorted", "reversed", "any", "all",
})

#: Helpers that distviz puts into every program's namespace.
HELPERS: Final[frozenset[str]] = frozenset({"fail_backward", "crash_backward",
                                            "custom_function"})

#: Number of positional arguments each helper takes.
HELPER_ARITY: Final[dict[str, int]] = {"fail_backward": 2, "crash_backward": 1,
                                       "custom_function": 2}

#: The custom autograd Functions ``custom_function("SHAPE", x)`` applies to ``x`` (its
#: ``torch.autograd.Function``'s node is ``<Class>Backward``); each returns one tensor. The
#: shapes are what users write: a backward that is Python code the replay cannot see into.
CUSTOM_FUNCTIONS: Final[dict[str, str]] = {
    "scale": "x * 3 through Scale.apply(x, 3.0): the float is an argument of its own, whose "
             "gradient the backward returns as None",
    "split": "the first of Split's two outputs (x * 2, x * 5); the second, unused, gets zeros",
    "nondiff": "the first of NonDiff's outputs x * 4; the second (x's ranks) is marked "
               "non-differentiable; the backward is once_differentiable",
    "square": "x * x through Square, whose backward (2 * x * g, x saved) is differentiable",
    "zeros": "x through Zeros, whose backward returns zeros: x's gradient really is zero",
    "none": "x through Dropped, which does not materialize gradients and returns None: "
            "behind it a leaf on the same worker gets no gradient, one across an RPC zeros",
}

#: The ``rpc`` functions a program may call: ``rpc.rpc_sync(to, func, args=(...), kwargs={...})``.
RPC_FUNCS: Final[frozenset[str]] = frozenset({"rpc_sync", "rpc_async", "remote"})

#: Keyword arguments the ``rpc`` functions accept.
RPC_KEYWORDS: Final[frozenset[str]] = frozenset({"to", "func", "args", "kwargs", "timeout"})

#: Tensor creation functions that take a size: the runtime checks the number of elements
#: against ``--max-numel`` before allocating.
CREATION_FUNCS: Final[frozenset[str]] = frozenset({
    "rand", "randn", "randint", "randperm", "normal", "zeros", "ones", "full", "eye",
    "arange", "linspace", "rand_like", "randn_like", "randint_like", "zeros_like",
    "ones_like", "full_like",
})

#: Tensor creation functions that take data: wrapped like the creation functions so that a leaf
#: one makes inside an RPC function gets a stable name (``worker2.sparse_coo_tensor#0``).
DATA_FUNCS: Final[frozenset[str]] = frozenset({"tensor", "as_tensor", "sparse_coo_tensor"})

#: Functions that draw random numbers: the runtime passes each worker's own ``generator=`` so
#: every worker's stream is reproducible from the scenario seed independently of the others.
RANDOM_FUNCS: Final[frozenset[str]] = frozenset({
    "rand", "randn", "randint", "randperm", "normal", "rand_like", "randn_like", "randint_like",
})

#: ``torch.<name>`` functions (callables). Everything not listed is unavailable.
TORCH_FUNCS: Final[frozenset[str]] = CREATION_FUNCS | frozenset({
    "tensor", "as_tensor", "sparse_coo_tensor",
    # elementwise
    "add", "sub", "mul", "div", "true_divide", "neg", "abs", "exp", "log", "log1p", "expm1",
    "sin", "cos", "tan", "tanh", "sigmoid", "relu", "pow", "sqrt", "rsqrt", "square",
    "floor", "ceil", "round", "sign", "clamp", "clip", "minimum", "maximum", "where",
    "reciprocal", "erf", "atan", "asin", "acos", "sinh", "cosh", "lerp", "addcmul", "addcdiv",
    "eq", "ne", "lt", "le", "gt", "ge", "isnan", "isfinite", "logical_and", "logical_or",
    "logical_not",
    # reductions
    "sum", "mean", "max", "min", "prod", "amax", "amin", "argmax", "argmin", "std", "var",
    "norm", "logsumexp", "cumsum", "cumprod", "softmax", "log_softmax", "allclose",
    "equal",
    # linear algebra
    "matmul", "mm", "bmm", "dot", "mv", "outer", "addmm", "einsum", "inner", "trace",
    "diag", "tril", "triu",
    # shapes
    "cat", "concat", "stack", "split", "chunk", "narrow", "reshape", "transpose", "t",
    "flatten", "squeeze", "unsqueeze", "permute", "movedim", "flip", "roll", "gather",
    "index_select", "masked_fill", "broadcast_to", "clone", "numel", "is_tensor",
})

#: ``torch.<name>`` values that are not called: dtypes.
TORCH_DTYPES: Final[frozenset[str]] = frozenset({
    "float32", "float64", "float16", "bfloat16", "float", "double", "half",
    "int32", "int64", "int16", "int8", "uint8", "long", "int", "bool",
})

#: ``torch.<name>`` context managers usable in ``with``.
TORCH_CONTEXTS: Final[frozenset[str]] = frozenset({"no_grad"})

#: ``torch.nn.functional.<name>``.
TORCH_NN_FUNCTIONAL: Final[frozenset[str]] = frozenset({
    "relu", "gelu", "silu", "elu", "leaky_relu", "softplus", "tanh", "sigmoid", "softmax",
    "log_softmax", "linear", "bilinear", "mse_loss", "l1_loss", "smooth_l1_loss",
    "cross_entropy", "nll_loss", "binary_cross_entropy", "binary_cross_entropy_with_logits",
    "layer_norm", "normalize", "cosine_similarity", "pad", "one_hot", "embedding",
})

#: ``torch.linalg.<name>``.
TORCH_LINALG: Final[frozenset[str]] = frozenset({"multi_dot", "norm", "vector_norm", "matrix_norm"})

#: ``torch.sparse.<name>``: what PyTorch's sparse-gradient tests call on sparse tensors.
TORCH_SPARSE: Final[frozenset[str]] = frozenset({"sum", "mm", "addmm", "softmax", "log_softmax"})

#: ``torch.<name>`` sub-namespaces and what they contain (``torch.nn`` only has ``functional``).
TORCH_SUBMODULES: Final[dict[str, frozenset[str]]] = {
    "linalg": TORCH_LINALG,
    "sparse": TORCH_SPARSE,
    "nn": frozenset({"functional"}),
}

#: Everything a program may write after ``torch.``.
TORCH_NAMES: Final[frozenset[str]] = (
    TORCH_FUNCS | TORCH_DTYPES | TORCH_CONTEXTS | frozenset(TORCH_SUBMODULES)
)

#: ``torch.<name>`` that are refused with a reason (anything else unknown gets a suggestion).
FORBIDDEN_TORCH: Final[dict[str, str]] = {
    "load": "scenarios cannot read files",
    "save": "scenarios cannot write files",
    "from_file": "scenarios cannot read files",
    "hub": "scenarios cannot download or load code",
    "jit": "scenarios cannot compile or load code",
    "compile": "scenarios cannot compile code",
    "ops": "raw operator access is not part of the scenario language",
    "utils": "torch.utils is not part of the scenario language",
    "distributed": "use rpc.rpc_sync / rpc.rpc_async / rpc.remote; main already runs inside "
                   "dist_autograd.context()",
    "autograd": "use the backward: key to run backward passes",
    "backends": "backend settings are not part of the scenario language",
    "cuda": "scenarios run on CPU",
    "multiprocessing": "scenarios cannot start processes",
    "manual_seed": "use the seed: key; every worker's random stream is seeded from it",
    "seed": "use the seed: key; every worker's random stream is seeded from it",
    "set_default_dtype": "global torch settings are not part of the scenario language",
    "set_num_threads": "global torch settings are not part of the scenario language",
    "empty": "uninitialised memory makes runs irreproducible; use torch.zeros",
    "empty_like": "uninitialised memory makes runs irreproducible; use torch.zeros_like",
    "Generator": "use the seed: key; every worker's random stream is seeded from it",
    "Tensor": "create tensors with torch.tensor, torch.rand, torch.zeros, ...",
}

#: Methods a program may call on tensors (``x.sum()``).
TENSOR_METHODS: Final[frozenset[str]] = frozenset({
    "sum", "mean", "max", "min", "prod", "amax", "amin", "argmax", "argmin", "std", "var",
    "norm", "cumsum", "softmax", "log_softmax", "logsumexp",
    "exp", "log", "log1p", "sin", "cos", "tan", "tanh", "sigmoid", "relu", "abs", "neg",
    "pow", "sqrt", "rsqrt", "square", "floor", "ceil", "round", "sign", "clamp", "clip",
    "reciprocal", "erf",
    "add", "sub", "mul", "div", "matmul", "mm", "bmm", "mv", "dot", "outer",
    "add_", "sub_", "mul_", "div_", "zero_", "fill_", "clamp_", "copy_",
    "t", "view", "view_as", "reshape", "reshape_as", "transpose", "permute", "narrow",
    "split", "chunk", "unsqueeze", "squeeze", "expand", "expand_as", "repeat", "flatten",
    "flip", "roll", "gather", "index_select", "masked_fill", "contiguous",
    "detach", "requires_grad_", "clone", "float", "double", "long", "int", "bool", "half",
    "size", "dim", "numel", "item", "tolist", "eq", "ne", "lt", "le", "gt", "ge",
    "allclose", "equal", "all", "any", "type_as", "coalesce", "to_dense", "to_sparse",
})

#: Attributes a program may read (not call) on tensors.
TENSOR_ATTRIBUTES: Final[frozenset[str]] = frozenset({
    "shape", "T", "mT", "dtype", "ndim", "requires_grad", "is_leaf", "is_sparse",
})

#: Methods a program may call on lists.
LIST_METHODS: Final[frozenset[str]] = frozenset({"append", "extend", "pop", "index", "count"})

#: Methods a program may call on dicts.
DICT_METHODS: Final[frozenset[str]] = frozenset({"keys", "values", "items", "get"})

#: Methods on what ``rpc.rpc_async`` returns.
FUTURE_METHODS: Final[frozenset[str]] = frozenset({"wait"})

#: Methods on what ``rpc.remote`` returns.
RREF_METHODS: Final[frozenset[str]] = frozenset({"to_here", "local_value", "is_owner"})

#: Every method name a program may call on a value (the validator cannot know the value's
#: type, so it allows the union and rejects everything else by name).
ALL_METHODS: Final[frozenset[str]] = (
    TENSOR_METHODS | LIST_METHODS | DICT_METHODS | FUTURE_METHODS | RREF_METHODS
)

#: Methods refused with a reason.
FORBIDDEN_METHODS: Final[dict[str, str]] = {
    "backward": "use the backward: key (backward: [loss]); distviz runs the backward pass "
                "itself so it can record the graph first",
    "register_hook": "hooks are not part of the scenario language",
    "retain_grad": "gradients are reported by distviz itself",
    "numpy": "numpy is not available in scenarios",
    "untyped_storage": "storages are not part of the scenario language",
    "storage": "storages are not part of the scenario language",
    "data_ptr": "pointers are not part of the scenario language",
    "format": "use an f-string",
    "join": "use an f-string",
}

_FILES = "scenarios cannot reach files, processes or the network"
_CODE = "scenarios cannot run or inspect code"

#: Names refused with a reason (all other unknown names get a "did you mean" suggestion).
FORBIDDEN_NAMES: Final[dict[str, str]] = {
    "eval": _CODE, "exec": _CODE, "compile": _CODE, "__import__": _CODE,
    "open": _FILES, "input": "scenarios do not read input",
    "getattr": "use plain attribute access (x.shape)",
    "setattr": "assign to variables instead",
    "delattr": _CODE, "hasattr": _CODE,
    "globals": _CODE, "locals": _CODE, "vars": _CODE, "dir": _CODE,
    "breakpoint": "scenarios cannot be debugged interactively",
    "exit": "a scenario ends when main ends", "quit": "a scenario ends when main ends",
    "memoryview": _CODE, "type": _CODE, "object": _CODE, "super": _CODE,
    "isinstance": _CODE, "issubclass": _CODE, "id": "object ids are not stable between runs",
    "hash": "hashes are not stable between runs", "help": _CODE, "callable": _CODE,
    "classmethod": _CODE, "staticmethod": _CODE, "property": _CODE,
    "bytearray": _CODE, "bytes": _CODE, "iter": _CODE, "next": _CODE,
    "os": _FILES, "sys": _FILES, "subprocess": _FILES, "socket": _FILES,
    "shutil": _FILES, "pathlib": _FILES, "io": _FILES, "pickle": _FILES, "builtins": _CODE,
    "importlib": _CODE, "ctypes": _CODE, "signal": _FILES, "threading": _FILES,
    "multiprocessing": _FILES, "urllib": _FILES, "requests": _FILES, "http": _FILES,
    "time": "scenarios must be reproducible; time is not available",
    "random": "use torch.rand / torch.randn; every worker is seeded from the seed: key",
    "numpy": "numpy is not available in scenarios; use torch",
    "np": "numpy is not available in scenarios; use torch",
    "dist_autograd": "main already runs inside dist_autograd.context(); use the backward: key",
}

#: Names a program may not assign to (they are provided by distviz).
RESERVED_NAMES: Final[frozenset[str]] = (
    BUILTINS | HELPERS | frozenset({"torch", "rpc", "True", "False", "None"})
)
