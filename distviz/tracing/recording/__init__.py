"""Recording a context in full inside the program: the assembled trace, the observed backward, the verdict in words.

One capture pipeline, which the watch and the snapshot call with their own options.
"""
