"""The recorder: the live distributed autograd graph of a context as a trace, and hooks that observe the real backward.

Torch side: it walks every worker's graph over RPC and merges the pieces into one ``Trace``,
the only thing that crosses to the pure side.
"""
