"""The single-process reference runs (torch side): ``plain`` (a plain scenario, every RPC a
local call) and ``training`` (a training run, its trainers one at a time in the real run's
order)."""
