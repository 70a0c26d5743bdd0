"""`distviz snapshot`: the listener and the taking inside the program, the client in the parent."""
