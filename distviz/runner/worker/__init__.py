"""One worker process of a run: its entry point, the initiator of a plain run, and the training form.

Torch side; it talks to the parent only through the typed messages of ``runner.protocol``.
"""
