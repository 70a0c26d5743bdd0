"""``distviz trace``: record, check and explain the user's own, unchanged RPC program.

The parent process (``launcher``) runs the command with hooks loaded into every Python process
of the program; the hooks record contexts in full, watch every other backward, and answer
``distviz snapshot``.
"""
