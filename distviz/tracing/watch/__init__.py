"""The watch: every backward not recorded in full, with a deadline, recorded and explained late when it passes.

A backward that returns in time costs a table entry: no RPC, no file, no thread.
"""
