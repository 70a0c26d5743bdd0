"""Renderers: the replay and the trace as text, DOT pictures, the HTML step viewer, Perfetto traces and notebook output.

Pure: each renderer returns a value (a string, a table, bytes) and never prints, so the CLI,
the notebook display and the tests use the same output.
"""
