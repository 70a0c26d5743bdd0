"""Recording a context in full inside the program: the observed backward, the assembled trace, the verdict in words."""
