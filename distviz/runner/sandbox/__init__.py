"""What a scenario program runs against, in a worker and in the reference: the language's names, the ``rpc`` object, the limits.

Torch side; one sandbox for both, so the real run and the reference run the same program.
"""
