"""What the parts of ``distviz trace`` share: the journal, the in-flight table and slots between processes, each traced process's state, its writer thread, and distviz's calls to the workers of its host over their listener's socket.

Kept apart so that the hooks, the recording and the watch use one copy of each.
"""
