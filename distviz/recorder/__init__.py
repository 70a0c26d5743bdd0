"""The recorder (torch side): the live distributed autograd graph of a context as trace pieces,
and the hooks that observe the real backward on every node.

In the order data flows: ``names`` (the per-worker name registry), ``walk`` (the walks over
``next_functions`` and module trees), ``contexts`` (a recorded context's life cycle on one
worker), ``piece`` (one worker's nodes and ids), ``side_thread`` (the side threads distviz's
own RPC rounds go from), ``gather`` (every worker's piece, from the initiator), ``merge``
(pieces -> ``Trace``), ``api`` (``distviz.record``), ``hooks`` (the real backward, observed).
"""
