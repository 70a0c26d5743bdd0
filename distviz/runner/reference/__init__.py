"""The single-process reference runs: the same scenario with every RPC a local call, whose gradients the real run is compared with.

Torch side; a training run's trainers run one at a time in the real run's order.
"""
