"""``distviz fuzz``: random, valid, seeded scenarios run on real workers and checked against
PyTorch (``runner``), generated (``generate``) as values (``program``) and shrunk (``shrink``)."""
