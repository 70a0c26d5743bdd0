"""The process of ``distviz trace`` itself: the launch, the command, the end-of-run summary and ``index.json``.

Torch-free, so it can stop the program's whole process tree on a hang, Ctrl-C or SIGTERM.
"""
