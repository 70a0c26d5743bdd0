"""What the parts of ``distviz trace`` share: the journal, the in-flight table and slots between processes, and each traced process's state.

Kept apart so that the hooks, the recording and the watch use one copy of each.
"""
