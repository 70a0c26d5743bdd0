"""Analyses of a replay: where the real backward's time went, what-if timings, why a leaf gets a gradient or not.

Pure and apart from the engine: they read a trace and its replay, never the judge, and the
engine never reads them, so a new question needs no change to the replay.
"""
