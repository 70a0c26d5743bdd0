"""What a scenario program runs against, in a worker and in the reference (torch side):
``base`` (the language's base names, step budget, size cap), ``training_names`` (``nn``,
``optim``, ...), ``namespace`` (a worker's module namespace), ``rpc_proxy`` (the ``rpc``
object, real or local), ``modules`` (which worker made each ``nn.Module``)."""
