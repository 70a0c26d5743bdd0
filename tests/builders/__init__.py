"""Builders the test modules share: traces made by hand, real runs of ``distviz trace``, a
terminal pane. Test modules import these, never each other."""
