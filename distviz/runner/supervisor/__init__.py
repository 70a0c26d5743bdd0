"""The ``distviz run`` process: starts the workers, drives the phases with time limits and tears everything down.

Torch-free, so it can check the torch release and stop every worker whatever they do.
"""
