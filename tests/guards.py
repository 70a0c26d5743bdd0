"""How long a test waits before it calls a child process, a terminal screen or a page hung.

These are guards against a hang, never speed checks (speed is measured by ``bench/``): a test
that passes never waits for them, so they are generous enough that a busy machine (the suite
beside another copy of itself on 2 cores) does not trip them.
"""

#: A child process (``distviz run``, ``distviz trace``, a benchmark script, a build).
HANG_GUARD_S = 900

#: Something a test polls for: text on a terminal screen (tmux), a condition in a page
#: (Chromium), processes gone after a teardown.
WAIT_GUARD_S = 120.0
