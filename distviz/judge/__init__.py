"""The judge: a replay against what PyTorch did, and the policy of a run that is judged.

Pure. One verdict, check by check, is what every command, the ``distviz trace`` summary, the
pytest plugin and the fuzz read, so they never disagree. Imports go one way: the judge reads
the engine and the analyses; neither reads the judge.
"""
