"""``distviz snapshot``: what a running traced job is doing now, answered from a thread inside each process.

It costs nothing until asked, and answers while the program is blocked inside PyTorch.
"""
