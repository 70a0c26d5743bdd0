"""``distviz fuzz``: random, valid, seeded programs run on real workers, checked against PyTorch and shrunk.

The replay is judged on programs nobody chose; each disagreement is kept as the smallest
scenario that still shows it, with the command that reproduces it.
"""
